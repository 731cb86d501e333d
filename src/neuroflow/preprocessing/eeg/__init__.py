"""EEG cleaning and epoching: one BIDS EEG recording to epochs and continuous stores."""

import lazy_loader

# Names load their submodule on first use: planning a run imports the light modules
# (``config``, ``window``) without MNE's readers, which the stage's own modules import.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "config": ["DEFAULT_CONFIG", "resolve_config"],
        "epoched": ["preprocess_eeg_epochs", "preprocess_epochs"],
        "sidecars": ["recording_from_path"],
        "stage": [
            "FORMAT_VERSION",
            "STAGE",
            "notch_frequencies",
            "preprocess_eeg_recording",
            "preprocess_recording",
        ],
    },
)

"""EEG cleaning and epoching: one BIDS EEG recording to epochs and continuous stores."""

from .config import DEFAULT_CONFIG, resolve_config
from .epoched import preprocess_eeg_epochs, preprocess_epochs
from .sidecars import recording_from_path
from .stage import (
    FORMAT_VERSION,
    STAGE,
    notch_frequencies,
    preprocess_eeg_recording,
    preprocess_recording,
)

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "STAGE",
    "notch_frequencies",
    "preprocess_eeg_epochs",
    "preprocess_eeg_recording",
    "preprocess_epochs",
    "preprocess_recording",
    "recording_from_path",
    "resolve_config",
]

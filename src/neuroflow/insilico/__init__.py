"""In-silico experiments: stored encoding models applied to pools of new stimuli.

Stimuli that were never shown are feature-extracted with the encoder's extractor
entries and passed through the fitted model (:mod:`neuroflow.insilico.response`); the
stimuli that drive each region most and least are ranked
(:mod:`neuroflow.insilico.ranking`), drawn (:mod:`neuroflow.insilico.contact_sheet`)
and stored (:func:`neuroflow.insilico.stage.predict_stimulus_set`). EEG encoding models
give evoked responses, ranked on channel groups and the global field power within a
latency window (:mod:`neuroflow.insilico.eeg`).
"""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "contact_sheet": ["contact_sheet"],
        "ranking": [
            "Ranking",
            "rank_stimuli",
            "ranking_table",
            "suppressive_to_excitatory_ratio",
            "tail_statistics",
        ],
        "response": ["PoolPrediction", "predict_pool", "roi_means", "stimulus_response"],
        "stage": ["predict_stimulus_set"],
    },
)

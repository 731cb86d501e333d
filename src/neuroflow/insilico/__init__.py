"""In-silico experiments: stored encoding models applied to pools of new stimuli.

Stimuli that were never shown are feature-extracted with the encoder's extractor
entries and passed through the fitted model (:mod:`neuroflow.insilico.response`); the
stimuli that drive each region most and least are ranked
(:mod:`neuroflow.insilico.ranking`), drawn (:mod:`neuroflow.insilico.contact_sheet`)
and stored (:func:`neuroflow.insilico.stage.predict_stimulus_set`). EEG encoding models
give evoked responses, ranked on channel groups and the global field power within a
latency window (:mod:`neuroflow.insilico.eeg`).
"""

from neuroflow.insilico.contact_sheet import contact_sheet
from neuroflow.insilico.ranking import (
    Ranking,
    rank_stimuli,
    ranking_table,
    suppressive_to_excitatory_ratio,
    tail_statistics,
)
from neuroflow.insilico.response import PoolPrediction, predict_pool, roi_means, stimulus_response
from neuroflow.insilico.stage import predict_stimulus_set

__all__ = [
    "PoolPrediction",
    "Ranking",
    "contact_sheet",
    "predict_pool",
    "predict_stimulus_set",
    "rank_stimuli",
    "ranking_table",
    "roi_means",
    "stimulus_response",
    "suppressive_to_excitatory_ratio",
    "tail_statistics",
]

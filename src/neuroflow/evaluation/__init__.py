"""Evaluation stage: per-target scores, noise ceilings, permutation tests, ROI summaries.

Metrics take arrays shaped ``(..., n_times, n_targets)`` so that the same code
scores fMRI voxels and EEG channels × time points. The stage entry points are
:func:`evaluate_model` (one prediction store → one score store) and
:func:`summarize_scores` (score stores → tidy TSV, group store and figures).
"""

from neuroflow.evaluation.metrics import pearson_r, r2_score, zscore_time
from neuroflow.evaluation.noise_ceiling import (
    ceiling_r_from_reliability,
    ncsnr,
    ncsnr_to_nc,
    noise_ceiling_r,
    normalize_score,
    spearman_brown,
    split_half_reliability,
)
from neuroflow.evaluation.permutation import (
    fdr_correction,
    permutation_null,
    permutation_pvalues,
    permutation_test,
)
from neuroflow.evaluation.stage import DEFAULT_CONFIG, evaluate_model, summarize_scores
from neuroflow.evaluation.summary import group_summary, roi_summary, topk_mean

__all__ = [
    "DEFAULT_CONFIG",
    "ceiling_r_from_reliability",
    "evaluate_model",
    "fdr_correction",
    "group_summary",
    "ncsnr",
    "ncsnr_to_nc",
    "noise_ceiling_r",
    "normalize_score",
    "pearson_r",
    "permutation_null",
    "permutation_pvalues",
    "permutation_test",
    "r2_score",
    "roi_summary",
    "spearman_brown",
    "split_half_reliability",
    "summarize_scores",
    "topk_mean",
    "zscore_time",
]

"""Evaluation stage: per-target scores, noise ceilings, permutation tests, ROI summaries.

Metrics take arrays shaped ``(..., n_times, n_targets)`` so that the same code
scores fMRI voxels and EEG channels × time points. The stage entry points are
:func:`evaluate_model` (one prediction store → one score store) and
:func:`summarize_scores` (score stores → tidy TSV, group store and figures).
"""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "metrics": ["pearson_r", "r2_score", "zscore_time"],
        "noise_ceiling": [
            "ceiling_r_from_reliability",
            "ncsnr",
            "ncsnr_to_nc",
            "noise_ceiling_r",
            "normalize_score",
            "spearman_brown",
            "split_half_reliability",
        ],
        "permutation": [
            "fdr_correction",
            "permutation_null",
            "permutation_pvalues",
            "permutation_test",
        ],
        "stage": ["DEFAULT_CONFIG", "evaluate_model"],
        "summary": ["group_summary", "roi_summary", "topk_mean"],
        "summary_stage": ["summarize_scores"],
    },
)

"""Decoding: stimulus features and labels from brain responses.

- :mod:`~neuroflow.decoding.identification`: vectorised identification metrics and
  their label-shuffle null;
- :mod:`~neuroflow.decoding.features`: ridge decoding of stimulus features;
- :mod:`~neuroflow.decoding.classification`: grouped cross-validated classification;
- :mod:`~neuroflow.decoding.temporal`: time-resolved decoding, temporal
  generalisation and cluster permutation tests;
- :mod:`~neuroflow.decoding.contrastive`: a CLIP-style contrastive decoder;
- :mod:`~neuroflow.decoding.concepts`: multi-label concept decoding (one-vs-rest,
  per-concept AUC and average precision, label-shuffled null);
- :mod:`~neuroflow.decoding.cross_subject`: leave-one-subject-out decoding with
  Euclidean alignment, time-resolved and whole-epoch (shrinkage LDA, tangent space);
  :mod:`~neuroflow.decoding.cross_subject_stage` runs it as the
  ``decode_eeg_cross_subject`` stage;
- :func:`decode_eeg`: the stage entry point; :mod:`~neuroflow.evaluation.analysis_summary` and
  :mod:`~neuroflow.evaluation.analysis_plotting` for tables and figures.
"""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "classification": ["ClassificationResult", "classify", "make_classifier"],
        "contrastive": ["ContrastiveDecoder", "fit_contrastive", "info_nce"],
        "features": [
            "FeatureDecoder",
            "bin_window",
            "fit_feature_decoder",
            "flatten_window",
            "zscore_features",
        ],
        "identification": [
            "correlation_matrix",
            "identification_metrics",
            "identification_null",
            "identification_ranks",
        ],
        "stage": ["DEFAULT_CONFIG", "decode_eeg"],
        "temporal": [
            "ClusterResult",
            "cluster_permutation_test",
            "group_cluster_test",
            "sliding_ridge_scores",
            "time_resolved_null",
            "time_resolved_scores",
        ],
    },
)

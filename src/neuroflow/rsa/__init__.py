"""Representational similarity analysis.

- :mod:`~neuroflow.rsa.rdm`: vectorised correlation-distance RDMs and crossnobis RDMs
  (rsatoolbox);
- :mod:`~neuroflow.rsa.compare`: RDM comparison (vectorised Spearman/Pearson,
  rsatoolbox's Kendall tau-a and whitened cosine) and noise ceilings;
- :mod:`~neuroflow.rsa.analysis`: cross-temporal RSA (EEG time, and model time × brain
  time for frame-level features) and ROI × ROI alignment patterns;
- :mod:`~neuroflow.rsa.inference`: bootstrap over stimuli and/or subjects, percentile
  intervals and pairwise model comparisons (rsatoolbox's conventions);
- :mod:`~neuroflow.rsa.equivalence`: the subject-as-model baseline per ROI and a TOST
  equivalence test of models against it;
- :mod:`~neuroflow.rsa.eeg`: EEG channel groups and the bootstrap of the EEG time
  courses; :mod:`~neuroflow.rsa.model_time`: model time × brain time RSA of frame-level
  features;
- :func:`rsa_eeg`, :func:`rsa_fmri`: the stage entry points.

Figures: :mod:`neuroflow.evaluation.analysis_plotting` (``plot_rdm``, ``plot_cross_temporal``,
``plot_alignment``); tables: :func:`neuroflow.evaluation.rsa_summary.rsa_rows`.
"""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "analysis": [
            "AlignmentResult",
            "ModelTimeResult",
            "alignment_patterns",
            "cross_temporal_rsa",
            "model_time_peaks",
            "model_time_rsa",
            "roi_alignment",
        ],
        "compare": ["COMPARISONS", "compare_rdms", "noise_ceiling"],
        "inference": ["BootstrapResult", "bootstrap_evaluations", "bootstrap_rsa"],
        "rdm": ["correlation_rdm", "crossnobis_rdm", "square_rdm"],
        "options": ["DEFAULT_CONFIG", "resolve_config"],
        "stage": ["rsa_eeg", "rsa_fmri"],
    },
)

"""Long names and units of the variables in the decoding, RSA and summary stores.

Every variable of these stores gets a ``long_name`` (what it is) and ``units`` (the
physical unit, or the measure when it has none: ``"balanced accuracy"``, ``"Pearson r"``,
``"p-value"``), the CF attributes xarray and its plotting read; every dimension gets a
coordinate. :func:`describe_variables` fills them from :data:`DESCRIPTIONS` (attributes
a stage set itself are kept), and :func:`undescribed` lists what is still missing, so a
test can hold every store to it.
"""

from __future__ import annotations

import re

import numpy as np
import xarray as xr

__all__ = ["DESCRIPTIONS", "describe_variables", "undescribed", "variable_description"]

_RANK = "fraction correct (top-k) or rank (mean_rank), see `metric`"
_SIMILARITY = "similarity (the `comparison` measure)"

#: Variable name (regular expression, whole name) -> (long name, units), first match
#: wins. ``group_`` prefixes and ``_sd`` / ``_sem`` suffixes are handled by
#: :func:`describe_variables`.
DESCRIPTIONS: tuple[tuple[str, str, str], ...] = (
    # EEG decoding: classification over time
    ("class_score", "time-resolved classification score on held-out epochs", "balanced accuracy"),
    ("class_null", "classification score under label permutations", "balanced accuracy"),
    ("class_chance", "chance level of the classification", "balanced accuracy"),
    (
        "generalization",
        "score of a classifier trained at train_time, tested at time",
        "balanced accuracy",
    ),
    # EEG decoding: feature components over time
    (
        "feature_score",
        "Pearson r between decoded and true feature components on held-out epochs",
        "Pearson r",
    ),
    ("feature_null_mean", "mean decoding r under permutations", "Pearson r"),
    ("feature_n_components", "feature principal components decoded", "count"),
    ("feature_peak_latency", "latency of the peak decoding r", "s"),
    ("feature_onset_latency", "latency of the first significant decoding cluster", "s"),
    # EEG decoding across subjects (or sessions)
    (
        "cross_subject_score",
        "time-resolved classification score on a held-out subject (or session), trained "
        "on the others",
        "balanced accuracy",
    ),
    (
        "cross_subject_score_mean",
        "time-resolved held-out classification score, mean over held-out units",
        "balanced accuracy",
    ),
    (
        "cross_subject_epoch_score",
        "whole-epoch classification score on a held-out subject (or session), trained "
        "on the others",
        "balanced accuracy",
    ),
    (
        "cross_subject_epoch_score_mean",
        "whole-epoch held-out classification score, mean over held-out units",
        "balanced accuracy",
    ),
    ("cross_subject_chance", "chance level of the held-out classification", "balanced accuracy"),
    ("cross_subject_n_epochs", "epochs of the held-out unit decoded", "count"),
    # cluster tests
    (
        r".*_cluster_p_raw",
        "cluster-level permutation p-value, before the inconclusive check",
        "p-value",
    ),
    (r".*_cluster_p", "cluster-level permutation p-value (NaN where inconclusive)", "p-value"),
    (r".*_inconclusive", "whether the test had too few permutations for its threshold", "boolean"),
    # identification of held-out stimuli
    ("identification", "identification of held-out stimuli among each other", _RANK),
    ("identification_p", "permutation p-value of the identification score", "p-value"),
    ("identification_chance", "chance level of the identification score", _RANK),
    ("identification_null", "identification score under stimulus permutations", _RANK),
    ("n_test_stimuli", "held-out stimuli identified", "count"),
    (
        "identification_session",
        "identification of a held-out session's test stimuli, decoded by decoders of the "
        "subject's other sessions",
        _RANK,
    ),
    ("identification_session_p", "permutation p-value of the session's score", "p-value"),
    ("n_test_stimuli_session", "held-out stimuli identified in the session", "count"),
    # fMRI concept decoding
    ("concept_auc", "held-out ROC AUC of each concept's one-vs-rest decoder", "ROC AUC"),
    (
        "concept_average_precision",
        "held-out average precision of each concept's one-vs-rest decoder",
        "average precision",
    ),
    (r"concept_(auc|average_precision)_p", "label-shuffle p-value of the score", "p-value"),
    ("concept_prevalence", "share of decoded stimuli labelled with the concept", "fraction"),
    ("concept_mean_auc", "mean ROC AUC over the decoded concepts", "ROC AUC"),
    ("concept_map", "mean average precision over the decoded concepts", "average precision"),
    (r"concept_(mean_auc|map)_p", "label-shuffle p-value of the mean score", "p-value"),
    ("concept_map_chance", "mean prevalence of the concepts (chance mAP)", "average precision"),
    # RSA
    ("brain_rdm", "EEG dissimilarity of each stimulus pair", "dissimilarity (`rdm_method`)"),
    ("roi_rdm", "ROI dissimilarity of each stimulus pair", "dissimilarity (`rdm_method`)"),
    (
        "model_rdm",
        "model-layer dissimilarity of each stimulus pair",
        "dissimilarity (correlation distance)",
    ),
    ("cross_temporal", "similarity of the EEG and model RDMs at each time", _SIMILARITY),
    (
        "cross_temporal_mean",
        "similarity of the EEG and model RDMs, mean over subjects",
        _SIMILARITY,
    ),
    ("model_similarity", "similarity of the ROI and model-layer RDMs", _SIMILARITY),
    (
        "model_similarity_ci",
        "bootstrap percentile interval of the subject-mean RDM similarity of a layer with "
        "an ROI (fMRI) or at a time (EEG)",
        _SIMILARITY,
    ),
    (
        "model_similarity_se",
        "bootstrap standard error of the subject-mean RDM similarity of a layer with an "
        "ROI (fMRI) or at a time (EEG)",
        _SIMILARITY,
    ),
    (
        "layer_comparison_p",
        "bootstrap p-value of the difference of two layers (EEG: each at its peak time)",
        "p-value",
    ),
    ("peak_time", "time of the peak of the subject-mean EEG RSA time course", "s"),
    ("peak_similarity", "peak of the subject-mean EEG RSA time course", _SIMILARITY),
    (
        "peak_similarity_ci",
        "bootstrap percentile interval of the subject-mean EEG RDM similarity at the peak",
        _SIMILARITY,
    ),
    (
        "peak_similarity_se",
        "bootstrap standard error of the subject-mean EEG RDM similarity at the peak",
        _SIMILARITY,
    ),
    (
        "model_time_similarity",
        "similarity of a frame-level layer's RDM at a model time with the EEG RDM at a time",
        _SIMILARITY,
    ),
    (
        "model_time_peak_similarity",
        "peak of the subject-mean model time x brain time RDM similarity",
        _SIMILARITY,
    ),
    ("model_time_peak_model_time", "model time (within the stimulus) of that peak", "s"),
    ("model_time_peak_brain_time", "brain time (EEG) of that peak", "s"),
    (
        "model_time_best_brain_time",
        "brain time whose EEG RDM best matches the layer's RDM at each model time",
        "s",
    ),
    (
        "model_time_lag",
        "intercept of the line brain time = lag + slope x model time through the best times",
        "s",
    ),
    ("model_time_slope", "slope of the model-to-brain time line", "s/s"),
    (
        "subject_baseline",
        "similarity of a subject's ROI RDM with the pooled RDM of the other subjects",
        _SIMILARITY,
    ),
    (
        "baseline_difference",
        "mean over subjects of the layer's similarity minus the subject baseline",
        _SIMILARITY,
    ),
    (
        "baseline_equivalence_p",
        "TOST p-value of the layer matching the subject baseline within the margin",
        "p-value",
    ),
    (
        "baseline_difference_p",
        "paired t-test p-value of the layer differing from the subject baseline",
        "p-value",
    ),
    ("equivalence_margin", "equivalence margin of the TOST", _SIMILARITY),
    ("noise_ceiling", "noise ceiling of the RDM similarity (lower and upper bound)", _SIMILARITY),
    ("noise_ceiling_subject", "noise ceiling of one subject's RDM similarity", _SIMILARITY),
    ("n_rsa_stimuli", "stimuli in the RDMs", "count"),
    ("roi_alignment", "similarity of the ROIs' RDMs (ROI x ROI pattern)", _SIMILARITY),
    ("model_alignment", "ROI x ROI pattern predicted by the model's layers", _SIMILARITY),
    (
        "alignment_agreement",
        "agreement of the model's and the brain's ROI x ROI patterns (1 - mean |difference|)",
        "agreement (1 = identical patterns)",
    ),
    (
        "alignment_subject_agreement",
        "agreement of the model's ROI x ROI pattern with each subject's (1 - mean |difference|)",
        "agreement (1 = identical patterns)",
    ),
    (
        "alignment_between_subject",
        "mean agreement of one subject's ROI x ROI pattern with the others'",
        "Pearson r",
    ),
    # RSA store: linear-predictivity alignment patterns (rsa.predictivity_patterns)
    (
        "lp_model_score",
        "cross-validated ridge encoding score of the layer's features for the ROI's "
        "stimulus responses",
        "Pearson r",
    ),
    (
        "lp_model_profile",
        "the model's ROI profile: its best layer's subject-mean encoding score",
        "Pearson r",
    ),
    (
        "lp_model_pattern",
        "ROI x ROI pattern of the model's encoding scores (1 - |profile difference|)",
        "similarity (1 - |difference of Pearson r|)",
    ),
    (
        "lp_brain_pattern",
        "cross-ROI linear predictivity (ROI x ROI pattern; roi_a predicted from roi_b, "
        "or the mean of both directions with `lp_symmetric`)",
        "Pearson r",
    ),
    (
        "lp_brain_pattern_mean",
        "mean over subjects of the cross-ROI linear predictivity pattern",
        "Pearson r",
    ),
    (
        "lp_criterion",
        "relational criterion of the ROI: 1 - mean |model - brain| over its row of the "
        "linear-predictivity patterns",
        "agreement (1 = identical patterns)",
    ),
    (
        "lp_criterion_mean",
        "mean over subjects of the ROI's linear-predictivity relational criterion",
        "agreement (1 = identical patterns)",
    ),
    (
        "lp_criterion_ci",
        "percentile bootstrap interval over subjects of the ROI's relational criterion",
        "agreement (1 = identical patterns)",
    ),
    (
        "lp_subject_baseline",
        "encoding score of the ROI's stimulus responses predicted from the other "
        "subjects' (subject as model)",
        "Pearson r",
    ),
    (
        "lp_baseline_difference",
        "mean over subjects of the layer's encoding score minus the subject baseline",
        "Pearson r",
    ),
    (
        "lp_baseline_equivalence_p",
        "TOST p-value of the layer's encoding score matching the subject baseline within "
        "the margin",
        "p-value",
    ),
    (
        "lp_baseline_difference_p",
        "paired t-test p-value of the layer's encoding score differing from the subject baseline",
        "p-value",
    ),
    (
        "lp_equivalence_margin",
        "equivalence margin of the encoding-score TOST",
        "Pearson r",
    ),
    # summary (roi x model)
    ("mean_r", "mean test-set Pearson r over the ROI's targets", "Pearson r"),
    ("median_r", "median test-set Pearson r over the ROI's targets", "Pearson r"),
    ("topk_r", "mean test-set Pearson r of the ROI's best targets (`topk_percent`)", "Pearson r"),
    (
        "mean_r_normalized",
        "mean noise-normalised r over the ROI's targets",
        "fraction of the noise ceiling",
    ),
    ("frac_significant", "share of the ROI's targets significant after FDR", "fraction"),
    (
        "frac_significant_fwer",
        "share of the ROI's targets significant after max-statistic FWER",
        "fraction",
    ),
    ("noise_ceiling_r", "mean noise ceiling over the ROI's targets", "Pearson r"),
    (
        "frac_exceeds_ceiling",
        "share of the ROI's targets whose r exceeds the noise ceiling beyond its uncertainty",
        "fraction",
    ),
    ("n_targets", "targets in the ROI", "count"),
    ("n_subjects", "subjects with a finite score", "count"),
)


def variable_description(name: str) -> tuple[str, str] | None:
    """Long name and units of a variable (or summary column) named ``name``.

    Parameters
    ----------
    name : str
        E.g. ``"class_score"``, ``"group_feature_cluster_p"`` or ``"mean_r_sem"``.

    Returns
    -------
    description : tuple of str | None
        ``(long_name, units)``; None when :data:`DESCRIPTIONS` has no entry for it.
    """
    return _lookup(name)


_SPREAD = {"_sd": "across-subject SD of the ", "_sem": "across-subject SEM of the "}


def _lookup(name: str) -> tuple[str, str] | None:
    """Long name and units of ``name``, or None when no description matches."""
    if name.startswith("group_"):
        found = _lookup(name.removeprefix("group_"))
        return None if found is None else (f"group test: {found[0]}", found[1])
    for pattern, long_name, units in DESCRIPTIONS:
        if re.fullmatch(pattern, name):
            return long_name, units
    for suffix, prefix in _SPREAD.items():
        if name.endswith(suffix):
            found = _lookup(name.removesuffix(suffix))
            return None if found is None else (prefix + found[0], found[1])
    return None


def describe_variables(ds: xr.Dataset) -> xr.Dataset:
    """Fill in ``long_name`` and ``units`` of every data variable, and index missing dims.

    Parameters
    ----------
    ds : xarray.Dataset
        A decoding, RSA or summary dataset; it is not modified.

    Returns
    -------
    ds : xarray.Dataset
        A shallow copy: each data variable has the attributes of its
        :data:`DESCRIPTIONS` entry where it had none of its own, and every dimension
        without a coordinate (e.g. ``permutation``) an integer index ``0 .. n-1``.
    """
    out = ds.copy(deep=False)
    for name, var in out.data_vars.items():
        found = _lookup(str(name))
        if found is None:
            continue
        attrs = dict(var.attrs)
        attrs.setdefault("long_name", found[0])
        attrs.setdefault("units", found[1])
        out[name].attrs = attrs
    bare = [dim for dim in out.dims if not _has_coordinate(out, dim)]
    return out.assign_coords({dim: np.arange(out.sizes[dim]) for dim in bare})


def _has_coordinate(ds: xr.Dataset, dim: str) -> bool:
    """Whether some coordinate of ``ds`` runs along ``dim``."""
    return any(dim in coord.dims for coord in ds.coords.values())


def undescribed(ds: xr.Dataset) -> list[str]:
    """What :func:`describe_variables` would still have to fill in.

    Parameters
    ----------
    ds : xarray.Dataset
        Any dataset.

    Returns
    -------
    problems : list of str
        ``"<variable>: no long_name"`` / ``"<variable>: no units"`` and
        ``"dimension <dim>: no coordinate"``; empty when every variable is described.
    """
    problems = [
        f"{name}: no {attr}"
        for name, var in ds.data_vars.items()
        for attr in ("long_name", "units")
        if attr not in var.attrs
    ]
    return problems + [
        f"dimension {d}: no coordinate" for d in ds.dims if not _has_coordinate(ds, d)
    ]

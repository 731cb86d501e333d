"""The ``decoding`` section's defaults and which decoding analyses a dataset allows.

Read when a workflow is planned (nothing here imports a solver), and by the decoding
jobs, which check their own inputs with the same functions: an analysis the plan keeps
never refuses its data in a job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from neuroflow.config import merge_defaults

from .concepts import concept_matrix

__all__ = [
    "ALIGNMENTS",
    "CLASSIFIERS",
    "CV_SCHEMES",
    "DEFAULT_CONFIG",
    "WHOLE_EPOCH_CLASSIFIERS",
    "applicable_parts",
    "concepts_unavailable",
    "fmri_identification_unavailable",
    "held_out_mask",
    "identification_unavailable",
    "metric_names",
    "resolve_config",
    "resolve_cross_subject_config",
    "shared_classes",
]


#: Classifiers of ``decoding.cross_subject.classifiers``.
CLASSIFIERS = ("time_resolved", "epoch_lda", "tangent_space")
#: The classifiers of whole epochs (one score per held-out unit).
WHOLE_EPOCH_CLASSIFIERS = ("epoch_lda", "tangent_space")
#: Values of ``decoding.cross_subject.cv``.
CV_SCHEMES = ("leave-one-subject-out", "leave-one-session-out")
#: Values of ``decoding.cross_subject.alignment``.
ALIGNMENTS = ("euclidean", "none")

#: The default ``decoding`` section (mirrored by ``workflow/schemas/decoding.schema.yaml``).
DEFAULT_CONFIG: dict[str, Any] = {
    "enabled": True,
    "feature_spaces": [],
    "seed": 0,
    "decim": 2,
    "cv_groups": "auto",
    "n_splits": 5,
    "cluster_alpha": 0.05,
    "classification": {
        "enabled": True,
        "target": "condition",
        "classifier": "lda",
        "generalization": True,
        "n_permutations": 99,
        "generalization_permutations": 99,
    },
    "features": {
        "enabled": True,
        "n_components": 5,
        "standardize": True,
        "alphas": [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0],
        "n_permutations": 100,
    },
    "identification": {
        "enabled": True,
        "window": [0.0, 0.6],
        "bin_width": 0.025,
        "standardize": True,
        "test_condition": "test",
        "alphas": [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0],
        "top_k": [1, 5],
        "n_permutations": 1000,
    },
    "contrastive": {
        "enabled": True,
        "hidden": 0,
        "max_epochs": 300,
        "patience": 20,
        "lr": 0.001,
        "weight_decay": 0.01,
        "val_fraction": 0.2,
        "device": "auto",
    },
    "fmri": {
        "enabled": True,
        "patterns": "auto",
        "hrf_lag": 4.5,
        "cv": "within-subject",
        "concepts": {
            "enabled": True,
            "annotations": "auto",
            "min_count": 5,
            "decoder": "ridge",
            "alphas": [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0],
            "C": 1.0,
            "n_permutations": 1000,
        },
    },
    "cross_subject": {
        "enabled": True,
        "cv": "leave-one-subject-out",
        "alignment": "euclidean",
        "classifiers": ["time_resolved", "epoch_lda"],
        "target": "condition",
        "window": [0.0, 0.6],
        "bin_width": 0.05,
    },
    "n_jobs": 1,
}


def metric_names(top_k: list[int]) -> list[str]:
    """Identification metric names: ``top{k}`` for each k, then ``mean_rank``."""
    return [f"top{int(k)}" for k in top_k] + ["mean_rank"]


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the ``decoding`` section with defaults; unknown keys are errors.

    Parameters
    ----------
    config : dict | None
        The section as given.

    Returns
    -------
    config : dict
        Every key present.
    """
    cfg = merge_defaults(DEFAULT_CONFIG, dict(config or {}), "decoding")
    if cfg["cv_groups"] not in ("auto", "stimulus", "session", "epoch"):
        raise ValueError(
            "`decoding.cv_groups` must be 'auto', 'stimulus', 'session' or 'epoch', got "
            f"{cfg['cv_groups']!r} instead."
        )
    if not isinstance(cfg["decim"], int) or cfg["decim"] < 1:
        raise ValueError(f"`decoding.decim` must be a positive int, got {cfg['decim']!r} instead.")
    return cfg


def resolve_cross_subject_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the ``decoding`` section with defaults and check its ``cross_subject`` block.

    Parameters
    ----------
    config : dict | None
        The ``decoding`` section, or the part of it the stage reads (``seed``,
        ``decim``, ``cross_subject``).

    Returns
    -------
    config : dict
        Every key present.
    """
    cfg = resolve_config(config)
    cs = cfg["cross_subject"]
    key = "decoding.cross_subject"
    if cs["cv"] not in CV_SCHEMES:
        raise ValueError(
            f"`{key}.cv` must be one of {', '.join(CV_SCHEMES)}, got {cs['cv']!r} instead."
        )
    if cs["alignment"] not in ALIGNMENTS:
        raise ValueError(
            f"`{key}.alignment` must be one of {', '.join(ALIGNMENTS)}, got "
            f"{cs['alignment']!r} instead."
        )
    names = cs["classifiers"]
    if (
        isinstance(names, str)
        or not names
        or any(c not in CLASSIFIERS for c in names)
        or len(set(names)) != len(names)
    ):
        raise ValueError(
            f"`{key}.classifiers` must be a non-empty list of distinct names among "
            f"{', '.join(CLASSIFIERS)}, got {names!r} instead."
        )
    if cs["target"] not in ("condition", "stimulus"):
        raise ValueError(
            f"`{key}.target` must be 'condition' or 'stimulus', got {cs['target']!r} instead."
        )
    window = cs["window"]
    if window is not None and (
        isinstance(window, str) or len(window) != 2 or not float(window[0]) < float(window[1])
    ):
        raise ValueError(
            f"`{key}.window` must be [tmin, tmax] in s with tmin < tmax, or null, got "
            f"{window!r} instead."
        )
    width = cs["bin_width"]
    if width is not None and (
        isinstance(width, bool) or not isinstance(width, int | float) or width <= 0
    ):
        raise ValueError(
            f"`{key}.bin_width` must be a positive number of seconds or null, got {width!r} "
            "instead."
        )
    return cfg


def shared_classes(labels: Sequence[Iterable[str]]) -> tuple[list[str], list[str]]:
    """The classes every held-out unit has, and those some unit lacks.

    A decoder is tested only on classes it was trained on: the stage decodes the shared
    classes and needs at least 2 of them; the workflow plan checks the same on the
    epochs the events tables describe.

    Parameters
    ----------
    labels : sequence of iterable of str
        The labels (``decoding.cross_subject.target``) of each held-out unit's epochs.

    Returns
    -------
    classes, dropped : list of str
        Sorted shared classes, and sorted classes not in every unit.
    """
    per_unit = [set(map(str, u)) for u in labels]
    if not per_unit:
        return [], []
    classes = sorted(set.intersection(*per_unit))
    return classes, sorted(set.union(*per_unit) - set(classes))


def held_out_mask(
    stimulus: np.ndarray, condition: np.ndarray | None, test_condition: str | None
) -> np.ndarray:
    """Presentations of the held-out test stimuli of one subject's identification.

    Parameters
    ----------
    stimulus : ndarray of str, shape (n_presentations,)
        Stimulus of every epoch (or fMRI presentation).
    condition : ndarray of str, shape (n_presentations,) | None
        Condition of every epoch; None where there is none (fMRI).
    test_condition : str | None
        ``decoding.identification.test_condition``: the test epochs' condition. When no
        epoch has it, or when it is None, the test stimuli are those EEG encoding's
        ``test: auto`` chooses (the most-presented stimuli, or a seeded fifth).

    Returns
    -------
    test : ndarray of bool, shape (n_presentations,)
        Every presentation of a test stimulus (a stimulus is either a test or a
        training stimulus, never both).
    """
    from neuroflow.trial_split import select_test_stimuli

    stimulus = np.asarray(stimulus, dtype=str)
    if condition is not None and test_condition is not None:
        chosen = np.asarray(condition, dtype=str) == str(test_condition)
        if chosen.any():
            return np.isin(stimulus, np.unique(stimulus[chosen]))
    return np.isin(stimulus, select_test_stimuli(stimulus, "auto"))


def identification_unavailable(stimulus: np.ndarray, test: np.ndarray) -> str | None:
    """Why one subject's stimuli cannot be identified (None when they can).

    Parameters
    ----------
    stimulus : ndarray of str, shape (n_presentations,)
        Stimulus of every presentation.
    test : ndarray of bool, shape (n_presentations,)
        Presentations of the test stimuli (:func:`held_out_mask`).

    Returns
    -------
    reason : str | None
        E.g. ``"1 test and 40 training stimuli (2 of each are needed)"``.
    """
    stimulus, test = np.asarray(stimulus, dtype=str), np.asarray(test, dtype=bool)
    n_test, n_train = np.unique(stimulus[test]).size, np.unique(stimulus[~test]).size
    if n_test < 2 or n_train < 2:
        return f"{n_test} test and {n_train} training stimuli (2 of each are needed)"
    return None


def applicable_parts(
    labels: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    *,
    has_features: bool,
    config: Mapping[str, Any],
) -> dict[str, str | None]:
    """Why each EEG decoding analysis cannot run on some subjects' epochs.

    The ``decode_eeg`` jobs check their epochs with it, and the workflow plan checks
    the epochs the events tables describe, so that an analysis the plan keeps does
    not refuse in its job.

    Parameters
    ----------
    labels : dict of str to (sequence of str, sequence of str)
        Subject -> the condition and the stimulus of each of its epochs, each of shape
        (n_epochs,).
    has_features : bool
        Whether feature spaces are decoded (``decoding.feature_spaces`` that run).
    config : dict
        The ``decoding`` section (see :func:`resolve_config`).

    Returns
    -------
    reasons : dict of str to str | None
        ``"classification"``, ``"features"``, ``"identification"`` -> why it cannot run
        for every subject (None when it runs; ``"off"`` when disabled).
    """
    cfg = resolve_config(config)
    arrays = {
        s: (np.asarray(cond, dtype=str), np.asarray(stim, dtype=str))
        for s, (cond, stim) in labels.items()
    }
    out: dict[str, str | None] = {}
    c = cfg["classification"]
    if not c["enabled"]:
        out["classification"] = "off"
    else:
        few = [
            s
            for s, (cond, stim) in arrays.items()
            if np.unique(cond if c["target"] == "condition" else stim).size < 2
        ]
        out["classification"] = (
            f"sub-{', sub-'.join(few)} have fewer than 2 classes of `{c['target']}`"
            if few
            else None
        )
    for part in ("features", "identification"):
        if not cfg[part]["enabled"]:
            out[part] = "off"
        elif not has_features:
            out[part] = "no feature space to decode (`decoding.feature_spaces`)"
        else:
            out[part] = None
    if out["identification"] is None:
        cond_name = cfg["identification"]["test_condition"]
        for s, (cond, stim) in arrays.items():
            why = identification_unavailable(stim, held_out_mask(stim, cond, cond_name))
            if why is not None:
                out["identification"] = f"sub-{s} has {why}"
                break
    if out["features"] is None:
        few = [s for s, (_, stim) in arrays.items() if np.unique(stim).size < 3]
        if few:
            out["features"] = f"sub-{', sub-'.join(few)} show fewer than 3 distinct stimuli"
    return out


def fmri_identification_unavailable(stimuli: Sequence[str]) -> str | None:
    """Why one subject's fMRI presentations cannot be identified (None when they can).

    The test stimuli are those ``test: auto`` chooses among the presentations
    (:func:`~neuroflow.decoding.stage.held_out_mask` without conditions), as
    ``decode_fmri`` chooses them within a subject.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_presentations,)
        Stimulus of every presentation (trial or stimulus event) of the subject.

    Returns
    -------
    reason : str | None
        E.g. ``"1 test and 40 training stimuli (2 of each are needed)"``.
    """
    stim = np.asarray(stimuli, dtype=str)
    return identification_unavailable(stim, held_out_mask(stim, None, None))


def concepts_unavailable(ids: Sequence[str], annotations: Any, *, min_count: int) -> str | None:
    """Why one subject's stimuli give no concept to decode (None when they do).

    Parameters
    ----------
    ids : sequence of str, shape (n_stimuli,)
        The subject's distinct decoded stimuli.
    annotations : pandas.DataFrame
        The concept annotation table
        (:func:`~neuroflow.decoding.concepts.read_concept_annotations`).
    min_count : int
        ``decoding.fmri.concepts.min_count``: fewest positive (and negative) stimuli of a
        decoded concept.

    Returns
    -------
    reason : str | None
        E.g. ``"no concept has 5+ positive and negative stimuli among 12"``.
    """
    ids = np.asarray(ids, dtype=str)
    annotated = annotations["stimulus"].to_numpy(dtype=str)
    if not np.isin(ids, annotated).any():
        return (
            f"none of its {len(ids)} decoded stimuli (e.g. {ids[:3].tolist()}) is in the "
            f"annotation table (e.g. {annotated[:3].tolist()})"
        )
    _, names = concept_matrix(ids, annotations, min_count=min_count)
    if not len(names):
        return f"no concept has {min_count}+ positive and negative stimuli among {len(ids)}"
    return None

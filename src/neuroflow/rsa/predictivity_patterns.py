"""ROI × ROI alignment patterns built from linear predictivity.

The RSA alignment patterns (:func:`~neuroflow.rsa.analysis.alignment_patterns`) relate
regions through the similarity of their RDMs. The same study can be built from linear
predictivity (encoding scores) instead:

- the brain pattern: how well one region's responses predict another's, by
  cross-validated ridge regression across regions of one subject
  (:func:`cross_roi_predictivity`, :func:`brain_predictivity_pattern`,
  :func:`subject_predictivity_patterns`);
- the model pattern: how alike a model's encoding scores are in every pair of regions
  (:func:`model_profile_pattern`);
- the relational criterion of each region: how well its row of the model pattern
  matches its row of the brain pattern, ``1 - mean |model - brain|`` as in
  :func:`~neuroflow.rsa.analysis.pattern_agreement`, per subject with a bootstrap
  interval over subjects (:func:`relational_criterion_per_roi`);
- the equivalence of a model's encoding scores with the subject-as-model baseline
  (another subject's responses as the predictor), by the TOST of
  :func:`~neuroflow.rsa.equivalence.baseline_equivalence` (:func:`encoding_equivalence`).

The ``rsa_fmri`` stage computes all of them on the stimulus-level responses of every ROI
(``lp_*`` variables of its store): the encoding scores of the model layers
(:func:`model_encoding_scores`) and of the subject baseline
(:func:`subject_baseline_scores`) are cross-validated over the same stimuli as the brain
pattern, so the three share one scale; each model's profile is its best layer's score in
every region (:func:`model_profiles`); :func:`predictivity_alignment` computes them all.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neuroflow.evaluation.metrics import pearson_r
from neuroflow.models.cv import run_splits

from .analysis import pattern_agreement
from .equivalence import SubjectBaseline, baseline_equivalence

__all__ = [
    "DEFAULT_ALPHAS",
    "RelationalCriterion",
    "brain_predictivity_pattern",
    "cross_roi_predictivity",
    "encoding_equivalence",
    "model_encoding_scores",
    "model_profile_pattern",
    "model_profiles",
    "predictivity_alignment",
    "relational_criterion_per_roi",
    "subject_baseline_scores",
    "subject_predictivity_patterns",
]

#: Ridge penalties searched by :func:`cross_roi_predictivity` (on z-scored predictors).
DEFAULT_ALPHAS: np.ndarray = np.logspace(-2, 5, 15)


def model_profile_pattern(scores: np.ndarray) -> np.ndarray:
    """ROI × ROI pattern of a model's encoding scores.

    Two regions are alike for the model when it predicts them equally well:
    ``pattern[i, j] = 1 - |scores[i] - scores[j]|``. Like the RSA model pattern
    (:attr:`~neuroflow.rsa.analysis.AlignmentResult.model`) it is symmetric, has ones
    on the diagonal and lies in ``[-1, 1]`` for correlation scores, so the two can be
    compared with the same relational criterion (``1 - mean |difference|``).

    Parameters
    ----------
    scores : array-like, shape (n_rois,)
        The model's encoding score in each region (e.g. mean Pearson r over voxels,
        averaged over subjects).

    Returns
    -------
    pattern : ndarray of float64, shape (n_rois, n_rois)
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size < 2:
        raise ValueError(
            f"`scores` must have shape (n_rois,) with at least 2 ROIs, got {s.shape} instead."
        )
    if not np.isfinite(s).all():
        raise ValueError(
            f"`scores` must be finite, got NaN or inf at ROIs "
            f"{np.flatnonzero(~np.isfinite(s)).tolist()} instead."
        )
    return 1.0 - np.abs(s[:, None] - s[None, :])


def _check_responses(name: str, responses: np.ndarray) -> np.ndarray:
    arr = np.asarray(responses, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 3 or arr.shape[1] < 1:
        raise ValueError(
            f"`{name}` must have shape (n_stimuli >= 3, n_voxels >= 1), got {arr.shape} instead."
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must be finite, got NaN or inf values instead.")
    return arr


def cross_roi_predictivity(
    responses_a: np.ndarray,
    responses_b: np.ndarray,
    *,
    groups: Sequence[object] | np.ndarray | None = None,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
    alpha_per_target: bool = False,
) -> float:
    """How well one region's responses linearly predict another's.

    The responses of region B are predicted from those of region A by ridge regression
    (:class:`sklearn.linear_model.RidgeCV` after z-scoring A's voxels on the training
    stimuli; the penalty chosen by its efficient leave-one-out on the training
    stimuli), with grouped folds over stimuli (:func:`neuroflow.models.cv.run_splits`):
    the held-out predictions of every fold are pooled and correlated with B's
    responses voxel by voxel. It is the same computation as
    :func:`sklearn.model_selection.cross_val_predict` with those folds.

    Parameters
    ----------
    responses_a : array-like, shape (n_stimuli, n_voxels_a)
        Predictor region's responses (one row per stimulus, e.g. beta estimates).
    responses_b : array-like, shape (n_stimuli, n_voxels_b)
        Target region's responses to the same stimuli, in the same order.
    groups : array-like, shape (n_stimuli,), optional
        Group of every row; no group is split between training and validation. None:
        every row its own group (rows are distinct stimuli).
    n_splits : int | None
        Number of grouped folds (:class:`sklearn.model_selection.GroupKFold`); None:
        leave one group out.
    alphas : array-like, shape (n_alphas,)
        Ridge penalties searched.
    alpha_per_target : bool
        Choose the penalty per target voxel rather than one for the region.

    Returns
    -------
    r : float
        Mean over B's voxels of the Pearson correlation between held-out predictions
        and responses.

    Notes
    -----
    Pooled held-out predictions carry each fold's training mean, which moves opposite
    to the fold's own mean: with no shared signal (the penalty at its largest) ``r``
    is about ``-sqrt((k - 1) / (n - 1))`` for ``k`` folds of ``n`` stimuli, not 0.
    Comparisons between region pairs of one dataset share this offset.
    """
    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = _check_responses("responses_a", responses_a)
    y = _check_responses("responses_b", responses_b)
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            "`responses_a` and `responses_b` must hold the same stimuli (rows), "
            f"got {x.shape[0]} and {y.shape[0]} rows instead."
        )
    constant = np.flatnonzero(np.ptp(y, axis=0) == 0)
    if constant.size:
        raise ValueError(
            "`responses_b` must vary over stimuli in every voxel, got constant voxels "
            f"{constant.tolist()} instead."
        )
    if groups is None:
        groups = np.arange(x.shape[0])
    groups = np.asarray(groups)
    if groups.shape != (x.shape[0],):
        raise ValueError(
            f"`groups` must have shape ({x.shape[0]},) (one per stimulus), got "
            f"{groups.shape} instead."
        )
    splits = run_splits(groups, n_splits, unit="stimulus")
    estimator = make_pipeline(
        StandardScaler(),
        RidgeCV(alphas=np.asarray(alphas, dtype=np.float64), alpha_per_target=alpha_per_target),
    )
    predicted = cross_val_predict(estimator, x, y, cv=splits)
    return float(np.mean(pearson_r(y, predicted.reshape(y.shape))))


def brain_predictivity_pattern(
    roi_responses: Sequence[np.ndarray],
    *,
    symmetric: bool = True,
    groups: Sequence[object] | np.ndarray | None = None,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
    alpha_per_target: bool = False,
) -> np.ndarray:
    """ROI × ROI pattern of one subject from cross-ROI linear predictivity.

    Parameters
    ----------
    roi_responses : sequence of array-like, each of shape (n_stimuli, n_voxels_roi)
        Responses of every region (the voxel counts may differ) to the same stimuli.
    symmetric : bool
        True: ``pattern[i, j]`` is the mean of the two directions (``i`` from ``j`` and
        ``j`` from ``i``); False: ``pattern[i, j]`` is the predictivity of region ``i``
        (target, row) from region ``j`` (predictor, column).
    groups, n_splits, alphas, alpha_per_target
        See :func:`cross_roi_predictivity`.

    Returns
    -------
    pattern : ndarray of float64, shape (n_rois, n_rois)
        Ones on the diagonal (a region predicts itself), as the RSA patterns.
    """
    rois = list(roi_responses)
    if len(rois) < 2:
        raise ValueError(f"`roi_responses` must hold at least 2 ROIs, got {len(rois)} instead.")
    n_rows = {np.shape(r)[0] if np.ndim(r) == 2 else None for r in rois}
    if len(n_rows) != 1 or None in n_rows:
        raise ValueError(
            "`roi_responses` must hold 2-D arrays (n_stimuli, n_voxels) with the same "
            f"n_stimuli, got shapes {[np.shape(r) for r in rois]} instead."
        )
    n = len(rois)
    pattern = np.eye(n)
    for i in range(n):
        for j in range(n):
            if i != j:
                pattern[i, j] = cross_roi_predictivity(
                    rois[j],
                    rois[i],
                    groups=groups,
                    n_splits=n_splits,
                    alphas=alphas,
                    alpha_per_target=alpha_per_target,
                )
    if symmetric:
        pattern = (pattern + pattern.T) / 2
    return pattern


def subject_predictivity_patterns(
    subject_responses: Sequence[Sequence[np.ndarray]],
    *,
    symmetric: bool = True,
    groups: Sequence[object] | np.ndarray | None = None,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
    alpha_per_target: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Cross-ROI predictivity patterns of every subject and of the group.

    Parameters
    ----------
    subject_responses : sequence (n_subjects) of sequences (n_rois) of array-like
        For each subject, the responses of every region, each of shape
        (n_stimuli, n_voxels_roi); every subject has the same regions, in the same order.
    symmetric, groups, n_splits, alphas, alpha_per_target
        See :func:`brain_predictivity_pattern`.

    Returns
    -------
    patterns : ndarray of float64, shape (n_subjects, n_rois, n_rois)
        Per-subject patterns.
    group : ndarray of float64, shape (n_rois, n_rois)
        Their mean over subjects.
    """
    subjects = [list(s) for s in subject_responses]
    if not subjects:
        raise ValueError("`subject_responses` must hold at least 1 subject, got 0 instead.")
    n_rois = [len(s) for s in subjects]
    if len(set(n_rois)) != 1:
        raise ValueError(
            f"`subject_responses` must hold the same number of ROIs for every subject, "
            f"got {n_rois} instead."
        )
    patterns = np.stack(
        [
            brain_predictivity_pattern(
                rois,
                symmetric=symmetric,
                groups=groups,
                n_splits=n_splits,
                alphas=alphas,
                alpha_per_target=alpha_per_target,
            )
            for rois in subjects
        ]
    )
    return patterns, patterns.mean(axis=0)


@dataclass(frozen=True)
class RelationalCriterion:
    """Per-ROI agreement of a model pattern with the brain patterns.

    Attributes
    ----------
    subject : ndarray of float64, shape (n_subjects, n_rois)
        ``1 - mean |model[r, j] - brain[s, r, j]|`` over the other regions ``j != r``.
    mean : ndarray of float64, shape (n_rois,)
        Mean over subjects.
    ci : ndarray of float64, shape (2, n_rois)
        Percentile bootstrap interval over subjects (lower, upper).
    """

    subject: np.ndarray
    mean: np.ndarray
    ci: np.ndarray


def relational_criterion_per_roi(
    model_pattern: np.ndarray,
    brain_patterns: np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    level: float = 0.95,
) -> RelationalCriterion:
    """How well each region's row of the model pattern matches the brain's.

    For subject ``s`` and region ``r``: ``1 - mean_j |model[r, j] - brain[s, r, j]|``
    over the other regions ``j != r`` (the diagonal is left out; so are NaN entries), the
    relational criterion of :func:`~neuroflow.rsa.analysis.pattern_agreement` restricted
    to one row. The interval is the percentile interval of the mean over subjects
    drawn with replacement.

    Parameters
    ----------
    model_pattern : array-like, shape (n_rois, n_rois)
        E.g. :func:`model_profile_pattern` or the RSA model pattern.
    brain_patterns : array-like, shape (n_subjects, n_rois, n_rois)
        Per-subject brain patterns (row ``r``: region ``r``; for a non-symmetric
        predictivity pattern, region ``r`` as the target).
    n_boot : int
        Bootstrap samples (subjects drawn with replacement).
    seed : int
        Seed of the bootstrap's random generator.
    level : float
        Coverage of the percentile interval, in (0, 1).

    Returns
    -------
    result : RelationalCriterion
    """
    model = np.asarray(model_pattern, dtype=np.float64)
    brain = np.asarray(brain_patterns, dtype=np.float64)
    if model.ndim != 2 or model.shape[0] != model.shape[1] or model.shape[0] < 2:
        raise ValueError(
            f"`model_pattern` must have shape (n_rois, n_rois) with n_rois >= 2, got "
            f"{model.shape} instead."
        )
    if brain.ndim != 3 or brain.shape[1:] != model.shape:
        raise ValueError(
            f"`brain_patterns` must have shape (n_subjects, {model.shape[0]}, "
            f"{model.shape[0]}) to match `model_pattern`, got {brain.shape} instead."
        )
    if isinstance(n_boot, bool) or not (isinstance(n_boot, int | np.integer) and n_boot >= 1):
        raise ValueError(f"`n_boot` must be a positive int, got {n_boot!r} instead.")
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level!r} instead.")
    n_roi = model.shape[0]
    subject = np.empty((brain.shape[0], n_roi))
    for r in range(n_roi):
        others = np.delete(np.arange(n_roi), r)
        subject[:, r] = pattern_agreement(model[r, others][None], brain[:, r, others])[0]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, brain.shape[0], size=(n_boot, brain.shape[0]))
    with warnings.catch_warnings():  # a ROI with no finite value gives NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        samples = np.nanmean(subject[draws], axis=1)
        mean = np.nanmean(subject, axis=0)
        cut = 100 * (1 - level) / 2
        ci = np.nanpercentile(samples, [cut, 100 - cut], axis=0)
    return RelationalCriterion(subject=subject, mean=mean, ci=ci)


def encoding_equivalence(
    model_scores: np.ndarray,
    subject_scores: np.ndarray,
    margin: float | Sequence[float] | None = None,
    alpha: float = 0.05,
) -> SubjectBaseline:
    """TOST of models' encoding scores against the subject-as-model baseline.

    The baseline score of a subject in a region is the encoding score obtained with
    other subjects' responses as the predictor (given, not computed here). The paired
    differences ``model - baseline`` over subjects are tested against
    ``[-margin, +margin]`` by :func:`~neuroflow.rsa.equivalence.tost_paired`, as in
    :func:`~neuroflow.rsa.equivalence.subject_model_equivalence`.

    Parameters
    ----------
    model_scores : array-like, shape (n_subjects, n_rois) or (n_models, n_subjects, n_rois)
        Encoding score of each model for each subject and region.
    subject_scores : array-like, shape (n_subjects, n_rois)
        Subject-as-model baseline scores, at least 3 subjects.
    margin : float, sequence of float (one per ROI), or None
        Equivalence margin (> 0); None: the between-subject SD (``ddof=1``) of the
        baseline in each region.
    alpha : float
        Level of the equivalence decision, in (0, 1).

    Returns
    -------
    result : SubjectBaseline
        Arrays with a leading models axis (of length 1 for 2-D ``model_scores``).
    """
    base = np.asarray(subject_scores, dtype=np.float64)
    models = np.asarray(model_scores, dtype=np.float64)
    if models.ndim == 2:
        models = models[None]
    if base.ndim != 2 or models.ndim != 3 or models.shape[1:] != base.shape:
        raise ValueError(
            "`model_scores` (n_subjects, n_rois) or (n_models, n_subjects, n_rois) and "
            "`subject_scores` (n_subjects, n_rois) must share (n_subjects, n_rois), got "
            f"{np.shape(model_scores)} and {base.shape} instead."
        )
    if base.shape[0] < 3:
        raise ValueError(
            "`subject_scores` must hold at least 3 subjects for a subject baseline, got "
            f"{base.shape[0]} instead."
        )
    if not (np.isfinite(base).all() and np.isfinite(models).all()):
        raise ValueError("`model_scores` and `subject_scores` must be finite, got NaN or inf.")
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1), got {alpha!r} instead.")
    return baseline_equivalence(models, base, margin, alpha)


def _check_subject_rois(subject_rois: Sequence[Sequence[np.ndarray]]) -> list[list[np.ndarray]]:
    """Every subject's ROI responses as float arrays, checked for matching shapes."""
    subjects = [[np.asarray(r, dtype=np.float64) for r in rois] for rois in subject_rois]
    if not subjects or len({len(rois) for rois in subjects}) != 1 or len(subjects[0]) < 2:
        raise ValueError(
            "`subject_rois` must hold at least 1 subject with the same 2+ ROIs each, got ROI "
            f"counts {[len(rois) for rois in subjects]} instead."
        )
    rows = {r.shape[0] if r.ndim == 2 else -1 for rois in subjects for r in rois}
    if len(rows) != 1 or -1 in rows:
        raise ValueError(
            "`subject_rois` must hold 2-D arrays (n_stimuli, n_voxels) with the same "
            f"n_stimuli, got shapes {[[r.shape for r in rois] for rois in subjects]} instead."
        )
    return subjects


def model_encoding_scores(
    subject_rois: Sequence[Sequence[np.ndarray]],
    layer_features: Sequence[np.ndarray],
    *,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
) -> np.ndarray:
    """Cross-validated encoding score of every model layer in every subject and region.

    The responses of a region are predicted from the layer's features of the same
    stimuli as in :func:`cross_roi_predictivity` (the layer is the predictor), so these
    scores share the scale of the brain pattern and of :func:`subject_baseline_scores`.

    Parameters
    ----------
    subject_rois : sequence (n_subjects) of sequences (n_rois) of array-like
        Each of shape (n_stimuli, n_voxels_roi), the same stimuli in the same order.
    layer_features : sequence (n_layers) of array-like
        Each of shape (n_stimuli, n_features_layer).
    n_splits, alphas
        See :func:`cross_roi_predictivity`.

    Returns
    -------
    scores : ndarray of float64, shape (n_subjects, n_layers, n_rois)
    """
    subjects = _check_subject_rois(subject_rois)
    layers = list(layer_features)
    if not layers:
        raise ValueError("`layer_features` must hold at least 1 layer, got 0 instead.")
    return np.array(
        [
            [
                [
                    cross_roi_predictivity(feat, roi, n_splits=n_splits, alphas=alphas)
                    for roi in rois
                ]
                for feat in layers
            ]
            for rois in subjects
        ]
    )


def subject_baseline_scores(
    subject_rois: Sequence[Sequence[np.ndarray]],
    *,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
) -> np.ndarray:
    """Subject-as-model baseline: each subject's region predicted from the others'.

    The predictor of subject ``s`` in region ``r`` is the voxels of region ``r`` of every
    other subject side by side (voxel counts may differ between subjects), fitted and
    scored as in :func:`cross_roi_predictivity`.

    Parameters
    ----------
    subject_rois : sequence (n_subjects >= 2) of sequences (n_rois) of array-like
        Each of shape (n_stimuli, n_voxels_roi), the same stimuli in the same order.
    n_splits, alphas
        See :func:`cross_roi_predictivity`.

    Returns
    -------
    scores : ndarray of float64, shape (n_subjects, n_rois)
    """
    subjects = _check_subject_rois(subject_rois)
    if len(subjects) < 2:
        raise ValueError(
            f"`subject_rois` must hold at least 2 subjects for a subject baseline, got "
            f"{len(subjects)} instead."
        )
    n_roi = len(subjects[0])
    return np.array(
        [
            [
                cross_roi_predictivity(
                    np.hstack([o[r] for k, o in enumerate(subjects) if k != s]),
                    rois[r],
                    n_splits=n_splits,
                    alphas=alphas,
                )
                for r in range(n_roi)
            ]
            for s, rois in enumerate(subjects)
        ]
    )


def model_profiles(scores: np.ndarray, layer_models: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Each model's ROI profile: its best layer's subject-mean score in every region.

    Parameters
    ----------
    scores : array-like, shape (n_subjects, n_layers, n_rois)
        From :func:`model_encoding_scores`.
    layer_models : sequence of str, length n_layers
        The model each layer belongs to.

    Returns
    -------
    models : list of str
        The models, in order of first appearance.
    profiles : ndarray of float64, shape (n_models, n_rois)
        Maximum over the model's layers of the mean score over subjects.
    """
    s = np.asarray(scores, dtype=np.float64)
    names = [str(m) for m in layer_models]
    if s.ndim != 3 or s.shape[1] != len(names):
        raise ValueError(
            f"`scores` must have shape (n_subjects, {len(names)}, n_rois) to match "
            f"`layer_models`, got {s.shape} instead."
        )
    models = list(dict.fromkeys(names))
    mean = s.mean(axis=0)
    profiles = np.stack(
        [mean[[k for k, n in enumerate(names) if n == m]].max(axis=0) for m in models]
    )
    return models, profiles


def predictivity_alignment(
    subject_rois: Sequence[Sequence[np.ndarray]],
    layer_features: Sequence[np.ndarray],
    layer_models: Sequence[str],
    *,
    symmetric: bool = True,
    n_splits: int | None = 5,
    alphas: Sequence[float] | np.ndarray = DEFAULT_ALPHAS,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    margin: float | Sequence[float] | None = None,
    alpha: float = 0.05,
) -> dict[str, np.ndarray]:
    """Every linear-predictivity alignment output of one study, as the RSA stage stores it.

    Parameters
    ----------
    subject_rois : sequence (n_subjects) of sequences (n_rois >= 2) of array-like
        Stimulus responses of every subject's regions, each of shape
        (n_stimuli, n_voxels_roi), the same stimuli in the same order.
    layer_features : sequence (n_layers) of array-like
        Features of the same stimuli, each of shape (n_stimuli, n_features_layer).
    layer_models : sequence of str, length n_layers
        The model each layer belongs to.
    symmetric : bool
        See :func:`brain_predictivity_pattern`.
    n_splits, alphas
        See :func:`cross_roi_predictivity`.
    n_boot, seed, level
        See :func:`relational_criterion_per_roi`.
    margin, alpha
        See :func:`encoding_equivalence`.

    Returns
    -------
    outputs : dict of str to ndarray
        ``lp_model_score`` (n_subjects, n_layers, n_rois), ``lp_model_profile``
        (n_models, n_rois), ``lp_model_pattern`` (n_models, n_rois, n_rois),
        ``lp_brain_pattern`` (n_subjects, n_rois, n_rois), ``lp_brain_pattern_mean``
        (n_rois, n_rois), ``lp_criterion`` (n_models, n_subjects, n_rois),
        ``lp_criterion_mean`` (n_models, n_rois) and ``lp_criterion_ci`` (2, n_models,
        n_rois); with 3+ subjects, ``lp_subject_baseline`` (n_subjects, n_rois),
        ``lp_baseline_difference``, ``lp_baseline_equivalence_p`` and
        ``lp_baseline_difference_p`` (n_layers, n_rois) and ``lp_equivalence_margin``
        (n_rois,). Models are in order of first appearance in ``layer_models``.
    """
    subjects = _check_subject_rois(subject_rois)
    fit = {"n_splits": n_splits, "alphas": alphas}
    scores = model_encoding_scores(subjects, layer_features, **fit)
    _, profiles = model_profiles(scores, layer_models)
    brain, brain_mean = subject_predictivity_patterns(subjects, symmetric=symmetric, **fit)
    model_patterns = np.stack([model_profile_pattern(p) for p in profiles])
    crit = [
        relational_criterion_per_roi(m, brain, n_boot, seed, level=level) for m in model_patterns
    ]
    out = {
        "lp_model_score": scores,
        "lp_model_profile": profiles,
        "lp_model_pattern": model_patterns,
        "lp_brain_pattern": brain,
        "lp_brain_pattern_mean": brain_mean,
        "lp_criterion": np.stack([c.subject for c in crit]),
        "lp_criterion_mean": np.stack([c.mean for c in crit]),
        "lp_criterion_ci": np.stack([c.ci for c in crit], axis=1),
    }
    if len(subjects) >= 3:
        baseline = subject_baseline_scores(subjects, **fit)
        eq = encoding_equivalence(np.moveaxis(scores, 1, 0), baseline, margin, alpha)
        out.update(
            {
                "lp_subject_baseline": baseline,
                "lp_baseline_difference": eq.difference,
                "lp_baseline_equivalence_p": eq.p_equivalent,
                "lp_baseline_difference_p": eq.p_different,
                "lp_equivalence_margin": eq.margin,
            }
        )
    return out

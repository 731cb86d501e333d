"""Time-resolved EEG decoding, temporal generalisation and cluster permutation tests.

Categorical targets use MNE's :class:`~mne.decoding.SlidingEstimator` (one classifier
per time point) and :class:`~mne.decoding.GeneralizingEstimator` (train at one time,
test at every time) with :func:`mne.decoding.cross_val_multiscore`; the default
shrinkage LDA is solved for all time points at once by
:func:`~neuroflow.decoding.lda.sliding_lda_scores`, which gives the same scores as those
MNE estimators (tested to equality) about 50 times faster, so the label-permutation null
refits the very same classifier. Continuous targets
(the first principal components of a feature space) use a ridge per time point, solved
for all time points, all components and all permutations at once from one batched SVD
per fold, with the penalty chosen per time point and target by leave-one-out error.

Inference
---------
With a handful of subjects a test across subjects has little power (with 2 subjects
the smallest sign-flip p-value is 0.25), and fold scores of one subject are not
independent (training sets overlap), so a t-test over folds is anti-conservative.
Within a subject we therefore build a label-permutation null: the whole
cross-validation is rerun with labels shuffled in the units the design randomised
(whole stimuli when the label is a stimulus property; see
:mod:`neuroflow.decoding.classification`). Clusters are formed by thresholding the
observed score map at each point's ``1 - cluster_alpha`` quantile of the null, a
cluster's mass is the sum of ``score - mean(null)`` over its points, and its p-value
compares that mass with the largest cluster mass of every permuted map thresholded the
same way (Maris & Oostenveld, 2007), which controls the family-wise error over time
(or time × time). With several subjects, :func:`group_cluster_test` tests per-subject
scores minus chance with :func:`mne.stats.permutation_cluster_1samp_test`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mne
import numpy as np
from mne.decoding import GeneralizingEstimator, SlidingEstimator, cross_val_multiscore
from scipy import ndimage
from sklearn.base import BaseEstimator

from neuroflow.models.selection import near_best

from .classification import group_cv, labels_constant_within_groups, make_classifier, permute_labels
from .lda import sliding_lda_scores

__all__ = [
    "ClusterResult",
    "cluster_permutation_test",
    "group_cluster_test",
    "shuffle_labels",
    "sliding_ridge_scores",
    "time_resolved_null",
    "time_resolved_scores",
]


@dataclass
class ClusterResult:
    """Clusters of a score map and their permutation p-values.

    Attributes
    ----------
    labels : ndarray of int, shape (n_times,) or (n_times, n_times)
        Cluster index of every point, 0 outside clusters, ``i + 1`` for cluster ``i``.
    p_values : ndarray, shape (n_clusters,)
        Family-wise corrected p-value per cluster.
    masses : ndarray, shape (n_clusters,)
        Cluster statistic per cluster.
    threshold : ndarray, shape (n_times,) or (n_times, n_times)
        Cluster-forming threshold per point.
    """

    labels: np.ndarray
    p_values: np.ndarray
    masses: np.ndarray
    threshold: np.ndarray

    def significant(self, alpha: float = 0.05) -> np.ndarray:
        """Mask of points inside clusters with ``p <= alpha``, same shape as ``labels``."""
        keep = np.flatnonzero(self.p_values <= alpha) + 1
        return np.isin(self.labels, keep)


def _check_epochs(X: np.ndarray, n: int | None = None) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(
            f"`X` must have shape (n_epochs, n_channels, n_times), got {X.shape} instead."
        )
    if n is not None and X.shape[0] != n:
        raise ValueError(f"`X` must have {n} epochs like `y`, got {X.shape[0]} instead.")
    return X


def shuffle_labels(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shuffle labels in the unit the design randomised.

    Parameters
    ----------
    y, groups : array-like, shape (n_items,)
        Labels and CV groups.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    y_perm : ndarray, shape (n_items,)
        Whole groups exchange labels when each group has one label, else labels are
        shuffled within groups.
    """
    y, groups = np.asarray(y), np.asarray(groups)
    if labels_constant_within_groups(y, groups):
        return permute_labels(y, groups, rng)
    out = y.copy()
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        out[idx] = y[rng.permutation(idx)]
    return out


def _estimator(
    classifier: str | BaseEstimator, generalize: bool, n_jobs: int | None
) -> BaseEstimator:
    base = make_classifier(classifier) if isinstance(classifier, str) else classifier
    cls = GeneralizingEstimator if generalize else SlidingEstimator
    return cls(base, scoring="balanced_accuracy", n_jobs=n_jobs, verbose=False)


def time_resolved_scores(
    X: np.ndarray,
    y: Sequence[object] | np.ndarray,
    groups: Sequence[object] | np.ndarray,
    *,
    classifier: str | BaseEstimator = "lda",
    generalize: bool = False,
    n_splits: int | None = 5,
    n_jobs: int | None = None,
) -> np.ndarray:
    """Cross-validated balanced accuracy at every time point (or train × test time).

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    y : array-like, shape (n_epochs,)
        Categorical labels.
    groups : array-like, shape (n_epochs,)
        CV groups.
    classifier : {"lda", "logistic"} | estimator
        See :func:`~neuroflow.decoding.classification.make_classifier`; ``"lda"`` is
        solved in closed form by :func:`~neuroflow.decoding.lda.sliding_lda_scores`.
    generalize : bool
        Temporal generalisation instead of sliding decoding.
    n_splits : int | None
        Grouped folds, or ``None`` for leave-one-group-out.
    n_jobs : int | None
        Parallel jobs for MNE.

    Returns
    -------
    scores : ndarray, shape (n_folds, n_times) or (n_folds, n_train_times, n_test_times)
        Balanced accuracy per fold.
    """
    y, groups = np.asarray(y), np.asarray(groups)
    X = _check_epochs(X, y.shape[0])
    cv = group_cv(groups, n_splits)
    splits = list(cv.split(X[:, :, 0], y, groups))
    if isinstance(classifier, str) and classifier == "lda":
        return sliding_lda_scores(X, y, splits, generalize=generalize)
    return cross_val_multiscore(
        _estimator(classifier, generalize, n_jobs), X, y, cv=splits, verbose=False
    )


def time_resolved_null(
    X: np.ndarray,
    y: Sequence[object] | np.ndarray,
    groups: Sequence[object] | np.ndarray,
    *,
    n_permutations: int,
    classifier: str | BaseEstimator = "lda",
    generalize: bool = False,
    n_splits: int | None = 5,
    seed: int = 0,
    n_jobs: int | None = None,
) -> np.ndarray:
    """Fold-averaged scores with shuffled labels (see :func:`shuffle_labels`).

    Parameters
    ----------
    X, y, groups, classifier, generalize, n_splits, n_jobs
        As in :func:`time_resolved_scores`.
    n_permutations : int
        Number of shuffles.
    seed : int
        Seed of the shuffles.

    Returns
    -------
    null : ndarray, shape (n_permutations, n_times) or (n_permutations, n_times, n_times)
    """
    rng = np.random.default_rng(seed)
    y, groups = np.asarray(y), np.asarray(groups)
    out = [
        time_resolved_scores(
            X,
            shuffle_labels(y, groups, rng),
            groups,
            classifier=classifier,
            generalize=generalize,
            n_splits=n_splits,
            n_jobs=n_jobs,
        ).mean(axis=0)
        for _ in range(int(n_permutations))
    ]
    return np.stack(out) if out else np.zeros((0, *np.shape(X)[2:]))


def _masses(score: np.ndarray, threshold: np.ndarray, centre: np.ndarray) -> tuple:
    labels, n = ndimage.label(score > threshold)
    if n == 0:
        return labels, np.zeros(0)
    masses = ndimage.sum_labels(score - centre, labels, index=np.arange(1, n + 1))
    return labels, np.asarray(masses, dtype=np.float64)


def cluster_permutation_test(
    observed: np.ndarray, null: np.ndarray, *, cluster_alpha: float = 0.05
) -> ClusterResult:
    """Cluster-mass test of a score map against its permutation null.

    Parameters
    ----------
    observed : array-like, shape (n_times,) or (n_times, n_times)
        Observed score map.
    null : array-like, shape (n_permutations, *observed.shape)
        Score maps under shuffled labels.
    cluster_alpha : float
        Points above their ``1 - cluster_alpha`` null quantile form clusters
        (adjacent in time; 4-connected in a time × time map).

    Returns
    -------
    result : ClusterResult
        Clusters with p-value ``(1 + #{max null mass >= mass}) / (1 + n_permutations)``.
    """
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    if null.ndim != observed.ndim + 1 or null.shape[1:] != observed.shape:
        raise ValueError(
            f"`null` must have shape (n_permutations, *{observed.shape}), got {null.shape} instead."
        )
    if null.shape[0] < 1:
        raise ValueError("`null` must hold at least one permutation, got 0 instead.")
    if not 0 < cluster_alpha < 1:
        raise ValueError(f"`cluster_alpha` must be in (0, 1), got {cluster_alpha!r} instead.")
    threshold = np.quantile(null, 1.0 - cluster_alpha, axis=0)
    centre = null.mean(axis=0)
    labels, masses = _masses(observed, threshold, centre)
    max_null = np.array([max(_masses(p, threshold, centre)[1].max(initial=0.0), 0.0) for p in null])
    p = (1.0 + (max_null[None, :] >= masses[:, None] - 1e-12).sum(axis=1)) / (1.0 + null.shape[0])
    return ClusterResult(labels=labels, p_values=p, masses=masses, threshold=threshold)


def group_cluster_test(
    scores: np.ndarray,
    chance: float,
    *,
    n_permutations: int = 1024,
    seed: int = 0,
) -> ClusterResult:
    """Across-subject cluster test of scores above chance (sign flips).

    Parameters
    ----------
    scores : array-like, shape (n_subjects, n_times) or (n_subjects, n_times, n_times)
        One score map per subject.
    chance : float
        Chance level subtracted before the one-sample test.
    n_permutations : int
        Sign flips; all ``2 ** n_subjects`` are used when fewer.
    seed : int
        Seed of the sign flips.

    Returns
    -------
    result : ClusterResult
        Clusters of the t map with one-tailed (greater) p-values; ``threshold`` holds
        the t threshold at every point. With ``n`` subjects p is at least ``2 ** -n``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim not in (2, 3) or scores.shape[0] < 2:
        raise ValueError(
            "`scores` must have shape (n_subjects >= 2, n_times[, n_times]), "
            f"got {scores.shape} instead."
        )
    n_perm = "all" if 2 ** scores.shape[0] <= n_permutations else int(n_permutations)
    t_obs, clusters, p, _ = mne.stats.permutation_cluster_1samp_test(
        scores - chance,
        tail=1,
        n_permutations=n_perm,
        seed=seed,
        out_type="mask",
        verbose=False,
    )
    labels = np.zeros(scores.shape[1:], dtype=int)
    for i, mask in enumerate(clusters):
        labels[mask] = i + 1
    masses = np.array([t_obs[m].sum() for m in clusters], dtype=np.float64)
    from scipy.stats import t as t_dist

    thr = np.full(scores.shape[1:], t_dist.ppf(0.95, scores.shape[0] - 1))
    return ClusterResult(labels=labels, p_values=np.asarray(p, float), masses=masses, threshold=thr)


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = train.mean(axis=1, keepdims=True)
    sd = train.std(axis=1, keepdims=True)
    sd = np.where(sd > 0, sd, 1.0)
    return (train - mean) / sd, (test - mean) / sd


def _ridge_fold(
    Xtr: np.ndarray, Ytr: np.ndarray, Xte: np.ndarray, alphas: np.ndarray
) -> np.ndarray:
    """Test predictions per time point with per-(time, target) LOO-chosen penalties.

    ``Xtr`` (n_times, n_train, n_channels), ``Ytr`` (n_train, n_targets) centred,
    ``Xte`` (n_times, n_test, n_channels) → (n_times, n_test, n_targets).

    Leave-one-out errors within round-off of the smallest one are ties, and a tie goes to
    the larger penalty (:func:`~neuroflow.models.selection.near_best`).

    The leave-one-out error of every target is the weighted residual sum
    ``sum_i w_i (y_i - U c)_i^2`` with ``w_i = (1 - h_i)^-2`` and ``c = S Uᵀ y``; it is
    expanded as ``yᵀWy - 2 cᵀ UᵀWy + cᵀ UᵀWU c`` so that only (rank × target) products
    are formed, never the (train × target) fitted values of every target and alpha.
    """
    U, s, Vt = np.linalg.svd(Xtr, full_matrices=False)
    n_times, rank, n_train = U.shape[0], U.shape[2], U.shape[1]
    Ut = np.ascontiguousarray(np.swapaxes(U, 1, 2))

    def times_y(A: np.ndarray) -> np.ndarray:
        # (n_times, rank, n_train) @ (n_train, n_targets) as ONE matrix product
        return (A.reshape(n_times * rank, n_train) @ Ytr).reshape(n_times, rank, -1)

    UtY = times_y(Ut)
    Y2 = Ytr**2
    alphas = np.sort(np.asarray(alphas, dtype=np.float64))
    s2 = s**2
    U2 = U**2
    errors = np.empty((alphas.size, n_times, Ytr.shape[1]))
    for i, a in enumerate(alphas):
        shrink = s2 / (s2 + a)  # (n_times, rank)
        hat = (U2 @ shrink[:, :, None])[:, :, 0]  # (n_times, n_train)
        w = 1.0 / (1.0 - hat) ** 2
        C = shrink[:, :, None] * UtY  # (n_times, rank, n_targets)
        UtW = Ut * w[:, None, :]
        quad = w @ Y2 - 2.0 * np.einsum("trk,trk->tk", C, times_y(UtW))
        quad += np.einsum("trk,trk->tk", C, (UtW @ U) @ C)
        errors[i] = quad / Ytr.shape[0]
    # errors within round-off of the smallest are ties, and go to the larger penalty
    ties = near_best(-errors.reshape(alphas.size, -1)).reshape(errors.shape)
    chosen = alphas.size - 1 - np.argmax(ties[::-1], axis=0)  # (n_times, n_targets)
    pred = np.zeros((Xte.shape[0], Xte.shape[1], Ytr.shape[1]))
    XteV = Xte @ np.ascontiguousarray(np.swapaxes(Vt, 1, 2))
    for i, a in enumerate(alphas):
        if not (chosen == i).any():
            continue
        p = XteV @ ((s / (s2 + a))[:, :, None] * UtY)
        pred = np.where((chosen == i)[:, None, :], p, pred)
    return pred


def sliding_ridge_scores(
    X: np.ndarray,
    Y: np.ndarray,
    groups: Sequence[object] | np.ndarray,
    *,
    alphas: Sequence[float] = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4),
    n_splits: int | None = 5,
    n_permutations: int = 0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Time-resolved ridge decoding of continuous targets, scored by correlation.

    At each time point, ridge maps the channels to every target; predictions are
    correlated with the targets over the test epochs of each fold (which avoids the
    negative bias of pooling folds whose predictions shrink toward different training
    means) and the correlations are averaged over folds.
    Under the null, target rows are exchanged between whole groups (e.g. stimuli), so
    repeats of one stimulus keep sharing targets.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    Y : array-like, shape (n_epochs, n_targets)
        Targets (e.g. feature principal components of each epoch's stimulus); equal
        within each group when ``n_permutations > 0``.
    groups : array-like, shape (n_epochs,)
        CV groups.
    alphas : sequence of float
        Candidate penalties, chosen per time point and target by leave-one-out error
        on the training fold.
    n_splits : int | None
        Grouped folds, or ``None`` for leave-one-group-out.
    n_permutations : int
        Number of group shuffles of the targets; all are fitted in the same solves.
    seed : int
        Seed of the shuffles.

    Returns
    -------
    scores : ndarray, shape (n_times, n_targets)
        Pearson r per time point and target.
    null : ndarray, shape (n_permutations, n_times, n_targets)
        The same under shuffled targets.
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2:
        raise ValueError(f"`Y` must have shape (n_epochs, n_targets), got {Y.shape} instead.")
    X = _check_epochs(X, Y.shape[0])
    groups = np.asarray(groups)
    if groups.shape != (Y.shape[0],):
        raise ValueError(f"`groups` must have shape ({Y.shape[0]},), got {groups.shape} instead.")
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or alphas.size == 0 or np.any(alphas <= 0):
        raise ValueError(f"`alphas` must be positive floats, got {alphas.tolist()!r} instead.")
    n, k = Y.shape
    rng = np.random.default_rng(seed)
    uniq, g = np.unique(groups, return_inverse=True)
    first = np.zeros(uniq.size, dtype=int)
    first[g[::-1]] = np.arange(n)[::-1]
    rows = [np.arange(n)] + [first[rng.permutation(uniq.size)][g] for _ in range(n_permutations)]
    Y_all = np.concatenate([Y[r] for r in rows], axis=1)
    Xt = np.moveaxis(X, 2, 0)
    r_sum = np.zeros((X.shape[2], Y_all.shape[1]))
    folds = list(group_cv(groups, n_splits).split(Y, groups=groups))
    for train, test in folds:
        Xtr, Xte = _standardise(Xt[:, train], Xt[:, test])
        mean = Y_all[train].mean(axis=0)
        pred = _ridge_fold(Xtr, Y_all[train] - mean, Xte, alphas)
        r_sum += _fold_r(pred, Y_all[test])
    r = (r_sum / len(folds)).reshape(X.shape[2], n_permutations + 1, k)
    return r[:, 0], np.moveaxis(r[:, 1:], 1, 0)


def _fold_r(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Pearson r over test items, (n_times, n_test, m) vs (n_test, m) → (n_times, m)."""
    pc = pred - pred.mean(axis=1, keepdims=True)
    yc = target - target.mean(axis=0)
    num = np.einsum("tnm,nm->tm", pc, yc)
    den = np.sqrt((pc**2).sum(axis=1) * (yc**2).sum(axis=0))
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

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
With a handful of subjects a test across subjects has little power (2 subjects allow 4
sign flips, so no p-value below 0.25), and fold scores of one subject are not
independent (training sets overlap), so a t-test over folds is anti-conservative.
Within a subject we therefore build a label-permutation null: the whole cross-validation
is rerun, on the same folds, with labels shuffled in the units the design randomised
(whole stimuli when the label is a stimulus property; see
:mod:`neuroflow.decoding.classification`; epochs of one fold and one recording for
events named by their type, see :func:`neuroflow.decoding.eeg_analyses.permutation_units`). The
observed map and the ``n`` permuted maps are then treated alike, which is what makes the
test exact (Maris & Oostenveld, 2007): a point of any map is supra-threshold when at
most ``cluster_alpha * (n + 1)`` of the ``n + 1`` maps reach its value there (its
per-point permutation p-value is at most ``cluster_alpha``); a cluster's mass is the sum
of ``score - mean(all maps)`` over its points; and a cluster's p-value is ``(1 +
#{permuted maps whose largest cluster mass >= its mass}) / (n + 1)``, which controls the
family-wise error over time (or time × time). Thresholding the permuted maps at
quantiles of a null that includes themselves but not the observed map would give the
observed map more supra-threshold points than any permuted map, and false positives well
above ``cluster_alpha`` with few permutations.

The smallest p-value of ``n`` random permutations is ``1 / (n + 1)``; a test is only
*conclusive* at level ``alpha`` when that is at most ``alpha / 5`` (at least
:func:`min_permutations` permutations: 99 for 0.05), so that significance never hinges
on the observed map beating a handful of random draws. With several subjects,
:func:`group_cluster_test` tests per-subject scores minus chance with
:func:`mne.stats.permutation_cluster_1samp_test` and a variance-regularised ("hat") t
statistic; enumerating all ``2 ** n_subjects`` sign flips, it is exact and conclusive
when its smallest p-value, ``2 ** (1 - n_subjects)`` as MNE counts, is at most
``alpha``: from 6 subjects for 0.05.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mne
import numpy as np
from mne.decoding import GeneralizingEstimator, SlidingEstimator, cross_val_multiscore
from scipy import ndimage
from scipy.stats import rankdata
from sklearn.base import BaseEstimator

from neuroflow.models.selection import near_best
from neuroflow.progress import Progress

from .classification import group_cv, labels_constant_within_groups, make_classifier
from .lda import null_folds, null_scores, sliding_lda_scores

__all__ = [
    "GROUP_SIGMA",
    "RESOLUTION",
    "ClusterResult",
    "cluster_permutation_test",
    "group_cluster_test",
    "min_permutations",
    "n_relabellings",
    "shuffle_labels",
    "sliding_ridge_scores",
    "sliding_ridge_scores_many",
    "time_resolved_null",
    "time_resolved_scores",
]


#: Default candidate penalties of the time-resolved ridge decoders.
RIDGE_ALPHAS = (1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)

#: A Monte Carlo permutation test at level ``alpha`` is conclusive when its smallest
#: attainable p-value, ``1 / (n_permutations + 1)``, is at most ``alpha`` divided by this.
RESOLUTION = 5


def min_permutations(alpha: float) -> int:
    """Fewest random permutations for a conclusive test at level ``alpha``.

    Parameters
    ----------
    alpha : float
        Significance level, in (0, 1).

    Returns
    -------
    n : int
        ``ceil(RESOLUTION / alpha) - 1`` (99 for 0.05, 499 for 0.01, 49 for 0.1): the
        smallest attainable p-value ``1 / (n + 1)`` is then at most ``alpha / 5``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be in (0, 1), got {alpha!r} instead.")
    return int(np.ceil(RESOLUTION / alpha - 1e-9)) - 1


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
        Cluster-forming threshold per point: the value the observed map must exceed.
    n_permutations : int
        Permuted maps the observed one was compared with (the observed map excluded).
    exact : bool
        Whether the permuted maps are every permutation of the test rather than a
        random draw.
    min_p : float
        Smallest attainable p-value; ``1 / (n_permutations + 1)`` when not given.
    """

    labels: np.ndarray
    p_values: np.ndarray
    masses: np.ndarray
    threshold: np.ndarray
    n_permutations: int = 0
    exact: bool = False
    min_p: float = float("nan")

    def __post_init__(self) -> None:
        if np.isnan(self.min_p):
            self.min_p = 1.0 / (self.n_permutations + 1.0)

    def conclusive(self, alpha: float = 0.05) -> bool:
        """Whether the test can reach ``p <= alpha`` reliably.

        Random permutations need ``min_p <= alpha / RESOLUTION`` (at least
        :func:`min_permutations` of them); all permutations need ``min_p <= alpha``.
        """
        if self.exact:
            return self.min_p <= alpha * (1 + 1e-9)
        return self.n_permutations >= min_permutations(alpha)

    def significant(self, alpha: float = 0.05) -> np.ndarray:
        """Mask of points inside clusters with ``p <= alpha``, same shape as ``labels``.

        Nothing is significant when the test is not :meth:`conclusive` at ``alpha``.
        """
        if not self.conclusive(alpha):
            return np.zeros(self.labels.shape, dtype=bool)
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


def _group_labels(y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, ...]:
    """Label of every group (its first item's), group of every item, group sizes."""
    _, g, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    first = np.zeros(sizes.size, dtype=int)
    first[g[::-1]] = np.arange(g.size)[::-1]
    return y[first], g, sizes


def shuffle_labels(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shuffle labels in the unit the design randomised.

    When each group has one label, whole groups exchange labels, but only with groups
    of as many items: the classes keep their numbers of items, as in the design. (Were
    a label given to groups of another size, e.g. a class of images shown 10 times to
    images shown once, the permuted classes would hold far fewer items than the real
    ones, and the null scores would not vary like the observed score.) Otherwise labels
    are shuffled within groups.

    Parameters
    ----------
    y, groups : array-like, shape (n_items,)
        Labels and permutation units (e.g. stimuli, or CV groups).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    y_perm : ndarray, shape (n_items,)
        Shuffled labels; with groups all of one size, the same draw as
        :func:`~neuroflow.decoding.classification.permute_labels`.
    """
    return _shuffler(y, groups)(rng)


def _shuffler(
    y: Sequence[object] | np.ndarray, groups: Sequence[object] | np.ndarray
) -> Callable[[np.random.Generator], np.ndarray]:
    """:func:`shuffle_labels` of fixed ``y`` and ``groups``, set up once for many draws.

    Returns
    -------
    draw : callable
        ``draw(rng)`` is ``shuffle_labels(y, groups, rng)``: the same random draws and
        the same labels.
    """
    y, groups = np.asarray(y), np.asarray(groups)
    if labels_constant_within_groups(y, groups):
        labels, g, sizes = _group_labels(y, groups)
        if np.unique(sizes).size == 1:
            # as permute_labels: whole groups exchange labels
            return lambda rng: labels[rng.permutation(labels.size)][g]
        blocks = [np.flatnonzero(sizes == size) for size in np.unique(sizes)]

        def by_size(rng: np.random.Generator) -> np.ndarray:
            new = labels.copy()
            for idx in blocks:
                new[idx] = labels[idx[rng.permutation(idx.size)]]
            return new[g]

        return by_size
    cells = [np.flatnonzero(groups == u) for u in np.unique(groups)]

    def within(rng: np.random.Generator) -> np.ndarray:
        out = y.copy()
        for idx in cells:
            out[idx] = y[rng.permutation(idx)]
        return out

    return within


def n_relabellings(
    y: Sequence[object] | np.ndarray, groups: Sequence[object] | np.ndarray
) -> float:
    """Distinct labellings :func:`shuffle_labels` can draw, the observed one included.

    Parameters
    ----------
    y, groups : array-like, shape (n_items,)
        Labels and permutation units.

    Returns
    -------
    n : float
        The product, over blocks of exchangeable items (groups of one size when each
        group has one label, else each group), of the multinomial coefficient of the
        block's label counts; ``inf`` when it exceeds the float range. 1 means that
        no permutation changes the labels: the test cannot be done.
    """
    from scipy.special import gammaln

    y, groups = np.asarray(y), np.asarray(groups)
    if labels_constant_within_groups(y, groups):
        labels, _, sizes = _group_labels(y, groups)
        blocks = [labels[sizes == size] for size in np.unique(sizes)]
    else:
        blocks = [y[groups == g] for g in np.unique(groups)]
    log_n = 0.0
    for block in blocks:
        counts = np.unique(block, return_counts=True)[1]
        log_n += gammaln(block.size + 1) - gammaln(counts + 1).sum()
    if log_n >= 700:
        return float("inf")
    n = float(np.exp(log_n))
    return float(np.round(n)) if n < 2**53 else n


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
    units: Sequence[object] | np.ndarray | None = None,
) -> np.ndarray:
    """Fold-averaged scores with shuffled labels (see :func:`shuffle_labels`).

    Every permutation is scored on the folds of the observed labels' analysis (the
    folds depend on ``groups`` only). With ``"lda"``, the permutations are fitted in
    blocks (:func:`~neuroflow.decoding.lda.sliding_lda_null`), with the same result as
    one :func:`time_resolved_scores` per permutation.

    Parameters
    ----------
    X, y, groups, classifier, generalize, n_splits
        As in :func:`time_resolved_scores`.
    n_jobs : int | None
        Parallel jobs: blocks of permutations of the batched ``"lda"`` run in parallel
        (the result does not depend on it); MNE's estimators get them otherwise.
    n_permutations : int
        Number of shuffles.
    seed : int
        Seed of the shuffles.
    units : array-like, shape (n_epochs,) | None
        Units of the shuffles (:func:`shuffle_labels`'s ``groups``), e.g. stimuli,
        so that the repeats of an image keep sharing a label whatever the folds;
        ``None`` for ``groups``.

    Returns
    -------
    null : ndarray, shape (n_permutations, n_times) or (n_permutations, n_times, n_times)
    """
    rng = np.random.default_rng(seed)
    y, groups = np.asarray(y), np.asarray(groups)
    units = groups if units is None else np.asarray(units)
    if units.shape != y.shape:
        raise ValueError(f"`units` must have shape {y.shape}, got {units.shape} instead.")
    draw = _shuffler(y, units)
    labels = [draw(rng) for _ in range(int(n_permutations))]
    batched = isinstance(classifier, str) and classifier == "lda"
    kw = {"classifier": classifier, "generalize": generalize, "n_splits": n_splits}
    what = "classification null" + (" (temporal generalisation)" if generalize else "")
    if batched and labels:
        X = _check_epochs(X, y.shape[0])
        splits = list(group_cv(groups, n_splits).split(X[:, :, 0], y, groups))
        folds = null_folds(X, splits)
        names, codes = np.unique(np.stack(labels), return_inverse=True)
        codes = codes.reshape(len(labels), -1)
        # blocks of permutations fitted together, each ending where the progress report
        # reaches its next 10 %
        ends = np.unique([-(-b * len(labels) // 10) for b in range(1, 11)])
        blocks = [np.arange(a, b) for a, b in zip(np.r_[0, ends[:-1]], ends, strict=True)]
        blocks = [b for b in blocks if b.size]
        kw = {"generalize": generalize}
        parallel = n_jobs is not None and n_jobs != 1 and len(blocks) > 1
    else:
        blocks = [np.array([i]) for i in range(len(labels))]
        parallel = False
    out = []
    with Progress(len(labels), what, "permutations") as progress:
        if batched and parallel:
            from joblib import Parallel, delayed

            scores = Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(null_scores)(folds, codes[b], names, **kw) for b in blocks
            )
        elif batched:
            scores = (null_scores(folds, codes[b], names, **kw) for b in blocks)
        else:
            scores = (
                _mean_scores(X, labels[i], groups, {**kw, "n_jobs": n_jobs})[None]
                for (i,) in blocks
            )
        for block, score in zip(blocks, scores, strict=True):
            out.append(score)
            progress.update(block.size)
    return np.concatenate(out) if out else np.zeros((0, *np.shape(X)[2:]))


def _mean_scores(X: np.ndarray, y: np.ndarray, groups: np.ndarray, kw: dict) -> np.ndarray:
    """Fold-averaged :func:`time_resolved_scores`."""
    return time_resolved_scores(X, y, groups, **kw).mean(axis=0)


def _masses(score: np.ndarray, supra: np.ndarray, centre: np.ndarray) -> tuple:
    labels, n = ndimage.label(supra)
    if n == 0:
        return labels, np.zeros(0)
    masses = ndimage.sum_labels(score - centre, labels, index=np.arange(1, n + 1))
    return labels, np.asarray(masses, dtype=np.float64)


def cluster_permutation_test(
    observed: np.ndarray, null: np.ndarray, *, cluster_alpha: float = 0.05
) -> ClusterResult:
    """Cluster-mass test of a score map against its permutation null.

    The observed map and the permuted maps are thresholded and summed alike (see the
    module notes), so that under the null hypothesis the observed largest cluster mass
    is exchangeable with the permuted ones and the p-values are exact.

    Parameters
    ----------
    observed : array-like, shape (n_times,) or (n_times, n_times)
        Observed score map.
    null : array-like, shape (n_permutations, *observed.shape)
        Score maps under shuffled labels (the same analysis, the same folds).
    cluster_alpha : float
        A point of a map is supra-threshold when at most ``cluster_alpha * (n + 1)`` of
        the ``n + 1`` maps (observed and permuted) reach its value there; supra-threshold
        points adjacent in time (4-connected in a time × time map) form clusters. With
        fewer than ``1 / cluster_alpha - 1`` permutations no point can be.

    Returns
    -------
    result : ClusterResult
        Clusters with p-value ``(1 + #{max null mass >= mass}) / (1 + n_permutations)``,
        a null map without clusters counting as mass 0.
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
    maps = np.concatenate([observed[None], null])
    n_maps = maps.shape[0]
    # maps reaching each map's value at each point, itself included
    reach = n_maps + 1 - rankdata(maps, method="min", axis=0)
    k = int(np.floor(cluster_alpha * n_maps + 1e-9))
    supra = reach <= k
    centre = maps.mean(axis=0)
    labels, masses = _masses(observed, supra[0], centre)
    max_null = np.array(
        [
            max(_masses(m, mask, centre)[1].max(initial=0.0), 0.0)
            for m, mask in zip(null, supra[1:], strict=True)
        ]
    )
    p = (1.0 + (max_null[None, :] >= masses[:, None] - 1e-12).sum(axis=1)) / n_maps
    # the observed value must exceed the k-th largest permuted value
    threshold = -np.sort(-null, axis=0)[k - 1] if k >= 1 else np.full(observed.shape, np.inf)
    return ClusterResult(
        labels=labels,
        p_values=p,
        masses=masses,
        threshold=threshold,
        n_permutations=int(null.shape[0]),
    )


#: Variance regularisation of the group t statistic (:func:`mne.stats.ttest_1samp_no_p`
#: ``sigma``, relative to the largest variance): no division by a zero variance.
GROUP_SIGMA = 1e-3


def group_cluster_test(
    scores: np.ndarray,
    chance: float,
    *,
    cluster_alpha: float = 0.05,
    n_permutations: int = 1024,
    sigma: float = GROUP_SIGMA,
    seed: int = 0,
) -> ClusterResult:
    """Across-subject cluster test of scores above chance (sign flips).

    Parameters
    ----------
    scores : array-like, shape (n_subjects, n_times) or (n_subjects, n_times, n_times)
        One score map per subject.
    chance : float
        Chance level subtracted before the one-sample test.
    cluster_alpha : float
        Points whose t exceeds the one-tailed ``1 - cluster_alpha`` quantile of
        Student's t with ``n_subjects - 1`` degrees of freedom form clusters.
    n_permutations : int
        Sign flips (the identity included); all ``2 ** n_subjects`` are used when they
        are not more, and the test is then exact. MNE then compares the observed map
        with the ``2 ** n_subjects - 1`` flips other than flipping every subject (the
        identity among them again), so the smallest p-value is ``2 ** (1 - n_subjects)``.
    sigma : float
        Variance regularisation of the t statistic ("hat" adjustment of
        :func:`mne.stats.ttest_1samp_no_p`: ``sigma`` times the largest variance is
        added to every point's variance), so that points where every subject scores
        alike do not divide by zero.
    seed : int
        Seed of the sign flips.

    Returns
    -------
    result : ClusterResult
        Clusters of the t map with one-tailed (greater) p-values; ``threshold`` holds
        the t threshold at every point. With ``n`` subjects p is at least
        ``2 ** (1 - n)``, and the result is :meth:`~ClusterResult.conclusive` at
        ``alpha`` only when that is at most ``alpha`` (all flips: 6 subjects for 0.05)
        or enough flips are drawn.
    """
    from functools import partial

    from scipy.stats import t as t_dist

    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim not in (2, 3) or scores.shape[0] < 2:
        raise ValueError(
            "`scores` must have shape (n_subjects >= 2, n_times[, n_times]), "
            f"got {scores.shape} instead."
        )
    if not 0 < cluster_alpha < 1:
        raise ValueError(f"`cluster_alpha` must be in (0, 1), got {cluster_alpha!r} instead.")
    if not sigma > 0:
        raise ValueError(f"`sigma` must be positive, got {sigma!r} instead.")
    n_sub = scores.shape[0]
    exact = 2**n_sub <= n_permutations
    thr = float(t_dist.ppf(1.0 - cluster_alpha, n_sub - 1))
    shape = scores.shape[1:]
    n_perm = 2**n_sub - 1 if exact else int(n_permutations) - 1
    min_p = 2.0 / 2**n_sub if exact else 1.0 / int(n_permutations)
    data = scores - chance
    stat_fun = partial(mne.stats.ttest_1samp_no_p, sigma=sigma)
    # no cluster when every subject has the same map (t undefined) or no t exceeds the
    # threshold (MNE would warn that it found none)
    if not np.var(data, axis=0).max() > 0 or not (stat_fun(data) > thr).any():
        return ClusterResult(
            labels=np.zeros(shape, dtype=int),
            p_values=np.zeros(0),
            masses=np.zeros(0),
            threshold=np.full(shape, thr),
            n_permutations=n_perm,
            exact=exact,
            min_p=min_p,
        )
    test = mne.stats.permutation_cluster_1samp_test
    # MNE 1.13 takes the seed as ``rng`` (and logs a note for ``seed``)
    rng = {"rng" if "rng" in inspect.signature(test).parameters else "seed": seed}
    t_obs, clusters, p, _ = test(
        data,
        threshold=thr,
        tail=1,
        n_permutations=2**n_sub if exact else int(n_permutations),
        stat_fun=stat_fun,
        out_type="mask",
        verbose=False,
        **rng,
    )
    labels = np.zeros(shape, dtype=int)
    for i, mask in enumerate(clusters):
        labels[mask] = i + 1
    masses = np.array([t_obs[m].sum() for m in clusters], dtype=np.float64)
    return ClusterResult(
        labels=labels,
        p_values=np.asarray(p, float),
        masses=masses,
        threshold=np.full(shape, thr),
        n_permutations=n_perm,
        exact=exact,
        min_p=min_p,
    )


def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = train.mean(axis=1, keepdims=True)
    sd = train.std(axis=1, keepdims=True)
    sd = np.where(sd > 0, sd, 1.0)
    return (train - mean) / sd, (test - mean) / sd


def _ridge_fold(
    Xtr: np.ndarray,
    Ytr: np.ndarray,
    Xte: np.ndarray,
    alphas: np.ndarray,
    svd: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Test predictions per time point with per-(time, target) LOO-chosen penalties.

    ``Xtr`` (n_times, n_train, n_channels), ``Ytr`` (n_train, n_targets) centred,
    ``Xte`` (n_times, n_test, n_channels) → (n_times, n_test, n_targets). ``svd`` is
    ``np.linalg.svd(Xtr, full_matrices=False)`` when the caller has it already.

    Leave-one-out errors within round-off of the smallest one are ties, and a tie goes to
    the larger penalty (:func:`~neuroflow.models.selection.near_best`).

    The leave-one-out error of every target is the weighted residual sum
    ``sum_i w_i (y_i - U c)_i^2`` with ``w_i = (1 - h_i)^-2`` and ``c = S Uᵀ y``; it is
    expanded as ``yᵀWy - 2 cᵀ UᵀWy + cᵀ UᵀWU c`` so that only (rank × target) products
    are formed, never the (train × target) fitted values of every target and alpha.
    """
    U, s, Vt = np.linalg.svd(Xtr, full_matrices=False) if svd is None else svd
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
    alphas: Sequence[float] = RIDGE_ALPHAS,
    n_splits: int | None = 5,
    n_permutations: int = 0,
    seed: int = 0,
    units: Sequence[object] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Time-resolved ridge decoding of continuous targets, scored by correlation.

    At each time point, ridge maps the channels to every target; predictions are
    correlated with the targets over the test epochs of each fold (which avoids the
    negative bias of pooling folds whose predictions shrink toward different training
    means) and the correlations are averaged over folds.
    Under the null, target rows are exchanged between whole units (e.g. stimuli), so
    repeats of one stimulus keep sharing targets, and every permutation is fitted on
    the same folds.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    Y : array-like, shape (n_epochs, n_targets)
        Targets (e.g. feature principal components of each epoch's stimulus); equal
        within each unit when ``n_permutations > 0``.
    groups : array-like, shape (n_epochs,)
        CV groups.
    alphas : sequence of float
        Candidate penalties, chosen per time point and target by leave-one-out error
        on the training fold.
    n_splits : int | None
        Grouped folds, or ``None`` for leave-one-group-out.
    n_permutations : int
        Number of unit shuffles of the targets; all are fitted in the same solves.
    seed : int
        Seed of the shuffles.
    units : array-like, shape (n_epochs,) | None
        Units whose targets are exchanged (e.g. stimuli); ``None`` for ``groups``.

    Returns
    -------
    scores : ndarray, shape (n_times, n_targets)
        Pearson r per time point and target.
    null : ndarray, shape (n_permutations, n_times, n_targets)
        The same under shuffled targets.
    """
    ((scores, null),) = sliding_ridge_scores_many(
        X,
        [Y],
        groups,
        alphas=alphas,
        n_splits=n_splits,
        n_permutations=n_permutations,
        seed=seed,
        units=units,
    )
    return scores, null


def sliding_ridge_scores_many(
    X: np.ndarray,
    targets: Sequence[np.ndarray],
    groups: Sequence[object] | np.ndarray,
    *,
    alphas: Sequence[float] = RIDGE_ALPHAS,
    n_splits: int | None = 5,
    n_permutations: int = 0,
    seed: int = 0,
    units: Sequence[object] | np.ndarray | None = None,
    what: str = "time-resolved ridge decoding",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`sliding_ridge_scores` of several target sets on the same epochs and folds.

    Each training fold's epochs are decomposed (SVD per time point) once for all target
    sets (e.g. the feature spaces of one subject), which is most of the work; every set
    gets the numbers :func:`sliding_ridge_scores` gives it alone, bit for bit, with the
    same shuffles.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    targets : sequence of array-like, each shape (n_epochs, n_targets_i)
        Target sets; the number of targets may differ between sets.
    groups, alphas, n_splits, n_permutations, seed, units
        As in :func:`sliding_ridge_scores`.
    what : str
        What the progress lines (one per few percent of the folds) call the step.

    Returns
    -------
    results : list of (scores, null)
        Per target set: scores (n_times, n_targets_i) and null (n_permutations,
        n_times, n_targets_i).
    """
    Ys = [np.asarray(Y, dtype=np.float64) for Y in targets]
    for Y in Ys:
        if Y.ndim != 2:
            raise ValueError(f"`Y` must have shape (n_epochs, n_targets), got {Y.shape} instead.")
    if not Ys:
        return []
    n = Ys[0].shape[0]
    if any(Y.shape[0] != n for Y in Ys):
        raise ValueError(
            "Every target set must have one row per epoch, got "
            f"{[Y.shape[0] for Y in Ys]} rows instead."
        )
    X = _check_epochs(X, n)
    groups = np.asarray(groups)
    if groups.shape != (Y.shape[0],):
        raise ValueError(f"`groups` must have shape ({Y.shape[0]},), got {groups.shape} instead.")
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or alphas.size == 0 or np.any(alphas <= 0):
        raise ValueError(f"`alphas` must be positive floats, got {alphas.tolist()!r} instead.")
    units = groups if units is None else np.asarray(units)
    if units.shape != (n,):
        raise ValueError(f"`units` must have shape ({n},), got {units.shape} instead.")
    rng = np.random.default_rng(seed)
    uniq, g = np.unique(units, return_inverse=True)
    first = np.zeros(uniq.size, dtype=int)
    first[g[::-1]] = np.arange(n)[::-1]
    if n_permutations and not all(np.array_equal(Y, Y[first][g]) for Y in Ys):
        raise ValueError(
            "`Y` must be equal within each permutation unit (the epochs of one stimulus) "
            "when `n_permutations` > 0, got different rows within a unit instead."
        )
    rows = [np.arange(n)] + [first[rng.permutation(uniq.size)][g] for _ in range(n_permutations)]
    Y_alls = [np.concatenate([Y[r] for r in rows], axis=1) for Y in Ys]
    Xt = np.moveaxis(X, 2, 0)
    r_sums = [np.zeros((X.shape[2], Y_all.shape[1])) for Y_all in Y_alls]
    folds = list(group_cv(groups, n_splits).split(Ys[0], groups=groups))
    progress = Progress(len(folds), what, "folds")
    for train, test in folds:
        Xtr, Xte = _standardise(Xt[:, train], Xt[:, test])
        svd = np.linalg.svd(Xtr, full_matrices=False)
        for Y_all, r_sum in zip(Y_alls, r_sums, strict=True):
            mean = Y_all[train].mean(axis=0)
            pred = _ridge_fold(Xtr, Y_all[train] - mean, Xte, alphas, svd=svd)
            r_sum += _fold_r(pred, Y_all[test])
        progress.update()
    progress.close()
    out = []
    for Y, r_sum in zip(Ys, r_sums, strict=True):
        r = (r_sum / len(folds)).reshape(X.shape[2], n_permutations + 1, Y.shape[1])
        out.append((r[:, 0], np.moveaxis(r[:, 1:], 1, 0)))
    return out


def _fold_r(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Pearson r over test items, (n_times, n_test, m) vs (n_test, m) → (n_times, m)."""
    pc = pred - pred.mean(axis=1, keepdims=True)
    yc = target - target.mean(axis=0)
    num = np.einsum("tnm,nm->tm", pc, yc)
    den = np.sqrt((pc**2).sum(axis=1) * (yc**2).sum(axis=0))
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

"""Significance of per-target scores at whole-brain scale.

A permutation test with ``n`` re-alignments cannot give a p-value below
``1 / (n + 1)``; Benjamini–Hochberg over ``m`` targets needs p-values near
``q k / m`` for ``k`` discoveries, so with 1,000 permutations and 200,000 voxels
of which 1 % carry signal (``k`` ≈ 2,000, ``q k / m`` ≈ 5e-4) the exact test
can never report a discovery. This module adds, on top of the same permutation
null (:func:`neuroflow.evaluation.permutation.permutation_null`):

- **tail approximations** of each target's null, used only where fewer than
  :data:`MIN_EXCEEDANCES` null values reach the observed statistic (elsewhere the
  exact permutation p is accurate and kept):

  - ``"gpd"``: a generalized Pareto distribution fitted to the
    :data:`N_TAIL` largest null values of the Fisher-z transformed statistic
    (Knijnenburg et al., 2009, Bioinformatics 25, i161–i168; Winkler et al., 2016,
    NeuroImage 141, 502–516), by probability-weighted moments (Hosking & Wallis,
    1987, Technometrics 29, 339–349), vectorised over targets. An observed value
    beyond the fitted tail's end point gets the Gaussian approximation instead.
  - ``"gaussian"``: the Fisher-z statistic against a normal distribution with the
    mean and standard deviation of its permutation null; the null's variance
    carries the effective sample size that autocorrelation leaves.

- **family-wise error control** by the maximum statistic over targets
  (Westfall & Young, 1993; Nichols & Holmes, 2002), per ROI or over all
  targets, on statistics standardised by each target's null (so that targets with
  more autocorrelation, hence a wider null, do not dominate the maximum);
- **cluster-level inference** on brain maps: clusters of neighbouring voxels
  above a cluster-forming threshold of the standardised statistic, their mass
  tested against the permutation distribution of the largest cluster mass
  (Bullmore et al., 1999; Smith & Nichols, 2009).

Observations and predictions are prewhitened, and the null widened for the
cleaning's projection, by :mod:`neuroflow.evaluation.prewhitening`.

Targets are processed in chunks, so memory stays bounded by the chunk whatever
the number of targets (cluster inference keeps the standardised null, float32
``(n_permutations, n_targets)``, as it needs whole maps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage, special

from neuroflow.evaluation.metrics import pearson_r
from neuroflow.evaluation.permutation import ALTERNATIVES, permutation_null
from neuroflow.evaluation.prewhitening import (
    _check_nuisance_rank,
    ar_prewhiten,
    null_widening,
    whitened_basis,
)

__all__ = [
    "MIN_EXCEEDANCES",
    "N_TAIL",
    "TAIL_METHODS",
    "ClusterResult",
    "PermutationInference",
    "cluster_mass_test",
    "exact_pvalues",
    "fisher_z",
    "gaussian_tail_pvalues",
    "gpd_tail_pvalues",
    "maxstat_pvalues",
    "permutation_inference",
    "standardize_by_null",
    "tail_pvalues",
]


#: Accepted values of ``tail``.
TAIL_METHODS = ("none", "gpd", "gaussian")


#: The exact permutation p is kept where at least this many null values reach the
#: observed statistic (Knijnenburg et al., 2009).
MIN_EXCEEDANCES = 10


#: Null values the generalized Pareto tail is fitted to (at most a quarter of the null).
N_TAIL = 250


#: Targets per chunk: a (n_permutations, chunk) float64 null of about 64 MB at 1,000
#: permutations.
CHUNK_TARGETS = 8192


_Z_CLIP = 1.0 - 1e-7


def fisher_z(r: np.ndarray) -> np.ndarray:
    """Fisher's z transform of correlations, ``arctanh(r)`` (``|r|`` clipped below 1).

    Parameters
    ----------
    r : array-like, shape (...)
        Correlations.

    Returns
    -------
    z : ndarray of float64, shape (...)
    """
    return np.arctanh(np.clip(np.asarray(r, dtype=np.float64), -_Z_CLIP, _Z_CLIP))


def _oriented(observed: np.ndarray, null: np.ndarray, alternative: str):
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"`alternative` must be one of {', '.join(ALTERNATIVES)}, got {alternative!r} instead."
        )
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    if null.ndim != 2 or observed.shape != null.shape[1:]:
        raise ValueError(
            f"`null` must have shape (n_null, {observed.shape[0] if observed.ndim else '?'}) "
            f"matching `observed` {observed.shape}, got {null.shape} instead."
        )
    if alternative == "two-sided":
        return np.abs(observed), np.abs(null)
    return observed, null


def exact_pvalues(
    observed: np.ndarray, null: np.ndarray, *, alternative: str = "greater"
) -> tuple[np.ndarray, np.ndarray]:
    """Exact permutation p-values ``(1 + count) / (1 + n_null)`` and the counts.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed statistic.
    null : array-like, shape (n_null, n_targets)
        Null statistics.
    alternative : ``"greater"`` | ``"two-sided"``
        Direction of the test (absolute values for ``"two-sided"``).

    Returns
    -------
    p : ndarray of float64, shape (n_targets,)
        NaN where ``observed`` is NaN.
    count : ndarray of int, shape (n_targets,)
        Null values that reach the observed statistic.
    """
    obs, nul = _oriented(observed, null, alternative)
    tol = 1e-12 * np.maximum(1.0, np.abs(obs))
    count = (nul >= obs - tol).sum(axis=0)
    p = (1.0 + count) / (1.0 + nul.shape[0])
    return np.where(np.isnan(obs), np.nan, p), count


def gaussian_tail_pvalues(
    observed: np.ndarray, null: np.ndarray, *, alternative: str = "greater"
) -> np.ndarray:
    """Normal approximation of each target's Fisher-z permutation null.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed correlations.
    null : array-like, shape (n_null, n_targets)
        Null correlations.
    alternative : ``"greater"`` | ``"two-sided"``
        ``"two-sided"`` doubles the smaller tail.

    Returns
    -------
    p : ndarray of float64, shape (n_targets,)
        ``P(Z >= (z_obs - mean) / sd)`` with ``Z`` standard normal; NaN where
        ``observed`` is NaN, 0.5 where the null is constant.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"`alternative` must be one of {', '.join(ALTERNATIVES)}, got {alternative!r} instead."
        )
    z_obs = fisher_z(observed)
    z_null = fisher_z(null)
    mean = z_null.mean(axis=0)
    sd = z_null.std(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(sd > 0, (z_obs - mean) / np.where(sd > 0, sd, 1.0), 0.0)
    if alternative == "two-sided":
        p = np.minimum(1.0, 2.0 * special.ndtr(-np.abs(score)))
    else:
        p = special.ndtr(-score)
    return np.where(np.isnan(np.asarray(observed, dtype=np.float64)), np.nan, p)


def _gpd_pwm(excess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Generalized Pareto shape ``k`` and scale ``a`` by probability-weighted moments.

    ``excess`` (n_tail, n_targets), sorted ascending along axis 0, all >= 0. Hosking &
    Wallis (1987): ``a0 = mean(x)``, ``a1 = mean((1 - p_i) x_(i))`` with plotting
    positions ``p_i = (i - 0.35) / n``; ``k = a0 / (a0 - 2 a1) - 2`` and
    ``a = 2 a0 a1 / (a0 - 2 a1)``, in Hosking's parameterisation
    ``S(x) = (1 - k x / a) ** (1 / k)`` (``k > 0``: a finite end point ``a / k``).
    """
    n = excess.shape[0]
    plotting = (np.arange(1, n + 1) - 0.35) / n
    a0 = excess.mean(axis=0)
    a1 = ((1.0 - plotting)[:, None] * excess).mean(axis=0)
    denom = a0 - 2.0 * a1
    with np.errstate(divide="ignore", invalid="ignore"):
        k = a0 / denom - 2.0
        scale = 2.0 * a0 * a1 / denom
    # A fitted end point (k > 0) puts p = 0 just beyond the largest null values: for
    # correlation nulls, whose tails are close to Gaussian, that end point is an
    # artefact of the sample and the p-values beyond it are off by orders of magnitude.
    # The shape is kept at or below 0 (an exponential tail at most), which is
    # conservative for such tails.
    bounded = ~(k <= 0)
    return np.where(bounded, 0.0, k), np.where(bounded, a0, scale)


def _gpd_survival(x: np.ndarray, k: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``S(x)`` of the generalized Pareto distribution (Hosking's ``k``), ``x >= 0``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        small = np.abs(k) < 1e-9
        base = 1.0 - k * x / scale
        general = np.where(base > 0, np.exp(np.log(np.maximum(base, 1e-300)) / k), 0.0)
        out = np.where(small, np.exp(-x / scale), general)
    return np.where(np.isfinite(out) & (scale > 0), np.clip(out, 0.0, 1.0), np.nan)


def gpd_tail_pvalues(
    observed: np.ndarray,
    null: np.ndarray,
    *,
    alternative: str = "greater",
    n_tail: int = N_TAIL,
) -> np.ndarray:
    """Generalized Pareto approximation of the upper tail of each target's null.

    The ``n_tail`` largest Fisher-z null values (at most a quarter of the null)
    define the tail: with ``t`` the midpoint between the ``n_tail``-th and the next
    largest value, ``P(Z >= z) ≈ (n_tail / n_null) · S(z - t)`` for ``z > t``, with
    ``S`` the generalized Pareto survival function fitted to the excesses.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed correlations.
    null : array-like, shape (n_null, n_targets)
        Null correlations, at least 40 per target.
    alternative : ``"greater"`` | ``"two-sided"``
        ``"two-sided"`` fits the tail of absolute values.
    n_tail : int
        Null values in the fitted tail.

    Returns
    -------
    p : ndarray of float64, shape (n_targets,)
        The approximation where the observed value lies above ``t``, NaN elsewhere
        and where ``observed`` is NaN; the Gaussian approximation
        (:func:`gaussian_tail_pvalues`) where it lies beyond the fitted tail's end point.
    """
    obs, nul = _oriented(observed, null, alternative)
    n_null = nul.shape[0]
    if n_null < 40:
        raise ValueError(
            f"`null` must hold at least 40 values per target for a tail fit, got {n_null} instead."
        )
    m = int(min(n_tail, n_null // 4))
    z_obs, z_null = fisher_z(obs), fisher_z(nul)
    top = np.sort(np.partition(z_null, n_null - m - 1, axis=0)[n_null - m - 1 :], axis=0)
    threshold = 0.5 * (top[0] + top[1])
    excess = top[1:] - threshold
    k, scale = _gpd_pwm(excess)
    p = (m / n_null) * _gpd_survival(np.maximum(z_obs - threshold, 0.0), k, scale)
    p = np.where(z_obs > threshold, p, np.nan)
    beyond = (p == 0) | (np.isnan(p) & (z_obs > threshold))
    if beyond.any():
        gauss = gaussian_tail_pvalues(obs, nul, alternative="greater")
        if alternative == "two-sided":
            gauss = np.minimum(1.0, 2.0 * gauss)
        p = np.where(beyond, gauss, p)
    return np.where(np.isnan(obs), np.nan, p)


def tail_pvalues(
    observed: np.ndarray,
    null: np.ndarray,
    *,
    tail: str = "gpd",
    alternative: str = "greater",
    min_exceedances: int = MIN_EXCEEDANCES,
) -> tuple[np.ndarray, np.ndarray]:
    """P-values finer than the permutation count, and the exact ones.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed correlations.
    null : array-like, shape (n_null, n_targets)
        Their permutation null.
    tail : ``"none"`` | ``"gpd"`` | ``"gaussian"``
        Approximation used where fewer than ``min_exceedances`` null values reach the
        observed statistic; ``"none"`` keeps the exact p everywhere.
    alternative : ``"greater"`` | ``"two-sided"``
        Direction of the test.
    min_exceedances : int
        Exceedances from which the exact p is used.

    Returns
    -------
    p : ndarray of float64, shape (n_targets,)
        The p-value to test with.
    p_exact : ndarray of float64, shape (n_targets,)
        The exact permutation p, ``(1 + count) / (1 + n_null)``.
    """
    if tail not in TAIL_METHODS:
        raise ValueError(f"`tail` must be one of {', '.join(TAIL_METHODS)}, got {tail!r} instead.")
    p_exact, count = exact_pvalues(observed, null, alternative=alternative)
    if tail == "none":
        return p_exact, p_exact
    rare = count < min_exceedances
    if not rare.any():
        return p_exact, p_exact
    p = p_exact.copy()
    obs = np.asarray(observed, dtype=np.float64)[rare]
    nul = np.asarray(null, dtype=np.float64)[:, rare]
    if tail == "gpd":
        approx = gpd_tail_pvalues(obs, nul, alternative=alternative)
    else:
        approx = gaussian_tail_pvalues(obs, nul, alternative=alternative)
    p[rare] = np.where(np.isnan(approx), p_exact[rare], approx)
    return p, p_exact


def standardize_by_null(
    observed: np.ndarray, null: np.ndarray, *, alternative: str = "greater"
) -> tuple[np.ndarray, np.ndarray]:
    """Fisher-z statistics standardised by each target's null mean and SD.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed correlations.
    null : array-like, shape (n_null, n_targets)
        Null correlations.
    alternative : ``"greater"`` | ``"two-sided"``
        ``"two-sided"`` returns absolute standardised values.

    Returns
    -------
    z_observed : ndarray of float64, shape (n_targets,)
    z_null : ndarray of float64, shape (n_null, n_targets)
        ``(fisher_z(x) - mean) / sd``, with the mean and SD over the null and the
        observed value together (a standardisation the same for every permutation,
        the identity included); NaN-free (0 where the null is
        constant or the observation NaN, so such targets never win a maximum).
    """
    z_obs, z_null = fisher_z(observed), fisher_z(null)
    # the observed value counts in the mean and SD like every null value: a
    # standardisation that left it out would treat it unlike the permutations and make
    # the maximum statistic anti-conservative (about 0.06 instead of 0.05 measured)
    both = np.vstack([np.where(np.isfinite(z_obs), z_obs, 0.0)[None], z_null])
    mean = both.mean(axis=0)
    sd = both.std(axis=0, ddof=1)
    ok = np.isfinite(sd) & (sd > 0)
    safe = np.where(ok, sd, 1.0)
    zo = np.where(ok & np.isfinite(z_obs), (z_obs - mean) / safe, 0.0)
    zn = np.where(ok, (z_null - mean) / safe, 0.0)
    if alternative == "two-sided":
        return np.abs(zo), np.abs(zn)
    return zo, zn


def maxstat_pvalues(
    z_observed: np.ndarray, group_max_null: np.ndarray, groups: np.ndarray
) -> np.ndarray:
    """Family-wise error corrected p-values from the maximum statistic per group.

    Parameters
    ----------
    z_observed : array-like, shape (n_targets,)
        Standardised observed statistic (:func:`standardize_by_null`).
    group_max_null : array-like, shape (n_null, n_groups)
        Per permutation, the largest standardised null statistic in each group.
    groups : array-like of int, shape (n_targets,)
        Group index of every target (all 0 for one family over all targets).

    Returns
    -------
    p_fwer : ndarray of float64, shape (n_targets,)
        ``(1 + #{perm: max_group >= z}) / (1 + n_null)``.
    """
    z_observed = np.asarray(z_observed, dtype=np.float64)
    group_max_null = np.asarray(group_max_null, dtype=np.float64)
    groups = np.asarray(groups, dtype=int)
    out = np.empty(z_observed.shape)
    for g in np.unique(groups):
        sel = groups == g
        sorted_max = np.sort(group_max_null[:, g])
        below = np.searchsorted(sorted_max, z_observed[sel] - 1e-12, side="left")
        out[sel] = (1.0 + sorted_max.size - below) / (1.0 + sorted_max.size)
    return out


@dataclass(frozen=True)
class ClusterResult:
    """Clusters of a map and their permutation p-values.

    Attributes
    ----------
    labels : ndarray of int, shape (n_targets,)
        Cluster of every target (0: below the cluster-forming threshold), numbered from
        the largest mass.
    mass : ndarray of float64, shape (n_clusters,)
        Sum of the excess over the threshold in each cluster.
    p_values : ndarray of float64, shape (n_clusters,)
        ``(1 + #{perm: largest null mass >= mass}) / (1 + n_null)``.
    null_max_mass : ndarray of float64, shape (n_null,)
        Largest cluster mass of every permutation (0 when none).
    """

    labels: np.ndarray
    mass: np.ndarray
    p_values: np.ndarray
    null_max_mass: np.ndarray

    def target_p(self) -> np.ndarray:
        """p-value of each target's cluster, NaN outside clusters (n_targets,)."""
        p = np.full(self.labels.shape, np.nan)
        inside = self.labels > 0
        p[inside] = self.p_values[self.labels[inside] - 1]
        return p


def _structure(connectivity: int) -> np.ndarray:
    rank = {6: 1, 18: 2, 26: 3}.get(int(connectivity))
    if rank is None:
        raise ValueError(f"`connectivity` must be 6, 18 or 26, got {connectivity!r} instead.")
    return ndimage.generate_binary_structure(3, rank)


def _cluster_masses(
    values: np.ndarray, ijk: np.ndarray, shape: tuple[int, int, int], threshold: float, structure
) -> tuple[np.ndarray, np.ndarray]:
    """Cluster label of every target and the mass of every cluster (unsorted)."""
    grid = np.zeros(shape, dtype=bool)
    above = values > threshold
    grid[tuple(ijk[above].T)] = True
    labeled, n = ndimage.label(grid, structure=structure)
    labels = labeled[tuple(ijk.T)]
    labels[~above] = 0
    mass = np.bincount(labels, weights=np.where(above, values - threshold, 0.0), minlength=n + 1)
    return labels, mass[1:]


def cluster_mass_test(
    z_observed: np.ndarray,
    z_null: np.ndarray,
    ijk: np.ndarray,
    *,
    threshold: float = 3.1,
    connectivity: int = 26,
) -> ClusterResult:
    """Cluster-mass permutation test of a map of standardised statistics.

    Parameters
    ----------
    z_observed : array-like, shape (n_targets,)
        Standardised observed statistic of every voxel.
    z_null : array-like, shape (n_null, n_targets)
        The same statistic under each permutation (one whole map per row).
    ijk : array-like of int, shape (n_targets, 3)
        Voxel indices in the image grid.
    threshold : float
        Cluster-forming threshold on the standardised statistic (3.1: one-sided
        p ≈ 0.001).
    connectivity : 6 | 18 | 26
        Voxels that count as neighbours (faces, edges, corners).

    Returns
    -------
    result : ClusterResult
    """
    z_observed = np.asarray(z_observed, dtype=np.float64)
    ijk = np.asarray(ijk, dtype=np.int64)
    if ijk.ndim != 2 or ijk.shape != (z_observed.size, 3):
        raise ValueError(f"`ijk` must have shape ({z_observed.size}, 3), got {ijk.shape} instead.")
    if not np.isfinite(threshold):
        raise ValueError(f"`threshold` must be a finite float, got {threshold!r} instead.")
    structure = _structure(connectivity)
    origin = ijk.min(axis=0)
    local = ijk - origin
    shape = tuple(int(s) for s in local.max(axis=0) + 1)
    labels, mass = _cluster_masses(z_observed, local, shape, threshold, structure)
    null_max = np.zeros(z_null.shape[0])
    for i in range(z_null.shape[0]):
        _, m = _cluster_masses(
            np.asarray(z_null[i], np.float64), local, shape, threshold, structure
        )
        null_max[i] = m.max() if m.size else 0.0
    order = np.argsort(-mass, kind="stable")
    relabel = np.zeros(mass.size + 1, dtype=int)
    relabel[order + 1] = np.arange(1, mass.size + 1)
    mass = mass[order]
    sorted_null = np.sort(null_max)
    below = np.searchsorted(sorted_null, mass - 1e-12, side="left")
    p = (1.0 + sorted_null.size - below) / (1.0 + sorted_null.size)
    return ClusterResult(relabel[labels], mass, p, null_max)


@dataclass
class PermutationInference:
    """Everything the evaluation stage stores about one store's significance.

    Attributes
    ----------
    r : ndarray, shape (n_targets,)
        Observed correlations.
    p : ndarray, shape (n_targets,)
        P-values tested with (tail-approximated where asked).
    p_exact : ndarray, shape (n_targets,)
        Exact permutation p-values.
    p_fwer : ndarray | None, shape (n_targets,)
        Max-statistic family-wise corrected p-values (when asked).
    clusters : ClusterResult | None
        Cluster-mass test (when asked).
    n_null : int
        Null values per target.
    """

    r: np.ndarray
    p: np.ndarray
    p_exact: np.ndarray
    p_fwer: np.ndarray | None = None
    clusters: ClusterResult | None = None
    n_null: int = 0
    notes: list[str] = field(default_factory=list)


def permutation_inference(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    n_permutations: int = 1000,
    method: str = "block",
    block_length: int = 10,
    seed: int | None = 0,
    alternative: str = "greater",
    tail: str = "gaussian",
    prewhiten: int = 0,
    nuisance: np.ndarray | None = None,
    segments: Sequence[int] | None = None,
    fwer_groups: Sequence[object] | np.ndarray | None = None,
    cluster_ijk: np.ndarray | None = None,
    cluster_threshold: float = 3.1,
    cluster_connectivity: int = 26,
    chunk: int = CHUNK_TARGETS,
) -> PermutationInference:
    """Permutation test of every target's correlation, in chunks of targets.

    Every chunk uses the same re-alignments (one seed), so the maximum statistic and
    the cluster maps are taken over one set of permutations.

    Parameters
    ----------
    y_true, y_pred : array-like, shape (n_times, n_targets)
        Observed responses and predictions.
    n_permutations, method, block_length, seed
        See :func:`~neuroflow.evaluation.permutation.permutation_null`.
    alternative : ``"greater"`` | ``"two-sided"``
        Direction of the test.
    tail : ``"none"`` | ``"gpd"`` | ``"gaussian"``
        See :func:`tail_pvalues`.
    prewhiten : int
        AR order of :func:`ar_prewhiten`, applied before the test (0: none). The
        returned ``r`` is always the correlation of the raw time courses; p-values test
        the correlation of the whitened ones.
    nuisance : ndarray, shape (n_times, n_nuisance) | None
        Orthonormal basis the cleaning projected out of the time courses (drifts,
        confounds). Cleaned time courses vary in ``n - k`` dimensions only, while
        re-aligned ones vary in all ``n``: the whitening's autocovariances are corrected
        for the projection (:func:`projected_lag_matrix`), both (whitened) series are
        projected out of the basis again (:func:`whitened_basis`), and each target's null
        correlations are multiplied by :func:`null_widening`, the exact expected effect of
        re-projecting each re-aligned prediction (Freedman and Lane, 1983); about
        ``sqrt((n - 1) / (n - k))`` for white predictions, more for smooth ones. The
        returned ``r`` stays that of the raw time courses. ``None``: none of these.
    segments : sequence of int | None
        Lengths of the runs the time courses concatenate (whitening stays within each).
    fwer_groups : array-like, shape (n_targets,) | None
        Family of every target for the max-statistic correction (e.g. ROI labels, or
        one value for all targets); ``None`` skips it.
    cluster_ijk : array-like of int, shape (n_targets, 3) | None
        Voxel indices for cluster-mass inference; ``None`` skips it.
    cluster_threshold : float
        Cluster-forming threshold on the standardised statistic.
    cluster_connectivity : 6 | 18 | 26
        Neighbourhood of a voxel.
    chunk : int
        Targets per chunk.

    Returns
    -------
    result : PermutationInference
    """
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.ndim != 2 or y_true.shape != y_pred.shape:
        raise ValueError(
            "`y_true` and `y_pred` must both have shape (n_times, n_targets), "
            f"got {y_true.shape} and {y_pred.shape} instead."
        )
    n_targets = y_true.shape[1]
    r_raw = None
    if nuisance is not None:
        nuisance = np.asarray(nuisance, dtype=np.float64)
        if nuisance.shape[0] != y_true.shape[0]:
            raise ValueError(
                f"`nuisance` must have one row per time point ({y_true.shape[0]}), got "
                f"{nuisance.shape[0]} instead."
            )
    if prewhiten or nuisance is not None:
        r_raw = np.clip(pearson_r(y_true, y_pred), -1.0, 1.0)
    if prewhiten:
        y_true, y_pred = ar_prewhiten(
            y_true, y_pred, prewhiten, nuisance=nuisance, segments=segments
        )
    widen = None
    if nuisance is not None:
        _check_nuisance_rank(y_true.shape[0], int(nuisance.shape[1]))
        # whitening moves the series out of the cleaned subspace: both are projected
        # again, and the null widened for what re-aligning puts back into the basis
        basis = whitened_basis(nuisance, int(prewhiten), segments)
        y_true = np.asarray(y_true, dtype=np.float64)
        y_pred = np.asarray(y_pred, dtype=np.float64)
        y_true = y_true - basis @ (basis.T @ y_true)
        y_pred = y_pred - basis @ (basis.T @ y_pred)
        widen = null_widening(y_pred, basis, method=method, block_length=block_length)
    if fwer_groups is not None:
        labels = np.array([str(g) for g in np.asarray(fwer_groups).ravel()], dtype=object)
        _, group_idx = np.unique(labels, return_inverse=True)
        if group_idx.size != n_targets:
            raise ValueError(
                f"`fwer_groups` must have one entry per target ({n_targets}), got "
                f"{group_idx.size} instead."
            )
        n_groups = int(group_idx.max()) + 1 if n_targets else 0
    r = np.empty(n_targets)
    p = np.empty(n_targets)
    p_exact = np.empty(n_targets)
    z_obs = np.empty(n_targets)
    group_max: np.ndarray | None = None
    z_null_all: np.ndarray | None = None
    n_null = 0
    for start in range(0, n_targets, max(1, int(chunk))):
        sl = slice(start, min(n_targets, start + max(1, int(chunk))))
        r_c, null = permutation_null(
            y_true[:, sl],
            y_pred[:, sl],
            n_permutations=n_permutations,
            method=method,
            block_length=block_length,
            seed=seed,
        )
        if widen is not None:
            null = np.clip(null * widen[sl], -1.0, 1.0)
        n_null = null.shape[0]
        r[sl] = r_c
        p[sl], p_exact[sl] = tail_pvalues(r_c, null, tail=tail, alternative=alternative)
        if fwer_groups is None and cluster_ijk is None:
            continue
        zo, zn = standardize_by_null(r_c, null, alternative=alternative)
        z_obs[sl] = zo
        if fwer_groups is not None:
            if group_max is None:
                group_max = np.full((n_null, n_groups), -np.inf)
            idx = group_idx[sl]
            for g in np.unique(idx):
                np.maximum(group_max[:, g], zn[:, idx == g].max(axis=1), out=group_max[:, g])
        if cluster_ijk is not None:
            if z_null_all is None:
                z_null_all = np.empty((n_null, n_targets), dtype=np.float32)
            z_null_all[:, sl] = zn
    if r_raw is not None:
        r = np.where(np.isnan(r), np.nan, r_raw)
    result = PermutationInference(r=r, p=p, p_exact=p_exact, n_null=n_null)
    if fwer_groups is not None and group_max is not None:
        result.p_fwer = np.where(np.isnan(r), np.nan, maxstat_pvalues(z_obs, group_max, group_idx))
    if cluster_ijk is not None and z_null_all is not None:
        result.clusters = cluster_mass_test(
            z_obs,
            z_null_all,
            cluster_ijk,
            threshold=cluster_threshold,
            connectivity=cluster_connectivity,
        )
    return result

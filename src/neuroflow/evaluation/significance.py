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

Targets are processed in chunks, so memory stays bounded by the chunk whatever
the number of targets (cluster inference keeps the standardised null, float32
``(n_permutations, n_targets)``, as it needs whole maps).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage, special

from neuroflow.evaluation.metrics import pearson_r
from neuroflow.evaluation.permutation import ALTERNATIVES, permutation_null, valid_shifts

__all__ = [
    "MIN_EXCEEDANCES",
    "N_TAIL",
    "TAIL_METHODS",
    "ClusterResult",
    "PermutationInference",
    "ar_prewhiten",
    "cluster_mass_test",
    "exact_pvalues",
    "fisher_z",
    "gaussian_tail_pvalues",
    "gpd_tail_pvalues",
    "maxstat_pvalues",
    "null_widening",
    "permutation_inference",
    "projected_lag_matrix",
    "standardize_by_null",
    "tail_pvalues",
    "whitened_basis",
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


def _shift(z: np.ndarray, lag: int, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """``S_lag z`` within segments: row ``t`` holds ``z[t + lag]`` (0 past a segment's end)."""
    out = np.zeros_like(z)
    for start, stop in bounds:
        if stop - start > lag:
            out[start : stop - lag] = z[start + lag : stop]
    return out


def _shift_back(z: np.ndarray, lag: int, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """``S_lagᵀ z`` within segments: row ``t`` holds ``z[t - lag]``."""
    out = np.zeros_like(z)
    for start, stop in bounds:
        if stop - start > lag:
            out[start + lag : stop] = z[start : stop - lag]
    return out


def _bounds(segments: Sequence[int], n_times: int) -> list[tuple[int, int]]:
    lengths = [int(v) for v in segments]
    if any(v < 1 for v in lengths) or sum(lengths) != n_times:
        raise ValueError(
            f"`segments` must be positive lengths that sum to n_times ({n_times}), got "
            f"{lengths} instead."
        )
    edges = np.cumsum([0, *lengths])
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def projected_lag_matrix(
    basis: np.ndarray, order: int, segments: Sequence[int] | None = None
) -> np.ndarray:
    """How projecting out a basis biases the lagged sums of products of a time series.

    With ``M = I - Q Qᵀ`` and a stationary series of autocovariances ``γ_j`` (0 beyond
    lag ``order``), the lag-``l`` sum of products of ``M y`` has expectation
    ``sum_j C[l, j] γ_j`` with ``C[l, j] = tr(M S_l M T_j)`` (``S_l``: lag-``l`` shift,
    ``T_j = S_j + S_jᵀ``, ``T_0 = I``, all within segments). Solving ``C γ = a`` for the
    observed sums ``a`` corrects the autocorrelation estimates of cleaned series, as
    fmristat does (Worsley et al., 2002): the projection otherwise makes them too small
    (or negative), and whitening with them leaves the null too narrow.

    Parameters
    ----------
    basis : ndarray, shape (n_times, n_nuisance)
        Orthonormal columns projected out of the series.
    order : int
        Largest lag.
    segments : sequence of int | None
        Lengths of the runs the series concatenates (lags never cross them); ``None``:
        one run.

    Returns
    -------
    C : ndarray, shape (order + 1, order + 1)
    """
    q = np.asarray(basis, dtype=np.float64)
    n_times = q.shape[0]
    bounds = _bounds(segments if segments is not None else [n_times], n_times)
    lengths = [b - a for a, b in bounds]

    def sym(z: np.ndarray, j: int) -> np.ndarray:
        return z if j == 0 else _shift(z, j, bounds) + _shift_back(z, j, bounds)

    c = np.zeros((order + 1, order + 1))
    for lag in range(order + 1):
        s_q = _shift(q, lag, bounds)  # S_l Q
        st_q = _shift_back(q, lag, bounds)  # S_lᵀ Q
        qsq = q.T @ s_q  # Qᵀ S_l Q
        for j in range(order + 1):
            t_q = sym(q, j)  # T_j Q
            trace_ab = sum(max(0, n - lag) for n in lengths) if j == lag else 0.0
            # tr(P S_l T_j) = tr(Qᵀ S_l T_j Q); tr(S_l P T_j) = tr(Qᵀ T_j S_l Q)
            c[lag, j] = (
                trace_ab
                - float(np.sum(st_q * t_q))
                - float(np.sum(q * sym(s_q, j)))
                + float(np.sum(qsq * (q.T @ t_q).T))
            )
    return c


def ar_prewhiten(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    order: int,
    *,
    nuisance: np.ndarray | None = None,
    segments: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Filter both time courses with an AR model of each observed time course.

    A Yule–Walker AR(``order``) model is fitted to every target's observed time
    course (mean removed, biased autocovariances, so the model is stable) and its
    whitening filter ``e_t = y_t - sum_l a_l y_(t-l)`` is applied to the observation
    and to the prediction of that target. Under the null (prediction unrelated to the
    data) the whitened observation is close to white noise, so re-aligning blocks of it
    no longer breaks the autocovariance that crosses block boundaries: the permutation
    null keeps its nominal error rate even when both time courses are smooth (as
    HRF-convolved predictions and BOLD noise are).

    Parameters
    ----------
    y_true, y_pred : ndarray, shape (n_times, n_targets)
        Observations and predictions.
    order : int
        AR order (0 returns the inputs, centred).
    nuisance : ndarray, shape (n_times, n_nuisance) | None
        Orthonormal basis the cleaning projected out of the observations: the
        autocovariances are corrected for it (:func:`projected_lag_matrix`) before the
        AR model is solved. ``None``: no correction.
    segments : sequence of int | None
        Lengths of the runs the time courses concatenate: lags are taken, and the
        filter applied, within each (its first ``order`` samples are dropped).
        ``None``: one run.

    Returns
    -------
    y_true_w, y_pred_w : ndarray of float64, shape (n_times - order * n_segments, n_targets)
    """
    if isinstance(order, bool) or not isinstance(order, int | np.integer) or order < 0:
        raise ValueError(f"`order` must be a non-negative int, got {order!r} instead.")
    yc = np.asarray(y_true, dtype=np.float64)
    pc = np.asarray(y_pred, dtype=np.float64)
    yc = yc - yc.mean(axis=0)
    pc = pc - pc.mean(axis=0)
    n_times = yc.shape[0]
    if order == 0:
        return yc, pc
    if n_times < order + 4:
        raise ValueError(
            f"`order` must leave at least 4 time points, got {order} for {n_times} instead."
        )
    bounds = _bounds(segments if segments is not None else [n_times], n_times)
    if min(b - a for a, b in bounds) < order + 2:
        raise ValueError(
            f"`order` must leave at least 2 samples in every segment, got {order} for "
            f"segments of {[b - a for a, b in bounds]} samples instead."
        )
    # lagged sums of products within each run (views: no copy of the whole matrix)
    acov = np.zeros((order + 1, yc.shape[1]))
    for lag in range(order + 1):
        for start, stop in bounds:
            acov[lag] += np.einsum("tv,tv->v", yc[start : stop - lag], yc[start + lag : stop])
    if nuisance is not None:
        c = projected_lag_matrix(nuisance, order, segments)
        corrected = np.linalg.solve(c, acov)
        # keep the correction where it gives a positive variance and a stable model
        good = (corrected[0] > 0) & np.all(np.abs(corrected[1:]) < corrected[0], axis=0)
        acov = np.where(good, corrected, acov)
    lags = np.abs(np.subtract.outer(np.arange(order), np.arange(order)))
    toeplitz = np.moveaxis(acov[lags], -1, 0)  # (n_targets, order, order)
    ok = acov[0] > 0
    coefs = np.zeros((yc.shape[1], order))
    if ok.any():
        coefs[ok] = np.linalg.solve(toeplitz[ok], acov[1:, ok].T[..., None])[..., 0]
    # e_t = y_t - sum_l a_l y_(t-l) within each run, its first `order` samples dropped
    n_out = n_times - order * len(bounds)
    yw = np.empty((n_out, yc.shape[1]))
    pw = np.empty((n_out, pc.shape[1]))
    row = 0
    for start, stop in bounds:
        rows = slice(row, row + stop - start - order)
        yw[rows] = yc[start + order : stop]
        pw[rows] = pc[start + order : stop]
        for lag in range(1, order + 1):
            yw[rows] -= coefs[:, lag - 1] * yc[start + order - lag : stop - lag]
            pw[rows] -= coefs[:, lag - 1] * pc[start + order - lag : stop - lag]
        row = rows.stop
    return yw, pw


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


def _check_nuisance_rank(n_times: int, nuisance_rank: int) -> None:
    """Refuse a nuisance basis that leaves fewer than 3 time points of freedom."""
    if nuisance_rank > n_times - 3:
        raise ValueError(
            f"`nuisance` must leave at least 3 of the {n_times} (whitened) time points, "
            f"got {nuisance_rank} columns instead."
        )


def whitened_basis(
    nuisance: np.ndarray, order: int, segments: Sequence[int] | None = None
) -> np.ndarray:
    """Orthonormal basis of the nuisance and the constant on the rows whitening keeps.

    Parameters
    ----------
    nuisance : ndarray, shape (n_times, n_nuisance)
        Basis the cleaning projected out of the time courses.
    order : int
        AR order of :func:`ar_prewhiten` (0: no whitening, every row kept).
    segments : sequence of int | None
        Lengths of the runs (the first ``order`` samples of each are dropped).

    Returns
    -------
    basis : ndarray of float64, shape (n_times - order * n_segments, rank)
        Orthonormal columns spanning the constant and the kept rows of ``nuisance``.
    """
    nuisance = np.asarray(nuisance, dtype=np.float64)
    n_times = nuisance.shape[0]
    keep = np.ones(n_times, dtype=bool)
    for start, _ in _bounds(segments if segments is not None else [n_times], n_times):
        keep[start : start + order] = False
    rows = np.column_stack([np.ones(int(keep.sum())), nuisance[keep]])
    u, s, _ = np.linalg.svd(rows, full_matrices=False)
    return u[:, s > 1e-8 * s[0]]


def _expected_block_projection(p: np.ndarray, basis: np.ndarray, block_length: int) -> np.ndarray:
    """``E_π |Qᵀ p_π|²`` over uniformly random orders of the complete blocks.

    Block ``b`` of ``p_π`` is block ``π(b)`` of ``p``; a trailing incomplete block stays.
    With ``P_c`` the blocks of ``p``, ``S = sum_c P_c``, ``A = sum_b Q_b Q_bᵀ`` and
    ``T = (sum_b Q_b)(sum_b Q_b)ᵀ``: the diagonal pairs give ``sum_c P_cᵀ A P_c / B``, the
    others ``(Sᵀ (T - A) S - sum_c P_cᵀ (T - A) P_c) / (B (B - 1))``.
    """
    n_times, n_targets = p.shape
    n_blocks = n_times // block_length
    used = n_blocks * block_length
    blocks = p[:used].reshape(n_blocks, block_length, n_targets)
    q_blocks = basis[:used].reshape(n_blocks, block_length, -1)
    a = np.einsum("blk,bmk->lm", q_blocks, q_blocks)
    q_sum = q_blocks.sum(axis=0)
    off = q_sum @ q_sum.T - a
    total = blocks.sum(axis=0)
    diag_a = np.einsum("clv,lm,cmv->v", blocks, a, blocks, optimize=True)
    diag_off = np.einsum("clv,lm,cmv->v", blocks, off, blocks, optimize=True)
    cross = np.einsum("lv,lm,mv->v", total, off, total, optimize=True)
    second = diag_a / n_blocks + (cross - diag_off) / (n_blocks * (n_blocks - 1))
    fixed = basis[used:].T @ p[used:]  # (rank, n_targets)
    mean = q_sum.T @ total / n_blocks
    return second + 2.0 * (fixed * mean).sum(axis=0) + (fixed * fixed).sum(axis=0)


def _expected_shift_projection(p: np.ndarray, basis: np.ndarray, min_shift: int) -> np.ndarray:
    """``E_s |Qᵀ roll(p, s)|²`` over the admissible circular shifts, via FFT."""
    n_times = p.shape[0]
    shifts = valid_shifts(n_times, min_shift)
    spec_p = np.fft.rfft(p, axis=0)  # (n_freq, n_targets)
    spec_q = np.conj(np.fft.rfft(basis, axis=0))  # (n_freq, rank)
    total = np.zeros(p.shape[1])
    for j in range(basis.shape[1]):
        lagged = np.fft.irfft(spec_q[:, j, None] * spec_p, n=n_times, axis=0)[shifts]
        total += (lagged**2).mean(axis=0)
    return total


def null_widening(
    y_pred: np.ndarray,
    basis: np.ndarray,
    *,
    method: str = "block",
    block_length: int = 10,
) -> np.ndarray:
    """Factor on each target's null correlations for a projected-out nuisance basis.

    Cleaned observations vary only outside the basis ``Q`` (``M = I - Q Qᵀ``): under the
    null their correlation with a prediction ``p`` has variance ``|M p|² / (|p|² (n -
    k))``, with a re-aligned prediction ``p_π`` the variance ``|M p_π|² / (|p|² (n -
    k))``. Re-aligning moves a cleaned prediction back into the basis, the more so the
    smoother it is (drifts and motion are slow, as HRF-convolved predictions are), so
    the null is too narrow by ``sqrt(|M p|² / E_π |M p_π|²)``: the factor returned,
    the expectation taken exactly over the re-alignments of ``method``. For white
    predictions in the complement it is ``sqrt((n - 1) / (n - k))``.

    Parameters
    ----------
    y_pred : ndarray, shape (n_times, n_targets)
        Predictions, as tested.
    basis : ndarray, shape (n_times, rank)
        Orthonormal basis projected out of the observations, the constant included
        (:func:`whitened_basis`).
    method : ``"block"`` | ``"circular_shift"``
        Re-alignment of :func:`~neuroflow.evaluation.permutation.permutation_null`.
    block_length : int
        Its block length or smallest shift, in samples.

    Returns
    -------
    widen : ndarray of float64, shape (n_targets,)
        Usually above 1 (below 1 where re-aligning takes a prediction out of the
        basis, as for an uncleaned one); 1 where the prediction is constant or lies in
        the basis.
    """
    p = np.asarray(y_pred, dtype=np.float64)
    p = p - p.mean(axis=0)
    norm = (p * p).sum(axis=0)
    observed = norm - ((basis.T @ p) ** 2).sum(axis=0)
    if method == "block":
        expected = norm - _expected_block_projection(p, basis, block_length)
    else:
        expected = norm - _expected_shift_projection(p, basis, block_length)
    ok = (observed > 1e-12 * norm) & (expected > 1e-12 * norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, np.sqrt(observed / np.where(ok, expected, 1.0)), 1.0)


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

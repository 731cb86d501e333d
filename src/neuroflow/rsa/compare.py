"""Comparison of RDMs and noise ceilings.

Rank (Spearman) and Pearson comparisons are computed here for many RDMs at once: rank
every RDM once, then one correlation matrix. Kendall's tau-a sorts the RDMs of one side
once each and counts the pairs of each pair of RDMs with one compiled merge sort
(:mod:`neuroflow.rsa.kendall`, numba; rsatoolbox sorts both vectors twice for every
pair; ``bench/bench_rsa.py`` times both). The whitened cosine
(rsatoolbox's ``cosine_cov``, the cosine after whitening by the covariance of the
distance estimates) calls rsatoolbox's :func:`rsatoolbox.rdm.compare`. Noise ceilings
of many RDM sets at once (an EEG RDM per time point and channel group) follow
rsatoolbox's leave-one-out pooling for the rank comparisons in arrays
(:func:`noise_ceilings`); one call of rsatoolbox per set costs ~30 ms of object
handling and ranking in Python loops.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import numpy as np

__all__ = [
    "COMPARISONS",
    "compare_rdms",
    "kendall_tau_a",
    "noise_ceiling",
    "noise_ceilings",
    "rank_rows",
    "rsatoolbox_rdms",
]

#: Comparison methods: ours (vectorised) and rsatoolbox's.
COMPARISONS = ("spearman", "corr", "tau-a", "cosine_cov")

logger = logging.getLogger(__name__)


def _check_vectors(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.shape[1] < 3:
        raise ValueError(f"`{name}` must have shape (n_rdms, n_pairs >= 3), got {a.shape} instead.")
    return a


def _check_same_pairs(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"`a` and `b` must have the same number of pairs, got {a.shape[1]} and "
            f"{b.shape[1]} instead."
        )


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    na = np.sqrt((a**2).sum(axis=1))
    nb = np.sqrt((b**2).sum(axis=1))
    num = a @ b.T
    den = np.outer(na, nb)
    return np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)


def rank_rows(a: np.ndarray) -> np.ndarray:
    """Ranks within each row, ties averaged (like :func:`scipy.stats.rankdata`).

    One sort of the whole array and two bincounts; several times faster than ranking
    row by row for long RDM vectors.

    Parameters
    ----------
    a : array-like, shape (n_rows, n_values)
        Values without NaN.

    Returns
    -------
    ranks : ndarray of float64, shape (n_rows, n_values)
        1-based ranks.
    """
    a = np.asarray(a, dtype=np.float64)
    n_rows, n = a.shape
    order = np.argsort(a, axis=1)
    s = np.take_along_axis(a, order, axis=1)
    new = np.ones(s.shape, dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    positions = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), s.shape)
    if new.all():
        sorted_ranks = positions
    else:
        gid = (
            np.cumsum(new.astype(np.intp), axis=1) - 1 + (np.arange(n_rows) * n)[:, None]
        ).ravel()
        counts = np.bincount(gid, minlength=n_rows * n)
        sums = np.bincount(gid, weights=positions.ravel(), minlength=n_rows * n)
        sorted_ranks = (sums[gid] / counts[gid]).reshape(n_rows, n)
    ranks = np.empty_like(a)
    np.put_along_axis(ranks, order, sorted_ranks, axis=1)
    return ranks


def _tied_pairs_sorted(s: np.ndarray) -> int:
    """Pairs of equal values in a vector sorted ascending."""
    runs = np.flatnonzero(np.r_[True, s[1:] != s[:-1], True])
    counts = np.diff(runs).astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


@functools.cache
def _discordant_counter() -> Callable[[np.ndarray, np.ndarray], tuple[int, int, int]] | None:
    """The compiled pair counter (:func:`neuroflow.rsa.kendall.pair_counts`), or None.

    None where numba cannot be imported; tau-a is then derived from SciPy's public
    tau-b (:func:`_tau_a_from_tau_b`), equal to 1e-12 and about ten times slower. Said
    once per process in the log.
    """
    try:
        import numba  # noqa: F401
    except ImportError as err:
        logger.warning(
            "numba cannot be imported (%s): Kendall's tau-a is computed from "
            "scipy.stats.kendalltau instead of the compiled counter: equal values, about "
            "ten times slower. Install numba (`pip install numba`) for the compiled counter.",
            err,
        )
        return None
    from neuroflow.rsa.kendall import pair_counts

    return pair_counts


def _tau_a_from_tau_b(x: np.ndarray, y: np.ndarray, x_ties: int, y_ties: int) -> float:
    """Kendall's tau-a from SciPy's public tau-b and the tied pairs of each vector.

    tau-b = (C - D) / sqrt((N - T_x)(N - T_y)) and tau-a = (C - D) / N, N = n(n-1)/2.
    """
    from scipy.stats import kendalltau

    n = x.size
    total = n * (n - 1) // 2
    if x_ties == total or y_ties == total:
        return 0.0  # a constant vector: no pair is concordant or discordant
    tau_b = kendalltau(x, y, variant="b").statistic
    tau = tau_b * np.sqrt(float(total - x_ties) * float(total - y_ties)) / total
    return float(min(1.0, max(-1.0, tau)))


def _tau_a_public(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-a of every row of ``a`` with every row of ``b`` from the public tau-b."""
    ties_a = [_tied_pairs_sorted(np.sort(row)) for row in a]
    ties_b = [_tied_pairs_sorted(np.sort(row)) for row in b]
    tau = np.empty((a.shape[0], b.shape[0]))
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            tau[i, j] = _tau_a_from_tau_b(a[i], b[j], ties_a[i], ties_b[j])
    return tau


def kendall_tau_a(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-a of every row of ``a`` with every row of ``b``.

    Only the rows of the side with fewer rows are sorted, once each (rsatoolbox sorts
    both vectors twice for each pair); the other side is put in that order and its
    discordant, tied and jointly tied pairs are counted in O(n log n) by one compiled
    merge sort (:func:`neuroflow.rsa.kendall.pair_counts`). Equal to
    ``rsatoolbox.rdm.compare(..., method="tau-a")``, ties included. Without numba, tau-a
    is derived from :func:`scipy.stats.kendalltau` (equal, about ten times slower).

    Parameters
    ----------
    a : array-like, shape (n_a, n_pairs)
        Vectors without NaN.
    b : array-like, shape (n_b, n_pairs)
        Vectors without NaN.

    Returns
    -------
    tau : ndarray of float64, shape (n_a, n_b)
    """
    a, b = _check_vectors("a", a), _check_vectors("b", b)
    _check_same_pairs(a, b)
    for name, v in (("a", a), ("b", b)):
        if np.isnan(v).any():
            raise ValueError(
                f"`{name}` must hold no NaN, got {int(np.isnan(v).sum())} NaN values instead "
                "(compare_rdms drops the pairs that are NaN in any RDM)."
            )
    count = _discordant_counter()
    if count is None:
        return _tau_a_public(a, b)
    by_a = a.shape[0] <= b.shape[0]
    sorted_side, other = (a, b) if by_a else (b, a)
    n = a.shape[1]
    total = n * (n - 1) // 2
    tau = np.empty((sorted_side.shape[0], other.shape[0]))
    for i, x in enumerate(sorted_side):
        order = np.argsort(x)
        x_sorted = x[order]
        x_ties = _tied_pairs_sorted(x_sorted)
        for j, y in enumerate(other):
            discordant, joint, y_ties = count(x_sorted, y[order])
            value = (total - x_ties - y_ties + joint - 2 * discordant) / total
            tau[i, j] = min(1.0, max(-1.0, value))
    return tau if by_a else tau.T


def rsatoolbox_rdms(vectors: np.ndarray):
    """Wrap condensed RDMs as an :class:`rsatoolbox.rdm.RDMs` object.

    Parameters
    ----------
    vectors : array-like, shape (n_rdms, n_pairs)
        Condensed RDMs.

    Returns
    -------
    rdms : rsatoolbox.rdm.RDMs
    """
    from rsatoolbox.rdm import RDMs

    return RDMs(_check_vectors("vectors", vectors))


def compare_rdms(a: np.ndarray, b: np.ndarray, *, method: str = "spearman") -> np.ndarray:
    """Similarity of every RDM of ``a`` with every RDM of ``b``.

    Parameters
    ----------
    a : array-like, shape (n_a, n_pairs)
        Condensed RDMs (e.g. models or layers).
    b : array-like, shape (n_b, n_pairs)
        Condensed RDMs (e.g. brain RDMs per ROI or time point).
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        Spearman rank correlation (ties averaged), Pearson correlation and Kendall's
        tau-a (:func:`kendall_tau_a`) are computed here and equal rsatoolbox's; the
        whitened cosine uses :func:`rsatoolbox.rdm.compare`. Pairs that are NaN in any
        RDM are dropped.

    Returns
    -------
    sim : ndarray of float64, shape (n_a, n_b)
    """
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    a, b = _check_vectors("a", a), _check_vectors("b", b)
    _check_same_pairs(a, b)
    keep = ~(np.isnan(a).any(axis=0) | np.isnan(b).any(axis=0))
    a, b = a[:, keep], b[:, keep]
    if method == "spearman":
        return _pearson_rows(rank_rows(a), rank_rows(b))
    if method == "corr":
        return _pearson_rows(a, b)
    if method == "tau-a":
        return kendall_tau_a(a, b)
    from rsatoolbox.rdm import compare

    return np.asarray(compare(rsatoolbox_rdms(a), rsatoolbox_rdms(b), method=method))


def noise_ceiling(rdms: np.ndarray, *, method: str = "spearman") -> tuple[float, float]:
    """Lower and upper noise ceiling from repeated measurements of one RDM.

    The leave-one-out formula (Nili et al., 2014): the upper bound averages the
    similarity of each RDM with the mean of all RDMs, the lower bound with the mean of
    the others. Computed by :func:`rsatoolbox.inference.boot_noise_ceiling`, whose
    pooling standardises RDMs before averaging them for correlation comparisons and
    ranks them for rank-based ones.

    Parameters
    ----------
    rdms : array-like, shape (n_measurements, n_pairs)
        One RDM per subject (or per repeat/session within a subject).
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        Comparison method.

    Returns
    -------
    lower, upper : float
    """
    from rsatoolbox.inference import boot_noise_ceiling

    rdms = _check_vectors("rdms", rdms)
    if rdms.shape[0] < 2:
        raise ValueError(f"`rdms` must hold at least 2 RDMs, got {rdms.shape[0]} instead.")
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    keep = ~np.isnan(rdms).any(axis=0)
    lower, upper = boot_noise_ceiling(rsatoolbox_rdms(rdms[:, keep]), method=method)
    return float(lower), float(upper)


def _centred_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of ``a`` and ``b`` after centring each on its mean over the last axis, as
    rsatoolbox's Spearman comparison computes it on ranks (0 for a constant vector).

    Parameters
    ----------
    a, b : ndarray, shape (..., n_pairs)
        Broadcast against each other.

    Returns
    -------
    cos : ndarray, shape (...)
    """
    a = a - np.mean(a, axis=-1, keepdims=True)
    b = b - np.mean(b, axis=-1, keepdims=True)
    norm_a = np.sqrt(np.einsum("...j,...j->...", a, a))
    norm_b = np.sqrt(np.einsum("...j,...j->...", b, b))
    dot = np.einsum("...j,...j->...", a, b)
    ok = (norm_a > 0) & (norm_b > 0)
    # divided by one norm, then the other, as rsatoolbox divides
    cos = np.divide(dot, norm_a, out=np.zeros_like(dot), where=ok)
    return np.divide(cos, norm_b, out=cos, where=ok)


def noise_ceilings(rdms: np.ndarray, *, method: str = "spearman") -> np.ndarray:
    """Lower and upper noise ceilings of many sets of repeated RDMs at once.

    The values of :func:`noise_ceiling` for every set ``rdms[:, k]``: for ``spearman``
    and ``tau-a`` computed in arrays as rsatoolbox's
    :func:`~rsatoolbox.inference.boot_noise_ceiling` computes them (each measurement
    compared with the mean rank RDM of the others, lower bound, and of all, upper
    bound; the two bounds averaged over measurements), for the other methods by
    :func:`noise_ceiling` per set. A set with a NaN pair goes through
    :func:`noise_ceiling` too (which drops the pairs NaN in any of its RDMs).

    Parameters
    ----------
    rdms : array-like, shape (n_measurements, n_sets, n_pairs)
        For each set, one RDM per measurement (subject, repeat or session).
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        Comparison method.

    Returns
    -------
    bounds : ndarray of float64, shape (n_sets, 2)
        Lower and upper bound of each set.
    """
    rdms = np.asarray(rdms, dtype=np.float64)
    if rdms.ndim != 3:
        raise ValueError(
            "`rdms` must have shape (n_measurements, n_sets, n_pairs), got shape "
            f"{rdms.shape} instead."
        )
    n, n_sets, n_pairs = rdms.shape
    if n < 2:
        raise ValueError(f"`rdms` must hold at least 2 RDMs per set, got {n} instead.")
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    out = np.empty((n_sets, 2))
    whole = ~np.isnan(rdms).any(axis=(0, 2))
    batched = whole if method in ("spearman", "tau-a") else np.zeros(n_sets, dtype=bool)
    for k in np.flatnonzero(~batched):
        out[k] = noise_ceiling(rdms[:, k], method=method)
    if not batched.any():
        return out
    raw = rdms[:, batched]  # (n, m, p)
    m = raw.shape[1]
    ranks = rank_rows(raw.reshape(n * m, n_pairs)).reshape(n, m, n_pairs)
    pooled_all = np.mean(ranks, axis=0)  # (m, p): rsatoolbox pools rank RDMs by their mean
    lower = np.empty((n, m))
    upper = np.empty((n, m))
    if method == "spearman":
        upper[:] = _centred_cosine(rank_rows(pooled_all), ranks)
    else:
        for j in range(m):  # the pooled RDM against every measurement's at once
            upper[:, j] = kendall_tau_a(pooled_all[j], raw[:, j])[0]
    for i in range(n):
        pooled_others = np.mean(np.delete(ranks, i, axis=0), axis=0)
        if method == "spearman":
            lower[i] = _centred_cosine(rank_rows(pooled_others), ranks[i])
        else:
            for j in range(m):
                lower[i, j] = kendall_tau_a(pooled_others[j], raw[i, j])[0, 0]
    # averaged over measurements along contiguous rows, as rsatoolbox averages its list
    out[batched, 0] = np.ascontiguousarray(lower.T).mean(axis=1)
    out[batched, 1] = np.ascontiguousarray(upper.T).mean(axis=1)
    return out

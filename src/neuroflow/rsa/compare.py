"""Comparison of RDMs and noise ceilings.

Rank (Spearman) and Pearson comparisons are computed here for many RDMs at once: rank
every RDM once, then one correlation matrix. Kendall's tau-a sorts every RDM once too and
then counts the discordant pairs of each pair of RDMs with SciPy's compiled counter (the
one rsatoolbox's own tau-a calls after sorting both vectors again for every pair; about
6x faster for 350,000 stimulus pairs, ``bench/bench_rsa.py``). The whitened cosine
(rsatoolbox's ``cosine_cov``, the cosine after whitening by the covariance of the
distance estimates) calls rsatoolbox's :func:`rsatoolbox.rdm.compare`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "COMPARISONS",
    "compare_rdms",
    "kendall_tau_a",
    "noise_ceiling",
    "rank_rows",
    "rsatoolbox_rdms",
]

#: Comparison methods: ours (vectorised) and rsatoolbox's.
COMPARISONS = ("spearman", "corr", "tau-a", "cosine_cov")


def _check_vectors(name: str, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.shape[1] < 3:
        raise ValueError(f"`{name}` must have shape (n_rdms, n_pairs >= 3), got {a.shape} instead.")
    return a


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


def _dense_ranks(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sort order, dense ranks (1-based; in place and sorted) and tied pairs of every row.

    The order among equal values is arbitrary (an unstable sort is several times
    faster); tau-a never depends on it.
    """
    order = np.argsort(a, axis=1)
    s = np.take_along_axis(a, order, axis=1)
    new = np.ones(s.shape, dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    # Cast first: NumPy's cumsum straight from bool is ~40x slower.
    sorted_ranks = np.cumsum(new.astype(np.intp), axis=1)
    ranks = np.empty(a.shape, dtype=np.intp)
    np.put_along_axis(ranks, order, sorted_ranks, axis=1)
    ties = np.array([_tied_pairs(row) for row in sorted_ranks], dtype=np.int64)
    return order, ranks, sorted_ranks, ties


def _tied_pairs(sorted_ranks: np.ndarray) -> int:
    """Pairs of equal values in a sorted rank vector."""
    counts = np.bincount(sorted_ranks).astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _discordant_counter() -> Callable[[np.ndarray, np.ndarray], int] | None:
    """SciPy's compiled discordant-pair counter, or None where this SciPy lacks it.

    It is private SciPy API (``scipy.stats._stats._kendall_dis``, what
    :func:`scipy.stats.kendalltau` calls); without it tau-a is derived from the public
    tau-b instead (:func:`_tau_a_from_tau_b`), equal and about twice as slow.
    """
    try:
        from scipy.stats._stats import _kendall_dis
    except ImportError:
        return None
    return _kendall_dis


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


def _tau_a_sorted(
    x_order: np.ndarray,
    x_sorted_ranks: np.ndarray,
    x_ties: int,
    y_ranks: np.ndarray,
    y_ties: int,
    count_discordant: Callable[[np.ndarray, np.ndarray], int] | None,
) -> float:
    """Kendall's tau-a of x and y, x already sorted (Knight's algorithm, as SciPy's)."""
    x, y = x_sorted_ranks, y_ranks[x_order]
    if count_discordant is None:
        return _tau_a_from_tau_b(x, y, x_ties, y_ties)
    joint = 0
    if x_ties:
        # Within runs of equal x, y must be ascending as well (a lexicographic sort).
        order = np.argsort(x * (np.intp(y.max()) + 1) + y)
        x, y = x[order], y[order]
        runs = np.r_[True, (x[1:] != x[:-1]) | (y[1:] != y[:-1]), True]
        counts = np.diff(np.flatnonzero(runs)).astype(np.int64)
        joint = int((counts * (counts - 1) // 2).sum())
    discordant = int(count_discordant(x, y))
    n = x.size
    total = n * (n - 1) // 2
    tau = (total - x_ties - y_ties + joint - 2 * discordant) / total
    return float(min(1.0, max(-1.0, tau)))


def kendall_tau_a(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-a of every row of ``a`` with every row of ``b``.

    Every row is sorted once (rsatoolbox sorts both vectors again for each pair); the
    discordant pairs of each pair of rows are then counted in O(n log n) by SciPy's
    compiled counter, the one :func:`scipy.stats.kendalltau` and rsatoolbox use. Equal to
    ``rsatoolbox.rdm.compare(..., method="tau-a")``, ties included.

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
    order_a, ranks_a, sorted_a, ties_a = _dense_ranks(a)
    order_b, ranks_b, sorted_b, ties_b = _dense_ranks(b)
    count = _discordant_counter()
    tau = np.empty((a.shape[0], b.shape[0]))
    for i in range(a.shape[0]):
        for j in range(b.shape[0]):
            if ties_a[i] and not ties_b[j]:
                # Sorting by the vector without ties spares the lexicographic sort.
                tau[i, j] = _tau_a_sorted(order_b[j], sorted_b[j], 0, ranks_a[i], ties_a[i], count)
            else:
                tau[i, j] = _tau_a_sorted(
                    order_a[i], sorted_a[i], ties_a[i], ranks_b[j], ties_b[j], count
                )
    return tau


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
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"`a` and `b` must have the same number of pairs, got {a.shape[1]} and "
            f"{b.shape[1]} instead."
        )
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

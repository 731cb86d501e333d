"""Compiled pair counts for Kendall's tau: discordant, jointly tied and tied pairs.

One merge sort counts the discordant pairs of two vectors in O(n log n), the first
already sorted, and leaves the second sorted for counting its ties. Compiled with numba
(``cache=True``: the machine code is written next to this file, or to numba's user
cache folder where that is read-only, and later processes load it instead of compiling
again: a few seconds once per installation).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["pair_counts"]

#: Blocks this short are sorted by insertion before the merges.
_RUN = 8


@numba.njit(cache=True, nogil=True)
def _sort_range(y: np.ndarray, buf: np.ndarray, lo: int, hi: int) -> int:  # pragma: no cover
    """Sort ``y[lo:hi]`` in place (bottom-up merge sort, ``buf`` as scratch space).

    Returns the pairs ``lo <= i < j < hi`` with ``y[i] > y[j]`` (the inversions).
    """
    inversions = 0
    for start in range(lo, hi, _RUN):
        stop = min(start + _RUN, hi)
        for i in range(start + 1, stop):
            value = y[i]
            j = i
            while j > start and y[j - 1] > value:
                y[j] = y[j - 1]
                j -= 1
            y[j] = value
            inversions += i - j
    src, dst = y, buf
    swapped = False
    width = _RUN
    while width < hi - lo:
        for start in range(lo, hi, 2 * width):
            mid = min(start + width, hi)
            stop = min(start + 2 * width, hi)
            if mid < stop and src[mid - 1] > src[mid]:  # else already in order
                i, j, k = start, mid, start
                while i < mid and j < stop:
                    # Without branches on the comparison: random data mispredicts them.
                    left, right = src[i], src[j]
                    take_left = left <= right
                    dst[k] = left if take_left else right
                    inversions += 0 if take_left else mid - i
                    i += 1 if take_left else 0
                    j += 0 if take_left else 1
                    k += 1
                for m in range(i, mid):
                    dst[k + m - i] = src[m]
                for m in range(j, stop):
                    dst[m] = src[m]
            else:
                for k in range(start, stop):
                    dst[k] = src[k]
        src, dst = dst, src
        swapped = not swapped
        width *= 2
    if swapped:
        for k in range(lo, hi):
            y[k] = buf[k]
    return inversions


@numba.njit(cache=True, nogil=True)
def _tied_pairs(v: np.ndarray, lo: int, hi: int) -> int:  # pragma: no cover
    """Pairs of equal values in ``v[lo:hi]``, sorted."""
    ties = 0
    run = 1
    for k in range(lo + 1, hi):
        if v[k] == v[k - 1]:
            run += 1
        else:
            ties += run * (run - 1) // 2
            run = 1
    return ties + run * (run - 1) // 2


@numba.njit(cache=True, nogil=True)
def _pair_counts(x: np.ndarray, y: np.ndarray) -> tuple[int, int, int]:  # pragma: no cover
    """Discordant, jointly tied and ``y``-tied pairs; ``x`` sorted (see :func:`pair_counts`)."""
    n = x.size
    work = y.copy()
    buf = np.empty_like(work)
    # Within each run of equal x, sort y: those pairs are then no inversions.
    joint = 0
    start = 0
    for stop in range(1, n + 1):
        if stop < n and x[stop] == x[start]:
            continue
        if stop - start > 1:
            _sort_range(work, buf, start, stop)
            joint += _tied_pairs(work, start, stop)
        start = stop
    discordant = _sort_range(work, buf, 0, n)
    return discordant, joint, _tied_pairs(work, 0, n)


def pair_counts(x_sorted: np.ndarray, y: np.ndarray) -> tuple[int, int, int]:
    """Discordant, jointly tied and ``y``-tied pairs of two vectors, the first sorted.

    A pair ``i < j`` is discordant when ``x[i] < x[j]`` and ``y[i] > y[j]``, jointly
    tied when ``x[i] == x[j]`` and ``y[i] == y[j]``. Kendall's tau-a is then ``(N - T_x
    - T_y + T_xy - 2 D) / N`` with ``N = n (n - 1) / 2`` pairs, ``T_x`` and ``T_y`` the
    pairs tied in each vector, ``T_xy`` the jointly tied pairs and ``D`` the discordant
    ones. Values are compared as float64 (exact for integers below 2**53).

    Parameters
    ----------
    x_sorted : ndarray, shape (n,)
        Values (or ranks) sorted ascending, ties in any order; no NaN.
    y : ndarray, shape (n,)
        Values (or ranks) of the same items, in the order of ``x_sorted``; no NaN.
        Not modified.

    Returns
    -------
    discordant : int
        Discordant pairs ``D``.
    joint_ties : int
        Jointly tied pairs ``T_xy``.
    y_ties : int
        Pairs tied in ``y``, ``T_y``.
    """
    x_sorted = np.ascontiguousarray(x_sorted, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    if x_sorted.ndim != 1 or x_sorted.shape != y.shape:
        raise ValueError(
            f"`x_sorted` and `y` must be vectors of one length, got shapes {x_sorted.shape} "
            f"and {y.shape} instead."
        )
    discordant, joint, y_ties = _pair_counts(x_sorted, y)
    return int(discordant), int(joint), int(y_ties)

"""Rank the stimuli of a pool by predicted response, and describe the distribution.

Definitions used throughout:

- **Ranking**: the top-k stimuli have the highest predicted response, the bottom-k the
  lowest; ties are broken by stimulus id (ascending, string order) in both
  directions, so the result does not depend on the pool's order.
- **Skewness**: :func:`scipy.stats.skew` with ``bias=False``, the adjusted
  Fisher-Pearson coefficient G1 (``sqrt(n (n - 1)) / (n - 2) * m3 / m2**1.5``).
- **Suppressive-to-excitatory tail ratio** (:func:`suppressive_to_excitatory_ratio`,
  a definition of this package, not taken from the literature): with ``m`` the
  median and ``t = ceil(tail * n)`` stimuli per tail, the mean distance below ``m`` of
  the ``t`` lowest responses over the mean distance above ``m`` of the ``t`` highest.
  1 for a symmetric distribution; below 1 when the excitatory tail is longer (a
  region driven strongly by a few stimuli), above 1 when the suppressive tail is.
- **z**: ``(value - mean) / std`` over the pool (population standard deviation,
  ``ddof=0``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

__all__ = [
    "QUANTILES",
    "Ranking",
    "rank_stimuli",
    "ranking_table",
    "suppressive_to_excitatory_ratio",
    "tail_statistics",
]

#: Quantiles reported by :func:`tail_statistics`.
QUANTILES = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


class Ranking(NamedTuple):
    """Top-k and bottom-k stimuli of one region, target or channel.

    Attributes
    ----------
    top, bottom : ndarray of str, shape (k,)
        Stimulus ids, from the highest (top) or the lowest (bottom) response on.
    top_values, bottom_values : ndarray, shape (k,)
        Their predicted responses.
    top_index, bottom_index : ndarray of int, shape (k,)
        Their positions in the pool.
    """

    top: np.ndarray
    top_values: np.ndarray
    top_index: np.ndarray
    bottom: np.ndarray
    bottom_values: np.ndarray
    bottom_index: np.ndarray


def _check_values(values: np.ndarray, name: str = "values") -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {values.shape} instead.")
    bad = int(values.size - np.count_nonzero(np.isfinite(values)))
    if bad:
        raise ValueError(f"{name} must be finite, got {bad} NaN or infinite value(s) instead.")
    return values


def rank_stimuli(values: np.ndarray, ids: Sequence[str], k: int) -> Ranking:
    """Top-k and bottom-k stimuli by predicted response, ties broken by id.

    Parameters
    ----------
    values : ndarray, shape (n_stimuli,)
        Predicted response of each stimulus.
    ids : sequence of str, shape (n_stimuli,)
        Stimulus ids.
    k : int
        Stimuli per direction; a pool smaller than ``k`` gives all of its stimuli
        (the two lists then overlap).

    Returns
    -------
    ranking : Ranking
    """
    values = _check_values(values)
    ids_arr = np.array([str(i) for i in ids], dtype=object)
    if ids_arr.shape != values.shape:
        raise ValueError(
            f"ids must have one id per value ({values.size}), got {ids_arr.size} instead."
        )
    if not (isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1):
        raise ValueError(f"k must be a positive int, got {k!r} instead.")
    k = min(int(k), values.size)
    # rank of each id in string order: a numeric secondary key for lexsort
    id_rank = np.empty(values.size, dtype=np.int64)
    id_rank[np.argsort(ids_arr.astype(str), kind="stable")] = np.arange(values.size)
    top = np.lexsort((id_rank, -values))[:k]
    bottom = np.lexsort((id_rank, values))[:k]
    return Ranking(
        top=ids_arr[top].astype(str),
        top_values=values[top],
        top_index=top,
        bottom=ids_arr[bottom].astype(str),
        bottom_values=values[bottom],
        bottom_index=bottom,
    )


def suppressive_to_excitatory_ratio(values: np.ndarray, tail: float = 0.05) -> float:
    """Mean depth of the lowest responses below the median over the height of the highest.

    Parameters
    ----------
    values : ndarray, shape (n_stimuli,)
        Predicted responses of a pool.
    tail : float
        Share of the pool in each tail, in (0, 0.5]; ``ceil(tail * n)`` stimuli.

    Returns
    -------
    ratio : float
        ``mean(m - lowest) / mean(highest - m)`` with ``m`` the median: 1 for symmetric
        data, ``inf`` when only the suppressive tail departs from the median, ``nan``
        for a constant pool.
    """
    values = _check_values(values)
    if not (0.0 < float(tail) <= 0.5):
        raise ValueError(f"tail must be in (0, 0.5], got {tail!r} instead.")
    n_tail = max(1, math.ceil(float(tail) * values.size))
    ordered = np.sort(values)
    median = float(np.median(values))
    below = float(np.mean(median - ordered[:n_tail]))
    above = float(np.mean(ordered[-n_tail:] - median))
    if above == 0.0:
        return math.nan if below == 0.0 else math.inf
    return below / above


def tail_statistics(
    values: np.ndarray, *, tail: float = 0.05, quantiles: Sequence[float] = QUANTILES
) -> dict[str, float]:
    """Summary of a pool's predicted-response distribution.

    Parameters
    ----------
    values : ndarray, shape (n_stimuli,)
        Predicted responses of a pool.
    tail : float
        Share of the pool in each tail of the ratio
        (:func:`suppressive_to_excitatory_ratio`).
    quantiles : sequence of float
        Quantiles to report (linear interpolation).

    Returns
    -------
    stats : dict of str to float
        ``n``, ``mean``, ``std`` (``ddof=0``), ``skewness`` (:func:`scipy.stats.skew`,
        ``bias=False``; ``nan`` below 3 stimuli or for a constant pool), ``tail_ratio``
        and ``q<quantile>`` (e.g. ``q0.95``) for each quantile.
    """
    from scipy.stats import skew

    values = _check_values(values)
    std = float(values.std())
    skewness = float(skew(values, bias=False)) if values.size >= 3 and std > 0 else math.nan
    out = {
        "n": float(values.size),
        "mean": float(values.mean()),
        "std": std,
        "skewness": skewness,
        "tail_ratio": suppressive_to_excitatory_ratio(values, tail),
    }
    qs = np.quantile(values, np.asarray(quantiles, dtype=float))
    out.update({f"q{q:g}": float(v) for q, v in zip(quantiles, qs, strict=True)})
    return out


def ranking_table(responses: Mapping[str, np.ndarray], ids: Sequence[str], k: int) -> pd.DataFrame:
    """Tidy table of the top-k and bottom-k stimuli of every region (or target).

    Parameters
    ----------
    responses : dict of str to ndarray, shape (n_stimuli,)
        Predicted response per region (or target) name.
    ids : sequence of str, shape (n_stimuli,)
        Stimulus ids.
    k : int
        Stimuli per direction.

    Returns
    -------
    table : pandas.DataFrame
        Columns ``roi``, ``rank`` (1 = most extreme), ``direction`` (``"top"`` or
        ``"bottom"``), ``stimulus``, ``predicted`` and ``z`` (over the pool, ``ddof=0``;
        0 for a constant pool); regions in the given order, top rows first.
    """
    rows = []
    for roi, values in responses.items():
        values = _check_values(values, f"responses[{roi!r}]")
        ranking = rank_stimuli(values, ids, k)
        mean, std = values.mean(), values.std()
        for direction, names, vals in (
            ("top", ranking.top, ranking.top_values),
            ("bottom", ranking.bottom, ranking.bottom_values),
        ):
            z = (vals - mean) / std if std > 0 else np.zeros_like(vals)
            for rank, (name, value, score) in enumerate(zip(names, vals, z, strict=True), 1):
                rows.append((str(roi), rank, direction, str(name), float(value), float(score)))
    return pd.DataFrame(rows, columns=["roi", "rank", "direction", "stimulus", "predicted", "z"])

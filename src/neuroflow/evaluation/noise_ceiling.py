"""Noise ceilings from repeated presentations of the test stimuli.

A noise ceiling bounds the score that a perfect model (one that predicts the
repeatable, stimulus-driven part of the response exactly) would reach against
the *mean* of ``n`` repeats. With signal variance ``S`` and noise variance ``N``
per repeat, the repeat mean has reliability ``S / (S + N / n)``: this is the
ceiling on R² (NSD's noise ceiling, as a fraction), and its square root is the
ceiling on Pearson r.

Two estimators are provided, both vectorised over targets and taking repeats on
the first axis, ``(n_repeats, ..., n_times, n_targets)``:

- :func:`split_half_reliability`: correlation between the means of two halves
  of the repeats, stepped up to ``n`` repeats with the Spearman–Brown formula.
- :func:`ncsnr`: the noise-ceiling signal-to-noise ratio of the Natural Scenes
  Dataset (Allen et al., 2022, Nat. Neurosci. 25, 116–126), computed on
  responses z-scored within each repeat, converted with :func:`ncsnr_to_nc`.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from neuroflow.evaluation.metrics import check_time_target, pearson_r, zscore_time

__all__ = [
    "NOISE_CEILING_METHODS",
    "ceiling_r_from_reliability",
    "ncsnr",
    "ncsnr_to_nc",
    "noise_ceiling_r",
    "normalize_score",
    "spearman_brown",
    "split_half_reliability",
]

#: Accepted values of the ``noise_ceiling.method`` option.
NOISE_CEILING_METHODS = ("split_half", "ncsnr", "none")


def _check_repeats(y_repeats: np.ndarray, *, min_repeats: int) -> np.ndarray:
    y_repeats = check_time_target("y_repeats", y_repeats)
    if y_repeats.ndim < 3:
        raise ValueError(
            "`y_repeats` must have shape (n_repeats, ..., n_times, n_targets), "
            f"got shape {y_repeats.shape} instead."
        )
    if y_repeats.shape[0] < min_repeats:
        raise ValueError(
            f"`y_repeats` must hold at least {min_repeats} repeats, "
            f"got {y_repeats.shape[0]} instead."
        )
    return y_repeats


def spearman_brown(r_half: np.ndarray, *, n_first: int, n_second: int, n_total: int) -> np.ndarray:
    """Step a split-half correlation up to the reliability of an ``n_total``-repeat mean.

    Solves the signal model for the noise-to-signal ratio ``q = N / S`` from
    ``corr(mean_a, mean_b) = 1 / sqrt((1 + q / a) (1 + q / b))`` and returns
    ``1 / (1 + q / n_total)``. For equal halves (``a = b = n_total / 2``) this is
    the classical Spearman–Brown formula ``2 r / (1 + r)``; it stays exact when
    an odd number of repeats is split unevenly.

    Parameters
    ----------
    r_half : array-like, shape (..., n_targets)
        Correlation between the means of the two halves.
    n_first, n_second : int
        Number of repeats averaged in each half.
    n_total : int
        Number of repeats in the mean whose reliability is wanted.

    Returns
    -------
    reliability : ndarray, shape (..., n_targets)
        In ``[0, 1]``; 0 where ``r_half <= 0``, NaN where ``r_half`` is NaN.
    """
    for name, value in (("n_first", n_first), ("n_second", n_second), ("n_total", n_total)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"`{name}` must be a positive int, got {value!r} instead.")
    c = np.clip(np.asarray(r_half, dtype=np.float64), -1.0, 1.0)
    u = 1.0 / n_first + 1.0 / n_second
    w = 1.0 / (n_first * n_second)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = 1.0 - 1.0 / c**2
        q = (-u + np.sqrt(u**2 - 4.0 * w * k)) / (2.0 * w)
        rel = 1.0 / (1.0 + q / n_total)
    rel = np.where(c <= 0, 0.0, rel)
    return np.where(np.isnan(c), np.nan, np.clip(rel, 0.0, 1.0))


def _half_splits(n_repeats: int, n_splits: int, seed: int | None) -> list[np.ndarray]:
    """Indices of the first half for each split (all splits when there are few)."""
    n_first = n_repeats // 2
    combos = math.comb(n_repeats, n_first)
    n_unique = combos // 2 if 2 * n_first == n_repeats else combos
    if n_unique <= n_splits:
        firsts = itertools.combinations(range(n_repeats), n_first)
        if 2 * n_first == n_repeats:  # a split and its mirror give the same correlation
            firsts = (f for f in firsts if 0 in f)
        return [np.array(f) for f in firsts]
    rng = np.random.default_rng(seed)
    return [np.sort(rng.permutation(n_repeats)[:n_first]) for _ in range(n_splits)]


def split_half_reliability(
    y_repeats: np.ndarray, *, n_splits: int = 20, seed: int | None = 0
) -> np.ndarray:
    """Split-half reliability of the repeat mean, Spearman–Brown corrected.

    Parameters
    ----------
    y_repeats : array-like, shape (n_repeats, ..., n_times, n_targets)
        Observed responses to each repeated presentation, ``n_repeats >= 2``.
    n_splits : int
        Number of random halvings averaged; when the repeats admit fewer
        distinct halvings, all of them are used (a single one for 2 repeats).
    seed : int | None
        Seed of the random halvings.

    Returns
    -------
    reliability : ndarray of float64, shape (..., n_targets)
        Estimated reliability of the mean of all ``n_repeats`` repeats: the
        ceiling on R² of a model scored against that mean.
    """
    y_repeats = _check_repeats(y_repeats, min_repeats=2)
    if not isinstance(n_splits, int | np.integer) or n_splits < 1:
        raise ValueError(f"`n_splits` must be a positive int, got {n_splits!r} instead.")
    n_repeats = y_repeats.shape[0]
    r_halves = []
    for first in _half_splits(n_repeats, int(n_splits), seed):
        second = np.setdiff1d(np.arange(n_repeats), first)
        r_halves.append(pearson_r(y_repeats[first].mean(0), y_repeats[second].mean(0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN targets stay NaN
        r_half = np.nanmean(np.stack(r_halves), axis=0)
    return spearman_brown(
        r_half, n_first=n_repeats // 2, n_second=n_repeats - n_repeats // 2, n_total=n_repeats
    )


def ncsnr(y_repeats: np.ndarray) -> np.ndarray:
    """Noise-ceiling signal-to-noise ratio of the Natural Scenes Dataset.

    Each repeat is z-scored over time per target; the noise variance is the
    variance across repeats (``ddof=1``) averaged over time points, and
    ``ncsnr = sqrt(max(0, 1 - var_noise)) / sqrt(var_noise)``.

    Parameters
    ----------
    y_repeats : array-like, shape (n_repeats, ..., n_times, n_targets)
        Observed responses to each repeated presentation, ``n_repeats >= 2``.

    Returns
    -------
    ncsnr : ndarray of float64, shape (..., n_targets)
        Signal SD over noise SD; ``inf`` for noiseless targets, NaN for
        constant ones.
    """
    y_repeats = _check_repeats(y_repeats, min_repeats=2)
    z = zscore_time(y_repeats)
    var_noise = z.var(axis=0, ddof=1).mean(axis=-2)
    constant = np.all(np.ptp(np.asarray(y_repeats), axis=-2) == 0, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.sqrt(np.maximum(0.0, 1.0 - var_noise)) / np.sqrt(var_noise)
    return np.where(constant, np.nan, out)


def ncsnr_to_nc(snr: np.ndarray, n_repeats: int) -> np.ndarray:
    """Convert ncsnr to NSD's noise ceiling for the mean of ``n_repeats`` repeats.

    ``NC = 100 * ncsnr² / (ncsnr² + 1 / n_repeats)``.

    Parameters
    ----------
    snr : array-like, shape (..., n_targets)
        Output of :func:`ncsnr`.
    n_repeats : int
        Number of repeats averaged in the responses the model is scored on.

    Returns
    -------
    nc : ndarray of float64, shape (..., n_targets)
        Percentage of variance explainable, in ``[0, 100]``.
    """
    if not isinstance(n_repeats, int | np.integer) or n_repeats < 1:
        raise ValueError(f"`n_repeats` must be a positive int, got {n_repeats!r} instead.")
    s2 = np.asarray(snr, dtype=np.float64) ** 2
    with np.errstate(invalid="ignore"):
        nc = np.where(np.isinf(s2), 100.0, 100.0 * s2 / (s2 + 1.0 / n_repeats))
    return np.where(np.isnan(s2), np.nan, nc)


def ceiling_r_from_reliability(reliability: np.ndarray) -> np.ndarray:
    """Ceiling on Pearson r from the reliability (ceiling on R²) of the observed mean.

    Parameters
    ----------
    reliability : array-like, shape (..., n_targets)
        Fraction of variance explainable, in ``[0, 1]``.

    Returns
    -------
    ceiling_r : ndarray of float64, shape (..., n_targets)
        ``sqrt(clip(reliability, 0, 1))``; NaN stays NaN.
    """
    return np.sqrt(np.clip(np.asarray(reliability, dtype=np.float64), 0.0, 1.0))


def noise_ceiling_r(
    y_repeats: np.ndarray,
    *,
    method: str = "split_half",
    n_splits: int = 20,
    seed: int | None = 0,
) -> np.ndarray:
    """Ceiling on the Pearson r of a prediction scored against the repeat mean.

    Parameters
    ----------
    y_repeats : array-like, shape (n_repeats, ..., n_times, n_targets)
        Observed responses to each repeated presentation.
    method : ``"split_half"`` | ``"ncsnr"`` | ``"none"``
        Estimator; ``"none"`` returns NaN.
    n_splits : int
        Number of halvings for ``"split_half"``.
    seed : int | None
        Seed of the halvings for ``"split_half"``.

    Returns
    -------
    ceiling_r : ndarray of float64, shape (..., n_targets)
        NaN everywhere when ``method="none"`` or when there are fewer than two
        repeats (a warning is emitted in the latter case).
    """
    if method not in NOISE_CEILING_METHODS:
        raise ValueError(
            f"`method` must be one of {', '.join(NOISE_CEILING_METHODS)}, got {method!r} instead."
        )
    y_repeats = _check_repeats(y_repeats, min_repeats=1)
    nan = np.full(y_repeats.shape[1:-2] + y_repeats.shape[-1:], np.nan)
    if method == "none":
        return nan
    n_repeats = y_repeats.shape[0]
    if n_repeats < 2:
        warnings.warn(
            f"A {method} noise ceiling needs at least 2 repeats of the test stimuli, "
            f"got {n_repeats}; the noise ceiling is left undefined (NaN).",
            RuntimeWarning,
            stacklevel=2,
        )
        return nan
    if method == "split_half":
        reliability = split_half_reliability(y_repeats, n_splits=n_splits, seed=seed)
    else:
        reliability = ncsnr_to_nc(ncsnr(y_repeats), n_repeats) / 100.0
    return ceiling_r_from_reliability(reliability)


def normalize_score(score: np.ndarray, ceiling: np.ndarray) -> np.ndarray:
    """Express a score as a fraction of its noise ceiling.

    Parameters
    ----------
    score : array-like, shape (..., n_targets)
        Raw score (r, or R²).
    ceiling : array-like, shape (..., n_targets)
        Its ceiling (ceiling on r, or the explainable fraction of variance).

    Returns
    -------
    normalized : ndarray of float64, shape (..., n_targets)
        ``score / ceiling``; NaN where the ceiling is not positive or not finite.
    """
    score = np.asarray(score, dtype=np.float64)
    ceiling = np.asarray(ceiling, dtype=np.float64)
    ok = np.isfinite(ceiling) & (ceiling > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, score / np.where(ok, ceiling, 1.0), np.nan)

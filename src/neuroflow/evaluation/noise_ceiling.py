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

Repeats close in time
---------------------
Single-trial estimates of events a few seconds apart share noise (their regressors
overlap), so two repeats of a stimulus shown 3 s apart correlate even in voxels
without any signal, and a split-half ceiling of pure noise reads 0.6 instead of 0.
Given the onset (and run) of every presentation, :func:`split_half` correlates the
halves of a stimulus only when every repeat of one half is at least
``min_separation`` seconds from every repeat of the other (or in another run); other
stimuli are left out of that halving.

Uncertainty
-----------
:func:`estimate_noise_ceiling` also gives a confidence interval of the split-half
ceiling: the Fisher interval of the split-half correlation over the samples it was
computed on, mapped through the Spearman–Brown step and the square root (both monotone). A
noise-normalised score above 1 whose r stays below the interval's upper end is within
the ceiling's uncertainty.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from neuroflow.evaluation.metrics import check_time_target, pearson_r, zscore_time

__all__ = [
    "MIN_SPLIT_SAMPLES",
    "NOISE_CEILING_METHODS",
    "NoiseCeiling",
    "SplitHalf",
    "ceiling_r_from_reliability",
    "estimate_noise_ceiling",
    "ncsnr",
    "ncsnr_to_nc",
    "noise_ceiling_r",
    "normalize_score",
    "separated_samples",
    "spearman_brown",
    "split_half",
    "split_half_interval",
    "split_half_reliability",
]

#: Accepted values of the ``noise_ceiling.method`` option.
NOISE_CEILING_METHODS = ("split_half", "ncsnr", "none")
#: Fewest samples (test stimuli or time points) a split-half correlation is computed on.
MIN_SPLIT_SAMPLES = 5


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


def _check_presentations(
    name: str, values: np.ndarray | None, shape: tuple[int, int]
) -> np.ndarray | None:
    if values is None:
        return None
    values = np.asarray(values)
    if values.shape != shape:
        raise ValueError(
            f"`{name}` must have shape (n_repeats, n_times) = {shape}, like the first and "
            f"second to last axes of `y_repeats`, got shape {values.shape} instead."
        )
    return values


def separated_samples(
    first: np.ndarray,
    second: np.ndarray,
    *,
    onsets: np.ndarray,
    groups: np.ndarray | None = None,
    min_separation: float,
) -> np.ndarray:
    """Samples whose two halves of repeats are far enough apart to have independent noise.

    Parameters
    ----------
    first, second : ndarray of int
        Repeats in each half.
    onsets : array-like of float, shape (n_repeats, n_times)
        Onset in seconds of every presentation (repeat of a test stimulus).
    groups : array-like, shape (n_repeats, n_times) | None
        Run of every presentation; presentations of different runs are always far apart.
    min_separation : float
        Seconds; 0 keeps every sample.

    Returns
    -------
    keep : ndarray of bool, shape (n_times,)
        True where every presentation of ``first`` is at least ``min_separation`` from
        every presentation of ``second``, or in another run (unknown onsets, NaN, count
        as far apart).
    """
    onsets = np.asarray(onsets, dtype=np.float64)
    keep = np.ones(onsets.shape[1], bool)
    if min_separation <= 0:
        return keep
    for a in first:
        for b in second:
            gap = np.abs(onsets[a] - onsets[b])
            far = ~(gap < min_separation)  # NaN: unknown, kept
            if groups is not None:
                far |= np.asarray(groups)[a] != np.asarray(groups)[b]
            keep &= far
    return keep


@dataclass(frozen=True)
class SplitHalf:
    """Split-half correlation of a set of repeats and what it was computed on.

    Attributes
    ----------
    r_half : ndarray of float64, shape (..., n_targets)
        Correlation between the means of the two halves, averaged over the halvings.
    n_first, n_second : int
        Repeats averaged in each half.
    n_total : int
        Repeats of the mean whose reliability is estimated.
    n_samples : int
        Fewest samples any halving used (0 when none had :data:`MIN_SPLIT_SAMPLES`).
    n_excluded : int
        Samples left out of the halving that left out most (repeats too close).
    """

    r_half: np.ndarray
    n_first: int
    n_second: int
    n_total: int
    n_samples: int
    n_excluded: int

    @property
    def reliability(self) -> np.ndarray:
        """Spearman–Brown reliability of the ``n_total``-repeat mean, shape (..., n_targets)."""
        return spearman_brown(
            self.r_half, n_first=self.n_first, n_second=self.n_second, n_total=self.n_total
        )


def split_half(
    y_repeats: np.ndarray,
    *,
    n_splits: int = 20,
    seed: int | None = 0,
    onsets: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    min_separation: float = 0.0,
) -> SplitHalf:
    """Correlation between the means of two halves of the repeats, over random halvings.

    Parameters
    ----------
    y_repeats : array-like, shape (n_repeats, ..., n_times, n_targets)
        Observed responses to each repeated presentation, ``n_repeats >= 2``.
    n_splits : int
        Number of random halvings averaged; when the repeats admit fewer
        distinct halvings, all of them are used (a single one for 2 repeats).
    seed : int | None
        Seed of the random halvings.
    onsets : array-like of float, shape (n_repeats, n_times) | None
        Onset (s) of every presentation, for single-trial responses: with
        ``min_separation``, a halving correlates only the samples (stimuli) whose
        halves are far apart (:func:`separated_samples`).
    groups : array-like, shape (n_repeats, n_times) | None
        Run of every presentation (repeats in different runs are far apart).
    min_separation : float
        Seconds; 0 (or no ``onsets``) uses every sample.

    Returns
    -------
    split : SplitHalf
        Halvings with fewer than :data:`MIN_SPLIT_SAMPLES` samples are left out; when
        all are, ``r_half`` is NaN and ``n_samples`` 0.
    """
    y_repeats = _check_repeats(y_repeats, min_repeats=2)
    if not isinstance(n_splits, int | np.integer) or n_splits < 1:
        raise ValueError(f"`n_splits` must be a positive int, got {n_splits!r} instead.")
    if isinstance(min_separation, bool) or not min_separation >= 0:
        raise ValueError(
            f"`min_separation` must be a number of seconds >= 0, got {min_separation!r} instead."
        )
    n_repeats, n_times = y_repeats.shape[0], y_repeats.shape[-2]
    onsets = _check_presentations("onsets", onsets, (n_repeats, n_times))
    groups = _check_presentations("groups", groups, (n_repeats, n_times))
    r_halves, counts, excluded = [], [], 0
    for first in _half_splits(n_repeats, int(n_splits), seed):
        second = np.setdiff1d(np.arange(n_repeats), first)
        keep = np.ones(n_times, bool)
        if onsets is not None:
            keep = separated_samples(
                first, second, onsets=onsets, groups=groups, min_separation=min_separation
            )
        excluded = max(excluded, int((~keep).sum()))
        if keep.sum() < MIN_SPLIT_SAMPLES:
            continue
        counts.append(int(keep.sum()))
        a = y_repeats[first][..., keep, :].mean(0)
        b = y_repeats[second][..., keep, :].mean(0)
        r_halves.append(pearson_r(a, b))
    if r_halves:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN targets stay NaN
            r_half = np.nanmean(np.stack(r_halves), axis=0)
    else:
        r_half = np.full(y_repeats.shape[1:-2] + y_repeats.shape[-1:], np.nan)
    return SplitHalf(
        r_half=r_half,
        n_first=n_repeats // 2,
        n_second=n_repeats - n_repeats // 2,
        n_total=n_repeats,
        n_samples=min(counts, default=0),
        n_excluded=excluded,
    )


def split_half_interval(split: SplitHalf, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Confidence interval of the split-half ceiling on r.

    The Fisher interval of the split-half correlation (standard error
    ``1 / sqrt(n_samples - 3)`` in z) is mapped through the Spearman–Brown step and
    the square root. Averaging halvings makes the correlation less variable than one
    halving's, so the interval is conservative when there are more than 2 repeats.

    Parameters
    ----------
    split : SplitHalf
        Output of :func:`split_half`.
    level : float
        Confidence level, in ``(0, 1)``.

    Returns
    -------
    low, high : ndarray of float64, shape (..., n_targets)
        Bounds of the ceiling on r, in ``[0, 1]``; NaN where the correlation is NaN or
        with 3 samples or fewer.
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level!r} instead.")
    r = np.asarray(split.r_half, dtype=np.float64)
    if split.n_samples <= 3:
        nan = np.full(r.shape, np.nan)
        return nan, nan.copy()
    z = np.arctanh(np.clip(r, -1 + 1e-12, 1 - 1e-12))
    half_width = norm.ppf(0.5 + level / 2) / math.sqrt(split.n_samples - 3)
    bounds = []
    for bound in (np.tanh(z - half_width), np.tanh(z + half_width)):
        bound = np.where(np.isnan(r), np.nan, bound)
        rel = spearman_brown(
            bound, n_first=split.n_first, n_second=split.n_second, n_total=split.n_total
        )
        bounds.append(ceiling_r_from_reliability(rel))
    return bounds[0], bounds[1]


def split_half_reliability(
    y_repeats: np.ndarray,
    *,
    n_splits: int = 20,
    seed: int | None = 0,
    onsets: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    min_separation: float = 0.0,
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
    onsets, groups, min_separation
        Leave out samples whose halves are closer than ``min_separation`` seconds
        (see :func:`split_half`).

    Returns
    -------
    reliability : ndarray of float64, shape (..., n_targets)
        Estimated reliability of the mean of all ``n_repeats`` repeats: the
        ceiling on R² of a model scored against that mean.
    """
    return split_half(
        y_repeats,
        n_splits=n_splits,
        seed=seed,
        onsets=onsets,
        groups=groups,
        min_separation=min_separation,
    ).reliability


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


@dataclass(frozen=True)
class NoiseCeiling:
    """A noise ceiling on r with its confidence interval.

    Attributes
    ----------
    r : ndarray of float64, shape (..., n_targets)
        Ceiling on the Pearson r of a prediction scored against the repeat mean.
    low, high : ndarray of float64, shape (..., n_targets)
        Bounds of its confidence interval (split-half only; NaN otherwise).
    n_samples : int
        Samples the split-half correlation used (0 for other methods).
    notes : tuple of str
        What a reader of the ceiling should know (samples left out, too few left).
    """

    r: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_samples: int = 0
    notes: tuple[str, ...] = ()


def estimate_noise_ceiling(
    y_repeats: np.ndarray,
    *,
    method: str = "split_half",
    n_splits: int = 20,
    seed: int | None = 0,
    onsets: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    min_separation: float = 0.0,
    level: float = 0.95,
) -> NoiseCeiling:
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
    onsets, groups, min_separation
        Onset (s) and run of every presentation, shape (n_repeats, n_times): with
        ``"split_half"``, samples whose halves are closer than ``min_separation``
        seconds within a run are left out of each halving (see :func:`split_half`).
    level : float
        Confidence level of the interval.

    Returns
    -------
    ceiling : NoiseCeiling
        NaN everywhere when ``method="none"``, when there are fewer than two repeats,
        or when fewer than :data:`MIN_SPLIT_SAMPLES` samples have repeats far enough
        apart (a warning is emitted in the last two cases, and a note kept).
    """
    if method not in NOISE_CEILING_METHODS:
        raise ValueError(
            f"`method` must be one of {', '.join(NOISE_CEILING_METHODS)}, got {method!r} instead."
        )
    y_repeats = _check_repeats(y_repeats, min_repeats=1)
    nan = np.full(y_repeats.shape[1:-2] + y_repeats.shape[-1:], np.nan)
    if method == "none":
        return NoiseCeiling(nan, nan, nan)
    n_repeats = y_repeats.shape[0]
    if n_repeats < 2:
        note = (
            f"A {method} noise ceiling needs at least 2 repeats of the test stimuli, "
            f"got {n_repeats}; the noise ceiling is left undefined (NaN)."
        )
        warnings.warn(note, RuntimeWarning, stacklevel=2)
        return NoiseCeiling(nan, nan, nan, notes=(note,))
    if method == "ncsnr":
        reliability = ncsnr_to_nc(ncsnr(y_repeats), n_repeats) / 100.0
        return NoiseCeiling(ceiling_r_from_reliability(reliability), nan, nan)
    split = split_half(
        y_repeats,
        n_splits=n_splits,
        seed=seed,
        onsets=onsets,
        groups=groups,
        min_separation=min_separation,
    )
    notes = []
    n_times = y_repeats.shape[-2]
    if split.n_samples == 0:
        note = (
            f"Fewer than {MIN_SPLIT_SAMPLES} of the {n_times} test samples have repeats at "
            f"least {min_separation:g} s apart (or in different runs); the split-half noise "
            "ceiling is left undefined (NaN): estimates of nearby trials share noise."
        )
        warnings.warn(note, RuntimeWarning, stacklevel=2)
        notes.append(note)
    elif split.n_excluded:
        notes.append(
            f"split-half noise ceiling on {split.n_samples} of {n_times} test samples: "
            f"up to {split.n_excluded} per halving have repeats closer than "
            f"{min_separation:g} s in one run"
        )
    low, high = split_half_interval(split, level)
    return NoiseCeiling(
        ceiling_r_from_reliability(split.reliability),
        low,
        high,
        n_samples=split.n_samples,
        notes=tuple(notes),
    )


def noise_ceiling_r(
    y_repeats: np.ndarray,
    *,
    method: str = "split_half",
    n_splits: int = 20,
    seed: int | None = 0,
    onsets: np.ndarray | None = None,
    groups: np.ndarray | None = None,
    min_separation: float = 0.0,
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
    onsets, groups, min_separation
        See :func:`estimate_noise_ceiling`.

    Returns
    -------
    ceiling_r : ndarray of float64, shape (..., n_targets)
        NaN everywhere when ``method="none"`` or when there are fewer than two
        repeats (a warning is emitted in the latter case).
    """
    return estimate_noise_ceiling(
        y_repeats,
        method=method,
        n_splits=n_splits,
        seed=seed,
        onsets=onsets,
        groups=groups,
        min_separation=min_separation,
    ).r


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

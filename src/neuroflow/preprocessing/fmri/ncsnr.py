"""Noise-ceiling SNR and noise ceilings from single-trial responses to repeated stimuli.

The Natural Scenes Dataset (Allen et al., 2022, Nat. Neurosci. 25, 116–126)
summarises the reliability of each voxel's single-trial responses (betas) by
its noise-ceiling signal-to-noise ratio:

1. betas are z-scored per voxel within each run (or session), so that the
   variance of a beta is 1 = signal variance + noise variance;
2. the noise variance is the variance across the repeats of a stimulus
   (``ddof=1``), pooled over the stimuli shown at least twice;
3. ``signal SD = sqrt(max(0, 1 - noise variance))`` and
   ``ncsnr = signal SD / noise SD``.

The noise ceiling (percentage of the variance of the trial-averaged response
that the stimulus can explain) of the mean of ``n`` repeats is
``NC = 100 × ncsnr² / (ncsnr² + 1 / n)``.

Repeats close in time
---------------------
Single-trial estimates of events a few seconds apart share noise: their regressors
overlap, so the same noise enters both betas, and the repeats of a stimulus shown
twice in a row look alike even in voxels without signal (with repeats 3 s apart,
pure-noise voxels reach noise ceilings of 35-40 %). The noise variance is therefore
estimated from pairs of repeats: ``σ² = mean (b_i - b_j)² / 2`` over the pairs of a
stimulus, which with every pair counted is exactly the variance across its repeats
(``ddof=1``); with ``min_separation`` only pairs whose onsets are at least that far
apart (or in different runs) count (:func:`noise_variance`).

Unequal repeat counts
---------------------
* Noise variance: each stimulus's sum of squared deviations from its own mean
  is divided by the total degrees of freedom, ``Σ_s (n_s - 1)``. With equal
  repeat counts this is exactly NSD's mean of the per-stimulus variances; with
  unequal counts it is the pooled (minimum-variance unbiased) estimate of the
  same noise variance, where a plain mean would give a stimulus seen twice as
  much weight as one seen ten times. Stimuli seen once carry no information on
  the noise and are left out of it (they still count in the z-scoring).
* Noise ceiling: when the responses scored are means over different numbers of
  repeats ``n_s`` per stimulus, NSD replaces ``1 / n`` by the mean of
  ``1 / n_s`` over the stimuli scored (:func:`noise_ceiling_from_ncsnr` with an
  array of counts), since the noise variance of the averaged response of
  stimulus ``s`` is ``σ² / n_s``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "ncsnr_from_betas",
    "noise_ceiling_from_ncsnr",
    "noise_variance",
    "repeat_counts",
    "typical_repeat_count",
    "zscore_within",
]

#: Voxels per block in the grouped reductions (bounded temporaries).
BLOCK_VOXELS = 16384


def _check_betas(betas: np.ndarray) -> np.ndarray:
    betas = np.asarray(betas)
    if betas.ndim != 2:
        raise ValueError(
            f"`betas` must be 2-D (n_trials, n_voxels), got shape {betas.shape} instead."
        )
    if betas.dtype.kind not in "fiu":
        raise ValueError(f"`betas` must be numeric, got dtype {betas.dtype} instead.")
    return betas


def _check_labels(name: str, labels: Sequence | np.ndarray, n_trials: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.shape != (n_trials,):
        raise ValueError(
            f"`{name}` must have one label per trial, shape ({n_trials},), "
            f"got shape {labels.shape} instead."
        )
    return labels


def zscore_within(betas: np.ndarray, groups: Sequence | np.ndarray, *, ddof: int = 1) -> np.ndarray:
    """Z-score every voxel's betas within each group of trials (run or session).

    Parameters
    ----------
    betas : array-like, shape (n_trials, n_voxels)
        Single-trial responses.
    groups : array-like, shape (n_trials,)
        Group label of each trial.
    ddof : int
        Delta degrees of freedom of the standard deviation.

    Returns
    -------
    z : ndarray of float64, shape (n_trials, n_voxels)
        Betas with mean 0 and standard deviation 1 per voxel within each group;
        a voxel constant within a group is 0 there.
    """
    betas = _check_betas(betas)
    groups = _check_labels("groups", groups, betas.shape[0])
    out = np.empty(betas.shape, np.float64)
    eps = np.finfo(np.float64).eps
    for label in np.unique(groups):
        rows = np.flatnonzero(groups == label)
        if rows.size - ddof <= 0:
            raise ValueError(
                f"Group {label.item()!r} must hold more than {ddof} trial(s) to be z-scored, "
                f"got {rows.size} instead."
            )
        part = betas[rows].astype(np.float64)
        part -= part.mean(axis=0)
        std = np.sqrt((part**2).sum(axis=0) / (rows.size - ddof))
        constant = std < eps * np.maximum(1.0, np.abs(betas[rows]).max(axis=0))
        part /= np.where(constant, 1.0, std)
        part[:, constant] = 0.0
        out[rows] = part
    return out


def repeat_counts(stimuli: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number of trials of every stimulus.

    Parameters
    ----------
    stimuli : array-like of str, shape (n_trials,)
        Stimulus of each trial; ``""`` (no stimulus) is not counted.

    Returns
    -------
    names : ndarray of str, shape (n_stimuli,)
        Sorted stimulus names.
    counts : ndarray of int, shape (n_stimuli,)
        Trials per stimulus.
    """
    stimuli = np.asarray(stimuli).astype(str)
    names, counts = np.unique(stimuli[stimuli != ""], return_counts=True)
    return names, counts


def typical_repeat_count(counts: np.ndarray) -> int | None:
    """The repeat count most repeated stimuli have (ties go to the larger count).

    Parameters
    ----------
    counts : array-like of int, shape (n_stimuli,)
        Trials per stimulus (:func:`repeat_counts`).

    Returns
    -------
    n : int | None
        Mode of the counts of at least 2; ``None`` when no stimulus repeats.
    """
    counts = np.asarray(counts, dtype=np.int64)
    counts = counts[counts >= 2]
    if counts.size == 0:
        return None
    values, freq = np.unique(counts, return_counts=True)
    return int(values[freq == freq.max()].max())


def _repeat_pairs(
    stimuli: np.ndarray,
    onsets: np.ndarray | None,
    runs: np.ndarray | None,
    min_separation: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Pairs of repeats that count for the noise variance, with their weights.

    Returns the first and second trial of every pair, the weight of each pair and the
    degrees of freedom: a stimulus with ``n`` repeats and ``m`` of its ``n (n - 1) / 2``
    pairs counted adds ``n - 1`` degrees of freedom, shared by its ``m`` pairs.
    """
    names, index, counts = np.unique(stimuli, return_inverse=True, return_counts=True)
    first, second, weight = [], [], []
    dof = 0.0
    for s in np.flatnonzero((counts >= 2) & (names != "")):
        rows = np.flatnonzero(index == s)
        i, j = np.triu_indices(rows.size, k=1)
        a, b = rows[i], rows[j]
        if min_separation > 0 and onsets is not None:
            far = np.abs(onsets[a] - onsets[b]) >= min_separation
            if runs is not None:
                far |= runs[a] != runs[b]
            a, b = a[far], b[far]
        if a.size == 0:
            continue
        first.append(a)
        second.append(b)
        weight.append(np.full(a.size, (rows.size - 1) / a.size))
        dof += rows.size - 1
    if not first:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0), 0.0
    return np.concatenate(first), np.concatenate(second), np.concatenate(weight), dof


def noise_variance(
    betas: np.ndarray,
    stimuli: Sequence | np.ndarray,
    *,
    onsets: Sequence[float] | np.ndarray | None = None,
    runs: Sequence | np.ndarray | None = None,
    min_separation: float = 0.0,
) -> np.ndarray:
    """Pooled variance across the repeats of each stimulus, per voxel.

    Parameters
    ----------
    betas : array-like, shape (n_trials, n_voxels)
        Single-trial responses (z-scored within runs for :func:`ncsnr_from_betas`).
    stimuli : array-like of str, shape (n_trials,)
        Stimulus of each trial; ``""`` marks trials without a stimulus.
    onsets : array-like of float, shape (n_trials,) | None
        Onset of each trial, in s (within its run).
    runs : array-like, shape (n_trials,) | None
        Run of each trial: repeats in different runs are always far enough apart.
    min_separation : float
        Pairs of repeats whose onsets are closer than this (in s, same run) are left
        out; 0 keeps every pair.

    Returns
    -------
    variance : ndarray of float64, shape (n_voxels,)
        ``Σ_s (n_s - 1) mean_pairs((b_i - b_j)² / 2) / Σ_s (n_s - 1)`` over the
        stimuli with ``n_s >= 2`` and at least one pair counted; with every pair
        counted, ``Σ_s Σ_r (b_sr - mean_s)² / Σ_s (n_s - 1)`` (the mean of the
        per-stimulus variances, ``ddof=1``, when every ``n_s`` is the same). NaN when no
        pair is counted.
    """
    betas = _check_betas(betas)
    n_trials = betas.shape[0]
    stimuli = _check_labels("stimuli", stimuli, n_trials).astype(str)
    if not (np.isfinite(min_separation) and min_separation >= 0):
        raise ValueError(
            f"`min_separation` must be a non-negative number of seconds, got "
            f"{min_separation!r} instead."
        )
    onset_arr = None
    if onsets is not None:
        onset_arr = _check_labels("onsets", onsets, n_trials).astype(np.float64)
    elif min_separation > 0:
        raise ValueError("`onsets` must be given with a positive `min_separation`, got None.")
    run_arr = None if runs is None else _check_labels("runs", runs, n_trials).astype(str)
    first, second, weight, dof = _repeat_pairs(stimuli, onset_arr, run_arr, min_separation)
    if dof == 0:
        return np.full(betas.shape[1], np.nan)
    out = np.empty(betas.shape[1])
    for start in range(0, betas.shape[1], BLOCK_VOXELS):
        block = slice(start, start + BLOCK_VOXELS)
        diff = betas[first, block].astype(np.float64) - betas[second, block]
        out[block] = (weight @ diff**2) / (2.0 * dof)
    return out


def ncsnr_from_betas(
    betas: np.ndarray,
    stimuli: Sequence | np.ndarray,
    *,
    groups: Sequence | np.ndarray | None = None,
    onsets: Sequence[float] | np.ndarray | None = None,
    min_separation: float = 0.0,
) -> np.ndarray:
    """NSD's noise-ceiling signal-to-noise ratio of each voxel.

    Parameters
    ----------
    betas : array-like, shape (n_trials, n_voxels)
        Single-trial responses, at least one stimulus shown twice.
    stimuli : array-like of str, shape (n_trials,)
        Stimulus of each trial (``""``: no stimulus, not a repeat of anything).
    groups : array-like, shape (n_trials,) | None
        Run or session of each trial; betas are z-scored per voxel within each
        group first. ``None`` z-scores over all trials at once. Repeats in different
        groups are always far enough apart.
    onsets : array-like of float, shape (n_trials,) | None
        Onset of each trial within its group, in s.
    min_separation : float
        Repeats of a stimulus closer than this (s, same group) are not compared
        (:func:`noise_variance`).

    Returns
    -------
    ncsnr : ndarray of float64, shape (n_voxels,)
        ``sqrt(max(0, 1 - σ²)) / sqrt(σ²)`` with ``σ²`` the pooled noise
        variance of the z-scored betas (:func:`noise_variance`); ``inf`` for a
        noiseless voxel, NaN for a voxel constant in every group or when no
        stimulus repeats.
    """
    betas = _check_betas(betas)
    if groups is None:
        groups = np.zeros(betas.shape[0], np.int64)
    z = zscore_within(betas, groups)
    var = noise_variance(z, stimuli, onsets=onsets, runs=groups, min_separation=min_separation)
    constant = ~np.any(z != 0, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        snr = np.sqrt(np.maximum(0.0, 1.0 - var)) / np.sqrt(var)
    return np.where(constant, np.nan, snr)


def noise_ceiling_from_ncsnr(
    ncsnr: np.ndarray, n_repeats: int | Sequence[int] | np.ndarray
) -> np.ndarray:
    """NSD's noise ceiling (percent) of trial-averaged responses.

    Parameters
    ----------
    ncsnr : array-like, shape (n_voxels,)
        Output of :func:`ncsnr_from_betas`.
    n_repeats : int | array-like of int, shape (n_stimuli,)
        Repeats averaged per stimulus: one count for all stimuli, or the count
        of each stimulus scored (then ``1 / n`` is replaced by the mean of
        ``1 / n_s``, NSD's correction for unequal repeat counts).

    Returns
    -------
    nc : ndarray of float64, shape (n_voxels,)
        ``100 × ncsnr² / (ncsnr² + mean(1 / n_s))``, in ``[0, 100]``; NaN stays NaN.
    """
    counts = np.atleast_1d(np.asarray(n_repeats))
    if counts.ndim != 1 or counts.size == 0 or counts.dtype.kind not in "iu" or (counts < 1).any():
        raise ValueError(
            "`n_repeats` must be a positive int or a non-empty 1-D array of positive ints, "
            f"got {n_repeats!r} instead."
        )
    inv_n = float(np.mean(1.0 / counts))
    s2 = np.asarray(ncsnr, dtype=np.float64) ** 2
    with np.errstate(invalid="ignore"):
        nc = np.where(np.isinf(s2), 100.0, 100.0 * s2 / (s2 + inv_n))
    return np.where(np.isnan(s2), np.nan, nc)

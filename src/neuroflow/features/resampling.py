"""Weights that take feature rows placed in time onto a run's volumes.

- :func:`average_weights`: each row's overlap with each TR, averaged within the TR;
- :func:`lanczos_weights`: Lanczos resampling of the rows' centres;
- :func:`hrf_weights`: each event's boxcar, at its own onset and for its own duration,
  convolved with an HRF (or a library of HRFs) on a fine time grid
  (:func:`fine_grid`, :func:`boxcar_responses`) and sampled at the volumes, as a GLM
  builds its regressors;
- :func:`event_rows` and :func:`delay_features`: per-event rows and FIR delays.

:func:`neuroflow.features.align.align_features` places the rows and applies them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from neuroflow.features.config import SHIFTED_HRF_MODELS

__all__ = [
    "MIN_ONSET",
    "average_weights",
    "boxcar_bounds",
    "boxcar_responses",
    "delay_features",
    "event_rows",
    "fine_grid",
    "hrf_weights",
    "lanczos_weights",
]


def _intervals(times: np.ndarray, tr: float, reference: str) -> tuple[np.ndarray, np.ndarray]:
    start = times if reference == "start" else times - tr / 2.0
    return start, start + tr


def average_weights(
    times: np.ndarray,
    tr: float,
    onsets: np.ndarray,
    durations: np.ndarray,
    *,
    aggregation: str = "mean",
    tr_reference: str = "start",
) -> np.ndarray:
    """Weights that average (or sum) event features within each TR.

    Parameters
    ----------
    times : ndarray, shape (n_times,)
        Acquisition times of the volumes in seconds.
    tr : float
        Repetition time in seconds.
    onsets, durations : ndarray, shape (n_events,)
        Event onsets and durations in seconds. A zero or NaN duration is an
        impulse, assigned to the TR interval that contains its onset.
    aggregation : str
        ``"mean"``: each TR is the overlap-weighted mean of the events it
        overlaps (weights: seconds of overlap; an impulse weighs a whole TR);
        TRs without events are 0. ``"sum"``: each event spreads its features
        over the TRs it overlaps in proportion to the fraction of its duration
        in each (an impulse adds once), so one-word events summed give words
        per TR.
    tr_reference : str
        ``"start"``: volume ``k`` covers ``[times[k], times[k] + tr)``;
        ``"center"``: ``[times[k] - tr/2, times[k] + tr/2)``.

    Returns
    -------
    weights : ndarray, shape (n_times, n_events)
        ``aligned = weights @ features``.
    """
    if aggregation not in ("mean", "sum"):
        raise ValueError(f"`aggregation` must be 'mean' or 'sum', got {aggregation!r} instead.")
    start, stop = _intervals(np.asarray(times, float), float(tr), tr_reference)
    onsets = np.asarray(onsets, float)
    durations = np.nan_to_num(np.asarray(durations, float), nan=0.0)
    ends = onsets + durations
    impulse = durations <= 0
    overlap = np.clip(
        np.minimum(stop[:, None], ends[None, :]) - np.maximum(start[:, None], onsets[None, :]),
        0.0,
        None,
    )
    inside = (start[:, None] <= onsets[None, :]) & (onsets[None, :] < stop[:, None])
    if aggregation == "sum":
        weights = np.where(impulse[None, :], inside.astype(float), 0.0)
        safe = np.where(impulse, 1.0, durations)
        weights += np.where(impulse[None, :], 0.0, overlap / safe[None, :])
        return weights
    weights = np.where(impulse[None, :], inside * float(tr), overlap)
    total = weights.sum(axis=1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)


def lanczos_weights(
    times: np.ndarray,
    tr: float,
    event_times: np.ndarray,
    *,
    window: int = 3,
    tr_reference: str = "start",
) -> np.ndarray:
    """Lanczos interpolation weights from event times to TR times.

    Parameters
    ----------
    times : ndarray, shape (n_times,)
        Acquisition times of the volumes in seconds.
    tr : float
        Repetition time in seconds; the low-pass cutoff is the TR grid's
        Nyquist frequency ``1 / (2 tr)``.
    event_times : ndarray, shape (n_events,)
        Time of each event (its midpoint) in seconds.
    window : int
        Number of lobes of the Lanczos kernel.
    tr_reference : str
        ``"start"``: a volume's time is ``times[k] + tr/2`` (its interval's
        centre); ``"center"``: ``times[k]``.

    Returns
    -------
    weights : ndarray, shape (n_times, n_events)
        ``aligned = weights @ features`` (as in Huth et al., 2016: a sum, not
        normalised per TR).
    """
    centre = np.asarray(times, float) + (tr / 2.0 if tr_reference == "start" else 0.0)
    u = (centre[:, None] - np.asarray(event_times, float)[None, :]) / float(tr)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = window * np.sin(np.pi * u) * np.sin(np.pi * u / window) / (np.pi**2 * u**2)
    w[u == 0] = 1.0
    w[np.abs(u) > window] = 0.0
    return w


#: Earliest onset, relative to the first volume, that the fine grid of the convolution
#: covers (nilearn's ``min_onset``, as in
#: :func:`neuroflow.preprocessing.fmri.single_trial.event_regressors`).
MIN_ONSET = -24.0


def fine_grid(frame_times: np.ndarray, oversampling: int) -> np.ndarray:
    """The fine time grid on which nilearn convolves a run's events with an HRF.

    The grid of :func:`nilearn.glm.first_level.compute_regressor` (with ``min_onset``
    :data:`MIN_ONSET`), computed as nilearn does so that events fall on the same samples.

    Parameters
    ----------
    frame_times : ndarray, shape (n_times,)
        Evenly spaced sampling times of the volumes in seconds (at least 2).
    oversampling : int
        Samples per TR.

    Returns
    -------
    grid : ndarray, shape (n_fine,)
        From ``frame_times[0] + MIN_ONSET`` to one TR past the last volume (for a
        grid that starts at 0).
    """
    n = frame_times.size
    lo, hi = float(frame_times.min()), float(frame_times.max())
    n_fine = (n - 1) * 1.0 / (hi - lo)
    n_fine *= (hi * (1 + 1.0 / (n - 1)) - lo - MIN_ONSET) * oversampling
    return np.linspace(lo + MIN_ONSET, hi * (1 + 1.0 / (n - 1)), np.rint(n_fine + 1).astype(int))


def boxcar_bounds(
    grid: np.ndarray, onsets: np.ndarray, durations: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """First and past-the-last fine samples of each event's unit boxcar, as nilearn places them.

    Parameters
    ----------
    grid : ndarray, shape (n_fine,)
        Output of :func:`fine_grid`.
    onsets, durations : ndarray, shape (n_events,)
        In seconds (durations without NaN).

    Returns
    -------
    first, stop : ndarray of int, shape (n_events,)
        The boxcar is 1 on samples ``first <= k < stop``. An event starts at the first
        sample at or after its onset and ends at the first at or after its end; an
        impulse (or an event shorter than a sample) covers one sample; both bounds stop
        at the last sample, so an event that starts there adds nothing.
    """
    last = grid.size - 1
    first = np.minimum(np.searchsorted(grid, onsets), last)
    stop = np.minimum(np.searchsorted(grid, onsets + durations), last)
    stop = np.where((stop < last) & (stop == first), stop + 1, stop)
    return first, stop


def boxcar_responses(
    kernel: np.ndarray,
    grid: np.ndarray,
    first: np.ndarray,
    stop: np.ndarray,
    frame_times: np.ndarray,
) -> np.ndarray:
    """Each event's boxcar convolved with an HRF kernel on the fine grid, sampled at the volumes.

    The convolution of a boxcar with the kernel is a difference of the kernel's running
    sum, ``conv[n] = K[n - first] - K[n - stop]`` with ``K[m] = kernel[:m + 1].sum()``
    (0 for ``m < 0``), evaluated only at the two fine samples around each volume and
    interpolated linearly between them: the values of
    :func:`nilearn.glm.first_level.compute_regressor` for each event alone (its
    convolution, cut at the grid's end, then its linear interpolation), for all events
    at once.

    Parameters
    ----------
    kernel : ndarray, shape (n_kernel,)
        HRF sampled on the fine grid's step, e.g. nilearn's ``spm_hrf(t_r, oversampling)``.
    grid : ndarray, shape (n_fine,)
        Output of :func:`fine_grid`.
    first, stop : ndarray of int, shape (n_events,)
        Output of :func:`boxcar_bounds`.
    frame_times : ndarray, shape (n_times,)
        Sampling times of the volumes, within ``grid``.

    Returns
    -------
    responses : ndarray, shape (n_times, n_events)
        Column ``e``: event ``e``'s regressor at unit amplitude.
    """
    running = np.concatenate([[0.0], np.cumsum(np.asarray(kernel, float))])
    # samples around each volume, as scipy's linear interp1d picks them
    hi = np.clip(np.searchsorted(grid, frame_times), 1, grid.size - 1)
    lo = hi - 1

    def conv(n: np.ndarray) -> np.ndarray:
        after_first = np.clip(n[:, None] - first[None, :] + 1, 0, running.size - 1)
        after_stop = np.clip(n[:, None] - stop[None, :] + 1, 0, running.size - 1)
        return running[after_first] - running[after_stop]

    y_lo, y_hi = conv(lo), conv(hi)
    slope = (y_hi - y_lo) / (grid[hi] - grid[lo])[:, None]
    return slope * (frame_times - grid[lo])[:, None] + y_lo


def hrf_weights(
    times: np.ndarray,
    tr: float,
    onsets: np.ndarray,
    durations: np.ndarray,
    *,
    hrf_model: str = "glover",
    oversampling: int = 50,
    slice_time_ref: float = 0.0,
    tr_reference: str = "start",
) -> np.ndarray:
    """Weights that give each event's HRF-convolved boxcar at the volumes.

    Column ``e`` is :func:`nilearn.glm.first_level.compute_regressor` of event ``e``
    alone (unit amplitude, its own onset and duration), so ``weights @ features`` is
    the regressor a GLM would build with each feature as a parametric modulator. Short
    events keep their timing and length: a 1 s image in a 2 s TR weighs half of a 2 s
    one, and an event that starts late in a TR peaks later. All events are convolved
    at once (:func:`boxcar_responses`, with nilearn's HRF kernels and fine grid).

    Parameters
    ----------
    times : ndarray, shape (n_times,)
        Acquisition times of the volumes in seconds.
    tr : float
        Repetition time in seconds.
    onsets, durations : ndarray, shape (n_events,)
        Event onsets and durations in seconds (a zero or NaN duration is an impulse).
    hrf_model : str
        nilearn's canonical HRF, ``"glover"`` or ``"spm"``, optionally with its
        time derivative (``"glover + derivative"``) and dispersion derivative
        (``"glover + derivative + dispersion"``): the derivatives let each feature's
        response peak earlier or later, or be wider, than the canonical shape. Or SPM's
        HRF moved to peak at 4, 6 or 7 s instead of 5 (``"spm peak 4 s"``, ``"spm peak
        6 s"``, ``"spm peak 7 s"``; :data:`neuroflow.features.config.SHIFTED_HRF_MODELS`),
        members of an HRF library.
    oversampling : int
        Temporal oversampling of the convolution (points per TR).
    slice_time_ref : float
        Where in its TR interval each volume is sampled, as a fraction of the TR
        (nilearn's ``slice_time_ref``: 0 for the interval's start, 0.5 for runs
        slice-time corrected to the middle slice, as fMRIPrep does).
    tr_reference : str
        ``"start"``: ``times[k]`` is the start of volume ``k``'s TR interval;
        ``"center"``: its centre.

    Returns
    -------
    weights : ndarray, shape (n_times, n_events) or (n_basis, n_times, n_events)
        ``aligned = weights @ features``; with derivatives, one matrix per basis
        function (canonical first, in nilearn's order).
    """
    from neuroflow.preprocessing.fmri.single_trial import HRF_MODELS

    if hrf_model not in HRF_MODELS and hrf_model not in SHIFTED_HRF_MODELS:
        raise ValueError(
            f"`hrf_model` must be one of {sorted([*HRF_MODELS, *SHIFTED_HRF_MODELS])}, got "
            f"{hrf_model!r} instead."
        )
    start, _ = _intervals(np.asarray(times, float), float(tr), tr_reference)
    frame_times = start + float(slice_time_ref) * float(tr)
    onsets = np.asarray(onsets, float)
    # a shifted HRF is the canonical one convolved with events moved by the shift
    hrf_model, shift = SHIFTED_HRF_MODELS.get(hrf_model, (hrf_model, 0.0))
    onsets = onsets + shift
    basis = HRF_MODELS[hrf_model]
    if onsets.size == 0:
        empty = np.zeros((len(basis), frame_times.size, 0))
        return empty[0] if len(basis) == 1 else empty
    durations = np.nan_to_num(np.asarray(durations, float), nan=0.0)
    if frame_times.size < 2:
        raise ValueError(
            f"`times` must hold at least 2 volumes to convolve events with an HRF, got "
            f"{frame_times.size} instead."
        )
    oversampling = int(oversampling)
    grid = fine_grid(frame_times, oversampling)
    early = onsets < grid[0]
    if early.any():
        warnings.warn(
            f"{int(early.sum())} event(s) start more than {-MIN_ONSET:g} s before the first "
            f"volume (earliest onset {onsets.min():g} s, with the HRF's shift): their "
            f"responses are computed as if they started at {grid[0]:g} s.",
            UserWarning,
            stacklevel=2,
        )
    first, stop = boxcar_bounds(grid, onsets, durations)
    # nilearn's kernel step: the smallest gap between volumes over the oversampling
    t_r = float(np.min(np.diff(frame_times)))
    weights = np.stack(
        [
            boxcar_responses(function(t_r, oversampling), grid, first, stop, frame_times)
            for function in basis
        ]
    )
    return weights[0] if len(basis) == 1 else weights


def event_rows(rows: np.ndarray, centre: np.ndarray, event_regressor: bool) -> np.ndarray:
    """The per-event rows that are convolved: features, and the event indicator.

    With the event regressor, the features are centred on ``centre`` (their mean over
    the stored stimuli), as parametric modulators are: the column of ones models the
    response to any event, and the features how it varies from event to event. The
    aligned columns then span the same space as with raw features (a constant shift of
    a feature is a multiple of the event column), but the encoder's standardisation
    sees each feature's own variation, instead of a copy of the evoked response scaled
    by the feature's mean, so the penalty shrinks the features as much as the event
    column and not far more.

    Parameters
    ----------
    rows : ndarray, shape (n_events, n_features)
        Feature row of each placed event (or frame, or word).
    centre : ndarray, shape (n_features,)
        Mean feature row over the features store's stimuli.
    event_regressor : bool
        Whether to centre the rows and append the column of ones.

    Returns
    -------
    rows : ndarray, shape (n_events, n_features + event_regressor)
        ``rows`` unchanged without the event regressor.
    """
    rows = np.asarray(rows, dtype=np.float64)
    if not event_regressor:
        return rows
    return np.column_stack([rows - np.asarray(centre, float), np.ones(len(rows))])


def delay_features(
    features: np.ndarray, delays: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate time-shifted copies of features (FIR delays).

    Parameters
    ----------
    features : ndarray, shape (n_times, n_features)
        Aligned features.
    delays : sequence of int
        Lags in TRs; copy ``d`` holds ``features[t - d]`` at row ``t`` (zeros
        where that falls outside the run).

    Returns
    -------
    delayed : ndarray, shape (n_times, n_delays * n_features)
        Copies in ``delays`` order.
    delay : ndarray, shape (n_delays * n_features,)
        The lag of each column.
    source : ndarray, shape (n_delays * n_features,)
        The original feature index of each column.
    """
    n_times, n_features = features.shape
    blocks = []
    for d in delays:
        shifted = np.zeros_like(features)
        if d >= 0:
            shifted[d:] = features[: n_times - d] if d < n_times else 0.0
        else:
            shifted[:d] = features[-d:]
        blocks.append(shifted)
    delayed = np.concatenate(blocks, axis=1)
    delay = np.repeat(np.asarray(delays, dtype=int), n_features)
    source = np.tile(np.arange(n_features), len(delays))
    return delayed, delay, source

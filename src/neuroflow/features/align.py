"""Align per-stimulus features to brain sampling.

fMRI: :func:`align_features` resamples the features of the stimuli shown in one
run onto the run's TR grid. Each feature row is placed in time, then rows are
averaged within each TR, Lanczos-resampled, or (``method: hrf``, for event-related
designs) each event's boxcar, at its own onset and for its own duration, is
convolved with a canonical HRF on a fine time grid and sampled at the volumes, as
a GLM builds its regressors (:func:`hrf_weights`). A list of HRF models
(``hrf_model: [glover, spm]``, or SPM's HRF at several peak times, ``[spm peak 4 s, spm,
spm peak 6 s, spm peak 7 s]``) stores one block of columns per model, an HRF library as
in GLMsingle (Prince et al., 2022): the encoder fits each and keeps, per voxel, the one
that cross-validates best on the training runs. Rows are placed as follows:

- a stimulus row (image, shot, caption) spans its event;
- the frame rows of a video (``frame_rate`` set at extraction) each start at the
  event's onset plus ``frame_time`` and last ``frame_duration``, cut at the
  event's end;
- the word rows of a transcript named by ``stim_file`` start at the event's
  onset plus ``word_onset`` and last ``word_duration``;
- word events (events with a cell in the transcript column, stored by the fMRI
  stage as ``event_<column>``) take, in order, the word rows of their
  ``stim_file`` and keep their own onset and duration.

A store of the ``events`` extractor (:mod:`neuroflow.features.events`) is
aligned per event, not per stimulus id: every event of the run gets the row
encoded from its own cells (so a parametric modulator varies per event, and
events without a ``stim_file`` work), with the store's ``feature_name`` columns.

With ``stimulus_events`` (the ``dataset.stimulus_events`` setting), events that
:func:`neuroflow.io.events.stimulus_mask` rejects are not placed.

EEG/MEG epochs: :func:`features_for_stimuli` picks one row per epoch by
stimulus id; :func:`canonical_ids` maps ids of identical stimulus files (see
:func:`neuroflow.features.extract.extract_features`) to one id.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.features.config import SHIFTED_HRF_MODELS, fill_alignment, hrf_models
from neuroflow.features.events import event_feature_rows, event_ids, events_spec
from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.events import events_from_store, stimulus_mask

__all__ = [
    "MIN_ONSET",
    "Placements",
    "align_features",
    "average_weights",
    "boxcar_bounds",
    "boxcar_responses",
    "canonical_ids",
    "delay_features",
    "event_rows",
    "features_for_stimuli",
    "fine_grid",
    "hrf_weights",
    "lanczos_weights",
    "place_rows",
]


def features_for_stimuli(
    features_store: str | os.PathLike | xr.Dataset, stimulus_ids: Sequence[str]
) -> np.ndarray:
    """Feature rows of the given stimuli, in the given order (repeats allowed).

    Parameters
    ----------
    features_store : path-like | xarray.Dataset
        A store written by :func:`neuroflow.features.extract.extract_features`.
    stimulus_ids : sequence of str
        One id per epoch/trial.

    Returns
    -------
    features : ndarray, shape (n_ids, n_features)
        Float32.
    """
    ds = features_store if isinstance(features_store, xr.Dataset) else open_dataset(features_store)
    where = "the features dataset" if isinstance(features_store, xr.Dataset) else features_store
    index = {str(s): i for i, s in enumerate(ds["stimulus"].values)}
    ids = [str(s) for s in stimulus_ids]
    missing = sorted({s for s in ids if s not in index})
    if missing:
        raise ValueError(
            f"{where}: no features for stimulus id(s) {missing[:5]}"
            f"{' and more' if len(missing) > 5 else ''} (coordinate `stimulus`)."
        )
    rows = np.array([index[s] for s in ids], dtype=int)
    if rows.size == 0:
        return np.zeros((0, ds.sizes["feature"]), dtype=np.float32)
    unique, inverse = np.unique(rows, return_inverse=True)
    data = ds["features"].isel(stimulus=unique).values.astype(np.float32)
    return data[inverse]


def canonical_ids(
    features_store: str | os.PathLike | xr.Dataset, stimulus_ids: Sequence[str]
) -> np.ndarray:
    """The id under which each stimulus's file was first seen (identical files are one stimulus).

    Parameters
    ----------
    features_store : path-like | xarray.Dataset
        A store written by :func:`neuroflow.features.extract.extract_features`.
    stimulus_ids : sequence of str
        Ids of rows (``stimulus`` coordinate) or of the clips that frame rows
        come from (``source_stimulus``).

    Returns
    -------
    ids : ndarray of str, shape (n_ids,)
        The ``canonical_stimulus`` of each id (for a clip id, the clip of its
        first frame row's canonical frame); an id the store does not alias,
        or any id of a store without that coordinate, maps to itself.
    """
    ds = features_store if isinstance(features_store, xr.Dataset) else open_dataset(features_store)
    ids = [str(s) for s in stimulus_ids]
    if "canonical_stimulus" not in ds.coords:
        return np.array(ids, dtype=str)
    rows = [str(s) for s in ds["stimulus"].values]
    firsts = [str(s) for s in ds["canonical_stimulus"].values]
    mapping = dict(zip(rows, firsts, strict=True))
    if "source_stimulus" in ds.coords:
        sources = [str(s) for s in ds["source_stimulus"].values]
        source_of = dict(zip(rows, sources, strict=True))
        for source, first in zip(sources, firsts, strict=True):
            mapping.setdefault(source, source_of.get(first, source))
    return np.array([mapping.get(s, s) for s in ids], dtype=str)


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


def _events(brain: xr.Dataset, path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    for name in ("event_onset", "event_duration", "stim_file"):
        if name not in brain.variables:
            raise ValueError(f"{path}: the fMRI store has no `{name}` variable (dim `event`).")
    onsets = np.asarray(brain["event_onset"].values, float)
    durations = np.asarray(brain["event_duration"].values, float)
    stims = [str(s) for s in brain["stim_file"].values]
    if np.isnan(onsets).any():
        raise ValueError(f"{path}: `event_onset` has missing values.")
    return onsets, durations, stims


def _tr(brain: xr.Dataset, path: Path) -> float:
    if "tr" in brain.attrs:
        tr = float(brain.attrs["tr"])
    else:
        raise ValueError(f"{path}: the fMRI store has no `tr` attribute.")
    if not tr > 0:
        raise ValueError(f"{path}: attribute `tr` must be positive, got {tr} instead.")
    return tr


@dataclass(frozen=True)
class Placements:
    """Feature rows placed in a run's time.

    Attributes
    ----------
    rows : ndarray of int, shape (n_placed,)
        Row of the features store (repeats allowed).
    onsets : ndarray, shape (n_placed,)
        Start of each placed row in seconds from the run's start.
    durations : ndarray, shape (n_placed,)
        Its duration in seconds (0: an impulse).
    n_events : int
        Events that contributed rows.
    skipped : list of str
        ``stim_file`` values without features.
    """

    rows: np.ndarray
    onsets: np.ndarray
    durations: np.ndarray
    n_events: int
    skipped: list[str]


@dataclass(frozen=True)
class _Segment:
    """Frame or word rows of one source stimulus, in order."""

    rows: np.ndarray
    offsets: np.ndarray
    durations: np.ndarray
    kind: str  # "frames", "transcript" (expanded per event) or "events" (one word per event)


def _segments(fds: xr.Dataset) -> dict[str, _Segment]:
    """Frame or word rows of each source stimulus."""
    if "source_stimulus" not in fds.coords:
        return {}
    if "frame_time" in fds.coords:
        offsets = np.asarray(fds["frame_time"].values, float)
        lengths = np.asarray(fds["frame_duration"].values, float)
        order = np.argsort(offsets, kind="stable")
        from_events = np.zeros(offsets.size, dtype=bool)
    elif "word_onset" in fds.coords:
        offsets = np.asarray(fds["word_onset"].values, float)
        lengths = np.nan_to_num(np.asarray(fds["word_duration"].values, float), nan=0.0)
        order = np.argsort(np.asarray(fds["word_index"].values, int), kind="stable")
        if "word_event" in fds.coords:
            from_events = np.asarray(fds["word_event"].values, bool)
        else:
            from_events = np.zeros(offsets.size, dtype=bool)
    else:
        return {}
    sources = np.asarray([str(v) for v in fds["source_stimulus"].values], dtype=object)
    out: dict[str, _Segment] = {}
    for source in dict.fromkeys(sources[order]):
        rows = order[sources[order] == source]
        if "frame_time" in fds.coords:
            kind = "frames"
        else:
            kind = "events" if from_events[rows].all() else "transcript"
        out[str(source)] = _Segment(rows, offsets[rows], lengths[rows], kind)
    return out


def _event_words(brain: xr.Dataset, column: str) -> list[str] | None:
    """Each event's word in ``event_<column>`` (``""`` for none; None without that field)."""
    name = f"event_{column}"
    if name not in brain.variables:
        return None
    values = brain[name].values
    if np.issubdtype(values.dtype, np.number):
        return ["" if np.isnan(v) else f"{v:g}" for v in values.astype(float)]
    return ["" if str(v).strip().lower() in _MISSING else str(v).strip() for v in values]


def place_rows(
    fds: xr.Dataset,
    onsets: np.ndarray,
    durations: np.ndarray,
    stims: Sequence[str],
    *,
    event_words: Sequence[str] | None = None,
    column: str = "word",
    where: str = "the run",
) -> Placements:
    """Place the feature rows of a run's events in time.

    Parameters
    ----------
    fds : xarray.Dataset
        Features store (coordinate ``stimulus``; frame or word coordinates for
        expanded stimuli, see :func:`neuroflow.features.extract.extract_features`).
    onsets, durations : ndarray, shape (n_events,)
        Event timing in seconds (NaN duration: an impulse).
    stims : sequence of str, length n_events
        Each event's ``stim_file`` (``n/a`` or empty: ignored).
    event_words : sequence of str, length n_events | None
        Each event's word (``""`` for none). Word events take, one by one, the
        word rows that were read from word events (coordinate ``word_event``)
        of their narrative (the words must match the store's ``word``
        coordinate); the narrative's other events are ignored. Required when
        the store has such rows.
    column : str
        Name of the word column, for error messages.
    where : str
        Name of the run, for error messages.

    Returns
    -------
    placements : Placements
        The placed rows.
    """
    index = {str(s): i for i, s in enumerate(fds["stimulus"].values)}
    segments = _segments(fds)
    words = fds["word"].values if "word" in fds.coords else None
    taken: dict[str, int] = {}
    rows: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    skipped: list[str] = []
    n_events = 0
    for i, stim in enumerate(stims):
        onset, duration = float(onsets[i]), float(np.nan_to_num(durations[i], nan=0.0))
        if stim.strip().lower() in _MISSING:
            continue
        if stim in index:
            picked, start, length = np.array([index[stim]]), np.array([onset]), np.array([duration])
        elif stim in segments and segments[stim].kind == "events":
            if event_words is None:
                raise ValueError(
                    f"{where}: stim_file {stim!r} has word-event features, but the fMRI store "
                    f"has no `event_{column}` variable to tell its word events apart."
                )
            if not event_words[i]:
                continue  # an event of the narrative that is not a word
            seg_rows = segments[stim].rows
            k = taken.get(stim, 0)
            if k >= seg_rows.size:
                raise ValueError(
                    f"{where}: event {i} is word {k} of stim_file {stim!r}, but the features "
                    f"store has only {seg_rows.size} words of it (coordinate `word_index`)."
                )
            if words is not None and str(words[seg_rows[k]]) != event_words[i]:
                raise ValueError(
                    f"{where}: event {i} has word {event_words[i]!r}, but word {k} of stim_file "
                    f"{stim!r} in the features store is {str(words[seg_rows[k]])!r} (coordinate "
                    "`word`); the events and the extracted transcript disagree."
                )
            taken[stim] = k + 1
            picked, start, length = seg_rows[k : k + 1], np.array([onset]), np.array([duration])
        elif stim in segments:
            seg = segments[stim]
            picked, offset, length = seg.rows, seg.offsets, seg.durations
            if seg.kind == "frames" and duration > 0:
                shown = offset < duration - 1e-9
                picked, offset = picked[shown], offset[shown]
                length = np.minimum(length[shown], duration - offset)
            start = onset + offset
        else:
            skipped.append(stim)
            continue
        n_events += 1
        rows.append(picked)
        starts.append(start)
        lengths.append(length)
    if not rows:
        empty = np.zeros(0)
        return Placements(empty.astype(int), empty, empty, 0, skipped)
    return Placements(
        np.concatenate(rows).astype(int),
        np.concatenate(starts).astype(float),
        np.concatenate(lengths).astype(float),
        n_events,
        skipped,
    )


def _place_stimuli(
    fds: xr.Dataset,
    bds: xr.Dataset,
    brain: Path,
    features: Path,
    cfg: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None,
) -> tuple[Placements, np.ndarray]:
    """Placed rows of a per-stimulus, per-frame or per-word store, and their features."""
    onsets, durations, stims = _events(bds, brain)
    column = str(fds.attrs.get("transcript_column") or "word")
    words = _event_words(bds, column) if "word_onset" in fds.coords else None
    if stimulus_events is not None:
        keep = stimulus_mask(events_from_store(bds), stimulus_events, where=brain)
        onsets, durations = onsets[keep], durations[keep]
        stims = [s for s, k in zip(stims, keep, strict=True) if k]
        if words is not None:
            words = [w for w, k in zip(words, keep, strict=True) if k]
    placed = place_rows(
        fds, onsets, durations, stims, event_words=words, column=column, where=str(brain)
    )
    if placed.skipped and cfg["missing"] == "error":
        raise ValueError(
            f"{brain}: `stim_file` value(s) {sorted(set(placed.skipped))[:5]} have no features "
            f"in {features}; extract them or set `missing: skip`."
        )
    unique, inverse = np.unique(placed.rows, return_inverse=True)
    data = fds["features"].isel(stimulus=unique).values.astype(np.float64)
    rows = data[inverse] if placed.rows.size else np.zeros((0, fds.sizes["feature"]))
    return placed, rows


def _place_events(
    fds: xr.Dataset,
    bds: xr.Dataset,
    brain: Path,
    stimulus_events: Mapping[str, Any] | None,
) -> tuple[Placements, np.ndarray]:
    """Every event of the run, encoded from its own cells, at its onset and duration."""
    for name in ("event_onset", "event_duration"):
        if name not in bds.variables:
            raise ValueError(f"{brain}: the fMRI store has no `{name}` variable (dim `event`).")
    spec = events_spec(fds.attrs.get("events"))
    names = [str(n) for n in fds["feature_name"].values]
    table = events_from_store(bds)
    onsets = np.asarray(bds["event_onset"].values, float)
    durations = np.asarray(bds["event_duration"].values, float)
    keep = np.array([i is not None for i in event_ids(table, spec["name_column"])], dtype=bool)
    if stimulus_events is not None and len(table):
        keep &= stimulus_mask(table, stimulus_events, id_column=None, where=brain)
    if np.isnan(onsets[keep]).any():
        raise ValueError(f"{brain}: `event_onset` has missing values.")
    rows = np.nan_to_num(event_feature_rows(table[keep], spec, names, where=brain), nan=0.0)
    n = int(keep.sum())
    placed = Placements(np.arange(n), onsets[keep], durations[keep], n, [])
    return placed, rows


def align_features(
    *,
    features: str | os.PathLike,
    brain: str | os.PathLike,
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None = None,
) -> Path:
    """Resample per-stimulus, per-frame or per-word features onto one fMRI run's TR grid.

    Parameters
    ----------
    features : path-like
        Store from :func:`neuroflow.features.extract.extract_features`:
        ``features`` (stimulus, feature). Frame rows (coordinates
        ``source_stimulus``, ``frame_time``, ``frame_duration``) and word rows
        (``source_stimulus``, ``word_index``, ``word``, ``word_onset``,
        ``word_duration``) are placed in time from the events that name their
        source; see :func:`place_rows` and the module docstring. A store of
        the ``events`` extractor is encoded per event instead (each event's
        own cells, columns from its ``feature_name`` coordinate).
    brain : path-like
        Preprocessed fMRI run: coordinate ``time`` (s), attribute ``tr`` and
        event variables ``event_onset``, ``event_duration``, ``stim_file`` on
        dim ``event`` (and ``event_<transcript_column>`` for word events).
        Events whose ``stim_file`` is ``n/a`` or empty are ignored.
    output : path-like
        Output store.
    config : dict
        ``features.alignment``: ``method`` (``"average"``, ``"lanczos"`` or
        ``"hrf"``), ``aggregation`` (``"mean"``/``"sum"``, average only), ``delays``
        (TR lags, default ``[0]``), ``tr_reference``, ``lanczos_window``,
        ``hrf_model``, ``oversampling`` and ``slice_time_ref`` (hrf only),
        ``event_regressor`` (append a column of ones to every placed row: the
        response to any event, whatever its features; the features are then centred
        on their mean over the store's stimuli, see :func:`event_rows`),
        ``missing`` (``"error"`` or ``"skip"`` events without features).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events that
        :func:`neuroflow.io.events.stimulus_mask` rejects (built from the run
        store's event variables, see :func:`neuroflow.io.events.events_from_store`) are not placed.
        ``None``: every event (with a ``stim_file``, or with an id for an
        events store).

    Returns
    -------
    path : Path
        The store: ``features`` (time, feature) with the run's ``time``
        coordinate, and per-column coordinates ``delay``, ``source_feature``
        (with ``event_regressor``, the last source feature, index ``n_features``, is
        the event indicator), ``hrf_basis`` (canonical 0, derivatives 1, 2) and
        ``hrf_variant`` (index into the attribute ``hrf_models``: a list of HRF
        models makes one block of columns per model, alternatives the encoder
        chooses among per voxel). Attributes ``n_events`` (events that contributed
        rows), ``n_rows_placed`` (feature rows placed) and ``feature_centre`` (with
        ``event_regressor``, the mean feature row subtracted before the convolution;
        else empty).
    """
    cfg = fill_alignment(config)
    features, brain = Path(features), Path(brain)
    fds = open_dataset(features)
    bds = open_dataset(brain)
    if "time" not in bds.coords:
        raise ValueError(f"{brain}: the fMRI store has no `time` coordinate.")
    times = np.asarray(bds["time"].values, float)
    tr = _tr(bds, brain)
    if fds.attrs.get("extractor") == "events" and "feature_name" in fds.coords:
        placed, rows = _place_events(fds, bds, brain, stimulus_events)
    else:
        placed, rows = _place_stimuli(fds, bds, brain, features, cfg, stimulus_events)
    skipped = placed.skipped
    if cfg["method"] == "average":
        weights = average_weights(
            times,
            tr,
            placed.onsets,
            placed.durations,
            aggregation=cfg["aggregation"],
            tr_reference=cfg["tr_reference"],
        )
    elif cfg["method"] == "hrf":
        models = hrf_models(cfg["hrf_model"])
        weights = [
            hrf_weights(
                times,
                tr,
                placed.onsets,
                placed.durations,
                hrf_model=model,
                oversampling=cfg["oversampling"],
                slice_time_ref=cfg["slice_time_ref"],
                tr_reference=cfg["tr_reference"],
            )
            for model in models
        ]
    else:
        mid = placed.onsets + placed.durations / 2.0
        weights = lanczos_weights(
            times, tr, mid, window=cfg["lanczos_window"], tr_reference=cfg["tr_reference"]
        )
    centre = np.asarray(fds["features"].mean("stimulus").values, dtype=np.float64)
    rows = event_rows(rows, centre, cfg["event_regressor"])
    # one block of columns per HRF basis function (canonical, then derivatives), and
    # per HRF model of a library
    per_model = weights if isinstance(weights, list) else [weights]
    blocks, basis, variant = [], [], []
    for m, w in enumerate(per_model):
        for b, block in enumerate(w[None] if w.ndim == 2 else w):
            blocks.append(block)
            basis.append(np.full(rows.shape[1], b))
            variant.append(np.full(rows.shape[1], m))
    aligned = np.concatenate([w @ rows for w in blocks], axis=1).astype(np.float32)
    delayed, delay, source = delay_features(aligned, cfg["delays"])
    basis = np.tile(np.concatenate(basis), len(cfg["delays"]))
    variant = np.tile(np.concatenate(variant), len(cfg["delays"]))
    source = source % rows.shape[1]
    source_attrs = {k: v for k, v in fds.attrs.items() if k != PROVENANCE_KEY}
    ds = xr.Dataset(
        {"features": (("time", "feature"), delayed, {"units": "a.u."})},
        coords={
            "time": ("time", times, {"units": "s"}),
            "feature": ("feature", np.arange(delayed.shape[1])),
            "delay": ("feature", delay, {"units": "TR"}),
            "source_feature": ("feature", source),
            "hrf_basis": ("feature", basis),
            "hrf_variant": ("feature", variant),
        },
        attrs={
            "tr": tr,
            "hrf_models": hrf_models(cfg["hrf_model"]) if cfg["method"] == "hrf" else [],
            "alignment": dict(cfg),
            "feature_centre": centre.tolist() if cfg["event_regressor"] else [],
            "n_events": placed.n_events,
            "n_rows_placed": int(placed.rows.size),
            "skipped_stim_files": sorted(set(skipped)),
            "source": source_attrs,
        },
    )
    return write_dataset(ds, output, provenance=provenance)

"""Align per-stimulus features to brain sampling.

fMRI (time-continuous designs): :func:`align_features` resamples the features of
the stimuli shown in one run (shots, frames, words: one event each) onto the
run's TR grid. EEG/MEG epochs: :func:`features_for_stimuli` picks one row per
epoch by stimulus id.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.features.config import fill_alignment

__all__ = [
    "align_features",
    "average_weights",
    "delay_features",
    "features_for_stimuli",
    "lanczos_weights",
]

_MISSING = {"", "n/a", "nan", "none"}


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


def align_features(
    *,
    features: str | os.PathLike,
    brain: str | os.PathLike,
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Resample per-stimulus features onto one fMRI run's TR grid.

    Parameters
    ----------
    features : path-like
        Store from :func:`neuroflow.features.extract.extract_features`:
        ``features`` (stimulus, feature).
    brain : path-like
        Preprocessed fMRI run: coordinate ``time`` (s), attribute ``tr`` and
        event variables ``event_onset``, ``event_duration``, ``stim_file`` on
        dim ``event``. Events whose ``stim_file`` is ``n/a`` or empty are ignored.
    output : path-like
        Output store.
    config : dict
        ``features.alignment``: ``method`` (``"average"`` or ``"lanczos"``),
        ``aggregation`` (``"mean"``/``"sum"``, average only), ``delays`` (TR
        lags, default ``[0]``), ``tr_reference``, ``lanczos_window``,
        ``missing`` (``"error"`` or ``"skip"`` events without features).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    path : Path
        The store: ``features`` (time, feature) with the run's ``time``
        coordinate, and per-column coordinates ``delay`` and
        ``source_feature`` on ``feature``.
    """
    cfg = fill_alignment(config)
    features, brain = Path(features), Path(brain)
    fds = open_dataset(features)
    bds = open_dataset(brain)
    if "time" not in bds.coords:
        raise ValueError(f"{brain}: the fMRI store has no `time` coordinate.")
    times = np.asarray(bds["time"].values, float)
    tr = _tr(bds, brain)
    onsets, durations, stims = _events(bds, brain)
    known = {str(s) for s in fds["stimulus"].values}
    keep, skipped = [], []
    for i, stim in enumerate(stims):
        if stim.strip().lower() in _MISSING:
            continue
        if stim not in known:
            skipped.append(stim)
            continue
        keep.append(i)
    if skipped and cfg["missing"] == "error":
        raise ValueError(
            f"{brain}: `stim_file` value(s) {sorted(set(skipped))[:5]} have no features in "
            f"{features}; extract them or set `missing: skip`."
        )
    keep_idx = np.array(keep, dtype=int)
    rows = features_for_stimuli(fds, [stims[i] for i in keep])
    if cfg["method"] == "average":
        weights = average_weights(
            times,
            tr,
            onsets[keep_idx],
            durations[keep_idx],
            aggregation=cfg["aggregation"],
            tr_reference=cfg["tr_reference"],
        )
    else:
        mid = onsets[keep_idx] + np.nan_to_num(durations[keep_idx], nan=0.0) / 2.0
        weights = lanczos_weights(
            times, tr, mid, window=cfg["lanczos_window"], tr_reference=cfg["tr_reference"]
        )
    aligned = (weights @ rows.astype(np.float64)).astype(np.float32)
    delayed, delay, source = delay_features(aligned, cfg["delays"])
    source_attrs = {k: v for k, v in fds.attrs.items() if k != PROVENANCE_KEY}
    ds = xr.Dataset(
        {"features": (("time", "feature"), delayed, {"units": "a.u."})},
        coords={
            "time": ("time", times, {"units": "s"}),
            "feature": ("feature", np.arange(delayed.shape[1])),
            "delay": ("feature", delay, {"units": "TR"}),
            "source_feature": ("feature", source),
        },
        attrs={
            "tr": tr,
            "alignment": dict(cfg),
            "n_events": len(keep),
            "skipped_stim_files": sorted(set(skipped)),
            "source": source_attrs,
        },
    )
    return write_dataset(ds, output, provenance=provenance)

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

The resampling weights are made by :mod:`neuroflow.features.resampling`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.features.config import fill_alignment, hrf_models
from neuroflow.features.events import event_feature_rows, event_ids, events_spec
from neuroflow.features.resampling import (
    average_weights,
    delay_features,
    event_rows,
    hrf_weights,
    lanczos_weights,
)
from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.events import events_from_store, stimulus_mask

__all__ = [
    "Placements",
    "align_features",
    "canonical_ids",
    "features_for_stimuli",
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

"""What the encoding, decoding and RSA stages read: epochs, stimulus patterns, features.

EEG epochs stores grouped and pooled by subject, fMRI run and single-trial stores as
one pattern per stimulus presentation, feature stores at given stimuli, and the mean
of repeated presentations of a stimulus.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.features.align import features_for_stimuli
from neuroflow.io.events import events_from_store, is_missing, stimulus_mask

__all__ = [
    "SubjectEpochs",
    "average_by_stimulus",
    "event_responses",
    "feature_info",
    "load_subject_epochs",
    "repeat_ranks",
    "stimulus_features",
    "stimulus_patterns",
]

logger = logging.getLogger(__name__)


@dataclass
class SubjectEpochs:
    """The epochs of one subject, concatenated over its stores.

    Attributes
    ----------
    subject : str
        Subject label.
    data : ndarray of float32, shape (n_epochs, n_channels, n_times)
    times : ndarray, shape (n_times,)
        Seconds.
    channels : ndarray of str, shape (n_channels,)
    stimulus, condition : ndarray of str, shape (n_epochs,)
    session : ndarray of str, shape (n_epochs,)
        Index of the store each epoch came from.
    sources : list of Path
    """

    subject: str
    data: np.ndarray
    times: np.ndarray
    channels: np.ndarray
    stimulus: np.ndarray
    condition: np.ndarray
    session: np.ndarray
    sources: list[Path]


def _str(values) -> np.ndarray:
    """Plain unicode array of any string-like values (object, StringDType, bytes)."""
    return np.asarray([str(v) for v in np.asarray(values).ravel()], dtype=str)


def _subject_of(ds, path: Path) -> str:
    ent = ds.attrs.get("entities") or {}
    sub = ent.get("subject") if isinstance(ent, Mapping) else None
    if sub:
        return str(sub)
    for part in path.name.split("_"):
        if part.startswith("sub-"):
            return part[4:]
    raise ValueError(f"{path}: cannot tell the subject (attribute `entities.subject`).")


def load_subject_epochs(paths: Sequence[str | os.PathLike]) -> list[SubjectEpochs]:
    """Group epochs stores by subject and concatenate each subject's epochs.

    Parameters
    ----------
    paths : sequence of path-like
        Stores written by the ``preprocess_eeg`` stage.

    Returns
    -------
    subjects : list of SubjectEpochs
        Sorted by subject label. A subject's recordings are pooled on the channels they
        all have (channels left out of one recording, e.g. bad channels that could not
        be interpolated, are dropped from the others, with a logged line); their time
        grids must match.
    """
    if not paths:
        raise ValueError("`epochs` must list at least one epochs store, got none.")
    grouped: dict[str, list] = {}
    for p in map(Path, paths):
        ds = open_dataset(p)
        for field in ("epochs", "stimulus", "time", "channel"):
            if field not in ds.variables:
                raise ValueError(f"{p}: missing field `{field}` of an epochs store.")
        grouped.setdefault(_subject_of(ds, p), []).append((p, ds))
    out = []
    for sub in sorted(grouped):
        items = grouped[sub]
        ref_p, ref = items[0]
        times = ref["time"].values.astype(np.float64)
        channel_sets = [_str(ds["channel"].values) for _, ds in items]
        channels = np.array([c for c in channel_sets[0] if all(c in s for s in channel_sets)])
        dropped = sorted(set(np.concatenate(channel_sets)) - set(channels))
        if dropped:
            logger.info(
                "sub-%s: channels %s are not in every recording; pooled on the %d shared ones.",
                sub,
                dropped,
                channels.size,
            )
        if channels.size == 0:
            raise ValueError(
                f"sub-{sub}: the recordings {[str(p) for p, _ in items]} share no channel "
                "(field `channel`)."
            )
        data, stim, cond, sess = [], [], [], []
        for k, (p, ds) in enumerate(items):
            if ds["time"].size != times.size or not np.allclose(ds["time"].values, times):
                raise ValueError(
                    f"{p}: field `time` must match that of {ref_p} to pool one subject's "
                    "epochs (set the same epochs_tmin, epochs_tmax and resample_sfreq)."
                )
            index = {c: i for i, c in enumerate(_str(ds["channel"].values))}
            picks = [index[c] for c in channels]
            values = ds["epochs"].values.astype(np.float32)
            data.append(values if picks == list(range(len(index))) else values[:, picks])
            stim.append(_str(ds["stimulus"].values))
            n_epochs = ds.sizes["epoch"]
            cond.append(
                _str(ds["condition"].values)
                if "condition" in ds.variables
                else np.full(n_epochs, "n/a")
            )
            sess.append(np.full(ds.sizes["epoch"], str(k)))
        out.append(
            SubjectEpochs(
                subject=sub,
                data=np.concatenate(data),
                times=times,
                channels=channels,
                stimulus=np.concatenate(stim),
                condition=np.concatenate(cond),
                session=np.concatenate(sess),
                sources=[p for p, _ in items],
            )
        )
    return out


def feature_info(path: str | os.PathLike) -> dict[str, str]:
    """Names recorded in a feature store's attributes.

    Returns
    -------
    info : dict of str to str
        ``model`` and ``feature_space``: the feature set (the extractor entry's
        ``name``), so that two entries of one network (pretrained vs random weights,
        two seeds or transforms) are two models everywhere; ``network``: the network
        or extractor it comes from (e.g. ``all-MiniLM-L6-v2``).
    """
    ds = open_dataset(path)
    feature_set = str(ds.attrs.get("feature_set") or Path(path).parent.name)
    network = ds.attrs.get("model") or ds.attrs.get("extractor") or feature_set
    return {"model": feature_set, "feature_space": feature_set, "network": str(network)}


def stimulus_features(path: str | os.PathLike, stimuli: Sequence[str]) -> np.ndarray:
    """Feature rows of ``stimuli`` from a feature store, shape (n_stimuli, n_features).

    Stimulus-level analyses (decoding, RSA, EEG encoding) need one row per stimulus.
    A store with one row per video frame or per word (coordinate ``source_stimulus``)
    gives each clip or narrative the mean of its rows.
    """
    ds = open_dataset(path)
    if "source_stimulus" in ds.coords:
        ids = {str(s) for s in ds["stimulus"].values}
        if not all(str(s) in ids for s in stimuli):
            return _source_means(ds, path, stimuli)
    return features_for_stimuli(ds, list(stimuli)).astype(np.float64)


def _source_means(ds, path: str | os.PathLike, stimuli: Sequence[str]) -> np.ndarray:
    """Mean feature row of each source stimulus (clip, narrative) of a frame/word store."""
    sources = _str(ds["source_stimulus"].values)
    uniq, inverse = np.unique(sources, return_inverse=True)
    missing = sorted({str(s) for s in stimuli} - set(uniq))
    if missing:
        raise ValueError(
            f"{path}: no features for stimulus id(s) {missing[:5]} (coordinates `stimulus` "
            "and `source_stimulus`)."
        )
    values = ds["features"].values.astype(np.float64)
    sums = np.zeros((uniq.size, values.shape[1]))
    np.add.at(sums, inverse, values)
    means = sums / np.bincount(inverse, minlength=uniq.size)[:, None]
    where = {u: i for i, u in enumerate(uniq)}
    return means[[where[str(s)] for s in stimuli]]


def average_by_stimulus(
    values: np.ndarray, stimuli: Sequence[str] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Average rows that belong to the same stimulus (repeated presentations).

    Parameters
    ----------
    values : array-like, shape (n_items, ...)
        One row per presentation.
    stimuli : sequence of str, shape (n_items,)
        Stimulus id of every row.

    Returns
    -------
    ids : ndarray of str, shape (n_stimuli,)
        Sorted unique ids.
    means : ndarray of float64, shape (n_stimuli, ...)
        Mean of the rows of each id.
    """
    values = np.asarray(values, dtype=np.float64)
    stimuli = np.asarray([str(v) for v in np.asarray(stimuli).ravel()], dtype=str)
    if stimuli.ndim != 1 or stimuli.shape[0] != values.shape[0]:
        raise ValueError(
            f"`stimuli` must have shape ({values.shape[0]},) like the rows of `values`, "
            f"got {stimuli.shape} instead."
        )
    ids, inverse, counts = np.unique(stimuli, return_inverse=True, return_counts=True)
    sums = np.zeros((ids.size, *values.shape[1:]))
    np.add.at(sums, inverse, values)
    return ids, sums / counts.reshape(-1, *([1] * (values.ndim - 1)))


def repeat_ranks(stimuli: np.ndarray) -> np.ndarray:
    """How many times each row's stimulus was presented before it.

    Parameters
    ----------
    stimuli : ndarray of str, shape (n_items,)
        Stimulus id of every row.

    Returns
    -------
    ranks : ndarray of int, shape (n_items,)
        0 for the first presentation of each stimulus, 1 for the second, ...
    """
    order = np.argsort(stimuli, kind="stable")
    sorted_ids = stimuli[order]
    starts = np.r_[0, np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1]
    counts = np.diff(np.r_[starts, len(stimuli)])
    rank = np.arange(len(stimuli)) - np.repeat(starts, counts)
    out = np.empty(len(stimuli), dtype=int)
    out[order] = rank
    return out


def event_responses(run: xr.Dataset, *, lag: float, where: str = "run") -> np.ndarray:
    """Mean BOLD of every event over its lagged duration.

    Parameters
    ----------
    run : xarray.Dataset
        A ``preprocess_fmri`` run store: ``bold`` (time, voxel), ``event_onset`` and
        ``event_duration`` (event), ``time`` in s.
    lag : float
        Haemodynamic lag (s) added to the event window.
    where : str
        Name of the store, for errors.

    Returns
    -------
    responses : ndarray of float64, shape (n_events, n_voxels)
        Volumes with ``onset + lag <= t < onset + duration + lag``; the nearest volume
        to the window's centre when none falls inside.
    """
    for field in ("bold", "event_onset", "event_duration"):
        if field not in run.variables:
            raise ValueError(f"{where}: missing field `{field}` of a run store.")
    t = run["time"].values.astype(np.float64)
    start = run["event_onset"].values.astype(np.float64) + lag
    stop = start + run["event_duration"].values.astype(np.float64)
    weights = ((t[None] >= start[:, None]) & (t[None] < stop[:, None])).astype(np.float64)
    empty = weights.sum(axis=1) == 0
    if empty.any():
        centre = (start[empty] + stop[empty]) / 2
        weights[np.flatnonzero(empty), np.abs(t[None] - centre[:, None]).argmin(axis=1)] = 1.0
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ run["bold"].values.astype(np.float64)


def stimulus_patterns(
    paths: list[Path], lag: float, stimulus_events: Mapping[str, Any] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """Stimulus patterns, stimulus ids, partitions and ROI labels of one subject.

    A run store gives one pattern per stimulus event (its lagged mean BOLD; events that
    ``stimulus_events`` rejects and events without a ``stim_file`` are left out), the
    run as partition. A single-trial store (``betas`` (trial, voxel), estimated or
    imported) gives its trials, their ``run`` coordinate as partition.
    """
    pats, stim, runs, roi = [], [], [], None
    for k, p in enumerate(paths):
        ds = open_dataset(p)
        r = np.asarray([str(v) for v in ds["roi"].values])
        if roi is not None and not np.array_equal(r, roi):
            raise ValueError(f"{p}: field `roi` differs from the subject's other runs.")
        roi = r
        if "betas" in ds.variables:
            ids = np.asarray([str(v) for v in ds["stimulus"].values])
            keep = np.array([not is_missing(v) for v in ids], dtype=bool)
            pats.append(np.asarray(ds["betas"].values, dtype=np.float64)[keep])
            stim.append(ids[keep])
            # the n-th trial of every stimulus forms partition n: each partition then holds
            # one trial per repeated stimulus, as crossnobis needs
            runs.append(np.asarray([f"repeat-{r}" for r in repeat_ranks(ids[keep])]))
            continue
        if "stim_file" not in ds.variables:
            raise ValueError(f"{p}: missing field `stim_file` of a run store.")
        table = events_from_store(ds)
        keep = stimulus_mask(table, stimulus_events, id_column="stim_file", where=p)
        pats.append(event_responses(ds, lag=lag, where=str(p))[keep])
        stim.append(np.asarray([str(v) for v in ds["stim_file"].values])[keep])
        runs.append(np.full(int(keep.sum()), str(k)))
    return np.concatenate(pats), np.concatenate(stim), np.concatenate(runs), roi

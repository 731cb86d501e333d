"""Reading epochs and feature stores for the decoding and RSA stages."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuroflow.artifacts import open_dataset
from neuroflow.features.align import features_for_stimuli

__all__ = ["SubjectEpochs", "feature_info", "load_subject_epochs", "stimulus_features"]

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

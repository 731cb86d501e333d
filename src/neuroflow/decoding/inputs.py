"""Reading epochs and feature stores for the decoding and RSA stages."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuroflow.artifacts import open_dataset
from neuroflow.features.align import features_for_stimuli

__all__ = ["SubjectEpochs", "feature_info", "load_subject_epochs", "stimulus_features"]


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
        Sorted by subject label.
    """
    if not paths:
        raise ValueError("`epochs` must list at least one epochs store, got none.")
    grouped: dict[str, list] = {}
    for p in map(Path, paths):
        ds = open_dataset(p)
        for field in ("epochs", "stimulus", "condition", "time", "channel"):
            if field not in ds.variables:
                raise ValueError(f"{p}: missing field `{field}` of an epochs store.")
        grouped.setdefault(_subject_of(ds, p), []).append((p, ds))
    out = []
    for sub in sorted(grouped):
        items = grouped[sub]
        ref_p, ref = items[0]
        times = ref["time"].values.astype(np.float64)
        channels = _str(ref["channel"].values)
        data, stim, cond, sess = [], [], [], []
        for k, (p, ds) in enumerate(items):
            if not np.allclose(ds["time"].values, times) or not np.array_equal(
                _str(ds["channel"].values), channels
            ):
                raise ValueError(
                    f"{p}: fields `time` and `channel` must match those of {ref_p} to "
                    "concatenate one subject's epochs."
                )
            data.append(ds["epochs"].values.astype(np.float32))
            stim.append(_str(ds["stimulus"].values))
            cond.append(_str(ds["condition"].values))
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
    """Model and feature-space names recorded in a feature store's attributes."""
    ds = open_dataset(path)
    return {
        "model": str(ds.attrs.get("model") or ds.attrs.get("feature_set") or Path(path).stem),
        "feature_space": str(ds.attrs.get("feature_set") or Path(path).parent.name),
    }


def stimulus_features(path: str | os.PathLike, stimuli: Sequence[str]) -> np.ndarray:
    """Feature rows of ``stimuli`` from a feature store, shape (n_stimuli, n_features)."""
    return features_for_stimuli(Path(path), list(stimuli)).astype(np.float64)

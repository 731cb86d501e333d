"""The ``decode_eeg_cross_subject`` stage: EEG decoding of subjects never trained on.

Within-subject decoding (:mod:`neuroflow.decoding.stage`) asks whether one brain's
responses separate the classes; this stage asks whether what separates them carries
over to another brain. Each held-out unit is decoded by classifiers trained on the
others (:mod:`neuroflow.decoding.cross_subject`):

- ``leave-one-subject-out``: every subject in turn (its recordings pooled), trained on
  every other subject;
- ``leave-one-session-out``: every session of a subject in turn, trained on that
  subject's other sessions (subjects with a single session are left out, with the
  reason in ``attrs["skipped"]``).

Every unit is read on the channels all the recordings share (in the first unit's
order) and on one time grid. Only the classes every unit has are decoded (a decoder can
only be tested on classes it was trained on); the others are dropped with a logged line.
With ``alignment: euclidean`` each unit's epochs are whitened by its own mean trial
covariance first (:func:`~neuroflow.decoding.cross_subject.euclidean_alignment`, within
the subspace the epochs span: an average reference or an interpolated channel leaves a
null direction), and the unaligned scores are computed too, so that the store shows
what alignment gains. Scores are balanced accuracies; chance is one over the number of
classes.
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

from neuroflow.analysis_inputs import SubjectEpochs, load_subject_epochs
from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.variables import describe_variables

from .cross_subject import cross_subject_scores, euclidean_alignment
from .features import bin_window
from .options import (
    ALIGNMENTS,
    CLASSIFIERS,
    CV_SCHEMES,
    WHOLE_EPOCH_CLASSIFIERS,
    resolve_cross_subject_config,
    shared_classes,
)

__all__ = [
    "ALIGNMENTS",
    "CLASSIFIERS",
    "CV_SCHEMES",
    "FORMAT_VERSION",
    "STAGE",
    "WHOLE_EPOCH_CLASSIFIERS",
    "HeldOutUnit",
    "cross_subject_dataset",
    "decode_eeg_cross_subject",
    "load_units",
    "resolve_cross_subject_config",
    "shared_channels",
    "shared_classes",
]

logger = logging.getLogger(__name__)

STAGE = "decode_eeg_cross_subject"
FORMAT_VERSION = 1


@dataclass
class HeldOutUnit:
    """The epochs of one held-out unit: a subject, or one session of a subject.

    Attributes
    ----------
    label : str
        ``"<subject>"`` or ``"<subject>_ses-<session>"``.
    subject : str
        Subject label.
    session : str | None
        Session label (leave-one-session-out), else None.
    epochs : SubjectEpochs
        The unit's epochs, pooled over its stores.
    """

    label: str
    subject: str
    session: str | None
    epochs: SubjectEpochs


def _session_of(path: Path) -> str | None:
    """Session label of an epochs store (``entities.session``, else the file name)."""
    ds = open_dataset(path)
    entities = ds.attrs.get("entities") or {}
    if isinstance(entities, Mapping) and entities.get("session"):
        return str(entities["session"])
    for part in path.name.split("_"):
        if part.startswith("ses-"):
            return part[4:]
    return None


def load_units(paths: Sequence[str | os.PathLike], cv: str) -> list[HeldOutUnit]:
    """Read the epochs stores as held-out units.

    Parameters
    ----------
    paths : sequence of path-like
        Epochs stores of the ``preprocess_eeg`` stage, of every subject.
    cv : {"leave-one-subject-out", "leave-one-session-out"}
        Whether a unit is a subject (its recordings pooled) or one session of a subject
        (its runs pooled; stores without a session label form one session).

    Returns
    -------
    units : list of HeldOutUnit
        Sorted by subject, then session.
    """
    if cv not in CV_SCHEMES:
        raise ValueError(f"`cv` must be one of {', '.join(CV_SCHEMES)}, got {cv!r} instead.")
    if not paths:
        raise ValueError("`epochs` must list at least one epochs store, got none.")
    if cv == "leave-one-subject-out":
        return [HeldOutUnit(s.subject, s.subject, None, s) for s in load_subject_epochs(paths)]
    by_session: dict[str | None, list[Path]] = {}
    for path in map(Path, paths):
        by_session.setdefault(_session_of(path), []).append(path)
    units = []
    for session, group in by_session.items():
        for sub in load_subject_epochs(group):
            label = sub.subject if session is None else f"{sub.subject}_ses-{session}"
            units.append(HeldOutUnit(label, sub.subject, session, sub))
    return sorted(units, key=lambda u: (u.subject, u.session or ""))


def shared_channels(units: Sequence[HeldOutUnit]) -> np.ndarray:
    """The channels every unit has, in the first unit's order.

    Parameters
    ----------
    units : sequence of HeldOutUnit
        The held-out units.

    Returns
    -------
    channels : ndarray of str, shape (n_shared,)
        At least 2 channels.
    """
    sets = [set(u.epochs.channels.tolist()) for u in units]
    channels = np.array([c for c in units[0].epochs.channels if all(c in s for s in sets)])
    if channels.size < 2:
        stores = [str(p) for u in units for p in u.epochs.sources]
        raise ValueError(
            "The epochs stores must share at least 2 channels (field `channel`) to decode "
            f"across subjects, got {channels.size} shared channel(s) {channels.tolist()} "
            f"instead, in stores {stores}."
        )
    return channels


def _check_time_grids(units: Sequence[HeldOutUnit]) -> np.ndarray:
    """The units' shared time grid (s), shape (n_times,)."""
    ref = units[0].epochs
    for unit in units[1:]:
        times = unit.epochs.times
        if times.size != ref.times.size or not np.allclose(times, ref.times):
            raise ValueError(
                f"{unit.epochs.sources[0]}: field `time` must match that of "
                f"{ref.sources[0]} ({ref.times.size} points from {ref.times[0]:.3f} s) to "
                f"decode across subjects, got {times.size} points from {times[0]:.3f} s "
                "instead (set the same preprocess_eeg.epochs_tmin, epochs_tmax and "
                "resample_sfreq for every recording)."
            )
    return ref.times


def _labels(unit: HeldOutUnit, target: str) -> np.ndarray:
    sub = unit.epochs
    return np.asarray(sub.condition if target == "condition" else sub.stimulus)


def _window_mask(times: np.ndarray, window: Sequence[float] | None) -> np.ndarray:
    """Samples of ``window`` (inclusive); an error when it holds none."""
    if window is None:
        return np.ones(times.shape, bool)
    mask = (times >= float(window[0]) - 1e-9) & (times <= float(window[1]) + 1e-9)
    if not mask.any():
        raise ValueError(
            f"`decoding.cross_subject.window` must hold samples of the epochs (from "
            f"{times[0]:.3f} to {times[-1]:.3f} s), got {list(window)} instead."
        )
    return mask


def _features(
    X: np.ndarray, times: np.ndarray, window: Sequence[float] | None, bin_width: float | None
) -> np.ndarray:
    """Window of each epoch, time-binned, shape (n_epochs, n_channels, n_bins)."""
    mask = _window_mask(times, window)
    if bin_width is None:
        return X[:, :, mask]
    flat = bin_window(X, times, window, float(bin_width))
    return flat.reshape(X.shape[0], X.shape[1], -1)


def _groups(units: Sequence[HeldOutUnit], cv: str) -> tuple[list[list[int]], dict[str, str]]:
    """Indices of the units decoded together, and the units left out with the reason."""
    if cv == "leave-one-subject-out":
        if len(units) < 2:
            stores = [str(p) for u in units for p in u.epochs.sources]
            raise ValueError(
                "Leave-one-subject-out needs the epochs stores of at least 2 subjects, got "
                f"sub-{', sub-'.join(u.subject for u in units)} only (stores {stores})."
            )
        return [list(range(len(units)))], {}
    by_subject: dict[str, list[int]] = {}
    for i, unit in enumerate(units):
        by_subject.setdefault(unit.subject, []).append(i)
    groups = [idx for idx in by_subject.values() if len(idx) >= 2]
    skipped = {
        units[idx[0]].label: "a single session, nothing to train on"
        for idx in by_subject.values()
        if len(idx) < 2
    }
    if not groups:
        raise ValueError(
            "Leave-one-session-out needs a subject with at least 2 sessions (entity `ses`), "
            f"got {', '.join(u.label for u in units)} instead."
        )
    return groups, skipped


def cross_subject_dataset(units: Sequence[HeldOutUnit], config: Mapping[str, Any]) -> xr.Dataset:
    """Decode every held-out unit with classifiers trained on the others.

    Parameters
    ----------
    units : sequence of HeldOutUnit
        From :func:`load_units`.
    config : dict
        The ``decoding`` section (see :func:`resolve_cross_subject_config`).

    Returns
    -------
    ds : xarray.Dataset
        See :func:`decode_eeg_cross_subject`.
    """
    cfg = resolve_cross_subject_config(config)
    cs = cfg["cross_subject"]
    units = sorted(units, key=lambda u: (u.subject, u.session or ""))
    groups, skipped = _groups(units, cs["cv"])
    for label, why in skipped.items():
        logger.info("decode_eeg_cross_subject: %s left out, %s.", label, why)
    units = [units[i] for idx in groups for i in idx]
    groups = _renumber(groups)
    channels = shared_channels(units)
    times = _check_time_grids(units)[:: cfg["decim"]]
    dropped_channels = sorted(
        set(np.concatenate([u.epochs.channels for u in units]).tolist()) - set(channels)
    )
    if dropped_channels:
        logger.info(
            "decode_eeg_cross_subject: channels %s are not in every recording; decoding on the "
            "%d shared ones.",
            dropped_channels,
            channels.size,
        )
    target = cs["target"]
    per_unit = [set(np.unique(_labels(u, target)).tolist()) for u in units]
    classes, dropped_classes = shared_classes(per_unit)
    if len(classes) < 2:
        found = {u.label: sorted(c) for u, c in zip(units, per_unit, strict=True)}
        raise ValueError(
            f"`decoding.cross_subject.target` ({target!r}) must give at least 2 classes that "
            f"every held-out unit has, got {classes} shared, with classes per unit {found} "
            "instead."
        )
    if dropped_classes:
        logger.info(
            "decode_eeg_cross_subject: %d %s label(s) not in every held-out unit are left out "
            "(a decoder is tested only on classes it was trained on): %s.",
            len(dropped_classes),
            target,
            dropped_classes[:10],
        )
    data, labels = [], []
    for unit in units:
        sub = unit.epochs
        index = {c: i for i, c in enumerate(sub.channels.tolist())}
        y = _labels(unit, target)
        keep = np.isin(y, classes)
        X = sub.data[keep][:, [index[c] for c in channels], :: cfg["decim"]]
        data.append(X.astype(np.float64))
        labels.append(y[keep])
    # one scale for all units (volts to unit RMS): it changes no score, only conditioning
    scale = np.sqrt(np.mean([np.mean(x**2) for x in data]))
    data = [x / (scale if scale > 0 else 1.0) for x in data]
    window = cs["window"]
    mask = _window_mask(times, window)
    used_window = [float(times[mask][0]), float(times[mask][-1])]
    alignments = ["none", "euclidean"] if cs["alignment"] == "euclidean" else ["none"]
    whole = [c for c in cs["classifiers"] if c in WHOLE_EPOCH_CLASSIFIERS]
    n_units = len(units)
    course = np.full((n_units, len(alignments), times.size), np.nan)
    epoch_score = np.full((n_units, len(alignments), len(whole)), np.nan)
    for a, alignment in enumerate(alignments):
        X_all = [euclidean_alignment(x, rank="auto")[0] for x in data] if a else data
        for idx in groups:
            X = {units[i].label: X_all[i] for i in idx}
            y = {units[i].label: labels[i] for i in idx}
            row = {units[i].label: i for i in idx}
            if "time_resolved" in cs["classifiers"]:
                scores = cross_subject_scores(X, y, classifier="sliding", align=False)
                for label, value in scores.items():
                    course[row[label], a] = value
            for k, name in enumerate(whole):
                width = cs["bin_width"] if name == "epoch_lda" else None
                feats = {lab: _features(x, times, window, width) for lab, x in X.items()}
                scores = cross_subject_scores(
                    feats, y, classifier=name, align=False, seed=int(cfg["seed"])
                )
                for label, value in scores.items():
                    epoch_score[row[label], a, k] = float(value)
        _log_scores(alignment, course[:, a], epoch_score[:, a], whole, mask)
    ds = _dataset(units, alignments, times, channels, whole, course, epoch_score, cs, classes)
    ds.attrs.update(
        {
            "stage": STAGE,
            "cv": cs["cv"],
            "held_out_unit": "subject" if cs["cv"] == "leave-one-subject-out" else "session",
            "alignment": cs["alignment"],
            "classifiers": list(cs["classifiers"]),
            "time_resolved_classifier": "standardised shrinkage LDA at every time point",
            "target": target,
            "classes": list(map(str, classes)),
            "dropped_classes": list(map(str, dropped_classes)),
            "dropped_channels": list(map(str, dropped_channels)),
            "n_channels": int(channels.size),
            "window": used_window,
            "bin_width": cs["bin_width"],
            "decim": int(cfg["decim"]),
            "skipped": skipped,
        }
    )
    return ds


def _renumber(groups: list[list[int]]) -> list[list[int]]:
    """Groups of indices into the concatenation of the groups' units, in order."""
    out, start = [], 0
    for idx in groups:
        out.append(list(range(start, start + len(idx))))
        start += len(idx)
    return out


def _log_scores(alignment, course, epoch_score, whole, mask) -> None:
    with np.errstate(invalid="ignore"):
        if np.isfinite(course).any():
            logger.info(
                "decode_eeg_cross_subject: alignment %s, time-resolved balanced accuracy in "
                "the window per held-out unit: %s.",
                alignment,
                np.round(np.nanmean(course[:, mask], axis=1), 3).tolist(),
            )
        for k, name in enumerate(whole):
            logger.info(
                "decode_eeg_cross_subject: alignment %s, %s balanced accuracy per held-out "
                "unit: %s.",
                alignment,
                name,
                np.round(epoch_score[:, k], 3).tolist(),
            )


def _obj(values: Sequence[object]) -> np.ndarray:
    return np.asarray([str(v) for v in values], dtype=object)


def _dataset(units, alignments, times, channels, whole, course, epoch_score, cs, classes):
    coords: dict[str, Any] = {
        "held_out": _obj([u.label for u in units]),
        "subject": ("held_out", _obj([u.subject for u in units])),
        "alignment": _obj(alignments),
        "time": ("time", times, {"units": "s"}),
        "channel": _obj(channels),
    }
    if cs["cv"] == "leave-one-session-out":
        coords["session"] = ("held_out", _obj([u.session or "n/a" for u in units]))
    n_classes = len(classes)
    data: dict[str, Any] = {
        "cross_subject_chance": (("held_out",), np.full(len(units), 1.0 / n_classes)),
        "cross_subject_n_epochs": (
            ("held_out",),
            np.array([int(np.isin(_labels(u, cs["target"]), classes).sum()) for u in units]),
        ),
    }
    if "time_resolved" in cs["classifiers"]:
        data["cross_subject_score"] = (("held_out", "alignment", "time"), course)
        data["cross_subject_score_mean"] = (("alignment", "time"), course.mean(axis=0))
    if whole:
        coords["classifier"] = _obj(whole)
        dims = ("held_out", "alignment", "classifier")
        data["cross_subject_epoch_score"] = (dims, epoch_score)
        data["cross_subject_epoch_score_mean"] = (dims[1:], epoch_score.mean(axis=0))
    return xr.Dataset(data, coords=coords)


def decode_eeg_cross_subject(
    *,
    epochs: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Stage entry point: decode each subject (or session) with a decoder of the others.

    Parameters
    ----------
    epochs : list of path-like
        Epochs stores of the ``preprocess_eeg`` stage, of every subject (each store's
        ``entities`` attribute tells its subject and session).
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section, or the part of it the stage reads: ``seed``, ``decim``
        (every decim-th time point is kept) and the ``cross_subject`` block (see
        :data:`~neuroflow.decoding.stage.DEFAULT_CONFIG`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store, holding (dims in brackets; ``held_out`` is the subject, or
        ``<subject>_ses-<session>``, decoded by classifiers trained on the others,
        ``alignment`` is ``none`` and, with Euclidean alignment, ``euclidean``):

        - ``cross_subject_score`` (held_out, alignment, time): balanced accuracy of the
          time-resolved classifier; ``cross_subject_score_mean`` (alignment, time) its
          mean over held-out units (with ``time_resolved`` among the classifiers);
        - ``cross_subject_epoch_score`` (held_out, alignment, classifier): balanced
          accuracy of each whole-epoch classifier on the window;
          ``cross_subject_epoch_score_mean`` (alignment, classifier) its mean;
        - ``cross_subject_chance`` and ``cross_subject_n_epochs`` (held_out);
        - coordinates ``subject`` (and ``session``) along ``held_out``, ``channel`` (the
          shared channels decoded);
        - attributes ``cv``, ``held_out_unit``, ``alignment``, ``classifiers``,
          ``target``, ``classes`` (decoded) and ``dropped_classes``,
          ``dropped_channels`` (not shared by every recording), ``n_channels``,
          ``window`` (s, the samples used), ``bin_width``, ``decim`` and ``skipped``
          (units left out, with the reason).
    """
    cfg = resolve_cross_subject_config(config)
    units = load_units(epochs, cfg["cross_subject"]["cv"])
    ds = cross_subject_dataset(units, cfg)
    return write_dataset(describe_variables(ds), output, provenance=provenance)

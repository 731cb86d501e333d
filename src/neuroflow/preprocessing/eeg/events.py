"""Events of one EEG recording: from ``_events.tsv``, annotations or a stim channel."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mne
import numpy as np
import pandas as pd

from neuroflow.io.events import check_stimulus_events, read_events_table, stimulus_mask

from .sidecars import NOT_EVENT_PATTERN, read_bad_segments, read_events_tsv

__all__ = [
    "add_bad_segments",
    "check_events_within",
    "find_events",
    "select_conditions",
    "select_events",
    "select_stimulus_events",
]

logger = logging.getLogger(__name__)

_COLUMNS = ["row", "onset", "duration", "sample", "name", "stimulus"]


def _from_annotations(raw: mne.io.BaseRaw) -> pd.DataFrame:
    """Events from annotations whose description does not start with BAD or EDGE."""
    if not len(raw.annotations):
        return pd.DataFrame(columns=_COLUMNS)
    events, event_id = mne.events_from_annotations(raw, regexp=NOT_EVENT_PATTERN, verbose="error")
    names = {code: name for name, code in event_id.items()}
    sample = events[:, 0] - raw.first_samp
    # annotation onsets count from the first sample of the acquisition (first_samp 0)
    sfreq = raw.info["sfreq"]
    durations = {
        (round(onset * sfreq) - raw.first_samp, str(description)): float(duration)
        for onset, duration, description in zip(
            raw.annotations.onset,
            raw.annotations.duration,
            raw.annotations.description,
            strict=True,
        )
    }
    name_list = [names[c] for c in events[:, 2]]
    return pd.DataFrame(
        {
            "row": np.arange(1, len(events) + 1),
            "onset": sample / sfreq,
            "duration": [
                durations.get((int(s), n), np.nan) for s, n in zip(sample, name_list, strict=True)
            ],
            "sample": sample.astype(float),
            "name": name_list,
            "stimulus": None,
        }
    )


def _from_stim_channel(raw: mne.io.BaseRaw, stim_channel: str | None) -> pd.DataFrame:
    """Events from the onsets of non-zero values of a stim channel."""
    events = mne.find_events(
        raw, stim_channel=stim_channel, shortest_event=1, initial_event=True, verbose="error"
    )
    sample = events[:, 0] - raw.first_samp
    return pd.DataFrame(
        {
            "row": np.arange(1, len(events) + 1),
            "onset": sample / raw.info["sfreq"],
            "duration": 0.0,
            "sample": sample.astype(float),
            "name": events[:, 2].astype(str),
            "stimulus": None,
        }
    )


def add_bad_segments(raw: mne.io.BaseRaw, segments: pd.DataFrame) -> int:
    """Add bad stretches of data as annotations, in place, unless already there.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        The recording.
    segments : DataFrame
        Columns ``onset`` (s from the first sample), ``duration`` (s) and
        ``description`` (see :func:`~neuroflow.preprocessing.eeg.sidecars.read_bad_segments`).

    Returns
    -------
    n_added : int
        Segments added (those matching an annotation of the same description and onset
        within half a sample are not added again).
    """
    if segments.empty:
        return 0
    old = raw.annotations
    sfreq = raw.info["sfreq"]
    # Stored onsets count from the acquisition's first sample (first_samp 0), and one
    # Annotations object set on a recording whose meas_date is None is shifted once more.
    shift = raw.first_time if old.orig_time is not None else 0.0
    have = {
        (round((o - raw.first_time) * sfreq), str(d))
        for o, d in zip(old.onset, old.description, strict=True)
    }
    new = segments[
        [
            (round(o * sfreq), str(d)) not in have
            for o, d in zip(segments["onset"], segments["description"], strict=True)
        ]
    ]
    if new.empty:
        return 0
    base = old.onset - (raw.first_time - shift)
    annotations = mne.Annotations(
        onset=np.r_[base, new["onset"].to_numpy(float) + shift],
        duration=np.r_[old.duration, new["duration"].to_numpy(float)],
        description=[*map(str, old.description), *map(str, new["description"])],
        orig_time=old.orig_time,
        ch_names=[*old.ch_names, *([()] * len(new))],
    )
    raw.set_annotations(annotations)
    return len(new)


def find_events(
    raw: mne.io.BaseRaw,
    *,
    events_tsv: Path | None,
    source: str,
    event_column: str,
    stim_column: str | None,
    stim_channel: str | None,
) -> tuple[pd.DataFrame, str]:
    """Collect the events of a recording.

    Rows of ``_events.tsv`` named ``BAD_*`` or ``EDGE*`` are not events: they are added
    to ``raw`` as annotations (in place), so that epochs overlapping them are dropped, as
    MNE-BIDS reads them.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        The recording, before any resampling.
    events_tsv : Path | None
        The recording's ``_events.tsv``.
    source : str
        ``"events_tsv"``, ``"annotations"``, ``"stim_channel"`` or ``"auto"`` (the first
        of these that yields events).
    event_column, stim_column : str | None
        Columns of ``_events.tsv`` naming the event and the stimulus.
    stim_channel : str | None
        Stim channel name; ``None`` lets MNE choose.

    Returns
    -------
    events : DataFrame
        Columns ``row``, ``onset`` (s from the first sample), ``duration`` (s; 0 for
        stim-channel events), ``sample``, ``name``, ``stimulus`` (see
        :func:`read_events_tsv`).
    source : str
        The source used.
    """
    if source in ("events_tsv", "auto") and events_tsv is not None:
        added = add_bad_segments(raw, read_bad_segments(events_tsv, event_column=event_column))
        if added:
            logger.info("%s: %d bad stretch(es) of data added as annotations.", events_tsv, added)
        return read_events_tsv(events_tsv, event_column=event_column, stim_column=stim_column), (
            "events_tsv"
        )
    if source == "events_tsv":
        raise ValueError(
            "`event_source` is 'events_tsv' but the recording has no _events.tsv. "
            "Add one, or set `event_source` to 'annotations' or 'stim_channel'."
        )
    if source in ("annotations", "auto"):
        events = _from_annotations(raw)
        if len(events) or source == "annotations":
            return events, "annotations"
    has_stim = "stim" in raw.get_channel_types() or stim_channel is not None
    if source == "stim_channel" or has_stim:
        if stim_channel is not None and stim_channel not in raw.ch_names:
            raise ValueError(
                f"`stim_channel` must be a channel of the recording, got {stim_channel!r} instead."
            )
        return _from_stim_channel(raw, stim_channel), "stim_channel"
    return _from_annotations(raw), "annotations"


def check_events_within(
    events: pd.DataFrame, *, n_times: int, sfreq: float, where: Path, eeg_file: Path
) -> None:
    """Raise when an event lies at or past the end of the data.

    Parameters
    ----------
    events : DataFrame
        From :func:`find_events`.
    n_times : int
        Samples in the recording.
    sfreq : float
        Sampling rate (Hz).
    where : Path
        File the events came from, for the message.
    eeg_file : Path
        Data file, for the message.
    """
    duration = n_times / sfreq
    past = (events["onset"] >= duration) | (events["onset"] < 0)
    if "sample" in events:
        past |= (events["sample"] >= n_times) | (events["sample"] < 0)
    if past.any():
        first = events[past].iloc[0]
        raise ValueError(
            f"{where} row {int(first['row'])}: field 'onset' {first['onset']} s (sample "
            f"{first['sample']}) lies outside {eeg_file}, which holds {n_times} samples "
            f"({duration:.3f} s); {int(past.sum())} event(s) do. Check that the events "
            "belong to this recording and that the data file is complete."
        )


def select_conditions(
    events: pd.DataFrame, conditions: Mapping[str, str] | Sequence[str] | None
) -> pd.DataFrame:
    """Keep the events of the wanted conditions and name their condition.

    Parameters
    ----------
    events : DataFrame
        From :func:`find_events`.
    conditions : dict of str to str | list of str | None
        Event name to condition label; a list keeps those events under their own names;
        ``None`` keeps every event.

    Returns
    -------
    selected : DataFrame
        The kept rows with an added ``condition`` column and ``stimulus`` filled with the
        event name where the events carry no stimulus id.
    """
    if conditions is None:
        mapping = {name: name for name in events["name"].unique()}
    elif isinstance(conditions, Mapping):
        mapping = {str(k): str(v) for k, v in conditions.items()}
    else:
        mapping = {str(c): str(c) for c in conditions}
    names = events["name"].astype(str)
    kept = events[names.isin(mapping)].copy()
    kept["condition"] = kept["name"].astype(str).map(mapping)
    stimulus = kept["stimulus"].where(kept["stimulus"].notna(), kept["name"].astype(str))
    kept["stimulus"] = stimulus.astype(str)
    return kept.reset_index(drop=True)


def select_stimulus_events(
    events: pd.DataFrame,
    *,
    events_tsv: Path | None,
    source: str,
    stimulus_events: Mapping[str, Any] | None,
) -> pd.DataFrame:
    """Keep the events that ``dataset.stimulus_events`` calls stimuli.

    Parameters
    ----------
    events : DataFrame
        From :func:`find_events` (column ``row``: the 1-based row of ``events_tsv``).
    events_tsv : Path | None
        The recording's ``_events.tsv``.
    source : str
        Where the events came from (``"events_tsv"``, ``"annotations"``, ...).
    stimulus_events : dict | None
        ``{select: {column: [values]}, exclude: {column: [values]}}``; the rules read
        the columns of the events table, so they apply to events read from it.

    Returns
    -------
    events : DataFrame
        The kept rows (all of them when there are no rules).
    """
    rules = check_stimulus_events(stimulus_events)
    if not (rules["select"] or rules["exclude"]):
        return events
    if source != "events_tsv" or events_tsv is None or "row" not in events.columns:
        logger.info(
            "`dataset.stimulus_events` reads events-table columns; the %s events of this "
            "recording are all kept.",
            source,
        )
        return events
    table = read_events_table(events_tsv)
    mask = stimulus_mask(table, rules, id_column=None, where=events_tsv)
    keep = mask[events["row"].to_numpy(dtype=int) - 1]
    return events[keep].reset_index(drop=True)


def select_events(
    events: pd.DataFrame,
    *,
    events_tsv: Path | None,
    source: str,
    stimulus_events: Mapping[str, Any] | None,
    conditions: Mapping[str, str] | Sequence[str] | None,
    where: Path | str,
) -> pd.DataFrame:
    """The events to epoch: stimuli (:func:`select_stimulus_events`) of the wanted
    conditions (:func:`select_conditions`).

    Raises
    ------
    ValueError
        When none is left, naming ``where`` and the settings to check.
    """
    kept = select_stimulus_events(
        events, events_tsv=events_tsv, source=source, stimulus_events=stimulus_events
    )
    kept = select_conditions(kept, conditions)
    if kept.empty:
        raise ValueError(
            f"{where} holds no events of the selected `conditions` ({conditions}) among its "
            f"{source} events. Check `conditions`, `event_source`, `event_column` and "
            "`dataset.stimulus_events`."
        )
    return kept

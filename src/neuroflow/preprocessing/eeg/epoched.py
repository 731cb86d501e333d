"""Epoched EEG inputs: MNE ``_epo.fif`` and epoched EEGLAB ``.set`` files to an epochs store.

Some datasets share EEG already cut into epochs. These files go through the steps of the
continuous path that make sense on epochs, in the same order, and end in a store with the
layout of the continuous path's epochs store (plus ``input: "epochs"``). Steps that need
continuous data are skipped and say so in the log: a high-pass filter (``l_freq``) cannot
be applied to short epochs without distorting them, and a notch filter likewise; ICA is
not fitted on epoched input. There is no continuous store for epoched input.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mne
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.io.records import EegRecording

from .amplitude import check_amplitude
from .config import epoch_window, resolve_config
from .events import select_events
from .read import read_epochs_file
from .rejection import drop_log_records, reject_epochs
from .sidecars import read_events_tsv, recording_from_path
from .stage import (
    _attrs,
    _bad_channels,
    _epochs_dataset,
    _prepare,
    _rereference,
    _State,
    _uncompressed,
)
from .window import check_window_within

__all__ = ["preprocess_eeg_epochs", "preprocess_epochs"]

logger = logging.getLogger(__name__)


def _own_events(epochs: mne.BaseEpochs, sfreq: float) -> pd.DataFrame:
    """One row per epoch named by the epochs' own event names (the code where unnamed)."""
    names_by_code: dict[int, str] = {}
    for name, code in epochs.event_id.items():
        names_by_code.setdefault(int(code), str(name))
    codes = epochs.events[:, 2]
    samples = epochs.events[:, 0].astype(float)
    return pd.DataFrame(
        {
            "row": np.arange(1, len(epochs) + 1),
            "onset": samples / sfreq,
            "sample": samples,
            "name": [names_by_code.get(int(c), str(int(c))) for c in codes],
            "stimulus": None,
        }
    )


def _epoch_events(
    epochs: mne.BaseEpochs, recording: EegRecording, cfg: Mapping[str, Any], state: _State
) -> pd.DataFrame:
    """Events of the epochs, one row per epoch with its index in column ``epoch``.

    From the recording's ``_events.tsv`` when it holds one row per epoch, else from the
    epochs' own event names (stimulus = condition = event name).
    """
    source, n = cfg["event_source"], len(epochs)
    events = None
    if recording.events is not None and source in ("auto", "events_tsv"):
        table = read_events_tsv(
            recording.events, event_column=cfg["event_column"], stim_column=cfg["stim_column"]
        )
        if len(table) == n:
            events, state.event_source = table, "events_tsv"
        else:
            message = (
                f"{recording.events} holds {len(table)} events with an onset and a name but "
                f"{recording.eeg} holds {n} epochs"
            )
            if source == "events_tsv":
                raise ValueError(
                    f"{message}; with `event_source` 'events_tsv' the table must hold one row "
                    "per epoch. Fix the table, or set `event_source` to 'auto' to name the "
                    "epochs by their own event names."
                )
            logger.warning("%s; naming the epochs by their own event names.", message)
    elif source == "events_tsv":
        raise ValueError(
            f"`event_source` is 'events_tsv' but the epochs file {recording.eeg} has no "
            "_events.tsv. Add one with a row per epoch, or set `event_source` to 'auto'."
        )
    elif source in ("annotations", "stim_channel"):
        logger.info(
            "%s: `event_source` %r applies to continuous recordings; the epochs are named "
            "by their own event names.",
            recording.eeg,
            source,
        )
    if events is None:
        events, state.event_source = _own_events(epochs, epochs.info["sfreq"]), "epochs"
    events = events.copy()
    events["epoch"] = np.arange(n)
    return events


def _reset_selection(epochs: mne.BaseEpochs) -> None:
    """Make epoch ``i`` event ``i`` again (after a selection), with an empty drop log."""
    epochs.selection = np.arange(len(epochs))
    epochs.drop_log = tuple(() for _ in range(len(epochs)))


def _concatenated(epochs: mne.BaseEpochs) -> mne.io.RawArray:
    """The epochs one after the other, shape (n_channels, n_epochs * n_times)."""
    data = epochs.get_data()
    data = data.transpose(1, 0, 2).reshape(data.shape[1], -1)
    return mne.io.RawArray(data, epochs.info.copy(), verbose="error")


def _filter(epochs: mne.BaseEpochs, cfg: Mapping[str, Any], path: Path) -> None:
    """Low-pass in place; say why the high-pass and notch filters are not applied."""
    if cfg["l_freq"] is not None:
        logger.warning(
            "%s: the configured high-pass `l_freq` = %g Hz is not applied to epoched input "
            "(high-pass filtering short epochs distorts them; it needs continuous data). The "
            "epochs keep the filtering they were stored with.",
            path,
            cfg["l_freq"],
        )
    if cfg["notch_freq"] is not None:
        logger.info(
            "%s: `notch_freq` is not applied to epoched input (it needs continuous data).", path
        )
    if cfg["h_freq"] is not None:
        epochs.filter(
            None,
            cfg["h_freq"],
            h_trans_bandwidth=cfg["h_trans_bandwidth"],
            n_jobs=cfg["n_jobs"],
            verbose="error",
        )


def _baseline(epochs: mne.BaseEpochs, cfg: Mapping[str, Any], path: Path) -> None:
    """Baseline-correct in place with the configured interval."""
    if cfg["baseline"] is None:
        return
    baseline = tuple(cfg["baseline"])
    try:
        epochs.apply_baseline(baseline, verbose="error")
    except ValueError as err:
        raise ValueError(
            f"`baseline` must lie within the epochs window [{epochs.tmin:g}, {epochs.tmax:g}] s "
            f"of {path}, got {list(baseline)} instead ({err})."
        ) from err


def preprocess_epochs(
    recording: EegRecording | str | Path,
    config: Mapping[str, Any] | None = None,
    stimulus_events: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """Clean already epoched EEG in memory.

    Steps, each optional and in the order of :func:`preprocess_recording`: channel types
    and bad channels from ``_channels.tsv``, EOG types, ``drop_channels``, montage; a
    finite-sample check; low-pass (``h_freq``; ``l_freq`` and ``notch_freq`` are not
    applied, with a log line saying so); detection of flat, noisy and uncorrelated channels
    on the epochs concatenated in time and their interpolation; re-referencing;
    resampling; cropping to [``epochs_tmin``, ``epochs_tmax``] (``"auto"``: the stored
    window, which an explicit window must lie within); baseline correction; peak-to-peak
    rejection. The median channel standard deviation after the low-pass must lie within
    ``amplitude_bounds``. ICA (``spatial_filter: ica``) is not run on epoched input.

    Conditions and stimulus ids come from the recording's ``_events.tsv`` when it holds
    one row per epoch (``event_column``, ``stim_column``), else from the epochs' own event
    names (stimulus = condition = event name); ``conditions`` selects and renames them as
    for continuous recordings.

    Parameters
    ----------
    recording : EegRecording | path-like
        An epoched recording (``recording.epoched``), or the path of its ``_epo.fif`` or
        epoched EEGLAB ``.set`` file (sidecars are found next to it).
    config : dict | None
        The ``preprocess_eeg`` section (see :data:`DEFAULT_CONFIG`).

    Returns
    -------
    epochs : xarray.Dataset
        ``epochs`` (epoch, channel, time), float32, V, with the coordinates and attributes
        of the continuous path's epochs store and attribute ``input`` ``"epochs"``.
    """
    cfg = resolve_config(config)
    if not isinstance(recording, EegRecording):
        recording = recording_from_path(recording)
    if not recording.epoched:
        raise ValueError(
            f"`recording` must be an epochs file (MNE _epo.fif or an EEGLAB .set holding "
            f"several trials), got the continuous recording {recording.eeg} instead. "
            "Preprocess it with `preprocess_recording` (`preprocess_eeg_recording`)."
        )
    path = recording.eeg
    state = _State(recording=recording)
    epochs = read_epochs_file(path, drop_meg=recording.datatype == "meg")
    window = epoch_window(cfg, (epochs.tmin, epochs.tmax))
    check_window_within(window, (epochs.tmin, epochs.tmax), epochs.info["sfreq"], path)
    _prepare(epochs, recording, cfg, state)
    events = select_events(
        _epoch_events(epochs, recording, cfg, state),
        events_tsv=recording.events,
        source=state.event_source,
        stimulus_events=stimulus_events,
        conditions=cfg["conditions"],
        where=path,
    )
    if len(events) < len(epochs):
        epochs = epochs[events["epoch"].to_numpy()]
    _reset_selection(epochs)
    _filter(epochs, cfg, path)
    concatenated = _concatenated(epochs)
    state.median_sd = check_amplitude(concatenated, cfg, recording)
    channels = _bad_channels(epochs, cfg, state, detect_on=concatenated)
    _rereference(epochs, cfg, state)
    if cfg["spatial_filter"] == "ica":
        logger.warning("%s: ICA is not run on epoched input; no component removed.", path)
    if cfg["resample_sfreq"] is not None:
        epochs.resample(cfg["resample_sfreq"], npad="auto", n_jobs=cfg["n_jobs"], verbose="error")
    epochs.crop(
        max(window[0], epochs.tmin), min(window[1], epochs.tmax), include_tmax=True, verbose="error"
    )
    state.window = (float(epochs.tmin), float(epochs.tmax))
    _baseline(epochs, cfg, path)
    epochs.pick(channels, verbose="error")
    custom = reject_epochs(epochs, cfg, path)
    log = drop_log_records(
        epochs.drop_log,
        events["onset"].to_numpy(),
        custom,
        cfg["reject"],
        conditions=events["condition"].to_numpy(dtype=str),
    )
    if len(epochs) == 0:
        reasons = pd.Series([r["reason"] for r in log]).value_counts().to_dict()
        raise ValueError(
            f"No epochs of {path} are left after rejection: all {len(events)} were dropped "
            f"({reasons}). Loosen `reject` (or `reject_mad_k`) or check the data."
        )
    attrs = _attrs(state, cfg, epochs.info["sfreq"])
    attrs["filters"] = {"l_freq": None, "h_freq": cfg["h_freq"], "notch": []}
    attrs["input"] = "epochs"
    return _epochs_dataset(epochs, events, log, attrs)


def preprocess_eeg_epochs(
    *,
    recording: EegRecording | str | Path,
    epochs_output: str | Path,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None = None,
) -> Path:
    """Stage entry point: preprocess one epoched recording and write its epochs store.

    Parameters
    ----------
    recording : EegRecording | path-like
        The epoched recording, or the path of its ``_epo.fif`` / epoched ``.set`` file.
    epochs_output : path-like
        Store of ``epochs`` (epoch, channel, time) float32 with the layout of
        :func:`preprocess_eeg_recording`'s epochs store and attribute ``input``
        ``"epochs"`` (see :func:`preprocess_epochs`).
    config : dict
        The ``preprocess_eeg`` section.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events-table rows that are not stimuli are left out.

    Returns
    -------
    epochs_output : Path
        The written store. Nothing is written when any check fails.
    """
    epochs_ds = preprocess_epochs(recording, config, stimulus_events)
    return write_dataset(
        epochs_ds, epochs_output, provenance=provenance, encoding=_uncompressed("epochs")
    )

"""The ``preprocess_eeg`` stage: one BIDS EEG recording to epochs and continuous stores."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mne
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.io.records import EegRecording

from .amplitude import check_amplitude
from .bads import find_bad_channels, find_bad_channels_pyprep
from .config import epoch_window, resolve_config
from .events import check_events_within, find_events, select_events
from .read import (
    apply_channels_tsv,
    apply_montage,
    check_finite,
    check_sidecar,
    read_raw_file,
)
from .rejection import drop_log_records, reject_epochs, rejection_method
from .sidecars import recording_from_path

__all__ = [
    "FORMAT_VERSION",
    "STAGE",
    "notch_frequencies",
    "preprocess_eeg_recording",
    "preprocess_recording",
]

logger = logging.getLogger(__name__)

#: Stage name used in provenance and result paths.
STAGE = "preprocess_eeg"
#: Bumped when the meaning of the stores changes.
FORMAT_VERSION = 4
#: Columns of the selected events that the stores keep.
_EVENT_COLUMNS = ("onset", "condition", "stimulus")


def _uncompressed(name: str) -> dict[str, dict[str, Any]]:
    """Zarr encoding that stores variable ``name`` uncompressed."""
    return {name: {"compressors": None}}


@dataclass
class _State:
    """What the steps learn about the recording, collected into store attributes."""

    recording: EegRecording
    line_freq: float | None = None
    montage: str | None = None
    notch: list[float] = field(default_factory=list)
    bads: dict[str, list[str]] = field(default_factory=dict)
    interpolated: list[str] = field(default_factory=list)
    reference: str = "original"
    ica: dict[str, Any] | None = None
    event_source: str = ""
    median_sd: float | None = None
    window: tuple[float, float] | None = None


def notch_frequencies(
    line_freq: float | None, sfreq: float, h_freq: float | None, h_trans: float | str
) -> list[float]:
    """Power-line frequency and harmonics that a low-pass filter does not remove.

    Parameters
    ----------
    line_freq : float | None
        Power-line frequency (Hz), ``None`` when unknown.
    sfreq : float
        Sampling rate (Hz).
    h_freq : float | None
        Low-pass edge (Hz), ``None`` for no low-pass.
    h_trans : float | "auto"
        Low-pass transition bandwidth (Hz); ``"auto"`` as in :func:`mne.filter.create_filter`.

    Returns
    -------
    freqs : list of float
        Harmonics below Nyquist and below the low-pass stop band.
    """
    if line_freq is None:
        return []
    nyquist = sfreq / 2.0
    limit = nyquist
    if h_freq is not None:
        width = min(max(0.25 * h_freq, 2.0), nyquist - h_freq) if h_trans == "auto" else h_trans
        limit = min(limit, h_freq + float(width))
    n = int(np.ceil(limit / line_freq))
    return [line_freq * i for i in range(1, n + 1) if line_freq * i < limit]


def _prepare(
    inst: mne.io.BaseRaw | mne.BaseEpochs,
    recording: EegRecording,
    cfg: Mapping[str, Any],
    state: _State,
) -> None:
    """Check the sidecar; apply ``_channels.tsv``, EOG types, dropped channels, montage."""
    sidecar = check_sidecar(inst, recording)
    line = sidecar.get("PowerLineFrequency")
    state.line_freq = None if line in (None, "n/a") else float(line)
    if recording.channels is not None:
        found = apply_channels_tsv(
            inst,
            recording.channels,
            eeg_file=recording.eeg,
            use_status=cfg["bads_from_channels_tsv"],
        )
        state.bads["channels_tsv"] = found
    eog = [c for c in cfg["eog_channels"] if c in inst.ch_names]
    if eog:
        inst.set_channel_types(dict.fromkeys(eog, "eog"), on_unit_change="ignore", verbose="error")
    drop = [c for c in cfg["drop_channels"] if c in inst.ch_names]
    if drop:
        inst.drop_channels(drop)
    state.montage = apply_montage(
        inst, electrodes_tsv=recording.electrodes, template=cfg["eeg_template_montage"]
    )
    _check_finite(inst, cfg, recording)


def _check_finite(
    inst: mne.io.BaseRaw | mne.BaseEpochs, cfg: Mapping[str, Any], recording: EegRecording
) -> None:
    """Raise on NaN or infinite samples in kept channels; zero them in bad channels.

    Bad channels are interpolated from good ones or left out, so their non-finite
    samples (a dead electrode stored as NaN) are set to 0 for the filters and detectors.
    """
    types = inst.get_channel_types()
    kept = [n for n, t in zip(inst.ch_names, types, strict=True) if t in cfg["ch_types"]]
    bads = [n for n in kept if n in inst.info["bads"]]
    for name in bads:
        data = inst.get_data(picks=[name])
        if not np.isfinite(data).all():
            logger.info(
                "%s: bad channel %s holds non-finite samples; set to 0.", recording.eeg, name
            )
            inst.apply_function(
                lambda x: np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0),
                picks=[name],
                verbose="error",
            )
    check_finite(inst, [n for n in kept if n not in bads], recording.eeg)


def _load(recording: EegRecording, cfg: Mapping[str, Any], state: _State) -> mne.io.BaseRaw:
    """Read the data and apply ``_channels.tsv``, the sidecar and the montage."""
    raw = read_raw_file(recording.eeg, drop_meg=recording.datatype == "meg")
    _prepare(raw, recording, cfg, state)
    return raw


def _filter(raw: mne.io.BaseRaw, cfg: Mapping[str, Any], state: _State) -> None:
    """Notch and band-pass filter the data channels in place."""
    notch = cfg["notch_freq"]
    if notch == "auto":
        state.notch = notch_frequencies(
            state.line_freq, raw.info["sfreq"], cfg["h_freq"], cfg["h_trans_bandwidth"]
        )
    elif notch is not None:
        state.notch = [float(f) for f in np.atleast_1d(notch) if f < raw.info["sfreq"] / 2]
    if state.notch:
        raw.notch_filter(
            state.notch, notch_widths=cfg["notch_widths"], n_jobs=cfg["n_jobs"], verbose="error"
        )
    if cfg["l_freq"] is not None or cfg["h_freq"] is not None:
        raw.filter(
            l_freq=cfg["l_freq"],
            h_freq=cfg["h_freq"],
            l_trans_bandwidth=cfg["l_trans_bandwidth"],
            h_trans_bandwidth=cfg["h_trans_bandwidth"],
            n_jobs=cfg["n_jobs"],
            verbose="error",
        )


def _has_positions(raw: mne.io.BaseRaw, names: list[str]) -> bool:
    """Whether every named channel has a finite, non-zero position."""
    locs = np.array([raw.info["chs"][raw.ch_names.index(n)]["loc"][:3] for n in names])
    return bool(len(locs)) and bool(np.isfinite(locs).all() and (np.abs(locs).sum(1) > 0).all())


def _bad_channels(
    raw: mne.io.BaseRaw | mne.BaseEpochs,
    cfg: Mapping[str, Any],
    state: _State,
    *,
    detect_on: mne.io.BaseRaw | None = None,
) -> list[str]:
    """Detect and interpolate bad EEG channels; return the output channel names.

    ``detect_on`` is a continuous view of ``raw`` with the same channels (epochs
    concatenated in time) for the detectors; ``raw`` itself by default.
    """
    types = raw.get_channel_types()
    keep = [n for n, t in zip(raw.ch_names, types, strict=True) if t in cfg["ch_types"]]
    if not keep:
        raise ValueError(
            f"{state.recording.eeg} has no channels of the types `ch_types` "
            f"{cfg['ch_types']}; its types are {sorted(set(types))}."
        )
    eeg = np.array(
        [raw.ch_names.index(n) for n, t in zip(raw.ch_names, types, strict=True) if t == "eeg"],
        dtype=int,
    )
    if cfg["bad_channels_method"] == "pyprep":
        found = find_bad_channels_pyprep(
            raw if detect_on is None else detect_on,
            eeg,
            ransac=cfg["pyprep_ransac"],
            random_state=cfg["random_state"],
            path=state.recording.eeg,
        )
    else:
        found = find_bad_channels(
            raw if detect_on is None else detect_on,
            eeg,
            flat_threshold=cfg["flat_threshold"] if cfg["find_flat_channels"] else None,
            noisy_z_threshold=cfg["noisy_z_threshold"] if cfg["find_noisy_channels"] else None,
            correlation_threshold=(
                cfg["correlation_threshold"] if cfg["find_uncorrelated_channels"] else None
            ),
        )
    state.bads.update(found)
    new = [n for names in found.values() for n in names]
    raw.info["bads"] = sorted(set(raw.info["bads"]) | set(new), key=raw.ch_names.index)
    bads = [n for n in keep if n in raw.info["bads"]]
    good = [n for n in keep if n not in raw.info["bads"]]
    if not good:
        reasons = {k: v for k, v in state.bads.items() if v}
        raise ValueError(
            f"All {len(keep)} channels of {state.recording.eeg} are bad ({reasons}). Check "
            "the 'status' field of _channels.tsv and the bad-channel thresholds "
            "(`flat_threshold`, `noisy_z_threshold`, `correlation_threshold`)."
        )
    if bads and cfg["interpolate_bads"] and _has_positions(raw, keep):
        raw.interpolate_bads(reset_bads=False, origin="auto", verbose="error")
        state.interpolated = bads
        return keep
    return good


def _rereference(raw: mne.io.BaseRaw, cfg: Mapping[str, Any], state: _State) -> None:
    """Apply the configured EEG reference in place."""
    ref = cfg["eeg_reference"]
    if ref is None:
        return
    if ref == "average":
        raw.set_eeg_reference("average", projection=False, ch_type="eeg", verbose="error")
        state.reference = "average"
        return
    missing = [c for c in ref if c not in raw.ch_names]
    if missing:
        raise ValueError(
            f"`eeg_reference` channels must be channels of {state.recording.eeg}, got "
            f"missing {missing} instead."
        )
    raw.set_eeg_reference(list(ref), verbose="error")
    state.reference = ",".join(ref)


def _icalabel_exclude(raw: mne.io.BaseRaw, ica: Any, cfg: Mapping[str, Any]) -> list[int] | None:
    """Components that mne-icalabel labels as artefacts, ``None`` without the package."""
    try:
        from mne_icalabel import label_components
    except ImportError:
        return None
    result = label_components(raw, ica, method="iclabel")
    labels, proba = result["labels"], result["y_pred_proba"]
    return [
        i
        for i, (lab, p) in enumerate(zip(labels, proba, strict=True))
        if lab in cfg["ica_icalabel_exclude"] and p >= cfg["ica_icalabel_threshold"]
    ]


def _ica(raw: mne.io.BaseRaw, channels: list[str], cfg: Mapping[str, Any], state: _State) -> None:
    """Fit ICA on a high-passed copy, label artefact components and remove them."""
    from mne.preprocessing import ICA

    picks = [c for c in channels if raw.get_channel_types([c])[0] == "eeg"]
    fit_raw = raw
    if cfg["ica_l_freq"] is not None:
        fit_raw = raw.copy().filter(
            l_freq=cfg["ica_l_freq"],
            h_freq=None,
            picks=picks,
            n_jobs=cfg["n_jobs"],
            verbose="error",
        )
    method, fit_params = cfg["ica_algorithm"], None
    if method == "infomax":
        fit_params = {"extended": True}
    n_components = cfg["ica_n_components"]
    if isinstance(n_components, float) and n_components >= 1:
        n_components = int(n_components)  # a count written as 15.0
    ica = ICA(
        n_components=n_components,
        method=method,
        fit_params=fit_params,
        max_iter=cfg["ica_max_iterations"],
        random_state=cfg["random_state"],
        verbose="error",
    )
    ica.fit(fit_raw, picks=picks, verbose="error")
    labeller = "none"
    exclude = _icalabel_exclude(fit_raw, ica, cfg) if cfg["ica_use_icalabel"] else None
    if exclude is not None:
        labeller = "mne-icalabel"
    elif "eog" in raw.get_channel_types():
        exclude, _ = ica.find_bads_eog(fit_raw, threshold=cfg["ica_eog_threshold"], verbose="error")
        labeller = "eog-correlation"
    else:
        logger.warning("ICA: neither mne-icalabel nor EOG channels; no component removed.")
    ica.exclude = [int(i) for i in exclude or []]
    ica.apply(raw, verbose="error")
    state.ica = {
        "algorithm": method,
        "n_components": int(ica.n_components_),
        "excluded": ica.exclude,
        "labelling": labeller,
    }


def _block_float32(raw: mne.io.BaseRaw, picks: np.ndarray, block: int = 2**18) -> np.ndarray:
    """Picked channels as float32, shape (n_channels, n_times), copied in time blocks."""
    out = np.empty((len(picks), raw.n_times), dtype=np.float32)
    for start in range(0, raw.n_times, block):
        stop = min(start + block, raw.n_times)
        out[:, start:stop] = raw.get_data(picks=picks, start=start, stop=stop)
    return out


def _channel_coords(raw: mne.io.BaseRaw | mne.BaseEpochs, names: list[str]) -> dict[str, Any]:
    """``channel``, ``ch_type`` and ``ch_x/y/z`` coordinates (positions in m, NaN unknown)."""
    idx = [raw.ch_names.index(n) for n in names]
    locs = np.array([raw.info["chs"][i]["loc"][:3] for i in idx], dtype=float).reshape(-1, 3)
    locs[~(np.isfinite(locs).all(1) & (np.abs(locs).sum(1) > 0))] = np.nan
    unit = {"units": "m"}
    return {
        "channel": ("channel", np.array(names, dtype=object)),
        "ch_type": ("channel", np.array(raw.get_channel_types(picks=idx), dtype=object)),
        "ch_x": ("channel", locs[:, 0], unit),
        "ch_y": ("channel", locs[:, 1], unit),
        "ch_z": ("channel", locs[:, 2], unit),
    }


def _attrs(state: _State, cfg: Mapping[str, Any], sfreq: float) -> dict[str, Any]:
    """Store attributes shared by the epochs and continuous stores."""
    rec = state.recording
    all_bads = [n for names in state.bads.values() for n in names]
    return {
        "sfreq": float(sfreq),
        "reference": state.reference,
        "filters": {"l_freq": cfg["l_freq"], "h_freq": cfg["h_freq"], "notch": state.notch},
        "bad_channels": list(dict.fromkeys(all_bads)),
        "bad_channel_reasons": {k: v for k, v in state.bads.items() if v},
        "interpolated_channels": state.interpolated,
        "bad_channels_method": cfg["bad_channels_method"],
        "reject_method": rejection_method(cfg),
        "montage": state.montage,
        "ica": state.ica,
        "event_source": state.event_source,
        "epochs_window": None if state.window is None else list(state.window),
        "median_channel_sd": state.median_sd,
        "entities": {
            "subject": rec.subject,
            "session": rec.session,
            "task": rec.task,
            "run": rec.run,
        },
        "source_file": str(rec.eeg),
        "input": "continuous",
    }


def _epoch(
    raw: mne.io.BaseRaw,
    events: pd.DataFrame,
    channels: list[str],
    cfg: Mapping[str, Any],
    path: Path | str = "the recording",
) -> tuple[mne.BaseEpochs, list[dict]]:
    """Epoch, baseline-correct and reject; return the epochs and the drop log."""
    conditions = sorted(events["condition"].unique())
    event_id = {c: i + 1 for i, c in enumerate(conditions)}
    samples = raw.first_samp + np.round(events["onset"].to_numpy() * raw.info["sfreq"])
    mne_events = np.column_stack(
        [samples.astype(int), np.zeros(len(events), int), events["condition"].map(event_id)]
    )
    baseline = None if cfg["baseline"] is None else tuple(cfg["baseline"])
    tmin, tmax = epoch_window(cfg)
    epochs = mne.Epochs(
        raw,
        mne_events,
        event_id=event_id,
        tmin=tmin,
        tmax=tmax,
        baseline=baseline,
        picks=channels,
        preload=True,
        reject=None,
        event_repeated="drop",
        reject_by_annotation=True,
        verbose="error",
    )
    custom = reject_epochs(epochs, cfg, path)
    log = drop_log_records(
        epochs.drop_log,
        events["onset"].to_numpy(),
        custom,
        cfg["reject"],
        conditions=events["condition"].to_numpy(dtype=str),
    )
    return epochs, log


def preprocess_recording(
    recording: EegRecording | str | Path,
    config: Mapping[str, Any] | None = None,
    stimulus_events: Mapping[str, Any] | None = None,
) -> tuple[xr.Dataset, xr.Dataset]:
    """Clean and epoch one EEG recording in memory.

    Steps, each optional: channel types and bad channels from ``_channels.tsv``; montage
    from ``_electrodes.tsv`` or a standard montage; notch at the sidecar's
    ``PowerLineFrequency`` and harmonics; band-pass; a check that the median channel
    standard deviation lies within ``amplitude_bounds``; detection of flat, noisy and
    uncorrelated channels (or PREP's criteria, ``bad_channels_method: pyprep``) and their
    interpolation when positions are known; re-referencing; ICA; resampling; epoching
    with baseline correction; rejection (peak-to-peak limits, or autoreject with
    ``reject_method``).

    For the ``_meg.fif`` of a MEG + EEG recording (``recording.datatype == "meg"``) the
    MEG sensors are dropped right after reading, so every step sees the EEG (and EOG,
    ECG, stim) channels only. Samples of kept channels must be finite.

    A recording without events (resting state: no ``_events.tsv`` rows, annotations or
    stim-channel events) is preprocessed all the same; its epochs store holds no epochs
    (attribute ``event_source`` ``"none"``, ``n_events`` 0).

    Parameters
    ----------
    recording : EegRecording | path-like
        The recording, or the path of its data file (sidecars are found next to it).
    config : dict | None
        The ``preprocess_eeg`` section (see :data:`DEFAULT_CONFIG`).
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events-table rows that are not stimuli are not
        epoched.

    Returns
    -------
    epochs : xarray.Dataset
        ``epochs`` (epoch, channel, time), float32, V; attribute ``input`` is
        ``"continuous"``.
    continuous : xarray.Dataset
        ``eeg`` (channel, time), float32, V, and the selected events.
    """
    cfg = resolve_config(config)
    if not isinstance(recording, EegRecording):
        recording = recording_from_path(recording)
    if recording.epoched:
        raise ValueError(
            f"`recording` must be a continuous recording, got the epochs file "
            f"{recording.eeg} instead. Preprocess epochs with `preprocess_epochs` "
            "(`preprocess_eeg_epochs`)."
        )
    state = _State(recording=recording)
    raw = _load(recording, cfg, state)
    events, state.event_source = find_events(
        raw,
        events_tsv=recording.events,
        source=cfg["event_source"],
        event_column=cfg["event_column"],
        stim_column=cfg["stim_column"],
        stim_channel=cfg["stim_channel"],
    )
    where = recording.events if state.event_source == "events_tsv" else recording.eeg
    check_events_within(
        events, n_times=raw.n_times, sfreq=raw.info["sfreq"], where=where, eeg_file=recording.eeg
    )
    state.window = epoch_window(cfg)
    if events.empty:
        logger.info(
            "%s holds no events (event source: %s): an event-free recording (e.g. resting "
            "state), preprocessed into a continuous store and an epochs store without epochs.",
            where,
            state.event_source,
        )
        state.event_source = "none"
        events = pd.DataFrame(
            {c: pd.Series(dtype=float if c == "onset" else object) for c in _EVENT_COLUMNS}
        )
    else:
        events = select_events(
            events,
            events_tsv=recording.events,
            source=state.event_source,
            stimulus_events=stimulus_events,
            conditions=cfg["conditions"],
            where=where,
        )
    events = events.sort_values("onset", kind="stable").reset_index(drop=True)
    _filter(raw, cfg, state)
    state.median_sd = check_amplitude(raw, cfg, recording)
    channels = _bad_channels(raw, cfg, state)
    _rereference(raw, cfg, state)
    if cfg["spatial_filter"] == "ica":
        _ica(raw, channels, cfg, state)
    if cfg["resample_sfreq"] is not None:
        raw.resample(cfg["resample_sfreq"], npad="auto", n_jobs=cfg["n_jobs"], verbose="error")
    attrs = _attrs(state, cfg, raw.info["sfreq"])
    if events.empty:
        epochs_ds = _no_epochs_dataset(raw, channels, state.window, attrs)
        return epochs_ds, _continuous_dataset(raw, channels, events, attrs)
    epochs, log = _epoch(raw, events, channels, cfg, recording.eeg)
    if len(epochs) == 0:
        reasons = pd.Series([r["reason"] for r in log]).value_counts().to_dict()
        raise ValueError(
            f"No epochs of {recording.eeg} are left after rejection: all {len(events)} were "
            f"dropped ({reasons}). Loosen `reject` (or `reject_mad_k`) or check the data."
        )
    epochs_ds = _epochs_dataset(epochs, events, log, attrs)
    del epochs  # release the float64 epochs before the continuous copy
    return epochs_ds, _continuous_dataset(raw, channels, events, attrs)


def _epochs_dataset(
    epochs: mne.BaseEpochs, events: pd.DataFrame, log: list[dict], attrs: dict[str, Any]
) -> xr.Dataset:
    """The epochs store's dataset."""
    kept = events.iloc[epochs.selection]
    data = epochs.get_data(copy=False).astype(np.float32)
    coords = {
        **_channel_coords(epochs, epochs.ch_names),
        "time": ("time", epochs.times, {"units": "s"}),
        "stimulus": ("epoch", kept["stimulus"].to_numpy(dtype=object)),
        "condition": ("epoch", kept["condition"].to_numpy(dtype=object)),
        "onset": ("epoch", kept["onset"].to_numpy(dtype=float), {"units": "s"}),
        "event_index": ("epoch", np.asarray(epochs.selection, dtype=np.int64)),
    }
    ds = xr.Dataset({"epochs": (("epoch", "channel", "time"), data, {"units": "V"})}, coords=coords)
    ds.attrs = {**attrs, "dropped_epochs": log, "n_events": len(events)}
    return ds


def _no_epochs_dataset(
    raw: mne.io.BaseRaw, channels: list[str], window: tuple[float, float], attrs: dict[str, Any]
) -> xr.Dataset:
    """The epochs store of an event-free recording: ``epochs`` of shape (0, n_channels,
    n_times) on the epoch window's time grid."""
    sfreq = raw.info["sfreq"]
    times = np.arange(round(window[0] * sfreq), round(window[1] * sfreq) + 1) / sfreq
    coords = {
        **_channel_coords(raw, channels),
        "time": ("time", times, {"units": "s"}),
        "stimulus": ("epoch", np.array([], dtype=object)),
        "condition": ("epoch", np.array([], dtype=object)),
        "onset": ("epoch", np.array([], dtype=float), {"units": "s"}),
        "event_index": ("epoch", np.array([], dtype=np.int64)),
    }
    data = np.zeros((0, len(channels), len(times)), dtype=np.float32)
    ds = xr.Dataset({"epochs": (("epoch", "channel", "time"), data, {"units": "V"})}, coords=coords)
    ds.attrs = {**attrs, "dropped_epochs": [], "n_events": 0}
    return ds


def _continuous_dataset(
    raw: mne.io.BaseRaw, channels: list[str], events: pd.DataFrame, attrs: dict[str, Any]
) -> xr.Dataset:
    """The continuous store's dataset, with the selected events alongside."""
    picks = np.array([raw.ch_names.index(c) for c in channels])
    coords = {
        **_channel_coords(raw, channels),
        "time": ("time", raw.times, {"units": "s"}),
        "event_onset": ("event", events["onset"].to_numpy(dtype=float), {"units": "s"}),
        "event_condition": ("event", events["condition"].to_numpy(dtype=object)),
        "event_stimulus": ("event", events["stimulus"].to_numpy(dtype=object)),
    }
    ds = xr.Dataset(
        {"eeg": (("channel", "time"), _block_float32(raw, picks), {"units": "V"})}, coords=coords
    )
    ds.attrs = dict(attrs)
    return ds


def preprocess_eeg_recording(
    *,
    recording: EegRecording | str | Path,
    epochs_output: str | Path,
    continuous_output: str | Path,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None = None,
) -> tuple[Path, Path]:
    """Stage entry point: preprocess one recording and write its two stores.

    Parameters
    ----------
    recording : EegRecording | path-like
        The recording, or the path of its data file.
    epochs_output : path-like
        Store of ``epochs`` (epoch, channel, time) float32 with coordinates ``stimulus``,
        ``condition``, ``onset`` (epoch), ``channel``, ``ch_type``, ``ch_x/ch_y/ch_z``
        (channel) and ``time``.
    continuous_output : path-like
        Store of ``eeg`` (channel, time) float32 with the same channel coordinates and
        the selected events (``event_onset``, ``event_condition``, ``event_stimulus``).
    config : dict
        The ``preprocess_eeg`` section.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events-table rows that are not stimuli are not
        epoched.

    Returns
    -------
    epochs_output, continuous_output : Path
        The written stores. Nothing is written when any check fails.
    """
    epochs_ds, continuous_ds = preprocess_recording(recording, config, stimulus_events)
    # Noisy float EEG barely compresses (~10 %) and compressing costs several times the
    # write time, so the two large arrays are stored uncompressed.
    out_epochs = write_dataset(
        epochs_ds, epochs_output, provenance=provenance, encoding=_uncompressed("epochs")
    )
    out_cont = write_dataset(
        continuous_ds, continuous_output, provenance=provenance, encoding=_uncompressed("eeg")
    )
    return out_epochs, out_cont

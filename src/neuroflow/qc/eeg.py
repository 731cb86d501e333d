"""Quality control of one preprocessed EEG recording.

What a reader of an EEG study checks before trusting its results, per recording:
the power spectrum before and after filtering (line noise, drifts, the filter edges),
the power in the classical frequency bands per channel, which channels were flagged bad
and why, which ICA components were removed, which epochs were dropped and why, how many
epochs each condition kept, and the evoked response per condition.
:func:`eeg_qc_dataset` gathers these as one (channel, frequency) / (channel, band) /
(event) / (condition, channel, time) dataset from the recording's file and its
``preprocess_eeg`` stores; :func:`eeg_qc_figures` draws them with MNE's plotting
functions (:class:`mne.time_frequency.SpectrumArray`, :func:`mne.viz.plot_sensors`,
:func:`mne.viz.plot_topomap`, :meth:`mne.Evoked.plot_joint`,
:func:`mne.viz.plot_compare_evokeds`).

Event-free recordings (resting state) have an epochs store without epochs: their QC
holds the spectra, the band power and the channels, and draws only those figures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mne
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.io.records import EegRecording
from neuroflow.preprocessing.eeg.read import read_epochs_file, read_raw_file
from neuroflow.preprocessing.eeg.sidecars import recording_from_path
from neuroflow.progress import Progress
from neuroflow.qc._variables import described

__all__ = [
    "ALL_CONDITIONS",
    "BANDS",
    "EEG_QC_FIGURES",
    "EVENT_FIGURES",
    "MAX_ERP_CONDITIONS",
    "band_power",
    "eeg_qc_dataset",
    "eeg_qc_figures",
    "psd_welch",
]

#: Label of the evoked response averaged over every kept epoch.
ALL_CONDITIONS = "all"
#: Most conditions given their own evoked response (the most frequent ones).
MAX_ERP_CONDITIONS = 12
#: Figure kinds of one recording, in report order (file ``<key>_qc-<kind>.png``).
EEG_QC_FIGURES = ("psd", "band-power", "channels", "drop-log", "erp", "erp-conditions")
#: Figure kinds drawn only for recordings with events.
EVENT_FIGURES = ("drop-log", "erp", "erp-conditions")
#: Frequency bands (Hz) of the band power, each ``[low, high)``.
BANDS: dict[str, tuple[float, float]] = {
    "delta": (1.0, 4.0),
    "theta": (4.0, 8.0),
    "alpha": (8.0, 13.0),
    "beta": (13.0, 30.0),
    "gamma": (30.0, 45.0),
}
#: Welch window (s): 0.5 Hz resolution on continuous data.
_WELCH_SECONDS = 2.0
#: Channel groups whose Welch spectra are computed in turn (progress is reported per group).
_PSD_PARTS = 20


def _text(values: Any) -> np.ndarray:
    """Strings of any numpy string dtype (fixed, variable-length, object) as ``str``."""
    return np.array([str(v) for v in np.asarray(values).ravel()], dtype=str)


def psd_welch(
    data: np.ndarray, sfreq: float, fmax: float, n_fft: int, what: str = "QC: Welch spectra"
) -> tuple[np.ndarray, np.ndarray]:
    """Welch power spectral density of each channel, averaged over leading dims.

    Parameters
    ----------
    data : ndarray, shape (..., n_channels, n_times)
        Signals in V (epochs are averaged over the first dim).
    sfreq : float
        Sampling rate (Hz).
    fmax : float
        Highest frequency kept (Hz).
    n_fft : int
        Window length in samples (at most ``n_times``).
    what : str
        The step, as the progress lines name it (channels are counted).

    Returns
    -------
    psd : ndarray, shape (n_channels, n_freqs)
        Power spectral density in V²/Hz.
    freqs : ndarray, shape (n_freqs,)
        Frequencies (Hz), from 0 to ``fmax``.
    """
    data = np.asarray(data, dtype=np.float64)
    n_fft = int(min(n_fft, data.shape[-1]))
    n_channels = data.shape[-2]
    step = max(1, -(-n_channels // _PSD_PARTS))
    parts = []
    # channel by channel group (each channel's spectrum is its own): a line per step
    with Progress(n_channels, what, "channels") as progress:
        for start in range(0, max(n_channels, 1), step):
            psd, freqs = mne.time_frequency.psd_array_welch(
                data[..., start : start + step, :],
                sfreq,
                fmin=0.0,
                fmax=fmax,
                n_fft=n_fft,
                n_per_seg=n_fft,
                verbose="error",
            )
            parts.append(psd.reshape(-1, *psd.shape[-2:]).mean(axis=0))
            progress.update(psd.shape[-2])
    return np.concatenate(parts, axis=0), freqs


def band_power(
    data: np.ndarray,
    sfreq: float,
    n_fft: int,
    bands: Mapping[str, tuple[float, float]] = BANDS,
) -> tuple[np.ndarray, np.ndarray]:
    """Absolute power per channel in each frequency band, from MNE's Welch spectrum.

    The spectrum is :meth:`mne.io.Raw.compute_psd` (or :meth:`mne.Epochs.compute_psd`,
    averaged over epochs) with ``method="welch"``, Hamming windows of ``n_fft`` samples
    without overlap, each segment's mean removed; a band's power is the sum of the
    spectrum over its frequencies ``low <= f < high`` times the frequency step.

    Parameters
    ----------
    data : ndarray, shape (n_channels, n_times) or (n_epochs, n_channels, n_times)
        Signals in V.
    sfreq : float
        Sampling rate (Hz).
    n_fft : int
        Welch window in samples (at most ``n_times``).
    bands : dict of str to (float, float)
        Band name to ``(low, high)`` in Hz.

    Returns
    -------
    power : ndarray, shape (n_channels, n_bands)
        Power in V²; NaN for a band without a frequency of the spectrum (above Nyquist,
        or narrower than the resolution ``sfreq / n_fft`` of short epochs).
    n_freqs : ndarray of int, shape (n_bands,)
        Frequencies of the spectrum in each band.
    """
    data = np.asarray(data, dtype=np.float64)
    n_fft = int(min(n_fft, data.shape[-1]))
    info = mne.create_info(data.shape[-2], sfreq, "eeg")
    if data.ndim == 3:
        inst: Any = mne.EpochsArray(data, info, verbose="error")
    else:
        inst = mne.io.RawArray(data, info, verbose="error")
    spectrum = inst.compute_psd(
        method="welch", fmin=0.0, fmax=sfreq / 2.0, n_fft=n_fft, n_per_seg=n_fft, verbose="error"
    )
    psd, freqs = spectrum.get_data(return_freqs=True)
    psd = psd.reshape(-1, *psd.shape[-2:]).mean(axis=0)
    step = float(freqs[1] - freqs[0]) if len(freqs) > 1 else 0.0
    power = np.full((psd.shape[0], len(bands)), np.nan)
    n_freqs = np.zeros(len(bands), dtype=np.int64)
    for i, (low, high) in enumerate(bands.values()):
        inside = (freqs >= low) & (freqs < high)
        n_freqs[i] = int(inside.sum())
        if n_freqs[i]:
            power[:, i] = psd[:, inside].sum(axis=1) * step
    return power, n_freqs


def _band_power(epochs: xr.Dataset, continuous: xr.Dataset | None) -> dict[str, np.ndarray]:
    """Band power of the preprocessed data: the continuous store, else the epochs."""
    if continuous is not None:
        data, sfreq = continuous["eeg"].values, float(continuous.attrs["sfreq"])
        n_fft = round(_WELCH_SECONDS * sfreq)
    else:
        data, sfreq = epochs["epochs"].values, float(epochs.attrs["sfreq"])
        n_fft = data.shape[-1]
    if data.shape[-1] == 0 or (data.ndim == 3 and data.shape[0] == 0):
        power = np.full((data.shape[-2], len(BANDS)), np.nan)
        return {"power": power, "n_freqs": np.zeros(len(BANDS), np.int64)}
    power, n_freqs = band_power(data, sfreq, n_fft)
    return {"power": power, "n_freqs": n_freqs}


def _before_signals(recording: EegRecording, channels: list[str]) -> tuple[np.ndarray, float, str]:
    """The recording's own samples of ``channels``, before any preprocessing.

    Returns the data (n_channels, n_times) or (n_epochs, n_channels, n_times), the
    sampling rate and the file read.
    """
    meg = recording.datatype == "meg"
    if recording.epoched:
        inst: Any = read_epochs_file(recording.eeg, drop_meg=meg)
    else:
        inst = read_raw_file(recording.eeg, drop_meg=meg)
    present = [c for c in channels if c in inst.ch_names]
    if not present:
        raise ValueError(
            f"{recording.eeg}: the preprocessed channels {channels[:5]} must be channels of "
            f"the recording, got channels {inst.ch_names[:5]} instead."
        )
    data = inst.get_data(picks=present)
    data = np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)  # dead (bad) channels
    full = np.zeros((*data.shape[:-2], len(channels), data.shape[-1]))
    for i, name in enumerate(channels):
        if name in present:
            full[..., i, :] = data[..., present.index(name), :]
    return full, float(inst.info["sfreq"]), str(recording.eeg)


def _spectra(
    recording: EegRecording,
    epochs: xr.Dataset,
    continuous: xr.Dataset | None,
) -> dict[str, Any]:
    """PSDs before and after preprocessing on the frequency grid of the latter."""
    channels = [str(c) for c in epochs["channel"].values]
    before, sfreq_before, _ = _before_signals(recording, channels)
    if continuous is not None:
        after, sfreq_after = continuous["eeg"].values, float(continuous.attrs["sfreq"])
    else:
        after, sfreq_after = epochs["epochs"].values, float(epochs.attrs["sfreq"])
    fmax = min(sfreq_before, sfreq_after) / 2.0
    window = _WELCH_SECONDS
    if recording.epoched or continuous is None:
        window = min(before.shape[-1] / sfreq_before, after.shape[-1] / sfreq_after)
    psd_after, freqs = psd_welch(
        after, sfreq_after, fmax, round(window * sfreq_after), "QC: spectra after preprocessing"
    )
    psd_before, freqs_before = psd_welch(
        before, sfreq_before, fmax, round(window * sfreq_before), "QC: spectra of the recording"
    )
    on_grid = np.stack([np.interp(freqs, freqs_before, row) for row in psd_before])
    return {"before": on_grid, "after": psd_after, "freqs": freqs}


def _bad_channels(attrs: Mapping[str, Any]) -> pd.DataFrame:
    """One row per bad channel: its reasons and whether it was interpolated."""
    reasons: dict[str, list[str]] = {}
    for reason, names in (attrs.get("bad_channel_reasons") or {}).items():
        for name in names:
            reasons.setdefault(str(name), []).append(str(reason).replace("_", " "))
    interpolated = set(attrs.get("interpolated_channels") or [])
    return pd.DataFrame(
        {
            "channel": list(reasons),
            "reason": ["; ".join(v) for v in reasons.values()],
            "interpolated": [name in interpolated for name in reasons],
        }
    )


def _events(epochs: xr.Dataset, continuous: xr.Dataset | None) -> pd.DataFrame:
    """Every selected event: onset, condition, kept, and the reason it was dropped."""
    kept = pd.DataFrame(
        {
            "event": epochs["event_index"].values.astype(int),
            "onset": epochs["onset"].values.astype(float),
            "condition": _text(epochs["condition"].values),
            "reason": "",
        }
    )
    dropped = pd.DataFrame(
        [
            {
                "event": int(r["epoch"]),
                "onset": float(r["onset"]),
                "condition": str(r.get("condition", "unknown")),
                "reason": str(r["reason"]),
            }
            for r in epochs.attrs.get("dropped_epochs") or []
        ],
        columns=["event", "onset", "condition", "reason"],
    )
    table = pd.concat([kept, dropped], ignore_index=True).sort_values("event", kind="stable")
    n_events = int(epochs.attrs.get("n_events", len(table)))
    if len(table) != n_events and continuous is not None:
        raise ValueError(
            f"The epochs store must account for each of its {n_events} events (kept or "
            f"dropped), got {len(table)} instead."
        )
    table["kept"] = table["reason"] == ""
    return table.reset_index(drop=True)


def _erp_conditions(events: pd.DataFrame) -> list[str]:
    """``"all"`` then the conditions with the most kept epochs (at most the cap); none
    without a kept epoch."""
    counts = events.loc[events["kept"], "condition"].value_counts(sort=False)
    if counts.empty:
        return []
    order = sorted(counts.index, key=lambda c: (-counts[c], c))[:MAX_ERP_CONDITIONS]
    return [ALL_CONDITIONS, *sorted(order)]


def _erps(epochs: xr.Dataset, names: list[str]) -> np.ndarray:
    """Mean epoch per condition, shape (n_conditions, n_channels, n_times), in V."""
    data = epochs["epochs"]
    condition = _text(epochs["condition"].values)
    out = np.empty((len(names), data.sizes["channel"], data.sizes["time"]), np.float32)
    for i, name in enumerate(names):
        pick = np.ones(len(condition), bool) if name == ALL_CONDITIONS else condition == name
        out[i] = data.values[pick].mean(axis=0, dtype=np.float64)
    return out


def eeg_qc_dataset(
    *,
    recording: EegRecording | str | os.PathLike,
    epochs_store: str | os.PathLike,
    continuous_store: str | os.PathLike | None = None,
) -> xr.Dataset:
    """Quality-control measures of one EEG recording.

    Parameters
    ----------
    recording : EegRecording | path-like
        The recording (or its data file), read again for the spectrum before
        preprocessing.
    epochs_store : path-like
        Its ``preprocess_eeg`` epochs store.
    continuous_store : path-like | None
        Its continuous store (``None`` for recordings that arrive as epochs).

    Returns
    -------
    qc : xarray.Dataset
        ``psd_before`` and ``psd_after`` (channel, frequency), V²/Hz, on the output
        channels; ``bad_reason`` and ``bad_interpolated`` (bad_channel); ``event_onset``,
        ``event_condition``, ``event_kept``, ``drop_reason`` (event); ``n_events`` and
        ``n_kept`` (condition); ``erp`` (erp_condition, channel, time), V, with
        ``erp_condition`` ``"all"`` first (no erp_condition without events);
        ``band_power`` (channel, band), V², of the preprocessed data (the continuous
        store, else the epochs; see :func:`band_power` and :data:`BANDS`), NaN for a band
        the spectrum does not resolve, with coordinates ``band_fmin``, ``band_fmax``
        and ``band_n_freqs``; ``ica_excluded`` (ica_component) when ICA ran.
        Attributes: ``sfreq``, ``filters``, ``reference``, ``montage``, ``ica``,
        ``entities``, ``source_file``, ``input``, ``event_source``.
    """
    if not isinstance(recording, EegRecording):
        recording = recording_from_path(recording)
    epochs = open_dataset(epochs_store)
    continuous = open_dataset(continuous_store) if continuous_store is not None else None
    try:
        spectra = _spectra(recording, epochs, continuous)
        events = _events(epochs, continuous)
        bads = _bad_channels(epochs.attrs)
        names = _erp_conditions(events)
        erp = _erps(epochs, names)
        bands = _band_power(epochs, continuous)
        ds = _assemble(epochs, spectra, events, bads, names, erp)
        ds = _with_band_power(ds, bands)
    finally:
        epochs.close()
        if continuous is not None:
            continuous.close()
    for name, var in ds.data_vars.items():
        values = var.values
        if name == "band_power":  # NaN marks a band the spectrum does not resolve
            values = values[:, ds["band_n_freqs"].values > 0]
        if var.dtype.kind == "f" and not np.isfinite(values).all():
            raise ValueError(
                f"QC of {recording.eeg}: `{name}` must be finite, got non-finite values "
                "instead (check the recording for NaN samples)."
            )
    return ds


def _assemble(
    epochs: xr.Dataset,
    spectra: Mapping[str, np.ndarray],
    events: pd.DataFrame,
    bads: pd.DataFrame,
    erp_names: list[str],
    erp: np.ndarray,
) -> xr.Dataset:
    """The QC dataset from its parts (see :func:`eeg_qc_dataset`)."""
    per_condition = events.groupby("condition", sort=True)["kept"].agg(["size", "sum"])
    psd = "V**2/Hz"
    channel_coords = {
        c: ("channel", epochs[c].values, epochs[c].attrs)
        for c in ("ch_type", "ch_x", "ch_y", "ch_z")
        if c in epochs.coords
    }
    ds = xr.Dataset(
        {
            "psd_before": described(
                spectra["before"].astype(np.float32),
                ("channel", "frequency"),
                "power spectral density of the recording as read",
                psd,
            ),
            "psd_after": described(
                spectra["after"].astype(np.float32),
                ("channel", "frequency"),
                "power spectral density after preprocessing",
                psd,
            ),
            "bad_reason": described(
                bads["reason"].to_numpy(dtype=str),
                ("bad_channel",),
                "why the channel was flagged bad",
                "text",
            ),
            "bad_interpolated": described(
                bads["interpolated"].to_numpy(dtype=bool),
                ("bad_channel",),
                "bad channel interpolated from its neighbours",
                "bool",
            ),
            "event_onset": described(
                events["onset"].to_numpy(float), ("event",), "event onset", "s"
            ),
            "event_condition": described(
                events["condition"].to_numpy(dtype=str), ("event",), "event condition", "text"
            ),
            "event_kept": described(
                events["kept"].to_numpy(bool), ("event",), "epoch kept after rejection", "bool"
            ),
            "drop_reason": described(
                events["reason"].to_numpy(dtype=str),
                ("event",),
                "why the epoch was dropped (empty: kept)",
                "text",
            ),
            "n_events": described(
                per_condition["size"].to_numpy(np.int64),
                ("condition",),
                "events per condition",
                "count",
            ),
            "n_kept": described(
                per_condition["sum"].to_numpy(np.int64),
                ("condition",),
                "epochs kept per condition",
                "count",
            ),
            "erp": described(
                erp,
                ("erp_condition", "channel", "time"),
                "evoked response (mean of the kept epochs)",
                "V",
            ),
        },
        coords={
            "channel": ("channel", _text(epochs["channel"].values)),
            **channel_coords,
            "frequency": ("frequency", spectra["freqs"], {"units": "Hz"}),
            "bad_channel": ("bad_channel", bads["channel"].to_numpy(dtype=str)),
            "event": ("event", events["event"].to_numpy(np.int64)),
            "condition": ("condition", per_condition.index.to_numpy(dtype=str)),
            "erp_condition": ("erp_condition", np.array(erp_names, dtype=str)),
            "time": ("time", epochs["time"].values, {"units": "s"}),
        },
    )
    ica = epochs.attrs.get("ica")
    if ica:
        excluded = np.zeros(int(ica["n_components"]), bool)
        excluded[list(ica["excluded"])] = True
        ds["ica_excluded"] = described(
            excluded, ("ica_component",), "ICA component removed as an artefact", "bool"
        )
        ds = ds.assign_coords(ica_component=np.arange(len(excluded)))
    keep = (
        "sfreq",
        "filters",
        "reference",
        "montage",
        "ica",
        "entities",
        "source_file",
        "input",
        "event_source",
        "bad_channels_method",
        "reject_method",
    )
    ds.attrs = {k: epochs.attrs.get(k) for k in keep}
    ds.attrs["bad_channels"] = bads["channel"].tolist()
    return ds


def _with_band_power(ds: xr.Dataset, bands: Mapping[str, np.ndarray]) -> xr.Dataset:
    """``ds`` with ``band_power`` (channel, band) and the band coordinates."""
    edges = np.array(list(BANDS.values()), dtype=float)
    ds = ds.assign_coords(
        band=("band", np.array(list(BANDS), dtype=str)),
        band_fmin=("band", edges[:, 0], {"units": "Hz"}),
        band_fmax=("band", edges[:, 1], {"units": "Hz"}),
        band_n_freqs=("band", bands["n_freqs"].astype(np.int64)),
    )
    ds["band_power"] = described(
        bands["power"].astype(np.float64),
        ("channel", "band"),
        "power in the frequency band after preprocessing (Welch spectrum summed over "
        "band_fmin <= f < band_fmax); NaN where the spectrum has no frequency in the band",
        "V**2",
    )
    return ds


# ------------------------------------------------------------------------- figures
def _info(qc: xr.Dataset, sfreq: float) -> mne.Info:
    """MNE info of the QC channels, with their positions when every one is known."""
    names = [str(c) for c in qc["channel"].values]
    types = (
        [str(t) for t in qc["ch_type"].values] if "ch_type" in qc.coords else ["eeg"] * len(names)
    )
    info = mne.create_info(names, sfreq, types)
    if all(c in qc.coords for c in ("ch_x", "ch_y", "ch_z")):
        pos = np.column_stack([qc[c].values for c in ("ch_x", "ch_y", "ch_z")]).astype(float)
        if np.isfinite(pos).all() and len(pos):
            montage = mne.channels.make_dig_montage(
                ch_pos=dict(zip(names, pos, strict=True)), coord_frame="head"
            )
            info.set_montage(montage, on_missing="ignore", verbose="error")
    return info


def _has_positions(info: mne.Info) -> bool:
    locs = np.array([ch["loc"][:3] for ch in info["chs"]])
    return bool(len(locs)) and bool(np.isfinite(locs).all() and (np.abs(locs).sum(1) > 0).all())


def _psd_figure(qc: xr.Dataset, info: mne.Info) -> Any:
    """Spectra before and after preprocessing (MNE's spectrum plot), in dB."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
    freqs = qc["frequency"].values
    spatial = _has_positions(info)
    for ax, name, title in zip(
        axes, ("psd_before", "psd_after"), ("as recorded", "after preprocessing"), strict=True
    ):
        spectrum = mne.time_frequency.SpectrumArray(
            qc[name].values.astype(float), info, freqs, verbose="error"
        )
        spectrum.plot(axes=ax, show=False, spatial_colors=spatial, average=False)
        ax.set_title(title)
    filters = qc.attrs.get("filters") or {}
    for ax in axes:
        for f in filters.get("notch") or []:
            ax.axvline(f, color="tab:red", lw=0.6, ls=":")
        for f in (filters.get("l_freq"), filters.get("h_freq")):
            if f is not None:
                ax.axvline(f, color="0.4", lw=0.6, ls="--")
    fig.suptitle(_title(qc, "power spectral density (dashes: filter edges; dots: notches)"))
    return fig


def _title(qc: xr.Dataset, what: str) -> str:
    source = Path(str(qc.attrs.get("source_file") or "")).name
    return f"{source}: {what}"


def _channels_figure(qc: xr.Dataset, info: mne.Info) -> Any:
    """Sensor layout with bad channels in red, and the reasons and ICA as text."""
    import matplotlib.pyplot as plt

    fig, (ax_sensors, ax_text) = plt.subplots(
        1, 2, figsize=(10, 4.5), layout="constrained", width_ratios=(1, 1.2)
    )
    bads = [str(c) for c in qc["bad_channel"].values]
    if _has_positions(info):
        shown = info.copy()
        shown["bads"] = [c for c in bads if c in shown.ch_names]
        mne.viz.plot_sensors(shown, axes=ax_sensors, show_names=True, show=False, kind="topomap")
    else:
        ax_sensors.text(0.5, 0.5, "no channel positions", ha="center", va="center")
        ax_sensors.set_axis_off()
    lines = [
        f"{len(qc['channel'])} channels kept, {len(bads)} flagged bad "
        f"(detection: {qc.attrs.get('bad_channels_method') or 'heuristic'})"
    ]
    for name, reason, interp in zip(
        bads, qc["bad_reason"].values, qc["bad_interpolated"].values, strict=True
    ):
        lines.append(f"  {name}: {reason} ({'interpolated' if interp else 'left out'})")
    ica = qc.attrs.get("ica")
    if ica:
        lines.append(
            f"ICA ({ica['algorithm']}, {ica['n_components']} components, labelled by "
            f"{ica['labelling']}): removed {list(ica['excluded']) or 'none'}"
        )
    else:
        lines.append("ICA: not run")
    lines.append(f"reference: {qc.attrs.get('reference')}")
    ax_text.text(0, 1, "\n".join(lines[:40]), va="top", family="monospace", fontsize=8)
    ax_text.set_axis_off()
    fig.suptitle(_title(qc, "channels (red: bad)"))
    return fig


def _drop_figure(qc: xr.Dataset) -> Any:
    """Epochs kept and dropped per condition, and the drop reasons."""
    import matplotlib.pyplot as plt

    fig, (ax_counts, ax_reasons) = plt.subplots(
        2, 1, figsize=(9, 6.5), layout="constrained", height_ratios=(1.2, 1)
    )
    conditions = [str(c) for c in qc["condition"].values]
    kept = qc["n_kept"].values
    dropped = qc["n_events"].values - kept
    y = np.arange(len(conditions))
    ax_counts.barh(y, kept, color="tab:blue", label="kept")
    ax_counts.barh(y, dropped, left=kept, color="tab:red", label="dropped")
    ax_counts.set_yticks(y, conditions if len(conditions) <= 30 else [""] * len(conditions))
    ax_counts.set_xlabel("epochs")
    ax_counts.legend(loc="lower right")
    ax_counts.set_title("epochs per condition")
    reasons = pd.Series(_text(qc["drop_reason"].values))
    counts = reasons[reasons != ""].map(lambda r: r if len(r) <= 60 else r[:57] + "...")
    counts = counts.value_counts()
    if len(counts):
        ax_reasons.barh(np.arange(len(counts)), counts.to_numpy(), color="tab:red")
        ax_reasons.set_yticks(np.arange(len(counts)), counts.index, fontsize=7)
        ax_reasons.set_xlabel("epochs dropped")
    else:
        ax_reasons.text(0.5, 0.5, "no epoch dropped", ha="center", va="center")
        ax_reasons.set_axis_off()
    total = int(qc["n_events"].sum())
    ax_reasons.set_title(f"drop log: {int(total - kept.sum())} of {total} epochs dropped")
    method = qc.attrs.get("reject_method") or "threshold"
    fig.suptitle(_title(qc, f"epoch rejection (method: {method})"))
    return fig


def _band_labels(qc: xr.Dataset) -> list[str]:
    """``"alpha\n8-13 Hz"`` for each band."""
    return [
        f"{b}\n{lo:g}-{hi:g} Hz"
        for b, lo, hi in zip(
            qc["band"].values, qc["band_fmin"].values, qc["band_fmax"].values, strict=True
        )
    ]


def _band_topomaps(qc: xr.Dataset, info: mne.Info) -> Any:
    """One scalp map of band power (µV²) per band; unresolved bands say so."""
    import matplotlib.pyplot as plt

    power = qc["band_power"].values * 1e12
    labels = _band_labels(qc)
    fig, axes = plt.subplots(1, len(labels), figsize=(2.6 * len(labels), 3.2), layout="constrained")
    for i, ax in enumerate(np.atleast_1d(axes)):
        ax.set_title(labels[i], fontsize=9)
        if not np.isfinite(power[:, i]).all():
            ax.text(0.5, 0.5, "not resolved", ha="center", va="center")
            ax.set_axis_off()
            continue
        image, _ = mne.viz.plot_topomap(power[:, i], info, axes=ax, show=False, cmap="viridis")
        fig.colorbar(image, ax=ax, shrink=0.7, label="µV²")
    return fig


def _band_bars(qc: xr.Dataset) -> Any:
    """Band power (µV², log scale) of every channel as bars, the channel median as dots."""
    import matplotlib.pyplot as plt

    power = qc["band_power"].values * 1e12
    labels = _band_labels(qc)
    resolved = np.isfinite(power).all(axis=0) & (power.shape[0] > 0)
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    x = np.arange(len(labels))
    width = 0.8 / max(power.shape[0], 1)
    for c, row in enumerate(power):
        ax.bar(x[resolved] - 0.4 + (c + 0.5) * width, row[resolved], width, color="tab:blue")
    if resolved.any():
        median = np.median(power[:, resolved], axis=0)
        ax.plot(x[resolved], median, "o", color="k", label="median over channels")
        ax.set_yscale("log")
        ax.legend(loc="upper right")
    for i in np.flatnonzero(~resolved):
        ax.text(x[i], 0.5, "not\nresolved", ha="center", transform=ax.get_xaxis_transform())
    ax.set_xticks(x, labels)
    ax.set_ylabel("band power (µV²)")
    return fig


def _band_figure(qc: xr.Dataset, info: mne.Info) -> Any:
    """Band power per channel: scalp maps when positions are known, else bar charts."""
    if _has_positions(info) and len(info.ch_names) > 2:
        fig = _band_topomaps(qc, info)
    else:
        fig = _band_bars(qc)
    fig.suptitle(_title(qc, "band power per channel after preprocessing"))
    return fig


def _has_events(qc: xr.Dataset) -> bool:
    """Whether the recording kept an epoch (event-free recordings keep none)."""
    return qc.sizes.get("erp_condition", 0) > 0


def _evokeds(qc: xr.Dataset, info: mne.Info) -> dict[str, mne.EvokedArray]:
    tmin = float(qc["time"].values[0])
    counts = dict(zip(_text(qc["condition"].values), qc["n_kept"].values, strict=True))
    out = {}
    for name in _text(qc["erp_condition"].values):
        nave = int(sum(counts.values()) if name == ALL_CONDITIONS else counts.get(name, 1))
        out[name] = mne.EvokedArray(
            qc["erp"].sel(erp_condition=name).values.astype(float),
            info,
            tmin=tmin,
            nave=max(nave, 1),
            comment=name,
            verbose="error",
        )
    return out


def eeg_qc_figures(
    qc: xr.Dataset, *, out_dir: str | os.PathLike, prefix: str, dpi: int = 100
) -> list[Path]:
    """Draw the QC figures of one recording.

    Parameters
    ----------
    qc : xarray.Dataset
        From :func:`eeg_qc_dataset`.
    out_dir : path-like
        Folder to write into (created).
    prefix : str
        File name prefix, the recording's entity key.
    dpi : int
        Resolution.

    Returns
    -------
    paths : list of Path
        ``<prefix>_qc-<kind>.png`` for each kind of :data:`EEG_QC_FIGURES`, in order;
        without those of :data:`EVENT_FIGURES` for a recording that kept no epoch.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    with mne.utils.use_log_level("error"):
        return _draw(qc, Path(out_dir), prefix, dpi, plt)


def _draw(qc: xr.Dataset, out: Path, prefix: str, dpi: int, plt: Any) -> list[Path]:
    """Body of :func:`eeg_qc_figures` (MNE's log silenced)."""
    out.mkdir(parents=True, exist_ok=True)
    sfreq = 1.0 / float(np.diff(qc["time"].values[:2])[0]) if qc.sizes["time"] > 1 else 1.0
    info = _info(qc, sfreq)
    figures: dict[str, Any] = {
        "psd": _psd_figure(qc, info),
        "band-power": _band_figure(qc, info),
        "channels": _channels_figure(qc, info),
    }
    if _has_events(qc):
        figures.update(_event_figures(qc, info))
    paths = []
    for kind in EEG_QC_FIGURES:
        if kind not in figures:
            continue
        path = out / f"{prefix}_qc-{kind}.png"
        figures[kind].savefig(path, dpi=dpi)
        plt.close(figures[kind])
        paths.append(path)
    return paths


def _event_figures(qc: xr.Dataset, info: mne.Info) -> dict[str, Any]:
    """The drop log and evoked-response figures of a recording with kept epochs."""
    evokeds = _evokeds(qc, info)
    positions = _has_positions(info)
    figures: dict[str, Any] = {"drop-log": _drop_figure(qc)}
    everything = evokeds[ALL_CONDITIONS]
    if positions and len(info.ch_names) > 2:
        fig = everything.plot_joint(
            show=False, title=_title(qc, "evoked response, all kept epochs")
        )
    else:
        fig = everything.plot(show=False, spatial_colors=False, gfp=True)
        fig.suptitle(_title(qc, "evoked response, all kept epochs"))
    figures["erp"] = fig
    conditions = {k: v for k, v in evokeds.items() if k != ALL_CONDITIONS}
    fig = mne.viz.plot_compare_evokeds(
        conditions or {ALL_CONDITIONS: everything},
        combine="gfp",
        show=False,
        legend="upper right" if len(conditions) <= 12 else False,
        show_sensors=False,
        title=_title(qc, "global field power per condition"),
    )
    figures["erp-conditions"] = fig[0] if isinstance(fig, list) else fig
    return figures

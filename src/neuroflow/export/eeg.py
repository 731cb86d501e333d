"""EEG stores as MNE files: epochs (``-epo.fif``) with their evoked responses
(``-ave.fif``), and channel x latency scores as an evoked file of r and a TSV.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset
from neuroflow.export.common import _claim, _label, _origin, _sidecar, _write_json
from neuroflow.export.tables import _described, _write_table, results_table
from neuroflow.names import file_form

__all__ = [
    "export_eeg_scores",
    "export_epochs",
    "filter_band",
]


def _epochs_plan(store: Path, ds: xr.Dataset, output: Path) -> tuple[Path, Path]:
    """The ``-epo.fif`` and ``-ave.fif`` files of an epochs store.

    Raises
    ------
    ValueError
        When the store has no ``epochs`` (epoch, channel, time).
    """
    if "epochs" not in ds or ds["epochs"].dims != ("epoch", "channel", "time"):
        raise ValueError(
            f"{store}: an EEG epochs store must have `epochs` (epoch, channel, time), got "
            f"{ds['epochs'].dims if 'epochs' in ds else 'no such variable'} instead."
        )
    entities = dict(ds.attrs.get("entities") or {})
    subject = entities.get("subject") or "unknown"
    stem = "_".join(
        f"{key}-{_label(entities[name])}"
        for key, name in (("sub", "subject"), ("ses", "session"), ("task", "task"), ("run", "run"))
        if entities.get(name) not in (None, "")
    )
    folder = output / f"sub-{_label(subject)}" / "eeg"
    return folder / f"{stem}_proc-clean_epo.fif", folder / f"{stem}_proc-clean_ave.fif"


def filter_band(attrs: Mapping[str, Any], sfreq: float) -> tuple[float, float]:
    """The pass band the ``preprocess_eeg`` stage applied, as MNE's ``info`` records it.

    Parameters
    ----------
    attrs : dict
        Attributes of an epochs store: ``filters`` (``l_freq``, ``h_freq`` in Hz, None
        when not applied), else the ``l_freq``/``h_freq`` of the provenance's config.
    sfreq : float
        Sampling frequency of the stored data (Hz).

    Returns
    -------
    highpass, lowpass : float
        In Hz; 0 and the Nyquist frequency where no filter is known to be applied.
    """
    filters = attrs.get("filters")
    if not isinstance(filters, Mapping):
        filters = dict((attrs.get(PROVENANCE_KEY) or {}).get("config") or {})
    nyquist = sfreq / 2
    l_freq, h_freq = filters.get("l_freq"), filters.get("h_freq")
    highpass = float(l_freq) if l_freq is not None else 0.0
    lowpass = min(float(h_freq), nyquist) if h_freq is not None else nyquist
    return highpass, lowpass


def _info(ds: xr.Dataset, sfreq: float) -> Any:
    """An ``mne.Info`` of a store's ``channel`` (types, bad channels, positions)."""
    import mne

    channels = [str(c) for c in ds["channel"].values]
    types = [str(t) for t in ds["ch_type"].values] if "ch_type" in ds.coords else "eeg"
    info = mne.create_info(channels, sfreq, ch_types=types)
    info["bads"] = [c for c in ds.attrs.get("bad_channels") or [] if c in channels]
    if all(f"ch_{a}" in ds.coords for a in "xyz"):
        pos = np.stack([np.asarray(ds[f"ch_{a}"].values, float) for a in "xyz"], axis=1)
        if np.isfinite(pos).all():
            montage = mne.channels.make_dig_montage(
                dict(zip(channels, pos, strict=True)), coord_frame="head"
            )
            info.set_montage(montage, on_missing="ignore")
    return info


def _epochs_array(ds: xr.Dataset, store: Path) -> Any:
    """An ``mne.EpochsArray`` of an epochs store (data in volts, times in seconds)."""
    import mne

    info = _info(ds, float(ds.attrs["sfreq"]))
    highpass, lowpass = filter_band(ds.attrs, info["sfreq"])
    # MNE sets the band through its filters only; the store's data were filtered already
    with info._unlock():
        info["highpass"], info["lowpass"] = highpass, lowpass
    conditions = (
        [str(c) for c in ds["condition"].values]
        if "condition" in ds.coords
        else ["epoch"] * ds.sizes["epoch"]
    )
    event_id = {name: i + 1 for i, name in enumerate(dict.fromkeys(conditions))}
    sfreq = float(ds.attrs["sfreq"])
    times = np.asarray(ds["time"].values, float)
    n = ds.sizes["epoch"]
    onsets = np.asarray(ds["onset"].values, float) if "onset" in ds.coords else None
    samples = None if onsets is None else np.round(onsets * sfreq).astype(int)
    if samples is None or not (np.diff(samples) > 0).all():
        # epochs of several runs: one slot per epoch keeps MNE's events unique
        samples = np.arange(n) * (times.size + 1)
    events = np.stack([samples, np.zeros(n, int), [event_id[c] for c in conditions]], axis=1)
    metadata = pd.DataFrame(
        {
            name: [str(v) if ds[name].dtype.kind in "OUT" else v for v in ds[name].values]
            for name in ("condition", "stimulus", "onset", "event_index")
            if name in ds.coords and ds[name].dims == ("epoch",)
        }
    )
    data = np.asarray(ds["epochs"].values, dtype=np.float64)
    return mne.EpochsArray(
        data,
        info,
        events=events,
        tmin=float(times[0]),
        event_id=event_id,
        metadata=metadata if len(metadata.columns) else None,
        verbose="error",
    )


def export_epochs(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write an EEG epochs store as MNE ``-epo.fif`` and its evoked responses as ``-ave.fif``.

    Parameters
    ----------
    store : path-like
        Store of the ``preprocess_eeg`` stage: ``epochs`` (epoch, channel, time) in
        volts, coordinates ``channel``, ``time`` (s) and per-epoch ``condition``,
        ``onset`` (s), the attributes ``sfreq`` and ``entities``.
    output : path-like
        Root of the derivatives folder; files go to ``sub-<s>/eeg/``.

    Returns
    -------
    paths : list of Path
        The epochs file, then the evoked file (one ``mne.Evoked`` per condition).
    """
    import mne

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    epo, ave = (_claim(path, claimed, store) for path in _epochs_plan(store, ds, output))
    subject = dict(ds.attrs.get("entities") or {}).get("subject") or "unknown"
    epochs = _epochs_array(ds, store)
    epo.parent.mkdir(parents=True, exist_ok=True)
    epochs.save(epo, overwrite=True, verbose="error")

    evokeds = [epochs[name].average() for name in epochs.event_id]
    for evoked, name in zip(evokeds, epochs.event_id, strict=True):
        evoked.comment = name
    mne.write_evokeds(ave, evokeds, overwrite=True, verbose="error")
    about = {
        **_origin(store, ds),
        "Subject": subject,
        "SamplingFrequency": float(ds.attrs["sfreq"]),
    }
    _write_json(_sidecar(epo), {**about, "Description": "cleaned epochs (volts)"})
    _write_json(
        _sidecar(ave),
        {
            **about,
            "Description": "evoked response per condition",
            "Conditions": list(epochs.event_id),
        },
    )
    return [epo, ave]


def _eeg_scores_plan(store: Path, ds: xr.Dataset, output: Path) -> list[Path] | None:
    """The ``-ave.fif`` (when the latencies are evenly spaced) and TSV of an EEG score store.

    None when the store holds no ``r`` on (channel, latency): not an EEG score store.
    """
    if "r" not in ds or set(ds["r"].dims) != {"channel", "latency"}:
        return None
    subject = _label(ds.attrs.get("subject") or "unknown")
    stem = f"sub-{subject}_model-{file_form(ds.attrs.get('model') or store.stem)}"
    if ds.attrs.get("layer") not in (None, ""):
        stem += f"_layer-{file_form(ds.attrs['layer'])}"
    folder = output / f"sub-{subject}" / "eeg"
    tsv = folder / f"{stem}_scores.tsv"
    return [tsv] if _latency_sfreq(ds) is None else [folder / f"{stem}_stat-r_ave.fif", tsv]


def _latency_sfreq(ds: xr.Dataset) -> float | None:
    """Sampling frequency of evenly spaced latencies (s), None otherwise."""
    latency = np.asarray(ds["latency"].values, dtype=np.float64)
    step = np.diff(latency)
    if step.size == 0 or step[0] <= 0 or not np.allclose(step, step[0], rtol=1e-3, atol=0):
        return None
    return float(1.0 / step[0])


def export_eeg_scores(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write an EEG score store (channel x latency) as an MNE evoked file and a TSV.

    Parameters
    ----------
    store : path-like
        Store of the ``eeg_evaluation`` stage: ``r`` (and the other scores) on
        (channel, latency), latency in seconds, attributes ``subject`` and ``model``.
    output : path-like
        Root of the derivatives folder; files go to ``sub-<s>/eeg/``.

    Returns
    -------
    paths : list of Path
        ``..._stat-r_ave.fif``: one ``mne.Evoked`` of ``r`` (channel x latency; MNE
        reads the values as volts, they are correlations) whose comment names the
        model, written when the latencies are evenly spaced; then
        ``..._scores.tsv``: every score per channel and latency (long format).
    """
    import mne

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    planned = _eeg_scores_plan(store, ds, output)
    if planned is None:
        raise ValueError(
            f"{store}: an EEG score store must have `r` on (channel, latency), got "
            f"{ds['r'].dims if 'r' in ds else 'no such variable'} instead."
        )
    for path in planned:
        _claim(path, claimed, store)
    planned[0].parent.mkdir(parents=True, exist_ok=True)
    name = str(ds.attrs.get("model") or store.stem)
    if ds.attrs.get("layer") not in (None, ""):
        name += f" ({ds.attrs['layer']})"
    about = {**_origin(store, ds), "Subject": ds.attrs.get("subject"), "Model": name}
    table, skipped = results_table(ds, ("channel", "latency"))
    tsv = _write_table(planned[-1], table)
    columns = {
        "variable": "score (see Variables)",
        "channel": "EEG channel",
        "latency": "latency from stimulus onset (s)",
        "value": "the score's value",
    }
    _write_json(
        _sidecar(tsv),
        {
            **about,
            "Columns": columns,
            "Variables": _described(ds, table["variable"].unique()),
            "SkippedVariables": skipped,
        },
    )
    sfreq = _latency_sfreq(ds)
    if sfreq is None:
        return [tsv]
    r = ds["r"].transpose("channel", "latency")
    evoked = mne.EvokedArray(
        np.asarray(r.values, dtype=np.float64),
        _info(ds, sfreq),
        tmin=float(ds["latency"].values[0]),
        comment=name,
        nave=1,
        verbose="error",
    )
    evoked.save(planned[0], overwrite=True, verbose="error")
    _write_json(
        _sidecar(planned[0]),
        {**about, "Description": "encoding r per channel and latency (unitless, not volts)"},
    )
    return [planned[0], tsv]

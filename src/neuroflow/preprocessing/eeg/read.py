"""Load one EEG recording with MNE and apply its BIDS sidecars.

``mne_bids.read_raw_bids`` only warns when sidecars and data disagree and needs a full
BIDS tree; this reader reads the raw file with MNE's own readers and turns every such
disagreement into an error that names the file and the field.
"""

from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path

import mne
import numpy as np

from neuroflow.io.records import EegRecording

from .sidecars import merge_sidecars, read_channels_tsv, read_electrodes_tsv

__all__ = ["apply_channels_tsv", "apply_montage", "check_sidecar", "read_raw_file"]

logger = logging.getLogger(__name__)

_READERS = {
    ".vhdr": mne.io.read_raw_brainvision,
    ".edf": mne.io.read_raw_edf,
    ".bdf": mne.io.read_raw_bdf,
    ".set": mne.io.read_raw_eeglab,
    ".fif": mne.io.read_raw_fif,
}
_BRAINVISION_BYTES = {"INT_16": 2, "UINT_16": 2, "INT_32": 4, "IEEE_FLOAT_32": 4}


def _check_brainvision_size(vhdr: Path, n_channels: int) -> None:
    """Raise when a BrainVision binary file does not hold whole samples."""
    text = vhdr.read_text(errors="replace")
    data_file = re.search(r"^DataFile=(.+)$", text, re.MULTILINE)
    fmt = re.search(r"^BinaryFormat=(\S+)", text, re.MULTILINE)
    if data_file is None or fmt is None or fmt.group(1) not in _BRAINVISION_BYTES:
        return
    binary = vhdr.parent / data_file.group(1).strip()
    frame = n_channels * _BRAINVISION_BYTES[fmt.group(1)]
    size = binary.stat().st_size
    if size == 0 or size % frame:
        raise ValueError(
            f"{binary} is truncated: its {size} bytes are not a whole number of "
            f"{n_channels}-channel samples of {fmt.group(1)} declared in {vhdr}. "
            "Copy the recording again from its source."
        )


def read_raw_file(path: str | Path) -> mne.io.BaseRaw:
    """Read a raw EEG file into memory with MNE.

    Parameters
    ----------
    path : path-like
        ``.vhdr``, ``.edf``, ``.bdf``, ``.set`` or ``.fif`` file.

    Returns
    -------
    raw : mne.io.BaseRaw
        Preloaded recording.

    Raises
    ------
    ValueError
        When the file cannot be parsed or is shorter than its header says.
    """
    path = Path(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(
            f"`eeg` must be one of {sorted(_READERS)} files, got {path.name!r} instead."
        )
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            raw = reader(path, preload=True, verbose="warning")
        except Exception as err:  # MNE raises many exception types on corrupt input
            raise ValueError(
                f"{path} could not be read as {path.suffix} EEG ({type(err).__name__}: {err}). "
                "Check that the file and its companion files are complete and uncorrupted."
            ) from err
    for warning in caught:
        message = str(warning.message)
        if "does not match the file size" in message:
            raise ValueError(
                f"{path} is truncated: {message} Copy the recording again from its source."
            )
        logger.warning("Reading %s: %s", path, message)
    if path.suffix.lower() == ".vhdr":
        _check_brainvision_size(path, len(raw.ch_names))
    if raw.n_times == 0:
        raise ValueError(f"{path} holds no samples.")
    return raw


def check_sidecar(raw: mne.io.BaseRaw, recording: EegRecording) -> dict:
    """Check the ``_eeg.json`` sidecar against the data.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        The recording as read from ``recording.eeg``.
    recording : EegRecording
        Its files.

    Returns
    -------
    sidecar : dict
        The merged sidecar.
    """
    sidecar = merge_sidecars(recording.sidecars)
    where = recording.sidecars[-1] if recording.sidecars else None
    sfreq = sidecar.get("SamplingFrequency")
    if sfreq is not None and not np.isclose(float(sfreq), raw.info["sfreq"], rtol=1e-6):
        raise ValueError(
            f"{where} field 'SamplingFrequency' says {sfreq} Hz but {recording.eeg} is sampled "
            f"at {raw.info['sfreq']} Hz. Correct the sidecar."
        )
    duration = sidecar.get("RecordingDuration")
    data_duration = raw.n_times / raw.info["sfreq"]
    if duration not in (None, "n/a") and float(duration) - data_duration > 1.5 / raw.info["sfreq"]:
        raise ValueError(
            f"{recording.eeg} holds {data_duration:.3f} s of data but {where} field "
            f"'RecordingDuration' says {float(duration):.3f} s: the data file is truncated. "
            "Copy the recording again from its source."
        )
    line = sidecar.get("PowerLineFrequency")
    if line not in (None, "n/a") and not (
        isinstance(line, int | float) and not isinstance(line, bool) and line > 0
    ):
        raise ValueError(
            f"{where} field 'PowerLineFrequency' must be a positive number or 'n/a', "
            f"got {line!r} instead."
        )
    return sidecar


def apply_channels_tsv(
    raw: mne.io.BaseRaw, channels_tsv: Path, *, eeg_file: Path, use_status: bool
) -> list[str]:
    """Set channel types (and bad channels) from ``_channels.tsv``.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        Modified in place.
    channels_tsv : Path
        The file.
    eeg_file : Path
        Data file, for error messages.
    use_status : bool
        Whether to mark channels with ``status`` ``bad`` as bad.

    Returns
    -------
    bads : list of str
        Channels marked bad by the file.
    """
    table = read_channels_tsv(channels_tsv)
    missing = [name for name in table["name"] if name not in raw.ch_names]
    if missing:
        raise ValueError(
            f"{channels_tsv} field 'name' lists channel(s) absent from {eeg_file}: "
            f"{missing}. Make _channels.tsv match the data file's channels."
        )
    types = {n: t for n, t in zip(table["name"], table["mne_type"], strict=True) if t}
    changed = {n: t for n, t in types.items() if raw.get_channel_types([n])[0] != t}
    if changed:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw.set_channel_types(changed, on_unit_change="ignore", verbose="error")
    bads = table.loc[table["status"] == "bad", "name"].tolist() if use_status else []
    raw.info["bads"] = sorted(set(raw.info["bads"]) | set(bads), key=raw.ch_names.index)
    return bads


def apply_montage(
    raw: mne.io.BaseRaw, *, electrodes_tsv: Path | None, template: str | None
) -> str | None:
    """Set electrode positions from ``_electrodes.tsv`` or a standard montage.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        Modified in place.
    electrodes_tsv : Path | None
        Positions file; takes precedence over ``template``.
    template : str | None
        Name accepted by :func:`mne.channels.make_standard_montage`.

    Returns
    -------
    source : str | None
        Where the positions came from, ``None`` when none were set.
    """
    if electrodes_tsv is not None:
        positions = read_electrodes_tsv(electrodes_tsv)
        positions = {n: p for n, p in positions.items() if n in raw.ch_names}
        if not positions:
            raise ValueError(
                f"{electrodes_tsv} field 'name' matches none of the channels of the data "
                f"({raw.ch_names[:5]}...). Make _electrodes.tsv match the data's channels."
            )
        montage = mne.channels.make_dig_montage(ch_pos=positions, coord_frame="head")
        raw.set_montage(montage, on_missing="ignore", verbose="error")
        return str(electrodes_tsv)
    if template is not None:
        try:
            montage = mne.channels.make_standard_montage(template)
        except ValueError as err:
            raise ValueError(
                f"`eeg_template_montage` must be one of "
                f"{mne.channels.get_builtin_montages()}, got {template!r} instead."
            ) from err
        raw.set_montage(montage, on_missing="ignore", match_case=False, verbose="error")
        return template
    return None

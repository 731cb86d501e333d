"""Load one EEG recording with MNE and apply its BIDS sidecars.

``mne_bids.read_raw_bids`` only warns when sidecars and data disagree and needs a full
BIDS tree; this reader reads the raw file with MNE's own readers and turns every such
disagreement into an error that names the file and the field.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mne
import numpy as np

from neuroflow.io.records import EegRecording

from .sidecars import MEG_SENSOR_TYPES, merge_sidecars, read_channels_tsv, read_electrodes_tsv

__all__ = [
    "MEG_TYPES",
    "apply_channels_tsv",
    "apply_montage",
    "check_finite",
    "check_sidecar",
    "read_epochs_file",
    "read_epochs_window",
    "read_raw_file",
]

logger = logging.getLogger(__name__)

_READERS = {
    ".vhdr": mne.io.read_raw_brainvision,
    ".edf": mne.io.read_raw_edf,
    ".bdf": mne.io.read_raw_bdf,
    ".set": mne.io.read_raw_eeglab,
    ".fif": mne.io.read_raw_fif,
}
_EPOCHS_READERS = {".fif": mne.read_epochs, ".set": mne.read_epochs_eeglab}
_BRAINVISION_BYTES = {"INT_16": 2, "UINT_16": 2, "INT_32": 4, "IEEE_FLOAT_32": 4}
#: MNE channel types of MEG sensors, dropped from MEG + EEG recordings right after reading.
MEG_TYPES = ("mag", "grad", "ref_meg")


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


def _type_counts(types: Sequence[str]) -> str:
    """``"grad (4), mag (2), stim (1)"``."""
    return ", ".join(f"{t} ({list(types).count(t)})" for t in sorted(set(types))) or "none"


def _eeg_of_meg(inst: Any, path: Path) -> None:
    """Drop the MEG sensors of a MEG + EEG recording in place; raise when no EEG is left."""
    types = inst.get_channel_types()
    if "eeg" not in types:
        raise ValueError(
            f"{path} must hold EEG channels, got only channel types {_type_counts(types)} "
            "instead. neuroflow analyses the EEG channels of MEG recordings; set "
            "`dataset.eeg_from_meg: false` to leave MEG recordings out."
        )
    meg = [n for n, t in zip(inst.ch_names, types, strict=True) if t in MEG_TYPES]
    if meg:
        inst.drop_channels(meg)
        logger.info("%s: dropped %d MEG channels, kept %d.", path, len(meg), len(inst.ch_names))


def _read(path: Path, reader: Callable[..., Any], what: str, **kwargs: Any) -> tuple[Any, list]:
    """Call an MNE reader, turning its failures into a ValueError naming the file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            inst = reader(path, verbose="warning", **kwargs)
        except Exception as err:  # MNE raises many exception types on corrupt input
            raise ValueError(
                f"{path} could not be read as {what} ({type(err).__name__}: {err}). "
                "Check that the file and its companion files are complete and uncorrupted."
            ) from err
    return inst, caught


def read_raw_file(path: str | Path, *, drop_meg: bool = False) -> mne.io.BaseRaw:
    """Read a raw EEG file into memory with MNE.

    Parameters
    ----------
    path : path-like
        ``.vhdr``, ``.edf``, ``.bdf``, ``.set`` or ``.fif`` file.
    drop_meg : bool
        Drop the MEG sensors (``mag``, ``grad``, ``ref_meg``) before the data are loaded,
        for the ``_meg.fif`` of a MEG + EEG recording; EOG, ECG and stim channels stay.

    Returns
    -------
    raw : mne.io.BaseRaw
        Preloaded recording.

    Raises
    ------
    ValueError
        When the file cannot be parsed or is shorter than its header says, or when
        ``drop_meg`` and the file has no EEG channel.
    """
    path = Path(path)
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(
            f"`eeg` must be one of {sorted(_READERS)} files, got {path.name!r} instead."
        )
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    raw, caught = _read(path, reader, f"{path.suffix} EEG", preload=not drop_meg)
    if drop_meg:
        _eeg_of_meg(raw, path)
        with warnings.catch_warnings(record=True) as loading:
            warnings.simplefilter("always")
            raw.load_data(verbose="warning")
        caught.extend(loading)
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


def read_epochs_file(path: str | Path, *, drop_meg: bool = False) -> mne.BaseEpochs:
    """Read an epochs file (MNE ``_epo.fif`` or epoched EEGLAB ``.set``) into memory.

    Projectors stored with the epochs are not applied (the configured reference is set
    later); the bookkeeping of earlier drops is reset so that epoch ``i`` of the result
    is event ``i``.

    Parameters
    ----------
    path : path-like
        ``.fif`` or ``.set`` file.
    drop_meg : bool
        Drop the MEG sensors, as in :func:`read_raw_file`.

    Returns
    -------
    epochs : mne.BaseEpochs
        Preloaded epochs, shape (n_epochs, n_channels, n_times).
    """
    path = Path(path)
    reader = _EPOCHS_READERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(
            f"`eeg` of epoched input must be one of {sorted(_EPOCHS_READERS)} files, got "
            f"{path.name!r} instead."
        )
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    kwargs = {"preload": True, "proj": False} if path.suffix.lower() == ".fif" else {}
    epochs, caught = _read(path, reader, f"{path.suffix} epochs", **kwargs)
    for warning in caught:
        logger.warning("Reading %s: %s", path, warning.message)
    if drop_meg:
        _eeg_of_meg(epochs, path)
    if len(epochs) == 0 or len(epochs.times) == 0:
        raise ValueError(f"{path} holds no epochs.")
    epochs.selection = np.arange(len(epochs))
    epochs.drop_log = tuple(() for _ in range(len(epochs)))
    return epochs


def _eeglab_fields(path: Path, names: Sequence[str]) -> dict[str, float]:
    """Scalar fields of an EEGLAB ``.set`` (top level or in its ``EEG`` structure).

    Only the named fields are read (and the ``EEG`` structure of older files, which
    holds them); MATLAB v7.3 files are read through h5py.
    """
    import h5py
    import scipy.io

    found: dict[str, float] = {}
    if h5py.is_hdf5(path):
        with h5py.File(path, "r") as f:
            for where in (f, f.get("EEG")):
                if isinstance(where, h5py.Group):
                    for name in names:
                        if name in where and name not in found:
                            found[name] = float(np.asarray(where[name]).ravel()[0])
        return found
    content = scipy.io.loadmat(
        path,
        variable_names=[*names, "EEG"],
        squeeze_me=True,
        struct_as_record=False,
        verify_compressed_data_integrity=False,
    )
    eeg = content.get("EEG")
    eeg = getattr(eeg, "EEG", eeg)  # some files nest the structure once more
    for name in names:
        value = content.get(name, getattr(eeg, name, None))
        if value is not None and np.size(value):
            found[name] = float(np.asarray(value).ravel()[0])
    return found


def read_epochs_window(path: str | Path) -> tuple[float, float, float]:
    """The stored window of an epochs file, from its header only (no data loaded).

    Parameters
    ----------
    path : path-like
        MNE ``_epo.fif`` (read with ``preload=False``) or epoched EEGLAB ``.set`` (only
        the fields ``xmin``, ``xmax``, ``pnts`` and ``srate`` are read).

    Returns
    -------
    tmin, tmax : float
        First and last sample time (s) of every epoch.
    sfreq : float
        Sampling rate (Hz).
    """
    path = Path(path)
    if path.suffix.lower() not in _EPOCHS_READERS:
        raise ValueError(
            f"`eeg` of epoched input must be one of {sorted(_EPOCHS_READERS)} files, got "
            f"{path.name!r} instead."
        )
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    if path.suffix.lower() == ".fif":
        epochs, _ = _read(path, mne.read_epochs, ".fif epochs", preload=False, proj=False)
        return float(epochs.tmin), float(epochs.tmax), float(epochs.info["sfreq"])
    try:
        fields = _eeglab_fields(path, ("xmin", "xmax", "pnts", "srate"))
    except Exception as err:  # scipy and h5py raise many exception types on corrupt input
        raise ValueError(
            f"{path} could not be read as .set epochs ({type(err).__name__}: {err})."
        ) from err
    missing = [f for f in ("xmin", "srate") if f not in fields]
    if missing or ("pnts" not in fields and "xmax" not in fields):
        raise ValueError(
            f"{path} must hold the EEGLAB fields 'xmin', 'srate' and 'pnts' (or 'xmax'), got "
            f"{sorted(fields)} instead."
        )
    tmin, sfreq = fields["xmin"], fields["srate"]
    # MNE's reader times the samples from xmin at 1 / srate, as here.
    tmax = tmin + (fields["pnts"] - 1) / sfreq if "pnts" in fields else fields["xmax"]
    return tmin, float(tmax), sfreq


def check_finite(inst: mne.io.BaseRaw | mne.BaseEpochs, names: Sequence[str], path: Path) -> None:
    """Raise when a channel holds NaN or infinite samples.

    Parameters
    ----------
    inst : mne.io.BaseRaw | mne.BaseEpochs
        Preloaded data.
    names : sequence of str
        Channels to check (those the stage keeps).
    path : Path
        Data file, for the message.
    """
    counts = {}
    for name in names:
        data = inst.get_data(picks=[name])  # one channel at a time bounds the copy
        finite = np.isfinite(data)
        if not finite.all():
            counts[name] = (int(np.isnan(data).sum()), int((~finite).sum()))
    if counts:
        n_nan = sum(c[0] for c in counts.values())
        n_inf = sum(c[1] for c in counts.values()) - n_nan
        got = f"{n_nan} NaN" + (f" and {n_inf} infinite" if n_inf else "")
        detail = ", ".join(f"{n} ({c[1]})" for n, c in counts.items())
        raise ValueError(
            f"Samples of {path} must be finite, got {got} samples in channel(s) {detail} "
            "instead. Mark the channel(s) 'bad' in _channels.tsv or list them in "
            "`drop_channels`."
        )


def check_sidecar(inst: mne.io.BaseRaw | mne.BaseEpochs, recording: EegRecording) -> dict:
    """Check the ``_eeg.json`` (or ``_meg.json``) sidecar against the data.

    ``SamplingFrequency`` must match the data, ``RecordingDuration`` (continuous data
    only) must not exceed it and ``PowerLineFrequency`` must be a positive number or
    ``n/a``; other fields (``EEGChannelCount`` and the MEG fields of ``_meg.json``) are
    not required.

    Parameters
    ----------
    inst : mne.io.BaseRaw | mne.BaseEpochs
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
    if sfreq not in (None, "n/a") and not np.isclose(float(sfreq), inst.info["sfreq"], rtol=1e-6):
        raise ValueError(
            f"{where} field 'SamplingFrequency' says {sfreq} Hz but {recording.eeg} is sampled "
            f"at {inst.info['sfreq']} Hz. Correct the sidecar."
        )
    duration = sidecar.get("RecordingDuration")
    if isinstance(inst, mne.io.BaseRaw) and duration not in (None, "n/a"):
        data_duration = inst.n_times / inst.info["sfreq"]
        if float(duration) - data_duration > 1.5 / inst.info["sfreq"]:
            raise ValueError(
                f"{recording.eeg} holds {data_duration:.3f} s of data but {where} field "
                f"'RecordingDuration' says {float(duration):.3f} s: the data file is "
                "truncated. Copy the recording again from its source."
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
    raw: mne.io.BaseRaw | mne.BaseEpochs, channels_tsv: Path, *, eeg_file: Path, use_status: bool
) -> list[str]:
    """Set channel types (and bad channels) from ``_channels.tsv``.

    Rows of MEG sensor types (``MEGMAG``, ``MEGGRADPLANAR``, ...) may name channels absent
    from the data: neuroflow drops the MEG sensors of MEG + EEG recordings.

    Parameters
    ----------
    raw : mne.io.BaseRaw | mne.BaseEpochs
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
    table = table[table["name"].isin(raw.ch_names) | ~table["bids_type"].isin(MEG_SENSOR_TYPES)]
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
    raw: mne.io.BaseRaw | mne.BaseEpochs, *, electrodes_tsv: Path | None, template: str | None
) -> str | None:
    """Set electrode positions from ``_electrodes.tsv`` or a standard montage.

    Parameters
    ----------
    raw : mne.io.BaseRaw | mne.BaseEpochs
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

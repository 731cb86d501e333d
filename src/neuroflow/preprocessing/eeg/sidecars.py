"""Read the BIDS files that accompany one EEG recording.

Each reader validates its file and names the file and the field in its errors.
"""

from __future__ import annotations

import glob
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from neuroflow.io.records import EegRecording

__all__ = [
    "BIDS_TO_MNE_TYPES",
    "MEG_SENSOR_TYPES",
    "NOT_EVENT_PATTERN",
    "is_not_event",
    "merge_sidecars",
    "read_bad_segments",
    "read_channels_tsv",
    "read_electrodes_tsv",
    "read_events_tsv",
    "recording_from_path",
]

#: BIDS ``_channels.tsv`` types and the MNE channel types they map to.
BIDS_TO_MNE_TYPES: dict[str, str] = {
    "EEG": "eeg",
    "EOG": "eog",
    "HEOG": "eog",
    "VEOG": "eog",
    "ECG": "ecg",
    "EMG": "emg",
    "MISC": "misc",
    "TRIG": "stim",
    "STIM": "stim",
    "REF": "misc",
    "GSR": "gsr",
    "RESP": "resp",
    "TEMP": "temperature",
    "SYSCLOCK": "syst",
    "EYEGAZE": "eyegaze",
    "PUPIL": "pupil",
    "AUDIO": "misc",
    "PPG": "bio",
}

#: BIDS ``_channels.tsv`` types of MEG sensors; neuroflow drops these channels from MEG
#: recordings right after reading, so rows of these types may name absent channels.
MEG_SENSOR_TYPES = frozenset(
    {
        "MEGMAG",
        "MEGGRAD",
        "MEGGRADAXIAL",
        "MEGGRADPLANAR",
        "MEGREFMAG",
        "MEGREFGRADAXIAL",
        "MEGREFGRADPLANAR",
    }
)
#: BIDS types without a one-to-one MNE type: the data file's own type is kept.
_UNMAPPED_TYPES = MEG_SENSOR_TYPES | {"MEGOTHER", "HLU", "FITERR", "OTHER"}

_EEG_SUFFIXES = (".vhdr", ".edf", ".bdf", ".set", ".fif")
_EVENT_FALLBACKS = ("value", "trial_type")
#: Names of annotations and ``_events.tsv`` rows that mark stretches of data rather than
#: events (MNE's ``BAD_*`` and ``EDGE`` annotations, any case): never epoched.
NOT_EVENT_PATTERN = r"^(?![Bb][Aa][Dd]|[Ee][Dd][Gg][Ee]).*$"

logger = logging.getLogger(__name__)
_UNIT_SCALE = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}


def _read_tsv(path: Path) -> pd.DataFrame:
    """Read a BIDS TSV file with ``n/a`` as missing and every column as text."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not a readable tab-separated file: {err}") from err
    # Tables written on Windows end lines with CRLF and some tools pad cells with spaces.
    table.columns = [str(c).strip() for c in table.columns]
    table = table.apply(lambda column: column.str.strip())
    return table.mask(table.isin(["n/a", ""]))


def _require_columns(table: pd.DataFrame, columns: Sequence[str], path: Path) -> None:
    """Raise when ``table`` lacks any of ``columns``."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(
            f"{path} must have the column(s) {missing}, got {list(table.columns)} instead."
        )


def merge_sidecars(paths: Sequence[Path]) -> dict:
    """Merge ``_eeg.json`` sidecars following BIDS inheritance.

    Parameters
    ----------
    paths : sequence of Path
        Sidecars from the least to the most specific.

    Returns
    -------
    sidecar : dict
        Keys of later files override those of earlier ones.
    """
    merged: dict = {}
    for path in paths:
        path = Path(path)
        try:
            content = json.loads(path.read_text())
        except FileNotFoundError as err:
            raise FileNotFoundError(f"{path} does not exist.") from err
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from err
        if not isinstance(content, dict):
            raise ValueError(f"{path} must hold a JSON object, got {type(content).__name__}.")
        merged.update(content)
    return merged


def read_channels_tsv(path: Path) -> pd.DataFrame:
    """Read ``_channels.tsv``.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    channels : DataFrame
        Columns ``name``, ``bids_type`` (upper case, ``None`` when the file has no
        ``type``), ``mne_type`` (MNE channel type; ``None`` when the file has no ``type`` or
        the type has no MNE equivalent, e.g. MEG sensors) and ``status`` (``"good"`` or
        ``"bad"``) and ``units`` (as written, ``None`` when absent), one row per channel.
    """
    table = _read_tsv(path)
    _require_columns(table, ["name"], path)
    if table["name"].isna().any():
        rows = (np.flatnonzero(table["name"].isna()) + 1).tolist()
        raise ValueError(f"{path} field 'name' must not be empty, got n/a in row(s) {rows}.")
    out = pd.DataFrame({"name": table["name"].astype(str)})
    if "type" in table.columns:
        types = table["type"].fillna("MISC").str.upper()
        unknown = sorted(set(types) - set(BIDS_TO_MNE_TYPES) - _UNMAPPED_TYPES)
        if unknown:
            raise ValueError(
                f"{path} field 'type' must be one of "
                f"{sorted(set(BIDS_TO_MNE_TYPES) | _UNMAPPED_TYPES)}, got {unknown} instead."
            )
        out["bids_type"] = types
        mne_types = types.map(BIDS_TO_MNE_TYPES)
        out["mne_type"] = mne_types.astype(object).where(mne_types.notna(), None)
    else:
        out["bids_type"] = None
        out["mne_type"] = None
    units = table["units"] if "units" in table else pd.Series(None, index=table.index)
    out["units"] = units.astype(object).where(units.notna(), None)
    status = table["status"].fillna("good").str.lower() if "status" in table else "good"
    out["status"] = status
    bad_status = sorted(set(out["status"]) - {"good", "bad"})
    if bad_status:
        raise ValueError(
            f"{path} field 'status' must be 'good', 'bad' or n/a, got {bad_status} instead."
        )
    return out


def _coordinate_scale(electrodes: Path, xyz: np.ndarray) -> float:
    """Metres per unit of an ``_electrodes.tsv``, from its ``_coordsystem.json``.

    Without a coordinate-system file the unit is inferred from the head radius:
    medians above 20 are taken as millimetres, above 2 as centimetres.
    """
    stem = electrodes.name.removesuffix("_electrodes.tsv")
    candidates = sorted(electrodes.parent.glob(f"{stem}*_coordsystem.json")) + sorted(
        electrodes.parent.glob("*_coordsystem.json")
    )
    for candidate in candidates:
        unit = merge_sidecars([candidate]).get("EEGCoordinateUnits")
        if unit is None:
            continue
        if unit not in _UNIT_SCALE:
            raise ValueError(
                f"{candidate} field 'EEGCoordinateUnits' must be one of "
                f"{sorted(_UNIT_SCALE)}, got {unit!r} instead."
            )
        return _UNIT_SCALE[unit]
    radius = np.nanmedian(np.linalg.norm(xyz, axis=1)) if len(xyz) else 0.0
    return 1e-3 if radius > 20 else 1e-2 if radius > 2 else 1.0


def read_electrodes_tsv(path: Path) -> dict[str, np.ndarray]:
    """Read electrode positions from ``_electrodes.tsv``.

    Parameters
    ----------
    path : Path
        The file.

    Returns
    -------
    positions : dict of str to ndarray, shape (3,)
        Position in metres of every electrode with known coordinates.
    """
    table = _read_tsv(path)
    _require_columns(table, ["name", "x", "y", "z"], path)
    try:
        xyz = table[["x", "y", "z"]].astype(float).to_numpy()
    except ValueError as err:
        raise ValueError(f"{path} fields 'x', 'y', 'z' must be numbers or n/a: {err}") from err
    known = np.isfinite(xyz).all(axis=1)
    scale = _coordinate_scale(path, xyz[known])
    return {
        str(name): pos * scale
        for name, pos, ok in zip(table["name"], xyz, known, strict=True)
        if ok
    }


def is_not_event(names: pd.Series) -> pd.Series:
    """Whether each name marks a stretch of data (``BAD_*``, ``EDGE``) rather than an event.

    Parameters
    ----------
    names : Series of str, shape (n_rows,)
        Event or annotation names (missing values allowed).

    Returns
    -------
    mask : Series of bool, shape (n_rows,)
    """
    return names.notna() & ~names.astype(str).str.match(NOT_EVENT_PATTERN)


def _event_name_column(table: pd.DataFrame, event_column: str, path: Path) -> str | None:
    """Column naming the events: ``event_column``, else ``value``, else ``trial_type``.

    A column whose every cell is ``n/a`` gives way to the next one that names some
    event, as in MNE-BIDS (a ``trial_type`` of ``n/a`` only, with codes in ``value``).
    """
    present = [c for c in dict.fromkeys((event_column, *_EVENT_FALLBACKS)) if c in table.columns]
    if not present:
        return None
    column = next((c for c in present if table[c].notna().any()), present[0])
    if column != event_column:
        why = "is n/a in every row" if event_column in table.columns else "is absent"
        logger.info(
            "%s: column %r %s; naming events by its column %r.", path, event_column, why, column
        )
    return column


def read_events_tsv(path: Path, *, event_column: str, stim_column: str | None) -> pd.DataFrame:
    """Read ``_events.tsv`` into onsets, event names and stimulus ids.

    Parameters
    ----------
    path : Path
        The file (LF or CRLF line ends, ``n/a`` for missing cells).
    event_column : str
        Column naming the event (e.g. ``"trial_type"``). When the file lacks it,
        ``"value"`` and then ``"trial_type"`` are used; when it has none of these (e.g. the
        MEG events of ds000117: onset, duration, stim_type, trigger, stim_file), every
        event is named ``"stimulus"`` and a warning is logged.
    stim_column : str | None
        Column holding stimulus ids (e.g. ``"stim_file"``).

    Returns
    -------
    events : DataFrame
        Columns ``row`` (1-based data row in the file), ``onset`` (s), ``duration`` (s,
        NaN when the file has no ``duration`` column or the cell is ``n/a``), ``sample``
        (float, NaN when the file has no ``sample`` column), ``name`` and ``stimulus``
        (``None`` when absent); rows without onset or name are left out, and so are
        rows named ``BAD_*`` or ``EDGE*`` (stretches of data, see
        :func:`read_bad_segments`).
    """
    table = _read_tsv(path)
    _require_columns(table, ["onset"], path)
    column = _event_name_column(table, event_column, path)
    if column is None:
        logger.warning(
            "%s has no column %r (nor %s) naming the events; every event is named "
            "'stimulus'. Set `event_column` to one of its columns %s to tell conditions apart.",
            path,
            event_column,
            " or ".join(repr(c) for c in _EVENT_FALLBACKS if c != event_column),
            list(table.columns),
        )
        names = pd.Series("stimulus", index=table.index, dtype=object)
    else:
        names = table[column]
    try:
        onset = table["onset"].astype(float)
        sample = table["sample"].astype(float) if "sample" in table else np.nan
        duration = table["duration"].astype(float) if "duration" in table else np.nan
    except ValueError as err:
        raise ValueError(
            f"{path} fields 'onset', 'duration' and 'sample' must be numbers: {err}"
        ) from err
    stimulus = (
        table[stim_column].where(table[stim_column].notna(), None)
        if stim_column and stim_column in table.columns
        else None
    )
    events = pd.DataFrame(
        {
            "row": np.arange(1, len(table) + 1),
            "onset": onset,
            "duration": duration,
            "sample": sample,
            "name": names,
            "stimulus": stimulus,
        }
    )
    keep = events["onset"].notna() & events["name"].notna() & ~is_not_event(events["name"])
    return events[keep].reset_index(drop=True)


def read_bad_segments(path: Path, *, event_column: str) -> pd.DataFrame:
    """The rows of ``_events.tsv`` that mark stretches of data as bad (``BAD_*``, ``EDGE*``).

    MNE-BIDS writes a recording's ``BAD_*`` annotations as such rows and reads them back
    as annotations; they are not events.

    Parameters
    ----------
    path : Path
        The file.
    event_column : str
        Column naming the rows, with the fallbacks of :func:`read_events_tsv`.

    Returns
    -------
    segments : DataFrame
        Columns ``onset`` (s), ``duration`` (s, 0 when absent or ``n/a``) and
        ``description``, one row per bad stretch.
    """
    table = _read_tsv(path)
    _require_columns(table, ["onset"], path)
    column = _event_name_column(table, event_column, path)
    if column is None:
        return pd.DataFrame({"onset": [], "duration": [], "description": []})
    try:
        onset = table["onset"].astype(float)
        duration = table["duration"].astype(float) if "duration" in table else 0.0
    except ValueError as err:
        raise ValueError(f"{path} fields 'onset' and 'duration' must be numbers: {err}") from err
    segments = pd.DataFrame(
        {"onset": onset, "duration": duration, "description": table[column]}
    ).fillna({"duration": 0.0})
    keep = segments["onset"].notna() & is_not_event(segments["description"])
    return segments[keep].reset_index(drop=True)


def _sibling(eeg: Path, stem: str, suffix: str) -> Path | None:
    """Most specific sibling ``<entities>[_space-<label>]_<suffix>`` of ``eeg`` that exists.

    A ``space`` entity (``sub-01_space-CapTrak_electrodes.tsv``, as MNE-BIDS writes) need
    not match the data file, as in :func:`neuroflow.io.bids.find_inherited`.
    """
    parts = stem.split("_")
    for n in range(len(parts), 0, -1):
        prefix = "_".join(parts[:n])
        candidate = eeg.parent / f"{prefix}_{suffix}"
        if candidate.exists():
            return candidate
        spaced = sorted(eeg.parent.glob(f"{glob.escape(prefix)}_space-*_{suffix}"))
        if spaced:
            return spaced[0]
    return None


def recording_from_path(eeg: str | Path) -> EegRecording:
    """Describe a BIDS EEG file and the sidecars found next to it.

    Parameters
    ----------
    eeg : path-like
        ``sub-<label>[_ses-<label>]_task-<label>[_run-<label>]_eeg.<ext>``, an MNE epochs
        file ``..._epo.fif``, the ``..._meg.fif`` of a MEG + EEG recording, or any raw EEG
        file (entities then default to the file stem as subject).

    Returns
    -------
    recording : EegRecording
        With ``events``, ``channels``, ``electrodes`` and ``sidecars`` (``_eeg.json``, or
        ``_meg.json`` for MEG files) filled in where the files exist (the most specific
        match of each); ``datatype`` is ``"meg"`` for ``_meg.fif`` files and files in a
        ``meg`` folder, ``epoched`` is true for ``_epo.fif`` / ``-epo.fif`` files and
        EEGLAB files holding several trials.
    """
    from mne_bids import get_entities_from_fname

    from neuroflow.io.bids_eeg import is_epoched_eeglab

    eeg = Path(eeg)
    if eeg.suffix.lower() not in _EEG_SUFFIXES:
        raise ValueError(
            f"`eeg` must end with one of {list(_EEG_SUFFIXES)}, got {eeg.name!r} instead."
        )
    stem = eeg.name[: -len(eeg.suffix)]
    is_fif = eeg.suffix.lower() == ".fif"
    datatype = "meg" if (is_fif and stem.endswith("_meg")) or eeg.parent.name == "meg" else "eeg"
    epoched = is_fif and re.search(r"[_-]epo$", stem) is not None
    if eeg.suffix.lower() == ".set":
        try:
            epoched = is_epoched_eeglab(eeg)
        except (ValueError, FileNotFoundError):
            epoched = False  # the reader reports the problem
    stem = re.sub(r"_(eeg|meg)$", "", stem)
    if is_fif:
        stem = re.sub(r"[_-](raw|eeg|epo)$", "", stem)
    entities = get_entities_from_fname(eeg.name, on_error="ignore")
    subject = entities.get("subject") or stem
    sidecar = _sibling(eeg, stem, f"{datatype}.json")
    return EegRecording(
        subject=subject,
        session=entities.get("session"),
        task=entities.get("task"),
        run=entities.get("run"),
        eeg=eeg,
        events=_sibling(eeg, stem, "events.tsv"),
        channels=_sibling(eeg, stem, "channels.tsv"),
        electrodes=_sibling(eeg, stem, "electrodes.tsv"),
        sidecars=(sidecar,) if sidecar is not None else (),
        datatype=datatype,
        epoched=epoched,
    )

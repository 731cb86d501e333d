"""Indexing of EEG (and MEG ``.fif``) recordings of a BIDS dataset.

One recording per subject, session, task, acquisition and run: BrainVision, EDF,
BDF, EEGLAB (continuous or epoched) and FIF files under ``eeg/`` (or ``meg/``), the
first part of a split recording, and the preferred format where a recording is stored
in several; each with its inherited sidecars, events, channels and electrodes tables.
The directory listing and entity filters are those of :mod:`neuroflow.io.bids`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from neuroflow.io.bids import (
    DirectoryListing,
    EntityFilters,
    check_root,
    find_inherited,
    nothing_found,
    record_seen_labels,
    scan_files,
)
from neuroflow.io.records import EegRecording

__all__ = ["index_eeg_recordings", "is_epoched_eeglab"]

logger = logging.getLogger(__name__)

_EEG_EXTENSIONS = (".vhdr", ".edf", ".bdf", ".set", ".fif")


#: What :func:`index_eeg_recordings` looks for: (folder, suffix, extensions, pattern).
_EEG_KINDS = (
    ("eeg", "eeg", _EEG_EXTENSIONS, "sub-*/[ses-*/]eeg/*_eeg.{vhdr,edf,bdf,set,fif}"),
    ("eeg", "epo", (".fif",), "sub-*/[ses-*/]eeg/*_epo.fif"),
)


_MEG_KIND = ("meg", "meg", (".fif",), "sub-*/[ses-*/]meg/*_meg.fif")


#: Files of a ``meg`` folder that are not recordings of a task: Maxwell-filter
#: calibration files and empty-room noise recordings.
_MEG_NOT_RECORDINGS = {"acq": {"crosstalk", "calibration"}, "task": {"noise"}}


def _eeglab_trials(path: Path) -> int:
    """``trials`` of an EEGLAB ``.set`` file, reading only that field (1 when absent)."""
    import h5py
    import numpy as np
    import scipy.io

    if h5py.is_hdf5(path):  # MATLAB v7.3
        with h5py.File(path, "r") as f:
            for where in (f, f.get("EEG")):
                if isinstance(where, h5py.Group) and "trials" in where:
                    return int(np.asarray(where["trials"]).ravel()[0])
        return 1
    content = scipy.io.loadmat(
        path,
        variable_names=["trials", "EEG"],
        squeeze_me=True,
        struct_as_record=False,
        verify_compressed_data_integrity=False,
    )
    if "trials" in content:
        return int(np.asarray(content["trials"]).ravel()[0])
    eeg = content.get("EEG")
    eeg = getattr(eeg, "EEG", eeg)  # some files nest the structure once more
    trials = getattr(eeg, "trials", 1)
    return int(np.asarray(trials).ravel()[0]) if np.size(trials) else 1


def is_epoched_eeglab(path: str | os.PathLike) -> bool:
    """Whether an EEGLAB ``.set`` file holds epochs (more than one trial).

    Only the ``trials`` field is read (top level, or inside the ``EEG`` structure of
    older files; MATLAB v7.3 files through h5py), not the data.

    Parameters
    ----------
    path : path-like
        The ``.set`` file.

    Returns
    -------
    epoched : bool
        ``True`` when ``trials`` is above 1.

    Raises
    ------
    ValueError
        When the file is not a readable MATLAB file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist.")
    from scipy.io.matlab import MatReadError

    try:
        return _eeglab_trials(path) > 1
    except (MatReadError, OSError, ValueError, TypeError, NotImplementedError, KeyError) as err:
        raise ValueError(
            f"{path} could not be read as an EEGLAB .set file ({type(err).__name__}: {err})."
        ) from err


def _first_splits(found: list[tuple[dict[str, str], Path]]) -> list[tuple[dict[str, str], Path]]:
    """Keep the first ``split`` of split FIF files (MNE reads the following parts itself)."""

    def rest(ents: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in ents.items() if k != "split"))

    def order(label: str) -> tuple[int, int, str]:
        return (0, int(label), "") if label.isdigit() else (1, 0, label)

    first: dict[tuple[tuple[str, str], ...], str] = {}
    for ents, _ in found:
        if "split" in ents:
            key = rest(ents)
            if key not in first or order(ents["split"]) < order(first[key]):
                first[key] = ents["split"]
    return [(e, p) for e, p in found if "split" not in e or first[rest(e)] == e["split"]]


def _is_meg_recording(ents: Mapping[str, str]) -> bool:
    """Whether a ``meg/*_meg.fif`` file is a task recording of a participant."""
    if ents.get("sub") == "emptyroom" or "task" not in ents:
        return False
    return not any(ents.get(key) in values for key, values in _MEG_NOT_RECORDINGS.items())


def _eeg_record(
    root: Path,
    datatype: str,
    ents: dict[str, str],
    path: Path,
    epoched: bool,
    listing: DirectoryListing,
) -> EegRecording:
    """Record of one EEG (or MEG + EEG) file with its inherited tables and sidecars."""

    def last(suffix: str, extension: str) -> Path | None:
        hits = find_inherited(
            root,
            ents,
            datatype=datatype,
            suffix=suffix,
            extension=extension,
            listing=listing,
            ignore=("space",),
        )
        return hits[-1] if hits else None

    return EegRecording(
        subject=ents["sub"],
        session=ents.get("ses"),
        task=ents.get("task"),
        run=ents.get("run"),
        eeg=path,
        events=last("events", ".tsv"),
        channels=last("channels", ".tsv"),
        electrodes=last("electrodes", ".tsv"),
        sidecars=tuple(
            find_inherited(
                root, ents, datatype=datatype, suffix=datatype, extension=".json", listing=listing
            )
        ),
        datatype=datatype,
        epoched=epoched,
    )


def _rank(record: EegRecording) -> int:
    """Preference among files of one recording: continuous EEG, epoched EEG, MEG + EEG."""
    if record.datatype == "meg":
        return 2
    return 1 if record.epoched else 0


def _kind(record: EegRecording) -> str:
    """Words for a record's kind of file, for messages."""
    if record.datatype == "meg":
        return "MEG + EEG recording"
    return "epoched EEG" if record.epoched else "continuous EEG"


def _one_per_key(records: list[EegRecording]) -> list[EegRecording]:
    """One record per entity key: continuous EEG before epoched EEG before MEG + EEG."""
    by_key: dict[str, list[EegRecording]] = {}
    for record in records:
        by_key.setdefault(record.key, []).append(record)
    kept = []
    for key, group in sorted(by_key.items()):
        group.sort(key=lambda r: (_rank(r), str(r.eeg)))
        best = [r for r in group if _rank(r) == _rank(group[0])]
        if len(best) > 1:
            raise ValueError(
                f"Several {_kind(best[0])} files share the entities {key} (e.g. different acq "
                f"or file formats): {', '.join(str(r.eeg) for r in best)}. Keep one per "
                "recording or narrow the selection."
            )
        for other in group[1:]:
            logger.warning(
                "%s: using the %s file %s and leaving out the %s file %s.",
                key,
                _kind(group[0]),
                group[0].eeg,
                _kind(other),
                other.eeg,
            )
        kept.append(group[0])
    return kept


def index_eeg_recordings(
    bids_root: str | os.PathLike,
    *,
    subjects: Iterable[str] | None = None,
    sessions: Iterable[str] | None = None,
    tasks: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
    include_meg: bool = True,
    strict: bool = True,
    seen: dict[str, set[str]] | None = None,
) -> list[EegRecording]:
    """Index the EEG recordings of a BIDS dataset.

    Parameters
    ----------
    bids_root : path-like
        BIDS dataset with ``sub-*/[ses-*/]eeg/*_eeg.<ext>`` files (``.vhdr``, ``.edf``,
        ``.bdf``, ``.set`` or ``.fif``), MNE epochs files ``sub-*/[ses-*/]eeg/*_epo.fif``
        and, with ``include_meg``, MEG + EEG recordings ``sub-*/[ses-*/]meg/*_meg.fif``.
    subjects, sessions, tasks, runs : iterable of str | None
        Labels to keep (without prefixes); ``None`` or empty keeps all.
    include_meg : bool
        Whether to index the ``meg`` folders (their EEG channels are analysed). Empty-room
        recordings (``sub-emptyroom``, ``task-noise``), Maxwell-filter calibration files
        and files without a task are never indexed; of split files only the first part is.
    strict, seen
        See :func:`index_fmri_runs`.

    Returns
    -------
    recordings : list of EegRecording
        Sorted by entity key; events, channels and electrodes tables and ``_eeg.json``
        (``_meg.json``) sidecars are found by the inheritance principle in the file's own
        folder. ``epoched`` is true for ``_epo.fif`` files and EEGLAB files holding
        several trials (see :func:`is_epoched_eeglab`), ``datatype`` is ``"meg"`` for
        files of a ``meg`` folder. When files of several kinds share a key, the
        continuous EEG file is kept before an epoched one, and either before a MEG file
        (with a logged warning); two files of the same kind sharing a key are an error.
    """
    root = check_root(bids_root, "bids_root")
    filters = EntityFilters.from_labels(subjects, sessions, tasks, runs)
    listing = DirectoryListing()
    kinds = [*_EEG_KINDS, _MEG_KIND] if include_meg else list(_EEG_KINDS)
    found: list[tuple[str, str, dict[str, str], Path]] = []
    for datatype, suffix, extensions, _ in kinds:
        hits = scan_files(
            root,
            datatype=datatype,
            suffix=suffix,
            extensions=extensions,
            filters=filters,
            listing=listing,
            strict=strict,
        )
        if datatype == "meg":
            hits = _first_splits([(e, p) for e, p in hits if _is_meg_recording(e)])
        found.extend((datatype, suffix, ents, path) for ents, path in hits)
    record_seen_labels(filters, seen)
    if strict:
        filters.check(root)
        if not found:
            raise nothing_found("EEG recordings", root, ", ".join(kind[3] for kind in kinds))
    records = []
    for datatype, suffix, ents, path in found:
        epoched = suffix == "epo"
        if path.suffix == ".set":
            try:
                epoched = is_epoched_eeglab(path)
            except ValueError as err:
                logger.warning("%s Indexed as a continuous recording.", err)
        records.append(_eeg_record(root, datatype, ents, path, epoched, listing))
    return sorted(_one_per_key(records), key=lambda r: r.key)

"""Fast, glob-free indexing of BIDS datasets and fMRIPrep derivatives.

The indexer lists directories with :func:`os.scandir` and parses file names
itself, so indexing a dataset of a few thousand runs takes a fraction of a
second (pybids builds a database of every file and every metadata field first,
which takes minutes on large datasets).

Only entity combinations that exist on disk are returned: a subject without a
second session simply has no runs there. Metadata files follow the BIDS
inheritance principle: a JSON sidecar (or an events, channels or electrodes
table) applies to every data file in or below its folder whose entities
include the sidecar's entities.

EEG recordings are indexed by :mod:`neuroflow.io.bids_eeg`.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuroflow.io.records import EegRecording, FmriRun

logger = logging.getLogger(__name__)


__all__ = [
    "DirectoryListing",
    "EntityFilters",
    "check_filters",
    "check_root",
    "dataset_description_warnings",
    "filter_labels",
    "find_inherited",
    "index_fmri_runs",
    "nothing_found",
    "parse_bids_name",
    "read_sidecar",
    "record_seen_labels",
    "scan_files",
]


#: Entities in the order the BIDS specification writes them.
ENTITY_ORDER = (
    "sub",
    "ses",
    "task",
    "acq",
    "ce",
    "rec",
    "dir",
    "run",
    "echo",
    "part",
    "space",
    "res",
    "den",
    "desc",
)


_NAME_RE = re.compile(
    r"^(?P<stem>(?:[a-zA-Z]+-[a-zA-Z0-9]+_)*)(?P<suffix>[a-zA-Z0-9]+)(?P<ext>\..*)?$"
)


def parse_bids_name(name: str) -> tuple[dict[str, str], str, str] | None:
    """Split a BIDS file name into entities, suffix and extension.

    Parameters
    ----------
    name : str
        A file name such as ``"sub-01_task-rest_run-1_bold.nii.gz"``.

    Returns
    -------
    parsed : tuple of (dict, str, str) | None
        ``(entities, suffix, extension)`` with entity labels without their
        prefix, e.g. ``({"sub": "01", "task": "rest", "run": "1"}, "bold",
        ".nii.gz")``; ``None`` when the name does not follow the BIDS pattern.
    """
    match = _NAME_RE.match(name)
    if match is None:
        return None
    entities: dict[str, str] = {}
    for part in match["stem"].rstrip("_").split("_"):
        if part:
            key, value = part.split("-", 1)
            entities[key] = value
    return entities, match["suffix"], match["ext"] or ""


class DirectoryListing:
    """Cached directory listings with parsed BIDS names."""

    def __init__(self) -> None:
        self._cache: dict[Path, list[tuple[str, dict[str, str], str, str]]] = {}

    def files(self, folder: Path) -> list[tuple[str, dict[str, str], str, str]]:
        """Files of ``folder`` as ``(name, entities, suffix, extension)``."""
        if folder not in self._cache:
            rows = []
            try:
                with os.scandir(folder) as it:
                    for entry in it:
                        if entry.name.startswith(".") or entry.is_dir():
                            continue
                        parsed = parse_bids_name(entry.name)
                        if parsed is not None:
                            rows.append((entry.name, *parsed))
            except FileNotFoundError:
                pass
            rows.sort()
            self._cache[folder] = rows
        return self._cache[folder]


def _subdirs(folder: Path, prefix: str) -> list[str]:
    """Labels of the ``<prefix>-<label>`` folders directly inside ``folder``."""
    try:
        with os.scandir(folder) as it:
            return sorted(
                e.name[len(prefix) + 1 :]
                for e in it
                if e.name.startswith(f"{prefix}-") and e.is_dir()
            )
    except FileNotFoundError:
        return []


def _levels(root: Path, entities: Mapping[str, str], datatype: str) -> list[Path]:
    """Folders from the dataset root down to a data file's own folder."""
    levels = [root, root / f"sub-{entities['sub']}"]
    if "ses" in entities:
        levels.append(levels[-1] / f"ses-{entities['ses']}")
    levels.append(levels[-1] / datatype)
    return levels


def find_inherited(
    root: Path,
    entities: Mapping[str, str],
    *,
    datatype: str,
    suffix: str,
    extension: str,
    listing: DirectoryListing | None = None,
    ignore: Sequence[str] = (),
) -> list[Path]:
    """Metadata files that apply to one data file, by the inheritance principle.

    Parameters
    ----------
    root : Path
        Dataset root.
    entities : dict of str to str
        Entities of the data file (``sub`` required).
    datatype : str
        Folder of the data file, e.g. ``"func"`` or ``"eeg"``.
    suffix, extension : str
        Of the metadata file, e.g. ``"bold"`` and ``".json"``.
    listing : DirectoryListing | None
        Shared listing cache.
    ignore : sequence of str
        Entities of metadata files that need not match the data file (e.g.
        ``space`` of an electrodes table).

    Returns
    -------
    paths : list of Path
        Applicable files, least specific first (dataset, subject, session,
        datatype folder; within a folder, fewer entities first).
    """
    listing = listing or DirectoryListing()
    found: list[Path] = []
    for level in _levels(root, entities, datatype):
        here = [
            (len(ents), name)
            for name, ents, suf, ext in listing.files(level)
            if suf == suffix
            and ext == extension
            and all(entities.get(k) == v for k, v in ents.items() if k not in ignore)
        ]
        found.extend(level / name for _, name in sorted(here))
    return found


def read_sidecar(run: FmriRun | EegRecording | Sequence[str | os.PathLike]) -> dict[str, Any]:
    """Merge a recording's JSON sidecars; more specific files win.

    Parameters
    ----------
    run : FmriRun | EegRecording | sequence of path-like
        A record (its ``sidecars``) or the sidecar paths, least specific first.

    Returns
    -------
    metadata : dict
        The merged metadata.
    """
    paths = run.sidecars if isinstance(run, FmriRun | EegRecording) else run
    merged: dict[str, Any] = {}
    for path in paths:
        try:
            content = json.loads(Path(path).read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"Sidecar {path} is not valid JSON: {err}.") from err
        if not isinstance(content, dict):
            raise ValueError(
                f"Sidecar {path} must hold a JSON object, got {type(content).__name__} instead."
            )
        merged.update(content)
    return merged


def filter_labels(value: str | Iterable[str] | None, name: str) -> list[str] | None:
    """Normalise a filter (``None`` or empty = everything) to a list of labels."""
    if value is None:
        return None
    if isinstance(value, str | int):
        value = [value]
    labels = [str(v) for v in value]
    for label in labels:
        for prefix in ("sub-", "ses-", "task-", "run-"):
            if label.startswith(prefix):
                raise ValueError(
                    f"`{name}` must hold labels without their prefix, got {label!r} instead."
                )
    return labels or None


def _same_label(a: str, b: str) -> bool:
    """Labels match exactly, or as integers (``run-01`` matches ``1``)."""
    if a == b:
        return True
    return a.isdigit() and b.isdigit() and int(a) == int(b)


def _check_filter(name: str, wanted: list[str] | None, available: set[str], folder: Path) -> None:
    """Raise when a filter names labels that the dataset does not have."""
    if wanted is None:
        return
    for label in wanted:
        if not any(_same_label(label, have) for have in available):
            close = difflib.get_close_matches(label, sorted(available), n=3)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(
                f"No {name} {label!r} in {folder} (available: "
                f"{', '.join(sorted(available)) or 'none'}): `dataset.{name}s` must name "
                f"labels the dataset has.{hint}"
            )


def _keep(label: str | None, wanted: list[str] | None) -> bool:
    """Whether an entity value passes a filter."""
    if wanted is None:
        return True
    return label is not None and any(_same_label(label, w) for w in wanted)


@dataclass
class EntityFilters:
    """Entity filters of one query."""

    subjects: list[str] | None
    sessions: list[str] | None
    tasks: list[str] | None
    runs: list[str] | None
    seen: dict[str, set[str]] = field(
        default_factory=lambda: {"ses": set(), "task": set(), "run": set()}
    )

    @classmethod
    def from_labels(
        cls,
        subjects: str | Iterable[str] | None,
        sessions: str | Iterable[str] | None,
        tasks: str | Iterable[str] | None,
        runs: str | Iterable[str] | None,
    ) -> EntityFilters:
        """Filters from the labels a user gave (each checked by :func:`filter_labels`)."""
        return cls(
            filter_labels(subjects, "subjects"),
            filter_labels(sessions, "sessions"),
            filter_labels(tasks, "tasks"),
            filter_labels(runs, "runs"),
        )

    def keep(self, entities: Mapping[str, str]) -> bool:
        for key in self.seen:
            if key in entities:
                self.seen[key].add(entities[key])
        return (
            _keep(entities.get("ses"), self.sessions)
            and _keep(entities.get("task"), self.tasks)
            and _keep(entities.get("run"), self.runs)
        )

    def check(self, folder: Path) -> None:
        _check_filter("session", self.sessions, self.seen["ses"], folder)
        _check_filter("task", self.tasks, self.seen["task"], folder)
        _check_filter("run", self.runs, self.seen["run"], folder)


def scan_files(
    root: Path,
    *,
    datatype: str,
    suffix: str,
    extensions: Sequence[str],
    filters: EntityFilters,
    listing: DirectoryListing,
    extra: Mapping[str, str] | None = None,
    strict: bool = True,
) -> list[tuple[dict[str, str], Path]]:
    """Data files ``sub-*/[ses-*/]<datatype>/*_<suffix><ext>`` passing the filters."""
    subjects = _subdirs(root, "sub")
    if strict:
        _check_filter("subject", filters.subjects, set(subjects), root)
    found = []
    for sub in subjects:
        if not _keep(sub, filters.subjects):
            continue
        sub_dir = root / f"sub-{sub}"
        sessions = _subdirs(sub_dir, "ses")
        folders = [sub_dir / f"ses-{ses}" / datatype for ses in sessions] or [sub_dir / datatype]
        for folder in folders:
            for name, ents, suf, ext in listing.files(folder):
                if suf != suffix or ext not in extensions or ents.get("sub") != sub:
                    continue
                if extra and any(ents.get(k) != v for k, v in extra.items()):
                    continue
                if filters.keep(ents):
                    found.append((ents, folder / name))
    return found


def record_seen_labels(filters: EntityFilters, seen: dict[str, set[str]] | None) -> None:
    """Add the labels a scan looked at to ``seen``."""
    if seen is not None:
        for key, labels in filters.seen.items():
            seen.setdefault(key, set()).update(labels)


def check_filters(
    root: str | os.PathLike,
    *,
    seen: Mapping[str, set[str]],
    subjects: Iterable[str] | None = None,
    sessions: Iterable[str] | None = None,
    tasks: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
) -> None:
    """Raise when a filter names a label that no recording of any modality has.

    Parameters
    ----------
    root : path-like
        Dataset root (its ``sub-*`` folders are the subjects).
    seen : dict of str to set of str
        ``ses``, ``task`` and ``run`` labels of every modality's files (the ``seen``
        argument of the index functions).
    subjects, sessions, tasks, runs : iterable of str | None
        The filters.
    """
    root = Path(root)
    _check_filter("subject", filter_labels(subjects, "subjects"), set(_subdirs(root, "sub")), root)
    for name, key, wanted in (
        ("session", "ses", sessions),
        ("task", "task", tasks),
        ("run", "run", runs),
    ):
        _check_filter(name, filter_labels(wanted, f"{name}s"), set(seen.get(key, set())), root)


#: Fields BIDS requires in ``dataset_description.json``.
DESCRIPTION_FIELDS = ("Name", "BIDSVersion")


def dataset_description_warnings(root: str | os.PathLike) -> list[str]:
    """What is wrong with a dataset's ``dataset_description.json``, if anything.

    BIDS requires the file at the root of every dataset, with the fields
    :data:`DESCRIPTION_FIELDS`. neuroflow reads nothing from it, so a missing or
    incomplete file is a warning rather than an error: the recordings can still be
    indexed and read.

    Parameters
    ----------
    root : path-like
        The dataset's root folder.

    Returns
    -------
    warnings : list of str
        Empty when the file exists, is a JSON object and has the required fields;
        else one message naming the file, what is wrong and what BIDS expects.
    """
    path = Path(root) / "dataset_description.json"
    if not path.is_file():
        return [
            f"The BIDS dataset {Path(root)} has no dataset_description.json; BIDS requires "
            f"one at the root of every dataset (with {' and '.join(DESCRIPTION_FIELDS)}). "
            "The recordings are read anyway; validators and other tools may refuse the "
            "dataset."
        ]
    try:
        description = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return [f"{path} must be a JSON object, got a file that is not JSON instead ({err})."]
    if not isinstance(description, dict):
        return [f"{path} must be a JSON object, got a {type(description).__name__} instead."]
    missing = [key for key in DESCRIPTION_FIELDS if key not in description]
    if missing:
        return [
            f"{path} must have the fields {list(DESCRIPTION_FIELDS)} that BIDS requires, got "
            f"{sorted(description)} instead (missing {missing})."
        ]
    return []


def check_root(path: str | os.PathLike, name: str) -> Path:
    """Resolve a dataset folder, raising when it does not exist."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"`{name}` must be an existing folder, got {str(root)!r} instead.")
    return root


def nothing_found(what: str, root: Path, pattern: str) -> ValueError:
    return ValueError(f"No {what} found in {root} (looked for {pattern}).")


def _fill_pattern(pattern: str, entities: Mapping[str, str]) -> str:
    """Fill ``{subject}``, ``{session}``, ``{task}``, ``{run}`` in a path pattern."""
    values = {
        "subject": entities.get("sub", ""),
        "session": entities.get("ses", ""),
        "task": entities.get("task", ""),
        "run": entities.get("run", ""),
    }
    try:
        return pattern.format(**values)
    except (KeyError, IndexError) as err:
        raise ValueError(
            "`confounds_pattern` may only use {subject}, {session}, {task} and {run}, "
            f"got {pattern!r} instead."
        ) from err


def index_fmri_runs(
    bids_root: str | os.PathLike,
    *,
    fmriprep_dir: str | os.PathLike | None = None,
    space: str | None = None,
    subjects: Iterable[str] | None = None,
    sessions: Iterable[str] | None = None,
    tasks: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
    confounds_pattern: str | None = None,
    strict: bool = True,
    seen: dict[str, set[str]] | None = None,
) -> list[FmriRun]:
    """Index the fMRI runs of a raw BIDS dataset or of its fMRIPrep derivatives.

    Parameters
    ----------
    bids_root : path-like
        Raw BIDS dataset (events and sidecars always come from here).
    fmriprep_dir : path-like | None
        fMRIPrep output folder; when given, runs are its
        ``*_space-<space>_desc-preproc_bold.nii.gz`` files with their
        ``desc-brain_mask`` and ``desc-confounds_timeseries.tsv``.
    space : str | None
        Template space of the derivatives (e.g. ``"MNI152NLin2009cAsym"``);
        may be omitted when the derivatives hold a single space.
    subjects, sessions, tasks, runs : iterable of str | None
        Labels to keep (without prefixes); ``None`` or empty keeps all. Run
        labels match as integers, so ``"1"`` selects ``run-01``.
    confounds_pattern : str | None
        Path of a user-provided confounds TSV, relative to ``bids_root``, with
        ``{subject}``, ``{session}``, ``{task}`` and ``{run}`` placeholders;
        used for raw data (fMRIPrep runs use fMRIPrep's confounds).
    strict : bool
        Raise when a filter names a label no run has, or when no run is found.
        ``False`` returns what matches (possibly nothing), so that filters can be
        checked against every modality of a dataset at once.
    seen : dict of str to set of str | None
        Filled with the ``ses``, ``task`` and ``run`` labels of every BOLD file
        looked at (before filtering).

    Returns
    -------
    runs : list of FmriRun
        Sorted by entity key.
    """
    root = check_root(bids_root, "bids_root")
    filters = EntityFilters.from_labels(subjects, sessions, tasks, runs)
    listing = DirectoryListing()
    if fmriprep_dir is None:
        found = scan_files(
            root,
            datatype="func",
            suffix="bold",
            extensions=(".nii", ".nii.gz"),
            filters=filters,
            listing=listing,
            strict=strict,
        )
        record_seen_labels(filters, seen)
        if strict:
            filters.check(root)
            if not found:
                raise nothing_found("BOLD runs", root, "sub-*/[ses-*/]func/*_bold.nii[.gz]")
        records = [_raw_run(root, ents, path, listing, confounds_pattern) for ents, path in found]
    else:
        deriv = check_root(fmriprep_dir, "fmriprep_dir")
        found = scan_files(
            deriv,
            datatype="func",
            suffix="bold",
            extensions=(".nii.gz", ".nii"),
            filters=filters,
            listing=listing,
            extra={"desc": "preproc"},
            strict=strict,
        )
        found = [(e, p) for e, p in found if "space" in e]
        record_seen_labels(filters, seen)
        if strict:
            filters.check(deriv)
        if not found and not strict:
            return []
        if not found:
            raise nothing_found(
                "preprocessed BOLD runs",
                deriv,
                "sub-*/[ses-*/]func/*_space-*_desc-preproc_bold.nii.gz",
            )
        spaces = sorted({e["space"] for e, _ in found})
        if space is None and len(spaces) > 1:
            raise ValueError(
                f"`space` must be given: {deriv} holds several spaces ({', '.join(spaces)})."
            )
        if space is not None:
            if space not in spaces:
                close = difflib.get_close_matches(space, spaces, n=3)
                hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise ValueError(
                    f"No space {space!r} in {deriv} (available: {', '.join(spaces)}).{hint}"
                )
            found = [(e, p) for e, p in found if e["space"] == space]
        records = [_fmriprep_run(root, deriv, ents, path, listing) for ents, path in found]
    keys = [r.key for r in records]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(
            f"Several BOLD files share the entities {duplicates[0]} (e.g. different acq, echo "
            "or res); keep one per run or narrow the selection."
        )
    return sorted(records, key=lambda r: r.key)


def _raw_run(
    root: Path,
    ents: dict[str, str],
    bold: Path,
    listing: DirectoryListing,
    confounds_pattern: str | None,
) -> FmriRun:
    """Record of one raw BIDS run."""
    events = find_inherited(
        root, ents, datatype="func", suffix="events", extension=".tsv", listing=listing
    )
    sidecars = find_inherited(
        root, ents, datatype="func", suffix="bold", extension=".json", listing=listing
    )
    confounds = None
    if confounds_pattern:
        confounds = root / _fill_pattern(confounds_pattern, ents)
        if not confounds.is_file():
            raise FileNotFoundError(
                f"No confounds file {confounds} for {bold.name} (from `confounds_pattern`)."
            )
    return FmriRun(
        subject=ents["sub"],
        session=ents.get("ses"),
        task=ents.get("task"),
        run=ents.get("run"),
        bold=bold,
        events=events[-1] if events else None,
        sidecars=tuple(sidecars),
        confounds=confounds,
    )


def _sibling(
    folder: Path, ents: Mapping[str, str], listing: DirectoryListing, **want: str
) -> Path | None:
    """A file in ``folder`` with the same entities except those in ``want``."""
    target = {**{k: v for k, v in ents.items() if k != "desc"}}
    suffix = want.pop("suffix")
    extensions = want.pop("extensions").split("|")
    drop = set(want.pop("drop", "").split("|")) - {""}
    target = {k: v for k, v in target.items() if k not in drop}
    target.update(want)
    for name, e, suf, ext in listing.files(folder):
        if suf == suffix and ext in extensions and e == target:
            return folder / name
    return None


def _fmriprep_run(
    root: Path, deriv: Path, ents: dict[str, str], bold: Path, listing: DirectoryListing
) -> FmriRun:
    """Record of one fMRIPrep run, with events and sidecars from the raw dataset."""
    raw_ents = {k: v for k, v in ents.items() if k not in ("space", "res", "den", "desc")}
    folder = bold.parent
    mask = _sibling(folder, ents, listing, suffix="mask", extensions=".nii.gz|.nii", desc="brain")
    confounds = _sibling(
        folder,
        ents,
        listing,
        suffix="timeseries",
        extensions=".tsv",
        desc="confounds",
        drop="space|res|den",
    ) or _sibling(
        folder,
        ents,
        listing,
        suffix="regressors",
        extensions=".tsv",
        desc="confounds",
        drop="space|res|den",
    )
    events = find_inherited(
        root, raw_ents, datatype="func", suffix="events", extension=".tsv", listing=listing
    )
    sidecars = find_inherited(
        root, raw_ents, datatype="func", suffix="bold", extension=".json", listing=listing
    )
    own = bold.with_name(bold.name.split(".")[0] + ".json")
    if own.is_file():
        sidecars.append(own)
    return FmriRun(
        subject=ents["sub"],
        session=ents.get("ses"),
        task=ents.get("task"),
        run=ents.get("run"),
        bold=bold,
        events=events[-1] if events else None,
        sidecars=tuple(sidecars),
        mask=mask,
        confounds=confounds,
        space=ents["space"],
    )

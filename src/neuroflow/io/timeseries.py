"""Parcel or vertex time-series runs (Algonauts-2025 style): indexing.

Some datasets share fMRI as (time, target) matrices of parcel or vertex signals rather
than 4-D images (the Algonauts 2025 challenge ships one HDF5 file per subject holding a
(TR, 1000 parcels) dataset per movie segment). :func:`index_timeseries_runs` finds the
runs of such a dataset (``dataset.source: timeseries``) and :func:`timeseries_length`
reads a run's length from its header; both read no values, so that planning a run stays
light. :mod:`neuroflow.preprocessing.fmri.timeseries` reads and cleans each run.

Layout
------
* Per-run files ``sub-<s>/[ses-<x>/]func/sub-<s>[_ses-<x>]_task-<t>[_run-<r>][_...]``
  ``_timeseries.{h5,npy,tsv}`` holding one (time, target) array: ``.npy`` a 2-D float
  array, ``.tsv`` a header of target names and one row per volume, ``.h5`` a file with
  exactly one 2-D dataset.
* Container files: a ``_timeseries.h5`` without a run entity whose 2-D datasets are
  named by BIDS entities (``task-movie_run-1``, Algonauts' ``ses-001_task-s01e02a``);
  each is one run, with the file's entities updated by those of the dataset name. A
  dataset so named that is not 2-D, and an events file beside a container that no run
  of it (or of another file there) takes, are errors naming the file and the dataset:
  a run would otherwise be left out without a word. The entity filters leave them out.
* Target names: the TSV header; else an HDF5 attribute ``target_names`` on the dataset
  or the file; else a ``parcels.tsv`` (columns ``index``, ``name``, one row per column,
  in order) at the dataset root; else ``target-0001``, ``target-0002``, ...
* Events: the run's ``_events.tsv`` and TR: ``RepetitionTime`` of the ``_timeseries.json``
  or ``_bold.json`` sidecars, both found by the BIDS inheritance principle.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from neuroflow.io.bids import (
    DirectoryListing,
    EntityFilters,
    check_root,
    find_inherited,
    nothing_found,
    parse_bids_name,
    record_seen_labels,
    scan_files,
)
from neuroflow.io.records import FmriRun

__all__ = ["EXTENSIONS", "h5_datasets", "index_timeseries_runs", "timeseries_length"]

#: Extensions of time-series files.
EXTENSIONS = (".h5", ".npy", ".tsv")
_ENTITIES_RE = re.compile(r"^[a-zA-Z]+-[a-zA-Z0-9]+(?:_[a-zA-Z]+-[a-zA-Z0-9]+)*$")


def _dataset_entities(name: str) -> dict[str, str] | None:
    """Entities of an HDF5 dataset named like ``ses-001_task-s01e02a``, else ``None``."""
    base = name.rsplit("/", 1)[-1]
    if not _ENTITIES_RE.match(base):
        return None
    parsed = parse_bids_name(f"{base}_timeseries")
    return parsed[0] if parsed else None


def h5_datasets(path: Path) -> list[tuple[str, tuple[int, ...]]]:
    """Every dataset of an HDF5 file as ``(name, shape)``, in the file's order."""
    found: list[tuple[str, tuple[int, ...]]] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            found.append((name, tuple(obj.shape)))

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except OSError as err:
        raise ValueError(f"Time-series file {path} is not a readable HDF5 file: {err}.") from err
    return found


def _h5_runs(
    path: Path, entities: dict[str, str]
) -> tuple[
    list[tuple[dict[str, str], str | None]], list[tuple[dict[str, str], str, tuple[int, ...]]]
]:
    """Runs of one ``_timeseries.h5``.

    Returns
    -------
    runs : list of (dict, str | None)
        ``(entities, container key or None)`` of every run.
    not_2d : list of (dict, str, tuple of int)
        ``(entities, key, shape)`` of the datasets of a container file that are named
        by BIDS entities, and so are runs, but are not 2-D (time, target) arrays.
    """
    datasets = h5_datasets(path)
    two_d = [name for name, shape in datasets if len(shape) == 2]
    named = [(name, _dataset_entities(name)) for name in two_d]
    named = [(name, ents) for name, ents in named if ents]
    not_2d = []
    if "run" not in entities:
        for name, shape in datasets:
            inner = _dataset_entities(name)
            if inner and len(shape) != 2:
                not_2d.append(({**entities, **inner}, name, shape))
    if "run" not in entities and named:
        runs = []
        for name, inner in named:
            for key in ("sub", "ses"):
                if key in inner and key in entities and inner[key] != entities[key]:
                    raise ValueError(
                        f"Dataset {name!r} of time-series file {path} must belong to the "
                        f"file's {key}-{entities[key]}, got {key}-{inner[key]} instead."
                    )
            runs.append(({**entities, **inner}, name))
        return runs, not_2d
    if len(two_d) == 1:
        return [(entities, None)], not_2d
    listed = ", ".join(repr(n) for n, _ in datasets) or "none"
    if "run" in entities:
        raise ValueError(
            f"Time-series file {path} must hold exactly one 2-D (time, target) dataset, "
            f"got {len(two_d)} instead (datasets: {listed})."
        )
    if not_2d:
        return [], not_2d
    raise ValueError(
        f"Time-series file {path} holds no run dataset: a file without a run entity must "
        "hold one 2-D (time, target) dataset, or 2-D datasets named by BIDS entities "
        f"(e.g. 'task-movie_run-1'), got datasets {listed} instead."
    )


def _not_2d_error(path: Path, key: str, shape: tuple[int, ...]) -> ValueError:
    """The error for a container dataset named like a run that is not (time, target)."""
    return ValueError(
        f"Dataset {key!r} of time-series file {path} must be a 2-D (time, target) array, "
        f"got shape {shape} instead: its name makes it a run. Store the run as one "
        "(time, target) matrix, rename the dataset, or leave the run out with "
        "`dataset.runs` (or `dataset.tasks`, `dataset.sessions`)."
    )


def _run_name(entities: Mapping[str, str], folder: Path) -> str:
    """Dataset name a container would give a run: its entities but ``sub`` (and the
    ``ses`` of a session folder)."""
    skip = {"sub"} | ({"ses"} if folder.parent.name.startswith("ses-") else set())
    return "_".join(f"{k}-{v}" for k, v in entities.items() if k not in skip)


def _orphan_events_error(
    events: Path, containers: Sequence[tuple[Path, Sequence[str]]], entities: Mapping[str, str]
) -> ValueError:
    """The error for an events file beside a container file that has no run for it."""
    expected = _run_name(entities, events.parent)
    if len(containers) == 1:
        path, keys = containers[0]
        where = (
            f"the time-series file {path} must hold its run as a 2-D (time, target) dataset "
            f"named by the run's entities ({expected!r}), got datasets "
            f"{', '.join(repr(k) for k in keys) or 'none'} instead"
        )
    else:
        names = ", ".join(p.name for p, _ in containers)
        where = (
            f"one of the time-series files in {events.parent} ({names}) must hold its run as "
            f"a 2-D (time, target) dataset named by the run's entities ({expected!r}), got "
            "none instead"
        )
    return ValueError(
        f"Events file {events} belongs to no time-series run: {where}. Add the run's data, "
        "remove the events file, or leave the run out with `dataset.runs` (or "
        "`dataset.tasks`, `dataset.sessions`)."
    )


def _metadata(
    root: Path,
    entities: Mapping[str, str],
    folder: Path,
    *,
    suffix: str,
    extension: str,
    listing: DirectoryListing,
) -> list[Path]:
    """:func:`find_inherited` for a run, also when its session comes from a dataset name."""
    if "ses" in entities and folder.parent.name != f"ses-{entities['ses']}":
        # an Algonauts container in sub-<s>/func/ names the session of each run inside
        # it: inherit along the file's own folders, keeping metadata of that session only
        outer = {k: v for k, v in entities.items() if k != "ses"}
        found = find_inherited(
            root,
            outer,
            datatype=folder.name,
            suffix=suffix,
            extension=extension,
            listing=listing,
            ignore=("ses",),
        )
        return [
            p
            for p in found
            if (parse_bids_name(p.name) or ({},))[0].get("ses", entities["ses"]) == entities["ses"]
        ]
    return find_inherited(
        root, entities, datatype=folder.name, suffix=suffix, extension=extension, listing=listing
    )


def _record(
    root: Path, entities: dict[str, str], path: Path, key: str | None, listing: DirectoryListing
) -> FmriRun:
    """Record of one time-series run, with inherited events and sidecars."""
    events = _metadata(
        root, entities, path.parent, suffix="events", extension=".tsv", listing=listing
    )
    sidecars = [
        (p, rank)
        for rank, suffix in enumerate(("bold", "timeseries"))
        for p in _metadata(
            root, entities, path.parent, suffix=suffix, extension=".json", listing=listing
        )
    ]
    # least specific first: by folder depth, then number of entities, then suffix
    sidecars.sort(
        key=lambda item: (
            len(item[0].parent.parts),
            len((parse_bids_name(item[0].name) or ({},))[0]),
            item[1],
        )
    )
    return FmriRun(
        subject=entities["sub"],
        session=entities.get("ses"),
        task=entities.get("task"),
        run=entities.get("run"),
        bold=path,
        events=events[-1] if events else None,
        sidecars=tuple(p for p, _ in sidecars),
        kind="timeseries",
        container_key=key,
    )


def index_timeseries_runs(
    root: str | os.PathLike,
    *,
    subjects: Iterable[str] | None = None,
    sessions: Iterable[str] | None = None,
    tasks: Iterable[str] | None = None,
    runs: Iterable[str] | None = None,
    strict: bool = True,
    seen: dict[str, set[str]] | None = None,
) -> list[FmriRun]:
    """Index the parcel or vertex time-series runs of a BIDS-like dataset.

    Parameters
    ----------
    root : path-like
        Dataset root with ``sub-*/[ses-*/]func/*_timeseries.{h5,npy,tsv}`` files.
    subjects, sessions, tasks, runs : iterable of str | None
        Labels to keep (without prefixes); ``None`` or empty keeps all. Labels match as
        integers, so ``"1"`` selects ``run-01``. Runs of container files are filtered
        by their own entities (the file's, updated by the dataset name's).
    strict : bool
        Raise when a filter names a label no run has, or when no run is found.
        ``False`` returns what matches (possibly nothing).
    seen : dict of str to set of str | None
        Filled with the ``ses``, ``task`` and ``run`` labels of every run looked at
        (before filtering).

    Returns
    -------
    runs : list of FmriRun
        Sorted by entity key, with ``kind="timeseries"``; ``container_key`` names the
        run's dataset in a container file. ``events`` and ``sidecars``
        (``_bold.json`` and ``_timeseries.json``) follow the inheritance principle.
    """
    root = check_root(root, "root")
    filters = EntityFilters.from_labels(subjects, sessions, tasks, runs)
    listing = DirectoryListing()
    files = scan_files(
        root,
        datatype="func",
        suffix="timeseries",
        extensions=EXTENSIONS,
        filters=EntityFilters(filters.subjects, None, None, None),
        listing=listing,
        strict=strict,
    )
    records = []
    claimed: set[Path] = set()  # events files that apply to a run (kept or not)
    containers: dict[Path, list[tuple[Path, list[str]]]] = {}
    for entities, path in files:
        if entities.get("desc") == "confounds":  # fMRIPrep's confounds table, not data
            continue
        expanded, not_2d = (
            _h5_runs(path, entities) if path.suffix == ".h5" else ([(entities, None)], [])
        )
        for run_entities, key, shape in not_2d:
            if filters.keep(run_entities):
                raise _not_2d_error(path, key, shape)
        if any(key is not None for _, key in expanded) or not_2d:
            containers.setdefault(path.parent, []).append(
                (path, [key for _, key in expanded if key is not None])
            )
        for run_entities, key in expanded:
            claimed.update(
                _metadata(
                    root,
                    run_entities,
                    path.parent,
                    suffix="events",
                    extension=".tsv",
                    listing=listing,
                )
            )
            if filters.keep(run_entities):
                records.append(_record(root, run_entities, path, key, listing))
    _check_orphan_events(containers, claimed, filters, listing)
    record_seen_labels(filters, seen)
    if strict:
        filters.check(root)
        if not records:
            raise nothing_found(
                "time-series runs", root, "sub-*/[ses-*/]func/*_timeseries.{h5,npy,tsv}"
            )
    keys = [r.key for r in records]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        clash = [
            f"{r.bold.name}" + (f" [{r.container_key}]" if r.container_key else "")
            for r in records
            if r.key == duplicates[0]
        ]
        raise ValueError(
            f"Several time-series files or datasets share the entities {duplicates[0]} "
            f"({', '.join(clash)}); keep one per run or narrow the selection."
        )
    return sorted(records, key=lambda r: r.key)


def _check_orphan_events(
    containers: Mapping[Path, Sequence[tuple[Path, Sequence[str]]]],
    claimed: set[Path],
    filters: EntityFilters,
    listing: DirectoryListing,
) -> None:
    """Raise when an events file beside a container file applies to none of its runs.

    A run missing from a container (or stored under another name) would otherwise be
    left out without a word while its events file says it was recorded. Events files
    that the entity filters leave out are not checked.
    """
    selection = EntityFilters(filters.subjects, filters.sessions, filters.tasks, filters.runs)
    for folder, files in containers.items():
        subjects = {(parse_bids_name(p.name) or ({},))[0].get("sub") for p, _ in files}
        for name, ents, suffix, ext in listing.files(folder):
            events = folder / name
            if suffix != "events" or ext != ".tsv" or events in claimed:
                continue
            if ents.get("sub") in subjects and selection.keep(ents):
                raise _orphan_events_error(events, files, ents)


def timeseries_length(path: str | os.PathLike, container_key: str | None = None) -> int:
    """Time points of one run, from the file's header or shape only (no values read).

    Parameters
    ----------
    path : path-like
        A ``_timeseries.{h5,npy,tsv}`` file.
    container_key : str | None
        The run's dataset in an HDF5 container (``FmriRun.container_key``).

    Returns
    -------
    n_times : int
        Rows of the run's (time, target) array (before any volume is dropped).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Time-series file {path} does not exist.")
    if path.name.endswith(".h5"):
        if container_key is not None:
            with h5py.File(path, "r") as f:
                obj = f.get(container_key)
                if isinstance(obj, h5py.Dataset):
                    return int(obj.shape[0]) if obj.ndim else 0
            raise ValueError(f"Time-series file {path} has no dataset {container_key!r}.")
        two_d = [shape for _, shape in h5_datasets(path) if len(shape) == 2]
        return int(two_d[0][0]) if len(two_d) == 1 else 0
    if path.name.endswith(".npy"):
        shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
        return int(shape[0]) if shape else 0
    with path.open("rb") as f:
        rows = sum(1 for line in f if line.strip())
    return max(rows - 1, 0)  # the header names the targets

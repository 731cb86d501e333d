"""Parcel or vertex time series (Algonauts-2025 style) to a cleaned (time, voxel) store.

Some datasets share fMRI as (time, target) matrices of parcel or vertex signals rather
than 4-D images (the Algonauts 2025 challenge ships one HDF5 file per subject holding a
(TR, 1000 parcels) dataset per movie segment). This module indexes such datasets
(``dataset.source: timeseries``) and writes each run in the exact layout of
:func:`neuroflow.preprocessing.fmri.preprocess_fmri_run`, each target standing for one
voxel, so that feature alignment, encoding and the summaries work unchanged.

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

Only the temporal steps of the ``preprocess_fmri`` section apply (``drop_volumes`` as a
count, ``detrend_order``, ``high_pass``, ``low_pass_hz``, ``standardize``), with the same
functions as the BOLD path (:func:`~neuroflow.preprocessing.fmri.clean.clean_signals`
and :func:`~neuroflow.preprocessing.fmri.clean.cleaning_basis`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.io.arrays import string_array
from neuroflow.io.bids import (
    DirectoryListing,
    EntityFilters,
    check_root,
    find_inherited,
    nothing_found,
    parse_bids_name,
    read_sidecar,
    record_seen_labels,
    scan_files,
)
from neuroflow.io.records import FmriRun
from neuroflow.preprocessing.fmri.inputs import load_events, load_roi_labels, sidecar_paths
from neuroflow.preprocessing.fmri.stage import (
    DEFAULT_CONFIG,
    _chunk_voxels,
    _entities,
    _event_variables,
    check_not_constant,
    clean_time_series,
    resolve_config,
)
from neuroflow.stage_warnings import record_warnings

__all__ = ["index_timeseries_runs", "preprocess_timeseries_run", "timeseries_length"]

logger = logging.getLogger(__name__)

#: Extensions of time-series files.
EXTENSIONS = (".h5", ".npy", ".tsv")
#: Largest difference (s) allowed between an explicit TR and the sidecars' one.
TR_ATOL = 1e-3
#: Fewest time points a run may have.
MIN_TIME_POINTS = 3
#: ``preprocess_fmri`` settings that have no meaning for (time, target) matrices.
_SPATIAL_SETTINGS = ("mask", "smoothing_fwhm", "confounds", "rois")
_ENTITIES_RE = re.compile(r"^[a-zA-Z]+-[a-zA-Z0-9]+(?:_[a-zA-Z]+-[a-zA-Z0-9]+)*$")
_MISSING = frozenset({"", "n/a"})


# --------------------------------------------------------------------------- indexing
def _dataset_entities(name: str) -> dict[str, str] | None:
    """Entities of an HDF5 dataset named like ``ses-001_task-s01e02a``, else ``None``."""
    base = name.rsplit("/", 1)[-1]
    if not _ENTITIES_RE.match(base):
        return None
    parsed = parse_bids_name(f"{base}_timeseries")
    return parsed[0] if parsed else None


def _h5_datasets(path: Path) -> list[tuple[str, tuple[int, ...]]]:
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
    datasets = _h5_datasets(path)
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


# --------------------------------------------------------------------------- reading
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
        two_d = [shape for _, shape in _h5_datasets(path) if len(shape) == 2]
        return int(two_d[0][0]) if len(two_d) == 1 else 0
    if path.name.endswith(".npy"):
        shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
        return int(shape[0]) if shape else 0
    with path.open("rb") as f:
        rows = sum(1 for line in f if line.strip())
    return max(rows - 1, 0)  # the header names the targets


def _dataset_root(path: Path) -> Path | None:
    """The dataset root above a data file (``dataset_description.json``, else sub-*'s parent)."""
    for parent in path.parents:
        if (parent / "dataset_description.json").is_file():
            return parent
    for parent in path.parents:
        if parent.name.startswith("sub-"):
            return parent.parent
    return None


def _names_attribute(obj: h5py.HLObject, where: str) -> list[str] | None:
    """The ``target_names`` attribute of an HDF5 object as a list of str."""
    if "target_names" not in obj.attrs:
        return None
    raw = np.asarray(obj.attrs["target_names"])
    if raw.ndim > 1:
        raise ValueError(
            f"HDF5 attribute 'target_names' of {where} must be 1-D, got shape {raw.shape} instead."
        )
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.atleast_1d(raw).tolist()]


def _read_h5(path: Path, key: str | None) -> tuple[np.ndarray, list[str] | None, str]:
    """The run's array, its ``target_names`` (dataset, else file) and a description."""
    with h5py.File(path, "r") as f:
        if key is not None:
            obj = f.get(key)
            if not isinstance(obj, h5py.Dataset):
                available = [n for n, _ in _h5_datasets(path)]
                raise ValueError(
                    f"Time-series file {path} has no dataset {key!r} (datasets: "
                    f"{', '.join(repr(n) for n in available) or 'none'})."
                )
            where = f"{path} (dataset {key!r})"
        else:
            two_d = [n for n, shape in _h5_datasets(path) if len(shape) == 2]
            if len(two_d) != 1:
                raise ValueError(
                    f"Time-series file {path} must hold exactly one 2-D (time, target) "
                    f"dataset, got {len(two_d)} instead; name the run with `container_key`."
                )
            obj = f[two_d[0]]
            where = f"{path} (dataset {two_d[0]!r})"
        data = obj[()]
        names = _names_attribute(obj, where)
        if names is None:
            names = _names_attribute(f, str(path))
    return np.asarray(data), names, where


def _read_tsv(path: Path) -> tuple[np.ndarray, list[str]]:
    """A (time, target) table: header of target names, ``n/a`` for missing values."""
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    names = [str(c).strip() for c in table.columns]
    data = np.empty(table.shape, np.float64)
    for c, column in enumerate(table.columns):
        cells = table[column].str.strip()
        missing = cells.str.lower().isin(_MISSING)
        values = pd.to_numeric(cells.where(~missing), errors="coerce")
        bad = values.isna() & ~missing
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Time-series file {path}: column {names[c]!r} must be numeric, got "
                f"{cells.iloc[row]!r} in row {row + 1} instead."
            )
        data[:, c] = values.to_numpy(float)
    return data, names


def _load_timeseries(path: Path, key: str | None) -> tuple[np.ndarray, list[str], str]:
    """Checked (time, target) float32 data, target names and a description of the source."""
    if not path.is_file():
        raise FileNotFoundError(f"Time-series file {path} does not exist.")
    names: list[str] | None = None
    where = str(path)
    if key is not None and not path.name.endswith(".h5"):
        raise ValueError(
            f"`container_key` only applies to HDF5 files, got {key!r} for {path} instead."
        )
    if path.name.endswith(".h5"):
        data, names, where = _read_h5(path, key)
    elif path.name.endswith(".npy"):
        try:
            data = np.load(path, allow_pickle=False)
        except ValueError as err:
            raise ValueError(f"Time-series file {path} must hold a numeric array: {err}.") from err
    elif path.name.endswith(".tsv"):
        data, names = _read_tsv(path)
    else:
        raise ValueError(
            f"Time-series file {path} must be a .h5, .npy or .tsv file, got {path.name!r} instead."
        )
    if data.ndim != 2:
        raise ValueError(
            f"Time-series file {where} must hold a 2-D (time, target) array, got shape "
            f"{data.shape} instead."
        )
    if data.dtype.kind not in "fiu":
        raise ValueError(
            f"Time-series file {where} must hold numbers, got dtype {data.dtype} instead."
        )
    if data.shape[0] < MIN_TIME_POINTS:
        raise ValueError(
            f"Time-series file {where} must have at least {MIN_TIME_POINTS} time points, "
            f"got {data.shape[0]} instead."
        )
    if data.shape[1] < 1:
        raise ValueError(f"Time-series file {where} must have at least 1 target, got 0.")
    n_bad = int(data.size - np.count_nonzero(np.isfinite(data)))
    if n_bad:
        raise ValueError(
            f"Time-series file {where} has {n_bad} NaN or infinite value(s); it must be finite."
        )
    if names is not None and len(names) != data.shape[1]:
        raise ValueError(
            f"Target names of {where} must have one name per target ({data.shape[1]}), got "
            f"{len(names)} instead."
        )
    if names is None:
        names = _parcel_names(path, data.shape[1])
    return np.ascontiguousarray(data, dtype=np.float32), names, where


def _parcel_names(path: Path, n_targets: int) -> list[str]:
    """Names from the dataset's ``parcels.tsv``, else ``target-0001``, ..."""
    root = _dataset_root(path)
    table = root / "parcels.tsv" if root is not None else None
    if table is not None and table.is_file():
        names = list(load_roi_labels(table).values())
        if len(names) != n_targets:
            raise ValueError(
                f"Parcel table {table} must have one row per target of {path} ({n_targets}), "
                f"got {len(names)} instead."
            )
        return names
    width = max(4, len(str(n_targets)))
    return [f"target-{t + 1:0{width}d}" for t in range(n_targets)]


def _repetition_time(
    metadata: Mapping[str, Any], explicit: float | None, *, source: str, sidecars: Sequence[Path]
) -> float:
    """TR in seconds: ``explicit`` (checked against the sidecars), else the sidecars'."""
    sidecar_tr = metadata.get("RepetitionTime")
    if sidecar_tr is not None and (
        isinstance(sidecar_tr, bool) or not isinstance(sidecar_tr, int | float) or sidecar_tr <= 0
    ):
        raise ValueError(
            f"RepetitionTime in the sidecars of {source} must be a positive number, got "
            f"{sidecar_tr!r} instead."
        )
    if explicit is not None:
        if isinstance(explicit, bool) or not isinstance(explicit, int | float) or explicit <= 0:
            raise ValueError(
                f"`dataset.repetition_time` must be a positive number, got {explicit!r} instead."
            )
        if sidecar_tr is not None and abs(float(explicit) - float(sidecar_tr)) > TR_ATOL:
            raise ValueError(
                f"`dataset.repetition_time` is {explicit} s but RepetitionTime in the sidecars of "
                f"{source} ({', '.join(p.name for p in sidecars)}) is {sidecar_tr} s; they "
                f"must agree within {TR_ATOL} s."
            )
        return float(explicit)
    if sidecar_tr is None:
        found = ", ".join(p.name for p in sidecars) or "none found"
        raise ValueError(
            f"No repetition time for {source}: no RepetitionTime in its JSON sidecars "
            f"({found}) and no `dataset.repetition_time` given."
        )
    return float(sidecar_tr)


# --------------------------------------------------------------------------- stage
def preprocess_timeseries_run(
    *,
    timeseries: str | os.PathLike,
    output: str | os.PathLike,
    config: Mapping[str, Any] | None,
    provenance: Mapping[str, Any],
    container_key: str | None = None,
    events: str | os.PathLike | None = None,
    sidecars: Sequence[str | os.PathLike] = (),
    repetition_time: float | None = None,
) -> Path:
    """Clean one run of parcel or vertex time series and write it like a BOLD run.

    Parameters
    ----------
    timeseries : path-like
        ``_timeseries.h5`` (one 2-D dataset, or a container with ``container_key``),
        ``_timeseries.npy`` (2-D) or ``_timeseries.tsv`` (header of target names), each
        holding an array of shape (n_times, n_targets).
    output : path-like
        Store to write (``.zarr``).
    config : dict | None
        The ``preprocess_fmri`` config section (defaults fill missing keys). Only its
        temporal steps apply; ``drop_volumes: auto`` drops nothing. ``mask``,
        ``smoothing_fwhm``, ``confounds`` and ``rois`` are ignored (a log line says so
        when they differ from their defaults).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    container_key : str | None
        Dataset of the run in an HDF5 container file (``FmriRun.container_key``).
    events : path-like | None
        The run's ``_events.tsv``.
    sidecars : sequence of path-like
        JSON sidecars, least specific first (``FmriRun.sidecars``).
    repetition_time : float | None
        TR in seconds; wins over the sidecars' ``RepetitionTime`` but must agree with
        it within 1e-3 s. Needed when no sidecar gives one.

    Returns
    -------
    output : Path
        The written store, laid out as :func:`preprocess_fmri_run`'s with one voxel per
        target: ``bold`` (float32, dims ``(time, voxel)``), coordinates ``time`` (s,
        acquisition clock: volume index × TR), ``voxel`` and ``roi`` (the target's
        name), no ``i/j/k/x/y/z``; event variables on the ``event`` dim;
        ``nuisance_basis`` (time, nuisance) when the cleaning is one projection; attrs
        ``tr``, ``entities``, ``steps``, ``source_file``, ``container_key`` (container
        runs), ``n_volumes_acquired``, ``target_kind`` (``"parcel"``) and ``warnings``
        (the warnings raised while the run was read and cleaned; also logged).
    """
    with record_warnings():  # kept in the store by write_dataset, even outside a job
        ds, encoding = _clean_timeseries(
            path=Path(timeseries),
            config=config,
            container_key=container_key,
            events=events,
            sidecars=sidecars,
            repetition_time=repetition_time,
        )
        return write_dataset(ds, output, provenance=provenance, encoding=encoding)


def _clean_timeseries(
    *,
    path: Path,
    config: Mapping[str, Any] | None,
    container_key: str | None,
    events: str | os.PathLike | None,
    sidecars: Sequence[str | os.PathLike],
    repetition_time: float | None,
) -> tuple[xr.Dataset, dict[str, Any]]:
    """The cleaned run as a dataset and its zarr encoding.

    See :func:`preprocess_timeseries_run`.
    """
    cfg = resolve_config(config)
    data, names, where = _load_timeseries(path, container_key)
    n_volumes, n_targets = data.shape
    side = sidecar_paths(sidecars)
    tr = _repetition_time(read_sidecar(side), repetition_time, source=where, sidecars=side)
    event_table = load_events(events, run_duration=n_volumes * tr)
    ignored = [key for key in _SPATIAL_SETTINGS if cfg[key] != DEFAULT_CONFIG[key]]
    if ignored:
        logger.warning(
            "preprocess_fmri settings %s do not apply to time series and are ignored for %s.",
            ", ".join(ignored),
            where,
        )

    drop = cfg["drop_volumes"]
    n_drop = 0 if drop == "auto" else int(drop)
    if n_volumes - n_drop < MIN_TIME_POINTS:
        raise ValueError(
            f"Dropping {n_drop} volumes leaves fewer than {MIN_TIME_POINTS} of the "
            f"{n_volumes} in {where}."
        )
    steps: list[dict[str, Any]] = [
        {"name": "drop_volumes", "n": n_drop, "source": "auto" if drop == "auto" else "config"}
    ]
    kept = np.arange(n_drop, n_volumes)
    check_not_constant(data[n_drop:], source=where)
    cleaned, basis, clean_steps = clean_time_series(data[n_drop:], cfg, tr=tr)
    steps += clean_steps

    coords: dict[str, Any] = {
        "time": ("time", kept * tr, {"units": "s"}),
        "voxel": ("voxel", np.arange(n_targets)),
        "roi": ("voxel", string_array(names)),
    }
    variables: dict[str, Any] = {
        "bold": (
            ("time", "voxel"),
            cleaned.astype(np.float32, copy=False),
            {"units": "z" if cfg["standardize"] else "a.u."},
        ),
        **_event_variables(event_table),
    }
    if basis is not None:
        variables["nuisance_basis"] = (
            ("time", "nuisance"),
            basis.astype(np.float32),
            {
                "description": "orthonormal basis of what the cleaning projected out "
                "(constant, trends, cosines, confounds); (I - Q Q^T) filters a model's "
                "predictions like the data"
            },
        )
    entities = _entities(path)
    if container_key is not None:
        entities.update(_entities(Path(f"{container_key.rsplit('/', 1)[-1]}_timeseries")))
    ds = xr.Dataset(variables, coords=coords)
    ds.attrs.update(
        {
            "tr": tr,
            "n_volumes_acquired": int(n_volumes),
            "steps": steps,
            "source_file": str(path),
            "entities": entities,
            "target_kind": "parcel",
        }
    )
    if container_key is not None:
        ds.attrs["container_key"] = container_key
    encoding = {"bold": {"chunks": (len(kept), _chunk_voxels(len(kept), n_targets))}}
    return ds, encoding

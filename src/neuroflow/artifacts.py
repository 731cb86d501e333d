"""Versioned, atomically written zarr artifacts with provenance.

Every stage of the workflow writes its results through :func:`write_dataset`.
A store's path carries a *version id* (see :func:`version_id`): a short hash of
the stage's configuration section, the version ids of its inputs and the
stage's format version. Store attributes carry the provenance under the
``"neuroflow"`` key.

Writes are atomic: the store is built in a hidden sibling directory and renamed
into place only once complete, so an interrupted job never leaves a store at
the expected path.

Just before that rename, a manifest records every file of the store with its size
and checksum (:mod:`neuroflow.manifests`); :func:`open_dataset` refuses a store that
lost or changed a file, since zarr would otherwise read a lost chunk as fill values.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import errno
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import socket
import sys
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.manifests import (
    check_intact,
    has_manifest,
    verify_store,
    write_manifest,
)
from neuroflow.stage_warnings import PROVENANCE_KEY, with_job_warnings

__all__ = [
    "PROVENANCE_KEY",
    "atomic_directory",
    "build_provenance",
    "canonical_json",
    "consolidated_metadata_allowed",
    "find_stores",
    "fixed_width_strings",
    "is_partial",
    "jsonable",
    "keep_committed_stores",
    "open_dataset",
    "python_strings",
    "read_provenance",
    "software_versions",
    "version_id",
    "write_dataset",
]


#: Number of hexadecimal characters in a version id.
VERSION_LENGTH = 10


#: Marker in the names of hidden directories that hold a write in progress.
PARTIAL_MARKER = ".partial-"


_TRACKED_PACKAGES = (
    "neuroflow",
    "numpy",
    "scipy",
    "xarray",
    "zarr",
    "torch",
    "mne",
    "mne-bids",
    "nilearn",
    "nibabel",
    "scikit-learn",
    "himalaya",
    "rsatoolbox",
    "transformers",
    "sentence-transformers",
    "snakemake",
)


def jsonable(value: Any) -> Any:
    """Convert numpy scalars, paths and tuples into plain JSON types."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` as canonical JSON (sorted keys, no whitespace).

    Parameters
    ----------
    obj : object
        Any structure of mappings, sequences and scalars.

    Returns
    -------
    text : str
        The same text for equal structures, whatever their key order.
    """
    return json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"))


def version_id(
    *,
    stage: str,
    config: Mapping[str, Any] | None,
    inputs: Mapping[str, str] | None = None,
    format_version: int = 1,
) -> str:
    """Compute the version id of one stage's output.

    Parameters
    ----------
    stage : str
        Stage name, e.g. ``"preprocess_fmri"``.
    config : dict | None
        The stage's own configuration section.
    inputs : dict of str to str | None
        Version ids of the upstream artifacts, keyed by a stable name.
    format_version : int
        Bumped by the stage's code when its output changes meaning.

    Returns
    -------
    version : str
        ``VERSION_LENGTH`` hexadecimal characters.
    """
    if not isinstance(format_version, int) or format_version < 1:
        raise ValueError(f"format_version must be a positive int, got {format_version!r} instead.")
    payload = canonical_json(
        {
            "stage": stage,
            "config": config or {},
            "inputs": dict(inputs or {}),
            "format_version": format_version,
        }
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:VERSION_LENGTH]


def software_versions() -> dict[str, str]:
    """Versions of Python and the scientific packages that shape results.

    Read once per process (each package's metadata is searched for along the whole
    import path: ~8 ms for all of them, at every store written otherwise); a job
    started warm inherits the server's reading.

    Returns
    -------
    versions : dict of str to str
        Package name to version; packages that are not installed are omitted.
    """
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    versions = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return tuple(versions.items())


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """Read the provenance record of a zarr store.

    Parameters
    ----------
    path : path-like
        A store written by :func:`write_dataset`.

    Returns
    -------
    provenance : dict
        The record, or an empty dict when the store has none.
    """
    import zarr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No artifact at {path}.")
    group = zarr.open_group(str(path), mode="r")
    record = dict(group.attrs).get(PROVENANCE_KEY, {})
    return dict(record) if isinstance(record, Mapping) else {}


def _input_record(path: str | os.PathLike) -> dict[str, Any]:
    """Describe one upstream input: its path and, for artifacts, its version."""
    path = Path(path)
    record: dict[str, Any] = {"path": str(path)}
    if path.suffix == ".zarr" and path.is_dir():
        prov = read_provenance(path)
        record["stage"] = prov.get("stage")
        record["version"] = prov.get("version")
    else:
        marker = path / ".neuroflow.json" if path.is_dir() else None
        if marker is not None and marker.exists():
            meta = json.loads(marker.read_text())
            record["stage"] = meta.get("stage")
            record["version"] = meta.get("version")
    return record


def build_provenance(
    *,
    stage: str,
    version: str,
    config: Mapping[str, Any] | None,
    inputs: Sequence[str | os.PathLike] = (),
    format_version: int = 1,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the provenance record stored with an artifact.

    Parameters
    ----------
    stage : str
        Stage name.
    version : str
        The stage's version id (the one in the output path).
    config : dict | None
        The stage's configuration section.
    inputs : sequence of path-like
        Upstream files or stores; stores contribute their stage and version.
    format_version : int
        The stage's format version.
    extra : dict | None
        Stage-specific facts (e.g. a model-weights hash).

    Returns
    -------
    provenance : dict
        JSON-serialisable record.
    """
    record = {
        "stage": stage,
        "version": version,
        "format_version": format_version,
        "config": jsonable(dict(config or {})),
        "inputs": [_input_record(p) for p in inputs],
        "software": software_versions(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv[:1]),
    }
    if extra:
        record["extra"] = jsonable(dict(extra))
    return record


def find_stores(folder: str | os.PathLike) -> list[Path]:
    """Every zarr store under a folder.

    Parameters
    ----------
    folder : path-like
        E.g. the results folder.

    Returns
    -------
    stores : list of Path
        Sorted folders holding a ``zarr.json``; the search does not enter stores
        nor hidden folders (``.partial-`` writes in progress, ``.snakemake``).
    """
    stores = []
    for here, dirs, files in os.walk(folder):
        if "zarr.json" in files:
            stores.append(Path(here))
            dirs.clear()
            continue
        dirs[:] = [d for d in dirs if not d.startswith(".")]
    return sorted(stores)


def is_partial(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a hidden directory of a write in progress."""
    return PARTIAL_MARKER in Path(path).name


#: Whether committed stores are kept when written again (see :func:`keep_committed_stores`).
_KEEP_COMMITTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "neuroflow_keep_committed", default=False
)


@contextlib.contextmanager
def keep_committed_stores() -> Iterator[None]:
    """Within this block, a store written where an intact one exists keeps the existing one.

    Workflow jobs run inside it (:func:`neuroflow.workflow.runner.run_job`): their outputs
    live under versioned paths, so an intact store already at the path was written from
    the same inputs and config, by a concurrent run of another config that shares the
    stage (``--nolock``), and a job of that run may be reading it lazily. Outside the
    block (library use, tests) a new write replaces the old store, as it always did.
    """
    token = _KEEP_COMMITTED.set(True)
    try:
        yield
    finally:
        _KEEP_COMMITTED.reset(token)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Write a file under a hidden temporary name and move it into place when complete.

    Parameters
    ----------
    path : path-like
        Final location (its folder is created).

    Yields
    ------
    tmp : Path
        Hidden sibling to write; removed if the body raises, so ``path`` keeps what it
        held.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}{PARTIAL_MARKER}{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_directory(
    path: str | os.PathLike, *, manifest: bool | None = None, keep_intact: bool | None = None
) -> Iterator[Path]:
    """Build a directory under a temporary name and move it into place.

    Parameters
    ----------
    path : path-like
        Final location. An existing directory there is replaced only after the
        new one is complete.
    manifest : bool | None
        Write the manifest of the finished directory (see :func:`write_manifest`)
        just before the rename. None (default): when ``path`` ends in ``.zarr``
        and the directory holds a ``zarr.json``, i.e. for every store, including
        those built chunk by chunk outside :func:`write_dataset`.
    keep_intact : bool | None
        When ``path`` already holds an intact store (one whose manifest verifies), or a
        folder that is not a store (figures), keep it and discard the new write instead
        of replacing it: replacing a store that another job reads lazily would make the
        chunks it has not read yet vanish, and replacing a folder would leave a moment
        without it. None (default): inside :func:`keep_committed_stores` (every workflow
        job), else replace. (Snakemake deletes a job's outputs before it reruns it, so
        a deliberate rerun never meets an existing store; see
        :mod:`neuroflow.workflow.concurrent_runs` for the one it keeps.)

    Yields
    ------
    tmp : Path
        Hidden sibling directory to write into.

    Notes
    -----
    If the body raises, the temporary directory is removed and ``path`` is left
    as it was. If the process is killed, only the hidden ``.partial-`` sibling
    remains; it never has the final name, so no later run accepts it.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}{PARTIAL_MARKER}{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        yield tmp
        if manifest is None:
            manifest = final.suffix == ".zarr" and (tmp / "zarr.json").is_file()
        if manifest:
            write_manifest(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep_intact is None:
        keep_intact = _KEEP_COMMITTED.get()
    if keep_intact and (is_intact_store(final) or _committed_folder(final)):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError as err:
        # another writer committed between the check and the rename
        if not (keep_intact and err.errno in (errno.ENOTEMPTY, errno.EEXIST)):
            raise
        if not is_intact_store(final):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _committed_folder(path: Path) -> bool:
    """Whether ``path`` is a folder other than a store, committed by an atomic rename.

    Inside a workflow job Snakemake has deleted the job's outputs before it ran (unless a
    concurrent run committed them, see :mod:`neuroflow.workflow.concurrent_runs`), and a
    folder written by :func:`atomic_directory` never has its final name before it is
    complete: one that exists now is a concurrent run's finished copy.
    """
    return path.suffix != ".zarr" and path.is_dir()


def is_intact_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a committed store whose files match its manifest (sizes).

    Parameters
    ----------
    path : path-like
        Any path; missing paths and plain files are not stores.

    Returns
    -------
    intact : bool
    """
    path = Path(path)
    return path.is_dir() and has_manifest(path) and not verify_store(path, checksums=False)


def _default_encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Chunk large float arrays along their last dimension (≥ ~1 MB a chunk)."""
    encoding: dict[str, dict[str, Any]] = {}
    for name, var in ds.data_vars.items():
        if var.ndim == 0 or var.dtype.kind not in "fiu":
            continue
        shape = var.shape
        lead = int(np.prod(shape[:-1])) if var.ndim > 1 else 1
        per_column = max(lead * var.dtype.itemsize, 1)
        target = 4 * 2**20
        last = int(min(shape[-1], max(1, target // per_column)))
        encoding[name] = {"chunks": (*shape[:-1], last)}
    return encoding


def _all_str(values: np.ndarray) -> bool:
    return all(isinstance(v, str) for v in values.ravel())


def _with_variables(ds: xr.Dataset, variables: Mapping[str, xr.Variable]) -> xr.Dataset:
    """``ds`` with ``variables`` in place of its own of the same names (coordinates stay
    coordinates); ``ds`` itself when there are none."""
    if not variables:
        return ds
    coords = {n: v for n, v in variables.items() if n in ds.coords}
    data = {n: v for n, v in variables.items() if n not in coords}
    return ds.assign_coords(coords).assign(data)


def fixed_width_strings(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its text arrays as numpy fixed-width unicode (``<U``).

    A store's text then reads back with plain :func:`xarray.open_zarr` as ordinary
    numpy strings: ``values.astype(str)``, :mod:`pandas` and ``np.char`` work on it.
    Variable-length UTF-8 would read back as numpy's ``StringDType`` (kind ``"T"``),
    which ``astype(str)`` refuses. Zarr v3 stores it with the ``fixed_length_utf32``
    extension data type of the zarr-extensions registry, which zarr-python and zarrs
    read. Text is labels and names (coordinates mostly), so the fixed width costs little
    once compressed.

    Parameters
    ----------
    ds : xarray.Dataset
        Any dataset; it is not modified.

    Returns
    -------
    ds : xarray.Dataset
        A shallow copy whose text variables and coordinates (index ones included) are
        ``<U`` arrays: ``StringDType`` arrays and ``object`` arrays of ``str``
        only (``object`` arrays holding anything else stay as they are); the same
        object when there are none.
    """
    fixed: dict[str, xr.Variable] = {}
    for name, var in ds.variables.items():
        kind = var.dtype.kind
        if kind not in "OT":
            continue
        values = np.asarray(var.values, dtype=object)
        if kind == "O" and not _all_str(values):
            continue
        width = max((len(v) for v in values.ravel()), default=1)
        fixed[name] = xr.Variable(var.dims, values.astype(f"<U{max(width, 1)}"), var.attrs)
    return _with_variables(ds, fixed)


def python_strings(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its text as ``object`` arrays of ``str``.

    :func:`write_dataset` stores text as fixed-width unicode (``<U``; older stores as
    variable-length strings, which read back as numpy's ``StringDType``, kind ``"T"``).
    neuroflow's own code reads ``object`` arrays of ``str``, what xarray has always given
    for text: a longer label written into one is kept whole, where a ``<U`` array would
    cut it to its width. The text variables are small (labels), so they are read here.

    Parameters
    ----------
    ds : xarray.Dataset
        A dataset as :func:`xarray.open_zarr` returns it; it is not modified.

    Returns
    -------
    ds : xarray.Dataset
        A shallow copy whose ``<U`` and ``StringDType`` variables and coordinates hold
        ``object`` arrays of ``str`` (kind ``"O"``); the same object when there are none.
    """
    plain = {
        name: xr.Variable(
            var.dims,
            np.asarray(var.values, dtype=object),
            var.attrs,
            {k: v for k, v in var.encoding.items() if k != "dtype"},
        )
        for name, var in ds.variables.items()
        if var.dtype.kind in "TU"
    }
    return _with_variables(ds, plain)


@contextlib.contextmanager
def consolidated_metadata_allowed() -> Iterator[None]:
    """Silence zarr-python's notices on the zarr v3 extensions neuroflow writes.

    neuroflow consolidates every store's metadata (xarray opens it in one read) and
    stores text as ``fixed_length_utf32`` (:func:`fixed_width_strings`), whose
    specification zarr-python 3.1 does not know of yet; the notices would otherwise
    fill every job log.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        warnings.filterwarnings(
            "ignore", message=r"The data type \(FixedLengthUTF32", category=FutureWarning
        )
        yield


def write_dataset(
    ds: xr.Dataset,
    path: str | os.PathLike,
    *,
    provenance: Mapping[str, Any],
    encoding: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write an xarray dataset as a zarr v3 store, atomically, with provenance.

    Parameters
    ----------
    ds : xarray.Dataset
        Data with named dimensions and coordinates.
    path : path-like
        Output store, conventionally ending in ``.zarr``.
    provenance : dict
        Record from :func:`build_provenance`, stored under ``attrs["neuroflow"]``.
    encoding : dict | None
        Per-variable zarr encoding; large numeric arrays are chunked at about
        4 MB along their last dimension by default.

    Returns
    -------
    path : Path
        The final location of the store, with its manifest (:data:`MANIFEST_NAME`).
    """
    path = Path(path)
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__} instead.")
    out = fixed_width_strings(ds.copy(deep=False))
    # the job's warnings so far travel with the store
    out.attrs = with_job_warnings({**ds.attrs, PROVENANCE_KEY: jsonable(dict(provenance))})
    for name in list(out.variables):
        out[name].encoding = {}
    enc = _default_encoding(out)
    for name, spec in (encoding or {}).items():
        enc.setdefault(name, {}).update(spec)
    with atomic_directory(path, manifest=True) as tmp, consolidated_metadata_allowed():
        out.to_zarr(str(tmp), mode="w", zarr_format=3, consolidated=True, encoding=enc)
    return path


def open_dataset(path: str | os.PathLike, **kwargs: Any) -> xr.Dataset:
    """Open an artifact written by :func:`write_dataset`, refusing a damaged one.

    Parameters
    ----------
    path : path-like
        The store.
    **kwargs
        Passed to :func:`xarray.open_zarr`; ``chunks`` defaults to None (variables are
        read from the store when their values are first used, as xarray does without
        dask, also where dask is installed; xarray's default ``"auto"`` searched the
        installed packages' entry points for a chunk manager at every first opening of
        a process, ~20 ms per job).

    Returns
    -------
    ds : xarray.Dataset
        Lazily loaded dataset.

    Raises
    ------
    DamagedStoreError
        When a file listed in the store's manifest is missing or has another size,
        or a file the manifest does not list appeared (see :func:`verify_store`).
        Stores without a manifest open unchecked.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No artifact at {path}.")
    if is_partial(path):
        raise ValueError(f"{path} is an incomplete write, not an artifact.")
    check_intact(path)
    kwargs.setdefault("chunks", None)
    return python_strings(xr.open_zarr(str(path), **kwargs))

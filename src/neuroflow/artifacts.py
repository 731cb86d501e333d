"""Versioned, atomically written zarr artifacts with provenance.

Every stage of the workflow writes its results through :func:`write_dataset`.
A store's path carries a *version id* (see :func:`version_id`): a short hash of
the stage's configuration section, the version ids of its inputs and the
stage's format version. Store attributes carry the provenance under the
``"neuroflow"`` key.

Writes are atomic: the store is built in a hidden sibling directory and renamed
into place only once complete, so an interrupted job never leaves a store at
the expected path.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
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

__all__ = [
    "PROVENANCE_KEY",
    "atomic_directory",
    "build_provenance",
    "canonical_json",
    "is_partial",
    "open_dataset",
    "read_provenance",
    "software_versions",
    "version_id",
    "write_dataset",
]

#: Attribute key under which every store keeps its provenance record.
PROVENANCE_KEY = "neuroflow"
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


def _jsonable(value: Any) -> Any:
    """Convert numpy scalars, paths and tuples into plain JSON types."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
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
    return json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"))


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

    Returns
    -------
    versions : dict of str to str
        Package name to version; packages that are not installed are omitted.
    """
    versions = {"python": platform.python_version()}
    for name in _TRACKED_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


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
        "config": _jsonable(dict(config or {})),
        "inputs": [_input_record(p) for p in inputs],
        "software": software_versions(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv[:1]),
    }
    if extra:
        record["extra"] = _jsonable(dict(extra))
    return record


def is_partial(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a hidden directory of a write in progress."""
    return PARTIAL_MARKER in Path(path).name


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name and move it into place.

    Parameters
    ----------
    path : path-like
        Final location. An existing directory there is replaced only after the
        new one is complete.

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
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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
        The final location of the store.
    """
    path = Path(path)
    if not isinstance(ds, xr.Dataset):
        raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__} instead.")
    out = ds.copy(deep=False)
    out.attrs = {**ds.attrs, PROVENANCE_KEY: _jsonable(dict(provenance))}
    for name in list(out.variables):
        out[name].encoding = {}
    enc = _default_encoding(out)
    for name, spec in (encoding or {}).items():
        enc.setdefault(name, {}).update(spec)
    with atomic_directory(path) as tmp, warnings.catch_warnings():
        # Consolidated metadata is a zarr-python extension of v3; xarray reads it fast.
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        out.to_zarr(str(tmp), mode="w", zarr_format=3, consolidated=True, encoding=enc)
    return path


def open_dataset(path: str | os.PathLike, **kwargs: Any) -> xr.Dataset:
    """Open an artifact written by :func:`write_dataset`.

    Parameters
    ----------
    path : path-like
        The store.
    **kwargs
        Passed to :func:`xarray.open_zarr`.

    Returns
    -------
    ds : xarray.Dataset
        Lazily loaded dataset.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No artifact at {path}.")
    if is_partial(path):
        raise ValueError(f"{path} is an incomplete write, not an artifact.")
    return xr.open_zarr(str(path), **kwargs)

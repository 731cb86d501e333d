"""Parcel or vertex time series (Algonauts-2025 style) to a cleaned (time, voxel) store.

Some datasets share fMRI as (time, target) matrices of parcel or vertex signals rather
than 4-D images (the Algonauts 2025 challenge ships one HDF5 file per subject holding a
(TR, 1000 parcels) dataset per movie segment). :mod:`neuroflow.io.timeseries` indexes such
datasets (``dataset.source: timeseries``); this module writes each run in the exact layout of
:func:`neuroflow.preprocessing.fmri.preprocess_fmri_run`, each target standing for one
voxel, so that feature alignment, encoding and the summaries work unchanged.

Layout: see :mod:`neuroflow.io.timeseries`; target names and TR are read here.

Only the temporal steps of the ``preprocess_fmri`` section apply (``drop_volumes`` as a
count, ``detrend_order``, ``high_pass``, ``low_pass_hz``, ``standardize``), with the same
functions as the BOLD path (:func:`~neuroflow.preprocessing.fmri.clean.clean_signals`
and :func:`~neuroflow.preprocessing.fmri.clean.cleaning_basis`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.io.arrays import string_array
from neuroflow.io.bids import read_sidecar
from neuroflow.io.timeseries import h5_datasets
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

__all__ = ["preprocess_timeseries_run"]

logger = logging.getLogger(__name__)

#: Largest difference (s) allowed between an explicit TR and the sidecars' one.
TR_ATOL = 1e-3
#: Fewest time points a run may have.
MIN_TIME_POINTS = 3
#: ``preprocess_fmri`` settings that have no meaning for (time, target) matrices.
_SPATIAL_SETTINGS = ("mask", "smoothing_fwhm", "confounds", "rois")
_MISSING = frozenset({"", "n/a"})


# --------------------------------------------------------------------------- reading
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
                available = [n for n, _ in h5_datasets(path)]
                raise ValueError(
                    f"Time-series file {path} has no dataset {key!r} (datasets: "
                    f"{', '.join(repr(n) for n in available) or 'none'})."
                )
            where = f"{path} (dataset {key!r})"
        else:
            two_d = [n for n, shape in h5_datasets(path) if len(shape) == 2]
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

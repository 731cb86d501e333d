"""The runs an encoding model reads: BOLD (or parcel means) and aligned features per run.

Loading and checking the run stores of one subject (the same voxels, the same TR, the
features of every space on the BOLD's time grid, an HRF library's columns), grouping
held-out runs that repeat one stimulus sequence, and the cross-validation groups of the
training runs. :mod:`neuroflow.encoding.fitting` fits models on these runs and
:mod:`neuroflow.encoding.stage` writes the store.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.records import entity_key, run_matches
from neuroflow.trial_split import N_BLOCKS_ONE_RUN

__all__ = ["event_columns", "group_repeats", "hrf_library"]

logger = logging.getLogger(__name__)


@dataclass
class _Run:
    """One run's arrays and identity."""

    path: Path
    key: str
    entities: dict[str, Any]
    bold: np.ndarray  # (n_times, n_voxels)
    time: np.ndarray  # (n_times,)
    features: dict[str, np.ndarray] = field(default_factory=dict)  # space -> (n_times, n_feat)
    stimuli: Any = None
    nuisance: np.ndarray | None = None  # (n_times, n_nuisance), orthonormal columns
    sequence: tuple[str, ...] = ()  # stim_file of every event, in order
    # for spaces aligned with an HRF library: the HRF models and each column's model index
    libraries: dict[str, tuple[str, ...]] = field(default_factory=dict)
    variants: dict[str, np.ndarray] = field(default_factory=dict)
    # per space, which columns are the event regressor (the response to every event)
    events: dict[str, np.ndarray] = field(default_factory=dict)


def _as_parcels(ds: xr.Dataset, path: Path) -> xr.Dataset:
    """A run store whose targets are its parcel means (``parcel_bold``) instead of voxels."""
    if "parcel_bold" not in ds:
        if ds.attrs.get("target_kind") == "parcel":
            return ds  # time series of parcels already
        raise ValueError(
            f"{path}: `encoding.target: parcels` needs the variable `parcel_bold` (time, "
            "parcel); set `preprocess_fmri.rois.parcels: true` with an atlas."
        )
    names = [str(v) for v in ds["parcel"].values]
    out = xr.Dataset(
        {"bold": (("time", "voxel"), ds["parcel_bold"].values, dict(ds["bold"].attrs))},
        coords={
            "time": ds["time"],
            "voxel": ("voxel", np.arange(len(names))),
            "roi": ("voxel", np.array(names, dtype=object)),
        },
        attrs={**ds.attrs, "target_kind": "parcel"},
    )
    if "nuisance_basis" in ds:
        out["nuisance_basis"] = ds["nuisance_basis"]
    for name in ds.variables:
        if ds[name].dims == ("event",):
            out[name] = ds[name]
    return out


def _load_brain(path: Path, target: str = "voxels") -> tuple[_Run, xr.Dataset]:
    ds = open_dataset(path)
    if target == "parcels":
        ds = _as_parcels(ds, path)
    if "bold" not in ds:
        raise ValueError(f"{path}: variable `bold` is missing.")
    if ds["bold"].dims != ("time", "voxel"):
        raise ValueError(f"{path}: `bold` must have dims (time, voxel), got {ds['bold'].dims}.")
    entities = dict(ds.attrs.get("entities") or {})
    if not entities.get("subject"):
        raise ValueError(f"{path}: attribute `entities` must name the subject.")
    bold = np.asarray(ds["bold"].values, dtype=np.float32)
    if not np.all(np.isfinite(bold)):
        raise ValueError(f"{path}: `bold` holds non-finite values.")
    names = ("subject", "session", "task", "run")
    key = entity_key(*(entities.get(n) for n in names))
    run = _Run(path, key, entities, bold, np.asarray(ds["time"].values))
    run.stimuli = ds.attrs.get("stim_files")
    if "stim_file" in ds.variables:
        run.sequence = tuple(
            str(v) for v in ds["stim_file"].values if str(v).strip().lower() not in _MISSING
        )
    if "nuisance_basis" in ds:
        basis = ds["nuisance_basis"]
        if basis.dims != ("time", "nuisance") or basis.shape[0] != bold.shape[0]:
            raise ValueError(
                f"{path}: `nuisance_basis` must have dims (time, nuisance) with "
                f"{bold.shape[0]} time points, got {basis.dims} {basis.shape} instead."
            )
        run.nuisance = np.asarray(basis.values, dtype=np.float64)
    return run, ds


def _load_features(
    path: Path, run: _Run
) -> tuple[np.ndarray, Any, tuple[str, ...], np.ndarray | None]:
    """Aligned features of one run: ``(X, stim_files, hrf_library, hrf_variant)``.

    ``hrf_library`` names the HRF models the store was aligned with (empty when not
    aligned by HRF) and ``hrf_variant`` gives the model index of every column when
    there are several (else ``None``).
    """
    ds = open_dataset(path)
    if "features" not in ds:
        raise ValueError(f"{path}: variable `features` is missing.")
    if ds["features"].dims != ("time", "feature"):
        raise ValueError(
            f"{path}: `features` must have dims (time, feature), got {ds['features'].dims}."
        )
    time = np.asarray(ds["time"].values)
    if time.shape != run.time.shape or not np.allclose(time, run.time, rtol=0, atol=1e-6):
        raise ValueError(
            f"{path}: field `time` does not match the brain run {run.path} "
            f"({time.shape[0]} vs {run.time.shape[0]} samples)."
        )
    X = np.asarray(ds["features"].values, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{path}: `features` holds non-finite values.")
    library = tuple(str(m) for m in ds.attrs.get("hrf_models") or ())
    if len(library) > 1:
        if "hrf_variant" not in ds.coords:
            raise ValueError(
                f"{path}: attribute `hrf_models` lists {len(library)} HRF models but the "
                "coordinate `hrf_variant` (feature) is missing."
            )
        return X, ds.attrs.get("stim_files"), library, np.asarray(ds["hrf_variant"].values, int)
    return X, ds.attrs.get("stim_files"), library, None


def event_columns(ds: xr.Dataset) -> np.ndarray:
    """Which columns of an aligned feature store are the event regressor.

    Parameters
    ----------
    ds : xarray.Dataset
        Store of :func:`neuroflow.features.align.align_features`: with
        ``event_regressor``, attribute ``feature_centre`` (one value per source feature)
        is non-empty and the event indicator is source feature ``len(feature_centre)``.

    Returns
    -------
    mask : ndarray of bool, shape (n_columns,)
        True for the event regressor's columns (one per HRF basis function, model and
        delay); all False for a store without one.
    """
    n_columns = ds.sizes.get("feature", 0)
    centre = ds.attrs.get("feature_centre") or []
    if not len(centre) or "source_feature" not in ds.coords:
        return np.zeros(n_columns, dtype=bool)
    return np.asarray(ds["source_feature"].values) == len(centre)


def _layer_of(path: Path) -> str:
    """Layer name recorded in an aligned feature store (``"n/a"`` when absent)."""
    source = open_dataset(path).attrs.get("source") or {}
    return str(source.get("layer", "n/a")) if isinstance(source, Mapping) else "n/a"


def _is_test(entities: Mapping[str, Any], labels: Sequence[Any]) -> bool:
    """Whether a run is named by ``split.test_runs`` (see :func:`run_matches`)."""
    return run_matches(entities, labels)


def _same_stimuli(a: _Run, b: _Run) -> bool:
    """Two test runs are repeats when they presented the same stimulus sequence."""
    if a.stimuli is not None and b.stimuli is not None:
        return list(a.stimuli) == list(b.stimuli)
    if a.bold.shape[0] != b.bold.shape[0]:
        return False
    return all(np.allclose(a.features[s], b.features[s], rtol=1e-5, atol=1e-6) for s in a.features)


def group_repeats(runs: Sequence[_Run]) -> list[list[int]]:
    """Group test runs by stimulus sequence, in order of first appearance.

    Returns
    -------
    groups : list of list of int
        Indices into ``runs``; every group holds the repeats of one sequence.
    """
    groups: list[list[int]] = []
    for i, run in enumerate(runs):
        for grp in groups:
            if _same_stimuli(runs[grp[0]], run):
                grp.append(i)
                break
        else:
            groups.append([i])
    return groups


def _check_lags(delays: Mapping[str, Any], runs: Sequence[_Run]) -> None:
    """FIR lags must be causal and shorter than every run (else a run's design is empty)."""
    if delays.get("method") != "fir":
        return
    lags = [int(lag) for lag in delays.get("lags", [])]
    if any(lag < 0 for lag in lags):
        raise ValueError(
            f"`encoding.delays.lags` must be >= 0 TRs (negative lags use the future), got "
            f"{lags} instead."
        )
    shortest = min(runs, key=lambda r: r.bold.shape[0])
    if max(lags, default=0) >= shortest.bold.shape[0]:
        raise ValueError(
            f"`encoding.delays.lags` must be shorter than every run, got lag {max(lags)} TRs "
            f"but {shortest.path} has {shortest.bold.shape[0]} volumes."
        )


def _cv_groups(train: Sequence[_Run]) -> np.ndarray:
    """Cross-validation group of every training sample: its run, or, with one training
    run, one of :data:`N_BLOCKS_ONE_RUN` contiguous blocks of it."""
    if len(train) >= 2:
        return np.concatenate([np.full(r.bold.shape[0], i) for i, r in enumerate(train)])
    n = train[0].bold.shape[0]
    logger.info(
        "One training run (%s): cross-validation over %d contiguous blocks of it.",
        train[0].key,
        N_BLOCKS_ONE_RUN,
    )
    return np.repeat(
        np.arange(N_BLOCKS_ONE_RUN), np.diff(np.linspace(0, n, N_BLOCKS_ONE_RUN + 1).astype(int))
    )


def hrf_library(runs: Sequence[_Run], spaces: Sequence[str]) -> tuple[str, ...]:
    """The HRF library the feature spaces were aligned with (empty without one).

    Spaces aligned with a library must all use the same one; spaces aligned with one HRF
    (or not by HRF) take part in every model of the library unchanged.
    """
    found: dict[str, tuple[str, ...]] = {}
    for run in runs:
        for space in spaces:
            library = run.libraries.get(space, ())
            if space in found and found[space] != library:
                raise ValueError(
                    f"{run.path}: the features of {space!r} must be aligned with the same "
                    f"HRF models in every run, got {list(library)} instead of "
                    f"{list(found[space])}."
                )
            found[space] = library
    libraries = {lib for lib in found.values() if len(lib) > 1}
    if len(libraries) > 1:
        raise ValueError(
            "Feature spaces of one encoding model must share their HRF library, got "
            f"{ {s: list(lib) for s, lib in found.items() if len(lib) > 1} } instead."
        )
    return next(iter(libraries), ())


def _variant(run: _Run, index: int) -> _Run:
    """``run`` with the columns of HRF model ``index`` of every library-aligned space."""
    if not run.variants:
        return run
    features = {
        s: X[:, run.variants[s] == index] if s in run.variants else X
        for s, X in run.features.items()
    }
    events = {
        s: mask[run.variants[s] == index] if s in run.variants else mask
        for s, mask in run.events.items()
    }
    return replace(run, features=features, events=events)


def _test_nuisance(runs: Sequence[_Run]) -> np.ndarray | None:
    """Block-diagonal nuisance basis of the held-out runs, shape (n_times, n_nuisance).

    The evaluation corrects its permutation null for these projected-out dimensions;
    ``None`` when a run has no stored basis.
    """
    if not runs or any(r.nuisance is None for r in runs):
        return None
    n_times = sum(r.nuisance.shape[0] for r in runs)
    out = np.zeros((n_times, sum(r.nuisance.shape[1] for r in runs)), dtype=np.float32)
    row = col = 0
    for r in runs:
        rows, cols = r.nuisance.shape
        out[row : row + rows, col : col + cols] = r.nuisance
        row, col = row + rows, col + cols
    return out


def _load_all(
    brain: Sequence[Path],
    features: Mapping[str, Sequence[Path]],
    spaces: Sequence[str],
    target: str = "voxels",
) -> tuple[list[_Run], xr.Dataset]:
    runs: list[_Run] = []
    first: xr.Dataset | None = None
    for i, path in enumerate(brain):
        run, ds = _load_brain(path, target)
        if first is None:
            first = ds
        else:
            _check_same_voxels(first, ds, brain[0], path)
        for s in spaces:
            run.features[s], stim, library, variant = _load_features(Path(features[s][i]), run)
            run.events[s] = event_columns(open_dataset(Path(features[s][i])))
            run.libraries[s] = library
            if variant is not None:
                run.variants[s] = variant
            run.stimuli = run.stimuli if run.stimuli is not None else stim
        runs.append(run)
    subjects = {str(r.entities["subject"]) for r in runs}
    if len(subjects) > 1:
        raise ValueError(f"`brain` must hold runs of one subject, got subjects {sorted(subjects)}.")
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"`brain` lists the same run twice: {keys}.")
    assert first is not None
    if "tr" not in first.attrs:
        raise ValueError(f"{brain[0]}: attribute `tr` is missing.")
    return runs, first


def _check_same_voxels(ref: xr.Dataset, ds: xr.Dataset, ref_path: Path, path: Path) -> None:
    if ds.sizes["voxel"] != ref.sizes["voxel"]:
        raise ValueError(
            f"{path}: field `voxel` has {ds.sizes['voxel']} voxels, {ref_path} has "
            f"{ref.sizes['voxel']}."
        )
    for name in ("i", "j", "k"):
        both = name in ref.coords and name in ds.coords
        if both and not np.array_equal(ref[name].values, ds[name].values):
            raise ValueError(f"{path}: field `{name}` differs from {ref_path}.")


def _voxel_coords(ref: xr.Dataset) -> dict[str, Any]:
    def values(coord: xr.DataArray) -> np.ndarray:
        arr = np.asarray(coord.values)
        return arr.astype(object) if arr.dtype.kind == "U" else arr  # str objects

    return {
        name: (("voxel",), values(coord), dict(coord.attrs))
        for name, coord in ref.coords.items()
        if coord.dims == ("voxel",)
    }

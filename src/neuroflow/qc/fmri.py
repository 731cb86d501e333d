"""Quality control of one fMRI run: raw-signal metrics beside what the cleaning removed.

:func:`fmri_qc_dataset` reads the raw BOLD run again, restricted to the voxels and
volumes its cleaned store (from :func:`~neuroflow.preprocessing.fmri.stage.
preprocess_fmri_run`) kept, and gathers

* per voxel: the temporal mean and the temporal SNR of the raw signal;
* per volume: the global signal, DVARS, framewise displacement and the scrubbed
  volumes;
* the confounds the cleaning regressed, each classified into a nuisance set
  (motion, WM/CSF, global signal, CompCor, scrubbing, custom);
* per nuisance set and voxel: the fraction of the raw signal's variance that set
  explains alone, and that the whole cleaning design explains.

The measures themselves are in :mod:`neuroflow.qc.fmri_metrics`;
:func:`neuroflow.qc.fmri_figures.fmri_qc_figures` draws them (mean EPI, tSNR map,
carpet plot, motion traces, variance removed per set) as PNG files.

The confounds are selected again with
:func:`~neuroflow.preprocessing.fmri.confounds.select_confounds` exactly as the
stage did; a configuration that does not reproduce the store's recorded
confounds, scrubbed volumes, detrending or high-pass filter is refused.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.preprocessing.fmri.clean import (
    cosine_drifts,
    polynomial_drifts,
)
from neuroflow.preprocessing.fmri.confounds import read_confounds_table, select_confounds
from neuroflow.preprocessing.fmri.inputs import load_bold, load_masked, smooth_image
from neuroflow.preprocessing.fmri.stage import cleaning_steps, resolve_config
from neuroflow.qc._variables import described
from neuroflow.qc.fmri_metrics import (
    CONFOUND_SETS,
    confound_set,
    dvars,
    framewise_displacement,
    global_signal,
    temporal_snr,
    variance_explained,
)

__all__ = [
    "fmri_qc_dataset",
]


def _step(steps: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    """The first record called ``name`` in a store's ``steps``."""
    return next((s for s in steps if s.get("name") == name), None)


_REQUIRED_ATTRS = ("tr", "affine", "mask_shape", "n_volumes_acquired", "steps")


def _check_store(store: xr.Dataset, path: Path) -> None:
    """Refuse a store that is not a ``preprocess_fmri`` voxel store."""
    missing = [a for a in _REQUIRED_ATTRS if a not in store.attrs]
    missing += [f"coordinate {c}" for c in ("i", "j", "k") if c not in store.coords]
    if missing or "voxel" not in store.dims:
        raise ValueError(
            f"Clean store {path} must be a preprocess_fmri voxel store (dim 'voxel', "
            f"coordinates i, j, k, attrs {list(_REQUIRED_ATTRS)}), got one missing "
            f"{missing or ['dim voxel']} instead."
        )


def _check_grid(
    img: nib.Nifti1Image,
    attrs: Mapping[str, Any],
    voxels: np.ndarray,
    *,
    bold: Path,
    store: Path,
) -> None:
    """Refuse a BOLD image that is not the run the store was cleaned from."""
    shape = tuple(int(s) for s in img.shape[:3])
    n_volumes = int(img.shape[3])
    expected = int(attrs["n_volumes_acquired"])
    if n_volumes != expected:
        raise ValueError(
            f"BOLD image {bold} must have the {expected} volumes the clean store {store} "
            f"was made from, got {n_volumes} instead."
        )
    mask_shape = tuple(int(s) for s in attrs["mask_shape"])
    if shape != mask_shape:
        raise ValueError(
            f"BOLD image {bold} must have the grid {mask_shape} of the clean store {store}, "
            f"got {shape} instead."
        )
    affine = np.asarray(attrs["affine"], dtype=np.float64)
    if not np.allclose(np.asarray(img.affine, float), affine, rtol=1e-5, atol=1e-4):
        raise ValueError(
            f"BOLD image {bold} must have the affine of the clean store {store}, got "
            f"{np.asarray(img.affine).round(4).tolist()} instead of "
            f"{affine.round(4).tolist()}."
        )
    if voxels.size and ((voxels < 0).any() or (voxels >= np.array(shape)).any()):
        raise ValueError(
            f"The voxels of the clean store {store} must lie within BOLD image {bold} "
            f"of shape {shape}, got indices outside it instead."
        )


#: The cleaning's ``steps`` records that the quality control must reproduce.
_FILTER_STEPS = ("detrend", "temporal_filter")


def _check_config(cfg: Mapping[str, Any], steps: Sequence[Mapping[str, Any]], store: Path) -> None:
    """Refuse a section whose detrending or filter differ from the store's records."""
    expected = [s for s in cleaning_steps(cfg) if s["name"] in _FILTER_STEPS]
    recorded = [dict(s) for s in steps if s.get("name") in _FILTER_STEPS]
    if recorded != expected:
        raise ValueError(
            f"`preprocess_config` must give the detrending and temporal filter the clean "
            f"store {store} was made with ({recorded}), got {expected} instead."
        )


def _cleaning_confounds(
    *,
    img: nib.Nifti1Image,
    voxels: np.ndarray,
    data: np.ndarray,
    cfg: Mapping[str, Any],
    confounds: Path | None,
    n_drop: int,
    steps: Sequence[Mapping[str, Any]],
    bold: Path,
    store: Path,
) -> tuple[pd.DataFrame, np.ndarray]:
    """The regressors the cleaning used, on the kept volumes, and the scrubbed volumes.

    Returns
    -------
    regressors : pandas.DataFrame, shape (n_kept, n_confounds)
        Selected confounds, then one spike regressor (``motion_outlierNN``) per scrubbed
        volume when scrubbing regressed them.
    outliers : ndarray of bool, shape (n_kept,)
        Scrubbed volumes.
    """
    n_volumes = int(img.shape[3])
    conf_cfg = cfg["confounds"]
    signal = None
    if conf_cfg["strategy"] != "none" and "global_signal" in conf_cfg["strategy"]:
        smooth = _step(steps, "smooth")
        if smooth is not None:
            # the stage computed this regressor from the smoothed image
            smoothed = smooth_image(img, float(smooth["fwhm_mm"]))
            signal_data = load_masked(smoothed, voxels, source=str(bold), start=n_drop)
            del smoothed
        else:
            signal_data = data
        signal = np.r_[np.zeros(n_drop), signal_data.mean(axis=1, dtype=np.float64)]
    with warnings.catch_warnings():
        # components skipped for want of a table were reported when the run was cleaned
        warnings.simplefilter("ignore", UserWarning)
        selected = select_confounds(
            path=confounds, n_volumes=n_volumes, config=conf_cfg, global_signal=signal
        )
    columns = [str(c) for c in selected.table.columns]
    kept = np.arange(n_drop, n_volumes)
    outliers = np.asarray(selected.outliers[n_drop:], bool)
    record = _step(steps, "confounds")
    recorded = [str(c) for c in record["columns"]] if record is not None else []
    scrub = _step(steps, "scrub")
    recorded_scrub = [int(v) for v in scrub["volumes"]] if scrub is not None else []
    if columns != recorded or kept[outliers].tolist() != recorded_scrub:
        raise ValueError(
            f"`preprocess_config` and the confounds file {confounds} must select the "
            f"confounds the clean store {store} was made with (columns {recorded}, "
            f"scrubbed volumes {recorded_scrub}), got columns {columns} and scrubbed volumes "
            f"{kept[outliers].tolist()} instead."
        )
    regressors = selected.table.iloc[n_drop:].reset_index(drop=True).astype(float)
    if outliers.any() and conf_cfg["scrub_mode"] == "regress":
        spikes = {}
        for n, row in enumerate(np.flatnonzero(outliers)):
            name = f"motion_outlier{n:02d}"
            while name in regressors.columns or name in spikes:
                name += "_spike"
            spikes[name] = (np.arange(len(kept)) == row).astype(float)
        regressors = pd.concat([regressors, pd.DataFrame(spikes)], axis=1)
    return regressors, outliers


def _nuisance_designs(
    *,
    n_times: int,
    tr: float,
    cfg: Mapping[str, Any],
    regressors: pd.DataFrame,
    keep: np.ndarray,
) -> dict[str, np.ndarray]:
    """The cleaning design split by nuisance set, on the volumes the cleaning kept.

    Returns
    -------
    designs : dict of str to ndarray, shape (n_keep, n_regressors)
        ``trends`` (Legendre polynomials up to ``detrend_order`` without the constant,
        at the kept acquisition times), ``cosine_drifts`` (cosine high-pass), then each
        confound set present, then ``all``; the constant is implied (see
        :func:`variance_explained`).
    """
    frame_times = np.arange(n_times) * float(tr)
    order = cfg["detrend_order"]
    n_keep = int(keep.sum())
    designs: dict[str, np.ndarray] = {
        "trends": (
            polynomial_drifts(frame_times[keep], order)[:, 1:]
            if order is not None
            else np.zeros((n_keep, 0))
        )
    }
    high_pass = cfg["high_pass"]
    if high_pass["filter"] == "cosine" and high_pass["cutoff_hz"] is not None:
        drifts = cosine_drifts(frame_times, high_pass["cutoff_hz"])[keep]
        if drifts.shape[1]:
            designs["cosine_drifts"] = drifts
    values = regressors.to_numpy(float)[keep]
    sets = np.array([confound_set(str(c)) for c in regressors.columns])
    for nuisance_set in CONFOUND_SETS:
        if (sets == nuisance_set).any():
            designs[nuisance_set] = values[:, sets == nuisance_set]
    designs["all"] = np.hstack([np.ones((n_keep, 1)), *designs.values()])
    return designs


def _fd_threshold(cfg: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> float | None:
    """The FD scrubbing threshold (mm) of the run, when it was scrubbed by FD."""
    scrub = _step(steps, "scrub")
    if scrub is not None:
        value = scrub.get("fd_threshold")
    else:
        strategy = cfg["confounds"]["strategy"]
        scrubbing = not isinstance(strategy, str) and "scrub" in strategy
        value = cfg["confounds"]["fd_threshold"] if scrubbing else None
    return None if value is None else float(value)


def _strings(values: Sequence[str]) -> np.ndarray:
    """Variable-length strings (zarr v3 ``string`` data type)."""
    return np.array(list(values), dtype=np.dtypes.StringDType())


def fmri_qc_dataset(
    *,
    bold: str | os.PathLike,
    clean_store: str | os.PathLike,
    confounds: str | os.PathLike | None = None,
    preprocess_config: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """Quality-control measures of one BOLD run and of its cleaning.

    Parameters
    ----------
    bold : path-like
        The 4-D BOLD NIfTI the store was cleaned from.
    clean_store : path-like
        Its ``preprocess_fmri`` store (gives the kept voxels, the dropped volumes, the
        TR and the steps of the cleaning).
    confounds : path-like | None
        The confounds table the cleaning was given.
    preprocess_config : dict | None
        The ``preprocess_fmri`` config section the store was made with (defaults fill
        missing keys).

    Returns
    -------
    qc : xarray.Dataset
        Dims ``voxel`` (the store's voxels, coordinates ``voxel``, ``i``, ``j``, ``k``,
        ``x``, ``y``, ``z``, ``roi`` copied from it), ``volume`` (acquired volumes
        after the non-steady-state ones; coordinates ``volume``, the acquisition index,
        and ``time`` = index × TR in s), ``confound`` (the cleaning's regressors, with
        coordinate ``confound_set``, one of :data:`CONFOUND_SETS`; empty without
        confounds) and ``nuisance_set``. Variables:

        - ``mean`` (voxel): temporal mean of the raw signal;
        - ``tsnr`` (voxel): mean over the SD of the linearly detrended raw signal
          (0 for a constant voxel);
        - ``global_signal``, ``dvars`` (volume), ``framewise_displacement`` (volume,
          in mm; absent when neither the table's column nor the six motion
          parameters are there), ``scrubbed`` (volume, bool);
        - ``confounds`` (volume, confound), float32;
        - ``variance_removed`` (nuisance_set, voxel): R² of the raw signal on
          ``trends``, ``cosine_drifts`` (cosine high-pass only), each confound set
          present, and ``all`` (constant, trends, cosines and confounds; a
          Butterworth filter is not a regression and is not part of it), over the
          volumes the cleaning kept; ``variance_removed_median`` (nuisance_set).

        Attrs ``tr``, ``affine``, ``mask_shape``, ``n_volumes_acquired``,
        ``n_dropped``, ``fd_source`` (``"confounds table"``, ``"motion parameters"``
        or ``"none"``), ``fd_threshold`` (mm, when the run was scrubbed by FD),
        ``scrub_mode``, ``source_file``, ``entities`` and ``clean_store``.

    Raises
    ------
    ValueError
        When the BOLD image is not the store's run (volume count, grid, affine),
        when it has non-finite values in the kept voxels, or when the config and
        confounds do not reproduce the store's cleaning. Each message names the file.
    """
    bold = Path(bold)
    store_path = Path(clean_store)
    confounds = Path(confounds) if confounds is not None else None
    cfg = resolve_config(preprocess_config)
    store = open_dataset(store_path)
    _check_store(store, store_path)
    attrs = dict(store.attrs)
    steps = list(attrs["steps"])
    _check_config(cfg, steps, store_path)
    names = ("voxel", "i", "j", "k", "x", "y", "z", "roi")
    voxel_coords = {name: store[name].values for name in names if name in store.coords}
    voxels = np.column_stack([voxel_coords[c] for c in "ijk"]).astype(np.int64)

    img = load_bold(bold)
    _check_grid(img, attrs, voxels, bold=bold, store=store_path)
    drop = _step(steps, "drop_volumes")
    n_drop = int(drop["n"]) if drop is not None else 0
    n_volumes = int(img.shape[3])
    tr = float(attrs["tr"])
    data = load_masked(img, voxels, source=str(bold), start=n_drop)
    table = read_confounds_table(confounds, n_volumes) if confounds is not None else None
    regressors, outliers = _cleaning_confounds(
        img=img,
        voxels=voxels,
        data=data,
        cfg=cfg,
        confounds=confounds,
        n_drop=n_drop,
        steps=steps,
        bold=bold,
        store=store_path,
    )
    del img
    censor = cfg["confounds"]["scrub_mode"] == "censor"
    keep = ~outliers if censor else np.ones(len(outliers), bool)

    mean, tsnr = temporal_snr(data)
    designs = _nuisance_designs(
        n_times=data.shape[0], tr=tr, cfg=cfg, regressors=regressors, keep=keep
    )
    removed = variance_explained(data[keep] if not keep.all() else data, designs)
    fd, fd_source = framewise_displacement(table, source=str(confounds))
    acquired = np.arange(n_drop, n_volumes)

    coords: dict[str, Any] = {
        "voxel": ("voxel", voxel_coords["voxel"]),
        **{c: ("voxel", v, dict(store[c].attrs)) for c, v in voxel_coords.items() if c != "voxel"},
        "volume": ("volume", acquired, {"long_name": "acquired volume index", "units": "1"}),
        "time": ("volume", acquired * tr, {"long_name": "acquisition time", "units": "s"}),
        "confound": ("confound", _strings([str(c) for c in regressors.columns])),
        "confound_set": (
            "confound",
            _strings([confound_set(str(c)) for c in regressors.columns]),
            {"long_name": "nuisance set of the confound"},
        ),
        "nuisance_set": ("nuisance_set", _strings(list(designs))),
    }
    variables: dict[str, Any] = {
        "mean": described(mean, ("voxel",), "temporal mean of the raw BOLD signal", "a.u."),
        "tsnr": described(
            tsnr,
            ("voxel",),
            "temporal SNR: mean over the SD of the linearly detrended raw signal",
            "ratio",
        ),
        "global_signal": described(
            global_signal(data), ("volume",), "mean raw BOLD signal over the voxels", "a.u."
        ),
        "dvars": described(
            dvars(data, mean),
            ("volume",),
            "RMS over voxels of the volume-to-volume change (DVARS)",
            "% of voxel mean",
        ),
        "scrubbed": described(outliers, ("volume",), "volume scrubbed by the cleaning", "boolean"),
        "confounds": described(
            regressors.to_numpy(np.float32).reshape(len(acquired), regressors.shape[1]),
            ("volume", "confound"),
            "nuisance regressors of the cleaning",
            "a.u.",
        ),
        "variance_removed": described(
            removed,
            ("nuisance_set", "voxel"),
            "fraction of the raw signal's variance explained by the nuisance set",
            "fraction",
            description="least-squares R² with a constant"
            + (", over the uncensored volumes" if censor and outliers.any() else ""),
        ),
        "variance_removed_median": described(
            np.median(removed, axis=1) if removed.shape[1] else np.zeros(len(designs)),
            ("nuisance_set",),
            "median over voxels of the variance explained by the nuisance set",
            "fraction",
        ),
    }
    if fd is not None:
        variables["framewise_displacement"] = described(
            fd[n_drop:], ("volume",), "framewise displacement", "mm", source=fd_source
        )
    qc = xr.Dataset(variables, coords=coords)
    fd_threshold = _fd_threshold(cfg, steps)
    qc.attrs.update(
        {
            "tr": tr,
            "affine": [list(map(float, row)) for row in attrs["affine"]],
            "mask_shape": [int(s) for s in attrs["mask_shape"]],
            "n_volumes_acquired": int(attrs["n_volumes_acquired"]),
            "n_dropped": n_drop,
            "fd_source": fd_source,
            "scrub_mode": cfg["confounds"]["scrub_mode"],
            "source_file": str(attrs.get("source_file", bold)),
            "entities": dict(attrs.get("entities", {})),
            "clean_store": str(store_path),
        }
    )
    if fd_threshold is not None:
        qc.attrs["fd_threshold"] = fd_threshold
    _check_finite(qc, bold)
    return qc


def _check_finite(qc: xr.Dataset, bold: Path) -> None:
    """Refuse a result with a NaN or infinite value (names the BOLD file)."""
    bad = [
        str(name)
        for name, var in qc.data_vars.items()
        if var.dtype.kind == "f" and not np.isfinite(var.values).all()
    ]
    if bad:
        raise ValueError(
            f"Quality control of BOLD image {bold} must give finite values, got NaN or "
            f"infinite values in {bad} instead."
        )

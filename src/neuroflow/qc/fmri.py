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

:func:`fmri_qc_figures` draws them (mean EPI, tSNR map, carpet plot, motion traces,
variance removed per set) as PNG files.

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
from matplotlib.figure import Figure

from neuroflow.artifacts import open_dataset
from neuroflow.figures import label_colorbar, new_figure
from neuroflow.io.files import scores_to_nifti
from neuroflow.preprocessing.fmri.clean import (
    cosine_drifts,
    orthonormal_basis,
    polynomial_drifts,
)
from neuroflow.preprocessing.fmri.confounds import read_confounds_table, select_confounds
from neuroflow.preprocessing.fmri.inputs import load_bold, load_masked, smooth_image
from neuroflow.preprocessing.fmri.stage import cleaning_steps, resolve_config
from neuroflow.progress import Progress
from neuroflow.qc._variables import described

__all__ = [
    "CONFOUND_SETS",
    "FIGURE_KINDS",
    "MOTION_COLUMNS",
    "confound_set",
    "dvars",
    "fmri_qc_dataset",
    "fmri_qc_figures",
    "framewise_displacement",
    "global_signal",
    "power_framewise_displacement",
    "temporal_snr",
    "variance_explained",
]

#: Nuisance sets a confound column can belong to, in the order they are reported.
CONFOUND_SETS = ("motion", "wm_csf", "global_signal", "compcor", "scrub", "custom")

_SET_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("motion", ("trans_", "rot_")),
    ("wm_csf", ("white_matter", "csf")),
    ("global_signal", ("global_signal",)),
    ("compcor", ("a_comp_cor", "t_comp_cor", "c_comp_cor", "w_comp_cor")),
    ("scrub", ("motion_outlier", "non_steady_state")),
)

#: The six rigid-body motion parameters of an fMRIPrep confounds table (mm, rad).
MOTION_COLUMNS = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z")

#: Radius (mm) of the sphere turning rotations into displacements (Power et al., 2012).
HEAD_RADIUS_MM = 50.0

#: Figures written by :func:`fmri_qc_figures`, in order.
FIGURE_KINDS = ("mean", "tsnr", "carpet", "motion", "variance_removed")

#: Voxels per block in the float64 computations.
BLOCK_VOXELS = 4096

_DPI = 100


# --------------------------------------------------------------------------- metrics


def confound_set(name: str) -> str:
    """Nuisance set of a confound column, from its fMRIPrep name.

    Parameters
    ----------
    name : str
        Column name, e.g. ``"trans_x_derivative1"`` or ``"a_comp_cor_03"``.

    Returns
    -------
    nuisance_set : str
        One of :data:`CONFOUND_SETS`: ``"motion"`` (``trans_*``, ``rot_*`` with their
        derivatives and powers), ``"wm_csf"``, ``"global_signal"``, ``"compcor"``,
        ``"scrub"`` (``motion_outlier*``, ``non_steady_state*``), else ``"custom"``.
    """
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str, got {type(name).__name__} instead.")
    for nuisance_set, prefixes in _SET_PREFIXES:
        if name.startswith(prefixes):
            return nuisance_set
    return "custom"


def _check_data(data: np.ndarray, *, min_times: int = 2) -> np.ndarray:
    """A (time, voxel) array, checked."""
    data = np.asarray(data)
    if data.ndim != 2:
        raise ValueError(f"`data` must be 2-D (time, voxel), got shape {data.shape} instead.")
    if data.shape[0] < min_times:
        raise ValueError(
            f"`data` must have at least {min_times} time points, got {data.shape[0]} instead."
        )
    return data


def _varies(block: np.ndarray) -> np.ndarray:
    """Voxels (columns) whose value changes over time."""
    return np.ptp(block, axis=0) > 0


def temporal_snr(data: np.ndarray, *, block: int = BLOCK_VOXELS) -> tuple[np.ndarray, np.ndarray]:
    """Temporal mean and temporal SNR of each voxel.

    Parameters
    ----------
    data : ndarray, shape (n_times, n_voxels)
        Raw time series.
    block : int
        Voxels per block.

    Returns
    -------
    mean : ndarray, shape (n_voxels,)
        Temporal mean (float64).
    tsnr : ndarray, shape (n_voxels,)
        ``mean / std`` of the linearly detrended series (``std`` with ``ddof=1``);
        0 for a voxel constant over time.
    """
    data = _check_data(data)
    n_times, n_voxels = data.shape
    trend = orthonormal_basis(polynomial_drifts(np.arange(n_times, dtype=float), 1))
    mean = np.zeros(n_voxels)
    tsnr = np.zeros(n_voxels)
    for start in range(0, n_voxels, block):
        y = np.asarray(data[:, start : start + block], dtype=np.float64)
        part_mean = y.mean(axis=0)
        resid = y - trend @ (trend.T @ y)
        std = np.sqrt(np.einsum("tv,tv->v", resid, resid) / (n_times - 1))
        ok = _varies(y) & (std > 0)
        mean[start : start + block] = part_mean
        tsnr[start : start + block][ok] = part_mean[ok] / std[ok]
    return mean, tsnr


def global_signal(data: np.ndarray) -> np.ndarray:
    """Mean over voxels at each time point.

    Parameters
    ----------
    data : ndarray, shape (n_times, n_voxels)
        Raw time series.

    Returns
    -------
    signal : ndarray, shape (n_times,)
        Float64 mean over voxels.
    """
    data = _check_data(data, min_times=1)
    if data.shape[1] == 0:
        raise ValueError("`data` must have at least one voxel, got none.")
    return data.mean(axis=1, dtype=np.float64)


def dvars(data: np.ndarray, mean: np.ndarray, *, block: int = BLOCK_VOXELS) -> np.ndarray:
    """DVARS in percent of each voxel's mean (not standardised).

    Parameters
    ----------
    data : ndarray, shape (n_times, n_voxels)
        Raw time series.
    mean : ndarray, shape (n_voxels,)
        Temporal mean of each voxel; voxels with a zero mean are left out.
    block : int
        Voxels per block.

    Returns
    -------
    dvars : ndarray, shape (n_times,)
        Root mean square over voxels of the volume-to-volume difference of
        ``100 * data / mean``; 0 for the first volume.
    """
    data = _check_data(data, min_times=1)
    mean = np.asarray(mean, dtype=np.float64)
    if mean.shape != (data.shape[1],):
        raise ValueError(
            f"`mean` must have shape ({data.shape[1]},) like the voxels of `data`, "
            f"got {mean.shape} instead."
        )
    used = mean != 0
    scale = np.zeros_like(mean)
    scale[used] = 100.0 / mean[used]
    sum_sq = np.zeros(max(data.shape[0] - 1, 0))
    for start in range(0, data.shape[1], block):
        y = np.asarray(data[:, start : start + block], dtype=np.float64)
        step = np.diff(y * scale[start : start + block], axis=0)
        sum_sq += np.einsum("tv,tv->t", step, step)
    return np.r_[0.0, np.sqrt(sum_sq / max(int(used.sum()), 1))]


def power_framewise_displacement(motion: np.ndarray) -> np.ndarray:
    """Framewise displacement of Power et al. (2012) from the six motion parameters.

    Parameters
    ----------
    motion : ndarray, shape (n_times, 6)
        ``trans_x, trans_y, trans_z`` (mm) then ``rot_x, rot_y, rot_z`` (rad).

    Returns
    -------
    fd : ndarray, shape (n_times,)
        Sum of the absolute volume-to-volume differences, rotations turned into
        displacements on a sphere of :data:`HEAD_RADIUS_MM` mm; 0 for the first volume.
    """
    motion = np.asarray(motion, dtype=np.float64)
    if motion.ndim != 2 or motion.shape[1] != 6:
        raise ValueError(f"`motion` must have shape (n_times, 6), got {motion.shape} instead.")
    if not np.isfinite(motion).all():
        raise ValueError("`motion` must be finite, got NaN or infinite values instead.")
    step = np.abs(np.diff(motion, axis=0))
    step[:, 3:] *= HEAD_RADIUS_MM
    return np.r_[0.0, step.sum(axis=1)]


def framewise_displacement(
    table: pd.DataFrame | None, *, source: str = "confounds table"
) -> tuple[np.ndarray | None, str]:
    """Framewise displacement of a run from its confounds table.

    Parameters
    ----------
    table : pandas.DataFrame, shape (n_volumes, n_columns) | None
        Confounds table (every acquired volume).
    source : str
        The table's file, for messages.

    Returns
    -------
    fd : ndarray, shape (n_volumes,) | None
        In mm: the table's ``framewise_displacement`` column (its missing first value
        set to 0), else :func:`power_framewise_displacement` of the six
        :data:`MOTION_COLUMNS`; None when the table has neither.
    fd_source : str
        ``"confounds table"``, ``"motion parameters"`` or ``"none"``.
    """
    if table is None:
        return None, "none"
    if "framewise_displacement" in table.columns:
        fd = np.array(pd.to_numeric(table["framewise_displacement"], errors="coerce"), float)
        if fd.size and np.isnan(fd[0]):
            fd[0] = 0.0
        if not np.isfinite(fd).all():
            row = int(np.flatnonzero(~np.isfinite(fd))[0])
            raise ValueError(
                f"Column 'framewise_displacement' of {source} must be a number in every row "
                f"but the first, got a missing value in row {row + 1} instead."
            )
        return fd, "confounds table"
    if set(MOTION_COLUMNS) <= set(table.columns):
        motion = table[list(MOTION_COLUMNS)].apply(pd.to_numeric, errors="coerce").to_numpy(float)
        if not np.isfinite(motion).all():
            raise ValueError(
                f"Motion columns {list(MOTION_COLUMNS)} of {source} must be numbers in every "
                "row, got missing values instead."
            )
        return power_framewise_displacement(motion), "motion parameters"
    return None, "none"


def variance_explained(
    data: np.ndarray,
    designs: Mapping[str, np.ndarray],
    *,
    block: int = BLOCK_VOXELS,
) -> np.ndarray:
    """Fraction of each voxel's variance explained by each design, with a constant.

    Parameters
    ----------
    data : ndarray, shape (n_times, n_voxels)
        Time series.
    designs : dict of str to ndarray, shape (n_times, n_regressors)
        Regressor sets; a set may have no column (it explains nothing).
    block : int
        Voxels per block.

    Returns
    -------
    r2 : ndarray, shape (n_designs, n_voxels)
        The least-squares R² of each voxel on each design plus a constant, in
        [0, 1], in the order of ``designs``; 0 for a voxel constant over time. Each
        design is centred and replaced by an orthonormal basis of its column space,
        so the R² is the squared norm of the centred series' projection over its
        squared norm (float64 accumulators).
    """
    data = _check_data(data)
    n_times, n_voxels = data.shape
    bases = []
    for name, design in designs.items():
        x = np.asarray(design, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != n_times:
            raise ValueError(
                f"Design {name!r} must have shape ({n_times}, n_regressors) like the time "
                f"points of `data`, got {x.shape} instead."
            )
        bases.append(orthonormal_basis(x - x.mean(axis=0)))
    r2 = np.zeros((len(bases), n_voxels))
    progress = Progress(n_voxels, "QC: variance explained by confounds", "voxels")
    for start in range(0, n_voxels, block):
        y = np.asarray(data[:, start : start + block], dtype=np.float64)
        ok = _varies(y)
        y = y - y.mean(axis=0)
        total = np.einsum("tv,tv->v", y, y)
        ok &= total > 0
        for s, q in enumerate(bases):
            proj = q.T @ y
            explained = np.einsum("rv,rv->v", proj, proj)
            r2[s, start : start + block][ok] = explained[ok] / total[ok]
        progress.update(y.shape[1])
    progress.close()
    return np.clip(r2, 0.0, 1.0)


# --------------------------------------------------------------------------- the store


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


# --------------------------------------------------------------------------- figures


def _voxel_image(qc: xr.Dataset, values: np.ndarray) -> nib.Nifti1Image:
    """Per-voxel values placed back on the run's grid (0 elsewhere)."""
    ijk = np.column_stack([qc[c].values for c in "ijk"]).astype(np.int64)
    return scores_to_nifti(
        values, ijk, affine=np.asarray(qc.attrs["affine"]), mask_shape=qc.attrs["mask_shape"]
    )


def _title(qc: xr.Dataset, what: str) -> str:
    """Figure title: the run's entities and what is shown."""
    entities = qc.attrs.get("entities") or {}
    run = ", ".join(f"{k} {v}" for k, v in entities.items())
    return f"{run}: {what}" if run else what


def _plot_mean(qc: xr.Dataset, bold: Path) -> Figure:
    """Mean EPI image."""
    from nilearn import plotting

    fig = new_figure((8, 3))
    plotting.plot_epi(
        _voxel_image(qc, qc["mean"].values),
        figure=fig,
        title=_title(qc, "mean EPI"),
        draw_cross=False,
        colorbar=True,
    )
    label_colorbar(fig, fig.axes[:-1], "mean signal (scanner units)")
    return fig


def _plot_tsnr(qc: xr.Dataset, bold: Path) -> Figure:
    """tSNR map over the mean EPI, colour limit at the 99th percentile."""
    from nilearn import plotting

    values = qc["tsnr"].values
    positive = values[values > 0]
    vmax = float(np.percentile(positive, 99)) if positive.size else 1.0
    fig = new_figure((8, 3))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*empty.*", category=UserWarning)
        plotting.plot_stat_map(
            _voxel_image(qc, np.minimum(values, vmax)),
            bg_img=_voxel_image(qc, qc["mean"].values),
            figure=fig,
            title=_title(qc, "tSNR"),
            cmap="inferno",
            vmin=0.0,
            vmax=vmax if vmax > 0 else 1.0,
            symmetric_cbar=False,
            threshold=1e-6,
            draw_cross=False,
            colorbar=True,
        )
    label_colorbar(fig, fig.axes[:-1], "tSNR (mean / s.d. over time)")
    return fig


def _plot_carpet(qc: xr.Dataset, bold: Path) -> Figure:
    """Carpet plot of the raw run's kept volumes in the store's voxels."""
    from nilearn import plotting
    from nilearn.image import index_img

    img = load_bold(bold)
    expected = (*qc.attrs["mask_shape"], qc.attrs["n_volumes_acquired"])
    if tuple(int(s) for s in img.shape) != tuple(int(s) for s in expected):
        raise ValueError(
            f"BOLD image {bold} must have the shape {list(expected)} of its quality "
            f"control, got {list(img.shape)} instead."
        )
    n_drop = int(qc.attrs["n_dropped"])
    if n_drop:
        img = index_img(img, slice(n_drop, None))
    mask = _voxel_image(qc, np.ones(qc.sizes["voxel"]))
    mask = nib.Nifti1Image(np.asarray(mask.dataobj).astype(np.uint8), mask.affine)
    fig = new_figure((8, 5))
    with warnings.catch_warnings():
        # constant voxels cannot be standardised; they are drawn flat
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        plotting.plot_carpet(
            img,
            mask_img=mask,
            t_r=float(qc.attrs["tr"]),
            standardize="zscore_sample",
            figure=fig,
            title=_title(qc, "carpet (raw, detrended, z-scored)"),
        )
    if n_drop:
        for ax in fig.axes:
            if ax.get_xlabel().startswith("time"):
                ax.set_xlabel(f"time from volume {n_drop} (s)")
    return fig


def _plot_motion(qc: xr.Dataset, bold: Path) -> Figure:
    """FD, DVARS and global signal over time, scrubbed volumes marked."""
    t = qc["time"].values
    scrubbed = qc["scrubbed"].values.astype(bool)
    fig = new_figure((8, 6))
    ax_fd, ax_dvars, ax_gs = fig.subplots(3, 1, sharex=True)
    if "framewise_displacement" in qc:
        fd = qc["framewise_displacement"].values
        ax_fd.plot(t, fd, color="C0", lw=1)
        ax_fd.plot(t[scrubbed], fd[scrubbed], "x", color="C3", label="scrubbed")
        threshold = qc.attrs.get("fd_threshold")
        if threshold is not None:
            ax_fd.axhline(threshold, color="C3", ls="--", lw=0.8, label=f"{threshold:g} mm")
        if scrubbed.any() or threshold is not None:
            ax_fd.legend(fontsize="small", frameon=False, loc="upper right")
        ax_fd.set_ylabel("FD (mm)")
    else:
        ax_fd.text(
            0.5,
            0.5,
            "no framewise displacement (no motion parameters)",
            ha="center",
            va="center",
            transform=ax_fd.transAxes,
        )
        ax_fd.set_yticks([])
        ax_fd.set_ylabel("FD")
    for ax, name, label in (
        (ax_dvars, "dvars", "DVARS (%)"),
        (ax_gs, "global_signal", "global signal"),
    ):
        ax.plot(t, qc[name].values, color="C0", lw=1)
        ax.set_ylabel(label)
    for ax in (ax_fd, ax_dvars, ax_gs):
        for time in t[scrubbed]:
            ax.axvline(time, color="C3", alpha=0.2, lw=2)
    ax_gs.set_xlabel("Time (s)")
    ax_fd.set_title(_title(qc, "motion and signal"))
    fig.tight_layout()
    return fig


def _plot_variance_removed(qc: xr.Dataset, bold: Path) -> Figure:
    """Box plot of the variance each nuisance set explains, medians annotated."""
    sets = [str(s) for s in qc["nuisance_set"].values]
    removed = 100.0 * qc["variance_removed"].values
    fig = new_figure((max(4.0, 1.1 * len(sets) + 1.5), 3.5))
    ax = fig.add_subplot()
    positions = np.arange(1, len(sets) + 1)
    ax.boxplot(list(removed), positions=positions, widths=0.6, showfliers=False)
    for pos, values in zip(positions, removed, strict=True):
        median = float(np.median(values)) if values.size else 0.0
        ax.annotate(
            f"{median:.1f}%",
            (pos, median),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="small",
        )
    ax.set_xticks(positions, sets, rotation=30, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("variance removed (%)")
    ax.set_title(_title(qc, "variance explained per nuisance set"))
    fig.tight_layout()
    return fig


_FIGURES = {
    "mean": _plot_mean,
    "tsnr": _plot_tsnr,
    "carpet": _plot_carpet,
    "motion": _plot_motion,
    "variance_removed": _plot_variance_removed,
}


def fmri_qc_figures(
    qc: xr.Dataset,
    *,
    bold: str | os.PathLike,
    out_dir: str | os.PathLike,
    prefix: str,
) -> list[Path]:
    """Write the quality-control figures of one run as PNG files.

    Parameters
    ----------
    qc : xarray.Dataset
        Result of :func:`fmri_qc_dataset`.
    bold : path-like
        The raw 4-D BOLD NIfTI (for the carpet plot).
    out_dir : path-like
        Folder to write to (created when missing).
    prefix : str
        File name prefix; files are ``{prefix}_qc-{kind}.png``.

    Returns
    -------
    paths : list of Path
        The written files, for the kinds of :data:`FIGURE_KINDS` in order: ``mean``
        (mean EPI), ``tsnr`` (tSNR map, colour limit at the 99th percentile),
        ``carpet`` (raw signal of the kept volumes), ``motion`` (FD with the scrubbing
        threshold and scrubbed volumes, DVARS, global signal over time) and
        ``variance_removed`` (per nuisance set, in %).
    """
    if not isinstance(qc, xr.Dataset):
        raise TypeError(f"`qc` must be an xarray.Dataset, got {type(qc).__name__} instead.")
    needed = ["mean", "tsnr", "dvars", "global_signal", "scrubbed", "variance_removed"]
    missing = [n for n in needed if n not in qc] + [
        a for a in ("affine", "mask_shape", "tr", "n_dropped") if a not in qc.attrs
    ]
    if missing:
        raise ValueError(
            f"`qc` must be a result of fmri_qc_dataset, got one missing {missing} instead."
        )
    if not isinstance(prefix, str) or not prefix or "/" in prefix:
        raise ValueError(f"`prefix` must be a non-empty file name prefix, got {prefix!r} instead.")
    bold = Path(bold)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in FIGURE_KINDS:
        fig = _FIGURES[kind](qc, bold)
        path = out_dir / f"{prefix}_qc-{kind}.png"
        try:
            fig.savefig(path, dpi=_DPI)
        finally:
            fig.clear()
        paths.append(path)
    return paths

"""Quality measures of an fMRI run: temporal SNR, global signal, DVARS, framewise
displacement, and the variance each nuisance set explains; the nuisance set of a
confound column.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neuroflow.preprocessing.fmri.clean import (
    orthonormal_basis,
    polynomial_drifts,
)
from neuroflow.progress import Progress

__all__ = [
    "BLOCK_VOXELS",
    "CONFOUND_SETS",
    "HEAD_RADIUS_MM",
    "MOTION_COLUMNS",
    "confound_set",
    "dvars",
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


#: Voxels per block in the float64 computations.
BLOCK_VOXELS = 4096


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

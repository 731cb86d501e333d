"""Reading single-trial beta files: 4-D NIfTI, HDF5 (``betas``: (trial, voxel) or
(trial, x, y, z), with its ``scale``) and ``.npy`` (trial, voxel) matrices, on the voxel
grid of their mask; the scale of integer values; noise-ceiling SNR maps on the same
grid. :func:`neuroflow.io.betas.import_betas` reads a session's files through these.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.io.files import load_nifti, nifti_voxel_rows
from neuroflow.io.records import BetasSession

__all__ = ["TRIAL_BLOCK", "VOXEL_BLOCK", "stored_scale"]

logger = logging.getLogger(__name__)

#: Trials read at a time from HDF5 and NIfTI files (bounded temporaries).
TRIAL_BLOCK = 64


#: Voxels read at a time from NIfTI files.
VOXEL_BLOCK = 16384


# --------------------------------------------------------------------------- betas
@dataclass
class _Grid:
    """Voxel grid and selection of one session's betas."""

    shape: tuple[int, int, int]
    affine: np.ndarray
    voxels: np.ndarray  # (n_voxels, 3) int, C order
    mask: Path | None


def _kind(path: Path) -> str:
    """``"nifti"``, ``"h5"`` or ``"npy"`` from a betas file name."""
    name = path.name
    if name.endswith((".nii", ".nii.gz")):
        return "nifti"
    if name.endswith(".h5"):
        return "h5"
    if name.endswith(".npy"):
        return "npy"
    raise ValueError(
        f"Betas file {path} must be a .nii[.gz], .h5 or .npy file, got {name!r} instead."
    )


def _h5_betas(f: Any, path: Path) -> tuple[Any, float | None]:
    """The ``betas`` dataset of an open HDF5 file and its ``scale`` attribute (or None)."""
    import h5py

    obj = f.get("betas")
    if not isinstance(obj, h5py.Dataset):
        raise ValueError(
            f"HDF5 betas file {path} must hold a dataset 'betas', got {sorted(f.keys())} instead."
        )
    if obj.ndim not in (2, 4):
        raise ValueError(
            f"Dataset 'betas' of {path} must be (trial, voxel) or (trial, x, y, z), got "
            f"shape {obj.shape} instead."
        )
    if "scale" not in obj.attrs:
        return obj, None
    scale = np.asarray(obj.attrs["scale"])
    if scale.size != 1 or scale.dtype.kind not in "fiu" or not (float(scale.item()) > 0):
        raise ValueError(
            f"Attribute 'scale' of dataset 'betas' in {path} must be a positive number, got "
            f"{scale.tolist()!r} instead."
        )
    if not np.isfinite(float(scale.item())):
        raise ValueError(
            f"Attribute 'scale' of dataset 'betas' in {path} must be finite, got "
            f"{scale.item()!r} instead."
        )
    return obj, float(scale.item())


def stored_scale(path: Path, betas_scale: float | None) -> float:
    """What a betas file's stored values are divided by to give betas.

    Parameters
    ----------
    path : Path
        A betas file (NIfTI, HDF5 or ``.npy``).
    betas_scale : float | None
        ``dataset.betas_scale``: the factor integer betas were multiplied by, for files
        that do not declare one themselves.

    Returns
    -------
    scale : float
        The HDF5 attribute ``scale`` when present; else ``betas_scale`` for integer
        values; else 1 (float values, or a NIfTI whose header scales its integers).

    Raises
    ------
    ValueError
        For integer values without a declared scale: NSD-style files store betas times
        a factor (300), and reading them unscaled would put one session on another
        scale than the others.
    """
    import h5py

    if betas_scale is not None and (
        isinstance(betas_scale, bool)
        or not isinstance(betas_scale, int | float)
        or not np.isfinite(betas_scale)
        or betas_scale <= 0
    ):
        raise ValueError(
            f"`dataset.betas_scale` must be a positive number, got {betas_scale!r} instead."
        )
    kind = _kind(path)
    where = f"Betas file {path}"
    header_scaled = False
    if kind == "h5":
        with h5py.File(path, "r") as f:
            dset, attribute = _h5_betas(f, path)
            dtype = dset.dtype
        if attribute is not None:
            if betas_scale is not None and not np.isclose(attribute, betas_scale):
                raise ValueError(
                    f"`dataset.betas_scale` is {betas_scale:g} but the attribute 'scale' of "
                    f"dataset 'betas' in {path} is {attribute:g}; they must agree (or leave "
                    "`dataset.betas_scale` unset)."
                )
            return attribute
        where = f"Dataset 'betas' of {path}"
        how = "the HDF5 attribute 'scale' on dataset 'betas' or `dataset.betas_scale`"
    elif kind == "npy":
        dtype = np.load(path, mmap_mode="r", allow_pickle=False).dtype
        how = "`dataset.betas_scale`"
    else:
        img = load_nifti(path, "Betas image", check_data=False)
        dtype = img.get_data_dtype()
        # nibabel moves the header's scl_slope / scl_inter to the array proxy on loading
        slope = float(getattr(img.dataobj, "slope", 1.0) or 1.0)
        inter = float(getattr(img.dataobj, "inter", 0.0) or 0.0)
        header_scaled = bool(np.isfinite(slope)) and (slope != 1.0 or inter != 0.0)
        how = "`dataset.betas_scale` or the NIfTI header's scl_slope"
    if dtype.kind not in "iu" or header_scaled:
        return 1.0
    if betas_scale is None:
        raise ValueError(
            f"{where} stores {dtype} values without a declared scale: integer betas are "
            "betas times a factor (NSD stores them x 300), which must be declared, got no "
            f"scale instead. Declare it with {how} (e.g. `dataset.betas_scale: 300`), or "
            "store the betas as floats."
        )
    return float(betas_scale)


def _n_trials(path: Path) -> int:
    """Number of trials of a betas file, from its header or shape only."""
    import h5py

    if not path.is_file():
        raise FileNotFoundError(f"Betas file {path} does not exist.")
    kind = _kind(path)
    if kind == "nifti":
        shape = load_nifti(path, "Betas image").shape
        if len(shape) != 4:
            raise ValueError(
                f"Betas image {path} must be 4-D (x, y, z, trial), got shape {shape} instead."
            )
        return int(shape[3])
    if kind == "h5":
        with h5py.File(path, "r") as f:
            return int(_h5_betas(f, path)[0].shape[0])
    shape = np.load(path, mmap_mode="r", allow_pickle=False).shape
    if len(shape) != 2:
        raise ValueError(
            f"Betas file {path} must hold a (trial, voxel) matrix, got shape {shape} instead."
        )
    return int(shape[0])


def _mask_grid(mask: Path) -> tuple[np.ndarray, np.ndarray]:
    """Boolean mask (positive voxels) and affine of a 3-D mask image."""
    if not mask.is_file():
        raise FileNotFoundError(f"Mask file {mask} does not exist.")
    img = load_nifti(mask, "Mask")
    shape = img.shape
    if len(shape) > 3 and int(np.prod(shape[3:])) != 1:
        raise ValueError(f"Mask {mask} must be 3-D, got shape {shape} instead.")
    if len(shape) < 3:
        raise ValueError(f"Mask {mask} must be 3-D, got shape {shape} instead.")
    data = np.asanyarray(img.dataobj).reshape(shape[:3])
    inside = np.isfinite(data) & (data > 0)
    if not inside.any():
        raise ValueError(f"Mask {mask} must have at least one positive voxel, got none.")
    return inside, np.asarray(img.affine, float)


def _check_finite(values: np.ndarray, path: Path, mask: Path | None) -> None:
    """Raise when betas inside the mask are not finite."""
    n_bad = int(values.size - np.count_nonzero(np.isfinite(values)))
    if n_bad:
        where = f"the mask {mask}" if mask is not None else "the voxels kept"
        raise ValueError(
            f"Betas file {path} has {n_bad} NaN or infinite value(s) inside {where}; betas "
            "must be finite there."
        )


def _matrix_voxels(path: Path, mask: Path | None, n_columns: int) -> _Grid:
    """Grid of a (trial, voxel) matrix: the mask's positive voxels in C order."""
    if mask is None:
        raise ValueError(
            f"Betas file {path} holds a (trial, voxel) matrix and needs a mask "
            "(<entities>_mask.nii[.gz]) to place its voxels in space, got none instead."
        )
    inside, affine = _mask_grid(mask)
    voxels = np.argwhere(inside)
    if len(voxels) != n_columns:
        raise ValueError(
            f"Mask {mask} has {len(voxels)} voxels but betas file {path} holds "
            f"{n_columns}; they must match."
        )
    return _Grid(tuple(int(s) for s in inside.shape), affine, voxels, mask)


def _load_nifti(path: Path, mask: Path | None, scale: float) -> tuple[np.ndarray, _Grid]:
    """(trial, voxel) float32 betas of a 4-D NIfTI (values / ``scale``) and their grid."""
    from neuroflow.preprocessing.fmri.inputs import on_bold_grid

    img = load_nifti(path, "Betas image")
    shape = tuple(int(s) for s in img.shape[:3])
    flat, slope, inter = nifti_voxel_rows(img)  # (n_grid_voxels, n_trials), Fortran voxel order

    def scaled(rows: np.ndarray | slice) -> np.ndarray:
        values = np.asarray(flat[rows], dtype=np.float32)
        if slope != 1.0 or inter != 0.0:
            values = values * np.float32(slope) + np.float32(inter)
        if scale != 1.0:
            values = values / np.float32(scale)
        return values

    if mask is not None:
        if not mask.is_file():
            raise FileNotFoundError(f"Mask file {mask} does not exist.")
        grid = on_bold_grid(
            load_nifti(mask, "Mask"), img, source=str(mask), what="mask", reference_source=str(path)
        )
        inside = grid > 0
        if not inside.any():
            raise ValueError(f"Mask {mask} has no voxel inside the field of view of {path}.")
    else:
        keep = np.zeros(flat.shape[0], bool)
        for start in range(0, flat.shape[0], VOXEL_BLOCK):
            values = scaled(slice(start, start + VOXEL_BLOCK))
            keep[start : start + VOXEL_BLOCK] = (np.isfinite(values) & (values != 0)).any(axis=1)
        inside = keep.reshape(shape, order="F")
        if not inside.any():
            raise ValueError(
                f"Betas image {path} has no voxel with a finite, non-zero beta in any trial."
            )
    voxels = np.argwhere(inside)
    rows = np.ravel_multi_index(tuple(voxels.T), shape, order="F")
    betas = np.empty((flat.shape[1], len(rows)), np.float32)
    for start in range(0, len(rows), VOXEL_BLOCK):
        betas[:, start : start + VOXEL_BLOCK] = scaled(rows[start : start + VOXEL_BLOCK]).T
    _check_finite(betas, path, mask)
    return betas, _Grid(shape, np.asarray(img.affine, float), voxels, mask)


def _load_h5(path: Path, mask: Path | None, scale: float) -> tuple[np.ndarray, _Grid]:
    """(trial, voxel) float32 betas of an HDF5 file (values / ``scale``) and their grid."""
    import h5py

    with h5py.File(path, "r") as f:
        dset, _ = _h5_betas(f, path)
        n_trials = dset.shape[0]

        def block(start: int) -> np.ndarray:
            values = np.asarray(dset[start : start + TRIAL_BLOCK], dtype=np.float32)
            return values.reshape(values.shape[0], -1) / np.float32(scale)

        if dset.ndim == 2:
            grid = _matrix_voxels(path, mask, dset.shape[1])
            columns = None
        else:
            shape = tuple(int(s) for s in dset.shape[1:])
            if mask is not None:
                inside, affine = _mask_grid(mask)
                if inside.shape != shape:
                    raise ValueError(
                        f"Mask {mask} has shape {inside.shape} but the betas grid of {path} "
                        f"is {shape}; they must match."
                    )
            else:
                keep = np.zeros(int(np.prod(shape)), bool)
                for start in range(0, n_trials, TRIAL_BLOCK):
                    values = block(start)
                    keep |= (np.isfinite(values) & (values != 0)).any(axis=0)
                inside = keep.reshape(shape)
                if not inside.any():
                    raise ValueError(
                        f"Betas file {path} has no voxel with a finite, non-zero beta in any trial."
                    )
                affine = _h5_affine(dset, path)
            voxels = np.argwhere(inside)
            grid = _Grid(shape, affine, voxels, mask)
            columns = np.ravel_multi_index(tuple(voxels.T), shape)
        betas = np.empty((n_trials, len(grid.voxels)), np.float32)
        for start in range(0, n_trials, TRIAL_BLOCK):
            values = block(start)
            betas[start : start + TRIAL_BLOCK] = values if columns is None else values[:, columns]
    _check_finite(betas, path, mask)
    return betas, grid


def _h5_affine(dset: Any, path: Path) -> np.ndarray:
    """The optional ``affine`` attribute of a gridded HDF5 betas dataset, else identity."""
    if "affine" in dset.attrs:
        affine = np.asarray(dset.attrs["affine"], float)
        if affine.shape != (4, 4) or not np.isfinite(affine).all():
            raise ValueError(
                f"Attribute 'affine' of dataset 'betas' in {path} must be a finite 4 x 4 "
                f"matrix, got shape {affine.shape} instead."
            )
        return affine
    logger.warning(
        "Betas file %s has neither a mask nor an 'affine' attribute; x, y, z are voxel indices.",
        path,
    )
    return np.eye(4)


def _load_npy(path: Path, mask: Path | None, scale: float) -> tuple[np.ndarray, _Grid]:
    """(trial, voxel) float32 betas of a ``.npy`` matrix (values / ``scale``) and their grid."""
    data = np.load(path, mmap_mode="r", allow_pickle=False)
    if data.ndim != 2:
        raise ValueError(
            f"Betas file {path} must hold a (trial, voxel) matrix, got shape {data.shape} instead."
        )
    if data.dtype.kind not in "fiu":
        raise ValueError(f"Betas file {path} must hold numbers, got dtype {data.dtype} instead.")
    grid = _matrix_voxels(path, mask, data.shape[1])
    betas = np.asarray(data, dtype=np.float32)
    if scale != 1.0:
        betas = betas / np.float32(scale)
    _check_finite(betas, path, mask)
    return betas, grid


def _load_betas(session: BetasSession, scale: float) -> tuple[np.ndarray, _Grid]:
    """(trial, voxel) float32 betas of one session (stored values / ``scale``) and their
    grid."""
    path = Path(session.betas)
    mask = Path(session.mask) if session.mask is not None else None
    loader = {"nifti": _load_nifti, "h5": _load_h5, "npy": _load_npy}[_kind(path)]
    return loader(path, mask, scale)


def _same_grid(a: _Grid, b: _Grid, first: BetasSession, other: BetasSession) -> None:
    """Raise when two sessions' betas are not on one grid with one voxel selection."""
    what = None
    if a.shape != b.shape:
        what = f"grid shape {list(a.shape)} vs {list(b.shape)}"
    elif not np.allclose(a.affine, b.affine, atol=1e-4):
        what = "affine"
    elif a.voxels.shape != b.voxels.shape or not np.array_equal(a.voxels, b.voxels):
        what = f"voxels ({len(a.voxels)} vs {len(b.voxels)} in the mask)"
    if what is not None:
        files = [f"{s.betas} (mask {s.mask or 'none'})" for s in (first, other)]
        raise ValueError(
            f"Sessions of sub-{first.subject} must share one voxel grid and mask: "
            f"{files[0]} and {files[1]} differ in {what}."
        )


def _load_ncsnr(path: Path, grid: _Grid) -> np.ndarray:
    """ncsnr of the kept voxels from an image on the betas grid or a ``.npy`` array."""
    if not path.is_file():
        raise FileNotFoundError(f"ncsnr file {path} does not exist.")
    if path.name.endswith(".npy"):
        data = np.asarray(np.load(path, allow_pickle=False), dtype=np.float64)
        if data.shape == (len(grid.voxels),):
            return data
        if data.shape == grid.shape:
            return data[tuple(grid.voxels.T)]
        raise ValueError(
            f"ncsnr file {path} must have shape ({len(grid.voxels)},) (one value per voxel) "
            f"or the betas grid {grid.shape}, got {data.shape} instead."
        )
    img = load_nifti(path, "ncsnr image")
    shape = img.shape
    if shape[:3] != grid.shape or int(np.prod(shape[3:])) != 1:
        raise ValueError(
            f"ncsnr image {path} must be on the betas grid {grid.shape}, got shape {shape} instead."
        )
    if not np.allclose(img.affine, grid.affine, atol=1e-4):
        raise ValueError(f"ncsnr image {path} must have the affine of the betas grid.")
    data = np.asarray(img.get_fdata(dtype=np.float64)).reshape(grid.shape)
    return data[tuple(grid.voxels.T)]


def _session_label(session: BetasSession) -> str:
    """``ses-<x>`` (``sub-<s>`` for a subject without sessions)."""
    return f"ses-{session.session}" if session.session else f"sub-{session.subject}"

"""Reading and validating the inputs of one fMRI run.

Every check here runs before the stage writes anything, and every error names
the file and the field at fault.
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

from neuroflow.io.files import load_nifti, nifti_voxel_rows

__all__ = [
    "grids_overlap",
    "load_bold",
    "load_events",
    "load_masked",
    "load_roi_labels",
    "mean_image",
    "on_bold_grid",
    "repetition_time",
    "smooth_image",
    "world_extent",
]

#: Relative tolerance when comparing the sidecar's and the header's TR.
TR_RTOL = 1e-3


def load_bold(path: str | os.PathLike) -> nib.Nifti1Image:
    """Open a 4-D BOLD image without reading its data.

    Parameters
    ----------
    path : path-like
        NIfTI file.

    Returns
    -------
    img : nibabel.Nifti1Image
        Image with at least 2 volumes, whose file holds every voxel of its header
        (a truncated or damaged file raises a ValueError naming it).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"BOLD file {path} does not exist.")
    img = load_nifti(path, "BOLD image")
    if img.ndim != 4:
        raise ValueError(
            f"BOLD image {path} must be 4-D (x, y, z, time), got shape {img.shape} instead."
        )
    if img.shape[3] < 2:
        raise ValueError(f"BOLD image {path} must have at least 2 volumes, got {img.shape[3]}.")
    return img


def repetition_time(img: nib.Nifti1Image, metadata: Mapping[str, Any], *, source: str) -> float:
    """Repetition time in seconds, from the sidecars or else the NIfTI header.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        The BOLD image (its ``pixdim[4]`` and time units).
    metadata : dict
        Merged JSON sidecars.
    source : str
        Name of the BOLD file, for messages.

    Returns
    -------
    tr : float
        The sidecar's ``RepetitionTime`` when present (BIDS makes it authoritative: a
        warning names the file and both values when the header's differs by more than
        :data:`TR_RTOL`; a header without a TR, ``pixdim[4] == 0``, is not warned
        about), else the header's.
    """
    zoom = float(img.header.get_zooms()[3])
    unit = img.header.get_xyzt_units()[1]
    header_tr = zoom / {"msec": 1e3, "usec": 1e6}.get(unit, 1.0) if zoom > 0 else None
    sidecar_tr = metadata.get("RepetitionTime")
    if sidecar_tr is not None:
        if (
            isinstance(sidecar_tr, bool)
            or not isinstance(sidecar_tr, int | float)
            or sidecar_tr <= 0
        ):
            raise ValueError(
                f"RepetitionTime in the sidecars of {source} must be a positive number, "
                f"got {sidecar_tr!r} instead."
            )
        if header_tr is not None and not np.isclose(header_tr, sidecar_tr, rtol=TR_RTOL):
            warnings.warn(
                f"RepetitionTime of {source} is {sidecar_tr} s in its sidecar but "
                f"{round(header_tr, 6)} s in its NIfTI header (pixdim[4]); using the sidecar's "
                f"{sidecar_tr} s, which BIDS makes authoritative.",
                stacklevel=2,
            )
        return float(sidecar_tr)
    if header_tr is None:
        raise ValueError(
            f"No repetition time for {source}: no RepetitionTime in its JSON sidecars and "
            f"pixdim[4] of its NIfTI header is {zoom}."
        )
    return header_tr


def load_events(path: str | os.PathLike | None, *, run_duration: float) -> pd.DataFrame:
    """Read an ``_events.tsv`` and check it against the run.

    Parameters
    ----------
    path : path-like | None
        The events table (``None`` gives an empty table).
    run_duration : float
        ``n_volumes * tr`` in seconds.

    Returns
    -------
    events : pandas.DataFrame
        At least ``onset`` and ``duration`` (float); ``n/a`` cells are missing
        values.
    """
    if path is None:
        return pd.DataFrame({"onset": np.zeros(0), "duration": np.zeros(0)})
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Events file {path} does not exist.")
    events = pd.read_csv(path, sep="\t", na_values=["n/a"], keep_default_na=False, dtype=str)
    for column in ("onset", "duration"):
        if column not in events.columns:
            raise ValueError(
                f"Events file {path} must have a {column!r} column, got columns "
                f"{list(events.columns)} instead."
            )
        values = pd.to_numeric(events[column], errors="coerce")
        bad = values.isna() & events[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Events file {path}: {column!r} must be numeric, got "
                f"{events[column].iloc[row]!r} in row {row + 1} instead."
            )
        events[column] = values.astype(float)
    negative = events["duration"] < 0
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        raise ValueError(
            f"Events file {path}: 'duration' must be >= 0 s (or n/a for an impulse), got "
            f"{events['duration'].iloc[row]} in row {row + 1} instead."
        )
    late = events["onset"] >= run_duration
    if late.any():
        row = int(np.flatnonzero(late)[0])
        raise ValueError(
            f"Events file {path}: onset {events['onset'].iloc[row]} s (row {row + 1}) is past "
            f"the end of the run ({run_duration:g} s)."
        )
    return events


def _affine_text(affine: np.ndarray) -> str:
    """A 4 x 4 affine on one line, rows in brackets (mm, 3 decimals)."""
    rows = np.round(np.asarray(affine, float)[:3], 3) + 0.0
    return "[" + ", ".join("[" + " ".join(f"{v:g}" for v in row) + "]" for row in rows) + "]"


def world_extent(shape: Sequence[int], affine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounding box in world coordinates of a voxel grid (voxel edges included).

    Parameters
    ----------
    shape : sequence of int, length >= 3
        Grid shape (only the first three axes are used).
    affine : ndarray, shape (4, 4)
        Voxel to world (mm) transform.

    Returns
    -------
    low, high : ndarray, shape (3,)
        Smallest and largest world coordinate (mm) of the grid's corners.
    """
    edges = [(-0.5, n - 0.5) for n in shape[:3]]
    corners = np.array(np.meshgrid(*edges, indexing="ij")).reshape(3, -1).T
    world = nib.affines.apply_affine(np.asarray(affine, float), corners)
    return world.min(axis=0), world.max(axis=0)


def grids_overlap(
    shape: Sequence[int], affine: np.ndarray, other_shape: Sequence[int], other: np.ndarray
) -> bool:
    """Whether the world bounding boxes of two voxel grids intersect.

    Parameters
    ----------
    shape, other_shape : sequence of int
        Grid shapes.
    affine, other : ndarray, shape (4, 4)
        Their voxel to world transforms.

    Returns
    -------
    overlap : bool
        False only when the boxes are disjoint on some axis (rotated grids may still
        share no voxel when True).
    """
    low, high = world_extent(shape, affine)
    other_low, other_high = world_extent(other_shape, other)
    return bool(np.all(low < other_high) and np.all(other_low < high))


def on_bold_grid(
    img: nib.spatialimages.SpatialImage,
    reference: nib.Nifti1Image,
    *,
    source: str,
    what: str,
    reference_source: str | None = None,
) -> np.ndarray:
    """Integer data of a 3-D image on the BOLD grid (nearest-neighbour).

    Parameters
    ----------
    img : nibabel image
        Mask or label image (3-D, or 4-D with one volume).
    reference : nibabel.Nifti1Image
        The BOLD image.
    source : str
        File name of ``img``, for messages.
    what : str
        "mask" or "atlas", for messages.
    reference_source : str | None
        File name of ``reference``, for messages (default: its own file name).

    Returns
    -------
    data : ndarray, shape (nx, ny, nz)
        Integer values on the BOLD grid. When the grids differ (shape or affine),
        ``img`` is resampled with nearest-neighbour interpolation and a warning names
        both files, their shapes and their affines.

    Raises
    ------
    ValueError
        When ``img`` is not 3-D, or its field of view does not overlap the BOLD
        image's (the boxes of the two grids in world coordinates are disjoint).
    """
    from nilearn.image import resample_img

    shape = img.shape[:3]
    if len(img.shape) > 3 and int(np.prod(img.shape[3:])) != 1:
        raise ValueError(
            f"{what.capitalize()} {source} must be 3-D, got shape {img.shape} instead."
        )
    bold = reference_source or reference.get_filename() or "the BOLD image"
    target_shape = reference.shape[:3]
    affine, target_affine = np.asarray(img.affine, float), np.asarray(reference.affine, float)
    if shape != target_shape or not np.allclose(affine, target_affine, atol=1e-4):
        grids = (
            f"{what} shape {shape}, affine {_affine_text(affine)}; BOLD shape {target_shape}, "
            f"affine {_affine_text(target_affine)}"
        )
        if not grids_overlap(shape, affine, target_shape, target_affine):
            raise ValueError(
                f"{what.capitalize()} {source} does not overlap the field of view of the BOLD "
                f"image {bold}: it must share part of the BOLD grid in world coordinates, got "
                f"disjoint grids instead ({grids}). Check that both are in the same space."
            )
        warnings.warn(
            f"{what.capitalize()} {source} is on another grid than the BOLD image {bold} "
            f"({grids}); resampling it to the BOLD grid with nearest-neighbour interpolation.",
            stacklevel=2,
        )
        img3 = nib.Nifti1Image(np.asanyarray(img.dataobj).reshape(shape), affine)
        img = resample_img(
            img3,
            target_affine=target_affine,
            target_shape=target_shape,
            interpolation="nearest",
            force_resample=True,
            copy_header=True,
        )
    data = np.asanyarray(img.dataobj).reshape(target_shape)
    if not np.isfinite(data).all():
        data = np.where(np.isfinite(data), data, 0)
    return np.rint(data).astype(np.int64)


def load_roi_labels(path: str | os.PathLike) -> dict[int, str]:
    """Read a labels table with ``index`` and ``name`` columns.

    Parameters
    ----------
    path : path-like
        TSV file (BIDS ``dseg.tsv`` style).

    Returns
    -------
    labels : dict of int to str
        Label value to name.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"ROI labels file {path} does not exist.")
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in ("index", "name") if c not in table.columns]
    if missing:
        raise ValueError(
            f"ROI labels file {path} must have 'index' and 'name' columns, got "
            f"{list(table.columns)} instead."
        )
    index = pd.to_numeric(table["index"], errors="coerce")
    if index.isna().any():
        row = int(np.flatnonzero(index.isna())[0])
        raise ValueError(
            f"ROI labels file {path}: 'index' must be an integer, got "
            f"{table['index'].iloc[row]!r} in row {row + 1} instead."
        )
    return {int(i): str(n) for i, n in zip(index, table["name"], strict=True)}


def mean_image(img: nib.Nifti1Image, *, block: int = 16384) -> nib.Nifti1Image:
    """Temporal mean of a 4-D image, computed without a float64 4-D copy.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        4-D image.
    block : int
        Voxels per block.

    Returns
    -------
    mean : nibabel.Nifti1Image
        3-D float32 image on the same grid.
    """
    flat, slope, inter = nifti_voxel_rows(img)
    out = np.empty(flat.shape[0], np.float64)
    for start in range(0, flat.shape[0], block):
        out[start : start + block] = flat[start : start + block].mean(axis=1, dtype=np.float64)
    out = out * slope + inter
    return nib.Nifti1Image(out.reshape(img.shape[:3], order="F").astype(np.float32), img.affine)


def load_masked(
    img: nib.Nifti1Image,
    voxels: np.ndarray,
    *,
    source: str,
    start: int = 0,
    block: int = 8192,
) -> np.ndarray:
    """Read the time series of selected voxels as float32.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        4-D BOLD image.
    voxels : ndarray of int, shape (n_voxels, 3)
        ``(i, j, k)`` indices of the voxels to read.
    source : str
        File name, for messages.
    start : int
        First volume returned (earlier ones are dropped).
    block : int
        Voxels per block.

    Returns
    -------
    data : ndarray, shape (n_times - start, n_voxels)
        Float32, Fortran-ordered (each voxel's series contiguous).
    """
    flat, slope, inter = nifti_voxel_rows(img)
    nx, ny, _ = img.shape[:3]
    rows = voxels[:, 0] + nx * (voxels[:, 1] + ny * voxels[:, 2])
    n_times = flat.shape[1]
    out = np.empty((rows.size, n_times - start), np.float32)
    for first in range(0, rows.size, block):
        out[first : first + block] = flat[rows[first : first + block], start:]
    if slope != 1.0 or inter != 0.0:
        out *= np.float32(slope)
        out += np.float32(inter)
    bad = ~np.isfinite(out)
    if bad.any():
        n_bad_vox = int(bad.any(axis=1).sum())
        first = start + int(np.flatnonzero(bad.any(axis=0))[0])
        raise ValueError(
            f"BOLD image {source} has NaN or infinite values in {n_bad_vox} voxel(s) "
            f"(first in volume {first}); it must be finite within the brain mask."
        )
    return out.T


def smooth_image(img: nib.Nifti1Image, fwhm: float, *, block: int = 16) -> nib.Nifti1Image:
    """Gaussian smoothing of a 4-D image, a few volumes at a time.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        4-D image.
    fwhm : float
        Full width at half maximum of the kernel (mm), as
        :func:`nilearn.image.smooth_img` takes it.
    block : int
        Volumes smoothed at once.

    Returns
    -------
    smoothed : nibabel.Nifti1Image
        Float32 image with the affine and header of ``img``. No second 4-D copy is
        made: the array ``img.get_fdata`` returns (and caches) is smoothed in place,
        so ``img``'s data must not be read after the call.
    """
    from nilearn.image import smooth_img

    data = img.get_fdata(dtype=np.float32)
    for start in range(0, data.shape[3], block):
        part = nib.Nifti1Image(data[..., start : start + block], img.affine)
        data[..., start : start + block] = smooth_img(part, fwhm).get_fdata(dtype=np.float32)
    return nib.Nifti1Image(data, img.affine, img.header)


def sidecar_paths(sidecars: Sequence[str | os.PathLike] | None) -> list[Path]:
    """Sidecar paths as a list, checking that they exist."""
    paths = [Path(p) for p in (sidecars or [])]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"Sidecar {p} does not exist.")
    return paths

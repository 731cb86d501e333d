"""Single-trial response estimates made elsewhere (NSD style): indexing and import.

Large event-related datasets such as the Natural Scenes Dataset share their
single-trial betas (GLMsingle) rather than raw runs. ``dataset.source: betas`` reads
them in place of the ``single_trial`` stage's estimates, into a store with the exact
layout of :func:`neuroflow.preprocessing.fmri.single_trial.estimate_single_trials`.

Layout
------
* ``sub-<s>/[ses-<x>/][func/]sub-<s>[_ses-<x>][_task-<t>]_betas.{nii.gz,nii,h5,npy}``,
  anywhere below the subject folder: a 4-D NIfTI (x, y, z, trial); an HDF5 file whose
  dataset ``betas`` is (trial, voxel) or (trial, x, y, z), stored values divided by its
  optional attribute ``scale`` (NSD stores int16 betas × 300); a ``.npy`` (trial, voxel)
  matrix. Integer values must declare their scale (the attribute ``scale``, a NIfTI
  header's scaling, or ``dataset.betas_scale``); float values are betas as they are.
* Beside each, ``<same entities>_trials.tsv``: one row per trial, column ``stim_file``
  (the stimulus id), optional ``trial_type``, ``run``, ``onset``, ``duration``.
* Optional ``<entities>_mask.nii[.gz]`` and ``<entities>_ncsnr.{nii.gz,nii,npy}``, found
  by the BIDS inheritance principle (a subject-level ``sub-<s>_mask.nii.gz`` applies to
  every session; the most specific file wins).

(trial, voxel) matrices need the mask: its positive voxels, in C order (``np.argwhere``),
are the matrix's columns. 4-D grids keep the mask's voxels, else those finite and
non-zero in at least one trial.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.io.arrays import repeat_index, string_array
from neuroflow.io.bids import (
    DirectoryListing,
    EntityFilters,
    _check_filter,
    _keep,
    _subdirs,
    check_root,
    filter_labels,
    nothing_found,
    record_seen_labels,
)
from neuroflow.io.files import load_nifti, nifti_voxel_rows
from neuroflow.io.records import BetasSession
from neuroflow.rois import UNLABELLED

__all__ = ["import_betas", "index_betas", "read_trials", "stored_scale"]

logger = logging.getLogger(__name__)

BETAS_EXTENSIONS = (".nii.gz", ".nii", ".h5", ".npy")
MASK_EXTENSIONS = (".nii.gz", ".nii")
NCSNR_EXTENSIONS = (".nii.gz", ".nii", ".npy")
#: Trials read at a time from HDF5 and NIfTI files (bounded temporaries).
TRIAL_BLOCK = 64
#: Voxels read at a time from NIfTI files.
VOXEL_BLOCK = 16384
_MISSING = frozenset({"", "n/a"})


# --------------------------------------------------------------------------- indexing
def _folders(subject_dir: Path) -> Iterator[Path]:
    """The subject folder and every folder below it (hidden ones skipped), sorted."""
    for here, dirs, _ in os.walk(subject_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield Path(here)


def _inherited(
    root: Path,
    folder: Path,
    entities: dict[str, str],
    *,
    suffix: str,
    extensions: Sequence[str],
    listing: DirectoryListing,
) -> list[Path]:
    """Metadata files that apply to a data file in ``folder``, least specific first.

    The rule of :func:`neuroflow.io.bids.find_inherited` (a file applies when its
    entities are a subset of the data file's), along every folder from the dataset root
    down to ``folder``, which may lie at any depth below the subject folder.
    """
    subject_dir = root / f"sub-{entities['sub']}"
    parts = folder.relative_to(subject_dir).parts
    levels = [
        root,
        subject_dir,
        *(subject_dir.joinpath(*parts[: i + 1]) for i in range(len(parts))),
    ]
    found: list[Path] = []
    for level in levels:
        here = [
            (len(ents), name)
            for name, ents, suf, ext in listing.files(level)
            if suf == suffix
            and ext in extensions
            and all(entities.get(k) == v for k, v in ents.items())
        ]
        found.extend(level / name for _, name in sorted(here))
    return found


def _session(
    root: Path, folder: Path, name: str, entities: dict[str, str], listing: DirectoryListing
) -> BetasSession:
    """Record of one betas file with its trials table, mask and ncsnr."""
    betas = folder / name
    trials = [
        folder / n
        for n, ents, suf, ext in listing.files(folder)
        if suf == "trials" and ext == ".tsv" and ents == entities
    ]
    if not trials:
        stem = name.split("_betas")[0]
        raise FileNotFoundError(
            f"Betas file {betas} must have a trials table beside it, got none instead "
            f"(looked for {folder / f'{stem}_trials.tsv'})."
        )

    def last(suffix: str, extensions: Sequence[str]) -> Path | None:
        found = _inherited(
            root, folder, entities, suffix=suffix, extensions=extensions, listing=listing
        )
        return found[-1] if found else None

    return BetasSession(
        subject=entities["sub"],
        session=entities.get("ses"),
        betas=betas,
        trials=trials[0],
        mask=last("mask", MASK_EXTENSIONS),
        ncsnr=last("ncsnr", NCSNR_EXTENSIONS),
    )


def index_betas(
    root: str | os.PathLike,
    *,
    subjects: Iterable[str] | None = None,
    sessions: Iterable[str] | None = None,
    strict: bool = True,
    seen: dict[str, set[str]] | None = None,
) -> list[BetasSession]:
    """Index the single-trial betas of a BIDS-like dataset, one record per session.

    Parameters
    ----------
    root : path-like
        Dataset root with ``sub-*/**/*_betas.{nii.gz,nii,h5,npy}`` files (searched
        recursively below each subject folder).
    subjects, sessions : iterable of str | None
        Labels to keep (without prefixes); ``None`` or empty keeps all. Labels match as
        integers, so ``"1"`` selects ``ses-01``.
    strict : bool
        Raise when a filter names a label no betas file has, or when none is found.
        ``False`` returns what matches (possibly nothing).
    seen : dict of str to set of str | None
        Filled with the ``ses``, ``task`` and ``run`` labels of every betas file looked
        at (before filtering).

    Returns
    -------
    sessions : list of BetasSession
        Sorted by entity key. Every betas file has its ``_trials.tsv`` (same folder,
        same entities); masks and ncsnr files follow the inheritance principle.
    """
    root = check_root(root, "root")
    filters = EntityFilters(
        filter_labels(subjects, "subjects"), filter_labels(sessions, "sessions"), None, None
    )
    subject_labels = _subdirs(root, "sub")
    if strict:
        _check_filter("subject", filters.subjects, set(subject_labels), root)
    listing = DirectoryListing()
    records = []
    for sub in subject_labels:
        if not _keep(sub, filters.subjects):
            continue
        for folder in _folders(root / f"sub-{sub}"):
            for name, ents, suf, ext in listing.files(folder):
                if suf != "betas" or ext not in BETAS_EXTENSIONS or ents.get("sub") != sub:
                    continue
                if filters.keep(ents):
                    records.append(_session(root, folder, name, ents, listing))
    record_seen_labels(filters, seen)
    if strict:
        filters.check(root)
        if not records:
            raise nothing_found("single-trial betas", root, "sub-*/**/*_betas.{nii.gz,nii,h5,npy}")
    keys = [r.key for r in records]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        files = [str(r.betas) for r in records if r.key == duplicates[0]]
        raise ValueError(
            f"Several betas files belong to {duplicates[0]} ({', '.join(files)}); keep one "
            "per session or narrow the selection."
        )
    return sorted(records, key=lambda r: r.key)


# --------------------------------------------------------------------------- trials
def read_trials(path: str | os.PathLike) -> pd.DataFrame:
    """Read a ``_trials.tsv``: one row per trial.

    Parameters
    ----------
    path : path-like
        Table with a ``stim_file`` column (the stimulus id, required in every row) and
        optional ``trial_type``, ``run``, ``onset`` and ``duration`` columns, where
        ``n/a`` cells are missing values.

    Returns
    -------
    trials : pandas.DataFrame
        Columns ``stim_file``, ``trial_type`` (str, ``""`` when missing), ``run`` (str,
        ``""`` when missing), ``onset`` and ``duration`` (float, NaN when missing).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Trials table {path} does not exist.")
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    table.columns = [str(c).strip() for c in table.columns]
    if "stim_file" not in table.columns:
        raise ValueError(
            f"Trials table {path} must have a 'stim_file' column, got columns "
            f"{list(table.columns)} instead."
        )
    cells = {c: table[c].str.strip() for c in table.columns}
    missing = {c: v.str.lower().isin(_MISSING) for c, v in cells.items()}
    if missing["stim_file"].any():
        row = int(np.flatnonzero(missing["stim_file"])[0])
        raise ValueError(
            f"Trials table {path}: 'stim_file' must name a stimulus in every row, got "
            f"{cells['stim_file'].iloc[row]!r} in row {row + 1} instead."
        )
    out = pd.DataFrame({"stim_file": cells["stim_file"].to_numpy(str)})
    for column in ("trial_type", "run"):
        if column in cells:
            out[column] = cells[column].where(~missing[column], "").to_numpy(str)
        else:
            out[column] = np.full(len(table), "", dtype=object)
    for column in ("onset", "duration"):
        if column not in cells:
            out[column] = np.full(len(table), np.nan)
            continue
        values = pd.to_numeric(cells[column].where(~missing[column]), errors="coerce")
        bad = values.isna() & ~missing[column]
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"Trials table {path}: {column!r} must be numeric, got "
                f"{cells[column].iloc[row]!r} in row {row + 1} instead."
            )
        out[column] = values.to_numpy(float)
    return out


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


# --------------------------------------------------------------------------- stage
def import_betas(
    *,
    sessions: Sequence[BetasSession],
    output: str | os.PathLike,
    config: Mapping[str, Any] | None,
    provenance: Mapping[str, Any],
    roi_atlas: str | os.PathLike | None = None,
    roi_labels: str | os.PathLike | None = None,
    betas_scale: float | None = None,
) -> Path:
    """Import single-trial betas estimated elsewhere into a ``single_trial`` store.

    Parameters
    ----------
    sessions : sequence of BetasSession
        Every session of ONE subject (:func:`index_betas`), on one voxel grid with one
        voxel selection.
    output : path-like
        Store to write (``.zarr``).
    config : dict | None
        The ``single_trial`` config section (defaults fill missing keys); ``zscore``
        and ``noise_ceiling_n`` apply.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    roi_atlas, roi_labels : path-like | None
        Label image (resampled to the betas grid by nearest neighbour when on another
        grid) and its ``index``/``name`` TSV.
    betas_scale : float | None
        ``dataset.betas_scale``: the factor that integer betas files without a ``scale``
        attribute (or NIfTI scaling) were multiplied by (NSD: 300). Integer betas
        declare their scale one way or the other; float betas are read as they are.

    Returns
    -------
    output : Path
        The written store, laid out as
        :func:`~neuroflow.preprocessing.fmri.single_trial.estimate_single_trials`':
        ``betas`` float32 (trial, voxel), z-scored within each session when ``zscore``;
        trial coordinates ``stimulus`` (``stim_file``), ``trial_type`` (``""`` when
        absent), ``onset`` and ``duration`` (s, NaN when absent), ``run`` (``ses-<x>``,
        plus ``_run-<r>`` from a ``run`` column) and ``repeat``; voxel coordinates
        ``voxel``, ``i``, ``j``, ``k``, ``x``, ``y``, ``z`` (mm) and ``roi``; ``ncsnr``
        and ``noise_ceiling`` (voxel, percent for the mean of ``noise_ceiling_n``
        repeats); attrs ``method`` (``"imported"``), ``n_trials``,
        ``n_repeated_stimuli``, ``noise_ceiling_n``, ``zscore``, ``entities``
        (``subject``), ``sessions``, ``ncsnr_source``, ``affine``, ``mask_shape`` and
        ``source_files``.

    Notes
    -----
    The ncsnr comes from the sessions' ncsnr file when they share one; otherwise it is
    computed with :func:`~neuroflow.preprocessing.fmri.ncsnr.ncsnr_from_betas` (betas
    z-scored within each session) when a stimulus repeats, else it is NaN.
    """
    import nibabel as nib
    import xarray as xr

    from neuroflow.artifacts import write_dataset
    from neuroflow.preprocessing.fmri.inputs import load_roi_labels
    from neuroflow.preprocessing.fmri.ncsnr import (
        ncsnr_from_betas,
        noise_ceiling_from_ncsnr,
        repeat_counts,
        typical_repeat_count,
        zscore_within,
    )
    from neuroflow.preprocessing.fmri.single_trial import resolve_config
    from neuroflow.preprocessing.fmri.stage import roi_coordinate

    cfg = resolve_config(config)
    if isinstance(sessions, BetasSession) or not sessions:
        raise ValueError(
            f"`sessions` must be a non-empty list of BetasSession, got {sessions!r} instead."
        )
    sessions = list(sessions)
    subjects = sorted({s.subject for s in sessions})
    if len(subjects) > 1:
        raise ValueError(
            f"`sessions` must all belong to one subject, got subjects {subjects} instead."
        )
    labels = [_session_label(s) for s in sessions]
    if len(set(labels)) != len(labels):
        raise ValueError(f"`sessions` must hold each session once, got {labels} instead.")
    if roi_labels is not None and roi_atlas is None:
        raise ValueError("`roi_labels` is given but `roi_atlas` is not; give both.")
    if roi_labels is not None:
        load_roi_labels(roi_labels)

    # validate every trials table against its betas before reading any betas
    tables, scales = [], []
    for session, label in zip(sessions, labels, strict=True):
        table = read_trials(session.trials)
        n_trials = _n_trials(Path(session.betas))
        scales.append(stored_scale(Path(session.betas), betas_scale))
        if len(table) != n_trials:
            raise ValueError(
                f"Trials table {session.trials} has {len(table)} rows but betas file "
                f"{session.betas} holds {n_trials} trials; they must match."
            )
        if cfg["zscore"] and n_trials < 2:
            raise ValueError(
                f"Betas file {session.betas} has {n_trials} trial(s); z-scoring betas per "
                "session needs at least 2 (set zscore to false)."
            )
        run = np.array([label if not r else f"{label}_run-{r}" for r in table["run"]], dtype=object)
        tables.append(table.assign(run=run, session=label))

    betas, grid = [], None
    for session, scale in zip(sessions, scales, strict=True):
        values, this = _load_betas(session, scale)
        if grid is None:
            grid = this
        else:
            _same_grid(grid, this, sessions[0], session)
        if cfg["zscore"]:
            values = zscore_within(values, np.zeros(len(values))).astype(np.float32)
        betas.append(values)
    assert grid is not None
    all_betas = np.concatenate(betas, axis=0)
    trials = pd.concat(tables, ignore_index=True)

    stimuli = trials["stim_file"].to_numpy(str)
    _, counts = repeat_counts(stimuli)
    n_repeated = int((counts >= 2).sum())
    nc_n = cfg["noise_ceiling_n"] or typical_repeat_count(counts)
    ncsnr_files = {s.ncsnr for s in sessions}
    n_voxels = all_betas.shape[1]
    if len(ncsnr_files) == 1 and None not in ncsnr_files:
        snr = _load_ncsnr(Path(sessions[0].ncsnr), grid)
        source = "file"
    else:
        if any(f is not None for f in ncsnr_files):
            logger.warning(
                "The sessions of sub-%s do not share one ncsnr file (%s); computing the "
                "ncsnr from the betas instead.",
                subjects[0],
                ", ".join(sorted(str(f) for f in ncsnr_files if f is not None)),
            )
        if n_repeated:
            snr = ncsnr_from_betas(all_betas, stimuli, groups=trials["session"].to_numpy(str))
            source = "betas"
        else:
            logger.warning(
                "No stimulus is shown more than once to sub-%s and no ncsnr file is given; "
                "ncsnr and noise_ceiling are NaN.",
                subjects[0],
            )
            snr = np.full(n_voxels, np.nan)
            source = "none"
    if nc_n is not None:
        nc = noise_ceiling_from_ncsnr(snr, nc_n)
    else:
        if source == "file":
            logger.warning(
                "No stimulus is shown more than once to sub-%s and `noise_ceiling_n` is not "
                "set; noise_ceiling is NaN.",
                subjects[0],
            )
        nc = np.full(n_voxels, np.nan)

    voxels = grid.voxels
    world = nib.affines.apply_affine(grid.affine, voxels)
    roi = string_array([UNLABELLED] * n_voxels)
    if roi_atlas is not None:
        reference = nib.Nifti1Image(np.zeros(grid.shape, np.uint8), grid.affine)
        _, roi = roi_coordinate(
            reference,
            voxels,
            Path(roi_atlas),
            Path(roi_labels) if roi_labels is not None else None,
            str(sessions[0].betas),
        )
    coords: dict[str, Any] = {
        "trial": ("trial", np.arange(len(trials))),
        "stimulus": ("trial", string_array(stimuli)),
        "trial_type": ("trial", string_array(trials["trial_type"].to_list())),
        "onset": ("trial", trials["onset"].to_numpy(float), {"units": "s"}),
        "duration": ("trial", trials["duration"].to_numpy(float), {"units": "s"}),
        "run": ("trial", string_array(trials["run"].to_list())),
        "repeat": ("trial", repeat_index(stimuli)),
        "voxel": ("voxel", np.arange(n_voxels)),
        "i": ("voxel", voxels[:, 0].astype(np.int32)),
        "j": ("voxel", voxels[:, 1].astype(np.int32)),
        "k": ("voxel", voxels[:, 2].astype(np.int32)),
        "x": ("voxel", world[:, 0], {"units": "mm"}),
        "y": ("voxel", world[:, 1], {"units": "mm"}),
        "z": ("voxel", world[:, 2], {"units": "mm"}),
        "roi": ("voxel", roi),
    }
    ds = xr.Dataset(
        {
            "betas": (
                ("trial", "voxel"),
                all_betas.astype(np.float32, copy=False),
                {"units": "z" if cfg["zscore"] else "a.u."},
            ),
            "ncsnr": ("voxel", np.asarray(snr, dtype=np.float32), {"source": source}),
            "noise_ceiling": (
                "voxel",
                np.asarray(nc, dtype=np.float32),
                {"units": "%", "n_repeats": nc_n if nc_n is not None else "n/a"},
            ),
        },
        coords=coords,
    )
    files: dict[str, None] = {}
    for s in sessions:
        for f in (s.betas, s.trials, s.mask, s.ncsnr):
            if f is not None:
                files[str(f)] = None
    ds.attrs.update(
        {
            "method": "imported",
            "n_trials": len(trials),
            "n_repeated_stimuli": n_repeated,
            "noise_ceiling_n": nc_n if nc_n is not None else "n/a",
            "zscore": cfg["zscore"],
            "sessions": labels,
            "ncsnr_source": source,
            "entities": {"subject": subjects[0]},
            "affine": np.asarray(grid.affine, float).tolist(),
            "mask_shape": [int(s) for s in grid.shape],
            "source_files": list(files),
        }
    )
    return write_dataset(ds, output, provenance=provenance)

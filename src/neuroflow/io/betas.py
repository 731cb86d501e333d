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

The beta files are read by :mod:`neuroflow.io.betas_files`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.io.arrays import repeat_index, string_array
from neuroflow.io.betas_files import (
    _load_betas,
    _load_ncsnr,
    _n_trials,
    _same_grid,
    _session_label,
    stored_scale,
)
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
from neuroflow.io.records import BetasSession
from neuroflow.rois import UNLABELLED

__all__ = ["import_betas", "index_betas", "read_trials"]


logger = logging.getLogger(__name__)


BETAS_EXTENSIONS = (".nii.gz", ".nii", ".h5", ".npy")


MASK_EXTENSIONS = (".nii.gz", ".nii")


NCSNR_EXTENSIONS = (".nii.gz", ".nii", ".npy")


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

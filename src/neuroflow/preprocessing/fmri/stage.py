"""The ``preprocess_fmri`` stage: one BOLD run to a cleaned (time, voxel) store.

Order of operations per run: validate every input (nothing is written on
error) → drop non-steady-state volumes → optional spatial smoothing →
brain mask → confound selection → one combined projection removing
polynomial trends, cosine drifts and confounds (or detrend + Butterworth via
nilearn) → z-scoring → optional parcel means → zarr store.

The ``time`` coordinate stays on the acquisition clock (volume index × TR,
counted from the first acquired volume), so BIDS event onsets keep their
meaning after volumes are dropped or censored.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.config import merge_defaults
from neuroflow.io.arrays import string_array
from neuroflow.io.bids import parse_bids_name, read_sidecar
from neuroflow.io.files import load_nifti
from neuroflow.preprocessing.fmri.clean import clean_signals, cleaning_basis
from neuroflow.preprocessing.fmri.confounds import (
    check_finite_confounds,
    non_steady_state_count,
    read_confounds_table,
    select_confounds,
)
from neuroflow.preprocessing.fmri.inputs import (
    load_bold,
    load_events,
    load_masked,
    load_roi_labels,
    mean_image,
    on_bold_grid,
    repetition_time,
    sidecar_paths,
    smooth_image,
)
from neuroflow.rois import UNLABELLED
from neuroflow.stage_warnings import record_warnings

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "check_not_constant",
    "clean_time_series",
    "cleaning_steps",
    "preprocess_fmri_run",
    "resolve_config",
    "roi_coordinate",
]

logger = logging.getLogger(__name__)

#: Bumped when the meaning of the stage's output changes.
FORMAT_VERSION = 3

#: Defaults of the ``preprocess_fmri`` config section (see its schema).
DEFAULT_CONFIG: dict[str, Any] = {
    "drop_volumes": "auto",
    "mask": {"source": "auto", "lower_cutoff": 0.2, "upper_cutoff": 0.85},
    "smoothing_fwhm": None,
    "detrend_order": 1,
    "high_pass": {"filter": "cosine", "cutoff_hz": 0.01},
    "low_pass_hz": None,
    "confounds": {
        "strategy": "auto",
        "motion": "basic",
        "wm_csf": "basic",
        "global_signal": "basic",
        "compcor": "anat_combined",
        "n_compcor": 5,
        "fd_threshold": 0.5,
        "std_dvars_threshold": None,
        "scrub_min_segment": 5,
        "scrub_mode": "regress",
        "columns": [],
    },
    "standardize": True,
    "rois": {"atlas": None, "labels": None, "parcels": False},
}

_STRING_EVENT_COLUMNS = ("trial_type", "stim_file")
_CHUNK_BYTES = 4 * 2**20


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``preprocess_fmri`` section with defaults filled in and values checked.

    Parameters
    ----------
    config : dict | None
        Possibly partial section.

    Returns
    -------
    config : dict
        Complete section.
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config or {}, "preprocess_fmri")
    drop = cfg["drop_volumes"]
    if drop != "auto" and (isinstance(drop, bool) or not isinstance(drop, int) or drop < 0):
        raise ValueError(f"`drop_volumes` must be 'auto' or an int >= 0, got {drop!r} instead.")
    if cfg["mask"]["source"] not in ("auto", "file", "compute", "none"):
        raise ValueError(
            "`mask.source` must be 'auto', 'file', 'compute' or 'none', got "
            f"{cfg['mask']['source']!r} instead."
        )
    if cfg["high_pass"]["filter"] not in ("cosine", "butterworth", "none"):
        raise ValueError(
            "`high_pass.filter` must be 'cosine', 'butterworth' or 'none', got "
            f"{cfg['high_pass']['filter']!r} instead."
        )
    fwhm = cfg["smoothing_fwhm"]
    if fwhm is not None and not (isinstance(fwhm, int | float) and fwhm > 0):
        raise ValueError(f"`smoothing_fwhm` must be a positive number or null, got {fwhm!r}.")
    order = cfg["detrend_order"]
    if order is not None and (isinstance(order, bool) or not isinstance(order, int) or order < 0):
        raise ValueError(f"`detrend_order` must be an int >= 0 or null, got {order!r} instead.")
    strategy = cfg["confounds"]["strategy"]
    allowed = {"motion", "wm_csf", "global_signal", "compcor", "scrub", "custom"}
    if strategy not in ("none", "auto") and (
        isinstance(strategy, str) or not set(strategy) <= allowed
    ):
        raise ValueError(
            f"`confounds.strategy` must be 'auto', 'none' or a list of {sorted(allowed)}, "
            f"got {strategy!r} instead."
        )
    if cfg["confounds"]["scrub_mode"] not in ("regress", "censor"):
        raise ValueError(
            "`confounds.scrub_mode` must be 'regress' or 'censor', got "
            f"{cfg['confounds']['scrub_mode']!r} instead."
        )
    return cfg


_ENTITY_NAMES = {
    "sub": "subject",
    "ses": "session",
    "task": "task",
    "acq": "acquisition",
    "run": "run",
    "space": "space",
    "desc": "description",
}


def _entities(path: Path) -> dict[str, str]:
    """BIDS entities of a file name by full name (``subject``, ``session``, ...)."""
    parsed = parse_bids_name(path.name)
    if not parsed:
        return {}
    return {_ENTITY_NAMES.get(k, k): v for k, v in parsed[0].items()}


def _brain_mask(
    img: nib.Nifti1Image, mask: Path | None, cfg: Mapping[str, Any], source: str
) -> tuple[np.ndarray, dict[str, Any]]:
    """Boolean brain mask on the BOLD grid and its ``steps`` record."""
    from nilearn.masking import compute_epi_mask

    how = cfg["source"]
    if how == "file" and mask is None:
        raise ValueError(f"`mask.source` is 'file' but no mask was given for {source}.")
    if how in ("auto", "file") and mask is not None:
        if not Path(mask).is_file():
            raise FileNotFoundError(f"Mask file {mask} does not exist.")
        grid = on_bold_grid(
            load_nifti(mask, "Mask"), img, source=str(mask), what="mask", reference_source=source
        )
        data = grid > 0
        if not data.any():
            raise ValueError(
                f"Mask {mask} does not overlap the field of view of {source} (no voxel left)."
            )
        return data, {"name": "mask", "source": "file", "file": str(mask)}
    if how == "none":
        return np.ones(img.shape[:3], bool), {"name": "mask", "source": "none"}
    mean = mean_image(img)
    if not np.isfinite(mean.get_fdata()).all():
        n_bad = int((~np.isfinite(mean.get_fdata())).sum())
        raise ValueError(
            f"BOLD image {source} has NaN or infinite values in {n_bad} voxel(s); "
            "it must be finite."
        )
    data = np.asarray(
        compute_epi_mask(
            mean, lower_cutoff=cfg["lower_cutoff"], upper_cutoff=cfg["upper_cutoff"]
        ).dataobj,
        dtype=bool,
    )
    record = {
        "name": "mask",
        "source": "compute_epi_mask",
        "lower_cutoff": cfg["lower_cutoff"],
        "upper_cutoff": cfg["upper_cutoff"],
    }
    return data, record


def _event_variables(events: pd.DataFrame) -> dict[str, tuple[str, np.ndarray]]:
    """Events as variables on the ``event`` dim (numeric as float, else str)."""
    out: dict[str, tuple[str, np.ndarray]] = {
        "event_onset": ("event", events["onset"].to_numpy(float)),
        "event_duration": ("event", events["duration"].to_numpy(float)),
    }
    for name in _STRING_EVENT_COLUMNS:
        values = events[name] if name in events.columns else pd.Series([""] * len(events))
        out[name] = ("event", string_array(values.fillna("").astype(str).to_list()))
    for column in events.columns:
        if column in ("onset", "duration", *_STRING_EVENT_COLUMNS):
            continue
        raw = events[column]
        numeric = pd.to_numeric(raw, errors="coerce")
        if (numeric.notna() | raw.isna()).all():
            values = numeric.to_numpy(float)
        else:
            values = string_array(raw.fillna("").astype(str).to_list())
        out[f"event_{column}"] = ("event", values)
    return out


def roi_coordinate(
    img: nib.Nifti1Image,
    voxels: np.ndarray,
    atlas: Path,
    labels: Path | None,
    source: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-voxel label values and names of an ROI atlas.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        Image whose grid the atlas is put on (resampled by nearest neighbour when on
        another grid).
    voxels : ndarray of int, shape (n_voxels, 3)
        Voxel indices into ``img``'s grid.
    atlas : Path
        Label image (integer values, 0 = unlabelled).
    labels : Path | None
        ``index``/``name`` TSV naming the label values; ``None``: ``label-<value>``.
    source : str
        The image's file, for the messages.

    Returns
    -------
    values : ndarray, shape (n_voxels,)
        Atlas value of each voxel.
    roi : ndarray of StringDType, shape (n_voxels,)
        Region name of each voxel, :data:`~neuroflow.rois.UNLABELLED` outside every
        region.
    """
    if not Path(atlas).is_file():
        raise FileNotFoundError(f"ROI atlas {atlas} does not exist.")
    atlas_img = load_nifti(atlas, "ROI atlas")
    grid = on_bold_grid(atlas_img, img, source=str(atlas), what="atlas", reference_source=source)
    values = grid[voxels[:, 0], voxels[:, 1], voxels[:, 2]]
    if not (values > 0).any():
        raise ValueError(
            f"ROI atlas {atlas} does not overlap the brain mask of {source} "
            "(no labelled voxel in the mask)."
        )
    names = load_roi_labels(labels) if labels is not None else {}
    unknown = sorted(set(np.unique(values[values > 0]).tolist()) - set(names))
    if labels is not None and unknown:
        warnings.warn(
            f"ROI atlas {atlas} has label value(s) {unknown[:10]} missing from {labels}; "
            "naming them 'label-<value>'.",
            stacklevel=2,
        )
    roi = string_array(
        [UNLABELLED if v == 0 else names.get(int(v), f"label-{int(v)}") for v in values]
    )
    return values, roi


def check_not_constant(data: np.ndarray, *, source: str) -> None:
    """Refuse a run whose every target is constant over time (a blank or broken acquisition).

    Parameters
    ----------
    data : ndarray, shape (n_times, n_targets)
        The run's kept volumes.
    source : str
        The file, for the message.

    Raises
    ------
    ValueError
        When no target varies; a logged warning names how many are constant otherwise.
    """
    if data.shape[1] == 0:
        raise ValueError(f"BOLD image {source} has no voxel in its brain mask.")
    varies = np.ptp(data, axis=0) > 0
    if not varies.any():
        value = float(data.flat[0]) if data.size else float("nan")
        raise ValueError(
            f"BOLD image {source} is constant over time in every one of its "
            f"{data.shape[1]} in-mask voxels (value {value:g}): the run holds no signal. "
            "Check the file (a blank or failed acquisition), or leave the run out with "
            "`dataset.runs`."
        )
    n_flat = int((~varies).sum())
    if n_flat:
        logger.warning(
            "%s: %d of %d in-mask voxels are constant over time; their cleaned series are 0.",
            source,
            n_flat,
            varies.size,
        )


def clean_time_series(
    data: np.ndarray,
    cfg: Mapping[str, Any],
    *,
    tr: float,
    confounds: np.ndarray | None = None,
    sample_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, list[dict[str, Any]]]:
    """The section's temporal cleaning of a (time, target) matrix, as every run gets it.

    Parameters
    ----------
    data : ndarray, shape (n_times, n_targets)
        Kept volumes (non-steady-state ones dropped); cleaned in place.
    cfg : dict
        A resolved ``preprocess_fmri`` section (``detrend_order``, ``high_pass``,
        ``low_pass_hz``, ``standardize``).
    tr : float
        Repetition time (s).
    confounds : ndarray, shape (n_times, n_confounds) | None
        Nuisance regressors projected out with the trends and cosines.
    sample_mask : ndarray of bool, shape (n_times,) | None
        Volumes kept by censoring.

    Returns
    -------
    cleaned : ndarray, shape (n_kept, n_targets)
        See :func:`~neuroflow.preprocessing.fmri.clean.clean_signals`.
    basis : ndarray, shape (n_kept, n_nuisance) | None
        What the cleaning projected out (:func:`~neuroflow.preprocessing.fmri.clean.
        cleaning_basis`).
    steps : list of dict
        The ``detrend``, ``temporal_filter`` and ``zscore`` records of the store
        (:func:`cleaning_steps`).
    """
    filt, high_pass, low_pass = _filter_cutoffs(cfg)
    cleaning = {
        "t_r": tr,
        "detrend_order": cfg["detrend_order"],
        "filter": None if filt == "none" else filt,
        "high_pass": high_pass,
        "low_pass": low_pass,
        "confounds": confounds,
        "sample_mask": sample_mask,
        "standardize": bool(cfg["standardize"]),
    }
    cleaned = clean_signals(data, copy=False, **cleaning)
    basis = cleaning_basis(data.shape[0], **cleaning)
    return cleaned, basis, cleaning_steps(cfg)


def _filter_cutoffs(cfg: Mapping[str, Any]) -> tuple[str, float | None, float | None]:
    """The section's high-pass filter kind and its high- and low-pass cutoffs (Hz).

    The low-pass cutoff applies to the Butterworth filter only; neither applies
    without a filter.
    """
    filt = cfg["high_pass"]["filter"]
    high_pass = cfg["high_pass"]["cutoff_hz"] if filt != "none" else None
    low_pass = cfg["low_pass_hz"] if filt == "butterworth" else None
    return filt, high_pass, low_pass


def cleaning_steps(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``steps`` records :func:`clean_time_series` gives a store.

    Parameters
    ----------
    cfg : dict
        A resolved ``preprocess_fmri`` section.

    Returns
    -------
    steps : list of dict
        In order, those that apply: ``detrend`` (``order``), ``temporal_filter``
        (``filter``, ``high_pass_hz``, ``low_pass_hz``) and ``zscore`` (``ddof``).
    """
    filt, high_pass, low_pass = _filter_cutoffs(cfg)
    steps: list[dict[str, Any]] = []
    if cfg["detrend_order"] is not None:
        steps.append({"name": "detrend", "order": cfg["detrend_order"]})
    if high_pass is not None or low_pass is not None:
        steps.append(
            {
                "name": "temporal_filter",
                "filter": filt,
                "high_pass_hz": high_pass,
                "low_pass_hz": low_pass,
            }
        )
    if cfg["standardize"]:
        steps.append({"name": "zscore", "ddof": 1})
    return steps


def _chunk_voxels(n_times: int, n_voxels: int) -> int:
    """Voxels per chunk: all time points, about 4 MB, 1k to 10k voxels."""
    target = math.ceil(_CHUNK_BYTES / (4 * max(n_times, 1)))
    return int(max(1, min(n_voxels, max(1024, min(10_000, target)))))


def preprocess_fmri_run(
    *,
    bold: str | os.PathLike,
    output: str | os.PathLike,
    config: Mapping[str, Any] | None,
    provenance: Mapping[str, Any],
    events: str | os.PathLike | None = None,
    sidecars: Sequence[str | os.PathLike] = (),
    mask: str | os.PathLike | None = None,
    confounds: str | os.PathLike | None = None,
    roi_atlas: str | os.PathLike | None = None,
    roi_labels: str | os.PathLike | None = None,
) -> Path:
    """Clean one BOLD run and write it as a (time, voxel) zarr store.

    Parameters
    ----------
    bold : path-like
        4-D BOLD NIfTI (raw, or fMRIPrep ``desc-preproc_bold``).
    output : path-like
        Store to write (``.zarr``).
    config : dict | None
        The ``preprocess_fmri`` config section (defaults fill missing keys).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    events : path-like | None
        The run's ``_events.tsv``.
    sidecars : sequence of path-like
        JSON sidecars, least specific first (``FmriRun.sidecars``).
    mask : path-like | None
        Brain mask (e.g. fMRIPrep ``desc-brain_mask``); resampled to the BOLD
        grid with a warning when on another grid.
    confounds : path-like | None
        fMRIPrep ``desc-confounds_timeseries.tsv`` or a user confounds table.
    roi_atlas, roi_labels : path-like | None
        Label image and its ``index``/``name`` TSV; default to
        ``config["rois"]["atlas"]`` and ``["labels"]``.

    Returns
    -------
    output : Path
        The written store. It holds ``bold`` (float32, dims ``(time, voxel)``),
        coordinates ``time`` (s), ``voxel``, ``i``, ``j``, ``k``, ``x``, ``y``,
        ``z`` (mm) and ``roi``; event variables on the ``event`` dim; with
        ``rois.parcels``, ``parcel_bold`` (time, parcel). Its ``attrs["warnings"]``
        lists the warnings raised while the run was read and cleaned (a header TR
        that disagrees with the sidecar, a mask or atlas resampled to the BOLD grid,
        constant voxels); they are also logged.
    """
    with record_warnings():  # kept in the store by write_dataset, even outside a job
        ds, encoding = _clean_run(
            bold=Path(bold),
            config=config,
            events=events,
            sidecars=sidecars,
            mask=mask,
            confounds=confounds,
            roi_atlas=roi_atlas,
            roi_labels=roi_labels,
        )
        return write_dataset(ds, output, provenance=provenance, encoding=encoding)


def _clean_run(
    *,
    bold: Path,
    config: Mapping[str, Any] | None,
    events: str | os.PathLike | None,
    sidecars: Sequence[str | os.PathLike],
    mask: str | os.PathLike | None,
    confounds: str | os.PathLike | None,
    roi_atlas: str | os.PathLike | None,
    roi_labels: str | os.PathLike | None,
) -> tuple[xr.Dataset, dict[str, Any]]:
    """The cleaned run as a dataset and its zarr encoding (see :func:`preprocess_fmri_run`)."""
    cfg = resolve_config(config)
    source = str(bold)
    img = load_bold(bold)
    n_volumes = img.shape[3]
    metadata = read_sidecar(sidecar_paths(sidecars))
    tr = repetition_time(img, metadata, source=bold.name)
    event_table = load_events(events, run_duration=n_volumes * tr)
    table = read_confounds_table(confounds, n_volumes) if confounds is not None else None
    atlas = roi_atlas if roi_atlas is not None else cfg["rois"]["atlas"]
    labels = roi_labels if roi_labels is not None else cfg["rois"]["labels"]
    if labels is not None and atlas is None:
        raise ValueError("`rois.labels` is set but `rois.atlas` is not; give both.")
    if atlas is not None and labels is not None:
        load_roi_labels(labels)

    steps: list[dict[str, Any]] = []
    drop = cfg["drop_volumes"]
    n_drop = non_steady_state_count(table) if drop == "auto" else int(drop)
    if n_drop >= n_volumes - 1:
        raise ValueError(
            f"Dropping {n_drop} volumes leaves fewer than 2 of the {n_volumes} in {source}."
        )
    steps.append(
        {"name": "drop_volumes", "n": n_drop, "source": "fmriprep" if drop == "auto" else "config"}
    )

    if cfg["smoothing_fwhm"] is not None:
        img = smooth_image(img, float(cfg["smoothing_fwhm"]))
        steps.append({"name": "smooth", "fwhm_mm": float(cfg["smoothing_fwhm"])})
    mask_data, mask_step = _brain_mask(img, Path(mask) if mask else None, cfg["mask"], source)
    voxels = np.argwhere(mask_data)
    mask_step["n_voxels"] = len(voxels)
    steps.append(mask_step)
    roi_values = roi = None
    if atlas is not None:
        roi_values, roi = roi_coordinate(
            img, voxels, Path(atlas), Path(labels) if labels else None, source
        )

    data = load_masked(img, voxels, source=source, start=n_drop)
    del img
    check_not_constant(data, source=source)
    conf_cfg = cfg["confounds"]
    global_signal = None
    if conf_cfg["strategy"] != "none" and "global_signal" in conf_cfg["strategy"]:
        global_signal = np.r_[np.zeros(n_drop), data.mean(axis=1, dtype=np.float64)]
    selected = select_confounds(
        path=confounds, n_volumes=n_volumes, config=conf_cfg, global_signal=global_signal
    )
    check_finite_confounds(selected.table, confounds, start=n_drop)
    kept = np.arange(n_drop, n_volumes)
    regressors = selected.table.to_numpy(float)[n_drop:]
    outliers = selected.outliers[n_drop:]
    if selected.table.shape[1] or selected.notes:
        steps.append(
            {
                "name": "confounds",
                "columns": [str(c) for c in selected.table.columns],
                "details": selected.notes,
            }
        )
    sample_mask = None
    if outliers.any():
        if conf_cfg["scrub_mode"] == "regress":
            spikes = np.zeros((len(kept), int(outliers.sum())))
            spikes[np.flatnonzero(outliers), np.arange(spikes.shape[1])] = 1.0
            regressors = np.hstack([regressors, spikes])
        else:
            sample_mask = ~outliers
        steps.append(
            {
                "name": "scrub",
                "mode": conf_cfg["scrub_mode"],
                "volumes": (kept[outliers]).tolist(),
                "fd_threshold": conf_cfg["fd_threshold"],
                "std_dvars_threshold": conf_cfg["std_dvars_threshold"],
            }
        )

    cleaned, basis, clean_steps = clean_time_series(
        data,
        cfg,
        tr=tr,
        confounds=regressors if regressors.shape[1] else None,
        sample_mask=sample_mask,
    )
    steps += clean_steps
    del data
    if sample_mask is not None:
        kept = kept[sample_mask]

    affine = np.asarray(nib.load(bold).affine, float)
    world = nib.affines.apply_affine(affine, voxels)
    coords: dict[str, Any] = {
        "time": ("time", kept * tr, {"units": "s"}),
        "voxel": ("voxel", np.arange(len(voxels))),
        "i": ("voxel", voxels[:, 0].astype(np.int32)),
        "j": ("voxel", voxels[:, 1].astype(np.int32)),
        "k": ("voxel", voxels[:, 2].astype(np.int32)),
        "x": ("voxel", world[:, 0], {"units": "mm"}),
        "y": ("voxel", world[:, 1], {"units": "mm"}),
        "z": ("voxel", world[:, 2], {"units": "mm"}),
        "roi": ("voxel", roi if roi is not None else string_array([UNLABELLED] * len(voxels))),
    }
    variables: dict[str, Any] = {
        "bold": (("time", "voxel"), cleaned, {"units": "z" if cfg["standardize"] else "a.u."}),
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
    encoding = {"bold": {"chunks": (len(kept), _chunk_voxels(len(kept), len(voxels)))}}
    if cfg["rois"]["parcels"] and roi_values is not None:
        parcels, index = np.unique(roi_values[roi_values > 0], return_inverse=True)
        inside = np.flatnonzero(roi_values > 0)
        member = np.zeros((len(inside), len(parcels)), np.float32)
        member[np.arange(len(inside)), index] = 1.0
        means = (cleaned[:, inside] @ member) / member.sum(axis=0)
        names = [roi[inside][index == p][0] for p in range(len(parcels))]
        coords["parcel"] = ("parcel", string_array(names))
        coords["parcel_index"] = ("parcel", parcels.astype(np.int64))
        variables["parcel_bold"] = (("time", "parcel"), means.astype(np.float32))
        steps.append({"name": "parcels", "n": len(parcels)})
    ds = xr.Dataset(variables, coords=coords)
    ds.attrs.update(
        {
            "tr": tr,
            "affine": affine.tolist(),
            "mask_shape": [int(s) for s in mask_data.shape],
            "n_volumes_acquired": int(n_volumes),
            "steps": steps,
            "source_file": source,
            "entities": _entities(bold),
        }
    )
    return ds, encoding

"""Single-trial response estimates (betas) of event-related fMRI, and their noise ceilings.

:func:`estimate_single_trials` is the stage entry point: cleaned run stores of
one subject in, one ``(trial, voxel)`` store of betas out, with NSD's ncsnr and
noise ceiling per voxel (:mod:`neuroflow.preprocessing.fmri.ncsnr`).

Two estimators (Mumford et al., 2012, NeuroImage 59, 2636–2643):

* **LSA** (least squares all): one GLM per run with a regressor per trial.
* **LSS** (least squares separate): per trial, a GLM with that trial's
  regressor and one regressor for all the other trials of the run. Less
  variable than LSA when trials are close in time (short ISIs), at the cost
  of shrinking neighbouring trials towards each other.

Regressors are nilearn's: each event's boxcar convolved with the HRF basis of
``hrf_model`` by :func:`nilearn.glm.first_level.compute_regressor` (``glover``,
``spm``, with time and dispersion derivatives), the derivative columns of each
regressor orthogonalised against the preceding ones as nilearn does. The
nuisance part of every GLM holds a constant, drift regressors and (by default)
one regressor per excluded trial type.

Vectorised estimation
---------------------
Both estimators are linear in the data: the beta of trial ``i`` is
``e_iᵀ y`` for an *estimator vector* ``e_i`` that depends on the design only.
With ``Q`` an orthonormal basis of the nuisance regressors and ``D̃ = D - Q Qᵀ D``
(Frisch–Waugh–Lovell), ``e_i`` is the first row of ``pinv(D̃_i)``, where
``D_i = [trial i, other trials]`` (LSS, a batch of ``(n_times, 2 h)`` matrices
with ``h`` HRF basis functions) or the row of trial ``i``'s main column in
``pinv(D̃)`` with ``D`` all trials (LSA). So every beta of a run is one
product ``E @ Y`` with ``E`` of shape ``(n_trials, n_times)``, whatever the
number of voxels: no per-trial refit of the data. The result equals nilearn's
``FirstLevelModel`` fitted trial by trial (checked in the tests).

Drifts
------
Data cleaned upstream were projected off polynomial and cosine drifts (or
Butterworth-filtered). Fitting an unfiltered design to filtered data biases the
betas of slow regressors, such as the LSS "other trials" one, so with
``drift_model: auto`` the design is filtered as the data were, from the
``steps`` recorded in the run store: the same Legendre polynomials and DCT
cosines join the nuisance regressors, or the same Butterworth filter is applied
to every regressor. Confounds removed upstream (motion, CompCor) are not in the
store and are not mirrored.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from nilearn.glm.first_level import (
    compute_regressor,
    glover_dispersion_derivative,
    glover_hrf,
    glover_time_derivative,
    spm_dispersion_derivative,
    spm_hrf,
    spm_time_derivative,
)

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.config import merge_defaults
from neuroflow.io.arrays import repeat_index, string_array
from neuroflow.io.events import events_from_store, stimulus_mask
from neuroflow.preprocessing.fmri.clean import (
    cosine_drifts,
    orthonormal_basis,
    polynomial_drifts,
)
from neuroflow.preprocessing.fmri.ncsnr import (
    ncsnr_from_betas,
    noise_ceiling_from_ncsnr,
    repeat_counts,
    typical_repeat_count,
    zscore_within,
)
from neuroflow.progress import Progress

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "HRF_MODELS",
    "condition_regressor",
    "estimate_single_trials",
    "estimator_matrix",
    "event_regressors",
    "resolve_config",
]

#: Bumped when the meaning of the stage's output changes.
FORMAT_VERSION = 3

#: Defaults of the ``single_trial`` config section (see its schema).
DEFAULT_CONFIG: dict[str, Any] = {
    "enabled": False,
    "method": "lss",
    "hrf_model": "glover",
    "oversampling": 50,
    "trial_type_column": "trial_type",
    "trial_types": [],
    "model_excluded_events": True,
    "drift_model": "auto",
    "high_pass_hz": 0.01,
    "drift_order": 1,
    "zscore": True,
    "noise_ceiling_n": None,
    "ncsnr_min_separation_s": 20.0,
}

#: HRF models and their basis functions (nilearn's, in nilearn's column order).
HRF_MODELS: dict[str, tuple[Callable[..., np.ndarray], ...]] = {
    "glover": (glover_hrf,),
    "glover + derivative": (glover_hrf, glover_time_derivative),
    "glover + derivative + dispersion": (
        glover_hrf,
        glover_time_derivative,
        glover_dispersion_derivative,
    ),
    "spm": (spm_hrf,),
    "spm + derivative": (spm_hrf, spm_time_derivative),
    "spm + derivative + dispersion": (spm_hrf, spm_time_derivative, spm_dispersion_derivative),
}

_METHODS = ("lss", "lsa")
_DRIFT_MODELS = ("auto", "none", "cosine", "polynomial")
#: Onsets earlier than this before the first frame are ignored by nilearn.
_MIN_ONSET = -24.0
#: Voxels per block in ``E @ Y`` (bounded float64 temporaries).
_BLOCK_VOXELS = 16384
_VOXEL_COORDS = ("i", "j", "k", "x", "y", "z", "roi")


# --------------------------------------------------------------------------- config
def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``single_trial`` section with defaults filled in and values checked.

    Parameters
    ----------
    config : dict | None
        Possibly partial section.

    Returns
    -------
    config : dict
        Complete section.
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config, "single_trial")
    if cfg["method"] not in _METHODS:
        raise ValueError(f"`method` must be 'lss' or 'lsa', got {cfg['method']!r} instead.")
    if cfg["hrf_model"] not in HRF_MODELS:
        raise ValueError(
            f"`hrf_model` must be one of {list(HRF_MODELS)}, got {cfg['hrf_model']!r} instead."
        )
    over = cfg["oversampling"]
    if isinstance(over, bool) or not isinstance(over, int) or over < 1:
        raise ValueError(f"`oversampling` must be a positive int, got {over!r} instead.")
    types = cfg["trial_types"]
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise ValueError(f"`trial_types` must be a list of str, got {types!r} instead.")
    if not isinstance(cfg["trial_type_column"], str) or not cfg["trial_type_column"]:
        raise ValueError(
            "`trial_type_column` must be a non-empty str, got "
            f"{cfg['trial_type_column']!r} instead."
        )
    if cfg["drift_model"] not in _DRIFT_MODELS:
        raise ValueError(
            f"`drift_model` must be one of {list(_DRIFT_MODELS)}, got "
            f"{cfg['drift_model']!r} instead."
        )
    hp = cfg["high_pass_hz"]
    if isinstance(hp, bool) or not isinstance(hp, int | float) or hp <= 0:
        raise ValueError(f"`high_pass_hz` must be a positive number, got {hp!r} instead.")
    order = cfg["drift_order"]
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ValueError(f"`drift_order` must be an int >= 0, got {order!r} instead.")
    n = cfg["noise_ceiling_n"]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"`noise_ceiling_n` must be a positive int or null, got {n!r} instead.")
    sep = cfg["ncsnr_min_separation_s"]
    if isinstance(sep, bool) or not isinstance(sep, int | float) or not sep >= 0:
        raise ValueError(
            f"`ncsnr_min_separation_s` must be a number of seconds >= 0, got {sep!r} instead."
        )
    for key in ("enabled", "zscore", "model_excluded_events"):
        if not isinstance(cfg[key], bool):
            raise ValueError(f"`{key}` must be a bool, got {cfg[key]!r} instead.")
    return cfg


# --------------------------------------------------------------------------- design
def _orthogonalize(columns: np.ndarray) -> np.ndarray:
    """Orthogonalise each basis column against the preceding ones, per stacked design.

    ``columns`` has shape ``(..., n_times, n_basis)``; as
    :func:`nilearn.glm.first_level.hemodynamic_models.orthogonalize`, batched.
    """
    out = np.array(columns, dtype=np.float64, copy=True)
    for b in range(1, out.shape[-1]):
        prev = out[..., :b]
        coef = np.linalg.pinv(prev) @ out[..., b : b + 1]
        out[..., b : b + 1] -= prev @ coef
    return out


def event_regressors(
    onsets: np.ndarray,
    durations: np.ndarray,
    *,
    frame_times: np.ndarray,
    hrf_model: str = "glover",
    oversampling: int = 50,
) -> np.ndarray:
    """HRF-convolved regressor of every event on its own, before orthogonalisation.

    Parameters
    ----------
    onsets, durations : ndarray, shape (n_events,)
        In seconds, on the clock of ``frame_times``.
    frame_times : ndarray, shape (n_times,)
        Evenly spaced acquisition times in seconds.
    hrf_model : str
        A key of :data:`HRF_MODELS`.
    oversampling : int
        Temporal oversampling of the convolution.

    Returns
    -------
    regressors : ndarray, shape (n_events, n_times, n_basis)
        Column ``b`` is :func:`nilearn.glm.first_level.compute_regressor` of the
        event with basis function ``b`` alone (unit amplitude). Sums over events
        are regressors of conditions; nilearn orthogonalises the derivative
        columns of each regressor afterwards (see :func:`condition_regressor`).
    """
    basis = HRF_MODELS[hrf_model]
    frame_times = np.asarray(frame_times, float)
    out = np.empty((len(onsets), frame_times.size, len(basis)))
    for e, (onset, duration) in enumerate(zip(onsets, durations, strict=True)):
        condition = np.array([[onset], [duration], [1.0]])
        for b, function in enumerate(basis):
            out[e, :, b] = compute_regressor(
                condition, function, frame_times, oversampling=oversampling, min_onset=_MIN_ONSET
            )[0][:, 0]
    return out


def condition_regressor(raw: np.ndarray) -> np.ndarray:
    """nilearn's regressor of a set of events from their per-event regressors.

    Parameters
    ----------
    raw : ndarray, shape (n_events, n_times, n_basis)
        Output of :func:`event_regressors` for the events of the condition.

    Returns
    -------
    regressor : ndarray, shape (n_times, n_basis)
        Sum over events, derivative columns orthogonalised.
    """
    return _orthogonalize(raw.sum(axis=0))


def estimator_matrix(trials: np.ndarray, nuisance: np.ndarray, *, method: str) -> np.ndarray:
    """Rows ``e_i`` such that the beta of trial ``i`` is ``e_i @ y``.

    Parameters
    ----------
    trials : ndarray, shape (n_trials, n_times, n_basis)
        Per-trial regressors (:func:`event_regressors`, rows of the volumes fitted).
    nuisance : ndarray, shape (n_times, n_nuisance)
        Nuisance regressors, a constant among them.
    method : {"lss", "lsa"}
        Least squares separate or all.

    Returns
    -------
    estimator : ndarray, shape (n_trials, n_times)
        Applied to data ``(n_times, n_voxels)``, gives the ``(n_trials, n_voxels)``
        coefficients of the main (first) basis column of each trial.
    """
    if method not in _METHODS:
        raise ValueError(f"`method` must be 'lss' or 'lsa', got {method!r} instead.")
    n_trials, n_times, n_basis = trials.shape
    q = orthonormal_basis(nuisance)
    own = _orthogonalize(trials)
    if method == "lsa":
        n_columns = n_trials * n_basis + q.shape[1]
        if n_columns > n_times:
            raise ValueError(
                f"An LSA design of {n_trials} trials × {n_basis} basis function(s) and "
                f"{q.shape[1]} nuisance regressor(s) has more columns than the {n_times} "
                "volumes; use method 'lss'."
            )
        design = own.transpose(1, 0, 2).reshape(n_times, n_trials * n_basis)
        design = design - q @ (q.T @ design)
        if np.linalg.matrix_rank(design) < design.shape[1]:
            warnings.warn(
                "The LSA design is rank deficient (trials collinear with each other or "
                "with the nuisance regressors); the betas of collinear trials are "
                "minimum-norm solutions.",
                stacklevel=2,
            )
        return np.linalg.pinv(design)[::n_basis]
    other = _orthogonalize(trials.sum(axis=0)[np.newaxis] - trials)
    design = np.concatenate([own, other], axis=2)
    design = design - np.einsum("tq,nqc->ntc", q, np.einsum("tq,ntc->nqc", q, design))
    return np.linalg.pinv(design)[:, 0, :]


# --------------------------------------------------------------------------- runs
def _event_table(ds: xr.Dataset, path: Path, column: str) -> pd.DataFrame:
    """The run's events: onset, duration, trial_type, stim_file."""
    field = "trial_type" if column == "trial_type" else f"event_{column}"
    for name in ("event_onset", "event_duration"):
        if name not in ds.variables:
            raise ValueError(f"Run store {path} has no {name!r} field; it must list its events.")
    if field not in ds.variables and ds.sizes.get("event", 0):
        fields = sorted(v for v in ds.variables if ds[v].dims == ("event",))
        raise ValueError(
            f"Run store {path} has no event field {field!r} (trial_type_column="
            f"{column!r}); its event fields are {fields}."
        )
    n = ds.sizes.get("event", 0)

    def text(name: str) -> list[str]:
        if name not in ds.variables:
            return [""] * n
        values = ds[name].values
        if values.dtype.kind == "f":
            return ["" if np.isnan(v) else f"{v:g}" for v in values]
        return [str(v) for v in values]

    return pd.DataFrame(
        {
            "onset": ds["event_onset"].values.astype(float) if n else np.zeros(0),
            "duration": ds["event_duration"].values.astype(float) if n else np.zeros(0),
            "trial_type": text(field),
            "stim_file": text("stim_file"),
        }
    )


def _check_events(events: pd.DataFrame, path: Path, end: float) -> None:
    """Modelled events need finite onsets within the run and durations >= 0."""
    for k, row in enumerate(events.itertuples()):
        if not np.isfinite(row.onset):
            raise ValueError(
                f"Run store {path}: event_onset of event {k} ({row.trial_type!r}) is n/a; "
                "every modelled event needs an onset."
            )
        if row.onset < 0 or row.onset >= end:
            raise ValueError(
                f"Run store {path}: event_onset {row.onset:g} s of event {k} "
                f"({row.trial_type!r}) is outside the run (0 to {end:g} s)."
            )
        if not (np.isfinite(row.duration) and row.duration >= 0):
            raise ValueError(
                f"Run store {path}: event_duration of event {k} ({row.trial_type!r}) must be "
                f"a number >= 0, got {row.duration} instead."
            )


def _run_label(ds: xr.Dataset, index: int) -> str:
    """``ses-X_task-Y_run-Z`` from the store's entities (those present), else ``run-<n>``."""
    entities = ds.attrs.get("entities") or {}
    parts = [
        f"{short}-{entities[name]}"
        for short, name in (("ses", "session"), ("task", "task"), ("acq", "acquisition"))
        if entities.get(name)
    ]
    parts.append(f"run-{entities['run']}" if entities.get("run") else f"run-{index + 1}")
    return "_".join(parts)


def _frame_grid(ds: xr.Dataset, path: Path) -> tuple[float, np.ndarray, np.ndarray, int]:
    """TR, the run's uncensored frame times, rows of the stored volumes, first frame index."""
    tr = ds.attrs.get("tr")
    if isinstance(tr, bool) or not isinstance(tr, int | float) or not tr > 0:
        raise ValueError(f"Run store {path}: attribute 'tr' must be a positive number, got {tr!r}.")
    tr = float(tr)
    index = np.rint(ds["time"].values / tr).astype(np.int64)
    if (
        not np.allclose(index * tr, ds["time"].values, atol=1e-3 * tr)
        or (np.diff(index) <= 0).any()
    ):
        raise ValueError(
            f"Run store {path}: 'time' must be increasing multiples of the TR ({tr:g} s)."
        )
    steps = ds.attrs.get("steps") or []
    dropped = next((s.get("n") for s in steps if s.get("name") == "drop_volumes"), None)
    first = int(dropped) if dropped is not None else int(index[0])
    stop = int(ds.attrs.get("n_volumes_acquired", index[-1] + 1))
    frame_times = np.arange(first, stop) * tr
    return tr, frame_times, index - first, first


def _drifts(
    ds: xr.Dataset, cfg: Mapping[str, Any], frame_times: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, dict[str, Any] | None, dict[str, Any]]:
    """Drift regressors on the stored volumes, an upstream Butterworth step, a record."""
    times = frame_times[rows]
    model = cfg["drift_model"]
    if model == "none":
        return np.zeros((rows.size, 0)), None, {"model": "none"}
    if model == "cosine":
        return (
            cosine_drifts(frame_times, cfg["high_pass_hz"])[rows],
            None,
            {
                "model": "cosine",
                "high_pass_hz": cfg["high_pass_hz"],
            },
        )
    if model == "polynomial":
        drifts = polynomial_drifts(times, cfg["drift_order"])
        return drifts, None, {"model": "polynomial", "order": cfg["drift_order"]}
    steps = {s.get("name"): s for s in ds.attrs.get("steps") or []}
    columns = [np.zeros((rows.size, 0))]
    record: dict[str, Any] = {"model": "auto"}
    butter = None
    order = (steps.get("detrend") or {}).get("order")
    if order is not None:
        record["order"] = int(order)
    filt = steps.get("temporal_filter") or {}
    if filt.get("filter") == "butterworth":
        # upstream: project the trend out, filter; the design gets the same operator
        butter = {"high_pass": filt.get("high_pass_hz"), "low_pass": filt.get("low_pass_hz")}
        record["butterworth"] = butter
        return np.zeros((rows.size, 0)), butter, record
    if order is not None:
        columns.append(polynomial_drifts(times, int(order)))
    if filt.get("filter") == "cosine" and filt.get("high_pass_hz"):
        columns.append(cosine_drifts(frame_times, float(filt["high_pass_hz"]))[rows])
        record["high_pass_hz"] = float(filt["high_pass_hz"])
    return np.hstack(columns), butter, record


def _butterworth(columns: np.ndarray, trend: np.ndarray, tr: float, spec: Mapping) -> np.ndarray:
    """Detrend and Butterworth-filter design columns (time on axis -2) as the data were."""
    from nilearn.signal import butterworth

    shape = columns.shape
    flat = np.moveaxis(columns, -2, 0).reshape(shape[-2], -1)
    q = orthonormal_basis(trend)
    flat = flat - q @ (q.T @ flat)
    flat = butterworth(flat, sampling_rate=1.0 / tr, copy=True, **spec)
    return np.moveaxis(flat.reshape(shape[-2], *shape[:-2], shape[-1]), 0, -2)


def _run_betas(
    ds: xr.Dataset,
    path: Path,
    cfg: Mapping[str, Any],
    voxels: np.ndarray,
    stimulus_events: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> tuple[np.ndarray, pd.DataFrame, dict[str, Any]]:
    """Betas ``(n_trials, n_voxels)`` of one run, its trial table and a design record.

    ``progress`` counts the run's voxels as their betas are estimated.
    """
    tr, frame_times, rows, first = _frame_grid(ds, path)
    events = _event_table(ds, path, cfg["trial_type_column"])
    selected = events["trial_type"].isin(cfg["trial_types"]) if cfg["trial_types"] else None
    if selected is None:
        selected = pd.Series(True, index=events.index)
    if stimulus_events and len(events):
        # rows that are not stimuli (rest, fixation, responses) are never trials
        mask = stimulus_mask(events_from_store(ds), stimulus_events, id_column=None, where=path)
        selected = selected & mask
    modelled = events if cfg["model_excluded_events"] else events[selected]
    _check_events(modelled, path, frame_times[-1] + tr)
    trials = events[selected].reset_index(drop=True)
    if trials.empty:
        if progress is not None:
            progress.update(voxels.size)
        return np.zeros((0, voxels.size), np.float32), trials, {}
    # the design's clock starts at the first frame of the (uncensored) grid
    shift = first * tr
    grid = frame_times - shift
    over = cfg["oversampling"]
    raw = event_regressors(
        trials["onset"].to_numpy() - shift,
        trials["duration"].to_numpy(),
        frame_times=grid,
        hrf_model=cfg["hrf_model"],
        oversampling=over,
    )[:, rows]
    nuisance = [np.ones((rows.size, 1))]
    excluded = events[~selected]
    if cfg["model_excluded_events"]:
        for _, group in excluded.groupby("trial_type", sort=True):
            regs = event_regressors(
                group["onset"].to_numpy() - shift,
                group["duration"].to_numpy(),
                frame_times=grid,
                hrf_model=cfg["hrf_model"],
                oversampling=over,
            )
            nuisance.append(condition_regressor(regs)[rows])
    drifts, butter, record = _drifts(ds, cfg, frame_times, rows)
    nuisance.append(drifts)
    design_nuisance = np.hstack(nuisance)
    if butter is not None:
        order = record.get("order")
        trend = (
            polynomial_drifts(frame_times[rows], order)
            if order is not None
            else np.zeros((rows.size, 0))
        )
        raw = _butterworth(raw, trend, tr, butter)
        design_nuisance = np.hstack(
            [np.ones((rows.size, 1)), _butterworth(design_nuisance[:, 1:], trend, tr, butter)]
        )
    estimator = estimator_matrix(raw, design_nuisance, method=cfg["method"])
    bold = np.asarray(ds["bold"].values)
    if not np.isfinite(bold).all():
        raise ValueError(f"Run store {path}: 'bold' has NaN or infinite values.")
    betas = np.empty((len(trials), voxels.size), np.float32)
    for start in range(0, voxels.size, _BLOCK_VOXELS):
        y = bold[:, voxels[start : start + _BLOCK_VOXELS]].astype(np.float64)
        betas[:, start : start + _BLOCK_VOXELS] = estimator @ y
        if progress is not None:
            progress.update(y.shape[1])
    record["n_excluded_events"] = len(excluded)
    return betas, trials, record


def _voxel_keys(ds: xr.Dataset) -> np.ndarray:
    """One integer per voxel from its ``(i, j, k)`` indices (or its position)."""
    if all(c in ds.coords for c in "ijk"):
        ijk = np.stack([ds[c].values.astype(np.int64) for c in "ijk"])
        return (ijk[0] << 42) + (ijk[1] << 21) + ijk[2]
    return np.arange(ds.sizes["voxel"], dtype=np.int64)


def _common_voxels(stores: Sequence[xr.Dataset], paths: Sequence[Path]) -> list[np.ndarray]:
    """Per store, the positions of the voxels every store has, in the first store's order."""
    keys = [_voxel_keys(ds) for ds in stores]
    common = keys[0]
    for k in keys[1:]:
        common = common[np.isin(common, k)]
    if common.size == 0:
        raise ValueError(f"The run stores {[str(p) for p in paths]} have no voxel in common.")
    if any(k.size != common.size for k in keys):
        warnings.warn(
            f"The run stores have different voxels ({sorted({k.size for k in keys})} voxels); "
            f"keeping the {common.size} voxels they all have.",
            stacklevel=3,
        )
    out = []
    for k in keys:
        order = np.argsort(k)
        out.append(order[np.searchsorted(k, common, sorter=order)])
    return out


# --------------------------------------------------------------------------- stage
def estimate_single_trials(
    *,
    runs: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any] | None,
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None = None,
) -> Path:
    """Estimate a response per trial in every voxel, and each voxel's noise ceiling.

    Parameters
    ----------
    runs : sequence of path-like
        Cleaned run stores of one subject (``preprocess_fmri`` output):
        ``bold`` (time, voxel), ``time`` (s, acquisition clock), voxel
        coordinates, events on the ``event`` dim (``event_onset``,
        ``event_duration``, ``stim_file``, the trial type field) and attrs
        ``tr`` and ``entities``.
    output : path-like
        Store to write (``.zarr``).
    config : dict | None
        The ``single_trial`` config section (defaults fill missing keys).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events that are not stimuli are never trials (with
        ``model_excluded_events`` they join the nuisance regressors).

    Returns
    -------
    output : Path
        The written store: ``betas`` float32 (trial, voxel), z-scored within
        each run when ``zscore``; trial coordinates ``stimulus`` (stim_file),
        ``trial_type``, ``onset`` (s), ``duration`` (s), ``run`` and
        ``repeat`` (0 for a stimulus's first trial, -1 without a stimulus);
        the voxel coordinates of the runs (``i/j/k``, ``x/y/z``, ``roi``);
        ``ncsnr`` (voxel) and ``noise_ceiling`` (voxel, percent, for the mean
        of ``noise_ceiling_n`` repeats); attrs ``method``, ``hrf_model``,
        ``n_trials``, ``n_repeated_stimuli``, ``noise_ceiling_n``, ``runs``,
        ``drifts`` and ``entities``.

    Notes
    -----
    The ncsnr is computed on betas z-scored within each run whatever
    ``zscore`` says (its formula assumes unit variance). Trials without a
    stimulus file are not repeats of anything.
    """
    cfg = resolve_config(config)
    if isinstance(runs, str | os.PathLike) or not runs:
        raise ValueError(f"`runs` must be a non-empty list of run stores, got {runs!r} instead.")
    paths = [Path(p) for p in runs]
    stores = [open_dataset(p) for p in paths]
    for ds, path in zip(stores, paths, strict=True):
        if "bold" not in ds or ds["bold"].dims != ("time", "voxel"):
            raise ValueError(f"Run store {path} must hold 'bold' with dims (time, voxel).")
    labels = [_run_label(ds, i) for i, ds in enumerate(stores)]
    if len(set(labels)) != len(labels):
        labels = [f"{label}#{i + 1}" for i, label in enumerate(labels)]
    if cfg["trial_types"]:
        present: set[str] = set()
        for ds, path in zip(stores, paths, strict=True):
            present |= set(_event_table(ds, path, cfg["trial_type_column"])["trial_type"])
        missing = [t for t in cfg["trial_types"] if t not in present]
        if missing:
            raise ValueError(
                f"`trial_types` has {missing} which no run has; the runs' trial types "
                f"(field {cfg['trial_type_column']!r}) are {sorted(present)}."
            )
    voxel_rows = _common_voxels(stores, paths)

    betas, tables, drifts = [], [], []
    total = sum(rows.size for rows in voxel_rows)
    progress = Progress(total, "single-trial betas", "voxels (of every run)")
    for ds, path, label, rows in zip(stores, paths, labels, voxel_rows, strict=True):
        b, table, record = _run_betas(ds, path, cfg, rows, stimulus_events, progress)
        if b.shape[0] and cfg["zscore"]:
            if b.shape[0] < 2:
                raise ValueError(
                    f"Run store {path} has 1 trial; z-scoring betas per run needs at least 2 "
                    "(set zscore to false)."
                )
            b = zscore_within(b, np.zeros(b.shape[0])).astype(np.float32)
        betas.append(b)
        tables.append(table.assign(run=label))
        drifts.append({"run": label, **record})
    progress.close()
    trials = pd.concat(tables, ignore_index=True)
    if trials.empty:
        which = cfg["trial_types"] or "any"
        raise ValueError(
            f"No trials to estimate: the runs {[str(p) for p in paths]} have no events of "
            f"trial type {which} (field {cfg['trial_type_column']!r})."
        )
    all_betas = np.concatenate(betas, axis=0)
    stimuli = trials["stim_file"].to_numpy(str)
    _, counts = repeat_counts(stimuli)
    n_repeated = int((counts >= 2).sum())
    nc_n = cfg["noise_ceiling_n"] or typical_repeat_count(counts)
    if n_repeated:
        snr = ncsnr_from_betas(
            all_betas,
            stimuli,
            groups=trials["run"].to_numpy(str),
            onsets=trials["onset"].to_numpy(float),
            min_separation=float(cfg["ncsnr_min_separation_s"]),
        )
        if np.isnan(snr).all():
            warnings.warn(
                "Every repeat of a stimulus is closer than `single_trial.ncsnr_min_separation_"
                f"s` ({cfg['ncsnr_min_separation_s']} s) to the others in its run; ncsnr and "
                "noise_ceiling are NaN (estimates of nearby trials share noise). Lower the "
                "separation only if the design spaces its repeats apart.",
                stacklevel=2,
            )
        nc = noise_ceiling_from_ncsnr(snr, nc_n)
    else:
        warnings.warn(
            "No stimulus is shown more than once; ncsnr and noise_ceiling are NaN.",
            stacklevel=2,
        )
        snr = nc = np.full(all_betas.shape[1], np.nan)

    first, rows = stores[0], voxel_rows[0]
    coords: dict[str, Any] = {
        "trial": ("trial", np.arange(len(trials))),
        "stimulus": ("trial", string_array(stimuli)),
        "trial_type": ("trial", string_array(trials["trial_type"])),
        "onset": ("trial", trials["onset"].to_numpy(float), {"units": "s"}),
        "duration": ("trial", trials["duration"].to_numpy(float), {"units": "s"}),
        "run": ("trial", string_array(trials["run"])),
        "repeat": ("trial", repeat_index(stimuli)),
        "voxel": ("voxel", first["voxel"].values[rows] if "voxel" in first.coords else rows),
    }
    for name in _VOXEL_COORDS:
        if name in first.coords:
            var = first[name]
            values = var.values[rows]
            coords[name] = ("voxel", string_array(values) if values.dtype.kind in "OUT" else values)
            if var.attrs:
                coords[name] = (*coords[name], dict(var.attrs))
    units = "z" if cfg["zscore"] else first["bold"].attrs.get("units", "a.u.")
    ds = xr.Dataset(
        {
            "betas": (("trial", "voxel"), all_betas.astype(np.float32), {"units": units}),
            "ncsnr": ("voxel", snr.astype(np.float32)),
            "noise_ceiling": (
                "voxel",
                np.asarray(nc, dtype=np.float32),
                {"units": "%", "n_repeats": nc_n if nc_n is not None else "n/a"},
            ),
        },
        coords=coords,
    )
    entities = {k: v for k, v in (first.attrs.get("entities") or {}).items() if k in ("subject",)}
    ds.attrs.update(
        {
            "method": cfg["method"],
            "hrf_model": cfg["hrf_model"],
            "n_trials": len(trials),
            "n_repeated_stimuli": n_repeated,
            "noise_ceiling_n": nc_n if nc_n is not None else "n/a",
            "zscore": cfg["zscore"],
            "runs": [str(p) for p in paths],
            "drifts": drifts,
            "entities": entities,
        }
    )
    return write_dataset(ds, output, provenance=provenance)

"""Encoding models of single-trial fMRI responses, scored on held-out stimuli.

The trial design of NSD- or Algonauts-style datasets: one response (beta) per trial and
voxel (from :func:`neuroflow.preprocessing.fmri.single_trial.estimate_single_trials`)
is predicted from the features of the stimulus shown on that trial. Whole *stimuli* are
held out, not runs: by default (``auto``) a seeded fraction of the stimuli shown more
than once, so that most stimuli stay for training; ``repeated`` holds out every
stimulus shown more than once (NSD's shared images); else an explicit list of stimulus
ids. A split that tests on more stimuli than it trains on is logged and recorded in
the store's ``split_note`` attribute. Test stimuli are never used for feature
standardisation, cross-validation, penalty choice or the final fit; cross-validation
folds group trials by stimulus, so the repeats of a training stimulus never straddle
training and validation.

The output store has the layout that :func:`neuroflow.evaluation.evaluate_model` scores:
``y_pred`` (stimulus, voxel), one prediction per test stimulus, and ``y_test`` (repeat,
stimulus, voxel), its observed presentations, with the onset and run of each
presentation (``test_onset``, ``test_run``; the noise ceiling pairs only repeats far
enough apart, as estimates of nearby trials share noise); samples are exchangeable
(permutation tests shuffle single stimuli, not blocks of time).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.encoding.eeg import select_feature_spaces
from neuroflow.encoding.fitting import choose_solver, solver_options
from neuroflow.encoding.stage import with_defaults
from neuroflow.encoding.stored import NO_DELAYS, encoder_dataset
from neuroflow.features.align import features_for_stimuli
from neuroflow.models import (
    banded_ridge_cv,
    parse_cv,
    r2_split,
    resolve_device,
    ridge_cv,
    run_splits,
)
from neuroflow.trial_split import (
    MIN_TEST_STIMULI,
    TEST_SELECTIONS,
    TRIAL_MODEL_SUFFIX,
    select_trial_test_stimuli,
    split_note,
)

__all__ = [
    "MIN_TEST_STIMULI",
    "TEST_SELECTIONS",
    "TRIAL_MODEL_SUFFIX",
    "fit_trial_encoding",
    "parse_trial_cv",
    "presentation_index",
    "select_trial_test_stimuli",
    "split_note",
    "stimulus_splits",
]

logger = logging.getLogger(__name__)

_LOSO = "leave-one-stimulus-out"


# --------------------------------------------------------------------------- helpers
def parse_trial_cv(cv: Any) -> int | None:
    """Read ``trial_split.cv``.

    Parameters
    ----------
    cv : str | dict
        ``"leave-one-stimulus-out"`` or ``{"grouped_kfold": k}`` with ``k >= 2``.

    Returns
    -------
    n_splits : int | None
        ``None`` for one fold per training stimulus, else the number of folds.
    """
    if cv == _LOSO:
        return None
    if isinstance(cv, Mapping) and set(cv) == {"grouped_kfold"}:
        try:
            return parse_cv(dict(cv))
        except ValueError:
            raise ValueError(
                f"`trial_split.cv.grouped_kfold` must be an int >= 2, got "
                f"{cv['grouped_kfold']!r} instead."
            ) from None
    raise ValueError(
        f"`trial_split.cv` must be {_LOSO!r} or {{'grouped_kfold': k}}, got {cv!r} instead."
    )


def presentation_index(stimuli: np.ndarray, test_ids: Sequence[str]) -> np.ndarray:
    """Trial indices of every presentation of each test stimulus.

    Parameters
    ----------
    stimuli : ndarray of str, shape (n_trials,)
        Stimulus id of every trial.
    test_ids : sequence of str, shape (n_test,)
        Test stimuli, each shown at least once.

    Returns
    -------
    index : ndarray of int, shape (n_repeats, n_test)
        ``index[r, s]`` is the trial of the ``r``-th presentation of ``test_ids[s]``.
        Stimuli shown more often than the least-shown one keep their first
        ``n_repeats`` presentations (with a logged warning).
    """
    where = [np.flatnonzero(stimuli == s) for s in test_ids]
    counts = [w.size for w in where]
    if not counts or min(counts) < 1:
        raise ValueError("Every test stimulus must be shown at least once, got none instead.")
    n_rep = min(counts)
    if max(counts) > n_rep:
        logger.warning(
            "Test stimuli are shown %d to %d times; keeping the first %d presentations of each.",
            n_rep,
            max(counts),
            n_rep,
        )
    return np.stack([w[:n_rep] for w in where], axis=1)


def stimulus_splits(stimuli: np.ndarray, n_splits: int | None) -> list[tuple[np.ndarray, ...]]:
    """Cross-validation folds that keep all trials of a stimulus together.

    Parameters
    ----------
    stimuli : ndarray of str, shape (n_trials,)
        Stimulus id of every training trial.
    n_splits : int | None
        Grouped k-fold, or ``None`` for one fold per stimulus.

    Returns
    -------
    splits : list of (ndarray, ndarray)
        Training and validation trial indices of each fold.
    """
    return run_splits(stimuli, n_splits, unit="stimulus")


def _split_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    # keys were checked against the defaults by `with_defaults`
    split = cfg.get("trial_split")
    if not isinstance(split, Mapping):
        raise ValueError(f"`trial_split` must be a dict, got {split!r} instead.")
    return dict(split)


def _load_betas(path: Path) -> xr.Dataset:
    ds = open_dataset(path)
    if "betas" not in ds:
        raise ValueError(f"{path}: variable `betas` is missing from the single-trial store.")
    if ds["betas"].dims != ("trial", "voxel"):
        raise ValueError(
            f"{path}: `betas` must have dims (trial, voxel), got {ds['betas'].dims} instead."
        )
    if "stimulus" not in ds.coords or ds["stimulus"].dims != ("trial",):
        raise ValueError(f"{path}: coordinate `stimulus` (dim trial) is missing.")
    return ds


def _strings(values: Any) -> np.ndarray:
    """Any array of strings (numpy's StringDType included) as a fixed-width str array."""
    return np.array([str(v) for v in np.asarray(values).ravel()], dtype=str)


def _feature_rows(
    features: Mapping[str, Path], spaces: Sequence[str], ids: Sequence[str]
) -> list[np.ndarray]:
    """Feature rows of ``ids`` (repeats allowed) for each space, float64."""
    out = []
    for s in spaces:
        rows = features_for_stimuli(features[s], ids).astype(np.float64)
        if not np.all(np.isfinite(rows)):
            raise ValueError(f"{features[s]}: field `features` holds non-finite values.")
        out.append(rows)
    return out


def _standardizer(X: np.ndarray, enabled: bool) -> tuple[np.ndarray, np.ndarray]:
    """Column mean and (when ``enabled``) SD of training rows, shape (n_features,) each."""
    mean = X.mean(0)
    std = X.std(0) if enabled else np.ones(X.shape[1])
    return mean, np.where(std > 0, std, 1.0)


def _voxel_coords(ref: xr.Dataset) -> dict[str, Any]:
    def values(coord: xr.DataArray) -> np.ndarray:
        arr = np.asarray(coord.values)
        if arr.dtype.kind in "UOT":  # any numpy text
            return np.array([str(v) for v in arr.ravel()], dtype=object)
        return arr

    return {
        name: (("voxel",), values(coord), dict(coord.attrs))
        for name, coord in ref.coords.items()
        if coord.dims == ("voxel",)
    }


def _grid_attrs(betas: xr.Dataset, brain: Path | None) -> dict[str, Any]:
    """``affine``, ``mask_shape`` and ``tr`` from the betas store, else the run store."""
    attrs = {k: betas.attrs[k] for k in ("affine", "mask_shape", "tr") if k in betas.attrs}
    if brain is not None and len(attrs) < 3:
        ref = open_dataset(brain)
        for key in ("affine", "mask_shape", "tr"):
            if key not in attrs and key in ref.attrs:
                attrs[key] = ref.attrs[key]
    out: dict[str, Any] = {"tr": float(attrs.get("tr", 1.0))}
    if "affine" in attrs and "mask_shape" in attrs:
        out["affine"] = np.asarray(attrs["affine"], dtype=float).tolist()
        out["mask_shape"] = [int(n) for n in attrs["mask_shape"]]
    return out


# --------------------------------------------------------------------------- stage
def fit_trial_encoding(
    *,
    betas: Path,
    features: dict[str, Path],
    output: Path,
    config: dict,
    provenance: dict,
    brain: Path | None = None,
) -> Path:
    """Fit a single-trial encoding model of one subject and predict held-out stimuli.

    Parameters
    ----------
    betas : Path
        Single-trial store of ONE subject: ``betas`` (trial, voxel) with coordinate
        ``stimulus`` on ``trial`` (trials with an empty stimulus id are skipped) and
        voxel coordinates (``roi``, ``i/j/k``, ``x/y/z``), optionally ``ncsnr`` and
        ``noise_ceiling`` (voxel).
    features : dict of str to Path
        Per-stimulus feature stores (``features`` (stimulus, feature), coordinate
        ``stimulus``) by feature-space name.
    output : Path
        Output store.
    config : dict
        The ``encoding`` section for one model: ``feature_spaces``, ``model``
        (ridge | banded_ridge | auto), ``alphas``, ``scoring``, ``standardize``,
        ``banded``, ``target_batch_size``, ``device``, ``dtype``, an optional ``name``
        and ``trial_split``: ``test`` ("auto", "repeated" or a list of stimulus ids),
        ``cv`` (``{"grouped_kfold": k}`` or "leave-one-stimulus-out"), ``test_fraction``
        and ``seed`` (of ``auto``).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    brain : Path | None
        A preprocessed run store of the subject whose attributes ``affine``,
        ``mask_shape`` and ``tr`` are copied when the betas store lacks them (for
        brain maps of the scores).

    Returns
    -------
    output : Path
        The store: ``y_pred`` (stimulus, voxel), ``y_test`` (repeat, stimulus, voxel),
        ``best_alpha`` (voxel) or (space, voxel), ``cv_score`` (voxel), for banded
        ridge ``variance_split`` (space, voxel), and ``ncsnr`` / ``noise_ceiling``
        (voxel) when the betas store has them; ``test_onset`` (repeat, stimulus; s,
        NaN when unknown) and ``test_run`` (repeat, stimulus) of every test
        presentation; the voxel coordinates of the betas; attributes ``subject``,
        ``model`` (``<name>_trials``), ``feature_spaces``, ``layer``, ``solver``,
        ``design`` ("trials"), ``tr``, ``affine``, ``mask_shape``,
        ``exchangeable_samples`` (True), ``test_selection``, ``n_train_stimuli``,
        ``n_test_stimuli`` and ``split_note`` (empty unless the test set is larger than
        the training set, see :func:`split_note`).
    """
    cfg = with_defaults(config)
    split = _split_config(cfg)
    n_splits = parse_trial_cv(split.get("cv", {"grouped_kfold": 5}))
    betas = Path(betas)
    spaces = select_feature_spaces(cfg, features)
    solver = choose_solver(cfg, spaces)

    ds = _load_betas(betas)
    stimuli_all = _strings(ds["stimulus"].values)
    keep = np.flatnonzero(stimuli_all != "")
    if keep.size < stimuli_all.size:
        logger.info("Skipping %d trials without a stimulus.", stimuli_all.size - keep.size)
    stimuli = stimuli_all[keep]
    test_setting = split.get("test", "auto")
    test_ids = select_trial_test_stimuli(
        stimuli,
        test_setting,
        str(betas),
        fraction=float(split.get("test_fraction", 0.2)),
        seed=int(split.get("seed", 0)),
    )
    is_test = np.isin(stimuli, test_ids)
    train = np.flatnonzero(~is_test)
    n_train_stimuli = np.unique(stimuli[train]).size
    if n_train_stimuli < 2:
        raise ValueError(
            f"{betas}: at least 2 training stimuli are needed (field `stimulus`), got "
            f"{n_train_stimuli} instead."
        )
    note = split_note(n_train_stimuli, len(test_ids), test_setting)
    if note is not None:
        logger.warning("%s: %s.", betas, note)
    splits = stimulus_splits(stimuli[train], n_splits)
    Y = np.asarray(ds["betas"].values, dtype=np.float32)[keep]
    if not np.all(np.isfinite(Y)):
        raise ValueError(f"{betas}: field `betas` holds non-finite values.")

    # Feature statistics come from the training trials only.
    X_train = _feature_rows(features, spaces, stimuli[train])
    X_test = _feature_rows(features, spaces, test_ids)
    stats = [_standardizer(X, bool(cfg["standardize"])) for X in X_train]
    X_train = [((X - m) / s).astype(np.float32) for X, (m, s) in zip(X_train, stats, strict=True)]
    X_test = [((X - m) / s).astype(np.float32) for X, (m, s) in zip(X_test, stats, strict=True)]
    Y_train = Y[train]
    y_mean = Y_train.mean(0)

    device = resolve_device(cfg["device"])
    common = solver_options(cfg, splits, device)
    reps = presentation_index(stimuli, test_ids)  # (n_repeats, n_test)
    y_test = Y[reps]  # (n_repeats, n_test, n_voxels)
    parts = None
    if solver == "ridge":
        result = ridge_cv(np.concatenate(X_train, axis=1), Y_train - y_mean, **common)
        y_pred = result.predict(np.concatenate(X_test, axis=1)) + y_mean
    else:
        band = cfg["banded"]
        result = banded_ridge_cv(
            X_train,
            Y_train - y_mean,
            n_iter=int(band["n_iter"]),
            concentration=band["concentration"],
            random_state=int(band["random_state"]),
            **common,
        )
        parts = result.predict_split(X_test)  # (n_spaces, n_test, n_voxels)
        y_pred = parts.sum(0) + y_mean

    out = _output_dataset(ds, y_pred, y_test, test_ids, result, solver, spaces)
    out = out.merge(_presentations(ds, keep, reps))
    n_design = int(np.asarray(result.coef).shape[0])
    out = out.merge(
        encoder_dataset(
            coef=result.coef,
            spaces=spaces,
            n_features=[X.shape[1] for X in X_train],
            delays=NO_DELAYS,
            variants=[NO_DELAYS["method"]],
            design_mean=np.zeros((1, n_design)),
            feature_mean=np.concatenate([m for m, _ in stats])[None],
            feature_scale=np.concatenate([sd for _, sd in stats])[None],
            target_mean=y_mean,
            units=str(out["y_pred"].attrs.get("units", "")),
        )
    )
    if parts is not None:
        out["variance_split"] = _variance_split(y_test, parts)
    name = str(cfg.get("name") or "+".join(spaces))
    out.attrs.update(
        subject=str((ds.attrs.get("entities") or {}).get("subject", "n/a")),
        model=f"{name}{TRIAL_MODEL_SUFFIX}",
        feature_spaces=list(spaces),
        layer="+".join(_layer_of(features[s]) for s in spaces),
        solver=solver,
        design="trials",
        sample="test stimulus",
        exchangeable_samples=True,
        scoring=cfg["scoring"],
        **_grid_attrs(ds, Path(brain) if brain is not None else None),
        test_selection=test_setting,
        split_note=note or "",
        n_train_trials=int(train.size),
        n_train_stimuli=int(n_train_stimuli),
        n_test_stimuli=len(test_ids),
        n_test_repeats=int(reps.shape[0]),
        n_folds=len(splits),
        device=str(device),
        dtype=cfg["dtype"],
        delays=dict(NO_DELAYS),
        design_filtered=False,
    )
    logger.info(
        "%s: %d training trials of %d stimuli, %d test stimuli x %d repeats, %s.",
        out.attrs["model"],
        train.size,
        n_train_stimuli,
        len(test_ids),
        reps.shape[0],
        solver,
    )
    return write_dataset(out, output, provenance=provenance)


def _layer_of(path: Path) -> str:
    """Layer name recorded in a feature store (``"n/a"`` when absent)."""
    return str(open_dataset(path).attrs.get("layer") or "n/a")


def _output_dataset(
    ref: xr.Dataset,
    y_pred: np.ndarray,
    y_test: np.ndarray,
    test_ids: Sequence[str],
    result: Any,
    solver: str,
    spaces: Sequence[str],
) -> xr.Dataset:
    units = ref["betas"].attrs.get("units", "")
    one = {"units": "1"}
    coords: dict[str, Any] = {
        **_voxel_coords(ref),
        "stimulus": ("stimulus", np.asarray(list(test_ids), dtype=object)),
        "repeat": ("repeat", np.arange(y_test.shape[0])),
    }
    data: dict[str, Any] = {
        "y_pred": (
            ("stimulus", "voxel"),
            np.asarray(y_pred, dtype=np.float32),
            {"units": units, "long_name": "predicted single-trial response"},
        ),
        "y_test": (
            ("repeat", "stimulus", "voxel"),
            np.asarray(y_test, dtype=np.float32),
            {"units": units, "long_name": "observed single-trial response, per presentation"},
        ),
        "cv_score": (
            ("voxel",),
            np.asarray(result.cv_score, dtype=np.float32),
            {**one, "long_name": "cross-validated score at the chosen penalty"},
        ),
    }
    if solver == "ridge":
        data["best_alpha"] = (("voxel",), result.best_alpha, one)
    else:
        coords["space"] = ("space", np.asarray(list(spaces), dtype=object))
        data["best_alpha"] = (("space", "voxel"), result.best_alpha, one)
    for name in ("ncsnr", "noise_ceiling"):
        if name in ref and ref[name].dims == ("voxel",):
            attrs = {**ref[name].attrs, "source": "single-trial store"}
            data[name] = (("voxel",), np.asarray(ref[name].values, dtype=np.float32), attrs)
    return xr.Dataset(data, coords=coords)


def _presentations(ds: xr.Dataset, keep: np.ndarray, reps: np.ndarray) -> xr.Dataset:
    """Onset and run of every test presentation, shape (n_repeats, n_test) each.

    From the betas store's ``onset`` and ``run`` trial coordinates; NaN onsets and
    empty runs where the store has none (imported betas may not).
    """
    n_trials = ds.sizes["trial"]
    if "onset" in ds.coords and ds["onset"].dims == ("trial",):
        onset = np.asarray(ds["onset"].values, dtype=np.float64)
    else:
        onset = np.full(n_trials, np.nan)
    if "run" in ds.coords and ds["run"].dims == ("trial",):
        run = _strings(ds["run"].values)
    else:
        run = np.full(n_trials, "", dtype=str)
    dims = ("repeat", "stimulus")
    return xr.Dataset(
        {
            "test_onset": (
                dims,
                onset[keep][reps],
                {"units": "s", "long_name": "onset of each test presentation"},
            ),
            "test_run": (
                dims,
                np.asarray(run[keep][reps], dtype=object),
                {"long_name": "run of each test presentation"},
            ),
        }
    )


def _variance_split(y_test: np.ndarray, parts: np.ndarray) -> xr.DataArray:
    """Product-measure split of test R² per space, averaged over repeats."""
    per_rep = [r2_split(y_test[r], parts) for r in range(y_test.shape[0])]
    return xr.DataArray(
        np.mean(per_rep, axis=0).astype(np.float32),
        dims=("space", "voxel"),
        attrs={
            "units": "1",
            "long_name": "share of test-set R² per feature space (product measure), "
            "mean over repeats",
        },
    )

"""Encoding stage: fit voxel-wise (banded) ridge models from stimulus features to BOLD.

One subject at a time. Runs named in ``split.test_runs`` are held out entirely: feature
standardisation, cross-validation, alpha choice and the final fit use the training runs
only. Predictions are made for the test stimulus sequence; test runs that presented the
same stimuli are kept as separate repeats of the observed responses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.config import merge_defaults
from neuroflow.encoding.stored import encoder_dataset, filter_like_data
from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.records import entity_key, run_matches
from neuroflow.models import (
    banded_ridge_cv,
    parse_cv,
    r2_split,
    resolve_device,
    ridge_cv,
    run_splits,
)
from neuroflow.models.delays import ENCODER_HRF_LIBRARY, apply_delays, delay_variants
from neuroflow.trial_split import N_BLOCKS_ONE_RUN, auto_test_runs

__all__ = ["DEFAULT_CONFIG", "fit_encoding", "make_alphas", "with_defaults"]

logger = logging.getLogger(__name__)

#: Defaults of the ``encoding`` configuration section (mirrors its JSON schema).
DEFAULT_CONFIG: dict[str, Any] = {
    "feature_spaces": ["image_statistics", "minilm"],
    "model": "auto",
    "alphas": {"start": 0.0, "stop": 6.0, "num": 13},
    "cv": "leave-one-run-out",
    "scoring": "r2",
    "delays": {"method": "hrf", "lags": [1, 2, 3, 4], "hrf_model": list(ENCODER_HRF_LIBRARY)},
    "split": {"test_runs": "auto"},
    "target": "voxels",
    "standardize": True,
    "filter_design": True,
    "banded": {"n_iter": 100, "concentration": [0.1, 1.0], "random_state": 0},
    "trial_split": {"test": "auto", "test_fraction": 0.2, "seed": 0, "cv": {"grouped_kfold": 5}},
    "target_batch_size": 10000,
    "device": "auto",
    "dtype": "float32",
    "event_penalty": 1.0,
    # options of `model: transformer` (neuroflow.models.transformer.DEFAULT_OPTIONS)
    "transformer": {},
}


def with_defaults(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill missing keys of an ``encoding`` section with :data:`DEFAULT_CONFIG`.

    Unknown keys are errors, with a "did you mean" hint.
    """
    # `name` labels the model (the workflow adds it); `cv` values are a string or a
    # {grouped_kfold: k} mapping, taken whole
    defaults = {**DEFAULT_CONFIG, "name": None}
    return merge_defaults(defaults, config, "encoding", opaque=("cv", "transformer"))


def make_alphas(spec: Mapping[str, Any]) -> np.ndarray:
    """Candidate penalties ``10 ** linspace(start, stop, num)``.

    Parameters
    ----------
    spec : dict
        ``{"start": float, "stop": float, "num": int}`` (base-10 exponents).

    Returns
    -------
    alphas : ndarray, shape (num,)
    """
    num = spec.get("num")
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise ValueError(f"`alphas.num` must be a positive int, got {num!r} instead.")
    start, stop = float(spec["start"]), float(spec["stop"])
    if stop < start:
        raise ValueError(f"`alphas.stop` must be >= `alphas.start`, got {stop} < {start} instead.")
    return np.logspace(start, stop, num)


@dataclass
class _Run:
    """One run's arrays and identity."""

    path: Path
    key: str
    entities: dict[str, Any]
    bold: np.ndarray  # (n_times, n_voxels)
    time: np.ndarray  # (n_times,)
    features: dict[str, np.ndarray] = field(default_factory=dict)  # space -> (n_times, n_feat)
    stimuli: Any = None
    nuisance: np.ndarray | None = None  # (n_times, n_nuisance), orthonormal columns
    sequence: tuple[str, ...] = ()  # stim_file of every event, in order
    # for spaces aligned with an HRF library: the HRF models and each column's model index
    libraries: dict[str, tuple[str, ...]] = field(default_factory=dict)
    variants: dict[str, np.ndarray] = field(default_factory=dict)
    # per space, which columns are the event regressor (the response to every event)
    events: dict[str, np.ndarray] = field(default_factory=dict)


def _as_parcels(ds: xr.Dataset, path: Path) -> xr.Dataset:
    """A run store whose targets are its parcel means (``parcel_bold``) instead of voxels."""
    if "parcel_bold" not in ds:
        if ds.attrs.get("target_kind") == "parcel":
            return ds  # time series of parcels already
        raise ValueError(
            f"{path}: `encoding.target: parcels` needs the variable `parcel_bold` (time, "
            "parcel); set `preprocess_fmri.rois.parcels: true` with an atlas."
        )
    names = [str(v) for v in ds["parcel"].values]
    out = xr.Dataset(
        {"bold": (("time", "voxel"), ds["parcel_bold"].values, dict(ds["bold"].attrs))},
        coords={
            "time": ds["time"],
            "voxel": ("voxel", np.arange(len(names))),
            "roi": ("voxel", np.array(names, dtype=object)),
        },
        attrs={**ds.attrs, "target_kind": "parcel"},
    )
    if "nuisance_basis" in ds:
        out["nuisance_basis"] = ds["nuisance_basis"]
    for name in ds.variables:
        if ds[name].dims == ("event",):
            out[name] = ds[name]
    return out


def _load_brain(path: Path, target: str = "voxels") -> tuple[_Run, xr.Dataset]:
    ds = open_dataset(path)
    if target == "parcels":
        ds = _as_parcels(ds, path)
    if "bold" not in ds:
        raise ValueError(f"{path}: variable `bold` is missing.")
    if ds["bold"].dims != ("time", "voxel"):
        raise ValueError(f"{path}: `bold` must have dims (time, voxel), got {ds['bold'].dims}.")
    entities = dict(ds.attrs.get("entities") or {})
    if not entities.get("subject"):
        raise ValueError(f"{path}: attribute `entities` must name the subject.")
    bold = np.asarray(ds["bold"].values, dtype=np.float32)
    if not np.all(np.isfinite(bold)):
        raise ValueError(f"{path}: `bold` holds non-finite values.")
    names = ("subject", "session", "task", "run")
    key = entity_key(*(entities.get(n) for n in names))
    run = _Run(path, key, entities, bold, np.asarray(ds["time"].values))
    run.stimuli = ds.attrs.get("stim_files")
    if "stim_file" in ds.variables:
        run.sequence = tuple(
            str(v) for v in ds["stim_file"].values if str(v).strip().lower() not in _MISSING
        )
    if "nuisance_basis" in ds:
        basis = ds["nuisance_basis"]
        if basis.dims != ("time", "nuisance") or basis.shape[0] != bold.shape[0]:
            raise ValueError(
                f"{path}: `nuisance_basis` must have dims (time, nuisance) with "
                f"{bold.shape[0]} time points, got {basis.dims} {basis.shape} instead."
            )
        run.nuisance = np.asarray(basis.values, dtype=np.float64)
    return run, ds


def _load_features(
    path: Path, run: _Run
) -> tuple[np.ndarray, Any, tuple[str, ...], np.ndarray | None]:
    """Aligned features of one run: ``(X, stim_files, hrf_library, hrf_variant)``.

    ``hrf_library`` names the HRF models the store was aligned with (empty when not
    aligned by HRF) and ``hrf_variant`` gives the model index of every column when
    there are several (else ``None``).
    """
    ds = open_dataset(path)
    if "features" not in ds:
        raise ValueError(f"{path}: variable `features` is missing.")
    if ds["features"].dims != ("time", "feature"):
        raise ValueError(
            f"{path}: `features` must have dims (time, feature), got {ds['features'].dims}."
        )
    time = np.asarray(ds["time"].values)
    if time.shape != run.time.shape or not np.allclose(time, run.time, rtol=0, atol=1e-6):
        raise ValueError(
            f"{path}: field `time` does not match the brain run {run.path} "
            f"({time.shape[0]} vs {run.time.shape[0]} samples)."
        )
    X = np.asarray(ds["features"].values, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{path}: `features` holds non-finite values.")
    library = tuple(str(m) for m in ds.attrs.get("hrf_models") or ())
    if len(library) > 1:
        if "hrf_variant" not in ds.coords:
            raise ValueError(
                f"{path}: attribute `hrf_models` lists {len(library)} HRF models but the "
                "coordinate `hrf_variant` (feature) is missing."
            )
        return X, ds.attrs.get("stim_files"), library, np.asarray(ds["hrf_variant"].values, int)
    return X, ds.attrs.get("stim_files"), library, None


def event_columns(ds: xr.Dataset) -> np.ndarray:
    """Which columns of an aligned feature store are the event regressor.

    Parameters
    ----------
    ds : xarray.Dataset
        Store of :func:`neuroflow.features.align.align_features`: with
        ``event_regressor``, attribute ``feature_centre`` (one value per source feature)
        is non-empty and the event indicator is source feature ``len(feature_centre)``.

    Returns
    -------
    mask : ndarray of bool, shape (n_columns,)
        True for the event regressor's columns (one per HRF basis function, model and
        delay); all False for a store without one.
    """
    n_columns = ds.sizes.get("feature", 0)
    centre = ds.attrs.get("feature_centre") or []
    if not len(centre) or "source_feature" not in ds.coords:
        return np.zeros(n_columns, dtype=bool)
    return np.asarray(ds["source_feature"].values) == len(centre)


def _layer_of(path: Path) -> str:
    """Layer name recorded in an aligned feature store (``"n/a"`` when absent)."""
    source = open_dataset(path).attrs.get("source") or {}
    return str(source.get("layer", "n/a")) if isinstance(source, Mapping) else "n/a"


def _is_test(entities: Mapping[str, Any], labels: Sequence[Any]) -> bool:
    """Whether a run is named by ``split.test_runs`` (see :func:`run_matches`)."""
    return run_matches(entities, labels)


def _same_stimuli(a: _Run, b: _Run) -> bool:
    """Two test runs are repeats when they presented the same stimulus sequence."""
    if a.stimuli is not None and b.stimuli is not None:
        return list(a.stimuli) == list(b.stimuli)
    if a.bold.shape[0] != b.bold.shape[0]:
        return False
    return all(np.allclose(a.features[s], b.features[s], rtol=1e-5, atol=1e-6) for s in a.features)


def group_repeats(runs: Sequence[_Run]) -> list[list[int]]:
    """Group test runs by stimulus sequence, in order of first appearance.

    Returns
    -------
    groups : list of list of int
        Indices into ``runs``; every group holds the repeats of one sequence.
    """
    groups: list[list[int]] = []
    for i, run in enumerate(runs):
        for grp in groups:
            if _same_stimuli(runs[grp[0]], run):
                grp.append(i)
                break
        else:
            groups.append([i])
    return groups


def _check_lags(delays: Mapping[str, Any], runs: Sequence[_Run]) -> None:
    """FIR lags must be causal and shorter than every run (else a run's design is empty)."""
    if delays.get("method") != "fir":
        return
    lags = [int(lag) for lag in delays.get("lags", [])]
    if any(lag < 0 for lag in lags):
        raise ValueError(
            f"`encoding.delays.lags` must be >= 0 TRs (negative lags use the future), got "
            f"{lags} instead."
        )
    shortest = min(runs, key=lambda r: r.bold.shape[0])
    if max(lags, default=0) >= shortest.bold.shape[0]:
        raise ValueError(
            f"`encoding.delays.lags` must be shorter than every run, got lag {max(lags)} TRs "
            f"but {shortest.path} has {shortest.bold.shape[0]} volumes."
        )


def _cv_groups(train: Sequence[_Run]) -> np.ndarray:
    """Cross-validation group of every training sample: its run, or, with one training
    run, one of :data:`N_BLOCKS_ONE_RUN` contiguous blocks of it."""
    if len(train) >= 2:
        return np.concatenate([np.full(r.bold.shape[0], i) for i, r in enumerate(train)])
    n = train[0].bold.shape[0]
    logger.info(
        "One training run (%s): cross-validation over %d contiguous blocks of it.",
        train[0].key,
        N_BLOCKS_ONE_RUN,
    )
    return np.repeat(
        np.arange(N_BLOCKS_ONE_RUN), np.diff(np.linspace(0, n, N_BLOCKS_ONE_RUN + 1).astype(int))
    )


def _standardizer(
    train: Sequence[_Run], spaces: Sequence[str], enabled: bool, event_penalty: float = 1.0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Mean and scale of each space's columns over the training runs.

    The scale is the standard deviation (1 without ``enabled``), divided by
    ``sqrt(1 / event_penalty)`` for the event-regressor columns (``_Run.events``): ridge
    then penalises their weights ``event_penalty`` times as much as the features', so the
    response to every event is not shrunk with the feature weights.
    """
    stats = {}
    for s in spaces:
        X = np.concatenate([r.features[s] for r in train])
        mean = X.mean(0)
        std = X.std(0) if enabled else np.ones_like(mean)
        scale = np.where(std > 0, std, 1.0)
        events = train[0].events.get(s) if train else None
        if events is not None and events.any():
            scale = np.where(events, scale * np.sqrt(event_penalty), scale)
        stats[s] = (mean, scale)
    return stats


def _design(
    run: _Run,
    spaces: Sequence[str],
    stats: Mapping[str, tuple[np.ndarray, np.ndarray]],
    delays: Mapping[str, Any],
    tr: float,
    filter_design: bool = False,
) -> list[np.ndarray]:
    """Standardised, delayed (and optionally nuisance-filtered) features, one array per space."""
    out = []
    basis = run.nuisance if filter_design else None
    for s in spaces:
        mean, std = stats[s]
        X = apply_delays((run.features[s] - mean) / std, dict(delays), tr)
        out.append(filter_like_data(X, basis).astype(np.float32))
    return out


def choose_solver(cfg: Mapping[str, Any], spaces: Sequence[str]) -> str:
    """``"ridge"`` or ``"banded_ridge"`` from ``cfg["model"]`` (``"auto"``: banded when
    there are several feature spaces)."""
    model = cfg["model"]
    if model not in ("auto", "ridge", "banded_ridge"):
        hint = (
            " (a transformer is fitted by fit_transformer_encoding)"
            if model == "transformer"
            else ""
        )
        raise ValueError(
            f"`model` must be 'auto', 'ridge' or 'banded_ridge', got {model!r} instead{hint}."
        )
    if model == "auto":
        return "banded_ridge" if len(spaces) > 1 else "ridge"
    return model


def solver_options(cfg: Mapping[str, Any], splits: Sequence[Any], device: Any) -> dict[str, Any]:
    """Keyword arguments shared by ``ridge_cv`` and ``banded_ridge_cv`` from a section."""
    return {
        "alphas": make_alphas(cfg["alphas"]),
        "splits": splits,
        "scoring": cfg["scoring"],
        "target_batch_size": int(cfg["target_batch_size"]),
        "device": device,
        "dtype": cfg["dtype"],
    }


def hrf_library(runs: Sequence[_Run], spaces: Sequence[str]) -> tuple[str, ...]:
    """The HRF library the feature spaces were aligned with (empty without one).

    Spaces aligned with a library must all use the same one; spaces aligned with one HRF
    (or not by HRF) take part in every model of the library unchanged.
    """
    found: dict[str, tuple[str, ...]] = {}
    for run in runs:
        for space in spaces:
            library = run.libraries.get(space, ())
            if space in found and found[space] != library:
                raise ValueError(
                    f"{run.path}: the features of {space!r} must be aligned with the same "
                    f"HRF models in every run, got {list(library)} instead of "
                    f"{list(found[space])}."
                )
            found[space] = library
    libraries = {lib for lib in found.values() if len(lib) > 1}
    if len(libraries) > 1:
        raise ValueError(
            "Feature spaces of one encoding model must share their HRF library, got "
            f"{ {s: list(lib) for s, lib in found.items() if len(lib) > 1} } instead."
        )
    return next(iter(libraries), ())


def _variant(run: _Run, index: int) -> _Run:
    """``run`` with the columns of HRF model ``index`` of every library-aligned space."""
    if not run.variants:
        return run
    features = {
        s: X[:, run.variants[s] == index] if s in run.variants else X
        for s, X in run.features.items()
    }
    events = {
        s: mask[run.variants[s] == index] if s in run.variants else mask
        for s, mask in run.events.items()
    }
    return replace(run, features=features, events=events)


@dataclass
class _Fit:
    """What one fit leaves for the output store; arrays have a last axis of targets."""

    cv_score: np.ndarray  # (n_targets,)
    best_alpha: np.ndarray  # (n_targets,) or (n_spaces, n_targets)
    y_pred: np.ndarray  # (n_test_times, n_targets)
    parts: list[np.ndarray] | None  # per test sequence (n_spaces, n_times, n_targets)
    n_train: int
    coef: np.ndarray  # (n_design, n_targets), on the centred design
    design_mean: np.ndarray  # (n_design,), training mean of the design, per variant
    target_mean: np.ndarray  # (n_targets,)
    feature_stats: dict[str, tuple[np.ndarray, np.ndarray]]  # space -> (mean, scale)


def _fit_and_predict(
    train: Sequence[_Run],
    test: Sequence[_Run],
    groups_test: Sequence[Sequence[int]],
    spaces: Sequence[str],
    cfg: Mapping[str, Any],
    tr: float,
    model: str,
    device: Any,
) -> _Fit:
    """Fit on ``train`` (penalties by cross-validation) and predict each test sequence."""
    stats = _standardizer(train, spaces, bool(cfg["standardize"]), float(cfg["event_penalty"]))
    delays = cfg["delays"]
    filtered = bool(cfg["filter_design"])
    Xs_train = [
        np.concatenate(b)
        for b in zip(*(_design(r, spaces, stats, delays, tr, filtered) for r in train), strict=True)
    ]
    Y_train = np.concatenate([r.bold for r in train])
    y_mean = Y_train.mean(0)
    Y_train = Y_train - y_mean
    x_means = [X.mean(0) for X in Xs_train]
    Xs_train = [X - m for X, m in zip(Xs_train, x_means, strict=True)]
    splits = run_splits(_cv_groups(train), parse_cv(cfg["cv"]))
    common = solver_options(cfg, splits, device)
    if model == "ridge":
        result = ridge_cv(np.concatenate(Xs_train, axis=1), Y_train, **common)
    else:
        band = cfg["banded"]
        result = banded_ridge_cv(
            Xs_train,
            Y_train,
            n_iter=int(band["n_iter"]),
            concentration=band["concentration"],
            random_state=int(band["random_state"]),
            **common,
        )
    n_train = Y_train.shape[0]
    del Xs_train, Y_train
    preds, all_parts = [], []
    for grp in groups_test:
        # one prediction per repeat, each filtered like that repeat's BOLD; their mean
        # is compared with the mean of the repeats
        designs = [
            [
                X - m
                for X, m in zip(
                    _design(test[i], spaces, stats, delays, tr, filtered), x_means, strict=True
                )
            ]
            for i in grp
        ]
        if model == "ridge":
            pred = np.mean([result.predict(np.concatenate(Xs, 1)) for Xs in designs], axis=0)
        else:
            parts = np.mean([result.predict_split(Xs) for Xs in designs], axis=0)
            all_parts.append(parts)
            pred = parts.sum(0)
        preds.append((pred + y_mean).astype(np.float32))
    return _Fit(
        cv_score=np.asarray(result.cv_score),
        best_alpha=np.asarray(result.best_alpha),
        y_pred=np.concatenate(preds, axis=0),
        parts=all_parts if model != "ridge" else None,
        n_train=n_train,
        coef=np.asarray(result.coef, dtype=np.float32),
        design_mean=np.concatenate(x_means).astype(np.float32),
        target_mean=np.asarray(y_mean, dtype=np.float32),
        feature_stats=stats,
    )


def _choose_per_target(fits: Sequence[_Fit]) -> tuple[_Fit, np.ndarray]:
    """Per target, the fit with the best cross-validated score.

    Returns
    -------
    fit : _Fit
        The chosen fit's values for every target (``fits[0]`` when there is one).
    choice : ndarray of int, shape (n_targets,)
        Index into ``fits`` per target.
    """
    scores = np.stack([np.nan_to_num(f.cv_score, nan=-np.inf) for f in fits])
    choice = np.argmax(scores, axis=0)
    if len(fits) == 1:
        return fits[0], choice

    def pick(arrays: Sequence[np.ndarray]) -> np.ndarray:
        stacked = np.stack(arrays)  # (n_fits, ..., n_targets)
        index = choice.reshape((1,) + (1,) * (stacked.ndim - 2) + choice.shape)
        return np.take_along_axis(stacked, index, axis=0)[0]

    parts = None
    if fits[0].parts is not None:
        parts = [pick([f.parts[g] for f in fits]) for g in range(len(fits[0].parts))]
    fit = _Fit(
        cv_score=pick([f.cv_score for f in fits]),
        best_alpha=pick([f.best_alpha for f in fits]),
        y_pred=pick([f.y_pred for f in fits]),
        parts=parts,
        n_train=fits[0].n_train,
        coef=pick([f.coef for f in fits]),
        design_mean=fits[0].design_mean,
        target_mean=fits[0].target_mean,
        feature_stats=fits[0].feature_stats,
    )
    return fit, choice


def _banded_library_fit(
    fit_variant: Callable[..., _Fit], n_variants: int
) -> tuple[_Fit, np.ndarray, list[_Fit]]:
    """Banded ridge with an HRF library: the HRF chosen per target by ridge, one banded fit each.

    A banded fit's random search costs about as much per target as one fit per HRF would,
    so fitting every HRF with banded ridge multiplies the model's fitting time by the
    library's size. The HRF is a property of the target's response, not of the band
    weighting: each target's is chosen by the cross-validated score of ridge on the same
    design (one fit per HRF, each a fraction of a banded fit), and banded ridge is fitted
    once per HRF on the targets that chose it.

    Parameters
    ----------
    fit_variant : callable
        ``fit_variant(v, solver, targets=None)`` fits HRF model ``v`` with ``solver``
        (``"ridge"`` or ``"banded_ridge"``) on the targets selected by the boolean mask
        ``targets`` (all when ``None``).
    n_variants : int
        Models in the library.

    Returns
    -------
    fit : _Fit
        Each target's values from the banded fit of its HRF.
    choice : ndarray of int, shape (n_targets,)
        Each target's HRF model.
    screens : list of _Fit
        The ridge fit of every model (their feature and design statistics are the banded
        fits'; they do not depend on the solver).
    """
    screens = [fit_variant(v, "ridge") for v in range(n_variants)]
    _, choice = _choose_per_target(screens)
    fit: _Fit | None = None
    for v in range(n_variants):
        targets = choice == v
        if not targets.any():
            continue
        part = fit_variant(v, "banded_ridge", targets)
        if fit is None:
            fit = _empty_fit(part, choice.size)
        _scatter(fit, part, targets)
    assert fit is not None  # every target chose a model
    return fit, choice, screens


def _empty_fit(like: _Fit, n_targets: int) -> _Fit:
    """A :class:`_Fit` shaped as ``like`` for ``n_targets`` targets, its target values NaN."""

    def empty(a: np.ndarray) -> np.ndarray:
        return np.full((*a.shape[:-1], n_targets), np.nan, dtype=a.dtype)

    return _Fit(
        cv_score=empty(like.cv_score),
        best_alpha=empty(like.best_alpha),
        y_pred=empty(like.y_pred),
        parts=[empty(p) for p in like.parts] if like.parts is not None else None,
        n_train=like.n_train,
        coef=empty(like.coef),
        design_mean=like.design_mean,
        target_mean=empty(like.target_mean),
        feature_stats=like.feature_stats,
    )


def _scatter(fit: _Fit, part: _Fit, targets: np.ndarray) -> None:
    """Write ``part``'s values (fitted on the ``targets`` mask) into ``fit`` in place."""
    for name in ("cv_score", "best_alpha", "y_pred", "coef", "target_mean"):
        getattr(fit, name)[..., targets] = getattr(part, name)
    if fit.parts is not None and part.parts is not None:
        for whole, piece in zip(fit.parts, part.parts, strict=True):
            whole[..., targets] = piece


def fit_encoding(
    *,
    brain: list[Path],
    features: dict[str, list[Path]],
    output: Path,
    config: dict,
    provenance: dict,
) -> Path:
    """Fit an encoding model of one subject and predict the held-out test runs.

    Parameters
    ----------
    brain : list of Path
        Preprocessed fMRI run stores of ONE subject: variable ``bold`` (time, voxel),
        voxel coordinates (``roi``, ``i/j/k``, ``x/y/z``), attributes ``tr``, ``affine``,
        ``mask_shape`` and ``entities``.
    features : dict of str to list of Path
        For every feature space, aligned feature stores (variable ``features``,
        dims (time, feature)) in the order of ``brain``.
    output : Path
        Output store.
    config : dict
        The ``encoding`` configuration section (shared settings plus one model's
        ``feature_spaces`` and ``model``); an optional ``name`` labels the model
        in the output (attribute ``model``; the solver goes to ``solver``).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The written store: ``y_pred`` (time, voxel), ``y_test`` (repeat, time, voxel),
        ``best_alpha`` (voxel) or (space, voxel), ``cv_score`` (voxel) and, for banded
        ridge, ``variance_split`` (space, voxel).
    """
    cfg = with_defaults(config)
    brain = [Path(p) for p in brain]
    if not brain:
        raise ValueError("`brain` must list at least one run store, got none instead.")
    spaces = list(cfg["feature_spaces"] or list(features))
    missing = [s for s in spaces if s not in features]
    if missing:
        raise ValueError(
            f"`feature_spaces` names {missing} but `features` only has {sorted(features)}."
        )
    if not spaces:
        raise ValueError("At least one feature space is needed, got none instead.")
    model = choose_solver(cfg, spaces)
    for s in spaces:
        if len(features[s]) != len(brain):
            raise ValueError(
                f"Feature space {s!r} has {len(features[s])} stores for {len(brain)} brain runs."
            )

    runs, first = _load_all(brain, features, spaces, cfg["target"])
    tr = float(first.attrs["tr"])
    test_runs = cfg["split"]["test_runs"]
    if test_runs == "auto":
        test_runs = auto_test_runs([r.key for r in runs], {r.key: r.sequence for r in runs})
    is_test = [_is_test(r.entities, test_runs) for r in runs]
    train = [r for r, t in zip(runs, is_test, strict=True) if not t]
    test = [r for r, t in zip(runs, is_test, strict=True) if t]
    if not test:
        raise ValueError(
            f"`split.test_runs` {cfg['split']['test_runs']} matches none of the runs "
            f"{[r.key for r in runs]}."
        )
    if not train:
        raise ValueError(
            f"`split.test_runs` {cfg['split']['test_runs']} holds out every run "
            f"{[r.key for r in runs]}; at least 1 training run is needed."
        )

    _check_lags(cfg["delays"], runs)
    groups_test = group_repeats(test)
    n_rep = {len(g) for g in groups_test}
    if len(n_rep) != 1:
        raise ValueError(
            "Test stimulus sequences must be repeated equally often, got "
            f"{[[test[i].key for i in g] for g in groups_test]}."
        )
    device = resolve_device(cfg["device"])
    library = hrf_library(runs, spaces)
    delay_specs = delay_variants(cfg["delays"])
    if len(delay_specs) > 1:
        if library:
            raise ValueError(
                "`delays.hrf_model` must be one HRF model when the features were aligned "
                f"with an HRF library ({list(library)}), got {cfg['delays']['hrf_model']} "
                "instead: convolve once, with `delays.method: none`."
            )
        # an HRF library of the encoder: one fit per model, chosen per target below
        library = tuple(spec["hrf_model"] for spec in delay_specs)

    def fit_variant(v: int, solver: str, targets: np.ndarray | None = None) -> _Fit:
        runs = [_variant(r, v) for r in train]
        if targets is not None:
            runs = [replace(r, bold=r.bold[:, targets]) for r in runs]
        return _fit_and_predict(
            runs,
            [_variant(r, v) for r in test],
            groups_test,
            spaces,
            {**cfg, "delays": delay_specs[v] if len(delay_specs) > 1 else delay_specs[0]},
            tr,
            solver,
            device,
        )

    n_variants = max(len(library), 1)
    if model == "banded_ridge" and n_variants > 1:
        fit, choice, fits = _banded_library_fit(fit_variant, n_variants)
    else:
        fits = [fit_variant(v, model) for v in range(n_variants)]
        fit, choice = _choose_per_target(fits)
    if library:
        logger.info(
            "HRF library %s: targets per model %s%s.",
            list(library),
            np.bincount(choice, minlength=len(library)).tolist(),
            " (chosen by ridge)" if model == "banded_ridge" else "",
        )
    y_pred = fit.y_pred
    y_test = np.concatenate([np.stack([test[i].bold for i in grp]) for grp in groups_test], axis=1)
    times = [test[grp[0]].time for grp in groups_test]
    split_parts = (
        [
            (parts, [test[i].bold for i in grp])
            for parts, grp in zip(fit.parts, groups_test, strict=True)
        ]
        if fit.parts is not None
        else []
    )

    ds = _output_dataset(first, y_pred, y_test, np.concatenate(times), fit, model, spaces)
    ds = ds.merge(_stored_encoder(fit, fits, spaces, cfg["delays"], library, ds["y_pred"].attrs))
    if model == "banded_ridge":
        ds["variance_split"] = _variance_split(split_parts, spaces)
    if library:
        ds["hrf_model"] = (
            ("voxel",),
            np.array(library, dtype=object)[choice],
            {"long_name": "HRF model of the library chosen by cross-validation"},
        )
    ds.attrs.update(
        subject=str(runs[0].entities["subject"]),
        feature_spaces=list(spaces),
        layer="+".join(_layer_of(features[space][0]) for space in spaces),
        model=str(cfg.get("name") or model),
        solver=model,
        scoring=cfg["scoring"],
        tr=tr,
        affine=np.asarray(first.attrs.get("affine")).tolist(),
        mask_shape=list(first.attrs.get("mask_shape", [])),
        n_train_samples=int(fit.n_train),
        hrf_models=list(library),
        train_runs=[r.key for r in train],
        test_runs=[r.key for r in test],
        repeat_runs=[[test[i].key for i in g] for g in groups_test],
        device=str(device),
        dtype=cfg["dtype"],
        design_filtered=bool(cfg["filter_design"] and all(r.nuisance is not None for r in runs)),
        delays=dict(cfg["delays"]),
        test_segments=[int(test[grp[0]].time.size) for grp in groups_test],
    )
    nuisance = _test_nuisance([test[grp[0]] for grp in groups_test])
    if nuisance is not None:
        ds["test_nuisance"] = (
            ("time", "nuisance"),
            nuisance,
            {
                "long_name": "nuisance basis the cleaning projected out of the held-out "
                "runs (one repeat per test sequence; block-diagonal over runs)"
            },
        )
    return write_dataset(ds, output, provenance=provenance)


def _test_nuisance(runs: Sequence[_Run]) -> np.ndarray | None:
    """Block-diagonal nuisance basis of the held-out runs, shape (n_times, n_nuisance).

    The evaluation corrects its permutation null for these projected-out dimensions;
    ``None`` when a run has no stored basis.
    """
    if not runs or any(r.nuisance is None for r in runs):
        return None
    n_times = sum(r.nuisance.shape[0] for r in runs)
    out = np.zeros((n_times, sum(r.nuisance.shape[1] for r in runs)), dtype=np.float32)
    row = col = 0
    for r in runs:
        rows, cols = r.nuisance.shape
        out[row : row + rows, col : col + cols] = r.nuisance
        row, col = row + rows, col + cols
    return out


def _load_all(
    brain: Sequence[Path],
    features: Mapping[str, Sequence[Path]],
    spaces: Sequence[str],
    target: str = "voxels",
) -> tuple[list[_Run], xr.Dataset]:
    runs: list[_Run] = []
    first: xr.Dataset | None = None
    for i, path in enumerate(brain):
        run, ds = _load_brain(path, target)
        if first is None:
            first = ds
        else:
            _check_same_voxels(first, ds, brain[0], path)
        for s in spaces:
            run.features[s], stim, library, variant = _load_features(Path(features[s][i]), run)
            run.events[s] = event_columns(open_dataset(Path(features[s][i])))
            run.libraries[s] = library
            if variant is not None:
                run.variants[s] = variant
            run.stimuli = run.stimuli if run.stimuli is not None else stim
        runs.append(run)
    subjects = {str(r.entities["subject"]) for r in runs}
    if len(subjects) > 1:
        raise ValueError(f"`brain` must hold runs of one subject, got subjects {sorted(subjects)}.")
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"`brain` lists the same run twice: {keys}.")
    assert first is not None
    if "tr" not in first.attrs:
        raise ValueError(f"{brain[0]}: attribute `tr` is missing.")
    return runs, first


def _check_same_voxels(ref: xr.Dataset, ds: xr.Dataset, ref_path: Path, path: Path) -> None:
    if ds.sizes["voxel"] != ref.sizes["voxel"]:
        raise ValueError(
            f"{path}: field `voxel` has {ds.sizes['voxel']} voxels, {ref_path} has "
            f"{ref.sizes['voxel']}."
        )
    for name in ("i", "j", "k"):
        both = name in ref.coords and name in ds.coords
        if both and not np.array_equal(ref[name].values, ds[name].values):
            raise ValueError(f"{path}: field `{name}` differs from {ref_path}.")


def _voxel_coords(ref: xr.Dataset) -> dict[str, Any]:
    def values(coord: xr.DataArray) -> np.ndarray:
        arr = np.asarray(coord.values)
        return arr.astype(object) if arr.dtype.kind == "U" else arr  # str objects

    return {
        name: (("voxel",), values(coord), dict(coord.attrs))
        for name, coord in ref.coords.items()
        if coord.dims == ("voxel",)
    }


def _output_dataset(
    ref: xr.Dataset,
    y_pred: np.ndarray,
    y_test: np.ndarray,
    time: np.ndarray,
    result: Any,
    model: str,
    spaces: Sequence[str],
) -> xr.Dataset:
    units = ref["bold"].attrs.get("units", "")
    coords: dict[str, Any] = {**_voxel_coords(ref), "time": ("time", time, {"units": "s"})}
    data = {
        "y_pred": (("time", "voxel"), y_pred, {"units": units, "long_name": "predicted BOLD"}),
        "y_test": (
            ("repeat", "time", "voxel"),
            y_test.astype(np.float32),
            {"units": units, "long_name": "observed test BOLD, per repeat"},
        ),
        "cv_score": (
            ("voxel",),
            np.asarray(result.cv_score, dtype=np.float32),
            {"units": "1", "long_name": "cross-validated score at the chosen penalty"},
        ),
    }
    if model == "ridge":
        data["best_alpha"] = (("voxel",), result.best_alpha, {"units": "1"})
    else:
        coords["space"] = ("space", np.array(list(spaces), dtype=object))
        data["best_alpha"] = (("space", "voxel"), result.best_alpha, {"units": "1"})
    coords["repeat"] = ("repeat", np.arange(y_test.shape[0]))
    return xr.Dataset(data, coords=coords)


def _stored_encoder(
    fit: _Fit,
    fits: Sequence[_Fit],
    spaces: Sequence[str],
    delays: Mapping[str, Any],
    library: Sequence[str],
    units: Mapping[str, Any],
) -> xr.Dataset:
    """The fitted model (:func:`neuroflow.encoding.stored.encoder_dataset`)."""
    if library:
        variants = list(library)
    else:
        variants = [str(delays.get("hrf_model")) if delays["method"] == "hrf" else delays["method"]]

    def stats(k: int) -> np.ndarray:
        return np.stack([np.concatenate([f.feature_stats[s][k] for s in spaces]) for f in fits])

    return encoder_dataset(
        coef=fit.coef,
        spaces=spaces,
        n_features=[len(fits[0].feature_stats[s][0]) for s in spaces],
        delays=delays,
        variants=variants,
        design_mean=np.stack([f.design_mean for f in fits]),
        feature_mean=stats(0),
        feature_scale=stats(1),
        target_mean=fit.target_mean,
        units=str(units.get("units", "")),
    )


def _variance_split(
    parts: Sequence[tuple[np.ndarray, list[np.ndarray]]], spaces: Sequence[str]
) -> xr.DataArray:
    """Product-measure split of test R² per space, averaged over repeats."""
    n_rep = len(parts[0][1])
    preds = np.concatenate([p for p, _ in parts], axis=1)
    per_rep = [r2_split(np.concatenate([obs[r] for _, obs in parts]), preds) for r in range(n_rep)]
    return xr.DataArray(
        np.mean(per_rep, axis=0).astype(np.float32),
        dims=("space", "voxel"),
        attrs={
            "units": "1",
            "long_name": "share of test-set R² per feature space (product measure), "
            "mean over repeats",
        },
    )

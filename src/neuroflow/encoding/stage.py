"""Encoding stage: fit voxel-wise (banded) ridge models from stimulus features to BOLD.

One subject at a time. Runs named in ``split.test_runs`` are held out entirely: feature
standardisation, cross-validation, alpha choice and the final fit use the training runs
only. Predictions are made for the test stimulus sequence; test runs that presented the
same stimuli are kept as separate repeats of the observed responses.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.config import merge_defaults
from neuroflow.encoding.fitting import (
    _banded_library_fit,
    _choose_per_target,
    _Fit,
    _fit_and_predict,
    choose_solver,
)
from neuroflow.encoding.runs import (
    _check_lags,
    _is_test,
    _layer_of,
    _load_all,
    _test_nuisance,
    _variant,
    _voxel_coords,
    group_repeats,
    hrf_library,
)
from neuroflow.encoding.stored import encoder_dataset
from neuroflow.models import (
    r2_split,
    resolve_device,
)
from neuroflow.models.delays import ENCODER_HRF_LIBRARY, delay_variants
from neuroflow.trial_split import auto_test_runs

__all__ = ["DEFAULT_CONFIG", "fit_encoding", "with_defaults"]

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

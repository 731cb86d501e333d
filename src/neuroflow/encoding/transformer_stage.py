"""Encoding stage of ``model: transformer``: one multimodal encoder across all subjects.

Every subject's runs are split as for ridge (``split.test_runs``, resolved per subject:
held-out runs never enter training, feature statistics or early stopping). One
:class:`~neuroflow.models.transformer.MultimodalEncoder` per seed is trained on the
training runs of every subject at once (the last training run(s) of each subject stop
it early), and the seeds' predictions are averaged. Each subject's store has the layout
of a ridge store (``y_pred`` (time, voxel), ``y_test`` (repeat, time, voxel),
``cv_score`` (voxel), the voxel coordinates), so that evaluation, the summary and the
report treat both alike; it adds ``y_pred_variant`` (variant, time, voxel): each seed's
own prediction (``seed-<k>``) and, with several feature spaces, the ensemble's
prediction with one space left out (``without-<space>``: modality ablation). A
training store beside them keeps the per-epoch curves of every seed and the weights.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.encoding.fitting import _standardizer
from neuroflow.encoding.runs import (
    _is_test,
    _layer_of,
    _load_all,
    _Run,
    _voxel_coords,
    group_repeats,
)
from neuroflow.encoding.stage import with_defaults
from neuroflow.encoding.stored import filter_like_data
from neuroflow.models.transformer import (
    SubjectData,
    TrainedEncoder,
    predict,
    resolve_options,
    train_encoder,
)
from neuroflow.trial_split import auto_test_runs

__all__ = ["fit_transformer_encoding", "load_encoder", "training_dataset"]

logger = logging.getLogger(__name__)


def _split_runs(
    runs: Sequence[_Run], test_runs: Any, subject: str
) -> tuple[list[_Run], list[_Run], list[list[int]]]:
    """Training runs, test runs and the test runs grouped by repeated sequence."""
    if test_runs == "auto" or test_runs is None:
        test_runs = auto_test_runs([r.key for r in runs], {r.key: r.sequence for r in runs})
    is_test = [_is_test(r.entities, test_runs) for r in runs]
    train = [r for r, t in zip(runs, is_test, strict=True) if not t]
    test = [r for r, t in zip(runs, is_test, strict=True) if t]
    if not test or not train:
        raise ValueError(
            f"sub-{subject}: `split.test_runs` {test_runs} must hold out some but not all of "
            f"the runs {[r.key for r in runs]}, got {len(test)} held out instead."
        )
    groups = group_repeats(test)
    if len({len(g) for g in groups}) != 1:
        raise ValueError(
            f"sub-{subject}: test stimulus sequences must be repeated equally often, got "
            f"{[[test[i].key for i in g] for g in groups]}."
        )
    return train, test, groups


def _subject_data(
    name: str,
    runs: Sequence[_Run],
    stats: Mapping[str, tuple[np.ndarray, np.ndarray]],
    with_targets: bool = True,
) -> SubjectData:
    """Standardised features (and BOLD) of a subject's runs."""
    feats = [
        {s: ((r.features[s] - m) / sd).astype(np.float32) for s, (m, sd) in stats.items()}
        for r in runs
    ]
    return SubjectData(name, feats, [r.bold for r in runs] if with_targets else None)


def _test_prediction(
    trained: TrainedEncoder,
    subject: str,
    test: Sequence[_Run],
    groups: Sequence[Sequence[int]],
    stats: Mapping[str, tuple[np.ndarray, np.ndarray]],
    filtered: bool,
    **kwargs: Any,
) -> np.ndarray:
    """Prediction of every test sequence, one per repeat filtered like its BOLD and
    averaged, sequences concatenated: (n_times, n_targets), or (n_seeds, ...) per seed."""
    out = []
    for grp in groups:
        preds = []
        for i in grp:
            pred = predict(trained, _subject_data(subject, [test[i]], stats, False), **kwargs)
            if filtered and test[i].nuisance is not None:
                flat = pred.reshape(-1, *pred.shape[-2:])
                done = np.stack([filter_like_data(p, test[i].nuisance) for p in flat])
                pred = done.reshape(pred.shape)
            preds.append(pred)
        out.append(np.mean(preds, axis=0))
    return np.concatenate(out, axis=-2).astype(np.float32)


def _validation_score(trained: TrainedEncoder, subject: str, n_targets: int) -> np.ndarray:
    """Pearson r per target on the subject's validation runs at the best epoch, mean over
    seeds (before any refit, so never on data the scored model saw); NaN when the subject
    had no validation run."""
    per_seed = [c.val_r_targets[subject] for c in trained.curves if subject in c.val_r_targets]
    if not per_seed:
        return np.full(n_targets, np.nan, dtype=np.float32)
    return np.mean(per_seed, axis=0).astype(np.float32)


def training_dataset(
    trained: TrainedEncoder, stats: Mapping[str, tuple[np.ndarray, np.ndarray]]
) -> xr.Dataset:
    """Curves, weights and feature statistics of a trained encoder as a dataset.

    Parameters
    ----------
    trained : TrainedEncoder
    stats : dict of str to (mean, sd)
        The feature statistics the inputs were standardised with, per space.

    Returns
    -------
    ds : xarray.Dataset
        ``train_loss``, ``val_r``, ``learning_rate``, ``epoch_seconds`` and
        ``train_seconds`` (seed, epoch; NaN after an early stop), ``refit_loss`` (seed,
        epoch; the refit on every training run, NaN without one), ``val_r_subject``
        (seed, epoch, subject),
        ``best_epoch`` and ``n_epochs`` (seed), ``weights`` (seed, weight: every
        parameter flattened in the order of attribute ``parameters``, name ->
        shape), ``feature_mean_<space>`` and ``feature_scale_<space>``.
    """
    curves = trained.curves
    n_epochs = max(len(c.train_loss) for c in curves)
    subjects = list(trained.target_mean)

    def padded(values: Sequence[Sequence[float]]) -> np.ndarray:
        out = np.full((len(values), n_epochs), np.nan)
        for k, v in enumerate(values):
            out[k, : len(v)] = v
        return out

    per_subject = np.full((len(curves), n_epochs, len(subjects)), np.nan)
    for k, c in enumerate(curves):
        for e, row in enumerate(c.val_r_subject):
            if row:
                per_subject[k, e, : len(row)] = row
    state = [m.state_dict() for m in trained.models]
    names = list(state[0])
    weights = np.stack(
        [np.concatenate([s[n].detach().float().numpy().ravel() for n in names]) for s in state]
    )
    data = {
        "train_loss": (("seed", "epoch"), padded([c.train_loss for c in curves])),
        "val_r": (("seed", "epoch"), padded([c.val_r for c in curves])),
        "learning_rate": (("seed", "epoch"), padded([c.lr for c in curves])),
        "epoch_seconds": (("seed", "epoch"), padded([c.seconds for c in curves])),
        "train_seconds": (("seed", "epoch"), padded([c.train_seconds for c in curves])),
        "refit_loss": (("seed", "epoch"), padded([c.refit_loss for c in curves])),
        "val_r_subject": (("seed", "epoch", "subject"), per_subject),
        "best_epoch": (("seed",), np.array([c.best_epoch for c in curves])),
        "n_epochs": (("seed",), np.array([len(c.train_loss) for c in curves])),
        "weights": (("seed", "weight"), weights.astype(np.float32)),
    }
    for space, (mean, sd) in stats.items():
        data[f"feature_mean_{space}"] = ((f"feature_{space}",), mean.astype(np.float32))
        data[f"feature_scale_{space}"] = ((f"feature_{space}",), sd.astype(np.float32))
    ds = xr.Dataset(
        data,
        coords={
            "seed": ("seed", np.asarray(trained.seeds)),
            "epoch": ("epoch", np.arange(n_epochs)),
            "subject": ("subject", np.asarray(subjects, dtype=object)),
        },
        attrs={
            "parameters": {n: list(state[0][n].shape) for n in names},
            "options": dict(trained.options),
            "feature_spaces": list(trained.spaces),
            "device": trained.device,
            "n_train_samples": int(curves[0].n_samples),
        },
    )
    descriptions = {
        "train_loss": ("mean training loss of the epoch", str(trained.options["loss"])),
        "val_r": ("mean validation Pearson r over subjects (each its targets' mean)", "1"),
        "learning_rate": ("learning rate at the end of the epoch", "1"),
        "epoch_seconds": ("wall time of the epoch (training and validation)", "s"),
        "train_seconds": ("wall time of the epoch's training steps", "s"),
        "refit_loss": ("mean training loss of the refit on every training run", "1"),
        "val_r_subject": ("mean validation Pearson r over the subject's targets", "1"),
        "best_epoch": ("epoch whose weights were kept (best validation r)", "1"),
        "n_epochs": ("epochs trained before the end or an early stop", "1"),
        "weights": ("every parameter of the model, flattened (see `parameters`)", "1"),
    }
    for name, (long_name, units) in descriptions.items():
        ds[name].attrs.update(long_name=long_name, units=units)
    return ds


def load_encoder(
    training: str | Path, subjects: Mapping[str, str | Path]
) -> tuple[TrainedEncoder, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Rebuild a trained encoder from its stores, to predict new stimuli.

    Parameters
    ----------
    training : path-like
        The model's training store (:func:`training_dataset`).
    subjects : dict of str to path-like
        Subject -> its encoding store (for its targets' statistics).

    Returns
    -------
    trained : TrainedEncoder
        Every seed's model with the stored weights.
    feature_stats : dict of str to (mean, sd)
        Per feature space, the statistics its inputs must be standardised with.
    """
    import torch

    from neuroflow.artifacts import open_dataset
    from neuroflow.models.transformer import MultimodalEncoder

    ds = open_dataset(training)
    missing = [s for s in ds.attrs["subjects"] if s not in subjects]
    if missing:
        raise ValueError(
            f"`subjects` must give the store of every subject of {training} "
            f"({ds.attrs['subjects']}), got {sorted(subjects)} instead."
        )
    opts = resolve_options(ds.attrs["options"])
    spaces = list(ds.attrs["feature_spaces"])
    stats = {
        s: (
            np.asarray(ds[f"feature_mean_{s}"].values, np.float64),
            np.asarray(ds[f"feature_scale_{s}"].values, np.float64),
        )
        for s in spaces
    }
    stores = {s: open_dataset(subjects[s]) for s in ds.attrs["subjects"]}
    dims = {s: int(stats[s][0].size) for s in spaces}
    n_targets = {s: int(st.sizes["voxel"]) for s, st in stores.items()}
    shapes = {name: tuple(shape) for name, shape in ds.attrs["parameters"].items()}
    models = []
    for k in range(ds.sizes["seed"]):
        flat = torch.from_numpy(np.asarray(ds["weights"].values[k], dtype=np.float32))
        state, offset = {}, 0
        for name, shape in shapes.items():
            size = int(np.prod(shape))
            state[name] = flat[offset : offset + size].reshape(shape)
            offset += size
        model = MultimodalEncoder(dims, n_targets, opts)
        model.load_state_dict(state)
        models.append(model.eval())
    trained = TrainedEncoder(
        models=models,
        seeds=[int(v) for v in ds["seed"].values],
        curves=[],
        options=opts,
        target_mean={s: np.asarray(st["target_mean"].values) for s, st in stores.items()},
        target_scale={s: np.asarray(st["target_scale"].values) for s, st in stores.items()},
        spaces=spaces,
        device="cpu",
    )
    return trained, stats


def _subject_dataset(
    first: xr.Dataset,
    y_pred: np.ndarray,
    y_test: np.ndarray,
    time: np.ndarray,
    cv_score: np.ndarray,
    variants: Mapping[str, np.ndarray],
) -> xr.Dataset:
    """One subject's store in the layout of a ridge store, plus the variants."""
    units = first["bold"].attrs.get("units", "")
    coords: dict[str, Any] = {
        **_voxel_coords(first),
        "time": ("time", time, {"units": "s"}),
        "repeat": ("repeat", np.arange(y_test.shape[0])),
        "variant": ("variant", np.asarray(list(variants), dtype=object)),
    }
    data = {
        "y_pred": (
            ("time", "voxel"),
            y_pred,
            {"units": units, "long_name": "predicted BOLD (mean over seeds)"},
        ),
        "y_test": (
            ("repeat", "time", "voxel"),
            y_test.astype(np.float32),
            {"units": units, "long_name": "observed test BOLD, per repeat"},
        ),
        "cv_score": (
            ("voxel",),
            cv_score,
            {"units": "1", "long_name": "Pearson r on the validation runs (early stopping)"},
        ),
        "y_pred_variant": (
            ("variant", "time", "voxel"),
            np.stack(list(variants.values())) if variants else np.zeros((0, *y_pred.shape)),
            {
                "units": units,
                "long_name": "predicted BOLD of each seed alone (seed-<k>) and of the "
                "ensemble without one feature space (without-<space>)",
            },
        ),
    }
    return xr.Dataset(data, coords=coords)


def fit_transformer_encoding(
    *,
    brain: Mapping[str, Sequence[str | Path]],
    features: Mapping[str, Mapping[str, Sequence[str | Path]]],
    outputs: Mapping[str, str | Path],
    training: str | Path,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    test_runs: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Train one transformer encoder across subjects; predict each subject's test runs.

    Parameters
    ----------
    brain : dict of str to list of path-like
        Subject -> its preprocessed run stores (as for
        :func:`~neuroflow.encoding.stage.fit_encoding`).
    features : dict of str to dict of str to list of path-like
        Feature space -> subject -> aligned feature stores in the order of its runs.
    outputs : dict of str to path-like
        Subject -> its output store.
    training : path-like
        Output store of the training curves and weights (:func:`training_dataset`).
    config : dict
        The ``encoding`` section of the model (``feature_spaces``, ``model:
        transformer``, ``transformer`` options, ``split``, ``standardize``,
        ``filter_design``, ``target``).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    test_runs : dict of str to list | None
        Subject -> its held-out runs (keys or labels); ``None`` or missing subjects use
        ``split.test_runs``.

    Returns
    -------
    stores : list of Path
        The subjects' stores (in the order of ``outputs``), then the training store.
    """
    cfg = with_defaults(config)
    if cfg["model"] != "transformer":
        raise ValueError(f"`model` must be 'transformer', got {cfg['model']!r} instead.")
    opts = resolve_options(cfg["transformer"])
    spaces = list(cfg["feature_spaces"])
    subjects = list(outputs)
    if not subjects or set(subjects) != set(brain):
        raise ValueError(
            f"`outputs` must name the subjects of `brain` ({sorted(brain)}), got "
            f"{sorted(outputs)} instead."
        )
    missing = [s for s in spaces if s not in features]
    if missing:
        raise ValueError(f"`feature_spaces` names {missing}, `features` has {sorted(features)}.")
    loaded, split = {}, {}
    for sub in subjects:
        per_space = {sp: list(features[sp][sub]) for sp in spaces}
        runs, first = _load_all([Path(p) for p in brain[sub]], per_space, spaces, cfg["target"])
        given = (test_runs or {}).get(sub, cfg["split"]["test_runs"])
        loaded[sub] = (runs, first)
        split[sub] = _split_runs(runs, given, sub)
    # one set of feature statistics over every subject's training runs
    pooled = [r for sub in subjects for r in split[sub][0]]
    stats = _standardizer(pooled, spaces, bool(cfg["standardize"]))
    trained = train_encoder([_subject_data(s, split[s][0], stats) for s in subjects], spaces, opts)
    filtered = bool(cfg["filter_design"])
    written = []
    for sub in subjects:
        train, test, groups = split[sub]
        runs, first = loaded[sub]
        args = (trained, sub, test, groups, stats, filtered)
        y_pred = _test_prediction(*args)
        variants = {}
        if len(trained.seeds) > 1:
            per_seed = _test_prediction(*args, per_seed=True)
            variants.update({f"seed-{k}": p for k, p in zip(trained.seeds, per_seed, strict=True)})
        if len(spaces) > 1:
            variants.update({f"without-{sp}": _test_prediction(*args, drop=sp) for sp in spaces})
        y_test = np.concatenate([np.stack([test[i].bold for i in g]) for g in groups], axis=1)
        time = np.concatenate([test[g[0]].time for g in groups])
        ds = _subject_dataset(
            first, y_pred, y_test, time, _validation_score(trained, sub, y_pred.shape[1]), variants
        )
        units = first["bold"].attrs.get("units", "")
        ds["target_mean"] = (
            ("voxel",),
            trained.target_mean[sub],
            {"units": units, "long_name": "mean of the targets the encoder was trained on"},
        )
        ds["target_scale"] = (
            ("voxel",),
            trained.target_scale[sub],
            {"units": units, "long_name": "SD of the targets the encoder was trained on"},
        )
        ds.attrs.update(
            subject=str(runs[0].entities["subject"]),
            feature_spaces=spaces,
            layer="+".join(_layer_of(Path(features[sp][sub][0])) for sp in spaces),
            model=str(cfg.get("name") or "transformer"),
            solver="transformer",
            scoring="pearson",
            tr=float(first.attrs["tr"]),
            affine=np.asarray(first.attrs.get("affine")).tolist(),
            mask_shape=list(first.attrs.get("mask_shape", [])),
            n_train_samples=int(sum(r.bold.shape[0] for r in train)),
            train_runs=[r.key for r in train],
            test_runs=[r.key for r in test],
            repeat_runs=[[test[i].key for i in g] for g in groups],
            seeds=list(trained.seeds),
            device=trained.device,
            design_filtered=filtered and all(r.nuisance is not None for r in runs),
            test_segments=[int(test[g[0]].time.size) for g in groups],
            training_store=str(Path(training).name),
        )
        written.append(write_dataset(ds, outputs[sub], provenance=provenance))
    record = training_dataset(trained, stats)
    record.attrs.update(model=str(cfg.get("name") or "transformer"), subjects=subjects)
    written.append(write_dataset(record, training, provenance=provenance))
    return written

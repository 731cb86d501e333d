"""Summary rows and figures of temporal response functions (EEG encoding over time
lags, :data:`TRF_METRICS` per model, channel and subject) and the training curves of
encoders trained by gradient descent; :func:`neuroflow.evaluation.report.summarize_all`
adds them to the summary.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import open_dataset

__all__ = ["TRF_METRICS", "training_figures", "trf_figures", "trf_rows"]


#: Metrics of the TRF rows: mean and maximum cross-validated score over channels, and
#: the latency (s) of the peak of the TRF power over lags.
TRF_METRICS = ("cv_score_mean", "cv_score_max", "peak_latency")


def _trf_record(
    ds: xr.Dataset, path: str | os.PathLike, layer_order: Mapping[str, Sequence[str]] | None
) -> dict[str, Any]:
    """Subject, model, feature spaces and metrics of one TRF store."""
    from neuroflow.evaluation.summary import space_names

    for name in ("cv_score", "peak_latency", "trf_power"):
        if name not in ds.variables:
            raise ValueError(f"{path}: variable `{name}` is missing.")
    cv = np.asarray(ds["cv_score"].values, dtype=float)
    finite = cv[np.isfinite(cv)]
    model = str(ds.attrs.get("model", Path(path).stem))
    spaces = ds.attrs.get("feature_spaces") or [model]
    extractor, layer, space = space_names(
        [spaces] if isinstance(spaces, str) else list(spaces), ds.attrs.get("layer"), layer_order
    )
    return {
        "subject": str(ds.attrs.get("subject", "n/a")),
        "model": model,
        "extractor": extractor,
        "feature_space": space,
        "layer": layer,
        "cv_score_mean": float(finite.mean()) if finite.size else np.nan,
        "cv_score_max": float(finite.max()) if finite.size else np.nan,
        "peak_latency": float(ds["peak_latency"].values),
    }


def trf_rows(
    stores: Sequence[xr.Dataset],
    paths: Sequence[str | os.PathLike] = (),
    layer_order: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Tidy summary rows of TRF stores, per subject and model, with group means.

    Parameters
    ----------
    stores : list of xarray.Dataset
        Stores written by :func:`neuroflow.encoding.trf.fit_trf` (one per recording
        and model): ``cv_score`` (channel), ``trf_power`` (lag), ``peak_latency``
        and the attributes ``subject``, ``model`` and ``feature_spaces``.
    paths : list of path-like
        Their paths, named in errors (optional).
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order (names the layer of a bare
        feature space, see :func:`neuroflow.evaluation.summary.space_names`).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`, with
        ``analysis = "trf"``, ``roi = "eeg"`` and ``metric`` one of
        :data:`TRF_METRICS`; ``model`` is the TRF model's name. Per-subject rows
        (``statistic = "value"``) average the subject's recordings; group rows
        (``subject = "group"``, ``statistic`` ``mean``, ``sd`` with ``ddof=1`` and
        ``sem``) summarise the subjects, ``n_subjects`` counting those with a finite value. The
        cross-validated scores (values and means) have chance 0.
    """
    from neuroflow.evaluation.summary import GROUP_SUBJECT, TABLE_COLUMNS

    paths = list(paths) or [f"TRF store {i}" for i in range(len(stores))]
    if len(paths) != len(stores):
        raise ValueError(
            f"`paths` must have one entry per store ({len(stores)}), got {len(paths)} instead."
        )
    columns = list(TABLE_COLUMNS)
    if not stores:
        return pd.DataFrame(columns=columns)
    records = pd.DataFrame(
        [_trf_record(ds, p, layer_order) for ds, p in zip(stores, paths, strict=True)]
    )
    keys = ["model", "extractor", "feature_space", "layer"]
    per_subject = records.groupby(["subject", *keys], sort=True).mean()
    long = per_subject.reset_index().melt(
        id_vars=["subject", *keys], var_name="metric", value_name="value"
    )
    long["statistic"] = "value"
    long["n_subjects"] = 1
    group = []
    for (model, extractor, space, layer, metric), part in long.groupby(
        [*keys, "metric"], sort=True
    ):
        values = part["value"].astype(float)
        n = int(values.notna().sum())
        sd = float(values.std(ddof=1)) if n > 1 else np.nan
        for stat, value in (
            ("mean", float(values.mean()) if n else np.nan),
            ("sd", sd),
            ("sem", sd / np.sqrt(n) if n > 1 else np.nan),
        ):
            group.append(
                {
                    "subject": GROUP_SUBJECT,
                    "model": model,
                    "extractor": extractor,
                    "feature_space": space,
                    "layer": layer,
                    "metric": metric,
                    "value": value,
                    "statistic": stat,
                    "n_subjects": n,
                }
            )
    out = pd.concat([long, pd.DataFrame(group)], ignore_index=True)
    out["roi"] = "eeg"
    out["analysis"] = "trf"
    scored = out["metric"].str.startswith("cv_score") & out["statistic"].isin(["value", "mean"])
    out["chance"] = np.where(scored, 0.0, np.nan)
    out["p_value"] = np.nan
    out["n_targets"] = np.nan
    out["inconclusive"] = np.nan
    order = {m: i for i, m in enumerate(TRF_METRICS)}
    out["_order"] = out["metric"].map(order)
    out["_group"] = out["subject"] == GROUP_SUBJECT
    out = out.sort_values(["_group", "model", "subject", "_order"], kind="stable")
    return out[columns].reset_index(drop=True)


def trf_figures(stores: Sequence[xr.Dataset], plots_dir: str | os.PathLike) -> list[Path]:
    """TRF power over lags, one figure per model and one line per subject.

    Parameters
    ----------
    stores : list of xarray.Dataset
        TRF stores (see :func:`trf_rows`); a subject's recordings are averaged.
        Lag grids that differ are joined (NaN where a store lacks a lag).
    plots_dir : path-like
        Folder of the figures: ``trf_<model>_power.png``.

    Returns
    -------
    paths : list of Path
        The written figures, in model order.
    """
    from neuroflow.evaluation import analysis_plotting

    by_model: dict[str, dict[str, list[xr.DataArray]]] = {}
    for ds in stores:
        model = str(ds.attrs.get("model", "trf"))
        subject = str(ds.attrs.get("subject", "n/a"))
        by_model.setdefault(model, {}).setdefault(subject, []).append(ds["trf_power"])
    out = []
    for model in sorted(by_model):
        subjects = sorted(by_model[model])
        power = xr.concat(
            [
                xr.concat(by_model[model][s], dim="recording", join="outer").mean("recording")
                for s in subjects
            ],
            dim="subject",
            join="outer",
        )
        lags = np.asarray(power["lag"].values, dtype=float)
        lines = {f"sub-{s}": np.asarray(power.values[i], float) for i, s in enumerate(subjects)}
        out.append(
            analysis_plotting.plot_time_courses(
                lags,
                lines,
                Path(plots_dir) / f"trf_{model}_power.png",
                ylabel="TRF power (µV²)",
            )
        )
    return out


#: Variables a training store must have for its figure.
_TRAINING_VARIABLES = ("train_loss", "val_r")


def training_figures(
    paths: Sequence[str | os.PathLike],
    plots_dir: str | os.PathLike,
    *,
    formats: Sequence[str] = ("png",),
    dpi: int = 100,
) -> list[Path]:
    """Training curves of each encoder trained across subjects, one figure per model.

    Parameters
    ----------
    paths : list of path-like
        Training stores of the transformer encoding stage (see
        :func:`neuroflow.encoding.transformer_stage.training_dataset`): ``train_loss``
        and ``val_r`` (seed, epoch; NaN after an early stop), optionally ``best_epoch``
        (seed,) and ``val_r_subject`` (seed, epoch, subject), attribute ``model``
        (else the store's name is taken).
    plots_dir : path-like
        Folder of the figures: ``encoding_<model>_training.<format>``, the training
        loss (left) and the validation r (right) per epoch, one line per seed, a dot
        at each seed's kept epoch, thin lines per subject.
    formats : sequence of str
        File formats, e.g. ``["png", "svg"]``.
    dpi : int
        Resolution of raster formats.

    Returns
    -------
    figures : list of Path
        The written files, in the order of ``paths`` (each store's formats in turn).

    Raises
    ------
    ValueError
        When a store lacks ``train_loss`` or ``val_r``, when they are not on (seed,
        epoch), or when two stores name the same model.
    """
    from neuroflow.evaluation.plotting import plot_training_curves, save_figure

    stores: dict[str, xr.Dataset] = {}
    seen: dict[str, str] = {}
    for path in paths:
        ds = open_dataset(path)
        missing = [name for name in _TRAINING_VARIABLES if name not in ds]
        if missing:
            raise ValueError(
                f"{path}: a training store must have the variables "
                f"{list(_TRAINING_VARIABLES)}, got {sorted(map(str, ds.data_vars))} instead."
            )
        for name in _TRAINING_VARIABLES:
            if ds[name].dims != ("seed", "epoch"):
                raise ValueError(
                    f"{path}: `{name}` must have dims ('seed', 'epoch'), got {ds[name].dims} "
                    "instead."
                )
        model = str(ds.attrs.get("model") or Path(path).stem)
        if model in seen:
            raise ValueError(
                f"`transformer_training` must hold one store per model, got {seen[model]} and "
                f"{path} for model {model!r} instead."
            )
        seen[model] = str(path)
        stores[model] = ds
    out: list[Path] = []
    if stores:
        Path(plots_dir).mkdir(parents=True, exist_ok=True)
    for model, ds in stores.items():
        per_subject = None
        if "val_r_subject" in ds and ds["val_r_subject"].dims[:2] == ("seed", "epoch"):
            per_subject = ds["val_r_subject"].values
        seeds = ds["seed"].values if "seed" in ds.coords else range(ds.sizes["seed"])
        loss = (ds.attrs.get("options") or {}).get("loss")
        fig = plot_training_curves(
            ds["train_loss"].values,
            ds["val_r"].values,
            best_epoch=ds["best_epoch"].values if "best_epoch" in ds else None,
            val_r_subject=per_subject,
            epochs=ds["epoch"].values if "epoch" in ds.coords else None,
            seeds=[f"seed {s}" for s in seeds],
            loss_label=f"training loss ({loss})" if loss else "training loss",
            title=f"{model}: training across subjects",
        )
        out.extend(
            save_figure(fig, Path(plots_dir) / f"encoding_{model}_training", formats, dpi=dpi)
        )
    return out

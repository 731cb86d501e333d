"""The summary stage of encoding scores: score stores to tidy tables, a group store, figures.

:func:`summarize_scores` gathers the score stores that
:func:`neuroflow.evaluation.stage.evaluate_model` writes (every subject and model) into
ROI summaries per subject and across subjects (:mod:`neuroflow.evaluation.summary`):
the wide and long tables, the group store, the brain maps and the ROI charts.
:func:`neuroflow.evaluation.report.summarize_all` adds the other analyses' rows.
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import atomic_directory, open_dataset, write_dataset
from neuroflow.evaluation.plotting import (
    GlassBrainCanvas,
    plot_brain_map,
    plot_roi_bars,
    save_figure,
)
from neuroflow.evaluation.stage import _NA, VARIANT_DIM, _with_defaults, flatten_targets
from neuroflow.evaluation.summary import (
    METRIC_COLUMNS,
    WIDE_COLUMNS,
    group_summary,
    long_rows,
    roi_summary,
    space_names,
    summary_table,
)
from neuroflow.heap import frozen_heap
from neuroflow.io.files import scores_to_nifti
from neuroflow.names import file_form
from neuroflow.variables import describe_variables

if TYPE_CHECKING:
    import nibabel as nib

logger = logging.getLogger(__name__)

__all__ = ["summarize_scores"]


def _label(value: Any) -> str:
    if value is None:
        return _NA
    if isinstance(value, list | tuple | np.ndarray):
        return "+".join(str(v) for v in value) or _NA
    return str(value) or _NA


#: What the colour bar of each brain map shows.
_MAP_LABELS = {"r": "r (held-out)", "r_normalized": "r / noise ceiling"}


def _store_summary(
    path: Path,
    ds: xr.Dataset,
    topk_percent: float,
    layer_order: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Wide ROI summary (:data:`~neuroflow.evaluation.summary.WIDE_COLUMNS`) of one store.

    The per-target variables lie on one dim (``voxel``) or on several (EEG: channel,
    latency), which are flattened (:func:`flatten_targets`) with ``roi`` broadcast.
    ``extractor``, ``layer`` and ``feature_space`` come from the store's
    ``feature_spaces`` and ``layer`` attributes (see
    :func:`~neuroflow.evaluation.summary.space_names`). A store with ``variant_r``
    adds the rows of each variant after its own (see :func:`_variant_summaries`).
    """
    for name in ("r", "r_normalized", "significant", "noise_ceiling_r"):
        if name not in ds:
            raise ValueError(f"{path}: variable `{name}` is missing from the score store.")
    if "roi" not in ds.coords:
        raise ValueError(f"{path}: coordinate `roi` is missing from the score store.")
    for attr in ("subject", "model"):
        if attr not in ds.attrs:
            raise ValueError(f"{path}: attribute `{attr}` is missing from the score store.")
    names = [
        "r",
        "r_normalized",
        "significant",
        "noise_ceiling_r",
        "significant_fwer",
        "exceeds_ceiling",
    ]
    flat = flatten_targets(ds[[n for n in names if n in ds]], ds["r"].dims)
    roi = np.asarray(flat["roi"].values, dtype=object).astype(str)
    table = roi_summary(
        r=flat["r"].values,
        r_normalized=flat["r_normalized"].values,
        significant=flat["significant"].values,
        noise_ceiling_r=flat["noise_ceiling_r"].values,
        roi=roi,
        topk_percent=topk_percent,
        significant_fwer=flat["significant_fwer"].values if "significant_fwer" in flat else None,
        exceeds_ceiling=flat["exceeds_ceiling"].values if "exceeds_ceiling" in flat else None,
    )
    spaces = ds.attrs.get("feature_spaces") or [_label(ds.attrs["model"])]
    spaces = [spaces] if isinstance(spaces, str) else list(spaces)
    model = _label(ds.attrs["model"])
    tables = [
        _label_rows(table, ds, model, space_names(spaces, ds.attrs.get("layer"), layer_order))
    ]
    if "variant_r" in ds:
        tables.extend(
            _variant_summaries(
                path, ds, flat["noise_ceiling_r"].values, roi, topk_percent, spaces, layer_order
            )
        )
    return pd.concat(tables, ignore_index=True)


def _label_rows(
    table: pd.DataFrame, ds: xr.Dataset, model: str, names: tuple[str, str, str]
) -> pd.DataFrame:
    """Wide rows from the ROI rows of :func:`roi_summary`, named after a store's model."""
    extractor, layer, feature_space = names
    table = table.copy()
    table.insert(0, "subject", _label(ds.attrs["subject"]))
    table.insert(1, "model", model)
    table.insert(2, "extractor", extractor)
    table.insert(3, "feature_space", feature_space)
    table.insert(4, "layer", layer)
    table["statistic"] = "value"
    table["n_subjects"] = 1
    return table[list(WIDE_COLUMNS)]


#: Prefix of the variants that leave one feature space out of a model's prediction.
WITHOUT_PREFIX = "without-"


def _variant_spaces(
    path: Path, variant: str, spaces: Sequence[str], layers: Any
) -> tuple[list[str], list[str] | None]:
    """The feature spaces behind a variant's prediction, with their recorded layers.

    ``without-<space>`` leaves ``<space>`` out; any other variant (``seed-<k>``) uses
    every space. ``layers`` is the store's ``layer`` attribute (``+``-joined or a
    list, one per space); None is returned for the layers when it is not that.
    """
    spaces = [str(s) for s in spaces]
    if isinstance(layers, str):
        parts: list[str] | None = layers.split("+")
    elif isinstance(layers, Sequence | np.ndarray):
        parts = [str(v) for v in layers]
    else:
        parts = None
    if parts is not None and len(parts) != len(spaces):
        parts = None
    if not variant.startswith(WITHOUT_PREFIX):
        return spaces, parts
    dropped = variant.removeprefix(WITHOUT_PREFIX)
    if dropped not in spaces:
        raise ValueError(
            f"{path}: variant {variant!r} must leave out one of the feature spaces {spaces}, "
            f"got {dropped!r} instead."
        )
    if len(spaces) < 2:
        raise ValueError(
            f"{path}: variant {variant!r} must leave at least one feature space, got the "
            f"store's only one ({dropped!r}) instead."
        )
    keep = [i for i, s in enumerate(spaces) if s != dropped]
    return [spaces[i] for i in keep], None if parts is None else [parts[i] for i in keep]


def _variant_summaries(
    path: Path,
    ds: xr.Dataset,
    noise_ceiling_r: np.ndarray,
    roi: np.ndarray,
    topk_percent: float,
    spaces: Sequence[str],
    layer_order: Mapping[str, Sequence[str]] | None,
) -> list[pd.DataFrame]:
    """Wide ROI rows of each variant of a score store, as if it were a model of its own.

    Parameters
    ----------
    path : Path
        The store, named in errors.
    ds : xarray.Dataset
        Score store with ``variant_r`` and ``variant_r_normalized`` (variant, <target
        dims>) and the ``variant`` coordinate.
    noise_ceiling_r : ndarray, shape (n_targets,)
        The store's ceiling on r, flat.
    roi : ndarray of str, shape (n_targets,)
        ROI label per flat target.
    topk_percent : float
        Share of best targets averaged in ``topk_r``.
    spaces : sequence of str
        The store's feature spaces.
    layer_order : dict of str to list of str | None
        See :func:`~neuroflow.evaluation.summary.space_names`.

    Returns
    -------
    tables : list of pandas.DataFrame
        One per variant, in store order: ``model`` is ``<model>-<variant>``, ``r`` and
        ``r_normalized`` those of the variant, the ceiling the store's, and
        ``frac_significant`` / ``frac_significant_fwer`` / ``frac_exceeds_ceiling`` NaN
        (variants are neither tested nor flagged). ``extractor``, ``feature_space`` and
        ``layer`` name the spaces the variant predicts from (see :func:`_variant_spaces`).
    """
    for name in ("variant_r_normalized", VARIANT_DIM):
        if name not in ds.variables:
            raise ValueError(
                f"{path}: `{name}` must accompany `variant_r` in the score store, got none instead."
            )
    flat = flatten_targets(ds[["variant_r", "variant_r_normalized"]], ds["r"].dims)
    flat = flat.transpose(VARIANT_DIM, ...)
    model = _label(ds.attrs["model"])
    tables = []
    for k, variant in enumerate(str(v) for v in ds[VARIANT_DIM].values):
        table = roi_summary(
            r=flat["variant_r"].values[k],
            r_normalized=flat["variant_r_normalized"].values[k],
            significant=None,
            noise_ceiling_r=noise_ceiling_r,
            roi=roi,
            topk_percent=topk_percent,
        )
        names = space_names(
            *_variant_spaces(path, variant, spaces, ds.attrs.get("layer")), layer_order
        )
        tables.append(_label_rows(table, ds, f"{model}-{variant}", names))
    return tables


#: ``analysis`` of the rows of run-based fMRI encoding models.
ENCODING_ANALYSIS = "encoding"
#: ``analysis`` of the rows of single-trial fMRI encoding models.
TRIAL_ENCODING_ANALYSIS = "trial_encoding"


def _analysis_of(ds: xr.Dataset) -> str:
    """The analysis of an fMRI score store: single-trial models are their own."""
    return TRIAL_ENCODING_ANALYSIS if ds.attrs.get("design") == "trials" else ENCODING_ANALYSIS


def _model_labels(table: pd.DataFrame) -> pd.Series:
    """One label per model × feature space × layer; the model name alone when unambiguous."""
    combos = table[["model", "feature_space", "layer"]].drop_duplicates()
    ambiguous = set(combos["model"][combos["model"].duplicated()])
    return table.apply(
        lambda row: (
            f"{row['model']}|{row['feature_space']}|{row['layer']}"
            if row["model"] in ambiguous
            else row["model"]
        ),
        axis=1,
    )


def _group_dataset(group: pd.DataFrame) -> xr.Dataset:
    """Across-subject summary with dims (roi, model)."""
    group = group.assign(model_label=_model_labels(group))
    rois = sorted(group["roi"].unique().tolist())
    models = sorted(group["model_label"].unique().tolist())
    data_vars = {}
    for stat, suffix in (("mean", ""), ("sd", "_sd"), ("sem", "_sem")):
        part = group[group["statistic"] == stat]
        for metric in METRIC_COLUMNS:
            grid = part.pivot(index="roi", columns="model_label", values=metric)
            grid = grid.reindex(index=rois, columns=models).astype(float)
            data_vars[f"{metric}{suffix}"] = (("roi", "model"), grid.to_numpy(np.float32))
    means = group[group["statistic"] == "mean"]
    n = means.pivot(index="roi", columns="model_label", values="n_subjects")
    data_vars["n_subjects"] = (
        ("roi", "model"),
        n.reindex(index=rois, columns=models).fillna(0).to_numpy(np.int64),
    )
    first = group.drop_duplicates("model_label").set_index("model_label").loc[models]
    coords = {
        "roi": rois,
        "model": models,
        "model_name": ("model", first["model"].astype(str).tolist()),
        "feature_space": ("model", first["feature_space"].astype(str).tolist()),
        "layer": ("model", first["layer"].astype(str).tolist()),
    }
    attrs = {"description": "across-subject mean (no suffix), SD (_sd) and SEM (_sem)"}
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


#: Most ROIs drawn in the ROI bar charts (parcellations have hundreds).
MAX_BAR_ROIS = 30


def _bar_rows(per_subject: pd.DataFrame) -> pd.DataFrame:
    """Rows of the ROI bar charts: every ROI, or the best :data:`MAX_BAR_ROIS` by mean r."""
    rois = per_subject["roi"].unique()
    if len(rois) <= MAX_BAR_ROIS:
        return per_subject
    best = per_subject[per_subject["roi"] != "all"].groupby("roi")["mean_r"].mean()
    keep = set(best.sort_values(ascending=False).index[:MAX_BAR_ROIS]) | {"all"}
    return per_subject[per_subject["roi"].isin(keep)]


def _write_table(table: pd.DataFrame, path: Path, float_format: str | None = "%.6g") -> None:
    """Write a TSV atomically (``n/a`` for missing values)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        table.to_csv(tmp, sep="\t", index=False, na_rep=_NA, float_format=float_format)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _brain_maps(
    stores: Sequence[tuple[Path, xr.Dataset]], plots: Mapping[str, Any], out_dir: Path
) -> None:
    canvas = None
    if any(_on_voxel_grid(ds) for _, ds in stores):
        # nilearn collects garbage on every image it reads: the stores, tables and
        # modules loaded so far, nilearn's plotting modules included, stay out of those
        # collections, each figure drawn is collected
        import nilearn.plotting  # noqa: F401

        # glass brains share one figure, whose brain outlines are drawn once (and,
        # made before the heap is frozen, stay out of those collections too)
        if plots["brain_map"] == "glass_brain":
            canvas = GlassBrainCanvas()
    with frozen_heap():
        for path, ds in stores:
            _brain_maps_of_store(path, ds, plots, out_dir, canvas)


def _on_voxel_grid(ds: xr.Dataset) -> bool:
    """Whether a score store's targets are voxels of a known grid (a brain map is drawn)."""
    return {"affine", "mask_shape"} <= set(ds.attrs) and {"i", "j", "k"} <= set(ds.coords)


def _brain_maps_of_store(
    path: Path,
    ds: xr.Dataset,
    plots: Mapping[str, Any],
    out_dir: Path,
    canvas: GlassBrainCanvas | None = None,
) -> None:
    """Glass-brain (or slice) maps of r and normalised r of one score store."""
    if "affine" not in ds.attrs or "mask_shape" not in ds.attrs:
        warnings.warn(
            f"{path}: attributes `affine`/`mask_shape` missing; no brain map drawn.",
            RuntimeWarning,
            stacklevel=3,
        )
        return
    missing = [c for c in ("i", "j", "k") if c not in ds.coords]
    if missing:
        # parcel or vertex targets have no voxel grid position: no brain map
        logger.info("%s: targets have no voxel indices %s; no brain map drawn.", path, missing)
        return
    ijk = np.stack([ds[c].values for c in ("i", "j", "k")], axis=1).astype(np.int64)
    name = (
        f"sub-{file_form(_label(ds.attrs['subject']))}_model-{file_form(_label(ds.attrs['model']))}"
        f"_fs-{file_form(_label(ds.attrs.get('feature_spaces')))}"
    )
    if ds.attrs.get("layer") is not None:
        name += f"_layer-{file_form(_label(ds.attrs['layer']))}"
    for metric in ("r", "r_normalized"):
        values = ds[metric].values.astype(np.float64)
        if plots["mask_nonsignificant"]:
            values = np.where(ds["significant"].values, values, 0.0)
        img = scores_to_nifti(
            values,
            ijk,
            affine=np.asarray(ds.attrs["affine"]),
            mask_shape=ds.attrs["mask_shape"],
        )
        title = f"sub-{_label(ds.attrs['subject'])} · {_label(ds.attrs['model'])} · {metric}"
        if plots["mask_nonsignificant"]:
            title += " (significant targets)"
        _save_brain_map(
            img, title, _MAP_LABELS[metric], plots, out_dir / f"{name}_{metric}", canvas
        )


def _save_brain_map(
    img: nib.Nifti1Image,
    title: str,
    label: str,
    plots: Mapping[str, Any],
    stem: Path,
    canvas: GlassBrainCanvas | None = None,
) -> list[Path]:
    """Draw one brain map (on ``canvas``'s figure when given) and save it.

    Without a canvas the figure is released on return: the next map is drawn without
    this one alive, so that the garbage collections nilearn runs while drawing it do
    not walk this figure's artists again.
    """
    if canvas is not None:
        fig = canvas.draw(img, title=title, label=label)
    else:
        fig = plot_brain_map(img, kind=plots["brain_map"], title=title, label=label)
    return save_figure(fig, stem, plots["formats"], dpi=plots["dpi"])


def summarize_scores(
    *,
    scores: list[Path],
    table: Path,
    plots_dir: Path,
    config: dict,
    provenance: dict,
    layer_order: Mapping[str, Sequence[str]] | None = None,
    opened: Mapping[str, xr.Dataset] | None = None,
) -> Path:
    """ROI summaries per subject and across subjects, with figures.

    Parameters
    ----------
    scores : list of Path
        Score stores written by :func:`evaluate_model` (any subjects × models).
    table : Path
        Tidy TSV to write, with the columns of
        :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`: one row per subject ×
        model × ROI × metric (:data:`~neuroflow.evaluation.summary.ENCODING_METRICS`)
        × statistic, ``analysis`` ``"encoding"`` (``"trial_encoding"`` for single-trial
        models, whose stores have ``design == "trials"``); per-subject rows
        (``statistic == "value"``) and ``subject == "group"`` rows with the
        across-subject ``mean``, ``sd`` and ``sem`` (``n_subjects`` gives n).
        ROI ``"all"`` summarises every target. A store with variants
        (``variant_r``, see :func:`evaluate_model`) adds the rows of each variant
        as a model ``<model>-<variant>`` (e.g. ``tribe-without-minilm``,
        ``tribe-seed-0``): its r and normalised r, the store's noise ceiling,
        ``frac_significant``, ``frac_significant_fwer`` and ``frac_exceeds_ceiling``
        NaN, and the feature spaces it predicts from (all but the left-out one for
        ``without-<space>``).
    plots_dir : Path
        Directory (replaced atomically) receiving, in each configured format,
        brain maps ``sub-<s>_model-<m>_fs-<f>[_layer-<l>]_{r,r_normalized}``
        (one set per store, none for its variants) and ROI bar charts
        ``roi_{mean_r,mean_r_normalized}`` (bars: subject mean, dots: subjects,
        dashes: noise ceiling; variants included). Empty when plots are off.
    config : dict
        The ``evaluation`` config section.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order: names the layer of a bare
        feature space whose store records none (see
        :func:`~neuroflow.evaluation.summary.space_names`).
    opened : dict of str to xarray.Dataset | None
        Stores of ``scores`` the caller has opened already, by path (as ``str``);
        the others are opened here.

    Returns
    -------
    table : Path
        The TSV. Beside it, ``table`` with suffix ``.zarr`` holds the wide
        across-subject summary with dims
        (roi, model), one variable per metric column (mean) plus ``<metric>_sd``,
        ``<metric>_sem`` and ``n_subjects``; coords ``model_name``,
        ``feature_space`` and ``layer`` on ``model``.
    """
    cfg = _with_defaults(config)
    if not scores:
        raise ValueError("`scores` must list at least one score store, got an empty list instead.")
    table, plots_dir = Path(table), Path(plots_dir)
    opened = opened or {}
    stores = [(Path(p), opened[str(p)] if str(p) in opened else open_dataset(p)) for p in scores]
    per_store = [_store_summary(path, ds, cfg["topk_percent"], layer_order) for path, ds in stores]
    per_subject = pd.concat(per_store, ignore_index=True)
    group = group_summary(per_subject)
    analyses = pd.Series(
        np.repeat([_analysis_of(ds) for _, ds in stores], [len(t) for t in per_store])
    )
    parts = []
    for analysis in (ENCODING_ANALYSIS, TRIAL_ENCODING_ANALYSIS):
        mine = per_subject[analyses.to_numpy() == analysis]
        if mine.empty:
            continue
        parts.append(long_rows(pd.concat([mine, group_summary(mine)], ignore_index=True), analysis))
    full = summary_table(parts)
    group_store = describe_variables(_group_dataset(group))
    write_dataset(group_store, table.with_suffix(".zarr"), provenance=provenance)
    plots = cfg["plots"]
    with atomic_directory(plots_dir) as tmp:
        if plots["enabled"]:
            _brain_maps(stores, plots, tmp)
            bars = _bar_rows(per_subject.assign(model=_model_labels(per_subject)))
            for metric in ("mean_r", "mean_r_normalized"):
                fig = plot_roi_bars(
                    bars,
                    metric=metric,
                    ceiling="noise_ceiling_r" if metric == "mean_r" else None,
                    title=f"{metric} per ROI",
                )
                save_figure(fig, tmp / f"roi_{metric}", plots["formats"], dpi=plots["dpi"])
    _write_table(full, table)
    return table

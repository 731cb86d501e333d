"""One summary of every analysis: encoding scores, decoding, RSA and TRF results.

:func:`summarize_all` is the entry point of the workflow's summary job. It
writes the encoding rows, store and figures with
:func:`neuroflow.evaluation.summary_stage.summarize_scores`, then adds the decoding, RSA,
EEG encoding and temporal response function (TRF) rows to the same tidy table (see
:func:`neuroflow.evaluation.summary.summary_table`) and their figures, and the training
curves of encoders trained by gradient descent (:mod:`neuroflow.evaluation.trf_summary`). Beside the
table, ``warnings.tsv`` lists the warnings about the dataset raised when the workflow
was planned and those kept in the stores behind the results (see
:mod:`neuroflow.stage_warnings`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import open_dataset
from neuroflow.evaluation.trf_summary import training_figures, trf_figures, trf_rows

__all__ = ["summarize_all"]


logger = logging.getLogger(__name__)


def _mean_over_subjects(da: xr.DataArray) -> np.ndarray:
    """Average over ``subject`` when present; shape of the remaining dims."""
    return np.asarray(da.mean("subject").values if "subject" in da.dims else da.values)


def _plotted_cluster_p(ds: xr.Dataset, name: str) -> np.ndarray | None:
    """Cluster p-values that go with the plotted (subject-mean) time course.

    The group test's (``group_<name>``) when there is one; a lone subject's own test;
    otherwise None: the smallest p over subjects would mark a time point that any one
    subject's test found, a family-wise error that grows with the number of subjects.
    Inconclusive tests are NaN and mark nothing.

    Returns
    -------
    p : ndarray | None
        Shape (time,) or (feature_space, time).
    """
    if f"group_{name}" in ds:
        return np.asarray(ds[f"group_{name}"].values, float)
    if name not in ds:
        return None
    da = ds[name]
    if "subject" in da.dims:
        if da.sizes["subject"] != 1:
            return None
        da = da.isel(subject=0)
    return np.asarray(da.values, float)


def _decoding_figures(ds: xr.Dataset, plots_dir: Path, alpha: float) -> list[Path]:
    """Time courses with significant clusters and the generalisation matrix."""
    from neuroflow.evaluation import analysis_plotting

    out: list[Path] = []
    times = np.asarray(ds["time"].values, float)
    if "feature_score" in ds:
        spaces = [str(s) for s in ds["feature_space"].values]
        score = _mean_over_subjects(ds["feature_score"])
        sig = None
        p = _plotted_cluster_p(ds, "feature_cluster_p")
        if p is not None:
            sig = {s: p[i] < alpha for i, s in enumerate(spaces)}
        out.append(
            analysis_plotting.plot_time_courses(
                times,
                {s: score[i] for i, s in enumerate(spaces)},
                plots_dir / "decoding_features_timecourse.png",
                significant=sig,
                chance=0.0,
                ylabel="r (decoded vs true feature PCs)",
            )
        )
    if "class_score" in ds:
        sig = None
        p = _plotted_cluster_p(ds, "class_cluster_p")
        if p is not None:
            sig = {"classification": p < alpha}
        out.append(
            analysis_plotting.plot_time_courses(
                times,
                {"classification": _mean_over_subjects(ds["class_score"])},
                plots_dir / "decoding_classification_timecourse.png",
                significant=sig,
                chance=0.5,
                ylabel="balanced accuracy",
            )
        )
    if "generalization" in ds:
        out.append(
            analysis_plotting.plot_generalization(
                times,
                _mean_over_subjects(ds["generalization"]),
                plots_dir / "decoding_generalization.png",
            )
        )
    return out


def _fmri_decoding_figures(ds: xr.Dataset, plots_dir: Path) -> list[Path]:
    """Identification rank accuracy per ROI and space; concept decoding per ROI."""
    from neuroflow.evaluation import analysis_plotting

    out: list[Path] = []
    rois = [str(r) for r in ds["roi"].values]
    if "identification" in ds and "decoder" in ds.dims:
        rank = ds["identification"].sel(metric="mean_rank")
        n_test = ds["n_test_stimuli"].where(ds["n_test_stimuli"] > 1)
        accuracy = (1 - (rank - 1) / (n_test - 1)).mean("subject", skipna=True)
        out.append(
            analysis_plotting.plot_fmri_identification(
                accuracy.transpose("decoder", "roi", "feature_space").values,
                rois,
                [str(s) for s in ds["feature_space"].values],
                [str(d) for d in ds["decoder"].values],
                plots_dir / "decoding_fmri_identification.png",
            )
        )
    if "concept_auc" in ds:
        out.append(
            analysis_plotting.plot_concept_decoding(
                ds["concept_mean_auc"].transpose("subject", "roi").values,
                ds["concept_auc"].mean("subject", skipna=True).transpose("roi", "concept").values,
                rois,
                [str(c) for c in ds["concept"].values],
                plots_dir / "decoding_fmri_concepts.png",
            )
        )
    return out


def _cross_subject_figure(ds: xr.Dataset, plots_dir: Path) -> Path:
    """Held-out balanced accuracy over time and of whole epochs, aligned vs unaligned."""
    from neuroflow.evaluation import analysis_plotting

    alignments = [str(a) for a in ds["alignment"].values]
    courses, epoch_scores, classifiers = {}, {}, []
    if "cross_subject_score" in ds:
        da = ds["cross_subject_score"].transpose("alignment", "held_out", "time")
        courses = {a: np.asarray(v, float) for a, v in zip(alignments, da.values, strict=True)}
    if "cross_subject_epoch_score" in ds:
        da = ds["cross_subject_epoch_score"].transpose("alignment", "held_out", "classifier")
        epoch_scores = {a: np.asarray(v, float) for a, v in zip(alignments, da.values, strict=True)}
        classifiers = [str(c) for c in ds["classifier"].values]
    return analysis_plotting.plot_cross_subject(
        np.asarray(ds["time"].values, float),
        courses,
        epoch_scores,
        plots_dir / "decoding_cross_subject.png",
        classifiers=classifiers,
        chance=float(ds["cross_subject_chance"].mean()),
        unit=str(ds.attrs.get("held_out_unit", "subject")),
    )


def _rsa_figures(ds: xr.Dataset, name: str, plots_dir: Path) -> list[Path]:
    """Cross-temporal RSA maps (EEG: with bootstrap intervals; model time x brain time for
    frame-level layers), layer x ROI similarity and ROI x ROI alignment patterns."""
    from neuroflow.evaluation import analysis_plotting

    out: list[Path] = []
    if "cross_temporal" in ds:
        da = ds["cross_temporal"]
        # EEG stores: the whole montage (channel group "all") and the first comparison,
        # whose bootstrap intervals are drawn around the time courses
        group = {"channel_group": "all"} if "channel_group" in da.dims else {}
        da = da.sel(group)
        if "comparison" in da.dims:
            da = da.isel(comparison=0)
        sim = _mean_over_subjects(da)
        layers = [str(v) for v in ds["layer"].values]
        times = np.asarray(ds["time"].values, float)
        bounds = {"bound": ["lower", "upper"], **group}
        out.append(
            analysis_plotting.plot_cross_temporal(
                times,
                sim,
                layers,
                plots_dir / f"{name}_cross_temporal.png",
                ci=ds["model_similarity_ci"].sel(bounds).values
                if "model_similarity_ci" in ds
                else None,
                peak_times=ds["peak_time"].sel(group).values if "peak_time" in ds else None,
                peak_ci=ds["peak_similarity_ci"].sel(bounds).values
                if "peak_similarity_ci" in ds
                else None,
            )
        )
    if "model_time_similarity" in ds:
        # every channel group (rows) x frame-level layer; the time line only where the
        # peak is significant (lag and slope are NaN otherwise)
        maps = ds["model_time_similarity"].transpose(
            "subject", "channel_group", "frame_layer", "model_time", "time"
        )
        peaks = np.stack(
            [ds["model_time_peak_model_time"].values, ds["model_time_peak_brain_time"].values], -1
        )
        out.append(
            analysis_plotting.plot_model_time(
                _mean_over_subjects(maps),
                ds["model_time"].values,
                ds["time"].values,
                [str(v) for v in ds["frame_layer"].values],
                plots_dir / f"{name}_model_time.png",
                lag=ds["model_time_lag"].values,
                slope=ds["model_time_slope"].values,
                groups=[str(v) for v in ds["channel_group"].values],
                p_values=ds["model_time_peak_p"].values if "model_time_peak_p" in ds else None,
                peaks=peaks,
            )
        )
    if "model_similarity_ci" in ds and "roi" in ds.dims:
        comparison = ds.attrs.get("inference_comparison", str(ds["comparison"].values[0]))
        sim = ds["model_similarity"].sel(comparison=comparison).mean("subject")
        ceiling = None
        if "noise_ceiling" in ds:
            ceiling = ds["noise_ceiling"].sel(comparison=comparison, bound=["lower", "upper"])
        out.append(
            analysis_plotting.plot_layer_similarity(
                sim.transpose("layer", "roi").values,
                ds["model_similarity_ci"].sel(bound=["lower", "upper"]).values,
                [str(v) for v in ds["layer"].values],
                [str(v) for v in ds["roi"].values],
                plots_dir / f"{name}_layer_similarity.png",
                ceiling=None if ceiling is None else ceiling.transpose("bound", "roi").values,
                ylabel=f"RDM similarity ({comparison})",
            )
        )
    if "roi_alignment" in ds:
        rois = [str(v) for v in ds["roi_a"].values]
        out.append(
            analysis_plotting.plot_alignment(
                _mean_over_subjects(ds["roi_alignment"]),
                rois,
                plots_dir / f"{name}_roi_alignment.png",
                title="brain ROI x ROI alignment",
            )
        )
    return out


def _table_dataset(table: pd.DataFrame) -> xr.Dataset:
    """A tidy table as a dataset with one ``row`` dim (numbers as float, the rest as text)."""
    data = {}
    for column in table.columns:
        values = table[column]
        numeric = pd.to_numeric(values, errors="coerce")
        if numeric.notna().sum() == values.notna().sum():
            data[column] = ("row", numeric.to_numpy(dtype=float))
        else:
            data[column] = ("row", values.fillna("n/a").astype(str).to_numpy(dtype=object))
    return xr.Dataset(data, coords={"row": np.arange(len(table))})


def _write_warnings(
    stores: Sequence[str | os.PathLike],
    plan_warnings: Sequence[str],
    path: Path,
    record: Mapping[str, Any],
) -> None:
    """Write the warnings of the plan and of the stores behind the summary, and log them."""
    from neuroflow.stage_warnings import warnings_table

    found = warnings_table(stores, plan_warnings)
    for stage, store, message in found.itertuples(index=False):
        logger.warning("%s (%s): %s", stage, store, message)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{record.get('version', 'tmp')}.partial")
    found.to_csv(tmp, sep="\t", index=False)
    os.replace(tmp, path)


def _write_layer_sweeps(
    scores: Sequence[str | os.PathLike],
    summary: pd.DataFrame,
    sweeps: Sequence[Mapping[str, Any]],
    layer_order: Mapping[str, Sequence[str]],
    path: Path,
    plots_dir: Path | None,
    formats: Sequence[str] = ("png",),
    alignment_path: Path | None = None,
    opened: Mapping[str, xr.Dataset] | None = None,
) -> None:
    """Write the layer × ROI table of every sweep (atomically) and their depth plots.

    ``alignment_path``: where to write the encoding-vs-RSA table
    (:func:`~neuroflow.evaluation.layer_agreement.metric_agreement`), with one figure per
    encoding sweep it has rows for (``layer_sweep_<sweep>_alignment``); None writes none.
    ``opened``: stores of ``scores`` opened already, by path (the others are opened).
    """
    from neuroflow.evaluation.layer_agreement import metric_agreement, plot_metric_agreement
    from neuroflow.evaluation.layer_sweep import (
        LAYER_SWEEP_COLUMNS,
        analysis_sweep_table,
        encoding_sweep_table,
        plot_layer_sweep,
        stage_of,
    )
    from neuroflow.evaluation.plotting import save_figure

    # stores of other models are skipped by the table (opening a store reads no arrays)
    opened = opened or {}
    stores = [
        (
            stage_of(score),
            str(score),
            opened[str(score)] if str(score) in opened else open_dataset(score),
        )
        for score in scores
    ]
    parts = [encoding_sweep_table(stores, sweeps), analysis_sweep_table(summary, layer_order)]
    parts = [part for part in parts if not part.empty]
    table = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=list(LAYER_SWEEP_COLUMNS))
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    table.to_csv(tmp, sep="\t", index=False, na_rep="n/a", float_format="%.6g")
    os.replace(tmp, path)
    agreement = metric_agreement(table)
    if alignment_path is not None:
        tmp = alignment_path.with_name(f".{alignment_path.name}.partial")
        agreement.to_csv(tmp, sep="\t", index=False, na_rep="n/a", float_format="%.6g")
        os.replace(tmp, alignment_path)
    if plots_dir is None or table.empty:
        return
    for (stage, sweep, metric), _ in table.groupby(["stage", "sweep", "metric"], sort=True):
        suffix = "" if stage == "evaluation" else f"_{stage}_{metric}"
        fig = plot_layer_sweep(table, stage=stage, sweep=sweep, metric=metric)
        save_figure(fig, plots_dir / f"layer_sweep_{sweep}{suffix}", formats)
    if alignment_path is not None:
        for sweep in agreement["sweep"].unique():
            fig = plot_metric_agreement(table, sweep=sweep)
            save_figure(fig, plots_dir / f"layer_sweep_{sweep}_alignment", formats)


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a partial file never takes its name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def summarize_all(
    *,
    scores: Sequence[str | os.PathLike],
    table: str | os.PathLike,
    plots_dir: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    decoding: Sequence[str | os.PathLike] = (),
    rsa: Sequence[str | os.PathLike] = (),
    trf: Sequence[str | os.PathLike] | None = (),
    eeg_scores: Sequence[str | os.PathLike] = (),
    transformer_training: Sequence[str | os.PathLike] = (),
    notes: Sequence[str] = (),
    warnings_tsv: str | os.PathLike | None = None,
    plan_warnings: Sequence[str] = (),
    layer_sweeps: Sequence[Mapping[str, Any]] = (),
    layer_order: Mapping[str, Sequence[str]] | None = None,
    layer_sweep_tsv: str | os.PathLike | None = None,
    alignment_tsv: str | os.PathLike | None = None,
    run_config: Mapping[str, Any] | None = None,
    run_config_yaml: str | os.PathLike | None = None,
    methods: str | None = None,
    methods_rst: str | os.PathLike | None = None,
) -> Path:
    """Summarise encoding scores, decoding, RSA and TRFs into one table and figures.

    Parameters
    ----------
    scores : list of path-like
        Per-target score stores of the encoding models (may be empty: an EEG-only
        dataset has none).
    table : path-like
        Tidy TSV (columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`): one
        row per analysis × subject × model × layer × ROI × metric × statistic. The
        encoding rows (``encoding``, ``trial_encoding``) first, then decoding, RSA,
        EEG encoding and TRF rows (see :mod:`neuroflow.evaluation.summary` for the
        naming of models, extractors, feature spaces and layers).
    plots_dir : path-like
        Folder of the figures (PNG).
    config : dict
        The ``evaluation`` section.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    decoding, rsa : list of path-like
        Stores of the decoding (EEG and fMRI) and RSA stages (may be empty).
    trf : list of path-like | None
        Stores of the EEG TRF stage (may be empty or None); one power figure per
        model (``trf_<model>_power.png``).
    eeg_scores : list of path-like
        Score stores of the EEG encoding models (may be empty): rows with
        ``analysis = "eeg_encoding"`` and one time-course figure per model
        (``eeg_encoding_<model>_r.png``; see :mod:`neuroflow.evaluation.eeg_summary`).
    transformer_training : list of path-like
        Training stores of the transformer encoding models (may be empty; see
        :func:`neuroflow.encoding.transformer_stage.training_dataset`): one figure per
        model (``encoding_<model>_training``, in the configured formats) with the
        training loss and the validation r per epoch and seed (see
        :func:`~neuroflow.evaluation.trf_summary.training_figures`). They add no rows:
        the models' scores come with ``scores``.
    notes : list of str
        Analyses the workflow left out, with their reasons; logged and kept in the
        summary store's provenance (``notes``).
    warnings_tsv : path-like | None
        Table of warnings to write (columns ``stage``, ``store``, ``message``; see
        :func:`neuroflow.stage_warnings.warnings_table`): ``plan_warnings`` first, then
        the warnings kept in the input stores and in every store upstream of them
        (followed through their provenance ``inputs``). None writes no table.
    plan_warnings : list of str
        Warnings about the dataset raised when the workflow was planned.
    layer_sweeps : list of dict
        Layer models of the layer sweeps (see
        :meth:`neuroflow.workflow.plan.WorkflowPlan.layer_sweeps`).
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order: a bare feature space of a
        store is its extractor's last layer, and RSA and decoding rows of an extractor
        with several layers form a sweep.
    layer_sweep_tsv : path-like | None
        Layer × ROI table of the sweeps to write (see
        :mod:`neuroflow.evaluation.layer_sweep`; only the header when there is no
        sweep), with one figure per sweep, stage and metric
        (``layer_sweep_<sweep>[_<stage>_<metric>].png``). None writes no table.
    alignment_tsv : path-like | None
        Encoding r and RSA side by side per encoding sweep and ROI (see
        :func:`neuroflow.evaluation.layer_agreement.metric_agreement`; only the header when
        no swept extractor also has fMRI RSA), with one figure per such sweep
        (``layer_sweep_<sweep>_alignment.png``). Needs ``layer_sweep_tsv``; None writes
        no table.
    run_config : dict | None
        The validated config of the whole run, written to ``run_config_yaml``.
    run_config_yaml : path-like | None
        Where to write ``run_config`` (YAML); None writes nothing.
    methods : str | None
        Methods paragraph of the run (see :func:`neuroflow.workflow.methods.methods_rst`),
        written to ``methods_rst``.
    methods_rst : path-like | None
        Where to write ``methods`` (reStructuredText); None writes nothing.

    Returns
    -------
    table : Path
        The written table. Beside it, ``scores.zarr`` holds the wide across-subject
        encoding summary (roi, model; one variable per metric) when there are fMRI
        encoding scores, else the tidy table itself (one ``row`` per line of the TSV).
    """
    from neuroflow.artifacts import atomic_directory, write_dataset
    from neuroflow.evaluation.analysis_summary import (
        cross_subject_rows,
        decoding_rows,
        fmri_decoding_rows,
    )
    from neuroflow.evaluation.eeg_summary import eeg_encoding_figures, eeg_encoding_rows
    from neuroflow.evaluation.rsa_summary import rsa_eeg_rows, rsa_lp_rows, rsa_rows
    from neuroflow.evaluation.stage import _with_defaults
    from neuroflow.evaluation.summary import summary_table
    from neuroflow.evaluation.summary_stage import _write_table, summarize_scores

    table = Path(table)
    plots_dir = Path(plots_dir)
    layer_order = dict(layer_order or {})
    record = {**dict(provenance), "notes": list(notes)}
    for note in notes:
        logger.info("Left out: %s", note)
    rows: list[pd.DataFrame] = []
    # each score store is opened once, for its rows, its maps and the layer sweeps
    opened = {str(path): open_dataset(path) for path in scores}
    if scores:
        summarize_scores(
            scores=list(scores),
            table=table,
            plots_dir=plots_dir,
            config=config,
            provenance=record,
            layer_order=layer_order,
            opened=opened,
        )
        rows.append(
            pd.read_csv(
                table,
                sep="\t",
                na_values=["n/a"],
                keep_default_na=False,
                dtype={"subject": str},
            )
        )
    else:
        with atomic_directory(plots_dir):
            pass
    plots_enabled = bool((config.get("plots") or {}).get("enabled", True))
    alpha = float((config.get("fdr") or {}).get("alpha", 0.05))
    for path in decoding:
        ds = open_dataset(path)
        if "roi" in ds.dims:  # fMRI decoding (per ROI), no time courses
            rows.append(fmri_decoding_rows(ds, layer_order))
            if plots_enabled:
                _fmri_decoding_figures(ds, plots_dir)
            continue
        if "held_out" in ds.dims:  # EEG decoding across subjects (or sessions)
            rows.append(cross_subject_rows(ds))
            if plots_enabled:
                _cross_subject_figure(ds, plots_dir)
            continue
        rows.append(decoding_rows(ds, layer_order))
        if plots_enabled:
            _decoding_figures(ds, plots_dir, alpha)
    for path in rsa:
        ds = open_dataset(path)
        rsa_of = rsa_rows if "roi" in ds.dims else rsa_eeg_rows
        rows.append(rsa_of(ds, layer_order))
        if "roi" in ds.dims:
            rows.append(rsa_lp_rows(ds, layer_order))
        if plots_enabled:
            _rsa_figures(ds, Path(path).stem, plots_dir)
    eeg_scores = list(eeg_scores)
    if eeg_scores:
        stores = [open_dataset(path) for path in eeg_scores]
        topk = float(_with_defaults(config)["topk_percent"])
        rows.append(eeg_encoding_rows(stores, eeg_scores, topk, layer_order))
        if plots_enabled:
            eeg_encoding_figures(stores, plots_dir, eeg_scores)
    transformer_training = list(transformer_training)
    if transformer_training and plots_enabled:
        plots = _with_defaults(config)["plots"]
        training_figures(
            transformer_training, plots_dir, formats=plots["formats"], dpi=int(plots["dpi"])
        )
    trf = list(trf or ())
    if trf:
        stores = [open_dataset(path) for path in trf]
        rows.append(trf_rows(stores, trf, layer_order))
        if plots_enabled:
            trf_figures(stores, plots_dir)
    merged = summary_table(rows)
    _write_table(merged, table, float_format=None)
    if not scores:
        write_dataset(_table_dataset(merged), table.with_suffix(".zarr"), provenance=record)
    if layer_sweep_tsv is not None:
        formats = list((config.get("plots") or {}).get("formats") or ["png"])
        _write_layer_sweeps(
            scores,
            merged,
            layer_sweeps,
            layer_order or {},
            Path(layer_sweep_tsv),
            plots_dir if plots_enabled else None,
            formats,
            None if alignment_tsv is None else Path(alignment_tsv),
            opened,
        )
    if warnings_tsv is not None:
        _write_warnings(
            [*scores, *eeg_scores, *decoding, *rsa, *trf, *transformer_training],
            plan_warnings,
            Path(warnings_tsv),
            record,
        )
    if run_config_yaml is not None:
        import yaml

        _write_text(Path(run_config_yaml), yaml.safe_dump(dict(run_config or {}), sort_keys=False))
    if methods_rst is not None:
        _write_text(Path(methods_rst), methods or "")
    logger.info(
        "Summary of %d score stores, %d EEG encoding, %d decoding, %d RSA and %d TRF stores "
        "written to %s.",
        len(scores),
        len(eeg_scores),
        len(decoding),
        len(rsa),
        len(trf),
        table,
    )
    return table

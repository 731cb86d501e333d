"""One summary of every analysis: encoding scores, decoding and RSA results.

:func:`summarize_all` is the entry point of the workflow's summary job. It
writes the encoding table, store and figures with
:func:`neuroflow.evaluation.stage.summarize_scores`, then appends the decoding
and RSA rows to the same tidy table and adds their figures.
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

__all__ = ["summarize_all"]

logger = logging.getLogger(__name__)


def _mean_over_subjects(da: xr.DataArray) -> np.ndarray:
    """Average over ``subject`` when present; shape of the remaining dims."""
    return np.asarray(da.mean("subject").values if "subject" in da.dims else da.values)


def _decoding_figures(ds: xr.Dataset, plots_dir: Path, alpha: float) -> list[Path]:
    """Time courses with significant clusters and the generalisation matrix."""
    from neuroflow.decoding import plotting

    out: list[Path] = []
    times = np.asarray(ds["time"].values, float)
    if "feature_score" in ds:
        spaces = [str(s) for s in ds["feature_space"].values]
        score = _mean_over_subjects(ds["feature_score"])
        sig = None
        if "feature_cluster_p" in ds:
            p = np.asarray(ds["feature_cluster_p"].values)
            p = p.min(axis=0) if "subject" in ds["feature_cluster_p"].dims else p
            sig = {s: p[i] < alpha for i, s in enumerate(spaces)}
        out.append(
            plotting.plot_time_courses(
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
        if "class_cluster_p" in ds:
            p = np.asarray(ds["class_cluster_p"].values)
            sig = {"classification": (p.min(axis=0) if p.ndim > 1 else p) < alpha}
        out.append(
            plotting.plot_time_courses(
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
            plotting.plot_generalization(
                times,
                _mean_over_subjects(ds["generalization"]),
                plots_dir / "decoding_generalization.png",
            )
        )
    return out


def _rsa_figures(ds: xr.Dataset, name: str, plots_dir: Path) -> list[Path]:
    """Cross-temporal RSA maps and ROI x ROI alignment patterns."""
    from neuroflow.decoding import plotting

    out: list[Path] = []
    if "cross_temporal" in ds:
        da = ds["cross_temporal"]
        if "comparison" in da.dims:
            da = da.isel(comparison=0)
        sim = _mean_over_subjects(da)
        layers = [str(v) for v in ds["layer"].values]
        times = np.asarray(ds["time"].values, float)
        out.append(
            plotting.plot_cross_temporal(
                times, sim, layers, plots_dir / f"{name}_cross_temporal.png"
            )
        )
    if "roi_alignment" in ds:
        rois = [str(v) for v in ds["roi_a"].values]
        out.append(
            plotting.plot_alignment(
                _mean_over_subjects(ds["roi_alignment"]),
                rois,
                plots_dir / f"{name}_roi_alignment.png",
                title="brain ROI x ROI alignment",
            )
        )
    return out


def _rsa_eeg_rows(ds: xr.Dataset) -> pd.DataFrame:
    """Peak of each layer's cross-temporal RSA time course, per subject.

    Returns
    -------
    table : pandas.DataFrame
        Rows with ``analysis = "rsa_eeg"``, ``metric = "<comparison>_peak"`` (the
        similarity at the peak) and ``"<comparison>_peak_latency"`` (s).
    """
    from neuroflow.decoding.summary import DECODING_COLUMNS

    da = ds["cross_temporal"]
    times = np.asarray(ds["time"].values, float)
    rows = []
    for sub in ds["subject"].values:
        for comp in ds["comparison"].values:
            for layer in ds["layer"].values:
                course = np.asarray(da.sel(subject=sub, comparison=comp, layer=layer).values)
                if not np.isfinite(course).any():
                    continue
                peak = int(np.nanargmax(course))
                base = dict.fromkeys(DECODING_COLUMNS, np.nan)
                base.update(
                    subject=str(sub),
                    model=str(layer),
                    feature_space=str(layer),
                    layer=str(layer),
                    roi="",
                    statistic="value",
                    n_subjects=1,
                    analysis="rsa_eeg",
                )
                rows.append({**base, "metric": f"{comp}_peak", "value": float(course[peak])})
                rows.append({**base, "metric": f"{comp}_peak_latency", "value": times[peak]})
    return pd.DataFrame(rows, columns=list(DECODING_COLUMNS))


def summarize_all(
    *,
    scores: Sequence[str | os.PathLike],
    table: str | os.PathLike,
    plots_dir: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    decoding: Sequence[str | os.PathLike] = (),
    rsa: Sequence[str | os.PathLike] = (),
) -> Path:
    """Summarise encoding scores, decoding and RSA into one table and figures.

    Parameters
    ----------
    scores : list of path-like
        Per-target score stores of the encoding models.
    table : path-like
        Tidy TSV: one row per subject x model x feature space x layer x ROI
        (encoding), then the decoding and RSA rows (``analysis``, ``metric``,
        ``value``, ``chance``, ``p_value`` columns).
    plots_dir : path-like
        Folder of the figures (PNG).
    config : dict
        The ``evaluation`` section.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.
    decoding, rsa : list of path-like
        Stores of the decoding and RSA stages (may be empty).

    Returns
    -------
    table : Path
        The written table.
    """
    from neuroflow.decoding.summary import append_rows, decoding_rows, rsa_rows
    from neuroflow.evaluation.stage import summarize_scores

    table = Path(table)
    plots_dir = Path(plots_dir)
    summarize_scores(
        scores=list(scores), table=table, plots_dir=plots_dir, config=config, provenance=provenance
    )
    plots_enabled = bool((config.get("plots") or {}).get("enabled", True))
    alpha = float((config.get("fdr") or {}).get("alpha", 0.05))
    rows: list[pd.DataFrame] = []
    for path in decoding:
        ds = open_dataset(path)
        rows.append(decoding_rows(ds))
        if plots_enabled:
            _decoding_figures(ds, plots_dir, alpha)
    for path in rsa:
        ds = open_dataset(path)
        rows.append(rsa_rows(ds) if "roi" in ds.dims else _rsa_eeg_rows(ds))
        if plots_enabled:
            _rsa_figures(ds, Path(path).stem, plots_dir)
    if rows:
        append_rows(pd.concat(rows, ignore_index=True), table)
        merged = pd.read_csv(table, sep="\t", na_values=["n/a"], keep_default_na=False)
        merged["analysis"] = merged["analysis"].fillna("encoding")
        merged.to_csv(table, sep="\t", index=False, na_rep="n/a")
    logger.info(
        "Summary of %d score stores, %d decoding and %d RSA stores written to %s.",
        len(scores),
        len(decoding),
        len(rsa),
        table,
    )
    return table

"""Score against a stimulus transform's value: the summary of transform sweeps.

Each value of a transform sweep (:mod:`neuroflow.workflow.transform_sweeps`) is its own
extractor, so every analysis scores it as its own model: the summary table
(``scores.tsv``) has its rows under the variant's ``extractor`` name.
:func:`transform_sweep_table` keeps those rows with the sweep, transform and value they
stand for; :func:`plot_transform_sweeps` draws one headline score per analysis against
the value, one line per ROI (or channel set).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

__all__ = [
    "HEADLINE_METRICS",
    "plot_transform_sweeps",
    "transform_sweep_table",
    "write_transform_sweeps",
]

#: The score drawn for each analysis (higher is better for all of them).
HEADLINE_METRICS: dict[str, str] = {
    "encoding": "mean_r",
    "trial_encoding": "mean_r",
    "eeg_encoding": "peak_r",
    "rsa": "spearman",
    "rsa_eeg": "spearman_peak",
    "identification_ridge": "top1",
    "identification_contrastive": "top1",
    "identification_fmri": "top1",
    "feature_time_course": "peak_r",
}


def transform_sweep_table(
    scores: pd.DataFrame, variants: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """The summary rows of every variant of every transform sweep.

    Parameters
    ----------
    scores : pandas.DataFrame
        The summary table (``scores.tsv``: columns ``analysis``, ``subject``, ``model``,
        ``extractor``, ..., ``metric``, ``statistic``, ``value``).
    variants : list of dict
        ``sweep``, ``extractor`` (the variant's name), ``transform`` and ``value`` of
        each variant (:meth:`TransformVariant.as_dict
        <neuroflow.workflow.transform_sweeps.TransformVariant.as_dict>`).

    Returns
    -------
    table : pandas.DataFrame
        Columns ``sweep``, ``transform``, ``transform_value`` then the summary's
        columns, for the rows whose ``extractor`` is a variant; sorted by sweep,
        analysis, metric, ROI and value.
    """
    if "extractor" not in scores.columns:
        raise ValueError(
            f"scores must be the summary table with an `extractor` column, got columns "
            f"{list(scores.columns)} instead."
        )
    lookup = pd.DataFrame(
        [
            {
                "extractor": str(v["extractor"]),
                "sweep": str(v["sweep"]),
                "transform": str(v["transform"]),
                "transform_value": float(v["value"]),
            }
            for v in variants
        ],
        columns=["extractor", "sweep", "transform", "transform_value"],
    )
    rows = scores.merge(lookup, on="extractor", how="inner")
    front = ["sweep", "transform", "transform_value"]
    rows = rows[front + list(scores.columns)]
    keys = [c for c in ("sweep", "analysis", "metric", "roi", "transform_value") if c in rows]
    return rows.sort_values(keys, kind="stable").reset_index(drop=True)


def _headline(table: pd.DataFrame) -> pd.DataFrame:
    """One score per sweep, analysis, ROI and value: the group mean, else the subject's."""
    wanted = table[table["metric"] == table["analysis"].map(HEADLINE_METRICS)]
    group = wanted[wanted["statistic"] == "mean"]
    single = wanted[wanted["statistic"] == "value"]
    # analyses with a group row use it; the others (one subject) their only value
    have_group = set(zip(group["sweep"], group["analysis"], strict=True))
    pairs = pd.Series(
        list(zip(single["sweep"], single["analysis"], strict=True)), index=single.index
    )
    single = single[~pairs.isin(have_group)]
    both = pd.concat([group, single])
    both = both.assign(value=pd.to_numeric(both["value"], errors="coerce"))
    keys = ["sweep", "transform", "analysis", "metric", "roi", "transform_value"]
    return both.groupby(keys, as_index=False, sort=True)["value"].mean()


def plot_transform_sweeps(table: pd.DataFrame) -> Figure:
    """Each analysis' headline score against the swept transform's value.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`transform_sweep_table`.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One panel per sweep and analysis (:data:`HEADLINE_METRICS`), one line per ROI
        or channel set; the group mean where the summary has one.
    """
    from neuroflow.figures import legend_outside, new_figure

    points = _headline(table)
    panels = list(dict.fromkeys(zip(points["sweep"], points["analysis"], strict=True)))
    if not panels:
        raise ValueError("table must hold headline scores of at least one analysis, got none.")
    n_col = min(3, len(panels))
    n_row = -(-len(panels) // n_col)
    fig = new_figure((3.4 * n_col, 2.8 * n_row))
    for k, (sweep, analysis) in enumerate(panels):
        ax = fig.add_subplot(n_row, n_col, k + 1)
        part = points[(points["sweep"] == sweep) & (points["analysis"] == analysis)]
        for roi, line in part.groupby("roi", sort=True):
            line = line.sort_values("transform_value")
            ax.plot(line["transform_value"], line["value"], "-o", ms=3, label=str(roi))
        metric = str(part["metric"].iloc[0])
        ax.set_title(f"{sweep}: {analysis}", fontsize="small")
        ax.set_xlabel(str(part["transform"].iloc[0]).replace("_", " "))
        ax.set_ylabel(metric.replace("_", " "), fontsize="small")
        legend_outside(ax, fontsize="x-small")
    fig.tight_layout()
    return fig


def write_transform_sweeps(
    *,
    scores_tsv: str | os.PathLike,
    variants: Sequence[Mapping[str, Any]],
    table: str | os.PathLike,
    plot: str | os.PathLike,
    dpi: int = 100,
) -> pd.DataFrame:
    """Write the transform-sweep table (TSV) and figure (PNG) from ``scores.tsv``.

    Parameters
    ----------
    scores_tsv : path-like
        The summary table.
    variants : list of dict
        See :func:`transform_sweep_table`.
    table, plot : path-like
        Where the TSV and the PNG go (written atomically).
    dpi : int
        Resolution of the figure.

    Returns
    -------
    table : pandas.DataFrame
    """
    from neuroflow.artifacts import atomic_file

    scores = pd.read_csv(
        scores_tsv, sep="\t", na_values="n/a", keep_default_na=False, dtype={"subject": str}
    )
    out = transform_sweep_table(scores, variants)
    if out.empty:
        raise ValueError(
            f"{scores_tsv} must have rows for the transform-sweep variants "
            f"{[v['extractor'] for v in variants]}, got none instead."
        )
    with atomic_file(table) as tmp:
        out.to_csv(tmp, sep="\t", index=False, na_rep="n/a", float_format="%.6g")
    fig = plot_transform_sweeps(out)
    with atomic_file(plot) as tmp:
        fig.savefig(tmp, dpi=dpi, format="png")
    return out

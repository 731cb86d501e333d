"""Figures of the geometry stage: each metric against layer depth, beside brain scores."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

__all__ = ["PLOTTED_METRICS", "plot_geometry"]


#: Metrics drawn by :func:`plot_geometry`, in panel order.
PLOTTED_METRICS = (
    "participation_ratio",
    "power_law_alpha",
    "manifold_dimension",
    "manifold_radius",
    "fisher_ratio",
    "linear_separability",
)


def plot_geometry(table: pd.DataFrame, scores: pd.DataFrame | None = None) -> Figure:
    """Each metric against layer depth, one line per feature space, beside brain scores.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`geometry_table`.
    scores : pandas.DataFrame | None
        Scores of the same layers from other stages (e.g. encoding r, RSA
        similarity), columns ``feature_space``, ``layer`` (name), ``analysis`` (panel
        title, e.g. ``"encoding r"``) and ``score``; each analysis gets a panel, its
        points placed at the layer's depth in ``table``. Layers ``table`` lacks are
        left out.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One panel per metric present in ``table`` (:data:`PLOTTED_METRICS`) and per
        analysis of ``scores``.
    """
    from neuroflow.figures import legend_outside
    from neuroflow.figures import new_figure as _new_figure

    metrics = [m for m in PLOTTED_METRICS if m in set(table["metric"])]
    analyses: list[str] = []
    if scores is not None:
        missing = {"feature_space", "layer", "analysis", "score"} - set(scores.columns)
        if missing:
            raise ValueError(
                f"scores must have columns feature_space, layer, analysis and score, got "
                f"{sorted(scores.columns)} instead (missing {sorted(missing)})."
            )
        analyses = list(dict.fromkeys(scores["analysis"].astype(str)))
    panels = metrics + analyses
    if not panels:
        raise ValueError("table must hold at least one plotted metric, got none.")
    n_col = min(3, len(panels))
    n_row = -(-len(panels) // n_col)
    fig = _new_figure((3.4 * n_col, 2.8 * n_row))
    depth = table.drop_duplicates(["feature_space", "layer"])[["feature_space", "layer", "depth"]]
    for k, panel in enumerate(panels):
        ax = fig.add_subplot(n_row, n_col, k + 1)
        if panel in metrics:
            rows = table[table["metric"] == panel]
            ylabel = str(rows["units"].iloc[0])
        else:
            part = scores[scores["analysis"].astype(str) == panel]
            rows = part.merge(depth, on=["feature_space", "layer"]).rename(
                columns={"score": "value"}
            )
            ylabel = "score"
        for space, part in rows.groupby("feature_space", sort=False):
            part = part.sort_values("depth")
            ax.plot(part["depth"], part["value"], "-o", ms=3, label=str(space))
        ax.set_title(panel.replace("_", " "), fontsize="small")
        ax.set_xlabel("relative layer depth")
        ax.set_ylabel(ylabel, fontsize="small")
        ax.set_xlim(-0.05, 1.05)
    # one legend of every feature space, right of the first row
    named: dict[str, Any] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            named.setdefault(label, handle)
    legend_outside(
        fig.axes[n_col - 1], handles=list(named.values()), labels=list(named), fontsize="x-small"
    )
    fig.tight_layout()
    return fig

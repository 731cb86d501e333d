"""Whether encoding and RSA pick the same layers: per sweep, ROI and pair of metrics,
the rank correlation of their layer profiles and whether their best layers agree
(:func:`metric_agreement`, columns :data:`ALIGNMENT_COLUMNS`), and its figure.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import spearmanr

from neuroflow.evaluation.layer_sweep import (
    _ENCODING_STAGES,
    _RSA_STAGE,
    LAYER_SWEEP_COLUMNS,
    SELECTED_LAYER,
)
from neuroflow.figures import new_figure
from neuroflow.rois import ALL_ROI, GROUP_SUBJECT

__all__ = ["ALIGNMENT_COLUMNS", "metric_agreement", "plot_metric_agreement"]


#: Columns of the encoding-vs-RSA table (:func:`metric_agreement`).
ALIGNMENT_COLUMNS = (
    "sweep",
    "extractor",
    "encoding_stage",
    "rsa_metric",
    "roi",
    "n_layers",
    "spearman_rho",
    "best_layer_encoding",
    "best_layer_rsa",
    "agree",
)


#: Fewest layers for a rank correlation (two points always give +-1).
_MIN_RHO_LAYERS = 3


def _group_layers(table: pd.DataFrame) -> pd.DataFrame:
    """The group's per-layer rows (no :data:`SELECTED_LAYER` rows), scores as floats."""
    needed = {"stage", "sweep", "extractor", "layer", "position", "subject", "roi", "metric"}
    missing = sorted((needed | {"score", "selection_score"}) - set(table.columns))
    if missing:
        raise ValueError(
            f"`table` must be a layer-sweep table (columns {list(LAYER_SWEEP_COLUMNS)}), but "
            f"it lacks {missing}."
        )
    rows = table[
        (table["subject"].astype(str) == GROUP_SUBJECT)
        & (table["layer"].astype(str) != SELECTED_LAYER)
    ].copy()
    for column in ("position", "score", "selection_score"):
        rows[column] = pd.to_numeric(rows[column], errors="coerce").astype(float)
    for column in ("stage", "sweep", "extractor", "layer", "metric"):
        rows[column] = rows[column].astype(str)
    rows["roi"] = rows["roi"].fillna("").astype(str)
    return rows


def _shared_layers(table: pd.DataFrame) -> Iterator[tuple[dict[str, str], pd.DataFrame]]:
    """Per encoding sweep × stage, RSA metric and ROI: the layers scored by both.

    Yields ``(key, layers)``: ``key`` the sweep, extractor, encoding stage, RSA metric and
    ROI; ``layers`` columns ``layer``, ``position``, ``encoding`` (group mean test r),
    ``selection_score`` (group mean training score) and ``rsa`` (group mean RDM
    similarity), one row per layer where both scores are finite, input side first.
    """
    group = _group_layers(table)
    encoding = group[group["stage"].isin(_ENCODING_STAGES)]
    rsa = group[group["stage"] == _RSA_STAGE]
    if encoding.empty or rsa.empty:
        return
    by = ["sweep", "extractor", "stage"]
    for (sweep, extractor, stage), enc in encoding.groupby(by, sort=True):
        for metric, sim in rsa[rsa["extractor"] == extractor].groupby("metric", sort=True):
            for roi in sorted(set(enc["roi"]) & set(sim["roi"])):
                left = enc.loc[enc["roi"] == roi, ["layer", "position", "score", "selection_score"]]
                right = sim.loc[sim["roi"] == roi, ["layer", "score"]]
                layers = left.rename(columns={"score": "encoding"}).merge(
                    right.rename(columns={"score": "rsa"}), on="layer", how="inner"
                )
                layers = layers[np.isfinite(layers["encoding"]) & np.isfinite(layers["rsa"])]
                if layers.empty:
                    continue
                key = {
                    "sweep": sweep,
                    "extractor": extractor,
                    "encoding_stage": stage,
                    "rsa_metric": metric,
                    "roi": roi,
                }
                yield key, layers.sort_values("position", kind="stable").reset_index(drop=True)


def _first_best(layers: pd.DataFrame, column: str) -> str | None:
    """Layer of the highest ``column``, ties to the earlier layer; None when all are NaN."""
    finite = layers[np.isfinite(layers[column])]
    if finite.empty:
        return None
    order = finite.sort_values([column, "position"], ascending=[False, True], kind="stable")
    return str(order["layer"].iloc[0])


def _agreement(key: Mapping[str, str], layers: pd.DataFrame) -> dict[str, Any]:
    """One row of :func:`metric_agreement` from the shared layers of one ROI."""
    rho = np.nan
    if len(layers) >= _MIN_RHO_LAYERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant scores: rho is NaN
            rho = float(spearmanr(layers["encoding"], layers["rsa"]).statistic)
    best_encoding = _first_best(layers, "selection_score")
    best_rsa = _first_best(layers, "rsa")
    agree = pd.NA if best_encoding is None else best_encoding == best_rsa
    return {
        **key,
        "n_layers": len(layers),
        "spearman_rho": rho,
        "best_layer_encoding": best_encoding,
        "best_layer_rsa": best_rsa,
        "agree": agree,
    }


def metric_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Encoding r and RSA side by side per ROI: rank correlation across layers, best layers.

    For every encoding sweep (stage ``evaluation`` or ``trial_evaluation``) whose
    extractor fMRI RSA (stage ``rsa``) also compared layer by layer, per RSA comparison
    and per ROI scored by both: the group rows (means over subjects) at the layers both
    scored (finite scores).

    Parameters
    ----------
    table : pandas.DataFrame
        A layer-sweep table (:data:`LAYER_SWEEP_COLUMNS`), e.g. ``layer_sweep.tsv``.

    Returns
    -------
    agreement : pandas.DataFrame
        Columns :data:`ALIGNMENT_COLUMNS`, one row per sweep × encoding stage × RSA
        metric × ROI (ROIs with one of the two metrics only have no row):
        ``n_layers`` the number of shared layers; ``spearman_rho`` the Spearman
        correlation across them of the group's mean test r and mean RDM similarity
        (NaN with fewer than 3 layers or constant scores); ``best_layer_encoding``
        the layer of the highest mean cross-validated training score (the sweep's own
        rule, among the shared layers; None when those are all NaN);
        ``best_layer_rsa`` the layer of the highest group-mean RDM similarity (the
        layer leave-one-subject-out selection would pick for a new subject); ``agree``
        whether the two coincide (missing when the encoding has no best layer). Ties go
        to the earlier layer. Only the header when no extractor has both.

    Raises
    ------
    ValueError
        When ``table`` lacks a column of a layer-sweep table.
    """
    rows = [_agreement(key, layers) for key, layers in _shared_layers(table)]
    if not rows:
        return pd.DataFrame(columns=list(ALIGNMENT_COLUMNS))
    out = pd.DataFrame(rows, columns=list(ALIGNMENT_COLUMNS))
    out["n_layers"] = out["n_layers"].astype(int)
    out["spearman_rho"] = out["spearman_rho"].astype(float)
    out["agree"] = out["agree"].astype("boolean")
    return out


def plot_metric_agreement(table: pd.DataFrame, *, sweep: str, max_rois: int = 8) -> Figure:
    """Encoding r and RSA similarity against layer depth, one panel per ROI.

    Parameters
    ----------
    table : pandas.DataFrame
        A layer-sweep table (:data:`LAYER_SWEEP_COLUMNS`).
    sweep : str
        The encoding sweep to draw (its extractor's RSA rows join it).
    max_rois : int
        Most ROIs drawn: ``all`` and the ROIs with the highest encoding r.

    Returns
    -------
    fig : matplotlib.figure.Figure
        One row of panels per ROI, one column per encoding stage × RSA metric: the
        group's mean test r (circles, left axis) and mean RDM similarity (squares,
        right axis) against the relative depth among the shared layers (0: first, 1:
        last); filled markers are the best layers of :func:`metric_agreement`, whose
        ``spearman_rho`` is in the panel's title.

    Raises
    ------
    ValueError
        When ``sweep`` has no ROI with both scores in ``table``.
    """
    pairs = [(key, layers) for key, layers in _shared_layers(table) if key["sweep"] == sweep]
    if not pairs:
        raise ValueError(
            f"No ROI of sweep {sweep!r} has both an encoding and an RSA score per layer in `table`."
        )
    columns = sorted({(key["encoding_stage"], key["rsa_metric"]) for key, _ in pairs})
    peak = {}
    for key, layers in pairs:
        peak[key["roi"]] = max(peak.get(key["roi"], -np.inf), float(layers["encoding"].max()))
    rois = sorted(peak)
    if len(rois) > max_rois:
        others = sorted((r for r in rois if r != ALL_ROI), key=lambda r: -peak[r])
        rois = sorted([*others[: max_rois - 1], *([ALL_ROI] if ALL_ROI in peak else [])])
    panels = {
        (key["roi"], key["encoding_stage"], key["rsa_metric"]): (key, layers)
        for key, layers in pairs
    }
    n_rows, n_cols = len(rois), len(columns)
    fig = new_figure((3.6 * n_cols + 0.8, 2.2 * n_rows + 0.8))
    for i, roi in enumerate(rois):
        for j, (stage, metric) in enumerate(columns):
            ax = fig.add_subplot(n_rows, n_cols, i * n_cols + j + 1)
            entry = panels.get((roi, stage, metric))
            if entry is None:
                ax.set_axis_off()
                continue
            _agreement_panel(ax, *entry, left=j == 0, bottom=i == n_rows - 1)
    title = f"{sweep}: encoding r (circles, left) and RSA (squares, right); filled: best layer"
    if len(rois) < len(peak):
        title += f"\n{len(rois)} of {len(peak)} ROIs: the best-scoring ones and 'all'"
    fig.suptitle(title, fontsize="small")
    fig.tight_layout()
    return fig


def _agreement_panel(
    ax: Any, key: Mapping[str, str], layers: pd.DataFrame, *, left: bool, bottom: bool
) -> None:
    """Both curves of one ROI on twin axes, best layers filled, rho in the title."""
    row = _agreement(key, layers)
    n = len(layers)
    depth = np.arange(n) / (n - 1) if n > 1 else np.zeros(n)
    twin = ax.twinx()
    for axis, column, marker, color, best in (
        (ax, "encoding", "o", "C0", row["best_layer_encoding"]),
        (twin, "rsa", "s", "C1", row["best_layer_rsa"]),
    ):
        axis.plot(depth, layers[column], f"-{marker}", ms=3, mfc="white", color=color)
        chosen = (layers["layer"] == best).to_numpy()
        axis.plot(depth[chosen], layers[column][chosen], marker, ms=7, color=color)
        axis.tick_params(axis="y", labelcolor=color, labelsize="x-small")
    ax.tick_params(axis="x", labelsize="x-small")
    if left:
        ax.set_ylabel(f"{key['encoding_stage']}: mean r", color="C0", fontsize="small")
    twin.set_ylabel(f"RSA {key['rsa_metric']}", color="C1", fontsize="small")
    if bottom:
        ax.set_xlabel("relative depth of the shared layers", fontsize="small")
    rho = row["spearman_rho"]
    shown = f"rho = {rho:.2f}" if np.isfinite(rho) else f"rho n/a ({n} layers)"
    ax.set_title(f"{key['roi'] or '(whole)'} ({key['rsa_metric']}): {shown}", fontsize="small")

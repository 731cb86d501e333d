"""Does geometry predict alignment? Geometry metrics beside the same layers' brain scores.

The summary's layer-sweep table (:mod:`neuroflow.evaluation.layer_sweep`) holds, per
extractor layer, the group's encoding r, RSA similarity and identification scores per
ROI. :func:`layer_scores` keeps those group rows in the shape
:func:`neuroflow.geometry.plotting.plot_geometry` draws; :func:`geometry_score_correlations`
gives, per feature space, geometry metric and brain score, the Spearman correlation of
the two across the space's layers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

__all__ = ["CORRELATION_COLUMNS", "geometry_score_correlations", "layer_scores"]

#: Columns of :func:`geometry_score_correlations`.
CORRELATION_COLUMNS = (
    "feature_space",
    "metric",
    "analysis",
    "n_layers",
    "spearman_rho",
)
#: Fewest layers a correlation across layers is computed on.
MIN_LAYERS = 3
#: How the layer-sweep table's stages read in analysis names.
_STAGE_NAMES = {"evaluation": "encoding", "trial_evaluation": "trial encoding"}


def layer_scores(sweeps: pd.DataFrame, group: str = "group", all_roi: str = "all") -> pd.DataFrame:
    """The group's score of every swept layer, one analysis per stage, metric and ROI.

    Parameters
    ----------
    sweeps : pandas.DataFrame
        The layer-sweep table (columns ``stage``, ``extractor``, ``layer``,
        ``subject``, ``roi``, ``metric``, ``score``).
    group : str
        ``subject`` value of the group rows.
    all_roi : str
        ``roi`` value of the whole-brain rows, kept only when a stage has no other ROI.

    Returns
    -------
    scores : pandas.DataFrame
        Columns ``feature_space``, ``layer``, ``analysis`` (``"<stage> <metric>:
        <roi>"``, the encoding stages named ``encoding`` and ``trial encoding``) and
        ``score``; the rows of the chosen layers (``layer ==
        "selected"``) are left out.
    """
    needed = {"stage", "extractor", "layer", "subject", "roi", "metric", "score"}
    missing = needed - set(sweeps.columns)
    if missing:
        raise ValueError(
            f"sweeps must have the layer-sweep columns {sorted(needed)}, got "
            f"{sorted(sweeps.columns)} instead (missing {sorted(missing)})."
        )
    rows = sweeps[(sweeps["subject"].astype(str) == group) & (sweeps["layer"] != "selected")]
    rows = rows[np.isfinite(pd.to_numeric(rows["score"], errors="coerce"))]
    kept = []
    for _, part in rows.groupby("stage", sort=False):
        rois = set(part["roi"].astype(str))
        kept.append(part if rois == {all_roi} else part[part["roi"].astype(str) != all_roi])
    if not kept:
        return pd.DataFrame(columns=["feature_space", "layer", "analysis", "score"])
    rows = pd.concat(kept)
    return pd.DataFrame(
        {
            "feature_space": rows["extractor"].astype(str).to_numpy(),
            "layer": rows["layer"].astype(str).to_numpy(),
            "analysis": (
                rows["stage"].astype(str).replace(_STAGE_NAMES)
                + " "
                + rows["metric"].astype(str)
                + ": "
                + rows["roi"].astype(str)
            ).to_numpy(),
            "score": pd.to_numeric(rows["score"]).to_numpy(dtype=float),
        }
    ).drop_duplicates(["feature_space", "layer", "analysis"])


def geometry_score_correlations(geometry: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Spearman correlation across layers of each geometry metric with each brain score.

    Parameters
    ----------
    geometry : pandas.DataFrame
        From :func:`neuroflow.geometry.stage.geometry_table` (``feature_space``,
        ``layer``, ``metric``, ``value``).
    scores : pandas.DataFrame
        From :func:`layer_scores`.

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`CORRELATION_COLUMNS`: one row per feature space, geometry
        metric and analysis with at least :data:`MIN_LAYERS` layers holding both
        (``spearman_rho`` NaN where either is constant over the layers).
    """
    merged = geometry.merge(scores, on=["feature_space", "layer"])
    rows = []
    for (space, metric, analysis), part in merged.groupby(
        ["feature_space", "metric", "analysis"], sort=False
    ):
        part = part[np.isfinite(part["value"]) & np.isfinite(part["score"])]
        if len(part) < MIN_LAYERS:
            continue
        constant = part["value"].nunique() < 2 or part["score"].nunique() < 2
        rho = np.nan if constant else float(spearmanr(part["value"], part["score"])[0])
        rows.append(
            {
                "feature_space": space,
                "metric": metric,
                "analysis": analysis,
                "n_layers": len(part),
                "spearman_rho": rho,
            }
        )
    return pd.DataFrame(rows, columns=list(CORRELATION_COLUMNS))

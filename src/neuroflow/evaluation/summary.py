"""ROI summaries of per-target scores, per subject and across subjects.

Per-subject rows and group rows share one tidy table layout
(:data:`SUMMARY_COLUMNS`): per-subject rows have ``statistic == "value"``;
group rows have ``subject == "group"`` and ``statistic`` one of ``"mean"``,
``"sd"`` and ``"sem"``, each metric column then holding that statistic of the
per-subject values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from neuroflow.rois import labelled_rois

__all__ = [
    "ALL_ROI",
    "GROUP_SUBJECT",
    "KEY_COLUMNS",
    "METRIC_COLUMNS",
    "SUMMARY_COLUMNS",
    "group_summary",
    "roi_summary",
    "topk_mean",
]

#: ROI label of the row summarising every target.
ALL_ROI = "all"
#: Subject label of across-subject rows.
GROUP_SUBJECT = "group"
#: Columns identifying a summary row.
KEY_COLUMNS = ("subject", "model", "feature_space", "layer", "roi", "statistic")
#: Columns holding summary values.
METRIC_COLUMNS = (
    "n_targets",
    "mean_r",
    "median_r",
    "topk_r",
    "mean_r_normalized",
    "frac_significant",
    "frac_significant_fwer",
    "noise_ceiling_r",
)
#: Column order of the summary table.
SUMMARY_COLUMNS = (*KEY_COLUMNS, "n_subjects", *METRIC_COLUMNS)


def topk_mean(values: np.ndarray, percent: float) -> float:
    """Mean of the top ``percent`` % of the finite values.

    Parameters
    ----------
    values : array-like, shape (n_targets,)
        Scores; NaN entries are ignored.
    percent : float
        Share of targets kept, in ``(0, 100]``; at least one target is kept.

    Returns
    -------
    mean : float
        NaN when no value is finite.
    """
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent <= 100:
        raise ValueError(f"`percent` must be a number in (0, 100], got {percent!r} instead.")
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return math.nan
    k = max(1, math.ceil(finite.size * percent / 100.0))
    return float(np.sort(finite)[-k:].mean())


def _nan_stat(values: np.ndarray, func) -> float:
    values = values[np.isfinite(values)]
    return float(func(values)) if values.size else math.nan


def _fraction(flags: np.ndarray | None, sel: np.ndarray) -> float:
    """Share of the selected targets flagged; NaN without flags or targets."""
    if flags is None or not sel.any():
        return math.nan
    return float(flags[sel].mean())


def roi_summary(
    *,
    r: np.ndarray,
    r_normalized: np.ndarray,
    significant: np.ndarray,
    noise_ceiling_r: np.ndarray,
    roi: Sequence[str] | np.ndarray,
    topk_percent: float = 10.0,
    significant_fwer: np.ndarray | None = None,
) -> pd.DataFrame:
    """Summarise per-target scores within each ROI and over all targets.

    Parameters
    ----------
    r, r_normalized, noise_ceiling_r : array-like, shape (n_targets,)
        Per-target correlation, noise-normalised correlation and ceiling on r.
    significant : array-like of bool, shape (n_targets,)
        Significance after FDR correction.
    roi : sequence of str, shape (n_targets,)
        ROI label per target; ``"unlabelled"`` (or ``""``) marks targets outside every
        region, which count only
        in the :data:`ALL_ROI` row.
    topk_percent : float
        Share of best targets averaged in ``topk_r``, in ``(0, 100]``.
    significant_fwer : array-like of bool, shape (n_targets,) | None
        Significance after family-wise (max-statistic) correction; None when that
        test did not run (``frac_significant_fwer`` is then NaN).

    Returns
    -------
    table : pandas.DataFrame, shape (n_rois + 1, 9)
        Columns ``roi`` and :data:`METRIC_COLUMNS`; ROIs in sorted order, then
        ``"all"``. Means, medians and the ceiling ignore NaN scores;
        ``frac_significant`` and ``frac_significant_fwer`` divide by every target
        of the ROI.
    """
    arrays = {
        "r": np.asarray(r, dtype=np.float64),
        "r_normalized": np.asarray(r_normalized, dtype=np.float64),
        "significant": np.asarray(significant, dtype=bool),
        "noise_ceiling_r": np.asarray(noise_ceiling_r, dtype=np.float64),
        "roi": np.asarray(roi, dtype=str),
    }
    if significant_fwer is not None:
        arrays["significant_fwer"] = np.asarray(significant_fwer, dtype=bool)
    n = arrays["r"].shape
    for name, value in arrays.items():
        if value.ndim != 1 or value.shape != n:
            raise ValueError(f"`{name}` must have shape {n} like `r`, got {value.shape} instead.")
    labels = labelled_rois(arrays["roi"].tolist())
    rows = []
    for label in [*labels, ALL_ROI]:
        sel = np.ones(n, bool) if label == ALL_ROI else arrays["roi"] == label
        r_sel = arrays["r"][sel]
        rows.append(
            {
                "roi": label,
                "n_targets": int(sel.sum()),
                "mean_r": _nan_stat(r_sel, np.mean),
                "median_r": _nan_stat(r_sel, np.median),
                "topk_r": topk_mean(r_sel, topk_percent),
                "mean_r_normalized": _nan_stat(arrays["r_normalized"][sel], np.mean),
                "frac_significant": _fraction(arrays.get("significant"), sel),
                "frac_significant_fwer": _fraction(arrays.get("significant_fwer"), sel),
                "noise_ceiling_r": _nan_stat(arrays["noise_ceiling_r"][sel], np.mean),
            }
        )
    return pd.DataFrame(rows, columns=["roi", *METRIC_COLUMNS])


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Across-subject mean, SD and SEM of per-subject ROI summaries.

    Parameters
    ----------
    table : pandas.DataFrame
        Per-subject rows with the :data:`SUMMARY_COLUMNS` (``statistic ==
        "value"``), one per subject × model × feature space × layer × ROI.

    Returns
    -------
    group : pandas.DataFrame
        Rows with ``subject == "group"`` and ``statistic`` in ``mean``, ``sd``
        (``ddof=1``), ``sem`` (``sd / sqrt(n)``), and ``n_subjects`` the number
        of subjects with a finite value of ``mean_r``. SD and SEM are NaN for a
        single subject.
    """
    missing = [c for c in SUMMARY_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"`table` must have columns {missing}, got {list(table.columns)} instead.")
    subjects = table[table["subject"] != GROUP_SUBJECT]
    dupes = subjects.duplicated(["subject", "model", "feature_space", "layer", "roi"])
    if dupes.any():
        first = subjects[dupes].iloc[0]
        raise ValueError(
            "`table` must have one row per subject, model, feature space, layer and ROI, "
            f"got duplicates for subject {first['subject']!r}, model {first['model']!r}, "
            f"roi {first['roi']!r} instead."
        )
    rows = []
    keys = ["model", "feature_space", "layer", "roi"]
    for key, part in subjects.groupby(keys, sort=True, dropna=False):
        values = part[list(METRIC_COLUMNS)].astype(float)
        n_subjects = int(np.isfinite(part["mean_r"].astype(float)).sum())
        mean = values.mean(skipna=True)
        sd = values.std(ddof=1, skipna=True)
        sem = sd / np.sqrt(values.notna().sum().clip(lower=1))
        for stat, series in (("mean", mean), ("sd", sd), ("sem", sem)):
            row = dict(zip(keys, key, strict=True))
            row.update(subject=GROUP_SUBJECT, statistic=stat, n_subjects=n_subjects)
            row.update(series.to_dict())
            rows.append(row)
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))

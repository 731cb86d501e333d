"""ROI summaries of per-target scores, per subject and across subjects, and the layout
of the summary table (``scores.tsv``).

ROI summaries are wide (:data:`WIDE_COLUMNS`, one column per metric): per-subject rows
have ``statistic == "value"``; group rows have ``subject == "group"`` and ``statistic``
one of ``"mean"``, ``"sd"`` and ``"sem"``, each metric column then holding that
statistic of the per-subject values. The summary store keeps them so.

The summary table is long and tidy (:data:`TABLE_COLUMNS`): one row per analysis ×
subject × model × layer × ROI × metric × statistic, for every analysis of the run
(:func:`long_rows` turns wide ROI summaries into such rows, :func:`summary_table`
checks and orders them). Its names follow one rule: ``feature_space`` is always spelled
``<extractor>:<layer>`` (``+``-joined for joint models), ``extractor`` and ``layer`` hold
its parts (``+``-joined alike), and ``model`` is the encoding model's configured name,
or, for analyses that compare a feature space directly (decoding, identification, RSA),
the feature space itself (see :func:`space_names`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from neuroflow.names import layer_id
from neuroflow.rois import ALL_ROI, GROUP_SUBJECT, labelled_rois

__all__ = [
    "ALL_ROI",
    "ENCODING_METRICS",
    "GROUP_SUBJECT",
    "METRIC_COLUMNS",
    "ROW_KEY",
    "TABLE_COLUMNS",
    "UNKNOWN_LAYER",
    "WIDE_COLUMNS",
    "WIDE_KEY_COLUMNS",
    "group_summary",
    "long_rows",
    "roi_summary",
    "space_names",
    "summary_table",
    "topk_mean",
]

#: Layer label of a feature space whose layer no input records.
UNKNOWN_LAYER = "n/a"
#: Columns identifying a wide ROI-summary row.
WIDE_KEY_COLUMNS = ("subject", "model", "extractor", "feature_space", "layer", "roi", "statistic")
#: Metrics of the encoding ROI summaries (the value columns of a wide summary).
ENCODING_METRICS = (
    "mean_r",
    "median_r",
    "topk_r",
    "mean_r_normalized",
    "frac_significant",
    "frac_significant_fwer",
    "noise_ceiling_r",
    "frac_exceeds_ceiling",
)
#: Columns holding wide summary values: the target count and :data:`ENCODING_METRICS`.
METRIC_COLUMNS = ("n_targets", *ENCODING_METRICS)
#: Column order of a wide ROI summary.
WIDE_COLUMNS = (*WIDE_KEY_COLUMNS, "n_subjects", *METRIC_COLUMNS)
#: Column order of the summary table (``scores.tsv``).
TABLE_COLUMNS = (
    "analysis",
    "subject",
    "model",
    "extractor",
    "feature_space",
    "layer",
    "roi",
    "metric",
    "statistic",
    "value",
    "n_subjects",
    "n_targets",
    "chance",
    "p_value",
    "inconclusive",
)
#: Columns that identify a row of the summary table: no two rows share them.
ROW_KEY = ("analysis", "subject", "model", "feature_space", "layer", "roi", "metric", "statistic")


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
    significant: np.ndarray | None,
    noise_ceiling_r: np.ndarray,
    roi: Sequence[str] | np.ndarray,
    topk_percent: float = 10.0,
    significant_fwer: np.ndarray | None = None,
    exceeds_ceiling: np.ndarray | None = None,
) -> pd.DataFrame:
    """Summarise per-target scores within each ROI and over all targets.

    Parameters
    ----------
    r, r_normalized, noise_ceiling_r : array-like, shape (n_targets,)
        Per-target correlation, noise-normalised correlation and ceiling on r.
    significant : array-like of bool, shape (n_targets,) | None
        Significance after FDR correction; None when no test ran (e.g. for a variant
        of a model's prediction): ``frac_significant`` is then NaN.
    roi : sequence of str, shape (n_targets,)
        ROI label per target; ``"unlabelled"`` (or ``""``) marks targets outside every
        region, which count only
        in the :data:`ALL_ROI` row.
    topk_percent : float
        Share of best targets averaged in ``topk_r``, in ``(0, 100]``.
    significant_fwer : array-like of bool, shape (n_targets,) | None
        Significance after family-wise (max-statistic) correction; None when that
        test did not run (``frac_significant_fwer`` is then NaN).
    exceeds_ceiling : array-like of bool, shape (n_targets,) | None
        Targets whose r is above the noise ceiling beyond the ceiling's uncertainty
        (the score store's ``exceeds_ceiling``); None when not known
        (``frac_exceeds_ceiling`` is then NaN). ``frac_exceeds_ceiling`` is their share
        among the ROI's targets with a defined ``r_normalized``, NaN where it has none
        (no ceiling to exceed).

    Returns
    -------
    table : pandas.DataFrame, shape (n_rois + 1, 10)
        Columns ``roi`` and :data:`METRIC_COLUMNS`; ROIs in sorted order, then
        ``"all"``. Means, medians and the ceiling ignore NaN scores;
        ``frac_significant`` and ``frac_significant_fwer`` divide by every target of
        the ROI. A ``mean_r_normalized`` above 1 with a ``frac_exceeds_ceiling`` of 0
        lies within the ceiling's uncertainty.
    """
    arrays = {
        "r": np.asarray(r, dtype=np.float64),
        "r_normalized": np.asarray(r_normalized, dtype=np.float64),
        "noise_ceiling_r": np.asarray(noise_ceiling_r, dtype=np.float64),
        "roi": np.asarray(roi, dtype=str),
    }
    if significant is not None:
        arrays["significant"] = np.asarray(significant, dtype=bool)
    if significant_fwer is not None:
        arrays["significant_fwer"] = np.asarray(significant_fwer, dtype=bool)
    if exceeds_ceiling is not None:
        arrays["exceeds_ceiling"] = np.asarray(exceeds_ceiling, dtype=bool)
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
                "frac_exceeds_ceiling": _fraction(
                    arrays.get("exceeds_ceiling"), sel & np.isfinite(arrays["r_normalized"])
                ),
            }
        )
    return pd.DataFrame(rows, columns=["roi", *METRIC_COLUMNS])


def group_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Across-subject mean, SD and SEM of per-subject ROI summaries.

    Parameters
    ----------
    table : pandas.DataFrame
        Per-subject rows with the :data:`WIDE_COLUMNS` (``statistic ==
        "value"``), one per subject × model × feature space × layer × ROI.

    Returns
    -------
    group : pandas.DataFrame
        Rows with ``subject == "group"`` and ``statistic`` in ``mean``, ``sd``
        (``ddof=1``), ``sem`` (``sd / sqrt(n)``), and ``n_subjects`` the number
        of subjects with a finite value of ``mean_r``. SD and SEM are NaN for a
        single subject.
    """
    missing = [c for c in WIDE_COLUMNS if c not in table.columns]
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
    keys = ["model", "extractor", "feature_space", "layer", "roi"]
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
    return pd.DataFrame(rows, columns=list(WIDE_COLUMNS))


def _layers_of(layers: str | Sequence[str] | None, n: int) -> list[str]:
    """One layer name per feature space from a ``+``-joined label or a list; else blanks."""
    if layers is None:
        return [""] * n
    parts = str(layers).split("+") if isinstance(layers, str) else [str(v) for v in layers]
    if len(parts) != n:
        return [""] * n
    return ["" if p in ("", UNKNOWN_LAYER, "None") else p for p in parts]


def space_names(
    spaces: str | Sequence[str],
    layers: str | Sequence[str] | None = None,
    layer_order: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, str, str]:
    """Extractor, layer and feature-space labels of a model's feature spaces.

    Parameters
    ----------
    spaces : str or sequence of str
        The feature spaces, each ``"<extractor>:<layer>"`` or a bare ``"<extractor>"``
        (its last layer); a lone string is one feature space.
    layers : str or sequence of str | None
        The layer of each space as the input recorded it (a ``+``-joined label like a
        score store's ``layer`` attribute, or a list); used for bare spaces when it
        has one entry per space.
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order; a bare space without a
        recorded layer takes its extractor's last layer.

    Returns
    -------
    extractor, layer, feature_space : str
        ``+``-joined over the spaces, e.g. ``("image_statistics+minilm",
        "output+embedding", "image_statistics:output+minilm:embedding")``; a layer
        nothing records is :data:`UNKNOWN_LAYER`.
    """
    spaces = [spaces] if isinstance(spaces, str) else [str(s) for s in spaces]
    if not spaces or any(not s for s in spaces):
        raise ValueError(f"`spaces` must name at least one feature space, got {spaces!r} instead.")
    recorded = _layers_of(layers, len(spaces))
    extractors, names = [], []
    for space, known in zip(spaces, recorded, strict=True):
        extractor, _, layer = space.partition(":")
        if not layer:
            order = list((layer_order or {}).get(extractor) or ())
            layer = known or (order[-1] if order else UNKNOWN_LAYER)
        extractors.append(extractor)
        names.append(layer)
    return (
        "+".join(extractors),
        "+".join(names),
        "+".join(
            f"{e}:{la}" if la == UNKNOWN_LAYER else layer_id(e, la)
            for e, la in zip(extractors, names, strict=True)
        ),
    )


def long_rows(wide: pd.DataFrame, analysis: str) -> pd.DataFrame:
    """Rows of the summary table from wide ROI summaries: one per metric.

    Parameters
    ----------
    wide : pandas.DataFrame
        Rows with the :data:`WIDE_COLUMNS` (per-subject and group rows, see
        :func:`roi_summary` and :func:`group_summary`).
    analysis : str
        The rows' ``analysis`` (e.g. ``"encoding"``).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`TABLE_COLUMNS`: each wide row becomes one row per
        :data:`ENCODING_METRICS` entry (in that order), its value in ``value`` and
        its ``statistic`` kept. ``n_targets`` is the ROI's number of targets (group
        rows: the mean over subjects); ``chance``, ``p_value`` and ``inconclusive``
        are NaN.
    """
    missing = [c for c in WIDE_COLUMNS if c not in wide.columns]
    if missing:
        raise ValueError(f"`wide` must have columns {missing}, got {list(wide.columns)} instead.")
    if not analysis:
        raise ValueError("`analysis` must name the rows' analysis, got an empty string instead.")
    wide = wide.reset_index(drop=True)
    n_targets = wide["n_targets"].astype(float)
    group = wide["subject"].astype(str) == GROUP_SUBJECT
    if group.any():
        # a group row's target count is the subjects' mean, whatever its statistic
        keys = ["subject", *WIDE_KEY_COLUMNS[1:-1]]
        means = wide[group & (wide["statistic"] == "mean")].set_index(keys)["n_targets"]
        index = pd.MultiIndex.from_frame(wide.loc[group, keys].astype(object))
        found = means.reindex(index).to_numpy(dtype=float)
        n_targets[group] = np.where(np.isfinite(found), found, n_targets[group])
    wide = wide.assign(n_targets=n_targets, _row=np.arange(len(wide)))
    long = wide.melt(
        id_vars=[*WIDE_KEY_COLUMNS, "n_subjects", "n_targets", "_row"],
        value_vars=list(ENCODING_METRICS),
        var_name="metric",
        value_name="value",
    )
    order = {m: i for i, m in enumerate(ENCODING_METRICS)}
    long = long.assign(_metric=long["metric"].map(order)).sort_values(
        ["_row", "_metric"], kind="stable"
    )
    long["analysis"] = analysis
    for column in ("chance", "p_value", "inconclusive"):
        long[column] = np.nan
    return long[list(TABLE_COLUMNS)].reset_index(drop=True)


def _blank(values: pd.Series) -> pd.Series:
    """True where a label is missing or empty."""
    text = [str(v).strip() for v in values]
    return values.isna() | pd.Series([t in ("", "n/a", "nan") for t in text], index=values.index)


def summary_table(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Join rows of the summary table and check them.

    Parameters
    ----------
    parts : list of pandas.DataFrame
        Rows of the analyses, each with columns among :data:`TABLE_COLUMNS`
        (missing ones are filled with NaN).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`TABLE_COLUMNS`, the parts' rows in order.

    Raises
    ------
    ValueError
        When a part has a column outside :data:`TABLE_COLUMNS`, a row lacks its
        ``analysis``, ``metric`` or ``statistic``, a ``feature_space`` is not spelled
        ``<extractor>:<layer>``, or two rows share their :data:`ROW_KEY`.
    """
    frames = []
    for part in parts:
        extra = [c for c in part.columns if c not in TABLE_COLUMNS]
        if extra:
            raise ValueError(
                f"Summary rows must have only the columns {list(TABLE_COLUMNS)}, got {extra} "
                "besides."
            )
        if len(part):
            frames.append(part.reindex(columns=list(TABLE_COLUMNS)))
    if not frames:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    table = pd.concat(frames, ignore_index=True)
    table["subject"] = table["subject"].astype(str)
    for column in ("analysis", "metric", "statistic"):
        blank = _blank(table[column])
        if blank.any():
            first = table[blank].iloc[0]
            raise ValueError(
                f"Every row of the summary table must name its {column}, got {int(blank.sum())} "
                f"without one (the first: analysis {first['analysis']!r}, model "
                f"{first['model']!r}, metric {first['metric']!r})."
            )
    named = ~_blank(table["feature_space"])
    spelled = [all(":" in p for p in str(v).split("+")) for v in table["feature_space"]]
    bare = named & ~np.asarray(spelled, dtype=bool)
    if bare.any():
        first = table[bare].iloc[0]
        raise ValueError(
            "`feature_space` must be spelled '<extractor>:<layer>' ('+'-joined for joint "
            f"models), got {first['feature_space']!r} in a row of analysis "
            f"{first['analysis']!r}."
        )
    dupes = table.duplicated(list(ROW_KEY), keep=False)
    if dupes.any():
        first = table[dupes].iloc[0]
        key = ", ".join(f"{c}={first[c]!r}" for c in ROW_KEY)
        raise ValueError(
            f"Every row of the summary table must have its own {list(ROW_KEY)}, got "
            f"{int(dupes.sum())} rows sharing one ({key})."
        )
    return table

"""Layer × ROI tables of layer sweeps, with each ROI's layer chosen without the test data.

Two kinds of sweep share one tidy table (:data:`LAYER_SWEEP_COLUMNS`):

- **Encoding sweeps** (``encoding.models.<name>.layer_sweep``, see
  :mod:`neuroflow.workflow.sweeps`): one encoding model per layer. ``score`` is the mean
  test-set r over an ROI's targets and ``selection_score`` the mean cross-validated
  score on the training data (``cv_score``, the score that chose each target's
  penalty). The best layer of an ROI is the one with the highest ``selection_score``:
  chosen without looking at the test set, so its test r is an unbiased estimate of what
  a layer chosen this way achieves (choosing by test r reports the maximum of noisy
  estimates).
- **Analysis sweeps**: RSA and decoding compare the brain with every layer of an
  extractor (their default). They fit nothing on training folds, so a subject's layer is
  chosen on the *other* subjects (leave one subject out): ``selection_score`` is the
  mean score of the other subjects at that layer. With one subject no layer is chosen.

Per sweep, stage and ROI a row with ``layer == "selected"`` gives the mean over
subjects of the score at each subject's chosen layer: the figure to quote for "the
best layer". :func:`plot_layer_sweep` draws the group's score against the relative
depth of the layer per ROI, the layers chosen for the group marked.

**Selection uncertainty.** A best layer is the argmax of noisy means: neighbouring
layers often score within noise of each other. Every group row therefore carries how
often each layer is the best one when the data are resampled
(:func:`best_layer_frequencies`, :data:`N_SELECTION_BOOTSTRAPS` bootstrap samples): the
subjects when there are at least :data:`MIN_RESAMPLED_SUBJECTS`, else each subject's
targets (voxels or parcels of the ROI; encoding sweeps only, the summary table holds
no per-target or per-stimulus scores of the analyses). The criterion is the one the
group's choice uses (encoding: the mean training cross-validation score; analyses:
the group-mean score, what leave-one-subject-out selection picks for a new subject):
``selection_frequency`` per layer, and ``best_depth_lower`` / ``best_depth_upper``
the percentile interval (:data:`SELECTION_LEVEL`) of the best layer's relative depth,
with ``selection_resampled`` saying what was resampled (``subjects`` or ``targets``;
missing where the data are too few, and on the per-subject rows).

Where an extractor has both an encoding sweep and fMRI RSA, :func:`metric_agreement`
sets the two side by side per ROI (:data:`ALIGNMENT_COLUMNS`): the Spearman correlation
across layers of the group's encoding r and RDM similarity, the best layer by each and
whether they coincide; :func:`plot_metric_agreement` draws both curves.

Whether encoding and RSA agree on the layers is in :mod:`neuroflow.evaluation.layer_agreement`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from neuroflow.figures import legend_outside, new_figure
from neuroflow.rois import ALL_ROI, GROUP_SUBJECT, labelled_rois
from neuroflow.trial_split import TRIAL_MODEL_SUFFIX

__all__ = [
    "LAYER_SWEEP_COLUMNS",
    "MIN_RESAMPLED_SUBJECTS",
    "N_SELECTION_BOOTSTRAPS",
    "SELECTED_LAYER",
    "SELECTION_LEVEL",
    "analysis_sweep_table",
    "best_layer_frequencies",
    "choose_best_layers",
    "encoding_sweep_table",
    "plot_layer_sweep",
    "stage_of",
]


#: Columns of the layer-sweep table.
LAYER_SWEEP_COLUMNS = (
    "stage",
    "sweep",
    "extractor",
    "layer",
    "position",
    "depth",
    "subject",
    "roi",
    "metric",
    "n_targets",
    "n_subjects",
    "score",
    "selection_score",
    "selected_on",
    "best",
    "selection_frequency",
    "best_depth_lower",
    "best_depth_upper",
    "selection_resampled",
)


#: Bootstrap samples of the best layer's selection frequency (a few ms per ROI).
N_SELECTION_BOOTSTRAPS = 1000


#: Seed of those samples.
SELECTION_SEED = 0


#: Coverage of the interval of the best layer's depth.
SELECTION_LEVEL = 0.95


#: Fewest subjects that are resampled; with fewer, each subject's targets are.
MIN_RESAMPLED_SUBJECTS = 3


#: Bootstrap samples weighted at once (memory: this many x targets x 8 bytes, at most).
_WEIGHT_BLOCK = 2**22


#: ``layer`` of the rows giving the score at each subject's chosen layer.
SELECTED_LAYER = "selected"


#: Analyses of the summary table whose scores are compared across layers; metrics
#: where lower is better (ranks) or that are not scores (latencies) are left out.
_ANALYSES = ("rsa", "rsa_eeg", "identification_fmri")


_ANALYSIS_PREFIXES = ("identification_",)


_NOT_SCORES = ("rank", "latency", "onset", "p_value")


_KEYS = ["stage", "sweep", "metric", "subject", "roi"]


#: Stages of the layer-sweep table holding encoding scores, and the fMRI RSA stage.
_ENCODING_STAGES = ("evaluation", "trial_evaluation")


_RSA_STAGE = "rsa"


def _roi_means(ds: xr.Dataset, path: str) -> list[dict]:
    """Mean test r and training cv score per ROI (and over all targets) of one store.

    Each row also holds ``_targets``: the ROI's per-target cv scores, shape (n_targets,).
    """
    if "r" not in ds or "roi" not in ds.coords:
        raise ValueError(f"{path}: a score store needs variable `r` and coordinate `roi`.")
    if "cv_score" not in ds:
        raise ValueError(
            f"{path}: variable `cv_score` is missing; a layer sweep chooses its best layer by "
            "the training data's cross-validated score (rerun the evaluation)."
        )
    r = np.asarray(ds["r"].values, dtype=float)
    cv = np.asarray(ds["cv_score"].values, dtype=float)
    roi = np.array([str(v) for v in ds["roi"].values], dtype=object)
    rows = []
    for label in [*labelled_rois(roi.tolist()), ALL_ROI]:
        sel = np.ones(r.shape, bool) if label == ALL_ROI else roi == label
        rows.append(
            {
                "roi": label,
                "n_targets": int(sel.sum()),
                "score": float(np.nanmean(r[sel])) if np.isfinite(r[sel]).any() else np.nan,
                "selection_score": (
                    float(np.nanmean(cv[sel])) if np.isfinite(cv[sel]).any() else np.nan
                ),
                "_targets": cv[sel],
            }
        )
    return rows


def choose_best_layers(table: pd.DataFrame) -> pd.Series:
    """Flag, per stage × sweep × metric × subject × ROI, the layer of highest selection score.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows with columns ``stage``, ``sweep``, ``metric``, ``subject``, ``roi``,
        ``position`` and ``selection_score``.

    Returns
    -------
    best : pandas.Series of bool
        Aligned with ``table``; ties go to the earlier layer; groups whose selection
        scores are all NaN have no best layer.
    """
    best = pd.Series(False, index=table.index)
    for _, part in table.groupby(_KEYS, sort=False, dropna=False):
        scores = part["selection_score"].astype(float)
        if not np.isfinite(scores).any():
            continue
        order = part.assign(_s=scores.fillna(-np.inf)).sort_values(
            ["_s", "position"], ascending=[False, True]
        )
        best[order.index[0]] = True
    return best


def best_layer_frequencies(
    blocks: Sequence[np.ndarray],
    depth: np.ndarray,
    *,
    n_bootstraps: int = N_SELECTION_BOOTSTRAPS,
    seed: int = SELECTION_SEED,
    level: float = SELECTION_LEVEL,
) -> tuple[np.ndarray, np.ndarray]:
    """How often each layer is the best one when the data are resampled.

    Each bootstrap sample draws the rows of every block with replacement, averages each
    block's rows (NaN left out), then the blocks, and takes the layer of the highest
    mean (ties: the earlier layer, as :func:`choose_best_layers`).

    Parameters
    ----------
    blocks : sequence of ndarray, shape (n_units, n_layers)
        Scores of the layers (columns, input side first) per unit: one block of
        subjects, or one block of targets per subject (resampled within the subject).
    depth : array-like, shape (n_layers,)
        Relative depth of each layer.
    n_bootstraps : int
        Samples.
    seed : int
        Seed of the samples.
    level : float
        Coverage of the depth interval, in (0, 1).

    Returns
    -------
    frequency : ndarray of float64, shape (n_layers,)
        Share of the samples in which each layer is the best (sums to 1); NaN when no
        sample has a finite mean.
    interval : ndarray of float64, shape (2,)
        Percentile interval of the best layer's depth over the samples (depths of
        layers, not interpolated).
    """
    depth = np.asarray(depth, dtype=np.float64)
    n_layers = depth.size
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level!r} instead.")
    rng = np.random.default_rng(seed)
    total = np.zeros((n_bootstraps, n_layers))
    count = np.zeros((n_bootstraps, n_layers))
    for block in blocks:
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2 or block.shape[1] != n_layers or block.shape[0] == 0:
            raise ValueError(
                f"`blocks` must hold arrays of shape (n_units >= 1, {n_layers}), got "
                f"{block.shape} instead."
            )
        n = block.shape[0]
        finite = np.isfinite(block)
        values = np.where(finite, block, 0.0)
        finite = finite.astype(np.float64)
        step = max(1, _WEIGHT_BLOCK // n)
        for start in range(0, n_bootstraps, step):
            stop = min(start + step, n_bootstraps)
            # multiplicity of each row in each sample
            draws = rng.integers(0, n, size=(stop - start, n))
            draws += (np.arange(stop - start) * n)[:, None]
            weights = np.bincount(draws.ravel(), minlength=(stop - start) * n)
            weights = weights.reshape(stop - start, n).astype(np.float64)
            counts = weights @ finite
            mean = np.divide(
                weights @ values, counts, out=np.full(counts.shape, np.nan), where=counts > 0
            )
            ok = np.isfinite(mean)
            total[start:stop] += np.where(ok, mean, 0.0)
            count[start:stop] += ok
    means = np.divide(total, count, out=np.full(total.shape, np.nan), where=count > 0)
    valid = np.isfinite(means).any(axis=1)
    if not valid.any():
        return np.full(n_layers, np.nan), np.full(2, np.nan)
    best = np.nan_to_num(means[valid], nan=-np.inf).argmax(axis=1)
    frequency = np.bincount(best, minlength=n_layers) / best.size
    cut = (1 - level) / 2
    interval = np.quantile(depth[best], [cut, 1 - cut], method="inverted_cdf")
    return frequency, interval


def _group_arrays(
    subjects: pd.DataFrame, keys: list[str], criterion: str
) -> tuple[list[tuple], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean ``criterion`` per (group of ``keys``, subject, position), in one array.

    A pivot per group cost ~5 ms; one binning serves every group. Subjects and positions
    are sorted.

    Returns
    -------
    group_keys : list of tuple
        Each group's key values, in order of first appearance.
    means : ndarray, shape (n_groups, n_subjects, n_positions)
        NaN where a group has no finite score for the pair.
    seen_subject : ndarray of bool, shape (n_groups, n_subjects)
    seen_position : ndarray of bool, shape (n_groups, n_positions)
        Whether the group has a row of the subject / position.
    positions : ndarray, shape (n_positions,)
    depths : ndarray, shape (n_groups, n_positions)
        Each group's first finite depth of a position (as ``groupby.first``).
    """
    group_code = subjects.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    _, first_row = np.unique(group_code, return_index=True)
    group_keys = [tuple(row) for row in subjects[keys].to_numpy(object)[first_row]]
    _, subject_code = np.unique(subjects["subject"].to_numpy(), return_inverse=True)
    all_positions, position_code = np.unique(subjects["position"].to_numpy(), return_inverse=True)
    shape = (len(group_keys), int(subject_code.max()) + 1, all_positions.size)
    cells = np.ravel_multi_index((group_code, subject_code, position_code), shape)
    values = subjects[criterion].to_numpy(float)
    finite = np.isfinite(values)
    size = int(np.prod(shape))
    total = np.bincount(cells[finite], values[finite], minlength=size).reshape(shape)
    count = np.bincount(cells[finite], minlength=size).reshape(shape)
    means = np.divide(total, count, out=np.full(shape, np.nan), where=count > 0)
    seen_subject = np.zeros(shape[:2], bool)
    seen_subject[group_code, subject_code] = True
    seen_position = np.zeros((shape[0], shape[2]), bool)
    seen_position[group_code, position_code] = True
    # each group's depth of a position: its first finite value (as groupby.first)
    depth_values = subjects["depth"].to_numpy(float)
    has_depth = np.flatnonzero(np.isfinite(depth_values))
    pairs = group_code[has_depth] * shape[2] + position_code[has_depth]
    pairs, first = np.unique(pairs, return_index=True)
    depths = np.full(shape[0] * shape[2], np.nan)
    depths[pairs] = depth_values[has_depth[first]]
    depths = depths.reshape(shape[0], shape[2])
    return group_keys, means, seen_subject, seen_position, all_positions, depths


def _selection_uncertainty(
    subjects: pd.DataFrame,
    criterion: str,
    targets: Mapping[tuple, Mapping[str, Mapping[int, np.ndarray]]] | None,
) -> pd.DataFrame:
    """Selection frequency per layer and best-depth interval per stage, sweep, metric, ROI.

    ``targets``: (stage, sweep, metric, roi) -> subject -> position -> the per-target
    selection scores (resampled when there are fewer than
    :data:`MIN_RESAMPLED_SUBJECTS` subjects).
    """
    keys = ["stage", "sweep", "metric", "roi"]
    out = []
    group_keys, means, seen_subject, seen_position, all_positions, depths = _group_arrays(
        subjects, keys, criterion
    )
    for g, key in enumerate(group_keys):
        columns = np.flatnonzero(seen_position[g])
        scores = means[g][np.ix_(np.flatnonzero(seen_subject[g]), columns)]
        positions, depth = all_positions[columns], depths[g, columns]
        blocks, how = [], ""
        if len(scores) >= MIN_RESAMPLED_SUBJECTS:
            blocks, how = [scores], "subjects"
        elif targets and key in targets:
            blocks = _target_blocks(targets[key], positions)
            how = "targets" if blocks else ""
        frequency, interval = np.full(positions.size, np.nan), np.full(2, np.nan)
        if blocks:
            frequency, interval = best_layer_frequencies(blocks, depth)
        out += [
            {
                **dict(zip(keys, key, strict=True)),
                "position": position,
                "selection_frequency": freq,
                "best_depth_lower": interval[0],
                "best_depth_upper": interval[1],
                "selection_resampled": how if np.isfinite(interval).all() else np.nan,
            }
            for position, freq in zip(positions, frequency, strict=True)
        ]
    return pd.DataFrame(out)


def _target_blocks(
    by_subject: Mapping[str, Mapping[int, np.ndarray]], positions: np.ndarray
) -> list[np.ndarray]:
    """Per subject, its targets' scores (n_targets, n_layers); subjects whose layers'
    stores disagree on the number of targets are left out."""
    blocks = []
    for per_layer in by_subject.values():
        sizes = {len(v) for v in per_layer.values()}
        if len(sizes) != 1 or 0 in sizes:
            continue
        (size,) = sizes
        empty = np.full(size, np.nan)
        blocks.append(np.stack([per_layer.get(int(p), empty) for p in positions], axis=1))
    return blocks


def _with_selection_uncertainty(
    table: pd.DataFrame,
    subjects: pd.DataFrame,
    criterion: str,
    targets: Mapping[tuple, Mapping[str, Mapping[int, np.ndarray]]] | None,
) -> pd.DataFrame:
    """``table`` with the selection columns filled on its group rows."""
    keys = ["stage", "sweep", "metric", "roi"]
    stats = _selection_uncertainty(subjects, criterion, targets)
    columns = ["selection_frequency", "best_depth_lower", "best_depth_upper"]
    table = table.drop(columns=[*columns, "selection_resampled"], errors="ignore")
    if stats.empty:
        return table.assign(**dict.fromkeys([*columns, "selection_resampled"], np.nan))
    per_layer = stats[[*keys, "position", "selection_frequency"]]
    per_key = stats.drop_duplicates(keys)[[*keys, *columns[1:], "selection_resampled"]]
    merged = table.merge(per_layer, on=[*keys, "position"], how="left").merge(
        per_key, on=keys, how="left"
    )
    individual = (merged["subject"] != GROUP_SUBJECT).to_numpy()
    merged.loc[individual, [*columns, "selection_resampled"]] = np.nan
    return merged


def _group_rows(subjects: pd.DataFrame, group_selection: bool) -> pd.DataFrame:
    """Across-subject rows: mean score per layer, and the score at the chosen layers.

    ``group_selection``: the group's own layer is chosen on the mean selection score
    (encoding: training cross-validation); else (leave-one-subject-out selection) the
    group rows carry no selection score.
    """
    keys = [*_KEYS[:3], "extractor", "layer", "position", "depth", "roi", "selected_on"]
    layers = (
        subjects.groupby(keys, sort=False, dropna=False)
        .agg(
            n_targets=("n_targets", "mean"),
            n_subjects=("subject", "nunique"),
            score=("score", "mean"),
            selection_score=("selection_score", "mean"),
        )
        .reset_index()
        .assign(subject=GROUP_SUBJECT)
    )
    if not group_selection:
        layers["selection_score"] = np.nan
    chosen = subjects[subjects["best"]]
    selected = (
        chosen.groupby([*_KEYS[:3], "extractor", "roi", "selected_on"], sort=False, dropna=False)
        .agg(
            n_targets=("n_targets", "mean"),
            n_subjects=("subject", "nunique"),
            score=("score", "mean"),
        )
        .reset_index()
        .assign(
            subject=GROUP_SUBJECT,
            layer=SELECTED_LAYER,
            position=np.nan,
            depth=np.nan,
            selection_score=np.nan,
        )
    )
    return pd.concat([layers, selected], ignore_index=True)


def _finish(
    subjects: pd.DataFrame,
    group_selection: bool,
    targets: Mapping[tuple, Mapping[str, Mapping[int, np.ndarray]]] | None = None,
) -> pd.DataFrame:
    """Flag per-subject best layers, add the group rows and the selection uncertainty
    (on the criterion of the group's choice), order the table."""
    if subjects.empty:
        return pd.DataFrame(columns=list(LAYER_SWEEP_COLUMNS))
    subjects = subjects.reset_index(drop=True)
    subjects["best"] = choose_best_layers(subjects)
    group = _group_rows(subjects, group_selection)
    group["best"] = False
    if group_selection:
        per_layer = group["layer"] != SELECTED_LAYER
        group.loc[per_layer, "best"] = choose_best_layers(group[per_layer])
    table = pd.concat([subjects, group], ignore_index=True)
    criterion = "selection_score" if group_selection else "score"
    table = _with_selection_uncertainty(table, subjects, criterion, targets)
    table["_sel"] = table["layer"] == SELECTED_LAYER
    table = table.sort_values(
        ["stage", "sweep", "metric", "subject", "roi", "_sel", "position"], kind="stable"
    ).reset_index(drop=True)
    table["best"] = table["best"].astype(bool)
    return table[list(LAYER_SWEEP_COLUMNS)]


def encoding_sweep_table(
    stores: Sequence[tuple[str, str, xr.Dataset]], sweeps: Sequence[Mapping]
) -> pd.DataFrame:
    """Layer × ROI scores of the encoding sweeps, per subject and across subjects.

    Parameters
    ----------
    stores : sequence of (stage, path, Dataset)
        Score stores (``evaluation`` or ``trial_evaluation``) with variables ``r`` and
        ``cv_score`` on the target dim, coordinate ``roi`` and attributes ``model`` and
        ``subject``; stores of models outside ``sweeps`` are ignored.
    sweeps : sequence of dict
        One record per layer model (:meth:`neuroflow.workflow.sweeps.SweepLayer.as_dict`):
        ``sweep``, ``model``, ``extractor``, ``layer``, ``position``, ``depth``.

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`LAYER_SWEEP_COLUMNS` (``metric`` is ``"r"``). Per-subject rows,
        then group rows (``subject == "group"``: means over subjects; the group's best
        layer is chosen on the mean training score), and per ROI the
        :data:`SELECTED_LAYER` row. Group rows carry the selection uncertainty of the
        mean training score's argmax (module docstring): subjects resampled with 3 or
        more, else each subject's targets in the ROI.
    """
    by_model = {str(s["model"]): dict(s) for s in sweeps}
    rows = []
    targets: dict[tuple, dict[str, dict[int, np.ndarray]]] = {}
    for stage, path, ds in stores:
        record = by_model.get(_sweep_model(str(ds.attrs.get("model")), stage))
        if record is None:
            continue
        unit = "stimuli" if stage.startswith("trial") else "runs"
        subject = str(ds.attrs.get("subject"))
        for row in _roi_means(ds, path):
            key = (stage, record["sweep"], "r", row["roi"])
            per_layer = targets.setdefault(key, {}).setdefault(subject, {})
            per_layer[int(record["position"])] = row.pop("_targets")
            rows.append(
                {
                    "stage": stage,
                    **{k: record[k] for k in ("sweep", "extractor", "layer", "position", "depth")},
                    "subject": str(ds.attrs.get("subject")),
                    "metric": "r",
                    "n_subjects": 1,
                    "selected_on": f"cross-validation on the training {unit}",
                    **row,
                }
            )
    return _finish(pd.DataFrame(rows), group_selection=True, targets=targets)


def _sweep_model(name: str, stage: str) -> str:
    """The configured model behind a store's model name (single-trial models: ``<m>_trials``)."""
    if stage.startswith("trial") and name.endswith(TRIAL_MODEL_SUFFIX):
        return name[: -len(TRIAL_MODEL_SUFFIX)]
    return name


def _space_label(row: Any) -> str:
    """``"<extractor>:<layer>"`` of a summary row (its ``feature_space``)."""
    for value in (row.feature_space, row.layer):
        if isinstance(value, str) and ":" in value:
            return value
    return str(row.feature_space)


def _is_swept_analysis(analysis: str, metric: str) -> bool:
    known = analysis in _ANALYSES or analysis.startswith(_ANALYSIS_PREFIXES)
    return known and not any(word in metric for word in _NOT_SCORES)


def analysis_sweep_table(
    summary: pd.DataFrame, layer_order: Mapping[str, Sequence[str]]
) -> pd.DataFrame:
    """Layer × ROI scores of RSA and decoding, each subject's layer chosen on the others.

    Parameters
    ----------
    summary : pandas.DataFrame
        The summary table (``scores.tsv``,
        :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`): rows with ``analysis``,
        ``metric``, ``value``, ``subject``, ``feature_space`` (``"<extractor>:<layer>"``;
        a bare extractor name is taken at its last layer), ``layer``, ``roi`` and
        ``statistic``.
    layer_order : dict of str to list of str
        Extractor -> its layer store names in extraction order. Extractors with fewer
        than two layers among an analysis's rows form no sweep.

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`LAYER_SWEEP_COLUMNS` (``stage`` is the analysis, ``sweep`` the
        extractor). A subject's ``selection_score`` at a layer is the mean score of
        the other subjects there (NaN with one subject: no layer is chosen). Group
        rows carry the selection uncertainty of the group-mean score's argmax with 3
        or more subjects (module docstring); with fewer it is missing (the summary
        table holds no per-stimulus scores to resample).
    """
    needed = {"analysis", "metric", "value", "subject", "feature_space", "layer", "roi"}
    needed.add("statistic")
    if summary.empty or not needed <= set(summary.columns):
        return pd.DataFrame(columns=list(LAYER_SWEEP_COLUMNS))
    rows = summary[
        (summary["statistic"] == "value")
        & (summary["subject"].astype(str) != GROUP_SUBJECT)
        & pd.to_numeric(summary["value"], errors="coerce").notna()
    ]
    records = []
    for row in rows.itertuples(index=False):
        analysis, metric = str(row.analysis), str(row.metric)
        if not _is_swept_analysis(analysis, metric):
            continue
        extractor, _, layer = _space_label(row).partition(":")
        order = list(layer_order.get(extractor, ()))
        layer = layer or (order[-1] if order else "")
        if layer not in order:
            continue
        roi = "" if pd.isna(row.roi) else str(row.roi)
        records.append(
            {
                "stage": analysis,
                "sweep": extractor,
                "extractor": extractor,
                "layer": layer,
                "position": order.index(layer),
                "subject": str(row.subject),
                "roi": roi,
                "metric": metric,
                "n_targets": np.nan,
                "n_subjects": 1,
                "score": float(row.value),
                "selected_on": "the other subjects",
            }
        )
    table = pd.DataFrame(records)
    if table.empty:
        return pd.DataFrame(columns=list(LAYER_SWEEP_COLUMNS))
    n_layers = table.groupby(["stage", "sweep", "metric"])["layer"].transform("nunique")
    table = table[n_layers >= 2].copy()
    if table.empty:
        return pd.DataFrame(columns=list(LAYER_SWEEP_COLUMNS))
    # relative depth among the layers the analysis compared
    ranks = table.groupby(["stage", "sweep", "metric"])["position"].rank(method="dense") - 1
    span = ranks.groupby([table["stage"], table["sweep"], table["metric"]]).transform("max")
    table["depth"] = (ranks / span.where(span > 0, 1)).astype(float)
    table["selection_score"] = _leave_one_subject_out_means(table)
    return _finish(table, group_selection=False)


def _leave_one_subject_out_means(table: pd.DataFrame) -> pd.Series:
    """Mean score of the other subjects at the same layer (NaN when there are none)."""
    keys = ["stage", "sweep", "metric", "roi", "layer"]
    grouped = table.groupby(keys, sort=False, dropna=False)["score"]
    total, count = grouped.transform("sum"), grouped.transform("count")
    others = count - 1
    return ((total - table["score"]) / others.where(others > 0)).astype(float)


def plot_layer_sweep(
    table: pd.DataFrame, *, stage: str, sweep: str, metric: str, max_rois: int = 8
) -> Figure:
    """The group's score against relative layer depth, one line per ROI.

    Parameters
    ----------
    table : pandas.DataFrame
        A layer-sweep table (:data:`LAYER_SWEEP_COLUMNS`).
    stage, sweep, metric : str
        Which sweep to draw.
    max_rois : int
        Most ROIs drawn (parcellations have hundreds): ``all`` and the ROIs whose
        best layer scores highest; the table has every ROI.

    Returns
    -------
    fig : matplotlib.figure.Figure
        Filled circles mark the group's chosen layer (encoding sweeps); a dashed line
        per ROI gives the mean score at each subject's chosen layer; a horizontal bar
        the interval of the best layer's depth under resampling, through the layer
        chosen most often, labelled with its selection frequency.
    """
    part = table[
        (table["stage"] == stage)
        & (table["sweep"] == sweep)
        & (table["metric"] == metric)
        & (table["subject"] == GROUP_SUBJECT)
    ]
    if part.empty:
        raise ValueError(
            f"No group rows for sweep {sweep!r} of stage {stage!r} and metric {metric!r} "
            "in `table`."
        )
    rois = sorted(part["roi"].unique().tolist())
    shown = _shown_rois(part, rois, max_rois)
    fig = new_figure((7.0, 3.8))
    ax = fig.add_subplot()
    resampled = ""
    for roi, rows in part[part["roi"].isin(shown)].groupby("roi", sort=True):
        layers = rows[rows["layer"] != SELECTED_LAYER].sort_values("depth")
        label = str(roi) or "(whole)"
        (line,) = ax.plot(layers["depth"], layers["score"], "-o", ms=3, mfc="white", label=label)
        chosen = layers[layers["best"].astype(bool)]
        ax.plot(chosen["depth"], chosen["score"], "o", ms=7, color=line.get_color())
        selected = rows[rows["layer"] == SELECTED_LAYER]["score"]
        if len(selected) and np.isfinite(selected.iloc[0]):
            ax.axhline(selected.iloc[0], color=line.get_color(), ls="--", lw=0.8)
        resampled = _draw_selection_interval(ax, layers, line.get_color()) or resampled
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel("relative depth of the layer (0: first compared layer, 1: last)")
    ax.set_ylabel(f"{metric} (mean over subjects)")
    selected_on = str(part["selected_on"].iloc[0])
    title = f"{sweep} ({stage}); layers chosen on {selected_on}"
    if resampled:
        title += (
            f"\nbars: {SELECTION_LEVEL:.0%} interval of the best depth over "
            f"{N_SELECTION_BOOTSTRAPS} resamples of the {resampled};\n%: how often the "
            "most frequent best layer wins"
        )
    if len(shown) < len(rois):
        title += f"\n{len(shown)} of {len(rois)} ROIs: the best-scoring ones and 'all'"
    ax.set_title(title, fontsize="small")
    legend_outside(ax, fontsize="small")
    fig.tight_layout()
    return fig


def _draw_selection_interval(ax: Any, layers: pd.DataFrame, color: Any) -> str:
    """Bar of the best depth's interval through the most frequent best layer.

    Returns what was resampled (empty when the ROI has no selection frequencies).
    """
    if "selection_frequency" not in layers:
        return ""
    frequency = pd.to_numeric(layers["selection_frequency"], errors="coerce")
    if not np.isfinite(frequency).any():
        return ""
    modal = layers.loc[frequency.idxmax()]
    low, high = float(modal["best_depth_lower"]), float(modal["best_depth_upper"])
    depth, score = float(modal["depth"]), float(modal["score"])
    ax.errorbar(
        depth,
        score,
        xerr=[[max(depth - low, 0.0)], [max(high - depth, 0.0)]],
        fmt="none",
        ecolor=color,
        capsize=3,
        lw=1.2,
    )
    ax.annotate(
        f"{frequency.max():.0%}",
        (depth, score),
        textcoords="offset points",
        xytext=(4, 4),
        fontsize="x-small",
        color=color,
    )
    how = modal["selection_resampled"]
    return how if isinstance(how, str) else ""


def _shown_rois(part: pd.DataFrame, rois: list[str], max_rois: int) -> list[str]:
    """At most ``max_rois`` ROIs: ``all`` and those with the highest best-layer score."""
    if len(rois) <= max_rois:
        return rois
    layers = part[part["layer"] != SELECTED_LAYER]
    peak = layers.groupby("roi")["score"].max().drop(ALL_ROI, errors="ignore")
    top = peak.sort_values(ascending=False, kind="stable").index[: max_rois - 1].tolist()
    return sorted([*top, *([ALL_ROI] if ALL_ROI in rois else [])])


def stage_of(path: str | Path) -> str:
    """Stage folder of a score store: ``results/<stage>/<model>-<v>/sub-XX_scores.zarr``."""
    return Path(path).parent.parent.name

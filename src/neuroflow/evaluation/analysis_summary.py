"""Tidy summary rows of decoding and RSA stores, in the layout of the summary table.

Rows have the columns of :data:`neuroflow.evaluation.summary.TABLE_COLUMNS`. These
analyses compare a feature space directly, so ``model`` is the feature space itself,
spelled ``<extractor>:<layer>`` like ``feature_space`` (a bare extractor name in a store
is its last layer, see :func:`neuroflow.evaluation.summary.space_names`); rows without a
feature space (classification of conditions) leave ``model``, ``extractor``,
``feature_space`` and ``layer`` empty; cross-subject decoding rows name their
classifier in ``model``. :func:`append_rows` adds rows to an existing TSV,
keeping its columns and filling the ones a table lacks with ``n/a``. Rows of EEG cluster
tests carry ``inconclusive``: whether the cluster test behind the row's ``p_value``
could not reach its level (too few permutations, distinct relabellings or subjects); its
``p_value`` is then ``n/a``.

The RSA rows are made by :mod:`neuroflow.evaluation.rsa_summary` with the helpers here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.evaluation.summary import TABLE_COLUMNS, space_names
from neuroflow.peaks import peak_index

__all__ = [
    "append_rows",
    "cross_subject_rows",
    "decoding_rows",
    "fmri_decoding_rows",
    "group_t_test",
]


LayerOrder = Mapping[str, Sequence[str]] | None


#: Variables of a ``decode_eeg`` store that :func:`decoding_rows` reads.
_DECODING_ROW_VARIABLES = (
    "identification",
    "identification_chance",
    "identification_p",
    "feature_score",
    "feature_cluster_p",
    "feature_inconclusive",
    "feature_peak_latency",
    "feature_onset_latency",
    "class_score",
    "class_chance",
    "class_cluster_p",
    "class_inconclusive",
    "group_feature_cluster_p",
    "group_class_cluster_p",
)


#: Variables of a ``decode_fmri`` store that :func:`fmri_decoding_rows` reads.
_FMRI_DECODING_ROW_VARIABLES = (
    "identification",
    "identification_chance",
    "identification_p",
    "concept_map",
    "concept_map_p",
    "concept_map_chance",
    "concept_mean_auc",
    "concept_mean_auc_p",
)


def _row(**kw) -> dict:
    base = dict.fromkeys(TABLE_COLUMNS, np.nan)
    base.update(statistic="value", n_subjects=1, roi="")
    base.update(kw)
    return base


def _space(label: object, layer_order: LayerOrder) -> dict:
    """``model``, ``extractor``, ``feature_space`` and ``layer`` of a compared feature space."""
    extractor, layer, space = space_names(str(label), None, layer_order)
    return {"model": space, "extractor": extractor, "feature_space": space, "layer": layer}


_NO_SPACE = {"model": np.nan, "extractor": np.nan, "feature_space": np.nan, "layer": np.nan}


def _in_memory(ds: xr.Dataset, names: Sequence[str]) -> xr.Dataset:
    """``ds`` with the variables ``names`` (those it has) read into memory.

    The row builders select one value at a time; on a lazily opened store each selection
    would read the store again. Variables not named stay lazy (null distributions are
    large and no row needs them).

    Parameters
    ----------
    ds : xarray.Dataset
        The store.
    names : sequence of str
        Variables the rows read.

    Returns
    -------
    ds : xarray.Dataset
        A new dataset; ``ds`` itself is left as it was.
    """
    return ds.assign({name: ds[name].compute() for name in names if name in ds})


def _cluster_row_p(ds: xr.Dataset, name: str, sel: dict) -> dict:
    """``p_value`` (smallest cluster p) and ``inconclusive`` of a cluster-test row.

    ``inconclusive`` comes from the per-subject ``*_inconclusive`` variable (e.g.
    ``class_inconclusive`` for ``class_cluster_p``), else from ``attrs["inconclusive"]``
    (group tests); it is NaN for stores that record neither (format 5 and older).
    """
    p = ds[name].sel(sel).values if sel else ds[name].values
    flag_var = name.replace("_cluster_p", "_inconclusive")
    if flag_var in ds:
        flag: object = bool(ds[flag_var].sel(sel).values)
    elif "inconclusive" in ds.attrs:
        flag = name in ds.attrs["inconclusive"]
    else:
        flag = np.nan
    return {
        "p_value": float(np.nanmin(p)) if np.isfinite(p).any() else np.nan,
        "inconclusive": flag,
    }


def _group_rows(ds: xr.Dataset, layer_order: LayerOrder) -> list[dict]:
    """Group rows of the sign-flip cluster tests: peak of the mean time course."""
    rows = []
    n_subjects = ds.sizes["subject"]
    base = {"subject": "group", "statistic": "mean", "n_subjects": n_subjects, "roi": "eeg"}
    if "group_feature_cluster_p" in ds and "feature_score" in ds:
        mean = ds["feature_score"].mean("subject")
        for fs in ds["feature_space"].values:
            rows.append(
                _row(
                    **base,
                    **_space(fs, layer_order),
                    analysis="feature_time_course",
                    metric="peak_r",
                    value=float(mean.sel(feature_space=fs).max()),
                    chance=0.0,
                    **_cluster_row_p(ds, "group_feature_cluster_p", {"feature_space": fs}),
                )
            )
    if "group_class_cluster_p" in ds and "class_score" in ds:
        rows.append(
            _row(
                **base,
                **_NO_SPACE,
                analysis="classification",
                metric="peak_balanced_accuracy",
                value=float(ds["class_score"].mean("subject").max()),
                chance=float(ds["class_chance"].mean()),
                **_cluster_row_p(ds, "group_class_cluster_p", {}),
            )
        )
    return rows


def decoding_rows(ds: xr.Dataset, layer_order: LayerOrder = None) -> pd.DataFrame:
    """Summary rows of a ``decode_eeg`` store.

    Parameters
    ----------
    ds : xarray.Dataset
        The store.
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order (names the layer of a bare
        feature space).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`. Identification
        metrics with chance and permutation p per subject, feature space and decoder;
        peak score and latencies of the feature time courses; peak classification
        score; with group tests, the peak of the subjects' mean time courses
        (``subject = "group"``, ``statistic = "mean"``). Peak rows carry the smallest
        cluster p-value of their cluster test and ``inconclusive`` (True when the test
        cannot reach its level, and ``p_value`` is then NaN); other rows have
        ``inconclusive`` NaN.
    """
    ds = _in_memory(ds, _DECODING_ROW_VARIABLES)
    rows = []
    for sub in ds["subject"].values:
        s = str(sub)
        if "identification" in ds:
            for fs in ds["feature_space"].values:
                names = _space(fs, layer_order)
                for dec in ds["decoder"].values:
                    for met in ds["metric"].values:
                        sel = {"subject": sub, "feature_space": fs, "decoder": dec, "metric": met}
                        rows.append(
                            _row(
                                subject=s,
                                **names,
                                roi="eeg",
                                analysis=f"identification_{dec}",
                                metric=str(met),
                                value=float(ds["identification"].sel(sel)),
                                chance=float(
                                    ds["identification_chance"].sel(
                                        subject=sub, feature_space=fs, metric=met
                                    )
                                ),
                                p_value=float(ds["identification_p"].sel(sel)),
                            )
                        )
        if "feature_score" in ds:
            for fs in ds["feature_space"].values:
                sel = {"subject": sub, "feature_space": fs}
                common = {"subject": s, **_space(fs, layer_order), "roi": "eeg"}
                rows += [
                    _row(
                        **common,
                        analysis="feature_time_course",
                        metric="peak_r",
                        value=float(ds["feature_score"].sel(sel).max()),
                        chance=0.0,
                        **_cluster_row_p(ds, "feature_cluster_p", sel),
                    ),
                    _row(
                        **common,
                        analysis="feature_time_course",
                        metric="peak_latency_s",
                        value=float(ds["feature_peak_latency"].sel(sel)),
                    ),
                    _row(
                        **common,
                        analysis="feature_time_course",
                        metric="onset_latency_s",
                        value=float(ds["feature_onset_latency"].sel(sel)),
                    ),
                ]
        if "class_score" in ds:
            rows.append(
                _row(
                    subject=s,
                    **_NO_SPACE,
                    roi="eeg",
                    analysis="classification",
                    metric="peak_balanced_accuracy",
                    value=float(ds["class_score"].sel(subject=sub).max()),
                    chance=float(ds["class_chance"].sel(subject=sub)),
                    **_cluster_row_p(ds, "class_cluster_p", {"subject": sub}),
                )
            )
    rows += _group_rows(ds, layer_order)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def fmri_decoding_rows(ds: xr.Dataset, layer_order: LayerOrder = None) -> pd.DataFrame:
    """Summary rows of a ``decode_fmri`` store: identification and concept decoding.

    Parameters
    ----------
    ds : xarray.Dataset
        The store (see :func:`neuroflow.decoding.fmri.decode_fmri`).
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order (names the layer of a bare
        feature space).

    Returns
    -------
    table : pandas.DataFrame
        Identification rows per subject, ROI, space and decoder (``analysis =
        "identification_fmri"`` for ridge, ``"identification_fmri_<decoder>"`` for the
        others; ``metric`` top-k / mean rank) with chance and permutation p; concept
        decoding rows per subject and ROI (``analysis = "concept_decoding_fmri"``,
        ``metric`` ``mean_auc`` (chance 0.5) or ``mean_average_precision`` (chance the
        mean prevalence of the concepts)) with their permutation p. Group rows
        (``subject = "group"``, ``statistic = "mean"``) hold the subjects' mean and
        chance per ROI (and space, decoder and metric), with a one-sided t-test over
        subjects of their scores beyond chance (:func:`group_t_test`; lower mean rank
        is better) as ``p_value``, except for the mean average precision. Undefined
        values (a region a subject lacks, top-k with k at or above the number of test
        stimuli) are left out.
    """
    ds = _in_memory(ds, _FMRI_DECODING_ROW_VARIABLES)
    rows = []
    if "identification" in ds:
        decoders = ds["decoder"].values if "decoder" in ds.dims else [None]
        for sel in _cells(ds, ("subject", "roi", "feature_space", "metric")):
            for dec in decoders:
                full = sel if dec is None else {**sel, "decoder": dec}
                value = float(ds["identification"].sel(full))
                if not np.isfinite(value):
                    continue
                name = (
                    "identification_fmri"
                    if dec in (None, "ridge")
                    else f"identification_fmri_{dec}"
                )
                rows.append(
                    _row(
                        subject=str(sel["subject"]),
                        **_space(sel["feature_space"], layer_order),
                        roi=str(sel["roi"]),
                        analysis=name,
                        metric=str(sel["metric"]),
                        value=value,
                        chance=float(ds["identification_chance"].sel(sel)),
                        p_value=float(ds["identification_p"].sel(full)),
                    )
                )
        rows += _identification_group_rows(ds, decoders, layer_order)
    if "concept_map" in ds:
        for sel in _cells(ds, ("subject", "roi")):
            chance = {
                "mean_auc": 0.5,
                "mean_average_precision": float(
                    ds["concept_map_chance"].sel(subject=sel["subject"])
                ),
            }
            for metric, var in (
                ("mean_auc", "concept_mean_auc"),
                ("mean_average_precision", "concept_map"),
            ):
                value = float(ds[var].sel(sel))
                if not np.isfinite(value):
                    continue
                rows.append(
                    _row(
                        subject=str(sel["subject"]),
                        **_NO_SPACE,
                        roi=str(sel["roi"]),
                        analysis="concept_decoding_fmri",
                        metric=metric,
                        value=value,
                        chance=chance[metric],
                        p_value=float(ds[f"{var}_p"].sel(sel)),
                    )
                )
        rows += _concept_group_rows(ds)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _identification_group_rows(ds: xr.Dataset, decoders, layer_order: LayerOrder) -> list[dict]:
    """Group means of the fMRI identification scores, with a t-test over subjects."""
    rows = []
    for sel in _cells(ds, ("roi", "feature_space", "metric")):
        for dec in decoders:
            full = sel if dec is None else {**sel, "decoder": dec}
            values = ds["identification"].sel(full).values
            if not np.isfinite(values).any():
                continue
            chance = np.broadcast_to(ds["identification_chance"].sel(sel).values, values.shape)
            name = "identification_fmri" if dec in (None, "ridge") else f"identification_fmri_{dec}"
            group = _group_row(values, chance, lower_is_better=sel["metric"] == "mean_rank")
            rows.append(
                _row(
                    **group,
                    **_space(sel["feature_space"], layer_order),
                    roi=str(sel["roi"]),
                    analysis=name,
                    metric=str(sel["metric"]),
                )
            )
    return rows


def _concept_group_rows(ds: xr.Dataset) -> list[dict]:
    """Group means of the concept decoding scores; mean AUC with a t-test over subjects.

    The mean average precision has no group test: the prevalence it is compared with
    per subject falls short of an uninformed decoder's expected average precision.
    """
    rows = []
    prevalence = ds["concept_map_chance"].values
    for roi in ds["roi"].values:
        for metric, var, chance in (
            ("mean_auc", "concept_mean_auc", np.full(prevalence.shape, 0.5)),
            ("mean_average_precision", "concept_map", prevalence),
        ):
            values = ds[var].sel(roi=roi).values
            if not np.isfinite(values).any():
                continue
            group = _group_row(values, chance, test=metric == "mean_auc")
            rows.append(
                _row(
                    **group,
                    **_NO_SPACE,
                    roi=str(roi),
                    analysis="concept_decoding_fmri",
                    metric=metric,
                )
            )
    return rows


def _cells(ds: xr.Dataset, dims: Sequence[str]) -> list[dict[str, object]]:
    """Every combination of the coordinates of ``dims``, as ``sel`` dicts."""
    from itertools import product

    values = [ds[d].values for d in dims]
    return [dict(zip(dims, combo, strict=True)) for combo in product(*values)]


def group_t_test(effects: np.ndarray) -> float:
    """One-sided one-sample t-test over subjects that their effects exceed 0.

    Parameters
    ----------
    effects : array-like, shape (n_subjects,)
        Each subject's chance-corrected score (higher is better); NaN for a subject
        without one.

    Returns
    -------
    p : float
        :func:`scipy.stats.ttest_1samp` ``alternative="greater"`` over the finite
        effects; NaN with fewer than 2 of them or when they are all equal.
    """
    from scipy.stats import ttest_1samp

    d = np.asarray(effects, dtype=np.float64)
    d = d[np.isfinite(d)]
    if d.size < 2 or np.ptp(d) == 0:
        return float("nan")
    return float(ttest_1samp(d, 0.0, alternative="greater").pvalue)


def _group_row(values, chances, lower_is_better: bool = False, test: bool = True) -> dict:
    """``value``, ``chance``, ``n_subjects`` and ``p_value`` of a group-mean row."""
    values = np.asarray(values, dtype=np.float64)
    chances = np.asarray(chances, dtype=np.float64)
    ok = np.isfinite(values)
    effects = (chances - values) if lower_is_better else (values - chances)
    return {
        "subject": "group",
        "statistic": "mean",
        "n_subjects": int(ok.sum()),
        "value": float(values[ok].mean()),
        "chance": float(np.nanmean(chances[ok])) if np.isfinite(chances[ok]).any() else np.nan,
        "p_value": group_t_test(effects) if test else np.nan,
    }


def cross_subject_rows(ds: xr.Dataset) -> pd.DataFrame:
    """Summary rows of a ``decode_eeg_cross_subject`` store.

    Parameters
    ----------
    ds : xarray.Dataset
        The store (see
        :func:`neuroflow.decoding.cross_subject_stage.decode_eeg_cross_subject`).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`, ``roi = "eeg"``,
        ``analysis = "cross_subject_<alignment>"`` (``"cross_session_<alignment>"`` for
        leave-one-session-out; alignment ``euclidean`` or ``none``) and ``model`` the
        classifier. Per held-out subject (``statistic = "value"``; a subject's held-out
        sessions averaged) and over held-out units (``subject = "group"``,
        ``statistic = "mean"``): for ``time_resolved``, ``peak_balanced_accuracy``,
        ``peak_latency_s`` and ``window_balanced_accuracy`` (the mean over
        ``attrs["window"]``); for the whole-epoch classifiers, ``balanced_accuracy``.
        Accuracy rows carry their chance level.
    """
    unit = "session" if ds.attrs.get("held_out_unit") == "session" else "subject"
    times = np.asarray(ds["time"].values, dtype=np.float64)
    window = ds.attrs.get("window") or [times[0], times[-1]]
    in_window = (times >= float(window[0]) - 1e-9) & (times <= float(window[1]) + 1e-9)
    subjects = np.asarray([str(s) for s in ds["subject"].values])
    chance = np.asarray(ds["cross_subject_chance"].values, dtype=np.float64)
    names = [str(s) for s in dict.fromkeys(subjects)]
    # per subject (its held-out sessions averaged), then the mean over held-out units
    cells = [(s, subjects == s, "value", 1) for s in names]
    cells.append(("group", np.ones(subjects.size, bool), "mean", len(names)))
    rows = []
    for alignment in ds["alignment"].values:
        common = {k: v for k, v in _NO_SPACE.items() if k != "model"}
        common.update(roi="eeg", analysis=f"cross_{unit}_{alignment}")
        for subject, pick, statistic, n in cells:
            base = {**common, "subject": subject, "statistic": statistic, "n_subjects": n}
            level = float(chance[pick].mean())
            if "cross_subject_score" in ds:
                course = ds["cross_subject_score"].sel(alignment=alignment).values[pick]
                course = course.mean(axis=0)
                peak = int(peak_index(course, times))  # at or after the onset
                model = {"model": "time_resolved"}
                rows += [
                    _row(
                        **base,
                        **model,
                        metric="peak_balanced_accuracy",
                        value=float(course[peak]),
                        chance=level,
                    ),
                    _row(**base, **model, metric="peak_latency_s", value=float(times[peak])),
                    _row(
                        **base,
                        **model,
                        metric="window_balanced_accuracy",
                        value=float(course[in_window].mean()),
                        chance=level,
                    ),
                ]
            if "cross_subject_epoch_score" in ds:
                scores = ds["cross_subject_epoch_score"].sel(alignment=alignment)
                for classifier in ds["classifier"].values:
                    values = scores.sel(classifier=classifier).values[pick]
                    rows.append(
                        _row(
                            **base,
                            model=str(classifier),
                            metric="balanced_accuracy",
                            value=float(values.mean()),
                            chance=level,
                        )
                    )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def append_rows(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Append rows to a tab-separated summary, creating it when absent.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows to add.
    path : path-like
        TSV file; its existing columns come first, new columns are appended, and
        missing values are written as ``n/a``.

    Returns
    -------
    path : Path
    """
    path = Path(path)
    if path.exists():
        old = pd.read_csv(
            path, sep="\t", na_values=["n/a"], keep_default_na=False, dtype={"subject": str}
        )
        columns = list(old.columns) + [c for c in table.columns if c not in old.columns]
        out = pd.concat([old, table], ignore_index=True)[columns]
    else:
        out = table
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, sep="\t", index=False, na_rep="n/a")
    return path

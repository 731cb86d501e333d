"""Summary rows and figures of the EEG encoding models.

An EEG encoding score store (written by the ``eeg_evaluation`` stage) holds its per-target
scores on (channel, latency), with ``roi`` (the channel) on ``channel``, and the
channel-averaged test r per latency, ``r_course`` (latency,). The summary keeps the same
rows as the fMRI encoding models (the ROI metrics per subject × model × channel, plus
``roi = "all"``; see :func:`neuroflow.evaluation.summary.roi_summary` and
:func:`neuroflow.evaluation.summary.long_rows`), with ``analysis = "eeg_encoding"``, and
adds the peak over the latencies ``>= 0`` (:mod:`neuroflow.peaks`) of the largest r over
channels at each latency (``metric`` ``peak_r`` and ``peak_latency``), the number an EEG
encoding study reports: per subject with the cluster p-value at the peak and the
bootstrap interval over stimuli that the encoding stage recorded, and for the group mean
course with a bootstrap interval over subjects. One figure per model draws the
channel-averaged time course per subject.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.peaks import peak_index

__all__ = [
    "EEG_ENCODING_ANALYSIS",
    "EEG_MAP_DIMS",
    "GROUP_BOOTSTRAPS",
    "eeg_encoding_figures",
    "eeg_encoding_rows",
    "group_peak_interval",
    "peak_time_course",
    "r_time_course",
]

#: ``analysis`` of the EEG encoding rows of ``scores.tsv``.
EEG_ENCODING_ANALYSIS = "eeg_encoding"
#: Dims of the per-target variables of an EEG encoding score store.
EEG_MAP_DIMS = ("channel", "latency")
#: Resamplings of the subjects for the interval of the group peak latency (seed 0).
GROUP_BOOTSTRAPS = 1000


def _check_store(ds: xr.Dataset, path: str | os.PathLike) -> None:
    """Raise unless ``ds`` has the (channel, latency) layout of an EEG score store."""
    if "r" not in ds:
        raise ValueError(f"{path}: variable `r` is missing from the score store.")
    if ds["r"].dims != EEG_MAP_DIMS:
        raise ValueError(
            f"{path}: `r` of an EEG encoding score store must have dims {EEG_MAP_DIMS}, "
            f"got {ds['r'].dims} instead."
        )
    for dim in EEG_MAP_DIMS:
        if dim not in ds.indexes:
            raise ValueError(
                f"{path}: an EEG encoding score store must have a `{dim}` dimension "
                f"coordinate, got coordinates {sorted(ds.coords)} instead."
            )
        if ds.indexes[dim].has_duplicates:
            raise ValueError(f"{path}: coordinate `{dim}` must hold unique values.")


def r_time_course(ds: xr.Dataset, path: str | os.PathLike = "score store") -> xr.DataArray:
    """The test-set Pearson r averaged over channels, at each latency, of a score store.

    Parameters
    ----------
    ds : xarray.Dataset
        EEG encoding score store: ``r`` (channel, latency) and ``r_course`` (latency,),
        the channel mean of ``r`` that the evaluation stage writes.
    path : path-like
        Its path, named in errors.

    Returns
    -------
    course : xarray.DataArray, shape (n_latencies,)
        ``r_course`` (NaN where no channel has a finite score), dim ``latency`` in
        ascending order.
    """
    _check_store(ds, path)
    if "r_course" not in ds:
        raise ValueError(f"{path}: variable `r_course` is missing from the score store.")
    course = ds["r_course"]
    if course.dims != ("latency",):
        raise ValueError(
            f"{path}: `r_course` must have dims ('latency',), got {course.dims} instead."
        )
    return course.reset_coords(drop=True).astype(float).sortby("latency")


def peak_time_course(ds: xr.Dataset, path: str | os.PathLike = "score store") -> xr.DataArray:
    """The largest test-set Pearson r over channels, at each latency, of a score store.

    Parameters
    ----------
    ds : xarray.Dataset
        EEG encoding score store: ``r`` (channel, latency).
    path : path-like
        Its path, named in errors.

    Returns
    -------
    course : xarray.DataArray, shape (n_latencies,)
        NaN where no channel has a finite r; dim ``latency`` in ascending order.
    """
    _check_store(ds, path)
    r = ds["r"].reset_coords(drop=True).astype(float)
    finite = np.isfinite(r.values)
    best = np.where(finite, r.values, -np.inf).max(axis=0)
    values = np.where(finite.any(axis=0), best, np.nan)
    course = xr.DataArray(values, dims=("latency",), coords={"latency": r["latency"].values})
    return course.sortby("latency")


def group_peak_interval(
    courses: np.ndarray,
    latencies: np.ndarray,
    *,
    n_bootstraps: int = GROUP_BOOTSTRAPS,
    level: float = 0.95,
    seed: int = 0,
) -> np.ndarray:
    """Percentile interval of the group peak latency over resamplings of the subjects.

    Parameters
    ----------
    courses : ndarray, shape (n_subjects, n_latencies)
        Each subject's course (NaN where it has no value).
    latencies : ndarray, shape (n_latencies,)
        Seconds; peaks are searched at latencies ``>= 0`` only.
    n_bootstraps : int
        Resamplings of the subjects with replacement.
    level : float
        Coverage, in (0, 1).
    seed : int
        Seed of the resampling.

    Returns
    -------
    interval : ndarray of float64, shape (2,)
        Lower and upper limits (s); NaN when no resampled mean course has a peak.
    """
    courses = np.asarray(courses, dtype=np.float64)
    if courses.ndim != 2 or courses.shape[1] != np.asarray(latencies).size:
        raise ValueError(
            f"`courses` must have shape (n_subjects, {np.asarray(latencies).size}), got "
            f"{courses.shape} instead."
        )
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level!r} instead.")
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, courses.shape[0], size=(n_bootstraps, courses.shape[0]))
    finite = np.isfinite(courses)
    counts = finite[draws].sum(axis=1)
    sums = np.where(finite, courses, 0.0)[draws].sum(axis=1)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    index = np.asarray(peak_index(means, latencies))
    peaks = np.asarray(latencies, dtype=np.float64)[np.maximum(index, 0)][index >= 0]
    if peaks.size == 0:
        return np.full(2, np.nan)
    tail = 100 * (1 - level) / 2
    return np.percentile(peaks, [tail, 100 - tail])


def _attr_float(ds: xr.Dataset, name: str) -> float:
    """A numeric attribute of the encoding stage, NaN when absent or null."""
    value = ds.attrs.get(name)
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan
    )


def _peak_rows(
    stores: Sequence[xr.Dataset], paths: Sequence[str | os.PathLike], keys: pd.DataFrame
) -> pd.DataFrame:
    """Long ``peak_r`` / ``peak_latency`` rows per subject, and of the group mean course."""
    from neuroflow.evaluation.summary import GROUP_SUBJECT, TABLE_COLUMNS

    rows = []
    courses: dict[tuple[str, str, str, str], list[xr.DataArray]] = {}
    levels: dict[tuple[str, str, str, str], float] = {}
    for ds, path, (_, key) in zip(stores, paths, keys.iterrows(), strict=True):
        course = peak_time_course(ds, path)
        ident = (key["model"], key["extractor"], key["feature_space"], key["layer"])
        courses.setdefault(ident, []).append(course)
        level = _attr_float(ds, "ci_level")
        levels[ident] = level if np.isfinite(level) else 0.95
        ci = ds.attrs.get("peak_latency_ci") or [None, None]
        rows += _peak(
            course,
            key["subject"],
            ident,
            "value",
            1,
            p_value=_attr_float(ds, "peak_p"),
            interval=[np.nan if v is None else float(v) for v in ci],
            inconclusive=bool(ds.attrs.get("inference_inconclusive", False)),
        )
    for ident, parts in courses.items():
        joined = xr.concat(parts, dim="subject", join="outer")
        n = int(np.isfinite(joined.values).any(axis=-1).sum())
        latencies = joined["latency"].values
        interval = (
            group_peak_interval(joined.values, latencies, level=levels[ident])
            if n > 1
            else np.full(2, np.nan)
        )
        mean = joined.mean("subject", skipna=True)
        rows += _peak(mean, GROUP_SUBJECT, ident, "mean", n, interval=list(interval))
    out = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    out["analysis"] = EEG_ENCODING_ANALYSIS
    return out


def _peak(
    course: xr.DataArray,
    subject: str,
    ident: tuple[str, str, str, str],
    statistic: str,
    n: int,
    *,
    p_value: float = np.nan,
    interval: Sequence[float] = (np.nan, np.nan),
    inconclusive: bool = False,
) -> list[dict]:
    """The peak rows of one time course (none without a finite value at a latency >= 0):
    ``peak_r`` and ``peak_latency`` (with ``p_value``), and the bootstrap interval of the
    latency (``peak_latency_ci_lower`` / ``peak_latency_ci_upper``) where it is finite."""
    values = np.asarray(course.values, dtype=float)
    peak = int(peak_index(values, course["latency"].values))
    if peak < 0:  # no finite value at or after the onset
        return []
    model, extractor, space, layer = ident
    base = {
        "subject": subject,
        "model": model,
        "extractor": extractor,
        "feature_space": space,
        "layer": layer,
        "roi": "all",
        "statistic": statistic,
        "n_subjects": n,
        "p_value": p_value,
        "inconclusive": inconclusive,
    }
    latency = float(course["latency"].values[peak])
    rows = [
        {**base, "metric": "peak_r", "value": float(values[peak]), "chance": 0.0},
        {**base, "metric": "peak_latency", "value": latency, "chance": np.nan},
    ]
    for bound, value in zip(("lower", "upper"), interval, strict=True):
        if np.isfinite(value):
            rows.append(
                {
                    **base,
                    "metric": f"peak_latency_ci_{bound}",
                    "value": float(value),
                    "chance": np.nan,
                    "p_value": np.nan,
                }
            )
    return rows


def eeg_encoding_rows(
    stores: Sequence[xr.Dataset],
    paths: Sequence[str | os.PathLike] = (),
    topk_percent: float = 10.0,
    layer_order: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Tidy summary rows of EEG encoding score stores, per subject and model, with group rows.

    Parameters
    ----------
    stores : list of xarray.Dataset
        EEG encoding score stores (one per subject × model): ``r``, ``r_normalized``,
        ``significant``, ``noise_ceiling_r``, shape (n_channels, n_latencies), dims
        (channel, latency); ``r_course``, shape (n_latencies,); coordinate ``roi`` on
        ``channel``; attributes ``subject``, ``model`` and ``feature_spaces``.
    paths : list of path-like
        Their paths, named in errors (optional).
    topk_percent : float
        Share of targets in ``topk_r``, in ``(0, 100]``.
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order: a bare feature space (EEG
        score stores record no layer) is its extractor's last layer (see
        :func:`~neuroflow.evaluation.summary.space_names`).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`, with
        ``analysis = "eeg_encoding"``: the metrics of
        :data:`~neuroflow.evaluation.summary.ENCODING_METRICS` per subject × model ×
        channel (``roi`` the channel, ``"all"`` over every channel × latency), and
        group rows (``subject = "group"``, ``statistic`` mean, sd, sem); then
        ``metric`` ``peak_r`` (chance 0) and ``peak_latency`` (s): the peak at a
        latency >= 0 of the largest test r over channels (:func:`peak_time_course`),
        per subject (``statistic = "value"``, ``p_value`` the family-wise cluster
        p-value at the peak that the encoding stage recorded, ``inconclusive`` when
        its permutations could not reach its level) and of the group mean course
        (``statistic = "mean"``); ``metric`` ``peak_latency_ci_lower`` /
        ``peak_latency_ci_upper`` (s) give its bootstrap interval over stimuli (per
        subject, from the stage) and over subjects (group,
        :func:`group_peak_interval`, with 2 or more subjects).
    """
    from neuroflow.evaluation.summary import TABLE_COLUMNS, group_summary, long_rows
    from neuroflow.evaluation.summary_stage import _store_summary

    paths = list(paths) or [f"EEG encoding score store {i}" for i in range(len(stores))]
    if len(paths) != len(stores):
        raise ValueError(
            f"`paths` must have one entry per store ({len(stores)}), got {len(paths)} instead."
        )
    if not stores:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    per_store = []
    for ds, path in zip(stores, paths, strict=True):
        _check_store(ds, path)
        per_store.append(_store_summary(Path(path), ds, topk_percent, layer_order))
    per_subject = pd.concat(per_store, ignore_index=True)
    wide = pd.concat([per_subject, group_summary(per_subject)], ignore_index=True)
    keys = pd.concat([t.iloc[:1] for t in per_store], ignore_index=True)
    return pd.concat(
        [long_rows(wide, EEG_ENCODING_ANALYSIS), _peak_rows(stores, paths, keys)],
        ignore_index=True,
    )


def eeg_encoding_figures(
    stores: Sequence[xr.Dataset],
    plots_dir: str | os.PathLike,
    paths: Sequence[str | os.PathLike] = (),
) -> list[Path]:
    """Channel-averaged test r over latency, one figure per model and one line per subject.

    Parameters
    ----------
    stores : list of xarray.Dataset
        EEG encoding score stores (see :func:`eeg_encoding_rows`). Latency grids
        that differ are joined (NaN where a store lacks a latency).
    plots_dir : path-like
        Folder of the figures: ``eeg_encoding_<model>_r.png``.
    paths : list of path-like
        Their paths, named in errors (optional).

    Returns
    -------
    paths : list of Path
        The written figures, in model order.
    """
    from neuroflow.evaluation import analysis_plotting

    paths = list(paths) or ["score store"] * len(stores)
    by_model: dict[str, dict[str, tuple[xr.Dataset, str | os.PathLike]]] = {}
    for ds, path in zip(stores, paths, strict=True):
        model = str(ds.attrs.get("model", Path(path).stem))
        by_model.setdefault(model, {})[str(ds.attrs.get("subject", "n/a"))] = (ds, path)
    out = []
    for model in sorted(by_model):
        courses = {s: r_time_course(ds, p) for s, (ds, p) in sorted(by_model[model].items())}
        grid = xr.concat(list(courses.values()), dim="subject", join="outer")["latency"]
        lines = {f"sub-{s}": course.reindex(latency=grid).values for s, course in courses.items()}
        out.append(
            analysis_plotting.plot_time_courses(
                np.asarray(grid.values, dtype=float),
                lines,
                Path(plots_dir) / f"eeg_encoding_{model}_r.png",
                chance=0.0,
                ylabel="test r (mean over channels)",
            )
        )
    return out

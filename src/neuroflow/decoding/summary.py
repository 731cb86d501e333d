"""Tidy summary rows of decoding and RSA stores, in the layout of the summary table.

Rows have the columns of :data:`neuroflow.evaluation.summary.TABLE_COLUMNS`. These
analyses compare a feature space directly, so ``model`` is the feature space itself,
spelled ``<extractor>:<layer>`` like ``feature_space`` (a bare extractor name in a store
is its last layer, see :func:`neuroflow.evaluation.summary.space_names`); rows without a
feature space (classification of conditions) leave ``model``, ``extractor``,
``feature_space`` and ``layer`` empty. :func:`append_rows` adds rows to an existing TSV,
keeping its columns and filling the ones a table lacks with ``n/a``. Rows of EEG cluster
tests carry ``inconclusive``: whether the cluster test behind the row's ``p_value``
could not reach its level (too few permutations, distinct relabellings or subjects); its
``p_value`` is then ``n/a``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.evaluation.summary import TABLE_COLUMNS, space_names

__all__ = [
    "append_rows",
    "decoding_rows",
    "fmri_decoding_rows",
    "rsa_eeg_rows",
    "rsa_rows",
]

LayerOrder = Mapping[str, Sequence[str]] | None


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
    """Summary rows of a ``decode_fmri`` store: identification per subject, ROI and space.

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
        Rows with ``analysis = "identification_fmri"``, ``metric`` top-k / mean rank,
        chance and permutation p; undefined values (a region a subject lacks, top-k with
        k at or above the number of test stimuli) are left out.
    """
    rows = []
    for sub in ds["subject"].values:
        for roi in ds["roi"].values:
            for fs in ds["feature_space"].values:
                for met in ds["metric"].values:
                    sel = {"subject": sub, "roi": roi, "feature_space": fs, "metric": met}
                    value = float(ds["identification"].sel(sel))
                    if not np.isfinite(value):
                        continue
                    rows.append(
                        _row(
                            subject=str(sub),
                            **_space(fs, layer_order),
                            roi=str(roi),
                            analysis="identification_fmri",
                            metric=str(met),
                            value=value,
                            chance=float(ds["identification_chance"].sel(sel)),
                            p_value=float(ds["identification_p"].sel(sel)),
                        )
                    )
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def rsa_rows(ds: xr.Dataset, layer_order: LayerOrder = None) -> pd.DataFrame:
    """Summary rows of an ``rsa_fmri`` store (model similarity per ROI, with ceilings).

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
        One row per subject × comparison × layer × ROI (``metric`` is the comparison)
        and group rows with the noise ceiling's lower and upper bounds.
    """
    rows = []
    for layer in ds["layer"].values:
        names = _space(layer, layer_order)
        for comp in ds["comparison"].values:
            for roi in ds["roi"].values:
                for sub in ds["subject"].values:
                    sel = {"subject": sub, "comparison": comp, "layer": layer, "roi": roi}
                    rows.append(
                        _row(
                            subject=str(sub),
                            **names,
                            roi=str(roi),
                            analysis="rsa",
                            metric=str(comp),
                            value=float(ds["model_similarity"].sel(sel)),
                        )
                    )
                if "noise_ceiling" in ds:
                    for bound in ("lower", "upper"):
                        rows.append(
                            _row(
                                subject="group",
                                statistic=f"noise_ceiling_{bound}",
                                n_subjects=ds.sizes["subject"],
                                **names,
                                roi=str(roi),
                                analysis="rsa",
                                metric=str(comp),
                                value=float(
                                    ds["noise_ceiling"].sel(comparison=comp, bound=bound, roi=roi)
                                ),
                            )
                        )
                if comp == ds.attrs.get("inference_comparison"):
                    rows += _rsa_inference_rows(ds, str(layer), str(roi), str(comp), names)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _rsa_inference_rows(
    ds: xr.Dataset, layer: str, roi: str, comp: str, names: dict[str, str]
) -> list[dict]:
    """Group rows of the bootstrap interval and the subject-baseline comparison."""
    rows = []
    common = {"subject": "group", "n_subjects": ds.sizes["subject"], **names, "roi": roi}
    sel = {"layer": layer, "roi": roi}
    if "model_similarity_ci" in ds:
        for bound in ("lower", "upper"):
            value = float(ds["model_similarity_ci"].sel(bound=bound, **sel))
            rows.append(
                _row(
                    **common,
                    statistic=f"bootstrap_ci_{bound}",
                    analysis="rsa",
                    metric=comp,
                    value=value,
                )
            )
        value = float(ds["model_similarity_se"].sel(sel))
        rows.append(
            _row(**common, statistic="bootstrap_se", analysis="rsa", metric=comp, value=value)
        )
    if "baseline_difference" in ds:
        rows.append(
            _row(
                **common,
                statistic="baseline_difference",
                analysis="rsa",
                metric=comp,
                value=float(ds["baseline_difference"].sel(sel)),
                p_value=float(ds["baseline_equivalence_p"].sel(sel)),
            )
        )
    return rows


def rsa_eeg_rows(ds: xr.Dataset, layer_order: LayerOrder = None) -> pd.DataFrame:
    """Peak of each layer's cross-temporal RSA time course, per subject (``rsa_eeg`` store).

    Parameters
    ----------
    ds : xarray.Dataset
        The store: ``cross_temporal`` (subject, comparison, layer, time).
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order (names the layer of a bare
        feature space).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`, with
        ``analysis = "rsa_eeg"``, ``roi = "eeg"``, ``metric = "<comparison>_peak"``
        (the similarity at the peak) and ``"<comparison>_peak_latency"`` (s); courses
        without a finite value are left out.
    """
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
                base = _row(
                    subject=str(sub), **_space(layer, layer_order), roi="eeg", analysis="rsa_eeg"
                )
                rows.append({**base, "metric": f"{comp}_peak", "value": float(course[peak])})
                rows.append({**base, "metric": f"{comp}_peak_latency", "value": times[peak]})
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

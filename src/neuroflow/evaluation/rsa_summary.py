"""Tidy summary rows of RSA stores, in the layout of the summary table.

fMRI RSA (model-brain RDM similarity per ROI, with the noise ceiling and the
comparisons' inference), the linear-predictivity patterns (``rsa_lp``) and EEG RSA time
courses with their cluster tests and peaks; the rows follow the conventions of
:mod:`neuroflow.evaluation.analysis_summary` (``model`` is the feature space).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.evaluation.analysis_summary import _NO_SPACE, LayerOrder, _in_memory, _row, _space
from neuroflow.evaluation.summary import TABLE_COLUMNS
from neuroflow.peaks import peak_index

__all__ = ["rsa_eeg_rows", "rsa_lp_rows", "rsa_rows"]


#: Variables of an ``rsa_fmri`` store that :func:`rsa_rows` reads.
_RSA_ROW_VARIABLES = (
    "model_similarity",
    "noise_ceiling",
    "model_similarity_ci",
    "model_similarity_se",
    "baseline_difference",
    "baseline_equivalence_p",
)


#: Variables of an ``rsa_fmri`` store that :func:`rsa_lp_rows` reads.
_RSA_LP_ROW_VARIABLES = (
    "lp_model_score",
    "lp_model_pattern",
    "lp_brain_pattern",
    "lp_criterion",
    "lp_criterion_ci",
    "lp_subject_baseline",
    "lp_baseline_difference",
    "lp_baseline_equivalence_p",
)


#: Variables of an ``rsa_eeg`` store that :func:`rsa_eeg_rows` reads.
_RSA_EEG_ROW_VARIABLES = (
    "cross_temporal",
    "peak_similarity",
    "peak_time",
    "peak_similarity_ci",
    "peak_similarity_se",
    "model_time_peak_similarity",
    "model_time_peak_model_time",
    "model_time_peak_brain_time",
    "model_time_slope",
    "model_time_lag",
    "model_time_peak_p",
    "model_time_inconclusive",
    "model_time_peak_similarity_ci",
    "model_time_peak_model_time_ci",
    "model_time_peak_brain_time_ci",
    "model_time_slope_ci",
    "model_time_lag_ci",
)


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
        and group rows: the subjects' mean (``statistic = "mean"``) and the noise
        ceiling's lower and upper bounds (the linear-predictivity rows are
        :func:`rsa_lp_rows`).
    """
    ds = _in_memory(ds, _RSA_ROW_VARIABLES)
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
                values = ds["model_similarity"].sel(comparison=comp, layer=layer, roi=roi).values
                if np.isfinite(values).any():
                    rows.append(
                        _row(
                            subject="group",
                            statistic="mean",
                            n_subjects=int(np.isfinite(values).sum()),
                            **names,
                            roi=str(roi),
                            analysis="rsa",
                            metric=str(comp),
                            value=float(np.nanmean(values)),
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


def _subject_rows(values: np.ndarray, subjects: Sequence[str], **kw) -> list[dict]:
    """One row per subject (``statistic = "value"``) and their mean over the finite ones."""
    values = np.asarray(values, dtype=np.float64)
    rows = [
        _row(subject=str(s), value=float(v), **kw) for s, v in zip(subjects, values, strict=True)
    ]
    ok = np.isfinite(values)
    if ok.any():
        rows.append(
            _row(
                subject="group",
                statistic="mean",
                n_subjects=int(ok.sum()),
                value=float(values[ok].mean()),
                **kw,
            )
        )
    return rows


def _roi_pairs(ds: xr.Dataset) -> list[tuple[int, int, str]]:
    """Index pairs of the linear-predictivity ROI x ROI patterns and their ``roi`` label.

    Above the diagonal for a symmetric pattern, every off-diagonal entry otherwise
    (``"<target> x <predictor>"``).
    """
    rois = [str(r) for r in ds["roi_a"].values]
    symmetric = bool(ds.attrs.get("lp_symmetric", True))
    return [
        (i, j, f"{a} x {b}")
        for i, a in enumerate(rois)
        for j, b in enumerate(rois)
        if (i < j if symmetric else i != j)
    ]


def rsa_lp_rows(ds: xr.Dataset, layer_order: LayerOrder = None) -> pd.DataFrame:
    """Rows of the linear-predictivity alignment patterns of an ``rsa_fmri`` store.

    Parameters
    ----------
    ds : xarray.Dataset
        The store; without its ``lp_*`` variables (``rsa.predictivity_patterns``
        disabled or skipped) there are no rows.
    layer_order : dict of str to list of str | None
        As for :func:`rsa_rows`.

    Returns
    -------
    table : pandas.DataFrame
        ``analysis = "rsa_lp"``; ``metric``: ``encoding_r`` (each layer's encoding score
        per subject and ROI with the group ``mean``, the group ``baseline_difference``
        with the TOST p-value in ``p_value``, and each subject's ``subject_baseline``),
        ``cross_roi_r`` (the brain pattern per subject and its group ``mean``; ``roi``
        is ``"<roi_a> x <roi_b>"``, above the diagonal when symmetric, else every
        target x predictor pair), ``profile_similarity`` (each model's pattern, group
        rows) and ``relational_criterion`` (per model, subject and ROI, with the group
        ``mean`` and ``bootstrap_ci_lower``/``bootstrap_ci_upper``). ``model`` is the
        feature space (``encoding_r``) or the model (feature set) of the patterns;
        ``n/a`` where a row has none.
    """
    if "lp_model_score" not in ds:
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    ds = _in_memory(ds, _RSA_LP_ROW_VARIABLES)
    subjects = [str(s) for s in ds["subject"].values]
    n_sub = len(subjects)
    base = {"analysis": "rsa_lp"}
    rows: list[dict] = []
    for layer in ds["layer"].values:
        names = _space(layer, layer_order)
        for roi in ds["roi"].values:
            sel = {"layer": layer, "roi": roi}
            common = {**base, **names, "roi": str(roi), "metric": "encoding_r"}
            rows += _subject_rows(ds["lp_model_score"].sel(sel).values, subjects, **common)
            if "lp_baseline_difference" in ds:
                rows.append(
                    _row(
                        **common,
                        subject="group",
                        statistic="baseline_difference",
                        n_subjects=n_sub,
                        value=float(ds["lp_baseline_difference"].sel(sel)),
                        p_value=float(ds["lp_baseline_equivalence_p"].sel(sel)),
                    )
                )
    if "lp_subject_baseline" in ds:
        for roi in ds["roi"].values:
            values = ds["lp_subject_baseline"].sel(roi=roi).values
            for sub, value in zip(subjects, values, strict=True):
                rows.append(
                    _row(
                        **base,
                        **_NO_SPACE,
                        subject=sub,
                        roi=str(roi),
                        metric="encoding_r",
                        statistic="subject_baseline",
                        value=float(value),
                    )
                )
    pairs = _roi_pairs(ds)
    brain = ds["lp_brain_pattern"].values
    for i, j, label in pairs:
        common = {**base, **_NO_SPACE, "roi": label, "metric": "cross_roi_r"}
        rows += _subject_rows(brain[:, i, j], subjects, **common)
    for m, model in enumerate(ds["model"].values):
        who = {**_NO_SPACE, "model": str(model)}
        for i, j, label in pairs:
            rows.append(
                _row(
                    **base,
                    **who,
                    subject="group",
                    n_subjects=n_sub,
                    roi=label,
                    metric="profile_similarity",
                    value=float(ds["lp_model_pattern"].values[m, i, j]),
                )
            )
        for roi in ds["roi"].values:
            common = {**base, **who, "roi": str(roi), "metric": "relational_criterion"}
            crit = ds["lp_criterion"].sel(model=model, roi=roi).values
            rows += _subject_rows(crit, subjects, **common)
            for bound in ("lower", "upper"):
                rows.append(
                    _row(
                        **common,
                        subject="group",
                        statistic=f"bootstrap_ci_{bound}",
                        n_subjects=n_sub,
                        value=float(ds["lp_criterion_ci"].sel(bound=bound, model=model, roi=roi)),
                    )
                )
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
        The store: ``cross_temporal`` (subject, [channel_group,] comparison, layer,
        time), with ``peak_similarity``, ``peak_time``, the bootstrap
        (``peak_similarity_ci``, ``peak_similarity_se``) and the model-time RSA
        (``model_time_*``) where the store has them.
    layer_order : dict of str to list of str | None
        Extractor -> its layer names in extraction order (names the layer of a bare
        feature space).

    Returns
    -------
    table : pandas.DataFrame
        Columns :data:`~neuroflow.evaluation.summary.TABLE_COLUMNS`, with
        ``analysis = "rsa_eeg"`` and ``roi`` ``"eeg"`` (every channel) or the channel
        group's name. Per subject, ``metric = "<comparison>_peak"`` (the similarity at
        the peak) and ``"<comparison>_peak_latency"`` (s); courses without a finite value
        are left out. Group rows (first comparison): the same two metrics of the
        subject-mean course (``statistic = "mean"``), with the bootstrap interval and
        standard error at its peak (``bootstrap_ci_lower``, ``bootstrap_ci_upper``,
        ``bootstrap_se``), and for frame-level layers ``"<comparison>_model_time_peak"``
        (similarity), ``_peak_model_time`` and ``_peak_brain_time`` (s), ``_slope`` and
        ``_lag`` (s) of the model time x brain time map, with their bootstrap intervals
        (``bootstrap_ci_lower``, ``bootstrap_ci_upper``), the peak's max-statistic
        permutation ``p_value`` on its row and ``inconclusive`` on every model-time row
        (True: the peak is not significant, and slope and lag are NaN).
    """
    ds = _in_memory(ds, _RSA_EEG_ROW_VARIABLES)
    da = ds["cross_temporal"]
    if "channel_group" not in da.dims:
        da = da.expand_dims(channel_group=["all"])
    times = np.asarray(ds["time"].values, float)
    rows = []
    for sub in ds["subject"].values:
        for group in da["channel_group"].values:
            for comp in ds["comparison"].values:
                for layer in ds["layer"].values:
                    sel = {"subject": sub, "channel_group": group, "comparison": comp}
                    course = np.asarray(da.sel(layer=layer, **sel).values)
                    peak = int(peak_index(course, times))  # at or after the onset
                    if peak < 0:
                        continue
                    base = _row(
                        subject=str(sub),
                        **_space(layer, layer_order),
                        roi=_eeg_roi(group),
                        analysis="rsa_eeg",
                    )
                    rows.append({**base, "metric": f"{comp}_peak", "value": float(course[peak])})
                    rows.append({**base, "metric": f"{comp}_peak_latency", "value": times[peak]})
    rows += _rsa_eeg_group_rows(ds, layer_order)
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def _eeg_roi(group: object) -> str:
    """``roi`` of an EEG channel group: ``"eeg"`` for every channel, else its name."""
    return "eeg" if str(group) == "all" else str(group)


def _rsa_eeg_group_rows(ds: xr.Dataset, layer_order: LayerOrder) -> list[dict]:
    """Group rows of an ``rsa_eeg`` store: peak, its bootstrap interval, model time."""
    comp = str(ds.attrs.get("inference_comparison", ds["comparison"].values[0]))
    common = {"subject": "group", "statistic": "mean", "n_subjects": ds.sizes["subject"]}
    common["analysis"] = "rsa_eeg"
    rows = []
    if "peak_similarity" in ds:
        for group in ds["channel_group"].values:
            for layer in ds["layer"].values:
                sel = {"channel_group": group, "layer": layer}
                value = float(ds["peak_similarity"].sel(sel))
                if not np.isfinite(value):
                    continue
                base = {**common, **_space(layer, layer_order), "roi": _eeg_roi(group)}
                rows.append(_row(**base, metric=f"{comp}_peak", value=value))
                latency = float(ds["peak_time"].sel(sel))
                rows.append(_row(**base, metric=f"{comp}_peak_latency", value=latency))
                if "peak_similarity_ci" not in ds:
                    continue
                for bound in ("lower", "upper"):
                    ci = float(ds["peak_similarity_ci"].sel(bound=bound, **sel))
                    rows.append(
                        _row(
                            **{**base, "statistic": f"bootstrap_ci_{bound}"},
                            metric=f"{comp}_peak",
                            value=ci,
                        )
                    )
                se = float(ds["peak_similarity_se"].sel(sel))
                rows.append(
                    _row(**{**base, "statistic": "bootstrap_se"}, metric=f"{comp}_peak", value=se)
                )
    if "model_time_peak_similarity" in ds:
        names = {
            "model_time_peak": "model_time_peak_similarity",
            "model_time_peak_model_time": "model_time_peak_model_time",
            "model_time_peak_brain_time": "model_time_peak_brain_time",
            "model_time_slope": "model_time_slope",
            "model_time_lag": "model_time_lag",
        }
        for group in ds["channel_group"].values:
            for layer in ds["frame_layer"].values:
                base = {**common, **_space(layer, layer_order), "roi": _eeg_roi(group)}
                sel = {"channel_group": group, "frame_layer": layer}
                test, p = {}, {}
                if "model_time_peak_p" in ds:
                    test["inconclusive"] = bool(ds["model_time_inconclusive"].sel(sel))
                    p["p_value"] = float(ds["model_time_peak_p"].sel(sel))
                for metric, var in names.items():
                    value = float(ds[var].sel(sel))
                    extra = {**test, **(p if metric == "model_time_peak" else {})}
                    rows.append(_row(**base, metric=f"{comp}_{metric}", value=value, **extra))
                    for bound in ("lower", "upper") if f"{var}_ci" in ds else ():
                        rows.append(
                            _row(
                                **{**base, "statistic": f"bootstrap_ci_{bound}"},
                                metric=f"{comp}_{metric}",
                                value=float(ds[f"{var}_ci"].sel(bound=bound, **sel)),
                                **test,
                            )
                        )
    return rows

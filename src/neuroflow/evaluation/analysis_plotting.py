"""Figures of decoding and RSA results, drawn with matplotlib's Agg canvas.

Figures are built from :class:`matplotlib.figure.Figure` with an Agg canvas, so
pyplot's global backend and figure registry are never touched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from neuroflow.figures import legend_outside

__all__ = [
    "plot_alignment",
    "plot_concept_decoding",
    "plot_cross_subject",
    "plot_cross_temporal",
    "plot_fmri_identification",
    "plot_generalization",
    "plot_layer_similarity",
    "plot_model_time",
    "plot_rdm",
    "plot_time_courses",
]


def _save(fig: Figure, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)
    return path


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Start and stop (exclusive) of every run of True values."""
    padded = np.r_[False, np.asarray(mask, bool), False]
    edges = np.flatnonzero(np.diff(padded.astype(int)))
    return list(zip(edges[::2], edges[1::2], strict=True))


def plot_time_courses(
    times: np.ndarray,
    scores: Mapping[str, np.ndarray],
    path: str | os.PathLike,
    *,
    significant: Mapping[str, np.ndarray] | None = None,
    chance: float | None = None,
    ylabel: str = "score",
) -> Path:
    """Decoding time courses with significant clusters shaded.

    Parameters
    ----------
    times : array-like, shape (n_times,)
        Seconds.
    scores : dict of str to array-like, shape (n_times,)
        One line per label.
    path : path-like
        PNG output.
    significant : dict of str to array-like of bool, shape (n_times,) | None
        Points in significant clusters, per label; shaded in the line's colour.
    chance : float | None
        Horizontal reference line.
    ylabel : str
        Y-axis label.

    Returns
    -------
    path : Path
    """
    times = np.asarray(times, dtype=float)
    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    for name, values in scores.items():
        (line,) = ax.plot(times, np.asarray(values, float), label=name)
        mask = None if significant is None else significant.get(name)
        if mask is not None:
            for a, b in _runs(mask):
                ax.axvspan(times[a], times[b - 1], color=line.get_color(), alpha=0.2, lw=0)
    if chance is not None:
        ax.axhline(chance, color="k", ls="--", lw=0.8)
    ax.axvline(0, color="k", lw=0.5)
    ax.set(xlabel="time (s)", ylabel=ylabel)
    legend_outside(ax, fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _matrix(
    matrix: np.ndarray,
    path: str | os.PathLike,
    *,
    title: str,
    colorbar_label: str,
    extent: Sequence[float] | None = None,
    labels: Sequence[str] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    contour: np.ndarray | None = None,
    cmap: str = "RdBu_r",
    center: float | None = None,
) -> Path:
    m = np.asarray(matrix, float)
    fig = Figure(figsize=(5, 4.2))
    ax = fig.add_subplot()
    kw = {}
    if center is not None:
        span = np.nanmax(np.abs(m - center)) or 1.0
        kw = {"vmin": center - span, "vmax": center + span}
    im = ax.imshow(
        m, origin="lower" if extent else "upper", extent=extent, cmap=cmap, aspect="auto", **kw
    )
    if contour is not None and np.any(contour):
        ax.contour(
            np.asarray(contour, float),
            levels=[0.5],
            colors="k",
            linewidths=0.8,
            extent=extent,
            origin="lower",
        )
    if labels is not None:
        ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    fig.colorbar(im, ax=ax, label=colorbar_label)
    fig.tight_layout()
    return _save(fig, path)


def plot_generalization(
    times: np.ndarray,
    scores: np.ndarray,
    path: str | os.PathLike,
    *,
    significant: np.ndarray | None = None,
    chance: float = 0.5,
) -> Path:
    """Temporal generalisation matrix (train time × test time), significant area outlined.

    Parameters
    ----------
    times : array-like, shape (n_times,)
    scores : array-like, shape (n_times, n_times)
        Rows are training times.
    path : path-like
    significant : array-like of bool, shape (n_times, n_times) | None
    chance : float
        Centre of the colour scale.

    Returns
    -------
    path : Path
    """
    t = np.asarray(times, float)
    ext = [t[0], t[-1], t[0], t[-1]]
    return _matrix(
        scores,
        path,
        title="temporal generalisation",
        extent=ext,
        xlabel="test time (s)",
        ylabel="train time (s)",
        contour=significant,
        center=chance,
        colorbar_label=f"decoding score (chance {chance:g})",
    )


def plot_rdm(rdm: np.ndarray, path: str | os.PathLike, *, title: str = "RDM") -> Path:
    """An RDM image.

    Parameters
    ----------
    rdm : array-like, shape (n_conditions, n_conditions) or (n_pairs,)
        Square or condensed RDM.
    path : path-like
    title : str

    Returns
    -------
    path : Path
    """
    from neuroflow.rsa.rdm import square_rdm

    rdm = np.asarray(rdm, float)
    if rdm.ndim == 1:
        rdm = square_rdm(rdm)
    return _matrix(rdm, path, title=title, cmap="viridis", colorbar_label="dissimilarity")


def plot_cross_temporal(
    times: np.ndarray,
    sim: np.ndarray,
    layers: Sequence[str],
    path: str | os.PathLike,
    *,
    ci: np.ndarray | None = None,
    peak_times: np.ndarray | None = None,
    peak_ci: np.ndarray | None = None,
    ylabel: str = "RDM similarity",
) -> Path:
    """Cross-temporal RSA map, layers × time, with the time courses and their intervals.

    Parameters
    ----------
    times : array-like, shape (n_times,)
    sim : array-like, shape (n_layers, n_times)
    layers : sequence of str, shape (n_layers,)
    path : path-like
    ci : array-like, shape (2, n_layers, n_times) | None
        Lower and upper confidence limits at every time point, drawn as bands around
        each layer's time course in a panel under the map.
    peak_times : array-like, shape (n_layers,) | None
        Each layer's peak time (s), marked on its time course.
    peak_ci : array-like, shape (2, n_layers) | None
        Confidence limits at the peaks, drawn as error bars (when ``ci`` is not given).
    ylabel : str
        Y-axis label of the time courses.

    Returns
    -------
    path : Path
    """
    t = np.asarray(times, float)
    sim = np.asarray(sim, float)
    lines = ci is not None or peak_ci is not None
    height = 1 + 0.4 * len(layers)
    fig = Figure(figsize=(6, height + (3.0 if lines else 0.0)), layout="constrained")
    if lines:
        ax, ax_lines = fig.subplots(2, 1, height_ratios=[height, 3.0], sharex=True)
    else:
        ax = fig.add_subplot()
    span = np.nanmax(np.abs(sim)) or 1.0
    im = ax.imshow(
        sim,
        aspect="auto",
        cmap="RdBu_r",
        vmin=-span,
        vmax=span,
        extent=[t[0], t[-1], len(layers) - 0.5, -0.5],
    )
    ax.set_yticks(range(len(layers)), list(layers), fontsize=7)
    ax.set(xlabel="" if lines else "time (s)", title="cross-temporal RSA")
    fig.colorbar(im, ax=[ax, ax_lines] if lines else ax, label="RDM similarity")
    if lines:
        for k, layer in enumerate(layers):
            (line,) = ax_lines.plot(t, sim[k], lw=1.0, label=str(layer))
            colour = line.get_color()
            if ci is not None:
                band = np.asarray(ci, float)[:, k]
                ax_lines.fill_between(t, band[0], band[1], color=colour, alpha=0.2, lw=0)
            if peak_times is not None and np.isfinite(peak_times[k]):
                at = int(np.argmin(np.abs(t - peak_times[k])))
                if peak_ci is not None and ci is None:
                    lim = np.asarray(peak_ci, float)[:, k]
                    err = np.abs([[sim[k, at] - lim[0]], [lim[1] - sim[k, at]]])
                    ax_lines.errorbar(
                        t[at], sim[k, at], yerr=np.nan_to_num(err), color=colour, capsize=3
                    )
                ax_lines.plot(t[at], sim[k, at], "o", color=colour, ms=3)
        ax_lines.axhline(0, color="k", lw=0.5)
        ax_lines.axvline(0, color="k", lw=0.5)
        ax_lines.set(xlabel="time (s)", ylabel=ylabel)
        legend_outside(ax_lines, fontsize=6)
    return _save(fig, path)


#: Frame-level layers drawn by :func:`plot_model_time` at most.
MAX_MODEL_TIME_LAYERS = 6


def plot_model_time(
    similarity: np.ndarray,
    model_times: np.ndarray,
    brain_times: np.ndarray,
    layers: Sequence[str],
    path: str | os.PathLike,
    *,
    lag: np.ndarray | None = None,
    slope: np.ndarray | None = None,
    groups: Sequence[str] | None = None,
    p_values: np.ndarray | None = None,
    peaks: np.ndarray | None = None,
) -> Path:
    """Model time × brain time RSA maps: one row of panels per channel group, one per layer.

    Parameters
    ----------
    similarity : array-like, shape (n_groups, n_layers, n_model_times, n_brain_times)
        Similarity of each layer's RDM at each model time with the EEG RDM at each brain
        time (NaN rows: model times a layer lacks); shape (n_layers, n_model_times,
        n_brain_times) for one group.
    model_times : array-like, shape (n_model_times,)
        Seconds from the stimulus onset, within the stimulus.
    brain_times : array-like, shape (n_brain_times,)
        Seconds from the stimulus onset, in the EEG epochs.
    layers : sequence of str, shape (n_layers,)
    path : path-like
    lag, slope : array-like, shape (n_groups, n_layers) | None
        The line ``brain time = lag + slope * model time`` of each map, drawn over it;
        NaN (an inconclusive peak): no line.
    groups : sequence of str, shape (n_groups,) | None
        Channel group names (row titles).
    p_values : array-like, shape (n_groups, n_layers) | None
        The peak's permutation p-value, in each panel's title.
    peaks : array-like, shape (n_groups, n_layers, 2) | None
        (model time, brain time) of each map's peak (s), marked.

    Returns
    -------
    path : Path
        Every group, at most :data:`MAX_MODEL_TIME_LAYERS` layers (the first ones).
    """
    sim = np.asarray(similarity, float)
    if sim.ndim == 3:
        sim = sim[None]
    n_groups = sim.shape[0]
    sim = sim[:, :MAX_MODEL_TIME_LAYERS]
    n = sim.shape[1]

    def per_map(values: np.ndarray | None, tail: tuple[int, ...] = ()) -> np.ndarray:
        if values is None:
            return np.full((n_groups, n, *tail), np.nan)
        return np.asarray(values, float).reshape(n_groups, -1, *tail)[:, :n]

    lag, slope, p = per_map(lag), per_map(slope), per_map(p_values)
    peak = per_map(peaks, (2,))
    groups = list(groups) if groups is not None else [""] * n_groups
    mt = np.asarray(model_times, float)
    bt = np.asarray(brain_times, float)
    fig = Figure(figsize=(3.2 * n + 1.2, 2.9 * n_groups + 0.3), layout="constrained")
    axes = fig.subplots(n_groups, n, squeeze=False)
    span = np.nanmax(np.abs(sim)) if np.isfinite(sim).any() else 1.0
    step = (mt[1] - mt[0]) / 2 if mt.size > 1 else 0.5
    for g in range(n_groups):
        for k in range(n):
            ax = axes[g, k]
            im = ax.imshow(
                sim[g, k],
                aspect="auto",
                origin="lower",
                cmap="RdBu_r",
                vmin=-span,
                vmax=span,
                extent=[bt[0], bt[-1], mt[0] - step, mt[-1] + step],
            )
            if np.isfinite([lag[g, k], slope[g, k]]).all():
                ax.plot(lag[g, k] + slope[g, k] * mt, mt, color="k", lw=1.0, ls="--")
            if np.isfinite(peak[g, k]).all():
                ax.plot(peak[g, k, 1], peak[g, k, 0], "k+", ms=8)
            ax.axvline(0, color="0.4", lw=0.5)
            ax.set_xlim(bt[0], bt[-1])
            title = str(layers[k]) if not groups[g] else f"{layers[k]} ({groups[g]})"
            if np.isfinite(p[g, k]):
                line = "line drawn" if np.isfinite(lag[g, k]) else "inconclusive"
                title += f"\npeak p = {p[g, k]:.3g}, {line}"
            ax.set_title(title, fontsize="small")
            ax.set(xlabel="brain time (s)", ylabel="model time (s)")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="RDM similarity")
    return _save(fig, path)


def plot_alignment(
    matrix: np.ndarray, rois: Sequence[str], path: str | os.PathLike, *, title: str = "ROI × ROI"
) -> Path:
    """An ROI × ROI alignment pattern.

    Parameters
    ----------
    matrix : array-like, shape (n_rois, n_rois)
    rois : sequence of str, shape (n_rois,)
    path : path-like
    title : str

    Returns
    -------
    path : Path
    """
    return _matrix(
        matrix, path, title=title, labels=list(rois), center=0.0, colorbar_label="RDM similarity"
    )


#: ROIs drawn by :func:`plot_layer_similarity` at most (those a layer matches best).
MAX_SIMILARITY_ROIS = 12


def plot_layer_similarity(
    similarity: np.ndarray,
    ci: np.ndarray,
    layers: Sequence[str],
    rois: Sequence[str],
    path: str | os.PathLike,
    *,
    ceiling: np.ndarray | None = None,
    ylabel: str = "RDM similarity",
) -> Path:
    """Each layer's RDM similarity with each ROI, with bootstrap intervals.

    Parameters
    ----------
    similarity : array-like, shape (n_layers, n_rois)
        Mean similarity over subjects.
    ci : array-like, shape (2, n_layers, n_rois)
        Lower and upper limits of its confidence interval.
    layers : sequence of str, shape (n_layers,)
    rois : sequence of str, shape (n_rois,)
    path : path-like
    ceiling : array-like, shape (2, n_rois) | None
        Lower and upper noise ceiling per ROI, drawn as a grey band.
    ylabel : str

    Returns
    -------
    path : Path
        Grouped bars (one group per ROI, the :data:`MAX_SIMILARITY_ROIS` best-matched
        ones when there are more), intervals as error bars.
    """
    sim = np.asarray(similarity, dtype=np.float64)
    ci = np.asarray(ci, dtype=np.float64)
    keep = np.arange(sim.shape[1])
    if keep.size > MAX_SIMILARITY_ROIS:
        best = np.nan_to_num(np.nanmax(sim, axis=0), nan=-np.inf)
        keep = np.sort(np.argsort(-best)[:MAX_SIMILARITY_ROIS])
    n_layers, n_rois = sim.shape[0], keep.size
    fig = Figure(figsize=(max(5.0, 0.5 * n_layers * n_rois + 2), 3.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / n_layers
    x = np.arange(n_rois)
    for i, layer in enumerate(layers):
        values = sim[i, keep]
        err = np.abs(np.stack([values - ci[0, i, keep], ci[1, i, keep] - values]))
        ax.bar(x + (i - (n_layers - 1) / 2) * width, values, width, label=str(layer))
        ax.errorbar(
            x + (i - (n_layers - 1) / 2) * width,
            values,
            yerr=np.nan_to_num(err),
            fmt="none",
            ecolor="black",
            capsize=2,
            lw=0.8,
        )
    if ceiling is not None:
        ceiling = np.asarray(ceiling, dtype=np.float64)
        for k, r in enumerate(keep):
            ax.fill_between(
                [k - 0.45, k + 0.45], ceiling[0, r], ceiling[1, r], color="0.85", zorder=0
            )
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_xticks(x, [str(rois[r]) for r in keep], rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    legend_outside(ax, fontsize="small")
    return _save(fig, path)


def plot_cross_subject(
    times: np.ndarray,
    courses: Mapping[str, np.ndarray],
    epoch_scores: Mapping[str, np.ndarray],
    path: str | os.PathLike,
    *,
    classifiers: Sequence[str] = (),
    chance: float = 0.5,
    unit: str = "subject",
) -> Path:
    """Balanced accuracy on held-out subjects (or sessions), per alignment.

    Parameters
    ----------
    times : array-like, shape (n_times,)
        Seconds.
    courses : dict of str to array-like, shape (n_units, n_times)
        Alignment (e.g. ``"none"``, ``"euclidean"``) -> time-resolved score of each
        held-out unit; empty: no time-course panel.
    epoch_scores : dict of str to array-like, shape (n_units, n_classifiers)
        Alignment -> whole-epoch score of each held-out unit and classifier; empty: no
        bar panel.
    path : path-like
        PNG output.
    classifiers : sequence of str, shape (n_classifiers,)
        Names of the whole-epoch classifiers.
    chance : float
        Chance level (dashed line).
    unit : str
        What is held out, for the titles (``"subject"`` or ``"session"``).

    Returns
    -------
    path : Path
        Left: the mean time course over held-out units per alignment (thin lines: each
        unit); right: grouped bars of the mean whole-epoch score per classifier and
        alignment (dots: each unit).
    """
    panels = [p for p, d in (("time", courses), ("bars", epoch_scores)) if d]
    if not panels:
        raise ValueError("`courses` or `epoch_scores` must hold scores, got neither.")
    t = np.asarray(times, dtype=np.float64)
    widths = [2.0 if p == "time" else 1.0 for p in panels]
    fig = Figure(figsize=(3.2 * sum(widths) + 0.5, 3.6), layout="constrained")
    axes = fig.subplots(1, len(panels), width_ratios=widths, squeeze=False)[0]
    colors = {name: f"C{i}" for i, name in enumerate(dict.fromkeys([*courses, *epoch_scores]))}
    for ax, panel in zip(axes, panels, strict=True):
        ax.axhline(chance, color="k", ls="--", lw=0.8)
        ax.set_ylabel("balanced accuracy")
        if panel == "time":
            for name, values in courses.items():
                values = np.asarray(values, dtype=np.float64)
                for row in values:
                    ax.plot(t, row, color=colors[name], lw=0.6, alpha=0.35)
                ax.plot(t, values.mean(axis=0), color=colors[name], lw=2.0, label=name)
            ax.axvline(0, color="k", lw=0.5)
            ax.set_xlabel("time (s)")
            ax.set_title(f"held-out {unit}s over time", fontsize=10)
            legend_outside(ax, fontsize=8, title="alignment", title_fontsize=8)
            continue
        n_align = len(epoch_scores)
        width = 0.8 / n_align
        x = np.arange(len(classifiers))
        for i, (name, values) in enumerate(epoch_scores.items()):
            values = np.asarray(values, dtype=np.float64)
            offset = x + (i - (n_align - 1) / 2) * width
            ax.bar(offset, values.mean(axis=0), width, color=colors[name], alpha=0.7, label=name)
            for k in range(values.shape[1]):
                ax.plot(np.full(values.shape[0], offset[k]), values[:, k], "k.", ms=4)
        ax.set_xticks(x, list(classifiers))
        ax.set_title(f"whole epochs, held-out {unit}s", fontsize=10)
        if "time" not in panels:
            legend_outside(ax, fontsize=8, title="alignment", title_fontsize=8)
    return _save(fig, path)


def plot_fmri_identification(
    accuracy: np.ndarray,
    rois: Sequence[str],
    spaces: Sequence[str],
    decoders: Sequence[str],
    path: str | os.PathLike,
) -> Path:
    """Identification of held-out stimuli per ROI and feature space, one panel per decoder.

    Parameters
    ----------
    accuracy : array-like, shape (n_decoders, n_rois, n_spaces)
        Rank accuracy, ``1 - (mean_rank - 1) / (n_test - 1)``, mean over subjects:
        1 when every stimulus ranks first, 0.5 at chance. NaN cells are left blank.
    rois, spaces, decoders : sequence of str
    path : path-like

    Returns
    -------
    path : Path
        Heat maps (ROIs × feature spaces) on a diverging scale centred at chance.
    """
    acc = np.asarray(accuracy, dtype=np.float64)
    n_dec, n_roi, n_sp = acc.shape
    fig = Figure(
        figsize=(max(4.0, 0.6 * n_sp + 2.2) * n_dec, max(2.6, 0.45 * n_roi + 1.6)),
        layout="constrained",
    )
    axes = np.atleast_1d(fig.subplots(1, n_dec, sharey=True))
    image = None
    for d, ax in enumerate(axes):
        image = ax.imshow(acc[d], cmap="RdBu_r", vmin=0.0, vmax=1.0, aspect="auto")
        for (i, j), value in np.ndenumerate(acc[d]):
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize="x-small")
        ax.set_xticks(np.arange(n_sp), [str(s) for s in spaces], rotation=40, ha="right")
        ax.set_yticks(np.arange(n_roi), [str(r) for r in rois])
        ax.set_title(f"{decoders[d]} decoder", fontsize="medium")
    fig.colorbar(image, ax=list(axes), label="rank accuracy (chance 0.5)", shrink=0.9)
    return _save(fig, path)


def plot_concept_decoding(
    mean_auc: np.ndarray,
    auc: np.ndarray,
    rois: Sequence[str],
    concepts: Sequence[str],
    path: str | os.PathLike,
    *,
    max_concepts: int = 40,
) -> Path:
    """Concept decoding per ROI: mean AUC per subject and the AUC of each concept.

    Parameters
    ----------
    mean_auc : array-like, shape (n_subjects, n_rois)
        Mean ROC AUC over each subject's decoded concepts.
    auc : array-like, shape (n_rois, n_concepts)
        Per-concept AUC, mean over subjects.
    rois, concepts : sequence of str
    path : path-like
    max_concepts : int
        Concepts shown in the heat map: the best decoded ones (by their best ROI).

    Returns
    -------
    path : Path
        Left: bars of the subjects' mean AUC per ROI (dots: subjects), chance 0.5
        dashed; right: ROIs × concepts heat map.
    """
    mean_auc = np.asarray(mean_auc, dtype=np.float64)
    auc = np.asarray(auc, dtype=np.float64)
    keep = np.arange(auc.shape[1])
    if keep.size > max_concepts:
        best = np.nan_to_num(np.nanmax(auc, axis=0), nan=-np.inf)
        keep = np.sort(np.argsort(-best)[:max_concepts])
    fig = Figure(figsize=(4.0 + 0.22 * keep.size + 2.0, 3.8), layout="constrained")
    left, right = fig.subplots(
        1, 2, gridspec_kw={"width_ratios": [max(2, len(rois)), max(4, keep.size // 2)]}
    )
    x = np.arange(len(rois))
    left.bar(x, np.nanmean(mean_auc, axis=0), color="tab:blue", alpha=0.7)
    for row in mean_auc:
        left.plot(x, row, "o", color="black", ms=3)
    left.axhline(0.5, color="0.3", ls="--", lw=0.8)
    left.set_xticks(x, [str(r) for r in rois], rotation=30, ha="right")
    left.set_ylabel("mean ROC AUC over concepts")
    left.set_ylim(min(0.3, float(np.nanmin(mean_auc)) - 0.05), 1.0)
    image = right.imshow(auc[:, keep], cmap="RdBu_r", vmin=0.0, vmax=1.0, aspect="auto")
    right.set_yticks(x, [str(r) for r in rois])
    right.set_xticks(
        np.arange(keep.size),
        [str(concepts[k]) for k in keep],
        rotation=60,
        ha="right",
        fontsize="x-small",
    )
    fig.colorbar(image, ax=right, label="ROC AUC (chance 0.5)", shrink=0.9)
    return _save(fig, path)

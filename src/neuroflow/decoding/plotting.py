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

__all__ = [
    "plot_alignment",
    "plot_cross_temporal",
    "plot_generalization",
    "plot_layer_similarity",
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
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _matrix(
    matrix: np.ndarray,
    path: str | os.PathLike,
    *,
    title: str,
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
    fig.colorbar(im, ax=ax)
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
    return _matrix(rdm, path, title=title, cmap="viridis")


def plot_cross_temporal(
    times: np.ndarray, sim: np.ndarray, layers: Sequence[str], path: str | os.PathLike
) -> Path:
    """Cross-temporal RSA map, layers × time.

    Parameters
    ----------
    times : array-like, shape (n_times,)
    sim : array-like, shape (n_layers, n_times)
    layers : sequence of str, shape (n_layers,)
    path : path-like

    Returns
    -------
    path : Path
    """
    t = np.asarray(times, float)
    sim = np.asarray(sim, float)
    fig = Figure(figsize=(6, 1 + 0.4 * len(layers)))
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
    ax.set(xlabel="time (s)", title="cross-temporal RSA")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
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
    return _matrix(matrix, path, title=title, labels=list(rois), center=0.0)


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
    ax.legend(fontsize="small", ncols=min(n_layers, 4))
    return _save(fig, path)

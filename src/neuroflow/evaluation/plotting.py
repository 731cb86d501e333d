"""Figures of evaluation scores: brain maps, ROI bars, channel time courses, topomaps,
and the training curves of encoders trained by gradient descent.

Every function draws on a :class:`matplotlib.figure.Figure` bound to the
non-interactive Agg canvas, without touching pyplot's global state or backend,
so it is safe in batch jobs and threads. Inputs may be tiny and scores NaN (NaN
targets are drawn as empty).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import nibabel as nib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from neuroflow.figures import label_colorbar, legend_outside, new_figure
from neuroflow.io.records import natural_key

__all__ = [
    "BRAIN_MAP_KINDS",
    "DIVERGING_CMAP",
    "MAX_FIGURE_WIDTH",
    "SEQUENTIAL_CMAP",
    "GlassBrainCanvas",
    "map_cmap",
    "map_color_limits",
    "plot_brain_map",
    "plot_roi_bars",
    "plot_score_timecourse",
    "plot_topomap",
    "plot_training_curves",
    "save_figure",
]

#: Accepted values of ``kind`` in :func:`plot_brain_map`.
BRAIN_MAP_KINDS = ("glass_brain", "stat_map")
#: Colour map of a score map with scores of both signs (centred on 0).
DIVERGING_CMAP = "RdBu_r"
#: Colour map of a score map without negative scores (0 at its dark end).
SEQUENTIAL_CMAP = "viridis"
#: Widest figure of :func:`plot_roi_bars`, in inches (1,600 px at the default 100 dpi).
MAX_FIGURE_WIDTH = 16.0
#: ROI panels per row of :func:`plot_roi_bars`.
ROI_PANELS_PER_ROW = 4
#: Most ROIs :func:`plot_roi_bars` draws as bar panels; more (parcels of an atlas) are
#: drawn as one model x ROI map, whose size and drawing time do not grow by a panel each.
MAX_ROI_PANELS = 12
#: Most ROIs named along the map of :func:`plot_roi_bars`; more are named every k-th.
MAX_ROI_LABELS = 60


def map_cmap(data: np.ndarray) -> str:
    """The colour map of a score map: sequential without negative scores, else diverging.

    Parameters
    ----------
    data : array-like, any shape
        Scores; NaN is ignored.

    Returns
    -------
    cmap : str
        :data:`SEQUENTIAL_CMAP` when no finite score is negative, else
        :data:`DIVERGING_CMAP`.
    """
    values = np.asarray(data, dtype=np.float64)
    negative = bool(np.any(values[np.isfinite(values)] < 0))
    return DIVERGING_CMAP if negative else SEQUENTIAL_CMAP


def map_color_limits(data: np.ndarray, percentile: float = 99.0) -> tuple[float, float]:
    """Transparency threshold and colour limit of a score map.

    Parameters
    ----------
    data : array-like, any shape
        Scores; 0 marks voxels without a score to show (outside the mask, or not
        significant), NaN is ignored.
    percentile : float
        Percentile of the non-zero absolute scores that sets the colour limit, so
        that a few outlying voxels do not wash out the rest of the map.

    Returns
    -------
    threshold : float
        Scores smaller in absolute value are drawn transparent (0 is).
    vmax : float
        Colour scale limit (symmetric); 1 for a map without a non-zero score.
    """
    if not 0 < percentile <= 100:
        raise ValueError(f"`percentile` must be in (0, 100], got {percentile!r} instead.")
    values = np.abs(np.asarray(data, dtype=np.float64))
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return 1e-12, 1.0
    vmax = float(np.percentile(values, percentile))
    threshold = min(float(values.min()), vmax) / 2
    return threshold, vmax


def plot_brain_map(
    img: nib.Nifti1Image,
    *,
    kind: str = "glass_brain",
    title: str | None = None,
    vmax: float | None = None,
    label: str | None = None,
) -> Figure:
    """Draw a score map with nilearn.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        3-D score image (see :func:`neuroflow.io.files.scores_to_nifti`).
    kind : ``"glass_brain"`` | ``"stat_map"``
        :func:`nilearn.plotting.plot_glass_brain` or
        :func:`nilearn.plotting.plot_stat_map` (on the image's own grid, no
        template background).
    title : str | None
        Figure title.
    vmax : float | None
        Colour scale limit; by default the 99th percentile of the non-zero absolute
        scores (see :func:`map_color_limits`). Voxels scoring 0 (outside the mask,
        or masked as not significant) are transparent.
    label : str | None
        What the colour bar shows (e.g. ``"r"``), written above it. The colour map is
        sequential for a map without negative scores, diverging otherwise
        (:func:`map_cmap`).

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure.
    """
    from nilearn import plotting

    if kind not in BRAIN_MAP_KINDS:
        raise ValueError(
            f"`kind` must be one of {', '.join(BRAIN_MAP_KINDS)}, got {kind!r} instead."
        )
    threshold, robust = map_color_limits(np.asarray(img.dataobj))
    if vmax is None or not np.isfinite(vmax) or vmax <= 0:
        vmax = robust
    fig = new_figure((8, 3))
    common = {
        "figure": fig,
        "title": title,
        "vmax": vmax,
        "threshold": min(threshold, vmax / 2),
        "colorbar": True,
        "cmap": map_cmap(np.asarray(img.dataobj)),
    }
    with warnings.catch_warnings():
        # an all-zero map is drawn empty; nilearn's "empty image" notices add nothing
        warnings.filterwarnings("ignore", message=".*empty.*", category=UserWarning)
        if kind == "glass_brain":
            plotting.plot_glass_brain(img, plot_abs=False, **common)
        else:
            plotting.plot_stat_map(img, bg_img=None, draw_cross=False, **common)
    # the colour bar is the last axes nilearn adds, after the frame and the cuts
    label_colorbar(fig.axes[-1], label)
    return fig


class GlassBrainCanvas:
    """Glass-brain score maps drawn one after another on one figure.

    The brain outlines of a glass brain are most of the cost of drawing one; here they
    are drawn once, and each map replaces the previous map's overlay, colour bar and
    title. Each map looks as :func:`plot_brain_map` draws it (``kind="glass_brain"``).
    The figure returned by :meth:`draw` is the same object every time: save it before
    drawing the next map.
    """

    def __init__(self) -> None:
        from nilearn import plotting

        fig = new_figure((8, 3))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*empty.*", category=UserWarning)
            self._display = plotting.plot_glass_brain(
                None, figure=fig, plot_abs=False, colorbar=False
            )
        # the outlines' extent: each map's overlay widens it, as in a new figure
        self._bounds = {k: list(a._object_bounds) for k, a in self._display.axes.items()}
        self._title: Any = None
        for axes in self._display.axes.values():
            _collect_outlines(axes.ax)

    def draw(
        self,
        img: nib.Nifti1Image,
        *,
        title: str | None = None,
        vmax: float | None = None,
        label: str | None = None,
    ) -> Figure:
        """Draw one map (see :func:`plot_brain_map` for the parameters).

        Returns
        -------
        fig : matplotlib.figure.Figure
            The canvas's figure, showing this map only.
        """
        from nilearn.image import new_img_like

        display = self._display
        self._clear()
        threshold, vmax, data, img = _glass_brain_levels(img, vmax)
        cbar_vmin, cbar_vmax, vmin = _symmetric_limits(data, vmax)
        figure = display.frame_axes.figure
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*empty.*", category=UserWarning)
            display.add_overlay(
                new_img_like(img, data, img.affine),
                threshold=threshold,
                interpolation="nearest",
                colorbar=True,
                vmin=vmin,
                vmax=vmax,
                cbar_vmin=cbar_vmin,
                cbar_vmax=cbar_vmax,
                cmap=map_cmap(data),
            )
        label_colorbar(figure.axes[-1], label)
        if title:
            first = display.axes[display._cut_displayed[0]].ax
            before = list(first.texts)
            display.title(title)
            self._title = next(t for t in first.texts if t not in before)
        return figure

    def _clear(self) -> None:
        """Take the last map's overlay, colour bar and title off the figure."""
        display = self._display
        for key, axes in display.axes.items():
            for image in list(axes.ax.images):
                image.remove()
            axes._object_bounds = list(self._bounds[key])
            axes.ax.axis(axes.get_object_bounds())
        if display._colorbar:
            display._colorbar_ax.remove()
            display._colorbar = False
        if self._title is not None:
            self._title.remove()
            self._title = None


def _collect_outlines(ax: Axes) -> None:
    """Draw the brain outlines of a glass-brain axes as one collection.

    The same paths, colours, widths and order as nilearn's patches, so the same
    pixels, drawn in one call instead of one per patch.
    """
    from matplotlib.collections import PathCollection
    from matplotlib.patches import PathPatch

    outlines = [p for p in ax.patches if isinstance(p, PathPatch)]
    if not outlines:
        return
    first = outlines[0]
    collection = PathCollection(
        # each patch's own transform, less the axes' data transform the collection adds
        [(p.get_transform() - ax.transData).transform_path(p.get_path()) for p in outlines],
        facecolors=[p.get_facecolor() for p in outlines],
        edgecolors=[p.get_edgecolor() for p in outlines],
        linewidths=[p.get_linewidth() for p in outlines],
        antialiaseds=[p.get_antialiased() for p in outlines],
        joinstyle=first.get_joinstyle(),
        capstyle=first.get_capstyle(),
        transform=ax.transData,
        zorder=first.get_zorder(),
    )
    for patch in outlines:
        patch.remove()
    ax.add_collection(collection, autolim=False)


def _glass_brain_levels(
    img: nib.Nifti1Image, vmax: float | None
) -> tuple[float, float, np.ndarray, nib.Nifti1Image]:
    """Levels and data of a glass-brain map, as :func:`plot_brain_map` has nilearn set them.

    Returns
    -------
    threshold : float
        Scores smaller in absolute value are transparent (see :func:`map_color_limits`).
    vmax : float
        Colour limit: ``vmax`` when a positive number, else the robust one.
    data : ndarray, shape (x, y, z)
        The image's scores in nilearn's dtype, non-finite ones set to 0.
    img : nibabel.Nifti1Image
        The image as nilearn checks it (``dtype="auto"``).
    """
    from nilearn.image import check_niimg_3d

    threshold, robust = map_color_limits(np.asarray(img.dataobj))
    img = check_niimg_3d(img, dtype="auto")
    if vmax is None or not np.isfinite(vmax) or vmax <= 0:
        vmax = robust
    data = np.array(img.dataobj)
    data[~np.isfinite(data)] = 0
    return min(threshold, vmax / 2), float(vmax), data, img


def _symmetric_limits(data: np.ndarray, vmax: float) -> tuple[float | None, float, float]:
    """Colour-bar limits and lower colour limit of a map shown up to ``vmax``.

    ``data`` has any shape. Returns ``(cbar_vmin, cbar_vmax, vmin)`` as nilearn sets
    them for ``symmetric_cbar="auto"`` without ``vmin``: symmetric when the map has
    scores of both signs below ``vmax``, else from 0 (positive maps) or the smallest
    score.
    """
    data_min, data_max = float(np.nanmin(data)), float(np.nanmax(data))
    if data_min < 0 < min(data_max, vmax):
        return -vmax, vmax, -vmax
    cbar_vmin = 0.0 if data_min >= 0 else None
    return cbar_vmin, vmax, data_min


def plot_roi_bars(
    subjects: pd.DataFrame,
    *,
    metric: str = "mean_r",
    ceiling: str | None = "noise_ceiling_r",
    title: str | None = None,
) -> Figure:
    """One panel per ROI: a bar per model (across-subject mean), one dot per subject.

    Panels are laid out :data:`ROI_PANELS_PER_ROW` to a row and share their axes: the
    models are named once, down the left of each row, so the figure stays at most
    :data:`MAX_FIGURE_WIDTH` inches wide whatever the number of ROIs and models, and
    needs no legend. More than :data:`MAX_ROI_PANELS` ROIs (the parcels of an atlas)
    are drawn instead as one map of the across-subject means, a row per model and a
    column per ROI (NaN cells grey; no subject dots or ceilings), at most
    :data:`MAX_FIGURE_WIDTH` inches wide.

    Parameters
    ----------
    subjects : pandas.DataFrame
        Per-subject summary rows with columns ``subject``, ``model``, ``roi`` and
        ``metric`` (``model`` may be a combined model label).
    metric : str
        Column drawn as bars (mean across subjects) and dots (subjects).
    ceiling : str | None
        Column drawn as a dashed tick across each bar (mean across subjects); skipped
        when absent or all NaN.
    title : str | None
        Figure title; what the marks show is added to it (bars, dots and dashes, or the
        map's colours).

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure; its axes are the ROI panels in ROI order (titled with the ROI),
        then any unused panel of the last row (hidden); or, for many ROIs, the map and
        its colour bar.
    """
    for column in ("subject", "model", "roi", metric):
        if column not in subjects.columns:
            raise ValueError(
                f"`subjects` must have a {column!r} column, got {list(subjects.columns)} instead."
            )
    rois = sorted(subjects["roi"].unique().tolist(), key=lambda v: natural_key(str(v))) or [""]
    models = sorted(subjects["model"].unique().tolist(), key=lambda v: natural_key(str(v)))
    if len(rois) > MAX_ROI_PANELS:
        key = f"{title}: colour mean over subjects" if title else None
        return _roi_map(_group_means(subjects, models, rois, metric), models, rois, metric, key)
    drawn_ceiling = False
    n_cols = min(len(rois), ROI_PANELS_PER_ROW)
    n_rows = -(-len(rois) // n_cols)
    names_width = _names_width(models)
    size = (
        min(MAX_FIGURE_WIDTH, names_width + 2.8 * n_cols),
        n_rows * (0.28 * max(len(models), 1) + 0.9) + 0.5,
    )
    fig = new_figure(size)
    axes = fig.subplots(n_rows, n_cols, sharex=True, sharey=True, squeeze=False)
    colours = [f"C{m % 10}" for m in range(len(models))]
    rng = np.random.default_rng(0)  # fixed jitter keeps figures reproducible
    y = np.arange(len(models))
    for ax, roi in zip(axes.ravel(), rois, strict=False):
        part = subjects[subjects["roi"] == roi]
        means = np.full(len(models), np.nan)
        ceilings = np.full(len(models), np.nan)
        for m, model in enumerate(models):
            rows = part[part["model"] == model]
            vals = rows[metric].astype(float).to_numpy()
            finite = vals[np.isfinite(vals)]
            if finite.size:
                means[m] = finite.mean()
            jitter = rng.uniform(-0.2, 0.2, finite.size)
            ax.plot(finite, m + jitter, "o", ms=3, color="k", alpha=0.7, zorder=3)
            if ceiling is not None and ceiling in rows.columns:
                c = rows[ceiling].astype(float).to_numpy()
                if np.isfinite(c).any():
                    ceilings[m] = np.nanmean(c)
                    drawn_ceiling = True
        ax.barh(y, np.nan_to_num(means), height=0.75, color=colours, alpha=0.8)
        if np.isfinite(ceilings).any():
            ax.vlines(ceilings, y - 0.4, y + 0.4, colors="0.3", linestyles="--")
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_title(str(roi), fontsize="medium")
        ax.grid(axis="x", color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    for ax in axes.ravel()[len(rois) :]:
        ax.set_visible(False)
    axes[0, 0].set_yticks(y, [str(m) for m in models])
    for ax in axes.ravel():
        ax.tick_params(axis="y", labelsize="small")
    axes[0, 0].set_ylim(len(models) - 0.5, -0.5)  # the first model on top
    for ax in axes[-1]:
        ax.set_xlabel(metric)
    for ax in axes[:-1].ravel()[len(rois) - n_cols :]:
        # a panel above an empty slot of the last row carries its own x labels
        ax.set_xlabel(metric)
        ax.tick_params(labelbottom=True)
    if title:
        title += ": bars mean over subjects, dots subjects"
        title += ", dashes noise ceiling" if drawn_ceiling else ""
    _finish(fig, title)
    return fig


def _names_width(names: Sequence[Any], pad: float = 0.4, most: float = 4.0) -> float:
    """Inches that the longest of ``names`` takes along an axis, with ``pad``, at most
    ``most``."""
    return min(0.075 * max((len(str(n)) for n in names), default=1) + pad, most)


def _finish(fig: Figure, title: str | None) -> None:
    """Title ``fig`` (above its panels, which keep their own titles) and lay it out."""
    top = 1.0
    if title:
        fig.suptitle(title, fontsize="medium")
        top = 1.0 - 0.35 / fig.get_size_inches()[1]  # a line of text above the panels
    fig.tight_layout(rect=(0.0, 0.0, 1.0, top))


def _group_means(
    subjects: pd.DataFrame, models: Sequence[Any], rois: Sequence[Any], metric: str
) -> np.ndarray:
    """Across-subject mean of ``metric`` per model and ROI (NaN without a finite value),
    shape (n_models, n_rois)."""
    values = pd.to_numeric(subjects[metric], errors="coerce").astype(float)
    finite = subjects.assign(_value=values.where(np.isfinite(values)))
    means = finite.groupby(["model", "roi"], sort=False)["_value"].mean()
    table = means.unstack("roi").reindex(index=list(models), columns=list(rois))
    return table.to_numpy(dtype=float)


def _roi_map(
    means: np.ndarray,
    models: Sequence[Any],
    rois: Sequence[Any],
    metric: str,
    title: str | None,
) -> Figure:
    """A model x ROI map of ``means`` (n_models, n_rois), for more ROIs than bar panels."""
    n_models, n_rois = means.shape
    labels_height = _names_width(rois, pad=0.3, most=3.0)  # ROI names run up from the axis
    size = (
        min(MAX_FIGURE_WIDTH, _names_width(models) + 1.8 + 0.2 * n_rois),
        0.3 * n_models + labels_height + 1.0,
    )
    fig = new_figure(size)
    ax = fig.add_subplot()
    cmap = map_cmap(means)
    _, vmax = map_color_limits(means, percentile=100.0)  # the largest |mean|
    image = ax.imshow(
        np.ma.masked_invalid(means),
        aspect="auto",
        cmap=matplotlib.colormaps[cmap].with_extremes(bad="0.85"),
        vmin=-vmax if cmap == DIVERGING_CMAP else 0.0,
        vmax=vmax,
        interpolation="nearest",
    )
    step = -(-n_rois // MAX_ROI_LABELS)  # every ROI, or every k-th of very many
    ticks = np.arange(0, n_rois, step)
    ax.set_xticks(ticks, [str(rois[i]) for i in ticks], rotation=90, fontsize="x-small")
    ax.set_yticks(np.arange(n_models), [str(m) for m in models], fontsize="small")
    ax.set_xlabel(f"ROI ({n_rois})")
    bar = fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(metric)
    _finish(fig, title)
    return fig


def plot_score_timecourse(
    scores: np.ndarray,
    times: np.ndarray,
    *,
    names: Sequence[str] | None = None,
    significant: np.ndarray | None = None,
    ceiling: np.ndarray | None = None,
    ylabel: str = "r",
    ax: Axes | None = None,
) -> Figure:
    """Scores over time (e.g. EEG decoding or encoding r per time point).

    Parameters
    ----------
    scores : array-like, shape (n_times,) or (n_lines, n_times)
        One line per channel, ROI or model.
    times : array-like, shape (n_times,)
        Time of each score, in seconds.
    names : sequence of str | None
        Legend label per line.
    significant : array-like of bool, shape like ``scores`` | None
        Significant points, marked under each line.
    ceiling : array-like, shape like ``scores`` | None
        Noise ceiling, drawn dashed.
    ylabel : str
        Y-axis label.
    ax : matplotlib.axes.Axes | None
        Axes to draw in; a new figure when None.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure holding the axes.
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    times = np.asarray(times, dtype=np.float64)
    if scores.ndim != 2 or times.shape != scores.shape[-1:]:
        raise ValueError(
            f"`times` must have shape ({scores.shape[-1]},) like the last axis of `scores`, "
            f"got {times.shape} instead."
        )
    if names is not None and len(names) != scores.shape[0]:
        raise ValueError(f"`names` must have {scores.shape[0]} entries, got {len(names)} instead.")
    extras = {}
    for name, value in (("significant", significant), ("ceiling", ceiling)):
        if value is not None:
            value = np.atleast_2d(np.asarray(value))
            if value.shape != scores.shape:
                raise ValueError(
                    f"`{name}` must have shape {scores.shape} like `scores`, "
                    f"got {value.shape} instead."
                )
            extras[name] = value
    own = ax is None
    if ax is None:
        fig = new_figure((6, 3))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    finite = scores[np.isfinite(scores)]
    floor = finite.min() if finite.size else 0.0
    span = np.ptp(finite) if finite.size else 1.0
    for i, line in enumerate(scores):
        (handle,) = ax.plot(times, line, label=None if names is None else names[i])
        if "ceiling" in extras:
            ax.plot(times, extras["ceiling"][i], "--", color=handle.get_color(), lw=0.8)
        if "significant" in extras:
            mask = extras["significant"][i].astype(bool)
            level = floor - (0.05 + 0.03 * i) * (span or 1.0)
            ax.plot(times[mask], np.full(mask.sum(), level), "s", ms=2, color=handle.get_color())
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel("Time (s)")
    ax.set_ylabel(ylabel)
    if names is not None:
        legend_outside(ax, fontsize="small")
    if own:
        fig.tight_layout()  # room for the legend
    return fig


def plot_topomap(
    scores: np.ndarray,
    info,
    *,
    significant: np.ndarray | None = None,
    title: str | None = None,
    axes: Axes | None = None,
) -> Figure:
    """Channel scores on a scalp map with :func:`mne.viz.plot_topomap`.

    Parameters
    ----------
    scores : array-like, shape (n_channels,)
        Score per channel, in the channel order of ``info``.
    info : mne.Info
        Measurement info with channel positions (a montage).
    significant : array-like of bool, shape (n_channels,) | None
        Channels marked on the map.
    title : str | None
        Axes title.
    axes : matplotlib.axes.Axes | None
        Axes to draw in; a new figure when None.

    Returns
    -------
    fig : matplotlib.figure.Figure
        The figure holding the map.
    """
    import mne

    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (len(info["ch_names"]),):
        raise ValueError(
            f"`scores` must have shape ({len(info['ch_names'])},) like the channels of `info`, "
            f"got {scores.shape} instead."
        )
    if axes is None:
        fig = new_figure((3, 3))
        axes = fig.add_subplot()
    else:
        fig = axes.figure
    finite = np.abs(scores[np.isfinite(scores)])
    lim = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    mask = None if significant is None else np.asarray(significant, dtype=bool)
    mne.viz.plot_topomap(
        np.nan_to_num(scores),
        info,
        axes=axes,
        show=False,
        cmap="RdBu_r",
        vlim=(-lim, lim),
        mask=mask,
    )
    if title:
        axes.set_title(title)
    return fig


def _curves(name: str, values: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """``values`` as float64, checked to have ``shape``."""
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    if values.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}, got {values.shape} instead.")
    return values


def plot_training_curves(
    train_loss: np.ndarray,
    val_r: np.ndarray,
    *,
    best_epoch: np.ndarray | None = None,
    val_r_subject: np.ndarray | None = None,
    epochs: np.ndarray | None = None,
    seeds: Sequence[str] | None = None,
    loss_label: str = "training loss",
    title: str | None = None,
) -> Figure:
    """Training loss and validation r per epoch, one line per seed.

    Parameters
    ----------
    train_loss : array-like, shape (n_seeds, n_epochs)
        Mean training loss of each epoch; NaN after a seed's early stop (not drawn).
    val_r : array-like, shape (n_seeds, n_epochs)
        Validation Pearson r of each epoch (mean over subjects).
    best_epoch : array-like of int, shape (n_seeds,) | None
        Index along the epochs of the weights each seed kept, marked on its validation
        line; a negative index or one beyond the curve marks nothing.
    val_r_subject : array-like, shape (n_seeds, n_epochs, n_subjects) | None
        Validation r of each subject, drawn as thin lines in the seed's colour.
    epochs : array-like, shape (n_epochs,) | None
        Epoch numbers on the x-axis; ``0 .. n_epochs - 1`` by default.
    seeds : sequence of str, shape (n_seeds,) | None
        Legend label of each seed; ``seed <k>`` by default.
    loss_label : str
        Y-axis label of the loss panel (e.g. the loss's name).
    title : str | None
        Figure title.

    Returns
    -------
    fig : matplotlib.figure.Figure
        Two panels: the training loss (left) and the validation r (right).
    """
    train_loss = np.atleast_2d(np.asarray(train_loss, dtype=np.float64))
    if train_loss.ndim != 2:
        raise ValueError(
            f"`train_loss` must have shape (n_seeds, n_epochs), got {train_loss.shape} instead."
        )
    n_seeds, n_epochs = train_loss.shape
    val_r = _curves("val_r", np.atleast_2d(np.asarray(val_r, dtype=np.float64)), train_loss.shape)
    best = _curves("best_epoch", best_epoch, (n_seeds,))
    per_subject = None
    if val_r_subject is not None:
        per_subject = np.asarray(val_r_subject, dtype=np.float64)
        if per_subject.ndim != 3 or per_subject.shape[:2] != train_loss.shape:
            raise ValueError(
                f"`val_r_subject` must have shape ({n_seeds}, {n_epochs}, n_subjects), got "
                f"{per_subject.shape} instead."
            )
    x = _curves("epochs", np.arange(n_epochs) if epochs is None else epochs, (n_epochs,))
    labels = [f"seed {k}" for k in range(n_seeds)] if seeds is None else [str(s) for s in seeds]
    if len(labels) != n_seeds:
        raise ValueError(f"`seeds` must have {n_seeds} entries, got {len(labels)} instead.")
    fig = new_figure((9, 3.5))
    loss_ax, r_ax = fig.subplots(1, 2)
    for k in range(n_seeds):
        (line,) = loss_ax.plot(x, train_loss[k], lw=1.5, label=labels[k])
        color = line.get_color()
        if per_subject is not None:
            r_ax.plot(x, per_subject[k], lw=0.6, alpha=0.35, color=color)
        r_ax.plot(x, val_r[k], lw=1.5, color=color, label=labels[k])
        if best is not None and np.isfinite(best[k]) and 0 <= int(best[k]) < n_epochs:
            e = int(best[k])
            r_ax.plot(x[e], val_r[k, e], "o", ms=6, color=color, mec="k", zorder=3)
    loss_ax.set_xlabel("Epoch")
    loss_ax.set_ylabel(loss_label)
    r_ax.axhline(0, color="0.5", lw=0.8)
    r_ax.set_xlabel("Epoch")
    r_ax.set_ylabel("validation r")
    notes = [
        *(["thin: subjects"] if per_subject is not None else []),
        *(["dot: kept epoch"] if best is not None else []),
    ]
    r_ax.set_title("validation r" + (f" ({'; '.join(notes)})" if notes else ""), fontsize="small")
    loss_ax.set_title("training loss", fontsize="small")
    if n_seeds:
        legend_outside(r_ax, fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, stem: Path, formats: Sequence[str], *, dpi: int = 100) -> list[Path]:
    """Save a figure in several formats.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Figure to save.
    stem : Path
        Output path without suffix.
    formats : sequence of str
        File formats, e.g. ``["png", "svg"]``.
    dpi : int
        Resolution of raster formats.

    Returns
    -------
    paths : list of Path
        The files written.
    """
    paths = []
    for fmt in formats:
        path = Path(f"{stem}.{fmt}")
        fig.savefig(path, dpi=dpi, format=fmt)
        paths.append(path)
    return paths

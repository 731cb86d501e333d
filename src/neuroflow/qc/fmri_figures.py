"""Figures of an fMRI run's quality-control store: mean EPI, tSNR map, carpet plot,
motion traces and the variance each nuisance set removed, as PNG files.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from neuroflow.figures import label_colorbar, new_figure
from neuroflow.io.files import scores_to_nifti
from neuroflow.preprocessing.fmri.inputs import load_bold

__all__ = [
    "FIGURE_KINDS",
    "fmri_qc_figures",
]


#: Figures written by :func:`fmri_qc_figures`, in order.
FIGURE_KINDS = ("mean", "tsnr", "carpet", "motion", "variance_removed")


_DPI = 100


def _voxel_image(qc: xr.Dataset, values: np.ndarray) -> nib.Nifti1Image:
    """Per-voxel values placed back on the run's grid (0 elsewhere)."""
    ijk = np.column_stack([qc[c].values for c in "ijk"]).astype(np.int64)
    return scores_to_nifti(
        values, ijk, affine=np.asarray(qc.attrs["affine"]), mask_shape=qc.attrs["mask_shape"]
    )


def _title(qc: xr.Dataset, what: str) -> str:
    """Figure title: the run's entities and what is shown."""
    entities = qc.attrs.get("entities") or {}
    run = ", ".join(f"{k} {v}" for k, v in entities.items())
    return f"{run}: {what}" if run else what


def _plot_mean(qc: xr.Dataset, bold: Path) -> Figure:
    """Mean EPI image."""
    from nilearn import plotting

    fig = new_figure((8, 3))
    plotting.plot_epi(
        _voxel_image(qc, qc["mean"].values),
        figure=fig,
        title=_title(qc, "mean EPI"),
        draw_cross=False,
        colorbar=True,
    )
    label_colorbar(fig.axes[-1], "mean signal (scanner units)")
    return fig


def _plot_tsnr(qc: xr.Dataset, bold: Path) -> Figure:
    """tSNR map over the mean EPI, colour limit at the 99th percentile."""
    from nilearn import plotting

    values = qc["tsnr"].values
    positive = values[values > 0]
    vmax = float(np.percentile(positive, 99)) if positive.size else 1.0
    fig = new_figure((8, 3))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*empty.*", category=UserWarning)
        plotting.plot_stat_map(
            _voxel_image(qc, np.minimum(values, vmax)),
            bg_img=_voxel_image(qc, qc["mean"].values),
            figure=fig,
            title=_title(qc, "tSNR"),
            cmap="inferno",
            vmin=0.0,
            vmax=vmax if vmax > 0 else 1.0,
            symmetric_cbar=False,
            threshold=1e-6,
            draw_cross=False,
            colorbar=True,
        )
    label_colorbar(fig.axes[-1], "tSNR (mean / s.d. over time)")
    return fig


def _plot_carpet(qc: xr.Dataset, bold: Path) -> Figure:
    """Carpet plot of the raw run's kept volumes in the store's voxels."""
    from nilearn import plotting
    from nilearn.image import index_img

    img = load_bold(bold)
    expected = (*qc.attrs["mask_shape"], qc.attrs["n_volumes_acquired"])
    if tuple(int(s) for s in img.shape) != tuple(int(s) for s in expected):
        raise ValueError(
            f"BOLD image {bold} must have the shape {list(expected)} of its quality "
            f"control, got {list(img.shape)} instead."
        )
    n_drop = int(qc.attrs["n_dropped"])
    if n_drop:
        img = index_img(img, slice(n_drop, None))
    mask = _voxel_image(qc, np.ones(qc.sizes["voxel"]))
    mask = nib.Nifti1Image(np.asarray(mask.dataobj).astype(np.uint8), mask.affine)
    fig = new_figure((8, 5))
    with warnings.catch_warnings():
        # constant voxels cannot be standardised; they are drawn flat
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        plotting.plot_carpet(
            img,
            mask_img=mask,
            t_r=float(qc.attrs["tr"]),
            standardize="zscore_sample",
            figure=fig,
            title=_title(qc, "carpet (raw, detrended, z-scored)"),
        )
    if n_drop:
        for ax in fig.axes:
            if ax.get_xlabel().startswith("time"):
                ax.set_xlabel(f"time from volume {n_drop} (s)")
    return fig


def _plot_motion(qc: xr.Dataset, bold: Path) -> Figure:
    """FD, DVARS and global signal over time, scrubbed volumes marked."""
    t = qc["time"].values
    scrubbed = qc["scrubbed"].values.astype(bool)
    fig = new_figure((8, 6))
    ax_fd, ax_dvars, ax_gs = fig.subplots(3, 1, sharex=True)
    if "framewise_displacement" in qc:
        fd = qc["framewise_displacement"].values
        ax_fd.plot(t, fd, color="C0", lw=1)
        ax_fd.plot(t[scrubbed], fd[scrubbed], "x", color="C3", label="scrubbed")
        threshold = qc.attrs.get("fd_threshold")
        if threshold is not None:
            ax_fd.axhline(threshold, color="C3", ls="--", lw=0.8, label=f"{threshold:g} mm")
        if scrubbed.any() or threshold is not None:
            ax_fd.legend(fontsize="small", frameon=False, loc="upper right")
        ax_fd.set_ylabel("FD (mm)")
    else:
        ax_fd.text(
            0.5,
            0.5,
            "no framewise displacement (no motion parameters)",
            ha="center",
            va="center",
            transform=ax_fd.transAxes,
        )
        ax_fd.set_yticks([])
        ax_fd.set_ylabel("FD")
    for ax, name, label in (
        (ax_dvars, "dvars", "DVARS (%)"),
        (ax_gs, "global_signal", "global signal"),
    ):
        ax.plot(t, qc[name].values, color="C0", lw=1)
        ax.set_ylabel(label)
    for ax in (ax_fd, ax_dvars, ax_gs):
        for time in t[scrubbed]:
            ax.axvline(time, color="C3", alpha=0.2, lw=2)
    ax_gs.set_xlabel("Time (s)")
    ax_fd.set_title(_title(qc, "motion and signal"))
    fig.tight_layout()
    return fig


def _plot_variance_removed(qc: xr.Dataset, bold: Path) -> Figure:
    """Box plot of the variance each nuisance set explains, medians annotated."""
    sets = [str(s) for s in qc["nuisance_set"].values]
    removed = 100.0 * qc["variance_removed"].values
    fig = new_figure((max(4.0, 1.1 * len(sets) + 1.5), 3.5))
    ax = fig.add_subplot()
    positions = np.arange(1, len(sets) + 1)
    ax.boxplot(list(removed), positions=positions, widths=0.6, showfliers=False)
    for pos, values in zip(positions, removed, strict=True):
        median = float(np.median(values)) if values.size else 0.0
        ax.annotate(
            f"{median:.1f}%",
            (pos, median),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="small",
        )
    ax.set_xticks(positions, sets, rotation=30, ha="right")
    ax.set_ylim(0, 100)
    ax.set_ylabel("variance removed (%)")
    ax.set_title(_title(qc, "variance explained per nuisance set"))
    fig.tight_layout()
    return fig


_FIGURES = {
    "mean": _plot_mean,
    "tsnr": _plot_tsnr,
    "carpet": _plot_carpet,
    "motion": _plot_motion,
    "variance_removed": _plot_variance_removed,
}


def fmri_qc_figures(
    qc: xr.Dataset,
    *,
    bold: str | os.PathLike,
    out_dir: str | os.PathLike,
    prefix: str,
) -> list[Path]:
    """Write the quality-control figures of one run as PNG files.

    Parameters
    ----------
    qc : xarray.Dataset
        Result of :func:`fmri_qc_dataset`.
    bold : path-like
        The raw 4-D BOLD NIfTI (for the carpet plot).
    out_dir : path-like
        Folder to write to (created when missing).
    prefix : str
        File name prefix; files are ``{prefix}_qc-{kind}.png``.

    Returns
    -------
    paths : list of Path
        The written files, for the kinds of :data:`FIGURE_KINDS` in order: ``mean``
        (mean EPI), ``tsnr`` (tSNR map, colour limit at the 99th percentile),
        ``carpet`` (raw signal of the kept volumes), ``motion`` (FD with the scrubbing
        threshold and scrubbed volumes, DVARS, global signal over time) and
        ``variance_removed`` (per nuisance set, in %).
    """
    if not isinstance(qc, xr.Dataset):
        raise TypeError(f"`qc` must be an xarray.Dataset, got {type(qc).__name__} instead.")
    needed = ["mean", "tsnr", "dvars", "global_signal", "scrubbed", "variance_removed"]
    missing = [n for n in needed if n not in qc] + [
        a for a in ("affine", "mask_shape", "tr", "n_dropped") if a not in qc.attrs
    ]
    if missing:
        raise ValueError(
            f"`qc` must be a result of fmri_qc_dataset, got one missing {missing} instead."
        )
    if not isinstance(prefix, str) or not prefix or "/" in prefix:
        raise ValueError(f"`prefix` must be a non-empty file name prefix, got {prefix!r} instead.")
    bold = Path(bold)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind in FIGURE_KINDS:
        path = out_dir / f"{prefix}_qc-{kind}.png"
        # outside pyplot: the figure goes with its last reference (clearing it first
        # rebuilt every axis's ticks, a tenth of the drawing time)
        _FIGURES[kind](qc, bold).savefig(path, dpi=_DPI)
        paths.append(path)
    return paths

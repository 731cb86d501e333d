"""Figures on matplotlib's Agg canvas, outside pyplot's global state, and their thumbnails.

Every figure of the package is drawn on a :class:`matplotlib.figure.Figure` bound to
the non-interactive Agg canvas: pyplot's backend and figure registry are never touched,
so drawing is safe in batch jobs and threads.

The Snakemake report embeds every file it lists, so it lists small thumbnails of the
raster figures (:func:`write_thumbnails`) while the full-size files stay in ``results/``.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image

from neuroflow.artifacts import atomic_directory, atomic_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

__all__ = [
    "THUMBNAIL_PRESETS",
    "THUMBNAIL_SUFFIXES",
    "encode_thumbnail",
    "label_colorbar",
    "legend_outside",
    "new_figure",
    "thumbnail_size",
    "write_thumbnail",
    "write_thumbnails",
]

#: File suffix of each thumbnail format.
THUMBNAIL_SUFFIXES = {"png": ".png", "jpeg": ".jpg"}

#: Thumbnail settings of the report's figures. ``photo``: contact sheets of stimuli, as
#: JPEG; ``plot``: plots, as 256-colour PNG (sharp lines and text), or JPEG where the
#: PNG would exceed the byte bound (dense images such as carpet plots). A plot up to
#: 1,600 px wide (the widest the summary draws at its default resolution) keeps its
#: pixels: scaling blurs text and lines, which then compress worse, not better.
THUMBNAIL_PRESETS: dict[str, dict] = {
    "photo": {"max_side": 800, "max_bytes": 30_000, "formats": ("jpeg",)},
    "plot": {"max_side": 1600, "max_bytes": 40_000, "formats": ("png", "jpeg")},
}

#: JPEG qualities tried in turn before the image is made smaller.
_JPEG_QUALITIES = (85, 75, 65)
#: Each size step scales both sides by this factor.
_SHRINK = 0.8
#: Smallest longest side a thumbnail is shrunk to.
_MIN_SIDE = 16
#: Raster files read as figures.
_RASTER_SUFFIXES = (".png", ".jpg", ".jpeg")


def new_figure(size: tuple[float, float]) -> Figure:
    """A figure on the Agg canvas, outside pyplot's figure manager.

    Parameters
    ----------
    size : tuple of float, shape (2,)
        Width and height in inches.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    # matplotlib is imported here, not with the module: the workflow's planning reads
    # the thumbnail presets below and draws nothing
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def label_colorbar(bar: Axes, label: str | None) -> None:
    """Write ``label`` along a colour bar that a library drew (nilearn's maps).

    Parameters
    ----------
    bar : matplotlib.axes.Axes
        The colour bar's axes (nilearn adds it last: ``fig.axes[-1]``); the label goes
        on the side of its ticks, inside the figure.
    label : str | None
        What the colours show, with units (nothing is written when None or empty).
    """
    if label:
        bar.yaxis.set_label_position("left")
        bar.set_ylabel(label, fontsize="small", labelpad=1)


def legend_outside(ax: Axes, **kwargs) -> Legend:
    """A legend to the right of ``ax``, where it covers no data.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes whose labelled artists are listed.
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.legend` (``fontsize``, ``title``, ...).

    Returns
    -------
    legend : matplotlib.legend.Legend
        Anchored at the axes' top right corner, outside them; the figure's layout
        (``tight_layout`` or ``layout="constrained"``) makes room for it.
    """
    kwargs = {"frameon": False, **kwargs}
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def thumbnail_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The size of an image scaled so that its longest side is at most ``max_side``.

    Parameters
    ----------
    width, height : int
        Size of the image in pixels.
    max_side : int
        Longest side allowed, in pixels.

    Returns
    -------
    size : tuple of int, shape (2,)
        ``(width, height)``, the aspect ratio kept (each side rounded, at least 1); the
        image's own size when it already fits.
    """
    for name, value in (("width", width), ("height", height), ("max_side", max_side)):
        if int(value) != value or value < 1:
            raise ValueError(f"`{name}` must be a positive integer, got {value!r} instead.")
    scale = min(1.0, max_side / max(width, height))
    return max(1, round(width * scale)), max(1, round(height * scale))


def _encode(image: Image.Image, fmt: str, quality: int) -> bytes:
    buffer = io.BytesIO()
    if fmt == "png":
        # median cut keeps every colour of an image that has at most 256 of them; for
        # more (anti-aliased curves, colour maps) the fast octree is about ten times
        # quicker, with a smaller largest error per pixel
        few = image.getcolors(256) is not None
        method = Image.Quantize.MEDIANCUT if few else Image.Quantize.FASTOCTREE
        palette = image.quantize(256, method=method, dither=Image.Dither.NONE)
        palette.save(buffer, "PNG", optimize=True)
    else:
        image.save(buffer, "JPEG", quality=quality, optimize=True)
    return buffer.getvalue()


def _opaque(image: Image.Image) -> Image.Image:
    """RGB image, transparent parts on white (JPEG and the palette have no alpha)."""
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def encode_thumbnail(
    image: Image.Image,
    *,
    max_side: int,
    max_bytes: int,
    formats: Sequence[str] = ("png", "jpeg"),
) -> tuple[bytes, str]:
    """Encode a downscaled copy of an image in at most ``max_bytes`` bytes.

    The image is scaled to fit ``max_side`` (aspect kept), then encoded in each format
    in turn (PNG: 256-colour palette; JPEG: quality 85, 75, 65); the first encoding that
    fits ``max_bytes`` is returned. When none fits, the image is shrunk by a fifth and
    the formats are tried again.

    Parameters
    ----------
    image : PIL.Image.Image
        The figure, of shape (height, width) pixels in any mode; transparency is drawn
        on white.
    max_side : int
        Longest side of the thumbnail in pixels.
    max_bytes : int
        Largest size of the encoded thumbnail in bytes.
    formats : sequence of {"png", "jpeg"}
        Formats in order of preference.

    Returns
    -------
    data : bytes
        The encoded thumbnail.
    fmt : str
        Its format, one of ``formats``.
    """
    unknown = [f for f in formats if f not in THUMBNAIL_SUFFIXES]
    if unknown or not formats:
        raise ValueError(
            f"`formats` must be a non-empty sequence of {sorted(THUMBNAIL_SUFFIXES)}, "
            f"got {list(formats)!r} instead."
        )
    if int(max_bytes) != max_bytes or max_bytes < 1:
        raise ValueError(f"`max_bytes` must be a positive integer, got {max_bytes!r} instead.")
    rgb = _opaque(image)
    size = thumbnail_size(*rgb.size, max_side)
    while True:
        scaled = rgb if size == rgb.size else rgb.resize(size, Image.Resampling.LANCZOS)
        for fmt in formats:
            for quality in _JPEG_QUALITIES if fmt == "jpeg" else (0,):
                data = _encode(scaled, fmt, quality)
                if len(data) <= max_bytes:
                    return data, fmt
        if max(size) <= _MIN_SIDE:
            raise ValueError(
                f"`max_bytes` must allow a {size[0]} x {size[1]} pixel thumbnail, got "
                f"{max_bytes} bytes instead (the smallest encoding takes {len(data)})."
            )
        size = thumbnail_size(*size, max(_MIN_SIDE, int(max(size) * _SHRINK)))


def write_thumbnail(
    source: str | os.PathLike,
    target: str | os.PathLike,
    *,
    max_side: int,
    max_bytes: int,
    formats: Sequence[str] = ("png", "jpeg"),
) -> Path:
    """Write the thumbnail of one image file (see :func:`encode_thumbnail`), atomically.

    Parameters
    ----------
    source : path-like
        The full-size image (PNG or JPEG); left as it is.
    target : path-like
        Where to write; its suffix is replaced by that of the chosen format
        (``.png`` or ``.jpg``).
    max_side, max_bytes, formats
        As in :func:`encode_thumbnail`.

    Returns
    -------
    path : Path
        The file written.
    """
    source = Path(source)
    try:
        with Image.open(source) as image:
            image.load()
            data, fmt = encode_thumbnail(
                image, max_side=max_side, max_bytes=max_bytes, formats=formats
            )
    except (OSError, Image.DecompressionBombError) as err:
        raise ValueError(f"`source` must be a readable image, got {source} ({err}).") from err
    path = Path(target).with_suffix(THUMBNAIL_SUFFIXES[fmt])
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
    return path


def write_thumbnails(
    source_dir: str | os.PathLike,
    target_dir: str | os.PathLike,
    *,
    max_side: int,
    max_bytes: int,
    formats: Sequence[str] = ("png", "jpeg"),
) -> list[Path]:
    """Write the thumbnail of every figure of a folder into a new folder, one per name.

    Parameters
    ----------
    source_dir : path-like
        Folder of full-size figures. Its PNG and JPEG files get a thumbnail of the same
        stem; an SVG file whose name has no raster figure is copied as it is (a vector
        figure has no pixels to reduce); other files (PDF) are left out.
    target_dir : path-like
        Folder to write, built under a temporary name and moved into place when complete.
    max_side, max_bytes, formats
        As in :func:`encode_thumbnail`.

    Returns
    -------
    paths : list of Path
        The thumbnails (and SVG copies) written, sorted by name.
    """
    source_dir, target_dir = Path(source_dir), Path(target_dir)
    if not source_dir.is_dir():
        raise ValueError(f"`source_dir` must be a folder of figures, got {source_dir} instead.")
    sources = sorted(p for p in source_dir.iterdir() if p.suffix.lower() in _RASTER_SUFFIXES)
    stems = [p.stem for p in sources]
    if len(set(stems)) < len(stems):
        raise ValueError(
            f"`source_dir` must hold one raster figure per name, got {source_dir} with "
            f"{sorted({s for s in stems if stems.count(s) > 1})} in several formats."
        )
    vectors = [
        p for p in sorted(source_dir.glob("*.svg")) if p.stem not in set(stems)
    ]  # a figure written as PNG and SVG is shown once, as the PNG's thumbnail
    names = []
    with atomic_directory(target_dir, keep_intact=False) as tmp:
        for source in sources:
            written = write_thumbnail(
                source, tmp / source.name, max_side=max_side, max_bytes=max_bytes, formats=formats
            )
            names.append(written.name)
        for source in vectors:
            shutil.copyfile(source, tmp / source.name)
            names.append(source.name)
    return [target_dir / name for name in sorted(names)]

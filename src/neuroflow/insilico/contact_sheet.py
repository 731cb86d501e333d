"""Contact sheets: the top and bottom stimuli of one region side by side.

A figure of two rows, ``top k`` above ``bottom k``, each tile labelled with its
stimulus name (and predicted response when given). Images are read with PIL, scaled by
their bit depth (:func:`neuroflow.io.files.read_image`); a file that is missing or
cannot be decoded becomes a grey tile with its name, so one bad file never stops a
report. Text stimuli (sentences, captions) are drawn as two text
panels instead of thumbnails.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from neuroflow.io.files import read_image

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["contact_sheet"]

#: One row of a sheet: its label, the stimuli and their predicted responses.
_Row = tuple[str, Sequence["str | os.PathLike"], "Sequence[float] | None"]

_GREY = 0.6
_DPI = 100


def _thumbnail(path: str | os.PathLike, thumb: int) -> np.ndarray | None:
    """RGB thumbnail of an image file (longest side ``thumb`` pixels), None if unreadable."""
    from PIL import Image

    try:
        rgb = read_image(path, "Stimulus image")  # 16-bit images scaled by their bit depth
    except (OSError, ValueError):  # missing, truncated or not an image
        return None
    img = Image.fromarray(rgb)
    img.thumbnail((thumb, thumb))
    return np.asarray(img)


def _label(name: str, value: float | None, width: int = 18) -> str:
    short = name if len(name) <= width else "…" + name[-(width - 1) :]
    return short if value is None else f"{short}\n{value:.3g}"


def _image_rows(fig: Figure, rows: Sequence[_Row], n_cols: int, thumb: int) -> None:
    for r, (label, paths, vals) in enumerate(rows):
        for c in range(n_cols):
            ax = fig.add_subplot(len(rows), n_cols, r * n_cols + c + 1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(label, fontsize=9)
            if c >= len(paths):  # the shorter row: empty, keeping the row label
                for spine in ax.spines.values():
                    spine.set_visible(False)
                continue
            name = Path(str(paths[c])).name
            image = _thumbnail(paths[c], thumb)
            value = None if vals is None else float(vals[c])
            if image is None:
                ax.imshow(np.full((thumb, thumb, 3), _GREY), vmin=0, vmax=1)
                ax.text(
                    0.5, 0.5, f"{name}\n(unreadable)", ha="center", va="center",
                    fontsize=6, transform=ax.transAxes, wrap=True,
                )  # fmt: skip
            else:
                ax.imshow(image)
            ax.set_title(_label(name, value), fontsize=6)


def _text_rows(fig: Figure, rows: Sequence[_Row], width_chars: int) -> None:
    for r, (label, texts, vals) in enumerate(rows):
        ax = fig.add_subplot(len(rows), 1, r + 1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylabel(label, fontsize=9)
        lines = []
        for i, text in enumerate(texts):
            value = "" if vals is None else f" [{float(vals[i]):.3g}]"
            wrapped = textwrap.shorten(str(text), width=width_chars, placeholder=" …")
            lines.append(f"{i + 1}. {wrapped}{value}")
        ax.text(
            0.01, 0.98, "\n".join(lines), ha="left", va="top", fontsize=7,
            transform=ax.transAxes, family="monospace",
        )  # fmt: skip


def contact_sheet(
    top: Sequence[str | os.PathLike],
    bottom: Sequence[str | os.PathLike],
    title: str,
    out_png: str | os.PathLike,
    thumb: int = 96,
    *,
    kind: str = "image",
    top_values: Sequence[float] | None = None,
    bottom_values: Sequence[float] | None = None,
) -> Path:
    """Draw the top and bottom stimuli of one region into a PNG.

    Parameters
    ----------
    top, bottom : sequence of path-like | sequence of str
        Image files (``kind="image"``), or the sentences (``kind="text"``), from the
        most extreme on.
    title : str
        Figure title (e.g. the region and the model).
    out_png : path-like
        Output file; its folder is created.
    thumb : int
        Thumbnail size in pixels (the longest side of each image).
    kind : {"image", "text"}
        Thumbnails of image files, or text panels of sentences.
    top_values, bottom_values : sequence of float | None
        Predicted responses printed under each stimulus.

    Returns
    -------
    out_png : Path
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if kind not in ("image", "text"):
        raise ValueError(f"kind must be 'image' or 'text', got {kind!r} instead.")
    if not (isinstance(thumb, int) and thumb >= 8):
        raise ValueError(f"thumb must be an int >= 8 pixels, got {thumb!r} instead.")
    top, bottom = list(top), list(bottom)
    for name, vals, items in (("top", top_values, top), ("bottom", bottom_values, bottom)):
        if vals is not None and len(vals) != len(items):
            raise ValueError(
                f"{name}_values must have one value per stimulus ({len(items)}), got "
                f"{len(vals)} instead."
            )
    rows: list[_Row] = [
        (f"top {len(top)}", top, top_values),
        (f"bottom {len(bottom)}", bottom, bottom_values),
    ]
    n_cols = max(len(top), len(bottom), 1)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind == "image":
        tile = (thumb + 40) / _DPI  # room for the labels
        fig = plt.figure(
            figsize=(max(n_cols * tile, 3.0), 2 * tile + 0.5), dpi=_DPI, layout="constrained"
        )
        _image_rows(fig, rows, n_cols, thumb)
    else:
        n_lines = max(len(top), len(bottom), 1)
        fig = plt.figure(
            figsize=(8.0, 2 * (0.2 + 0.14 * n_lines) + 0.5), dpi=_DPI, layout="constrained"
        )
        _text_rows(fig, rows, width_chars=100)
    fig.suptitle(title, fontsize=10)
    try:
        fig.savefig(out, dpi=_DPI)
    finally:
        plt.close(fig)
    return out

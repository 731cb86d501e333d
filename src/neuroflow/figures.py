"""Figures on matplotlib's Agg canvas, outside pyplot's global state.

Every figure of the package is drawn on a :class:`matplotlib.figure.Figure` bound to
the non-interactive Agg canvas: pyplot's backend and figure registry are never touched,
so drawing is safe in batch jobs and threads.
"""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["new_figure"]


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
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    return fig

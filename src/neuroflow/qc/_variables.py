"""Variables of the QC stores, each with its ``long_name`` and ``units``."""

from __future__ import annotations

from typing import Any

__all__ = ["described"]


def described(
    values: Any, dims: tuple[str, ...], long_name: str, units: str, **extra: Any
) -> tuple[tuple[str, ...], Any, dict[str, Any]]:
    """A ``(dims, values, attrs)`` variable tuple for :class:`xarray.Dataset`.

    Parameters
    ----------
    values : array-like
        The data.
    dims : tuple of str
        Its dimensions.
    long_name, units : str
        What it is and its unit (or measure: ``"count"``, ``"bool"``, ``"text"``).
    **extra
        Further attributes, after these two.

    Returns
    -------
    variable : tuple
        ``(dims, values, {"long_name": ..., "units": ..., **extra})``.
    """
    return (dims, values, {"long_name": long_name, "units": units, **extra})

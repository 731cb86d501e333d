"""Which rows of a BIDS ``_events.tsv`` are stimulus presentations.

Real events tables mix stimuli with rest, fixation and response rows (ds000117 writes a
20 s rest block as ``stim_file`` ``func/i999.bmp`` with ``stim_type`` ``n/a``). The
``dataset.stimulus_events`` setting says which rows are stimuli, by column values:

``select``
    ``{column: [values]}``: a row is a stimulus only when, for every listed column, its
    cell is one of the values (all rows when empty).
``exclude``
    ``{column: [values]}``: a row whose cell in any listed column is one of the values
    is never a stimulus.

The value ``"n/a"`` matches missing cells (``n/a``, empty). Values are compared as
text (:func:`cell_text`), so ``trigger: [999]`` matches ``999`` and ``999.0`` alike.
Every stage that reads events (feature extraction, alignment to the TR grid, fMRI RSA,
single trials, EEG epoching) applies the same selection through :func:`stimulus_mask`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "DEFAULT_STIMULUS_EVENTS",
    "MISSING",
    "cell_text",
    "check_stimulus_events",
    "events_from_store",
    "is_missing",
    "read_events_table",
    "stimulus_mask",
]

#: Cell values that mean "no value" in BIDS tables.
MISSING = frozenset({"", "n/a", "nan", "none"})

#: Default ``dataset.stimulus_events``: every row with a stimulus id is a stimulus.
DEFAULT_STIMULUS_EVENTS: dict[str, Any] = {"select": {}, "exclude": {}}


def is_missing(value: Any) -> bool:
    """Whether a table cell means "no value" (``n/a``, empty, NaN, None)."""
    # None and every float NaN print as "None" and "nan"
    return str(value).strip().lower() in MISSING


def cell_text(value: Any) -> str:
    """A table cell as comparable text: ``"n/a"`` when missing, numbers without a
    trailing .0 (``5``, ``"5.0"`` and ``5.0`` are all ``"5"``; ``0.25`` stays ``"0.25"``);
    other text stripped."""
    if is_missing(value):
        return "n/a"
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if not np.isfinite(number):
        return text
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def check_stimulus_events(spec: Mapping[str, Any] | None) -> dict[str, dict[str, list[str]]]:
    """Validate a ``stimulus_events`` setting and normalise its values to text.

    Parameters
    ----------
    spec : dict | None
        ``{"select": {column: [values]}, "exclude": {column: [values]}}``; ``None`` or
        missing keys mean no filter.

    Returns
    -------
    spec : dict
        Both keys present, every value a list of str.
    """
    spec = dict(spec or {})
    unknown = sorted(set(spec) - {"select", "exclude"})
    if unknown:
        raise ValueError(
            f"`dataset.stimulus_events` may only have the keys 'select' and 'exclude', got "
            f"{unknown} instead."
        )
    out: dict[str, dict[str, list[str]]] = {}
    for key in ("select", "exclude"):
        rules = spec.get(key) or {}
        if not isinstance(rules, Mapping):
            raise ValueError(
                f"`dataset.stimulus_events.{key}` must map column names to lists of values, "
                f"got {rules!r} instead."
            )
        out[key] = {}
        for column, values in rules.items():
            if isinstance(values, str | int | float) or values is None:
                values = [values]
            if not isinstance(values, Sequence) or not values:
                raise ValueError(
                    f"`dataset.stimulus_events.{key}.{column}` must be a non-empty list of "
                    f"values, got {values!r} instead."
                )
            out[key][str(column)] = [cell_text(v) for v in values]
    return out


def read_events_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read an events table as text (``n/a`` kept as written; CRLF line ends accepted).

    Parameters
    ----------
    path : path-like
        A BIDS ``_events.tsv`` (or any TSV).

    Returns
    -------
    table : pandas.DataFrame
        Every column as str.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Events table {path} does not exist.")
    try:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    table.columns = [str(c).strip() for c in table.columns]
    return table


def stimulus_mask(
    table: pd.DataFrame,
    spec: Mapping[str, Any] | None,
    *,
    id_column: str | None = "stim_file",
    where: str | os.PathLike = "the events table",
) -> np.ndarray:
    """Rows of an events table that are stimulus presentations.

    Parameters
    ----------
    table : pandas.DataFrame
        The events (columns as written in the file).
    spec : dict | None
        ``dataset.stimulus_events`` (see the module docstring).
    id_column : str | None
        Column with each event's stimulus id; rows whose id is missing are not
        stimuli. ``None`` keeps rows without an id (EEG events named by their type).
    where : path-like
        The table's file, for error messages.

    Returns
    -------
    mask : ndarray of bool, shape (n_rows,)
    """
    rules = check_stimulus_events(spec)
    n = len(table)
    mask = np.ones(n, dtype=bool)
    if id_column is not None:
        if id_column in table.columns:
            mask &= ~np.array([is_missing(v) for v in table[id_column]], dtype=bool)
        else:
            mask[:] = False
    for key, keep in (("select", True), ("exclude", False)):
        for column, values in rules[key].items():
            if column not in table.columns:
                if keep:
                    raise ValueError(
                        f"{where}: `dataset.stimulus_events.select` names column {column!r}, "
                        f"which the table does not have (columns: {list(table.columns)})."
                    )
                continue
            hit = np.isin(np.array([cell_text(v) for v in table[column]], dtype=object), values)
            mask &= hit if keep else ~hit
    return mask


def _cells(values: np.ndarray) -> list[str]:
    """Event variable values as table cells (numbers exactly, ``n/a`` for NaN)."""
    values = np.asarray(values)
    if values.dtype.kind in "fiub":
        return ["n/a" if np.isnan(v) else repr(float(v)) for v in values.astype(float)]
    return [str(v) for v in values]


def events_from_store(ds: Any) -> pd.DataFrame:
    """The events a ``preprocess_fmri`` run store keeps, as a table like the source TSV.

    Parameters
    ----------
    ds : xarray.Dataset
        A run store with event variables on dim ``event``: ``event_onset``,
        ``event_duration``, ``stim_file``, ``trial_type`` and ``event_<column>`` for
        the other columns (numeric as float, NaN for n/a; text as str).

    Returns
    -------
    table : pandas.DataFrame, shape (n_events, n_columns)
        Columns named as in the ``_events.tsv`` (``onset``, ``duration``,
        ``stim_file``, ``trial_type``, ``<column>``), cells as text (``n/a`` for
        missing numbers), ready for :func:`stimulus_mask`.
    """
    columns: dict[str, list[str]] = {}
    for name, var in ds.variables.items():
        name = str(name)
        if var.dims != ("event",):
            continue
        if name in ("stim_file", "trial_type"):
            column = name
        elif name.startswith("event_"):
            column = name[len("event_") :]
        else:
            continue
        columns[column] = _cells(var.values)
    return pd.DataFrame(columns, index=pd.RangeIndex(int(ds.sizes.get("event", 0))))

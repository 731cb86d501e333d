"""The ``events`` extractor: a classic condition model read from the events tables.

Beside foundation-model features, an encoding or decoding model often needs the
experimental design itself: which condition each stimulus belongs to (one-hot
columns) and parametric modulators (a number per event, e.g. a response time).
The ``events`` block of an extractor entry says which ``_events.tsv`` columns to
use:

``categorical``
    Columns one-hot coded, one feature per level (``stim_type=FAMOUS``, ...).
    Levels are sorted (numbers by value, then text); ``n/a`` cells give zeros
    (rest or fixation rows evoke nothing).
``numeric``
    Columns used as parametric modulators: the feature is the cell's value.
``levels``
    ``{column: {level: merged level}}`` merges or renames levels (e.g.
    ``{stim_type: {FAMOUS: face, UNFAMILIAR: face}}``); unmapped levels keep
    their name, and a level mapped to ``n/a`` gives zeros.
``name_column``
    Names the events that have no ``stim_file`` (their stimulus id, as the EEG
    stage names its epochs).

:func:`event_feature_rows` encodes each event from its own cells; extraction
(:func:`read_event_features`) averages the rows of each stimulus id, and
alignment to the fMRI TR grid (:func:`neuroflow.features.align.align_features`)
places every event's own row at its onset, so a modulator varies per event.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from neuroflow.features.registry import MODALITIES, Extractor, register_extractor
from neuroflow.io.events import cell_text, is_missing, read_events_table, stimulus_mask

__all__ = [
    "DEFAULT_EVENTS",
    "EVENTS_LAYER",
    "EventsExtractor",
    "event_feature_rows",
    "event_ids",
    "events_spec",
    "feature_names",
    "level_text",
    "mean_event_rows",
    "read_event_features",
]

#: The one layer (store) of the events extractor.
EVENTS_LAYER = "events"

#: Defaults of the ``events`` block of an extractor entry.
DEFAULT_EVENTS: dict[str, Any] = {
    "categorical": [],
    "numeric": [],
    "levels": {},
    "name_column": "trial_type",
}


#: A table cell as a level name (see :func:`neuroflow.io.events.cell_text`).
level_text = cell_text


def _str_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, str) and v.strip() for v in value
    ):
        raise ValueError(
            f"`events.{key}` must be a list of column names (str), got {value!r} instead."
        )
    names = [v.strip() for v in value]
    if len(set(names)) != len(names):
        raise ValueError(f"`events.{key}` must name each column once, got {value!r} instead.")
    return names


def events_spec(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check the ``events`` block of an extractor entry and normalise it.

    Parameters
    ----------
    spec : dict | None
        ``categorical``, ``numeric``, ``levels`` and ``name_column`` (missing
        keys take :data:`DEFAULT_EVENTS`).

    Returns
    -------
    spec : dict
        A copy with every key; ``levels`` keys and values as level text (see
        :func:`level_text`).
    """
    given = dict(spec or {})
    unknown = sorted(set(given) - set(DEFAULT_EVENTS))
    if unknown:
        raise ValueError(
            f"`events` may only have the keys {sorted(DEFAULT_EVENTS)}, got {unknown} instead."
        )
    out = {**DEFAULT_EVENTS, **given}
    categorical = _str_list(out["categorical"], "categorical")
    numeric = _str_list(out["numeric"], "numeric")
    both = sorted(set(categorical) & set(numeric))
    if both:
        raise ValueError(
            f"`events.categorical` and `events.numeric` must not share columns, got {both} in "
            "both instead."
        )
    levels = out["levels"] if out["levels"] is not None else {}
    if not isinstance(levels, Mapping):
        raise ValueError(
            f"`events.levels` must map columns to {{level: merged level}}, got {levels!r} instead."
        )
    merged: dict[str, dict[str, str]] = {}
    for column, mapping in levels.items():
        if str(column) not in categorical:
            raise ValueError(
                f"`events.levels` keys must be columns of `events.categorical` {categorical}, got "
                f"{column!r} instead."
            )
        if not isinstance(mapping, Mapping):
            raise ValueError(
                f"`events.levels.{column}` must map levels to merged levels, got {mapping!r} "
                "instead."
            )
        merged[str(column)] = {level_text(k): level_text(v) for k, v in mapping.items()}
    name_column = out["name_column"]
    if not isinstance(name_column, str) or not name_column.strip():
        raise ValueError(
            f"`events.name_column` must be a non-empty str, got {name_column!r} instead."
        )
    return {
        "categorical": categorical,
        "numeric": numeric,
        "levels": merged,
        "name_column": name_column.strip(),
    }


def event_ids(table: pd.DataFrame, name_column: str = "trial_type") -> list[str | None]:
    """Stimulus id of each event: its ``stim_file``, else its ``name_column`` value.

    Parameters
    ----------
    table : pandas.DataFrame
        Events (columns as in the file).
    name_column : str
        Column naming the events without a ``stim_file``.

    Returns
    -------
    ids : list of (str | None), length n_events
        None for an event with neither.
    """
    n = len(table)
    stims = table["stim_file"].tolist() if "stim_file" in table.columns else [None] * n
    names = table[name_column].tolist() if name_column in table.columns else [None] * n
    out: list[str | None] = []
    for stim, name in zip(stims, names, strict=True):
        if not is_missing(stim):
            out.append(str(stim).strip())
        elif not is_missing(name):
            out.append(str(name).strip())
        else:
            out.append(None)
    return out


def _sort_key(level: str) -> tuple[int, float, str]:
    try:
        return (0, float(level), level)
    except ValueError:
        return (1, 0.0, level)


def _mapped(table: pd.DataFrame, column: str, spec: Mapping[str, Any]) -> list[str | None]:
    """Each event's (merged) level of a categorical column; None for n/a."""
    if column not in table.columns:
        return [None] * len(table)
    mapping = spec["levels"].get(column, {})
    out: list[str | None] = []
    for cell in table[column].tolist():
        text = level_text(cell)
        level = mapping.get(text, text)
        out.append(None if level == "n/a" else level)
    return out


def feature_names(tables: Sequence[pd.DataFrame], spec: Mapping[str, Any]) -> list[str]:
    """Feature names of the events extractor over some events tables.

    Parameters
    ----------
    tables : sequence of pandas.DataFrame
        The events (already selected).
    spec : dict
        Output of :func:`events_spec`.

    Returns
    -------
    names : list of str
        ``"<column>=<level>"`` for each categorical column (in ``spec`` order)
        and each of its merged levels found in the tables (sorted: numbers by
        value, then text), then ``"<column>"`` for each numeric column.
    """
    names: list[str] = []
    for column in spec["categorical"]:
        found: set[str] = set()
        for table in tables:
            found.update(level for level in _mapped(table, column, spec) if level is not None)
        names.extend(f"{column}={level}" for level in sorted(found, key=_sort_key))
    names.extend(spec["numeric"])
    return names


def _layout(spec: Mapping[str, Any], names: Sequence[str]) -> list[tuple[str, str, str | None]]:
    """(kind, column, level) of each feature name."""
    out: list[tuple[str, str, str | None]] = []
    by_length = sorted(spec["categorical"], key=len, reverse=True)
    for name in names:
        name = str(name)
        if name in spec["numeric"]:
            out.append(("numeric", name, None))
            continue
        column = next((c for c in by_length if name.startswith(f"{c}=")), None)
        if column is None:
            raise ValueError(
                f"Feature name {name!r} must be '<column>=<level>' for a column of "
                f"`events.categorical` {spec['categorical']} or a column of `events.numeric` "
                f"{spec['numeric']}, got neither."
            )
        out.append(("categorical", column, name[len(column) + 1 :]))
    return out


def event_feature_rows(
    table: pd.DataFrame,
    spec: Mapping[str, Any],
    feature_names: Sequence[str],
    *,
    where: str | os.PathLike = "the events table",
) -> np.ndarray:
    """Encode each event from its own cells.

    Parameters
    ----------
    table : pandas.DataFrame
        The events (columns as in the file; cells as text or numbers). Its
        index is taken as each row's position in the file (for messages).
    spec : dict
        Output of :func:`events_spec`.
    feature_names : sequence of str, length n_features
        See :func:`feature_names` (e.g. the ``feature_name`` coordinate of a
        store, so that every run gets the same columns).
    where : path-like
        The table's file, for error messages.

    Returns
    -------
    rows : ndarray, shape (n_events, n_features)
        Float64. A categorical feature is 1.0 where the event's (merged) level
        is the feature's level, else 0.0 (``n/a`` cells and levels absent from
        ``feature_names`` give zeros). A numeric feature is the cell's value,
        NaN where the cell is ``n/a`` or the table lacks the column (callers
        average with :func:`numpy.nanmean` or read NaN as 0).
    """
    spec = events_spec(spec)
    layout = _layout(spec, feature_names)
    rows = np.zeros((len(table), len(layout)), dtype=np.float64)
    mapped: dict[str, np.ndarray] = {}
    positions = list(table.index)
    for j, (kind, column, level) in enumerate(layout):
        if kind == "categorical":
            if column not in mapped:
                mapped[column] = np.array(_mapped(table, column, spec), dtype=object)
            rows[:, j] = mapped[column] == level
            continue
        if column not in table.columns:
            rows[:, j] = np.nan
            continue
        for k, cell in enumerate(table[column].tolist()):
            if is_missing(cell):
                rows[k, j] = np.nan
                continue
            try:
                rows[k, j] = float(str(cell).strip())
            except ValueError:
                raise ValueError(
                    f"{where}, row {_row_number(positions[k])}: `{column}` (in "
                    f"`events.numeric`) must be a number, got {cell!r} instead."
                ) from None
    return rows


def _row_number(position: Any) -> Any:
    return position + 1 if isinstance(position, int | np.integer) else position


def read_event_features(
    paths: Sequence[str | os.PathLike],
    spec: Mapping[str, Any],
    *,
    stimulus_events: Mapping[str, Any] | None = None,
) -> tuple[list[str], list[str], list[np.ndarray]]:
    """Encode the events of some events tables and group them by stimulus id.

    Parameters
    ----------
    paths : sequence of path-like
        BIDS ``_events.tsv`` files (CRLF line ends and ``n/a`` cells accepted).
    spec : dict
        The ``events`` block of the extractor entry (see :func:`events_spec`).
    stimulus_events : dict | None
        ``dataset.stimulus_events``; rows that
        :func:`neuroflow.io.events.stimulus_mask` rejects (with
        ``id_column=None``, so events without a ``stim_file`` count) are left
        out.

    Returns
    -------
    ids : list of str
        Stimulus ids (see :func:`event_ids`) in order of first appearance;
        events with neither a ``stim_file`` nor a ``name_column`` value are
        left out.
    names : list of str, length n_features
        See :func:`feature_names`.
    rows : list of ndarray, shape (n_events_i, n_features)
        The encoded events of each id (:func:`event_feature_rows`).
    """
    spec = events_spec(spec)
    if not paths:
        raise ValueError("`stimulus_ids` must list at least one events table, got none.")
    read: list[tuple[Path, pd.DataFrame, list[str]]] = []
    columns: dict[str, None] = {}
    for path in (Path(p) for p in paths):
        table = read_events_table(path)
        columns.update(dict.fromkeys(table.columns))
        if "stim_file" not in table.columns and spec["name_column"] not in table.columns:
            raise ValueError(
                f"{path}: the events table has neither a `stim_file` column nor the "
                f"`events.name_column` {spec['name_column']!r} to name its events (columns: "
                f"{list(table.columns)})."
            )
        if stimulus_events is not None and len(table):
            table = table[stimulus_mask(table, stimulus_events, id_column=None, where=path)]
        ids = event_ids(table, spec["name_column"])
        keep = np.array([i is not None for i in ids], dtype=bool)
        read.append((path, table[keep], [i for i in ids if i is not None]))
    for key in ("categorical", "numeric"):
        for column in spec[key]:
            if column not in columns:
                raise ValueError(
                    f"`events.{key}` names column {column!r}, which no events table has "
                    f"(columns: {list(columns)}; tables: {[str(p) for p, _, _ in read]})."
                )
    names = feature_names([table for _, table, _ in read], spec)
    if not names:
        raise ValueError(
            f"The events extractor found no features: the `events.categorical` columns "
            f"{spec['categorical']} have only n/a cells in the selected events."
        )
    grouped: dict[str, list[np.ndarray]] = {}
    for path, table, ids in read:
        encoded = event_feature_rows(table, spec, names, where=path)
        for k, stim in enumerate(ids):
            grouped.setdefault(stim, []).append(encoded[k])
    if not grouped:
        raise ValueError(
            f"No events to extract in {[str(p) for p, _, _ in read]}: none has a `stim_file` or "
            f"a {spec['name_column']!r} value (after `stimulus_events`)."
        )
    return list(grouped), names, [np.stack(rows) for rows in grouped.values()]


def mean_event_rows(rows: np.ndarray) -> np.ndarray:
    """Average encoded events into one stimulus row.

    Parameters
    ----------
    rows : ndarray, shape (n_events, n_features)
        Output of :func:`event_feature_rows` for the events of one stimulus.

    Returns
    -------
    row : ndarray, shape (n_features,)
        Categorical features: the share of the events at each level; numeric
        features: the mean of the non-missing values (0 when none).
    """
    rows = np.asarray(rows, dtype=np.float64)
    present = ~np.isnan(rows)
    count = present.sum(axis=0)
    total = np.where(present, rows, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.zeros(rows.shape[1]), where=count > 0)


@register_extractor("events", modalities=MODALITIES)
class EventsExtractor(Extractor):
    """Condition one-hot codes and parametric modulators from the events tables.

    It needs no stimulus files: :func:`neuroflow.features.extract.extract_features`
    reads the events tables (:func:`read_event_features`) and passes each
    stimulus's encoded events to :meth:`extract`, which averages them. Its one
    layer is ``"events"``.
    """

    default_layers = (EVENTS_LAYER,)
    fixed_layers = (EVENTS_LAYER,)
    #: Rows come from the events tables, not from stimulus files.
    reads_events: ClassVar[bool] = True

    def __init__(self, config: Mapping[str, Any], modality: str = "events") -> None:
        self.config = dict(config)
        self.modality = modality
        self.spec = events_spec(self.config.get("events"))
        self.feature_names: list[str] = []

    def layer_names(self) -> list[str]:
        return [EVENTS_LAYER]

    def extract(self, batch: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Average the encoded events of each stimulus.

        Parameters
        ----------
        batch : list of ndarray, shape (n_events_i, n_features)
            The encoded events of each stimulus (:func:`event_feature_rows`).

        Returns
        -------
        features : dict of str to ndarray, shape (n_batch, n_features)
            ``{"events": rows}`` (see :func:`mean_event_rows`).
        """
        rows = [mean_event_rows(events) for events in batch]
        width = len(self.feature_names) if not rows else rows[0].shape[0]
        return {EVENTS_LAYER: np.array(rows, dtype=np.float64).reshape(len(rows), width)}

    def describe(self) -> dict[str, Any]:
        return {
            "extractor": self.name,
            "model": None,
            "weights": "none",
            "seed": None,
            "weights_sha256": None,
            "pooling": None,
            "layers": {EVENTS_LAYER: {"name": EVENTS_LAYER, "spec": EVENTS_LAYER, "index": None}},
            "options": dict(self.spec),
            "feature_names": list(self.feature_names),
        }

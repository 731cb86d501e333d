"""Warnings of a stage: recorded while it runs, kept in its store, listed by the summary.

A job's warnings go to its log (see :func:`neuroflow.workflow.runner.job_logging`), which
few people read once the workflow has finished. A stage therefore also records the
Python warnings and the ``neuroflow`` logger's warnings raised while it reads and
processes its inputs (:func:`record_warnings`) and keeps them in the dataset it writes,
under ``attrs["warnings"]`` (:data:`WARNINGS_KEY`, a list of str, empty when there were
none). The summary job follows the provenance ``inputs`` of its stores upstream and
lists every stored warning (:func:`upstream_warnings`) in its ``warnings.tsv`` and in
the report.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "PLAN_STAGE",
    "PROVENANCE_KEY",
    "WARNINGS_KEY",
    "WARNING_COLUMNS",
    "current_warnings",
    "record_warnings",
    "store_warnings",
    "upstream_warnings",
    "warnings_table",
    "with_job_warnings",
]

#: Attribute key under which every store keeps its provenance record (written by
#: :func:`neuroflow.artifacts.write_dataset`, which takes it from here).
PROVENANCE_KEY = "neuroflow"
#: Attribute of a store holding the warnings of the job that wrote it.
WARNINGS_KEY = "warnings"
#: Columns of the summary's warnings table.
WARNING_COLUMNS = ("stage", "store", "message")
#: ``stage`` of warnings raised while the workflow is planned (no store).
PLAN_STAGE = "plan"


#: The messages of the innermost :func:`record_warnings` block that is running.
_RECORDING: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "neuroflow_recorded_warnings", default=None
)


def current_warnings() -> list[str] | None:
    """The warnings recorded so far by the running :func:`record_warnings` block.

    Returns
    -------
    messages : list of str | None
        A copy, repeats dropped, in the order raised; None outside any block. Every job
        run by :func:`neuroflow.workflow.runner.run_job` is inside one, so
        :func:`neuroflow.artifacts.write_dataset` keeps them in each store it writes.
    """
    messages = _RECORDING.get()
    return None if messages is None else list(dict.fromkeys(messages))


def with_job_warnings(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` with the warnings recorded so far under :data:`WARNINGS_KEY`.

    Parameters
    ----------
    attrs : dict
        Attributes of a store about to be committed.

    Returns
    -------
    attrs : dict
        A copy; unchanged when the stage set the key itself or no
        :func:`record_warnings` block is running.
    """
    recorded = current_warnings()
    if recorded is None or WARNINGS_KEY in attrs:
        return dict(attrs)
    return {**attrs, WARNINGS_KEY: recorded}


class _ListHandler(logging.Handler):
    """Appends the message of every record it handles to a list."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__(level=logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def record_warnings() -> Iterator[list[str]]:
    """Record the warnings raised in a block, and still show and log them as before.

    Yields
    ------
    messages : list of str
        Filled while the block runs, in order: the text of each Python warning that
        the active filters show, and of each record of level WARNING or above of the
        ``neuroflow`` logger (and its children).

    Notes
    -----
    Warnings are passed on to the previous :func:`warnings.showwarning` (the job's log
    when :func:`logging.captureWarnings` is on, or a test's recorder), so recording
    changes nothing that users or tests see.
    """
    outer = _RECORDING.get()
    if outer is not None:  # nested in a job's block: share its list, record once
        yield outer
        return
    messages: list[str] = []
    token = _RECORDING.set(messages)
    handler = _ListHandler(messages)
    logger = logging.getLogger("neuroflow")
    logger.addHandler(handler)
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            messages.append(str(message))
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield messages
        finally:
            logger.removeHandler(handler)
            _RECORDING.reset(token)


def store_warnings(path: str | os.PathLike) -> tuple[list[str], Mapping[str, Any]]:
    """Warnings and provenance record kept in one store.

    Parameters
    ----------
    path : path-like
        A zarr store written by the workflow.

    Returns
    -------
    warnings : list of str
        ``attrs["warnings"]`` (empty when the store has none).
    provenance : dict
        Its provenance record (empty when it has none).
    """
    import zarr

    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    stored = attrs.get(WARNINGS_KEY) or []
    messages = [str(m) for m in stored] if isinstance(stored, list | tuple) else [str(stored)]
    record = attrs.get(PROVENANCE_KEY)
    return messages, record if isinstance(record, Mapping) else {}


def _one_line(message: str) -> str:
    """A message with every run of whitespace (tabs, newlines) as one space."""
    return " ".join(str(message).split())


def _input_paths(record: Mapping[str, Any]) -> list[str]:
    """Paths of the provenance ``inputs`` of a store."""
    out = []
    for item in record.get("inputs") or []:
        if isinstance(item, Mapping) and item.get("path"):
            out.append(str(item["path"]))
    return out


def upstream_warnings(stores: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Warnings kept in some stores and in every store upstream of them.

    Parameters
    ----------
    stores : iterable of path-like
        Stores to start from (e.g. the summary job's inputs). Their provenance
        ``inputs`` are followed, breadth first, to every ``.zarr`` store that exists;
        each store is read once.

    Returns
    -------
    table : pandas.DataFrame, shape (n_warnings, 3)
        Columns :data:`WARNING_COLUMNS`: the stage of the store (from its provenance),
        its path and the message (on one line); sorted by stage and store, messages in
        the order they were raised, repeats within a store dropped.
    """
    queue = deque(str(p) for p in stores)
    seen: set[str] = set()
    rows: list[tuple[str, str, str]] = []
    while queue:
        path = Path(queue.popleft())
        key = os.path.abspath(path)
        if key in seen or path.suffix != ".zarr" or not path.is_dir():
            continue
        seen.add(key)
        messages, record = store_warnings(path)
        stage = str(record.get("stage") or "")
        rows.extend((stage, str(path), m) for m in dict.fromkeys(map(_one_line, messages)))
        queue.extend(_input_paths(record))
    table = pd.DataFrame(rows, columns=list(WARNING_COLUMNS))
    return table.sort_values(["stage", "store"], kind="stable").reset_index(drop=True)


def warnings_table(
    stores: Iterable[str | os.PathLike], plan_warnings: Sequence[str] = ()
) -> pd.DataFrame:
    """The warnings of a plan and of the stores behind a set of results.

    Parameters
    ----------
    stores : iterable of path-like
        Stores whose warnings, and those of their upstream stores, are listed (see
        :func:`upstream_warnings`).
    plan_warnings : sequence of str
        Warnings raised while the workflow was planned (about the dataset as a whole).

    Returns
    -------
    table : pandas.DataFrame, shape (n_warnings, 3)
        Columns :data:`WARNING_COLUMNS`; plan warnings first (stage
        :data:`PLAN_STAGE`, store ``"n/a"``), then the stores' warnings.
    """
    plan = pd.DataFrame(
        [(PLAN_STAGE, "n/a", m) for m in dict.fromkeys(map(_one_line, plan_warnings))],
        columns=list(WARNING_COLUMNS),
    )
    stored = upstream_warnings(stores)
    if plan.empty:
        return stored
    return pd.concat([plan, stored], ignore_index=True) if not stored.empty else plan

"""What every export shares: BIDS labels, sidecars naming the store a file came from,
and the files an export claims before it writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY

__all__ = [
    "results_relative",
]


def _label(text: Any) -> str:
    """A BIDS label: the alphanumeric characters of ``text``.

    Used for the dataset's own entities (subject, session, task, run); a model's name
    keeps its file-system-safe form instead (:func:`neuroflow.names.file_form`), the
    one spelling a layer model has in every file name.
    """
    return re.sub(r"[^A-Za-z0-9]", "", str(text)) or "x"


def results_relative(path: Path, stage: str | None) -> str:
    """``path`` from its results folder on (``evaluation/m-abc/x.zarr``), when it lies there.

    Parameters
    ----------
    path : Path
        A store (or summary folder) inside ``<results_dir>/<stage>/<version>/``.
    stage : str | None
        The stage that wrote it (``evaluation/m`` names the folder ``evaluation``).

    Returns
    -------
    path : str
        The path relative to the results folder (POSIX separators), or ``path`` as
        given when no folder of that stage is among its parents.
    """
    folder = str(stage or "").split("/")[0]
    parts = Path(path).parts
    if folder and folder in parts[:-1]:
        start = len(parts) - 1 - parts[:-1][::-1].index(folder) - 1
        return Path(*parts[start:]).as_posix()
    return str(path)


def _origin(path: Path, ds: xr.Dataset) -> dict[str, Any]:
    """Sidecar fields naming the store a file came from (relative to the results folder)."""
    record = ds.attrs.get(PROVENANCE_KEY) or {}
    return {
        "Sources": [results_relative(path, record.get("stage"))],
        "NeuroflowStage": record.get("stage"),
        "NeuroflowVersion": record.get("version"),
        "NeuroflowFormatVersion": record.get("format_version"),
    }


def _write_json(path: Path, content: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(dict(content), indent=2, default=str) + "\n")
    return path


def _claim(path: Path, claimed: dict[Path, Path], source: Path) -> Path:
    """Refuse to write one output path from two stores (two versions of one model)."""
    if path in claimed and claimed[path] != source:
        raise ValueError(
            f"{path.name} would be written from both {claimed[path]} and {source}: export "
            "one version at a time (name its stores, or remove the other with `neuroflow gc`)."
        )
    claimed[path] = source
    return path


def _sidecar(path: Path) -> Path:
    """The JSON sidecar of an exported file (``x.nii.gz`` -> ``x.json``)."""
    name = path.name
    return path.with_name(
        name.removesuffix(".nii.gz") + ".json" if name.endswith(".nii.gz") else path.stem + ".json"
    )


def _task(ds: xr.Dataset) -> str | None:
    """The task of the runs a score store was tested on, when there is one."""
    runs = [str(r) for r in ds.attrs.get("test_runs") or []]
    tasks = {m.group(1) for r in runs if (m := re.search(r"task-([A-Za-z0-9]+)", r))}
    return tasks.pop() if len(tasks) == 1 else None

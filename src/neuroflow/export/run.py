"""One export of a results folder: the stores of each kind, every file planned and
refused before anything is written, staged and moved into place, and the folder's BIDS
``dataset_description.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import xarray as xr

from neuroflow.artifacts import PARTIAL_MARKER, PROVENANCE_KEY, find_stores, open_dataset
from neuroflow.export.common import _claim, _sidecar, _write_json
from neuroflow.export.eeg import _eeg_scores_plan, _epochs_plan, export_eeg_scores, export_epochs
from neuroflow.export.maps import _map_plan, export_score_maps
from neuroflow.export.tables import (
    _features_plan,
    _stimuli_tsv,
    _summary_table,
    _table_plan,
    export_features,
    export_summary,
    export_table,
)

__all__ = [
    "BIDS_VERSION",
    "DATASET_DESCRIPTION",
    "EXPORT_KINDS",
    "export_results",
    "stage_versions_of",
    "write_dataset_description",
]


#: What :func:`export_results` can export, by the stage folder it reads.
EXPORT_KINDS = {
    "maps": ("evaluation", "trial_evaluation"),
    "epochs": ("preprocess_eeg",),
    "eeg_scores": ("eeg_evaluation", "evaluation"),
    "tables": ("decoding", "decoding_fmri", "decoding_cross_subject", "rsa"),
    "features": ("features",),
    "summary": ("summary",),
}


#: Name of the BIDS file that describes an export folder (written at its root).
DATASET_DESCRIPTION = "dataset_description.json"


#: BIDS version the exported folders follow.
BIDS_VERSION = "1.10.0"


def stage_versions_of(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The distinct stage, version and format version of provenance records, sorted."""
    seen = {
        (str(r.get("stage")), str(r.get("version")), r.get("format_version"))
        for r in records
        if r.get("stage")
    }
    return [
        {"Stage": stage, "Version": version, "FormatVersion": fmt}
        for stage, version, fmt in sorted(seen, key=lambda t: (t[0], t[1]))
    ]


def _our_description(path: Path) -> dict[str, Any] | None:
    """An existing ``dataset_description.json`` that neuroflow wrote (merged, not a clash)."""
    if not path.is_file():
        return None
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    generated = content.get("GeneratedBy") if isinstance(content, dict) else None
    ours = isinstance(generated, list) and generated and isinstance(generated[0], dict)
    return content if ours and generated[0].get("Name") == "neuroflow" else None


def write_dataset_description(
    folder: str | os.PathLike,
    records: Iterable[Mapping[str, Any]],
    *,
    earlier: Mapping[str, Any] | None = None,
) -> Path:
    """Write the BIDS ``dataset_description.json`` of an exported derivatives folder.

    Parameters
    ----------
    folder : path-like
        The export folder.
    records : iterable of dict
        Provenance records of the exported stores; their stages and versions go to
        ``GeneratedBy[0]["Stages"]``.
    earlier : dict | None
        The description of an earlier export into the same folder, whose stages are kept.

    Returns
    -------
    path : Path
    """
    import neuroflow

    earlier_stages = []
    if earlier is not None:
        earlier_stages = list(earlier["GeneratedBy"][0].get("Stages") or [])
    stages = stage_versions_of(
        [
            *records,
            *(
                {
                    "stage": s.get("Stage"),
                    "version": s.get("Version"),
                    "format_version": s.get("FormatVersion"),
                }
                for s in earlier_stages
                if isinstance(s, Mapping)
            ),
        ]
    )
    listed = ", ".join(f"{s['Stage']} {s['Version']}" for s in stages)
    content = {
        "Name": "neuroflow results",
        "BIDSVersion": BIDS_VERSION,
        "DatasetType": "derivative",
        "GeneratedBy": [
            {
                "Name": "neuroflow",
                "Version": neuroflow.__version__,
                "Description": f"Exported by `neuroflow export` from the stages {listed}.",
                "Stages": stages,
            }
        ],
    }
    return _write_json(Path(folder) / DATASET_DESCRIPTION, content)


def _stores_of(roots: Iterable[Path], stages: Sequence[str]) -> list[tuple[Path, xr.Dataset]]:
    """Stores under ``roots`` (results folders or stores) of the given stages, opened."""
    out = []
    for root in roots:
        candidates = [root] if (root / "zarr.json").is_file() else find_stores(root)
        for store in candidates:
            if store.suffix != ".zarr":
                continue
            ds = open_dataset(store)
            stage = str((ds.attrs.get(PROVENANCE_KEY) or {}).get("stage", "")).split("/")[0]
            if stage in stages:
                out.append((store, ds))
    return out


def _planned_files(
    kind: str, store: Path, ds: xr.Dataset, output: Path, features_format: str
) -> list[Path] | None:
    """Every file one store of ``kind`` writes under ``output`` (None: nothing to export).

    Reads attributes only; raises the refusals of the exporters (a store that lacks
    what its export needs) before anything is written.
    """
    if kind == "maps":
        if not all(c in ds.coords for c in "ijk"):
            return None  # parcels or channels: no voxel grid to map onto
        maps = [path for path, _ in _map_plan(store, ds, output)]
        return [f for path in maps for f in (path, _sidecar(path))]
    if kind == "epochs":
        if not store.name.endswith("_epo.zarr"):
            return None
        return [f for path in _epochs_plan(store, ds, output) for f in (path, _sidecar(path))]
    if kind == "eeg_scores":
        paths = _eeg_scores_plan(store, ds, output)
        return None if paths is None else [f for p in paths for f in (p, _sidecar(p))]
    if kind == "tables":
        path = _table_plan(store, ds, output)
        return [path, _sidecar(path)]
    if kind == "features":
        path = _features_plan(store, ds, output, features_format)
        extra = [_stimuli_tsv(path)] if features_format == "npy" else []
        return [path, *extra, _sidecar(path)]
    if store.name != "scores.zarr":
        return None
    _summary_table(store.parent)
    table = output / "summary" / "scores.tsv"
    return [table, _sidecar(table)]


def _export_one(kind: str, store: Path, output: Path, features_format: str) -> list[Path]:
    """Write one store's export under ``output``; the files :func:`_planned_files` names."""
    if kind == "maps":
        return export_score_maps(store, output)
    if kind == "epochs":
        return export_epochs(store, output)
    if kind == "eeg_scores":
        return export_eeg_scores(store, output)
    if kind == "tables":
        return export_table(store, output)
    if kind == "features":
        return export_features(store, output, fmt=features_format)
    return export_summary(store.parent, output)


def _check_output(output: Path, planned: Sequence[Path], *, overwrite: bool) -> None:
    """Refuse an output that is a file, or one that holds files the export would replace."""
    if output.exists() and not output.is_dir():
        raise ValueError(
            f"The export folder (--output) must be a new or existing folder, got the file "
            f"{output} instead."
        )
    clashes = [path for path in planned if path.exists() or path.is_symlink()]
    if not clashes or overwrite:
        return
    shown = ", ".join(str(p.relative_to(output)) for p in clashes[:3])
    more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
    raise FileExistsError(
        f"{output} already holds {len(clashes)} of the {len(planned)} files this export "
        f"would write ({shown}{more}): choose a new folder, or pass --force "
        "(`overwrite=True`) to replace them. Nothing was written."
    )


def _move_into_place(staging: Path, output: Path) -> None:
    """Move the files written under ``staging`` to the same places under ``output``."""
    if not output.exists():
        os.replace(staging, output)  # the whole export appears at once
        return
    for path in sorted(staging.rglob("*")):
        if path.is_dir():
            continue
        target = output / path.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)


def export_results(
    roots: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    kinds: Sequence[str] = tuple(EXPORT_KINDS),
    features_format: str = "npy",
    overwrite: bool = False,
) -> dict[str, list[Path]]:
    """Export every store of the chosen kinds found under ``roots``.

    Every refusal is decided before anything is written. The files are written into a
    hidden sibling folder of ``output`` and moved into place at the end, so an export
    that fails leaves ``output`` as it was.

    Parameters
    ----------
    roots : list of path-like
        Results folders, stage or version folders, or stores.
    output : path-like
        Export folder (created when missing).
    kinds : list of str
        Among :data:`EXPORT_KINDS`.
    features_format : ``"npy"`` | ``"h5"``
        See :func:`export_features`.
    overwrite : bool
        Replace files of ``output`` that the export writes again (otherwise refused).

    Returns
    -------
    written : dict of str to list of Path
        The files written, per kind, as the exporters return them (the sidecars of
        maps, epochs and features lie beside them).

    Raises
    ------
    ValueError
        For an unknown kind, an ``output`` that is a file, a store that lacks what its
        export needs, or when two stores (two versions of one model) would write the
        same file.
    FileExistsError
        When ``output`` already holds a file the export would write and ``overwrite``
        is False.
    """
    unknown = sorted(set(kinds) - set(EXPORT_KINDS))
    if unknown:
        raise ValueError(f"`kinds` must be among {list(EXPORT_KINDS)}, got {unknown} instead.")
    if features_format not in ("npy", "h5"):
        raise ValueError(f"`fmt` must be 'npy' or 'h5', got {features_format!r} instead.")
    roots = [Path(r) for r in roots]
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist.")
    output = Path(output)
    _check_output(output, [], overwrite=overwrite)
    claimed: dict[Path, Path] = {}
    jobs: dict[str, list[Path]] = {}
    stages: list[Mapping[str, Any]] = []
    for kind in kinds:
        jobs[kind] = []
        for store, ds in _stores_of(roots, EXPORT_KINDS[kind]):
            planned = _planned_files(kind, store, ds, output, features_format)
            if planned is None:
                continue
            for path in planned:
                _claim(path, claimed, store.parent if kind == "summary" else store)
            jobs[kind].append(store)
            stages.append(ds.attrs.get(PROVENANCE_KEY) or {})
    description = output / DATASET_DESCRIPTION
    earlier = _our_description(description)
    _check_output(
        output, [*claimed, *([description] if earlier is None else [])], overwrite=overwrite
    )
    if not claimed:
        return {kind: [] for kind in jobs}
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = output.with_name(f".{output.name}{PARTIAL_MARKER}{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        written = {
            kind: [
                output / path.relative_to(staging)
                for store in stores
                for path in _export_one(kind, store, staging, features_format)
            ]
            for kind, stores in jobs.items()
        }
        write_dataset_description(staging, stages, earlier=earlier)
        _move_into_place(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written

"""Pools of stimuli that were never shown: reading them and extracting their features.

The ``predict`` stage (:mod:`neuroflow.insilico`) passes them through fitted encoding
models; the workflow plan reads them here without loading any model.

A pool is a folder of images (with an optional captions table, so that text models can
read it too) or a table of sentences. :func:`read_stimulus_pool` resolves one from its
config entry (``predict.stimulus_sets.<name>``) into stimulus ids, the folder they are
relative to and their texts; :func:`extract_pool_features` runs one extractor entry of
an encoding model over it, as the ``features`` stage does for the shown stimuli.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from neuroflow.features.config import fill_entry
from neuroflow.features.registry import get_extractor

__all__ = [
    "StimulusPool",
    "extract_pool_features",
    "pool_extractor_problem",
    "pool_kind",
    "pool_path",
    "read_stimulus_pool",
]


@dataclass(frozen=True)
class StimulusPool:
    """The stimuli of one pool.

    Attributes
    ----------
    name : str
        The pool's name (``predict.stimulus_sets`` key).
    kind : str
        ``"image"`` (files in ``folder``) or ``"text"`` (sentences).
    ids : tuple of str
        Stimulus ids, sorted: file paths relative to ``folder`` (images) or the
        sentences' ``stim_id`` values.
    folder : Path | None
        The folder the image ids are relative to (None for sentences).
    captions : dict of str to str
        Text of each stimulus (every sentence; every image when the pool has a
        captions table, else empty).
    """

    name: str
    kind: str
    ids: tuple[str, ...]
    folder: Path | None = None
    captions: Mapping[str, str] = field(default_factory=dict)


def pool_kind(spec: Mapping[str, Any], name: str = "") -> str:
    """``"image"`` or ``"text"``: what a ``predict.stimulus_sets`` entry holds.

    Parameters
    ----------
    spec : dict
        The entry: ``folder`` (+ ``glob``, ``captions``) or ``sentences``.
    name : str
        Its name, for the error message.

    Returns
    -------
    kind : str
    """
    has_folder, has_sentences = spec.get("folder") is not None, spec.get("sentences") is not None
    if has_folder == has_sentences:
        raise ValueError(
            f"predict.stimulus_sets.{name} must give exactly one of folder and sentences, "
            f"got {sorted(k for k in ('folder', 'sentences') if spec.get(k) is not None)} "
            "instead."
        )
    return "image" if has_folder else "text"


def pool_path(value: str | os.PathLike, stimuli_dir: str | os.PathLike) -> Path:
    """A pool path from the config: relative ones are relative to the dataset's stimuli."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(stimuli_dir) / path


def _read_table(path: Path, required: tuple[str, ...], what: str) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist.")
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"{what} {path} must have the column(s) {list(required)}, got "
            f"{list(table.columns)} instead."
        )
    for column in required:
        empty = table.index[table[column].str.strip().isin(["", "n/a"])].tolist()
        if empty:
            raise ValueError(
                f"{what} {path}: column {column!r} must not be empty or n/a, got "
                f"{len(empty)} such row(s) (first: data row {empty[0] + 1}) instead."
            )
    return table


def _unique(values: list[str], path: Path, column: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(
                f"{path}: column {column!r} must hold unique values, got {value!r} twice instead."
            )
        seen.add(value)


def _image_pool(name: str, spec: Mapping[str, Any], stimuli_dir: Path) -> StimulusPool:
    folder = pool_path(spec["folder"], stimuli_dir)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"predict.stimulus_sets.{name}.folder must be an existing folder, got {folder} instead."
        )
    pattern = spec.get("glob") or "*.png"
    captions_path = pool_path(spec["captions"], stimuli_dir) if spec.get("captions") else None
    ids = sorted(
        p.relative_to(folder).as_posix()
        for p in folder.glob(pattern)
        if p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        and p != captions_path
    )
    if not ids:
        raise ValueError(
            f"predict.stimulus_sets.{name}.glob must match files in {folder}, got no match "
            f"for {pattern!r} instead."
        )
    captions: dict[str, str] = {}
    if captions_path is not None:
        table = _read_table(captions_path, ("stim_file", "caption"), "The captions table")
        _unique(table["stim_file"].tolist(), captions_path, "stim_file")
        captions = dict(zip(table["stim_file"], table["caption"], strict=True))
        lacking = [i for i in ids if i not in captions]
        if lacking:
            raise ValueError(
                f"The captions table {captions_path} must have a row for every file of the "
                f"pool, got none for {len(lacking)} of {len(ids)} (first: {lacking[0]}) "
                "instead."
            )
        captions = {i: captions[i] for i in ids}
    return StimulusPool(name=name, kind="image", ids=tuple(ids), folder=folder, captions=captions)


def _sentence_pool(name: str, spec: Mapping[str, Any], stimuli_dir: Path) -> StimulusPool:
    path = pool_path(spec["sentences"], stimuli_dir)
    table = _read_table(path, ("sentence",), "The sentences table")
    if "stim_id" in table.columns:
        ids = [s.strip() for s in table["stim_id"]]
        _unique(ids, path, "stim_id")
    else:
        width = max(4, len(str(len(table))))
        ids = [f"sentence-{i + 1:0{width}d}" for i in range(len(table))]
    if not ids:
        raise ValueError(f"The sentences table {path} must have rows, got none instead.")
    captions = dict(zip(ids, table["sentence"], strict=True))
    order = sorted(ids)
    return StimulusPool(
        name=name, kind="text", ids=tuple(order), captions={i: captions[i] for i in order}
    )


def read_stimulus_pool(
    name: str, spec: Mapping[str, Any], stimuli_dir: str | os.PathLike
) -> StimulusPool:
    """Resolve one ``predict.stimulus_sets`` entry into its stimuli.

    Parameters
    ----------
    name : str
        The pool's name.
    spec : dict
        ``{"folder": DIR, "glob": "*.png", "captions": TSV | None}`` or
        ``{"sentences": TSV}``; relative paths are relative to ``stimuli_dir``.
    stimuli_dir : path-like
        The dataset's ``stimuli/`` folder.

    Returns
    -------
    pool : StimulusPool
    """
    kind = pool_kind(spec, name)
    reader = _image_pool if kind == "image" else _sentence_pool
    return reader(name, spec, Path(stimuli_dir))


def pool_extractor_problem(entry: Mapping[str, Any], kind: str, has_captions: bool) -> str | None:
    """Why an extractor entry cannot read a pool (None when it can).

    Parameters
    ----------
    entry : dict
        One ``features.extractors`` entry, as the encoding model was fitted with.
    kind : str
        The pool's kind, ``"image"`` or ``"text"``.
    has_captions : bool
        Whether an image pool has a captions table.

    Returns
    -------
    reason : str | None
    """
    filled = fill_entry(entry)
    name = filled["name"]
    info = get_extractor(filled["extractor"])
    if getattr(info.cls, "reads_events", False):
        return f"extractor {name!r} reads events tables, not stimuli"
    if filled["text_source"] == "transcript":
        return f"extractor {name!r} reads word-by-word transcripts"
    reduction = (filled.get("reduction") or {}).get("method", "none")
    if reduction == "pca":
        return (
            f"extractor {name!r} reduces its features with a PCA fitted on the dataset's "
            "training stimuli, which a pool cannot reproduce (use random_projection or none)"
        )
    modality = _pool_modality(filled, kind)
    offered = ("text",) if kind == "text" else ("image", "text")
    if modality not in offered:
        return f"extractor {name!r} reads {modality} stimuli and the pool holds {kind}s"
    if modality == "text" and kind == "image" and not has_captions:
        return f"extractor {name!r} reads text and the pool has no captions table"
    if modality not in info.modalities:
        return f"extractor {name!r} does not read {modality} stimuli"
    return None


def _pool_modality(entry: Mapping[str, Any], kind: str) -> str:
    """The modality an extractor entry reads a pool in."""
    if entry["modality"] != "auto":
        return str(entry["modality"])
    if kind == "text" or get_extractor(entry["extractor"]).modalities == ("text",):
        return "text"
    return "image"


def extract_pool_features(
    *,
    pool: StimulusPool,
    output: Mapping[str, str | os.PathLike],
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> dict[str, Path]:
    """Extract one extractor entry's features for every stimulus of a pool.

    Parameters
    ----------
    pool : StimulusPool
        From :func:`read_stimulus_pool`.
    output : dict of str to path-like
        Layer name to store path (the entry's layers).
    config : dict
        The ``features.extractors`` entry the encoding models were fitted with; its
        modality is set to the one it reads the pool in (image, or text from the
        captions).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    paths : dict of str to Path
        Layer name to (stimulus, feature) store, as :func:`extract_features` writes.
    """
    from neuroflow.features.extract import extract_features

    problem = pool_extractor_problem(config, pool.kind, bool(pool.captions))
    if problem is not None:
        raise ValueError(f"Stimulus set {pool.name!r} cannot be extracted: {problem}.")
    entry = {**dict(config), "modality": _pool_modality(fill_entry(config), pool.kind)}
    return extract_features(
        stimuli_dir=pool.folder if pool.folder is not None else Path("."),
        stimulus_ids=list(pool.ids),
        captions=dict(pool.captions) or None,
        output=output,
        config=entry,
        provenance=provenance,
    )

"""Manifests of committed stores, and the checks that a store is still whole.

Just before a store is renamed into place (:func:`neuroflow.artifacts.atomic_directory`),
a manifest (:data:`MANIFEST_NAME`) records every file of the store with its size and
checksum. :func:`neuroflow.artifacts.open_dataset` compares the files on disk with it
(names and sizes) and refuses a store that lost or changed a file, since zarr would
otherwise read a lost chunk as fill values; :func:`verify_store` also compares
checksums.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from neuroflow.stage_warnings import PROVENANCE_KEY

__all__ = [
    "CHECKSUM_ALGORITHM",
    "MANIFEST_FORMAT",
    "MANIFEST_NAME",
    "DamagedStoreError",
    "build_manifest",
    "check_intact",
    "file_checksum",
    "has_manifest",
    "read_manifest",
    "verify_store",
    "write_manifest",
]


#: File at a store's root that lists the store's other files with sizes and checksums.
MANIFEST_NAME = ".neuroflow-manifest.json"


#: Layout version of the manifest file.
MANIFEST_FORMAT = 1


#: Checksum of each file in the manifest: CRC-32 of its bytes, as 8 hexadecimal characters.
CHECKSUM_ALGORITHM = "crc32"


#: Bytes read at a time when computing a checksum.
_READ_BLOCK = 4 * 2**20


#: Files named per kind of problem in the error of a damaged store.
_SHOWN_FILES = 3


# --------------------------------------------------------------------------- manifests
class DamagedStoreError(OSError):
    """A store's files differ from the manifest written with it."""


class _Problem(NamedTuple):
    """One difference between a store's files and its manifest."""

    kind: str  # "manifest", "missing", "size", "checksum" or "extra"
    file: str
    detail: str = ""


def _disk_sizes(root: Path) -> dict[str, int]:
    """Size in bytes of every file under ``root``, keyed by its ``/``-separated relative path.

    The manifest itself is left out; symbolic links are not followed.
    """
    sizes: dict[str, int] = {}
    folders = [(root, "")]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    folders.append((Path(entry.path), rel + "/"))
                elif entry.is_file():
                    sizes[rel] = entry.stat().st_size
    sizes.pop(MANIFEST_NAME, None)
    return sizes


def file_checksum(path: str | os.PathLike) -> str:
    """Checksum of a file's bytes as recorded in manifests.

    Parameters
    ----------
    path : path-like
        Any file.

    Returns
    -------
    checksum : str
        CRC-32 of the bytes (:data:`CHECKSUM_ALGORITHM`), 8 hexadecimal characters.
    """
    crc = 0
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BLOCK):
            crc = zlib.crc32(block, crc)
    return f"{crc:08x}"


def build_manifest(root: str | os.PathLike) -> dict[str, Any]:
    """List every file of a store with its size and checksum.

    Parameters
    ----------
    root : path-like
        The store's folder.

    Returns
    -------
    manifest : dict
        ``{"format": int, "algorithm": str, "files": {path: {"size": int,
        "checksum": str}}}`` with paths relative to ``root``, ``/``-separated and
        sorted; the manifest file itself is not listed.
    """
    root = Path(root)
    files = {
        rel: {"size": size, "checksum": file_checksum(root / rel)}
        for rel, size in sorted(_disk_sizes(root).items())
    }
    return {"format": MANIFEST_FORMAT, "algorithm": CHECKSUM_ALGORITHM, "files": files}


def write_manifest(root: str | os.PathLike) -> Path:
    """Write the manifest of a finished store at its root (:data:`MANIFEST_NAME`).

    Parameters
    ----------
    root : path-like
        The store's folder; nothing may write into it afterwards.

    Returns
    -------
    path : Path
        The manifest file.
    """
    target = Path(root) / MANIFEST_NAME
    target.write_text(json.dumps(build_manifest(root), separators=(",", ":")))
    return target


def has_manifest(path: str | os.PathLike) -> bool:
    """Whether a store has a manifest (stores written by older versions have none)."""
    return (Path(path) / MANIFEST_NAME).is_file()


def read_manifest(path: str | os.PathLike) -> dict[str, Any] | None:
    """Read a store's manifest.

    Parameters
    ----------
    path : path-like
        The store.

    Returns
    -------
    manifest : dict | None
        As built by :func:`build_manifest`, or None when the store has none.

    Raises
    ------
    ValueError
        When the manifest is not valid JSON, or lacks its ``files`` table or the
        size and checksum of a file.
    """
    target = Path(path) / MANIFEST_NAME
    if not target.is_file():
        return None
    try:
        manifest = json.loads(target.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"{MANIFEST_NAME} must be valid JSON, got an error instead: {err}"
        ) from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ValueError(f"{MANIFEST_NAME} must hold a 'files' table, got none instead.")
    for rel, entry in manifest["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            raise ValueError(
                f"{MANIFEST_NAME} must record the size of every file, got {entry!r} for {rel!r} "
                "instead."
            )
    return manifest


def _size_problems(recorded: Mapping[str, Any], sizes: Mapping[str, int]) -> list[_Problem]:
    """Files of the manifest that are missing on disk or have another size."""
    problems = []
    for rel, entry in recorded.items():
        if rel not in sizes:
            problems.append(_Problem("missing", rel))
        elif sizes[rel] != entry["size"]:
            detail = f"{sizes[rel]} bytes, the manifest records {entry['size']}"
            problems.append(_Problem("size", rel, detail))
    return problems


def _extra_problems(recorded: Mapping[str, Any], sizes: Mapping[str, int]) -> list[_Problem]:
    """Files on disk that the manifest does not list (hidden names such as ``.DS_Store`` aside)."""
    return [
        _Problem("extra", rel)
        for rel in sorted(sizes)
        if rel not in recorded and not rel.rsplit("/", 1)[-1].startswith(".")
    ]


def _checksum_problems(
    root: Path, recorded: Mapping[str, Any], files: Sequence[str]
) -> list[_Problem]:
    """Files among ``files`` whose checksum differs from the manifest's."""
    return [
        _Problem("checksum", rel, "same size, other bytes")
        for rel in files
        if file_checksum(root / rel) != recorded[rel].get("checksum")
    ]


def _find_problems(path: Path, *, checksums: bool) -> list[_Problem]:
    """Compare a store's files with its manifest; empty when intact or without a manifest."""
    try:
        manifest = read_manifest(path)
    except ValueError as err:
        return [_Problem("manifest", MANIFEST_NAME, str(err))]
    if manifest is None:
        return []
    recorded = manifest["files"]
    if checksums and manifest.get("algorithm") != CHECKSUM_ALGORITHM:
        detail = (
            f"checksums must be {CHECKSUM_ALGORITHM!r}, got {manifest.get('algorithm')!r} instead"
        )
        return [_Problem("manifest", MANIFEST_NAME, detail)]
    sizes = _disk_sizes(path)
    problems = _size_problems(recorded, sizes) + _extra_problems(recorded, sizes)
    if checksums:
        damaged = {p.file for p in problems}
        same_size = [rel for rel in recorded if rel in sizes and rel not in damaged]
        problems += _checksum_problems(path, recorded, same_size)
    return problems


def _describe_problem(problem: _Problem) -> str:
    """One line for one problem, e.g. ``"bold/c/0/3: missing"``."""
    what = {
        "manifest": "unreadable manifest",
        "missing": "missing",
        "size": "size differs",
        "checksum": "checksum differs",
        "extra": "not listed in the manifest",
    }[problem.kind]
    return f"{problem.file}: {what}" + (f" ({problem.detail})" if problem.detail else "")


def check_intact(path: str | os.PathLike) -> None:
    """Refuse a store whose files no longer match its manifest (names and sizes).

    Parameters
    ----------
    path : path-like
        A store; one without a manifest passes unchecked.

    Raises
    ------
    DamagedStoreError
        When a file the manifest lists is missing or has another size, or a file it
        does not list appeared; the message names the files and the stage that wrote
        the store.
    """
    path = Path(path)
    problems = _find_problems(path, checksums=False)
    if problems:
        raise DamagedStoreError(_damage_message(path, problems))


def verify_store(path: str | os.PathLike, *, checksums: bool) -> list[str]:
    """Compare the files of a store with the manifest written with it.

    Parameters
    ----------
    path : path-like
        A store written by :func:`write_dataset`.
    checksums : bool
        Also compare the checksum of every file whose size matches (reads the
        whole store); otherwise compare names and sizes only (one ``stat`` per file).

    Returns
    -------
    problems : list of str
        One line per problem: a file of the manifest that is missing, has another
        size or (with ``checksums``) other bytes; a file that the manifest does not
        list (a chunk that appeared after the write changes what zarr reads;
        hidden files such as ``.DS_Store`` are ignored); an unreadable manifest.
        Empty when the store is intact, and also for a store written before
        manifests existed: tell those apart with :func:`has_manifest`.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"No artifact at {path}.")
    return [_describe_problem(p) for p in _find_problems(path, checksums=checksums)]


def _writer_stage(path: Path) -> str | None:
    """The stage recorded in a store's root metadata, if it can still be read."""
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError, KeyError):
        meta = json.loads((path / "zarr.json").read_text())
        return str(meta["attributes"][PROVENANCE_KEY]["stage"])
    return None


def _damage_message(path: Path, problems: Sequence[_Problem]) -> str:
    """Error text for a damaged store: counts and first files per kind of problem."""
    phrases = {
        "manifest": ("its manifest is unreadable", "its manifest is unreadable"),
        "missing": (
            "1 file listed in its manifest is missing",
            "{n} files listed in its manifest are missing",
        ),
        "size": (
            "1 file has another size than its manifest records",
            "{n} files have another size than its manifest records",
        ),
        "checksum": (
            "1 file has other bytes than its manifest records",
            "{n} files have other bytes than its manifest records",
        ),
        "extra": (
            "1 file is not listed in its manifest",
            "{n} files are not listed in its manifest",
        ),
    }
    parts = []
    for kind, (one, many) in phrases.items():
        files = [p.detail if kind == "manifest" else p.file for p in problems if p.kind == kind]
        if not files:
            continue
        shown = ", ".join(files[:_SHOWN_FILES]) + (", ..." if len(files) > _SHOWN_FILES else "")
        parts.append(f"{(one if len(files) == 1 else many).format(n=len(files))} ({shown})")
    stage = _writer_stage(path)
    which = f"the stage that wrote it, {stage!r}" if stage else "the stage that wrote it"
    return (
        f"Store {path} is damaged: {'; '.join(parts)}. Rerun {which} (delete the store, then "
        "run snakemake again), instead of using it."
    )

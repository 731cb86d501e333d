"""Stimulus files: their modality, identity and lookup under the stimuli folder.

Stimulus ids are the ``stim_file`` strings of BIDS events: paths relative to the
dataset's ``stimuli/`` folder. This module holds the supported extensions of each
modality (:func:`file_modality`, :func:`infer_modality`), file contents
(:func:`file_sha256`), the lookup of stimulus files (:class:`FileIndex`,
:func:`resolve_stimulus_files`) and the ids read from events tables
(:func:`read_stimulus_ids`). A ``stim_file`` that is not there as written is
looked up under ``stimuli/`` recursively (:func:`resolve_stimulus_files`), and
files with identical contents under several ids are one stimulus
(:func:`content_groups`). Stimuli stay inside the dataset: an absolute
``stim_file``, one with a ``..`` component (:func:`stim_file_escape`) or one whose
file is a link to a file outside the dataset (:func:`stimulus_roots`,
:func:`linked_outside`, :func:`escaping_links`) is refused, never read.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.events import stimulus_mask

__all__ = [
    "FileIndex",
    "clean_stimulus_ids",
    "content_groups",
    "escaping_links",
    "file_modality",
    "file_sha256",
    "first_row_naming",
    "infer_modality",
    "linked_outside",
    "read_stimulus_ids",
    "resolve_stimulus_files",
    "stim_file_escape",
    "stim_suffix",
    "stimulus_roots",
    "supported_extensions",
]


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")


VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".npy")


AUDIO_EXTENSIONS = (".wav",)


TEXT_EXTENSIONS = (".txt",)


def stim_suffix(stim_id: str) -> str:
    """The lower-case extension of a stimulus id (``".png"``; ``""`` without one)."""
    return Path(stim_id).suffix.lower()


#: Extensions of the stimulus files read for each modality.
MODALITY_EXTENSIONS = {
    "image": IMAGE_EXTENSIONS,
    "video": VIDEO_EXTENSIONS,
    "audio": AUDIO_EXTENSIONS,
    "text": TEXT_EXTENSIONS,
}


def supported_extensions() -> str:
    """The stimulus file extensions neuroflow reads, by modality, for messages."""
    return "; ".join(
        f"{modality} {' '.join(exts)}" for modality, exts in MODALITY_EXTENSIONS.items()
    )


def file_modality(stim: str) -> str | None:
    """The modality a stimulus file's extension belongs to (None for other extensions).

    Parameters
    ----------
    stim : str
        A ``stim_file`` (or any file name).

    Returns
    -------
    modality : str | None
        ``"image"``, ``"video"``, ``"audio"``, ``"text"`` or None.
    """
    ext = stim_suffix(stim)
    return next((m for m, exts in MODALITY_EXTENSIONS.items() if ext in exts), None)


def first_row_naming(tables: Sequence[str | os.PathLike], stim: str) -> str | None:
    """Where a stimulus id is first named in the ``stim_file`` column of some tables.

    Parameters
    ----------
    tables : sequence of path-like
        Events (or trials) tables, read in order (missing files are skipped).
    stim : str
        The stimulus id (cells are compared after stripping spaces).

    Returns
    -------
    where : str | None
        ``"<table>, row <n>"`` (``n`` counts data rows from 1), or None when no
        table names it.
    """
    for path in tables:
        path = Path(path)
        if not path.is_file():
            continue
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        if "stim_file" not in table.columns:
            continue
        hits = np.flatnonzero(table["stim_file"].str.strip().to_numpy() == stim)
        if hits.size:
            return f"{path}, row {int(hits[0]) + 1}"
    return None


def infer_modality(
    stimulus_ids: Sequence[str], *, locate: Callable[[str], str | None] | None = None
) -> str:
    """Modality of stimuli from their file extensions.

    Parameters
    ----------
    stimulus_ids : sequence of str
        Paths relative to ``stimuli/``.
    locate : callable | None
        Where a stimulus id is named (e.g. :func:`first_row_naming` on the events
        tables), for the message about an unsupported extension.

    Returns
    -------
    modality : str
        ``"image"``, ``"video"``, ``"audio"`` or ``"text"``.

    Raises
    ------
    ValueError
        When a stimulus has an extension no modality reads (the message names the
        stimulus, where it is named and the supported extensions), or the stimuli mix
        modalities.
    """
    found = set()
    for stim in stimulus_ids:
        ext = stim_suffix(stim)
        for modality, exts in MODALITY_EXTENSIONS.items():
            if ext in exts:
                found.add(modality)
                break
        else:
            where = locate(stim) if locate is not None else None
            named = f" (stim_file in {where})" if where else ""
            raise ValueError(
                f"Stimulus file {stim!r}{named} must have an extension neuroflow reads, got "
                f"{ext or 'no extension'!r} instead. Supported: {supported_extensions()}. "
                "Convert the file, or set `modality` in the extractor's entry."
            )
    if len(found) != 1:
        raise ValueError(
            f"Stimuli must share one modality, got {sorted(found)} instead; extract each "
            "modality with its own configuration entry."
        )
    return found.pop()


def file_sha256(path: str | os.PathLike, *, chunk_bytes: int = 2**20) -> str:
    """SHA-256 of a file's contents, read in chunks.

    Parameters
    ----------
    path : path-like
        Any file.
    chunk_bytes : int
        Bytes read at a time.

    Returns
    -------
    digest : str
        64 hexadecimal digits.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def _same_content(paths: Sequence[Path]) -> list[list[Path]]:
    """Paths grouped by identical contents (size first, SHA-256 only where sizes collide)."""
    by_size: dict[int, list[Path]] = {}
    for path in dict.fromkeys(paths):
        by_size.setdefault(path.stat().st_size, []).append(path)
    groups: list[list[Path]] = []
    for same_size in by_size.values():
        if len(same_size) == 1:
            groups.append(same_size)
            continue
        by_hash: dict[str, list[Path]] = {}
        for path in same_size:
            by_hash.setdefault(file_sha256(path), []).append(path)
        groups.extend(by_hash.values())
    return groups


def _parts(stim: str) -> tuple[str, ...]:
    """Path components of a stim_file (either slash; root and ``.`` dropped)."""
    parts = PurePosixPath(str(stim).replace("\\", "/")).parts
    return tuple(p for p in parts if p not in ("/", ".", ""))


#: A Windows drive (``C:``) at the start of a path.
_DRIVE = re.compile(r"^[A-Za-z]:")


def stim_file_escape(stim: str) -> str | None:
    """Why a ``stim_file`` would name a file outside the stimuli folder.

    Parameters
    ----------
    stim : str
        A ``stim_file`` value, a path relative to the stimuli folder (either slash).

    Returns
    -------
    reason : str | None
        ``"an absolute path"`` (a leading slash or backslash, or a drive letter),
        ``"a path with '..'"`` (any ``..`` component), or None when the value stays
        inside the folder.
    """
    text = str(stim).strip().replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        return "an absolute path"
    if ".." in text.split("/"):
        return "a path with '..'"
    return None


def stimulus_roots(stimuli_dir: str | os.PathLike) -> tuple[Path, ...]:
    """The folders stimulus files may lie in once links are followed.

    Parameters
    ----------
    stimuli_dir : path-like
        The stimuli folder (``<dataset>/stimuli``).

    Returns
    -------
    roots : tuple of Path
        The stimuli folder and the dataset folder that holds it, links resolved (a
        ``stimuli`` folder that is itself a link counts as inside; so do links into
        the dataset, such as git-annex's ``.git/annex/objects``).
    """
    root = Path(stimuli_dir).absolute()
    return tuple(dict.fromkeys((root.resolve(), root.parent.resolve())))


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def linked_outside(stimulus_ids: Sequence[str], stimuli_dir: str | os.PathLike) -> dict[str, Path]:
    """The stimulus ids whose file is reached through a link leading outside the dataset.

    Parameters
    ----------
    stimulus_ids : sequence of str
        ``stim_file`` values that stay inside the folder (see :func:`stim_file_escape`).
    stimuli_dir : path-like
        The stimuli folder.

    Returns
    -------
    targets : dict of str to Path
        Id to where its file leads, for each id whose path as written passes through
        such a link (a linked file or folder), or, when not there as written, whose
        file name is that of a linked file (the recursive lookup of
        :func:`resolve_stimulus_files` could pick it). Empty when the folder holds no
        such link: then only the folder's entries are listed, nothing is resolved.
    """
    links = escaping_links(stimuli_dir)
    if not links:
        return {}
    root = Path(stimuli_dir)
    out: dict[str, Path] = {}
    for stim in dict.fromkeys(stimulus_ids):
        parts = _parts(stim)
        hit = next((k for k in range(1, len(parts) + 1) if parts[:k] in links), None)
        if hit is not None:
            out[stim] = links[parts[:hit]].joinpath(*parts[hit:])
        elif parts and not (root / stim).exists():
            named = [target for link, target in links.items() if link[-1] == parts[-1]]
            if named:
                out[stim] = named[0]
    return out


def escaping_links(stimuli_dir: str | os.PathLike) -> dict[tuple[str, ...], Path]:
    """Links under a stimuli folder that lead outside the dataset.

    The folder is walked without following links (directory entries only, no file
    is opened); only the links found are resolved.

    Parameters
    ----------
    stimuli_dir : path-like
        The stimuli folder.

    Returns
    -------
    links : dict of tuple of str to Path
        Path components of each such link (file or folder), relative to the stimuli
        folder, to the path it resolves to; empty when there is none (or no folder).
    """
    root = Path(stimuli_dir)
    roots = stimulus_roots(root)
    out: dict[tuple[str, ...], Path] = {}
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                target = Path(os.path.realpath(entry.path))
                if not _within(target, roots):
                    out[Path(entry.path).relative_to(root).parts] = target
            elif entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
    return out


class FileIndex:
    """Finds stim_files under a stimuli folder, listing the folder at most once.

    Every file it returns lies inside the dataset (:func:`stimulus_roots`), links
    followed; a ``stim_file`` that leaves the folder (:func:`stim_file_escape`) is
    refused before any lookup.

    Parameters
    ----------
    stimuli_dir : path-like
        The dataset's ``stimuli/`` folder.
    """

    def __init__(self, stimuli_dir: str | os.PathLike) -> None:
        self.root = Path(stimuli_dir)
        self._by_name: dict[str, list[Path]] | None = None
        self._roots: tuple[Path, ...] | None = None

    def inside(self, stim: str, path: Path) -> Path:
        """``path``, checked to lie inside the dataset once links are followed.

        Raises ValueError naming the stim_file, the file and where it leads otherwise.
        """
        if self._roots is None:
            self._roots = stimulus_roots(self.root)
        target = Path(os.path.realpath(path))
        if not _within(target, self._roots):
            raise ValueError(
                f"Stimulus file {path} (stim_file {stim!r}) must lie inside the dataset "
                f"({self._roots[-1]}), got a link to {target} instead; copy the file into "
                f"{self.root} instead of linking it."
            )
        return path

    def exact(self, stim: str) -> Path | None:
        """The file ``root / stim`` when it exists, or None.

        Raises ValueError when the stim_file leaves the folder or its file is a link to
        a file outside the dataset.
        """
        problem = stim_file_escape(stim)
        if problem is not None:
            raise ValueError(
                f"stim_file {stim!r} must be a path relative to the stimuli folder "
                f"{self.root}, got {problem} instead; stimuli are read from inside the "
                "dataset only."
            )
        path = self.root / stim
        return self.inside(stim, path) if path.is_file() else None

    def _listing(self) -> dict[str, list[Path]]:
        """Files under the folder by name (hidden files and folders left out), sorted."""
        if self._by_name is None:
            by_name: dict[str, list[Path]] = {}
            if self.root.is_dir():
                for path in sorted(self.root.rglob("*")):
                    rel = path.relative_to(self.root).parts
                    if any(part.startswith(".") for part in rel) or not path.is_file():
                        continue
                    by_name.setdefault(path.name, []).append(path)
            self._by_name = by_name
        return self._by_name

    def find(self, stim: str) -> Path | None:
        """The file of one stim_file, or None when no file matches.

        Raises ValueError when several files with different contents match, when the
        stim_file leaves the folder, or when its file is a link leading outside the
        dataset.
        """
        exact = self.exact(stim)
        if exact is not None:
            return exact
        parts = _parts(stim)
        if not parts:
            return None
        named = self._listing().get(parts[-1], [])
        ending = [p for p in named if p.relative_to(self.root).parts[-len(parts) :] == parts]
        candidates = ending or named
        if not candidates:
            return None
        if len(candidates) == 1:
            return self.inside(stim, candidates[0])
        groups = _same_content(candidates)
        if len(groups) > 1:
            listed = [str(p.relative_to(self.root)) for p in candidates]
            how = "end with it" if ending else f"are named {parts[-1]!r}"
            raise ValueError(
                f"stim_file {stim!r} is not under {self.root} as written, and {len(listed)} "
                f"files there {how} with different contents: {listed}; write the stim_file as "
                "the file's path relative to the stimuli folder."
            )
        return self.inside(stim, candidates[0])

    def get(self, stim: str) -> Path:
        """The file of one stim_file; FileNotFoundError when none matches."""
        path = self.find(stim)
        if path is None:
            raise FileNotFoundError(
                f"Stimulus file {self.root / stim} (stim_file {stim!r}) does not exist, and no "
                f"file under {self.root} ends with it or is named {(_parts(stim) or ('',))[-1]!r}."
            )
        return path


def resolve_stimulus_files(
    stimulus_ids: Sequence[str],
    stimuli_dir: str | os.PathLike,
    *,
    missing: str = "error",
) -> dict[str, Path]:
    """The file of each stimulus id, looked up recursively when not found as written.

    Parameters
    ----------
    stimulus_ids : sequence of str
        ``stim_file`` values: paths relative to ``stimuli_dir``.
    stimuli_dir : path-like
        The dataset's ``stimuli/`` folder.
    missing : str
        ``"error"``: an id without a file raises :class:`FileNotFoundError`
        naming it and the folder; ``"skip"``: it is left out of the result.

    Returns
    -------
    paths : dict of str to Path
        Id to file, in ``stimulus_ids`` order. An id is ``stimuli_dir / id``
        when that file exists; otherwise the unique file under ``stimuli_dir``
        (searched recursively, listed once, hidden files left out) whose path
        ends with the id's path components, or failing that whose name equals
        the id's basename. Several such files with identical contents give the
        first in sorted order; with different contents a ValueError lists them.

    Raises
    ------
    ValueError
        When an id leaves ``stimuli_dir`` (absolute, or with a ``..`` component) or
        its file is a link to a file outside the dataset (:func:`stimulus_roots`),
        whatever ``missing``: no file outside the dataset is read.
    """
    if missing not in ("error", "skip"):
        raise ValueError(f"`missing` must be 'error' or 'skip', got {missing!r} instead.")
    index = FileIndex(stimuli_dir)
    out: dict[str, Path] = {}
    for stim in stimulus_ids:
        if stim in out:
            continue
        path = index.get(stim) if missing == "error" else index.find(stim)
        if path is not None:
            out[stim] = path
    return out


def content_groups(paths: Mapping[str, str | os.PathLike]) -> dict[str, str]:
    """The first id of each set of ids whose files have identical contents.

    Parameters
    ----------
    paths : dict of str to path-like
        Stimulus id to file (see :func:`resolve_stimulus_files`), in row order.

    Returns
    -------
    canonical : dict of str to str
        Each id to the first id (in ``paths`` order) whose file has the same
        contents (SHA-256; hashed only where file sizes collide); an id with
        unique contents maps to itself. Files of the same name with different
        contents stay distinct.
    """
    files = {stim: Path(path) for stim, path in paths.items()}
    first_of: dict[Path, str] = {}
    for group in _same_content(list(files.values())):
        members = set(group)
        first = next(stim for stim, path in files.items() if path in members)
        first_of.update(dict.fromkeys(group, first))
    return {stim: first_of[path] for stim, path in files.items()}


def clean_stimulus_ids(values: Sequence[Any]) -> list[str]:
    """Unique stimulus ids of some cells, in order, spaces stripped and missing ones left out.

    Parameters
    ----------
    values : sequence
        ``stim_file`` cells; None, empty and ``n/a``-like cells
        (:data:`neuroflow.io.events.MISSING`) are skipped.

    Returns
    -------
    ids : list of str
        Unique ids, in order of first appearance.
    """
    seen: dict[str, None] = {}
    for value in values:
        text = "" if value is None else str(value).strip()
        if text.lower() in _MISSING:
            continue
        seen.setdefault(text, None)
    return list(seen)


def read_stimulus_ids(
    source: Sequence[str] | str | os.PathLike | Sequence[os.PathLike],
    *,
    stimulus_events: Mapping[str, Any] | None = None,
) -> list[str]:
    """Unique stimulus ids, in order of first appearance.

    Parameters
    ----------
    source : list of str | path-like | list of path-like
        Either the ids themselves (a list of ``str``), or one or more TSV files
        (BIDS ``_events.tsv`` or any table) with a ``stim_file`` column, given
        as path objects (a single ``str`` is read as a path too). ``n/a`` and
        empty cells are skipped.
    stimulus_events : dict | None
        ``dataset.stimulus_events`` (``{"select": {column: [values]},
        "exclude": {column: [values]}}``): events-table rows that
        :func:`neuroflow.io.events.stimulus_mask` rejects are not stimuli.
        ``None``: every row with a ``stim_file``. Unused for a list of ids.

    Returns
    -------
    ids : list of str
        Unique ids.
    """
    if isinstance(source, str | os.PathLike):
        paths = [Path(source)]
    elif isinstance(source, Sequence) and all(isinstance(s, str) for s in source):
        ids = clean_stimulus_ids(source)
        if not ids:
            raise ValueError("`stimulus_ids` must name at least one stimulus, got none instead.")
        return ids
    elif isinstance(source, Sequence) and all(isinstance(s, os.PathLike) for s in source):
        paths = [Path(s) for s in source]
    else:
        raise TypeError(
            "`stimulus_ids` must be a list of str or one or more TSV paths, got "
            f"{type(source).__name__} instead."
        )
    values: list[Any] = []
    for path in paths:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        if "stim_file" not in table.columns:
            raise ValueError(
                f"{path}: the table has no `stim_file` column (columns: {list(table.columns)})."
            )
        if stimulus_events is not None:
            table = table[stimulus_mask(table, stimulus_events, where=path)]
        values.extend(table["stim_file"].tolist())
    ids = clean_stimulus_ids(values)
    if not ids:
        raise ValueError(f"No stimulus ids in the `stim_file` column of {[str(p) for p in paths]}.")
    return ids

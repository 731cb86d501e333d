"""Stimulus ids, loading and image transforms.

Stimulus ids are the ``stim_file`` strings of BIDS events: paths relative to the
dataset's ``stimuli/`` folder. A ``stim_file`` that is not there as written is
looked up under ``stimuli/`` recursively (:func:`resolve_stimulus_files`), and
files with identical contents under several ids are one stimulus
(:func:`content_groups`). Stimuli stay inside the dataset: an absolute
``stim_file``, one with a ``..`` component (:func:`stim_file_escape`) or one whose
file is a link to a file outside the dataset (:func:`stimulus_roots`) is refused,
never read. Loaded stimuli have one type per modality:

- image: ``ndarray, shape (H, W, 3)``, float32 in [0, 1];
- video: :class:`Video` (frames ``(n_frames, H, W, 3)`` float32 in [0, 1] and fps);
- audio: :class:`Audio` (mono float32 waveform and sampling rate);
- text: ``str`` (the caption, possibly preceded by context words).

Time-continuous designs expand one stimulus into several rows:

- a video sampled at ``frame_rate`` gives one row per sampled frame, id
  ``<stim_file>#t=<seconds>`` (:func:`frame_id`, :func:`frame_times`); windowed
  extractors read the clip or the sound before each sampled time instead
  (:mod:`neuroflow.features.windows`; a video is heard from the WAV file of the
  same name, :func:`soundtrack_files`), with the same ids;
- a narrative gives one text row per word, id ``<stim_file>#w=<index>``
  (:func:`word_id`, :func:`read_transcript`), either from word events of the
  BIDS ``_events.tsv`` (a word column) or from a transcript TSV named by
  ``stim_file`` (columns word, ``onset`` and ``duration`` in seconds from the
  event's onset).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.extras import require
from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.events import stimulus_mask
from neuroflow.io.files import read_image_unit, read_table

__all__ = [
    "Audio",
    "Video",
    "apply_transforms",
    "audio_info",
    "content_groups",
    "escaping_links",
    "evenly_spaced",
    "file_modality",
    "file_sha256",
    "first_row_naming",
    "frame_id",
    "frame_indices",
    "frame_times",
    "infer_modality",
    "iter_audio_segments",
    "iter_batches",
    "iter_video_frames",
    "linked_outside",
    "load_audio",
    "load_image",
    "load_video",
    "read_captions",
    "read_stimulus_ids",
    "read_transcript",
    "resolve_stimulus_files",
    "soundtrack_files",
    "stim_file_escape",
    "stimulus_roots",
    "stimulus_texts",
    "supported_extensions",
    "transcript_texts",
    "video_info",
    "word_id",
]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".npy")
AUDIO_EXTENSIONS = (".wav",)
TEXT_EXTENSIONS = (".txt",)


@dataclass(frozen=True)
class Video:
    """Frames of one video stimulus.

    Attributes
    ----------
    frames : ndarray, shape (n_frames, H, W, 3)
        Float32 RGB in [0, 1].
    fps : float
        Frames per second.
    """

    frames: np.ndarray
    fps: float


@dataclass(frozen=True)
class Audio:
    """Waveform of one audio stimulus.

    Attributes
    ----------
    samples : ndarray, shape (n_samples,)
        Mono float32 waveform in [-1, 1].
    sfreq : float
        Sampling rate in Hz.
    """

    samples: np.ndarray
    sfreq: float


def _suffix(stim_id: str) -> str:
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
    ext = _suffix(stim)
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
        ext = _suffix(stim)
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


class _FileIndex:
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
    index = _FileIndex(stimuli_dir)
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


def _clean_ids(values: Sequence[Any]) -> list[str]:
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
        ids = _clean_ids(source)
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
    ids = _clean_ids(values)
    if not ids:
        raise ValueError(f"No stimulus ids in the `stim_file` column of {[str(p) for p in paths]}.")
    return ids


def read_captions(path: str | os.PathLike) -> dict[str, str]:
    """Read a captions table.

    Parameters
    ----------
    path : path-like
        TSV with columns ``stim_file`` and ``caption``.

    Returns
    -------
    captions : dict of str to str
        Stimulus id to caption.

    Raises
    ------
    FileNotFoundError
        When the table does not exist.
    ValueError
        When it is not a readable TSV, lacks a column, or captions a stim_file twice.
    """
    path = Path(path)
    table = read_table(path, "Captions table", required=("stim_file", "caption"))
    if table["stim_file"].duplicated().any():
        dup = table.loc[table["stim_file"].duplicated(), "stim_file"].iloc[0]
        n = int((table["stim_file"] == dup).sum())
        raise ValueError(
            f"Captions table {path} must give each stim_file one caption, got {n} rows for "
            f"{dup!r} instead."
        )
    return dict(zip(table["stim_file"], table["caption"], strict=True))


def stimulus_texts(
    stimulus_ids: Sequence[str],
    *,
    stimuli_dir: str | os.PathLike,
    captions: Mapping[str, str] | None,
    context_words: int = 0,
) -> list[tuple[str, str]]:
    """Text of each stimulus and the context that precedes it.

    Parameters
    ----------
    stimulus_ids : sequence of str
        Ids in presentation order (the order defines the context).
    stimuli_dir : path-like
        The ``stimuli/`` folder, read for ``.txt`` stimuli without a caption.
    captions : dict of str to str | None
        Stimulus id to caption.
    context_words : int
        Number of words preceding each stimulus (from the previous stimuli's
        texts, in order) given to the model as context; 0 for none.

    Returns
    -------
    texts : list of (str, str)
        ``(context, text)`` pairs; ``context`` is ``""`` without context.

    Notes
    -----
    A stimulus's text is its caption; else, for a ``.txt`` stim_file, the
    file's text (found as in :func:`resolve_stimulus_files`); else the caption
    of a captioned stim_file whose file has identical contents (e.g.
    ``meg/f013.bmp`` takes the caption of ``func/f013.bmp``). The stimuli
    folder is listed at most once.
    """
    captions = dict(captions or {})
    index = _FileIndex(stimuli_dir)
    texts: dict[str, str] = {}
    for stim in dict.fromkeys(stimulus_ids):
        if stim in captions:
            texts[stim] = str(captions[stim])
        elif _suffix(stim) in TEXT_EXTENSIONS and (path := index.find(stim)) is not None:
            texts[stim] = path.read_text().strip()
    lacking = [stim for stim in dict.fromkeys(stimulus_ids) if stim not in texts]
    if lacking and captions:
        texts.update(_shared_captions(lacking, captions, index))
    own: list[str] = []
    for stim in stimulus_ids:
        if stim not in texts:
            raise ValueError(
                f"Stimulus {stim!r} has no text: it is not in the captions table "
                "(`stim_file` column), is not a .txt file under "
                f"{Path(stimuli_dir)} and has no file identical to a captioned one."
            )
        own.append(texts[stim])
    if context_words == 0:
        return [("", text) for text in own]
    out = []
    history: list[str] = []
    for text in own:
        out.append((" ".join(history[-context_words:]), text))
        history.extend(text.split())
    return out


def _shared_captions(
    lacking: Sequence[str], captions: Mapping[str, str], index: _FileIndex
) -> dict[str, str]:
    """Captions of uncaptioned stimuli taken from captioned files with identical contents."""
    paths: dict[str, Path] = {}
    for stim in lacking:
        path = index.find(stim)
        if path is not None:
            paths[stim] = path
    if not paths:
        return {}
    for key in captions:
        if key in paths:
            continue
        try:
            path = index.find(key)
        except ValueError:  # an ambiguous caption key names no one file
            path = None
        if path is not None:
            paths[key] = path
    groups = content_groups(paths)
    captioned: dict[str, str] = {}
    for key in captions:
        if key in paths:
            captioned.setdefault(groups[key], key)
    return {
        stim: str(captions[captioned[groups[stim]]])
        for stim in lacking
        if stim in paths and groups[stim] in captioned
    }


#: Columns of the table returned by :func:`read_transcript`.
TRANSCRIPT_COLUMNS = (
    "stimulus",
    "source_stimulus",
    "word_index",
    "word",
    "word_onset",
    "word_duration",
    "word_event",
)


def _is_missing(value: Any) -> bool:
    return value is None or str(value).strip().lower() in _MISSING


def _seconds(value: str, where: str, field: str, *, missing: float | None) -> float:
    if _is_missing(value):
        if missing is None:
            raise ValueError(
                f"{where}: `{field}` is missing (n/a); it must be a number of seconds."
            )
        return missing
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{where}: `{field}` must be a number of seconds, got {value!r} instead."
        ) from None


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"Table {path} does not exist.")
    return pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)


def _transcript_file(path: Path, source: str, column: str) -> list[tuple[str, float, float]]:
    """Words of one transcript TSV: (word, onset, duration) in seconds from the event's onset."""
    table = _read_table(path)
    missing = sorted({column, "onset"} - set(table.columns))
    if missing:
        raise ValueError(
            f"{path}: the transcript (stim_file {source!r}) lacks column(s) {missing} "
            f"(columns: {list(table.columns)})."
        )
    durations = table["duration"] if "duration" in table.columns else [""] * len(table)
    words = []
    for r, (cell, onset, duration) in enumerate(
        zip(table[column], table["onset"], durations, strict=True)
    ):
        if _is_missing(cell):
            continue
        where = f"{path}, row {r + 1}"
        words.append(
            (
                str(cell).strip(),
                _seconds(onset, where, "onset", missing=None),
                _seconds(duration, where, "duration", missing=0.0),
            )
        )
    if not words:
        raise ValueError(f"{path}: the transcript has no words in column `{column}`.")
    return words


def _event_words(
    path: Path, table: pd.DataFrame, column: str
) -> tuple[dict[str, list[tuple[str, float, float]]], list[str]]:
    """Word events of one events table grouped by stim_file, and the transcripts it names."""
    by_source: dict[str, list[tuple[str, float, float]]] = {}
    transcripts: list[str] = []
    stims = table["stim_file"] if "stim_file" in table.columns else [""] * len(table)
    words = table[column] if column in table.columns else [""] * len(table)
    onsets = table["onset"] if "onset" in table.columns else [""] * len(table)
    durations = table["duration"] if "duration" in table.columns else [""] * len(table)
    # The table's index keeps each row's position in the file after a stimulus_events filter.
    for r, stim, word, onset, duration in zip(
        table.index, stims, words, onsets, durations, strict=True
    ):
        where = f"{path}, row {r + 1}"
        if not _is_missing(word):
            if _is_missing(stim):
                raise ValueError(
                    f"{where}: the event has a `{column}` but no `stim_file`; word events need "
                    "the stim_file of their narrative (e.g. its audio file)."
                )
            t0 = _seconds(onset, where, "onset", missing=None)
            dur = _seconds(duration, where, "duration", missing=0.0)
            by_source.setdefault(str(stim).strip(), []).append((str(word).strip(), t0, dur))
        elif not _is_missing(stim) and _suffix(str(stim)) == ".tsv":
            transcripts.append(str(stim).strip())
    for source, items in by_source.items():
        first = items[0][1]
        by_source[source] = [(w, t - first, d) for w, t, d in items]
    return by_source, transcripts


def read_transcript(
    source: Sequence[str] | str | os.PathLike | Sequence[os.PathLike],
    *,
    stimuli_dir: str | os.PathLike,
    column: str = "word",
    stimulus_events: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Words of the narratives, one row per word, with their timing.

    Parameters
    ----------
    source : list of str | path-like | list of path-like
        Events tables (BIDS ``_events.tsv``, given as path objects; a single
        ``str`` is read as a path too), or a list of ``str`` transcript ids
        (``.tsv`` files relative to ``stimuli_dir``). In an events table, an
        event with a ``column`` cell is one word (its ``stim_file`` names the
        narrative; ``onset`` and ``duration`` are its timing); an event without
        one whose ``stim_file`` is a ``.tsv`` names a transcript with columns
        ``column``, ``onset`` and (optionally) ``duration``, in seconds from the
        event's onset. Other events are ignored, as are empty word cells.
    stimuli_dir : path-like
        The ``stimuli/`` folder holding the transcripts (a transcript not there
        as written is looked up as in :func:`resolve_stimulus_files`).
    column : str
        Name of the word column (in events tables and transcripts).
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events-table rows that
        :func:`neuroflow.io.events.stimulus_mask` rejects are ignored (word
        events included). ``None``: no selection.

    Returns
    -------
    words : pandas.DataFrame, shape (n_words, 7)
        Columns :data:`TRANSCRIPT_COLUMNS`: ``stimulus`` (``<stim_file>#w=<i>``),
        ``source_stimulus`` (the stim_file), ``word_index`` (``i``, from 0 in
        each narrative), ``word``, ``word_onset`` (s from the transcript event's
        onset, or from the narrative's first word event), ``word_duration``
        (s; 0 when n/a) and ``word_event`` (True for words read from word
        events, False for words of a transcript file). Narratives appear in
        order of first appearance; a narrative listed in several tables is read
        once (its words must agree).
    """
    if not isinstance(column, str) or not column:
        raise ValueError(f"`transcript_column` must be a non-empty str, got {column!r} instead.")
    by_source: dict[str, list[tuple[str, float, float]]] = {}
    origin: dict[str, str] = {}
    if isinstance(source, str | os.PathLike):
        source = [Path(source)]
    if isinstance(source, Sequence) and source and all(isinstance(s, str) for s in source):
        pending = [(stim, "the `stimulus_ids` list") for stim in _clean_ids(source)]
        for stim, where in pending:
            if _suffix(stim) != ".tsv":
                raise ValueError(
                    f"`stimulus_ids` must name transcript .tsv files for `text_source: "
                    f"transcript`, got {stim!r} instead (from {where})."
                )
    elif isinstance(source, Sequence) and all(isinstance(s, os.PathLike) for s in source):
        pending = []
        for path in (Path(s) for s in source):
            table = _read_table(path)
            if stimulus_events is not None:
                keep = stimulus_mask(table, stimulus_events, id_column=None, where=path)
                table = table[keep]
            events, transcripts = _event_words(path, table, column)
            for stim, items in events.items():
                if stim in by_source and [w for w, _, _ in by_source[stim]] != [
                    w for w, _, _ in items
                ]:
                    raise ValueError(
                        f"{path}: the word events of stim_file {stim!r} differ from those in "
                        f"{origin[stim]}; give each narrative (or each part of one) its own "
                        "stim_file."
                    )
                by_source.setdefault(stim, items)
                origin.setdefault(stim, str(path))
            pending.extend((stim, str(path)) for stim in transcripts)
    else:
        raise TypeError(
            "`stimulus_ids` must be a list of str or one or more TSV paths, got "
            f"{type(source).__name__} instead."
        )
    index = _FileIndex(stimuli_dir)
    for stim, _ in pending:
        if stim not in by_source:
            by_source[stim] = _transcript_file(index.get(stim), stim, column)
    if not by_source:
        raise ValueError(
            f"No words: the events tables have no `{column}` cells and no stim_file naming a "
            "transcript .tsv."
        )
    rows = [
        (word_id(stim, i), stim, i, word, onset, duration, stim in origin)
        for stim, items in by_source.items()
        for i, (word, onset, duration) in enumerate(items)
    ]
    table = pd.DataFrame(rows, columns=list(TRANSCRIPT_COLUMNS))
    return table.astype(
        {"word_index": int, "word_onset": float, "word_duration": float, "word_event": bool}
    )


def transcript_texts(words: pd.DataFrame, *, context_words: int = 0) -> list[tuple[str, str]]:
    """Each word and the words of its narrative that precede it.

    Parameters
    ----------
    words : pandas.DataFrame
        Output of :func:`read_transcript`.
    context_words : int
        Number of preceding words (of the same narrative) given as context.

    Returns
    -------
    texts : list of (str, str), length n_words
        ``(context, word)`` pairs; the context is ``""`` at a narrative's start
        or when ``context_words`` is 0.
    """
    out: list[tuple[str, str]] = []
    history: list[str] = []
    previous = None
    for source, word in zip(words["source_stimulus"], words["word"], strict=True):
        if source != previous:
            history, previous = [], source
        context = " ".join(history[-context_words:]) if context_words > 0 else ""
        out.append((context, str(word)))
        history.extend(str(word).split())
    return out


def load_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image as float32 RGB, scaled by its bit depth.

    Parameters
    ----------
    path : path-like
        PNG, JPEG or any format Pillow reads, at 8 or 16 bits per sample (or a
        floating-point TIFF in [0, 1]); see :func:`neuroflow.io.files.read_image_unit`.

    Returns
    -------
    image : ndarray, shape (H, W, 3)
        Float32 in [0, 1]: a picture saved at 8 and at 16 bits gives the same values.

    Raises
    ------
    ValueError
        When Pillow cannot identify or decode the file, or its samples exceed its bit
        depth; the message names it.
    """
    return read_image_unit(path, "Stimulus image")


def load_video(path: str | os.PathLike, *, fps: float = 24.0) -> Video:
    """Read all frames of a video.

    Parameters
    ----------
    path : path-like
        A video file OpenCV reads, or a ``.npy`` frame stack of shape
        ``(n_frames, H, W)`` or ``(n_frames, H, W, 3)`` (uint8, or float in [0, 1]).
    fps : float
        Frame rate of ``.npy`` stacks (video files carry their own).

    Returns
    -------
    video : Video
        Frames and frame rate.
    """
    path = Path(path)
    if path.suffix.lower() == ".npy":
        frames = np.load(path)
        rate = float(fps)
    else:
        cv2 = require("cv2", "Reading video files")

        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise ValueError(f"{path}: OpenCV cannot open this video file.")
        rate = float(cap.get(cv2.CAP_PROP_FPS) or fps)
        read = []
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            read.append(frame[..., ::-1])
        cap.release()
        if not read:
            raise ValueError(f"{path}: the video has no readable frames.")
        frames = np.stack(read)
    _check_frame_shape(frames.shape, path)
    return Video(frames=_to_unit_rgb(frames, _frame_scale(frames), grey=frames.ndim == 3), fps=rate)


def _check_frame_shape(shape: tuple[int, ...], path: Path) -> None:
    if len(shape) not in (3, 4) or (len(shape) == 4 and shape[-1] != 3) or shape[0] < 1:
        raise ValueError(
            f"{path}: frames must have shape (n_frames, H, W[, 3]), got {shape} instead."
        )


def _frame_scale(frames: np.ndarray) -> float:
    """Divisor mapping a frame stack to [0, 1]: its bit depth's maximum for uint8 (255)
    and uint16 (65535), 255 for other integers or floats above 1."""
    if frames.dtype == np.uint16:
        return float(np.iinfo(np.uint16).max)
    if np.issubdtype(frames.dtype, np.integer):
        return 255.0
    return 255.0 if float(np.max(frames, initial=0.0)) > 1.0 else 1.0


def _to_unit_rgb(frames: np.ndarray, scale: float, *, grey: bool) -> np.ndarray:
    """Float32 RGB in [0, 1]; ``grey`` frames lack the trailing colour axis."""
    out = np.asarray(frames, dtype=np.float32)
    if scale != 1.0:
        out = out / np.float32(scale)
    if grey:
        out = np.repeat(out[..., None], 3, axis=-1)
    return out


def video_info(path: str | os.PathLike, *, fps: float = 24.0) -> tuple[int, float]:
    """Number of frames and frame rate of a video, without decoding it.

    Parameters
    ----------
    path : path-like
        A video file OpenCV reads, or a ``.npy`` frame stack.
    fps : float
        Frame rate of ``.npy`` stacks (video files carry their own).

    Returns
    -------
    n_frames : int
        Frame count (from the container's header for video files).
    fps : float
        Frames per second.
    """
    path = Path(path)
    if path.suffix.lower() == ".npy":
        stack = np.load(path, mmap_mode="r")
        _check_frame_shape(stack.shape, path)
        return int(stack.shape[0]), float(fps)
    cv2 = require("cv2", "Reading video files")

    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"{path}: OpenCV cannot open this video file.")
    n_frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
    rate = float(cap.get(cv2.CAP_PROP_FPS) or fps)
    cap.release()
    if n_frames < 1:
        raise ValueError(f"{path}: the video header reports no frames (CAP_PROP_FRAME_COUNT).")
    return n_frames, rate


def frame_times(n_frames: int, fps: float, frame_rate: float) -> np.ndarray:
    """Times at which a clip is sampled at ``frame_rate``.

    Parameters
    ----------
    n_frames : int
        Frames in the clip.
    fps : float
        The clip's frame rate; its duration is ``n_frames / fps``.
    frame_rate : float
        Sampling rate in Hz.

    Returns
    -------
    times : ndarray, shape (n_samples,)
        ``k / frame_rate`` for every ``k`` with a time before the clip's end, so
        ``n_samples = ceil(duration * frame_rate)``.
    """
    if not frame_rate > 0:
        raise ValueError(f"`frame_rate` must be a positive number, got {frame_rate} instead.")
    duration = n_frames / float(fps)
    n_samples = max(1, int(np.ceil(duration * frame_rate - 1e-9)))
    return np.arange(n_samples) / float(frame_rate)


def frame_indices(times: np.ndarray, fps: float, n_frames: int) -> np.ndarray:
    """Index of the frame on screen at each time.

    Parameters
    ----------
    times : ndarray, shape (n_samples,)
        Seconds from the clip's start.
    fps : float
        Frame rate; frame ``i`` is shown during ``[i / fps, (i + 1) / fps)``.
    n_frames : int
        Frames in the clip (indices are clipped to the last one).

    Returns
    -------
    indices : ndarray of int, shape (n_samples,)
        Frame indices.
    """
    idx = np.floor(np.asarray(times, float) * float(fps) + 1e-6).astype(int)
    return np.clip(idx, 0, n_frames - 1)


def evenly_spaced(n_frames: int, n_take: int) -> np.ndarray:
    """Indices of up to ``n_take`` evenly spaced frames of a clip.

    Parameters
    ----------
    n_frames : int
        Frames in the clip.
    n_take : int
        Frames wanted (fewer when the clip is shorter).

    Returns
    -------
    indices : ndarray of int, shape (min(n_take, n_frames),)
        From the first to the last frame.
    """
    return np.unique(np.linspace(0, n_frames - 1, min(n_take, n_frames))).astype(int)


def frame_id(stim_file: str, time: float) -> str:
    """Stimulus id of one sampled frame: ``<stim_file>#t=<seconds, 3 decimals>``."""
    return f"{stim_file}#t={time:.3f}"


def word_id(stim_file: str, index: int) -> str:
    """Stimulus id of one word of a narrative: ``<stim_file>#w=<index>``."""
    return f"{stim_file}#w={index}"


def iter_video_frames(
    path: str | os.PathLike,
    indices: Sequence[int] | np.ndarray,
    *,
    transforms: Mapping[str, Any],
) -> Iterator[np.ndarray]:
    """Stream chosen frames of a video, decoding one frame at a time.

    Parameters
    ----------
    path : path-like
        A video file OpenCV reads, or a ``.npy`` frame stack (memory-mapped).
    indices : sequence of int, shape (n_samples,)
        Non-decreasing frame indices (repeats allowed). Indices past the last
        decodable frame (a container header that over-counts) give the last
        frame.
    transforms : dict
        See :func:`apply_transforms`.

    Yields
    ------
    frame : ndarray, shape (H', W', 3)
        Float32 RGB in [0, 1], transformed.
    """
    path = Path(path)
    wanted = np.asarray(indices, dtype=int)
    if wanted.size and (np.any(np.diff(wanted) < 0) or wanted[0] < 0):
        raise ValueError("`indices` must be non-negative and non-decreasing.")
    if path.suffix.lower() == ".npy":
        stack = np.load(path, mmap_mode="r")
        _check_frame_shape(stack.shape, path)
        scale = _frame_scale(stack)
        last = stack.shape[0] - 1
        grey = stack.ndim == 3
        for i in wanted:
            frame = _to_unit_rgb(np.array(stack[min(i, last)]), scale, grey=grey)
            yield apply_transforms(frame, transforms)
        return
    cv2 = require("cv2", "Reading video files")

    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise ValueError(f"{path}: OpenCV cannot open this video file.")
    try:
        position, raw, ended = -1, None, False
        done_for, current = -2, None
        for i in wanted:
            while position < i and not ended:
                ok, frame = cap.read()
                if not ok:
                    ended = True
                    break
                position, raw = position + 1, frame
            if raw is None:
                raise ValueError(f"{path}: the video has no readable frames.")
            if done_for != position:
                rgb = _to_unit_rgb(raw[..., ::-1], 255.0, grey=False)
                current, done_for = apply_transforms(rgb, transforms), position
            yield current
    finally:
        cap.release()


def _read_wav(path: str | os.PathLike, *, mmap: bool) -> tuple[float, np.ndarray]:
    """Sampling rate and raw samples of a WAV file (memory-mapped when ``mmap`` and possible)."""
    from scipy.io import wavfile

    try:
        try:
            sfreq, data = wavfile.read(path, mmap=mmap)
        except ValueError:
            if not mmap:
                raise
            sfreq, data = wavfile.read(path)  # e.g. 24-bit PCM cannot be memory-mapped
    except (ValueError, OSError, EOFError) as err:
        raise ValueError(
            f"Stimulus audio {path} must be a PCM or float WAV file, got an unreadable file "
            f"instead ({type(err).__name__}: {err})."
        ) from err
    return float(sfreq), data


def _unit_mono(data: np.ndarray) -> np.ndarray:
    """Mono float32 samples of raw WAV samples (integers scaled to [-1, 1], channels averaged)."""
    if np.issubdtype(data.dtype, np.integer):
        out = np.asarray(data, dtype=np.float32) / float(np.iinfo(data.dtype).max)
    else:
        out = np.asarray(data, dtype=np.float32)
    if out.ndim == 2:
        out = out.mean(axis=1)
    return np.asarray(out, dtype=np.float32)


def load_audio(path: str | os.PathLike) -> Audio:
    """Read a WAV file as a mono float waveform.

    Parameters
    ----------
    path : path-like
        PCM or float WAV.

    Returns
    -------
    audio : Audio
        Channels averaged; integers scaled to [-1, 1].

    Raises
    ------
    ValueError
        When SciPy cannot read the file as WAV; the message names it.
    """
    sfreq, data = _read_wav(path, mmap=False)
    return Audio(samples=_unit_mono(data), sfreq=sfreq)


def audio_info(path: str | os.PathLike) -> tuple[int, float]:
    """Number of samples and sampling rate of a WAV file, without reading its samples.

    Parameters
    ----------
    path : path-like
        PCM or float WAV.

    Returns
    -------
    n_samples : int
        Samples per channel.
    sfreq : float
        Sampling rate in Hz.
    """
    sfreq, data = _read_wav(path, mmap=True)
    if data.shape[0] < 1:
        raise ValueError(f"Stimulus audio {path} must hold at least one sample, got none.")
    return int(data.shape[0]), sfreq


def iter_audio_segments(
    path: str | os.PathLike, starts: np.ndarray, stops: np.ndarray
) -> Iterator[Audio]:
    """Stream segments of a WAV file, reading only their samples (memory-mapped).

    Files SciPy cannot memory-map (24-bit PCM) are read whole once instead.

    Parameters
    ----------
    path : path-like
        PCM or float WAV.
    starts, stops : ndarray of int, shape (n_segments,)
        Sample bounds ``[start, stop)`` of each segment. Samples before the
        file's start (negative indices) are zeros; ``stop`` must not pass the
        file's end.

    Yields
    ------
    segment : Audio
        ``stop - start`` mono float32 samples (see :func:`load_audio`) at the
        file's rate.
    """
    sfreq, data = _read_wav(path, mmap=True)
    for start, stop in zip(np.asarray(starts, int), np.asarray(stops, int), strict=True):
        if stop > data.shape[0] or stop < start:
            raise ValueError(
                f"Audio segment [{start}, {stop}) must end within the {data.shape[0]} samples of "
                f"{path}, got one past its end instead."
            )
        lead = min(max(-start, 0), stop - start)  # zeros before the file's start
        read = _unit_mono(data[max(start, 0) : max(stop, 0)])
        yield Audio(samples=np.concatenate([np.zeros(lead, np.float32), read]), sfreq=sfreq)


def soundtrack_files(files: Mapping[str, Path]) -> dict[str, Path]:
    """The WAV soundtrack of each video file: ``movie.mp4`` is heard from ``movie.wav``.

    Parameters
    ----------
    files : dict of str to Path
        Stimulus id to file (see :func:`resolve_stimulus_files`).

    Returns
    -------
    files : dict of str to Path
        The same ids; video files replaced by the ``.wav`` file of the same name
        next to them, other files kept.

    Raises
    ------
    FileNotFoundError
        When a video has no such WAV file; the message says how to write one.
    """
    out = {}
    for stim, path in files.items():
        if path.suffix.lower() not in VIDEO_EXTENSIONS:
            out[stim] = path
            continue
        wav = path.with_suffix(".wav")
        if not wav.is_file():
            raise FileNotFoundError(
                f"Stimulus video {path} (stim_file {stim!r}) has no soundtrack file {wav}: audio "
                "extractors read the sound of a video from the WAV file of the same name next to "
                f"it; write it with e.g. `ffmpeg -i {path.name} -vn -ac 1 {wav.name}`."
            )
        out[stim] = wav
    return out


def resample_audio(audio: Audio, sfreq: float) -> np.ndarray:
    """Polyphase resampling of a waveform to ``sfreq``.

    Parameters
    ----------
    audio : Audio
        Waveform.
    sfreq : float
        Target rate in Hz.

    Returns
    -------
    samples : ndarray, shape (n_samples_out,)
        Float32 waveform at ``sfreq``.
    """
    if audio.sfreq == sfreq:
        return audio.samples  # before the imports: scipy.signal alone costs ~0.6 s
    from fractions import Fraction

    from scipy.signal import resample_poly

    ratio = Fraction(round(sfreq), round(audio.sfreq)).limit_denominator(1000)
    out = resample_poly(audio.samples, ratio.numerator, ratio.denominator)
    return out.astype(np.float32)


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, Sequence) and len(value) == 2 and all(int(v) > 0 for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"`{name}` must be a positive int or [height, width], got {value!r} instead.")


def apply_transforms(image: np.ndarray, transforms: Mapping[str, Any]) -> np.ndarray:
    """Resize, centre-crop and blur one image (or video frame).

    Parameters
    ----------
    image : ndarray, shape (H, W, 3)
        Float RGB in [0, 1].
    transforms : dict
        ``resize`` (int: shorter side in px, keeping the aspect ratio; or
        [height, width]; ``None`` to skip), ``center_crop`` (int or
        [height, width]; ``None`` to skip) and ``blur_sigma`` (Gaussian s.d. in
        px, 0 to skip), applied in that order.

    Returns
    -------
    image : ndarray, shape (H', W', 3)
        Float32.
    """
    out = image
    resize = transforms.get("resize")
    if resize is not None:
        from skimage.transform import resize as sk_resize

        h, w = out.shape[:2]
        if isinstance(resize, int):
            scale = resize / min(h, w)
            size = (max(1, round(h * scale)), max(1, round(w * scale)))
        else:
            size = _pair(resize, "transforms.resize")
        out = sk_resize(
            out, (*size, out.shape[2]), order=1, anti_aliasing=True, preserve_range=True
        )
    crop = transforms.get("center_crop")
    if crop is not None:
        ch, cw = _pair(crop, "transforms.center_crop")
        h, w = out.shape[:2]
        if ch > h or cw > w:
            raise ValueError(
                f"`transforms.center_crop` must fit in the image, got {[ch, cw]} for an image "
                f"of {[h, w]} instead."
            )
        top, left = (h - ch) // 2, (w - cw) // 2
        out = out[top : top + ch, left : left + cw]
    sigma = float(transforms.get("blur_sigma") or 0.0)
    if sigma < 0:
        raise ValueError(f"`transforms.blur_sigma` must be >= 0, got {sigma} instead.")
    if sigma > 0:
        from scipy.ndimage import gaussian_filter

        out = gaussian_filter(out, sigma=(sigma, sigma, 0.0), mode="reflect")
    return np.ascontiguousarray(out, dtype=np.float32)


def load_stimulus(
    stim_id: str,
    *,
    modality: str,
    stimuli_dir: str | os.PathLike,
    transforms: Mapping[str, Any],
    fps: float = 24.0,
    path: str | os.PathLike | None = None,
) -> Any:
    """Load one non-text stimulus and apply the image transforms.

    Parameters
    ----------
    stim_id : str
        Path relative to ``stimuli_dir``.
    modality : str
        ``"image"``, ``"video"`` or ``"audio"``.
    stimuli_dir : path-like
        The ``stimuli/`` folder.
    transforms : dict
        See :func:`apply_transforms` (images and video frames only).
    fps : float
        Frame rate of ``.npy`` frame stacks.
    path : path-like | None
        The stimulus's file when already found (and checked to lie inside the
        dataset) by :func:`resolve_stimulus_files`; ``None``: ``stimuli_dir /
        stim_id``, refused when ``stim_id`` leaves ``stimuli_dir`` or the file is a
        link to a file outside the dataset.

    Returns
    -------
    stimulus : ndarray | Video | Audio
        See the module docstring.
    """
    if path is None:
        path = _FileIndex(stimuli_dir).exact(stim_id) or Path(stimuli_dir) / stim_id
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Stimulus file {path} (stim_file {stim_id!r}) does not exist.")
    if modality == "image":
        return apply_transforms(load_image(path), transforms)
    if modality == "video":
        video = load_video(path, fps=fps)
        frames = np.stack([apply_transforms(f, transforms) for f in video.frames])
        return Video(frames=frames, fps=video.fps)
    if modality == "audio":
        return load_audio(path)
    raise ValueError(f"`modality` must be image, video or audio here, got {modality!r} instead.")


def iter_batches(items: Sequence[Any], batch_size: int) -> Iterator[tuple[int, Sequence[Any]]]:
    """Consecutive slices of ``items``.

    Parameters
    ----------
    items : sequence
        Anything sliceable.
    batch_size : int
        Slice length (the last one may be shorter).

    Yields
    ------
    start : int
        Index of the slice's first item.
    batch : sequence
        The slice.
    """
    for start in range(0, len(items), batch_size):
        yield start, items[start : start + batch_size]

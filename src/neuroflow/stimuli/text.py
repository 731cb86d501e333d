"""Texts of stimuli: captions, text files and the words of narratives.

A stimulus's text is its caption, the contents of its ``.txt`` file, or the caption
of a file with identical contents (:func:`stimulus_texts`). A narrative gives one
text row per word, id ``<stim_file>#w=<index>`` (:func:`word_id`,
:func:`read_transcript`), either from word events of the BIDS ``_events.tsv`` (a
word column) or from a transcript TSV named by ``stim_file`` (columns word,
``onset`` and ``duration`` in seconds from the event's onset); each word is given
with the words that precede it (:func:`transcript_texts`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from neuroflow.io.events import MISSING as _MISSING
from neuroflow.io.events import stimulus_mask
from neuroflow.io.files import read_table
from neuroflow.stimuli.files import (
    TEXT_EXTENSIONS,
    FileIndex,
    clean_stimulus_ids,
    content_groups,
    stim_suffix,
)

__all__ = [
    "read_captions",
    "read_transcript",
    "stimulus_texts",
    "transcript_texts",
    "word_id",
]


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
    A stimulus's text is its caption; else, for a ``.txt`` stim_file, the file's text
    (found as in :func:`neuroflow.stimuli.files.resolve_stimulus_files`); else the
    caption of a captioned stim_file whose file has identical contents (e.g.
    ``meg/f013.bmp`` takes the caption of ``func/f013.bmp``). The stimuli folder is
    listed at most once.
    """
    captions = dict(captions or {})
    index = FileIndex(stimuli_dir)
    texts: dict[str, str] = {}
    for stim in dict.fromkeys(stimulus_ids):
        if stim in captions:
            texts[stim] = str(captions[stim])
        elif stim_suffix(stim) in TEXT_EXTENSIONS and (path := index.find(stim)) is not None:
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
    lacking: Sequence[str], captions: Mapping[str, str], index: FileIndex
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
        elif not _is_missing(stim) and stim_suffix(str(stim)) == ".tsv":
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
        as written is looked up as in
        :func:`neuroflow.stimuli.files.resolve_stimulus_files`).
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
        pending = [(stim, "the `stimulus_ids` list") for stim in clean_stimulus_ids(source)]
        for stim, where in pending:
            if stim_suffix(stim) != ".tsv":
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
    index = FileIndex(stimuli_dir)
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


def word_id(stim_file: str, index: int) -> str:
    """Stimulus id of one word of a narrative: ``<stim_file>#w=<index>``."""
    return f"{stim_file}#w={index}"

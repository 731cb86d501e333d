"""Stage entry point: extract stimulus features into one zarr store per layer.

Rows are stimuli, sampled video frames (``frame_rate`` set: ids
``<stim_file>#t=<s>``, coordinates ``source_stimulus``, ``frame_time`` and
``frame_duration``), windows before sampled times of a video or a sound
(``frame_rate`` set with ``hf_video`` or ``hf_audio``: the same ids and
coordinates; see :mod:`neuroflow.features.windows`) or transcript words
(``text_source: transcript``: ids ``<stim_file>#w=<i>``, coordinates
``source_stimulus``, ``word_index``, ``word``, ``word_onset``,
``word_duration`` and ``word_event``); see :mod:`neuroflow.stimuli`.
A video read by an audio extractor (``modality: audio``) is heard from the WAV
file of the same name next to it (see
:func:`neuroflow.stimuli.audio.soundtrack_files`).

Stimulus files are found under the stimuli folder even when a ``stim_file`` is
not there as written (one recursive listing per extraction, see
:func:`neuroflow.stimuli.files.resolve_stimulus_files`). Files with identical
contents under several ids (ds000117 shows ``func/f013.bmp`` to fMRI and
``meg/f013.bmp`` to MEG) are one stimulus: their features are computed once,
every id keeps its row, and the coordinate ``canonical_stimulus`` names the
first id with the same contents.

The ``events`` extractor (:mod:`neuroflow.features.events`) reads no files:
its rows are the condition codes and modulators of the events tables.

Features are streamed: each batch is written into the store's ``features``
array inside the store's hidden temporary directory (see
:func:`neuroflow.artifacts.atomic_directory`), chunk by chunk, so memory does
not grow with the number of stimuli. The stores are renamed into place only
when every layer is complete.

Extraction and reduction run on one CPU thread
(:func:`neuroflow.features.threads.fixed_threads`), so the stored numbers do not
depend on how many threads the job was given.

The rows and the blocks they are read in are laid out by :mod:`neuroflow.features.rows`;
:mod:`neuroflow.features.writer` writes them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.artifacts import (
    PROVENANCE_KEY,
    atomic_directory,
)
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.events import EVENTS_LAYER, read_event_features
from neuroflow.features.registry import Extractor, check_modality, get_extractor
from neuroflow.features.rows import (
    _canonical_coord,
    _Clip,
    _file_blocks,
    _frame_blocks,
    _frame_layout,
    _Layout,
    _plan_clips,
    _repeat_rows,
    _source_rows,
    _text_blocks,
    _window_blocks,
    _word_layout,
)
from neuroflow.features.threads import fixed_threads
from neuroflow.features.writer import _finalize, _reduce, _RowWriter, _train_rows
from neuroflow.io.files import check_image
from neuroflow.progress import Progress
from neuroflow.stimuli.audio import soundtrack_files
from neuroflow.stimuli.files import (
    content_groups,
    first_row_naming,
    infer_modality,
    read_stimulus_ids,
    resolve_stimulus_files,
)
from neuroflow.stimuli.load import iter_batches
from neuroflow.stimuli.text import read_captions, read_transcript, stimulus_texts, transcript_texts

__all__ = ["extract_features", "output_paths"]


def output_paths(output: Mapping[str, Any] | str | os.PathLike, names: Sequence[str]) -> dict:
    """Store path of each layer.

    Parameters
    ----------
    output : dict of str to path-like | path-like
        Layer name to store path, or a directory that receives ``<layer>.zarr``.
    names : sequence of str
        Layer names (see :func:`neuroflow.features.config.layer_names`).

    Returns
    -------
    paths : dict of str to Path
        One store path per layer, in ``names`` order.
    """
    if isinstance(output, Mapping):
        if set(output) != set(names):
            raise ValueError(
                f"`output` must have one path per layer {list(names)}, got keys {sorted(output)} "
                "instead."
            )
        return {name: Path(output[name]) for name in names}
    folder = Path(output)
    return {name: folder / f"{name}.zarr" for name in names}


def _tables(source: Any) -> list[Path]:
    """The tables among the ``stimulus_ids`` argument of :func:`extract_features`."""
    if isinstance(source, str | os.PathLike):
        return [Path(source)]
    if isinstance(source, Sequence) and all(isinstance(s, os.PathLike) for s in source):
        return [Path(s) for s in source]
    return []


def _choose_modality(
    entry: Mapping[str, Any], ids: Sequence[str], has_captions: bool, tables: Sequence[Path] = ()
) -> str:
    info = get_extractor(entry["extractor"])
    if entry["modality"] != "auto":
        check_modality(info.name, entry["modality"], source="set in the configuration")
        return entry["modality"]
    if info.modalities == ("text",) and has_captions:
        return "text"
    modality = infer_modality(ids, locate=lambda stim: first_row_naming(tables, stim))
    ext = Path(ids[0]).suffix
    check_modality(info.name, modality, source=f"inferred from the stimulus extension {ext!r}")
    return modality


def _check_frame_support(name: str, modality: str) -> None:
    cls = get_extractor(name).cls
    if modality in cls.window_modalities:
        return
    if modality not in ("video", "audio"):
        raise ValueError(
            f"`frame_rate` applies to video stimuli (and to audio stimuli with hf_audio), got "
            f"{modality} stimuli instead; set `frame_rate: null`."
        )
    if modality == "audio":
        raise ValueError(
            f"Extractor {name!r} has no windowed audio features; set `frame_rate: null` or use "
            "hf_audio."
        )
    if not cls.needs_all_frames and cls.extract_frames is Extractor.extract_frames:
        raise ValueError(
            f"Extractor {name!r} has no frame-level features; set `frame_rate: null` or use "
            "hf_vision, hf_video, image_statistics or motion_energy."
        )


def _stimulus_files(stims: Sequence[str], stimuli_dir: Any, modality: str) -> dict[str, Path]:
    """The file each stimulus is read from; a video read as audio is heard from its WAV file."""
    files = resolve_stimulus_files(stims, stimuli_dir)
    return soundtrack_files(files) if modality == "audio" else files


def extract_features(
    *,
    stimuli_dir: str | os.PathLike,
    stimulus_ids: Sequence[str] | str | os.PathLike | Sequence[os.PathLike],
    captions: str | os.PathLike | Mapping[str, str] | None = None,
    output: Mapping[str, str | os.PathLike] | str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    train_ids: Sequence[str] | Sequence[os.PathLike] | None = None,
    stimulus_events: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Extract one extractor's features for every stimulus, one store per layer.

    Parameters
    ----------
    stimuli_dir : path-like
        The dataset's ``stimuli/`` folder; stimulus ids are paths relative to it.
    stimulus_ids : list of str | path-like | list of path-like
        The ids, or TSV file(s) with a ``stim_file`` column (e.g. BIDS
        ``_events.tsv``); see :func:`neuroflow.stimuli.files.read_stimulus_ids`.
        Their order is the store's row order (and the word order for context
        windows). With ``text_source: transcript``, the events tables (word
        events, or events naming transcript ``.tsv`` files) or transcript ids;
        see :func:`neuroflow.stimuli.text.read_transcript`.
    captions : path-like | dict of str to str | None
        ``captions.tsv`` (columns ``stim_file``, ``caption``) or a mapping; the
        text of each stimulus for text extractors (unread with
        ``text_source: transcript``).
    output : dict of str to path-like | path-like
        Layer name to store path, or a directory receiving ``<layer>.zarr``.
        Layer names come from :func:`neuroflow.features.config.layer_names`.
    config : dict
        One entry of ``features.extractors`` (missing keys take defaults).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`; the model
        weights' SHA-256, seed, transforms and reduction are added under
        ``extra.features``.
    train_ids : list of str | list of path-like | None
        Training stimuli, or the events tables of the training runs; required
        for ``reduction.method: pca``, which is fitted on them only.
    stimulus_events : dict | None
        ``dataset.stimulus_events`` (``{"select": {column: [values]},
        "exclude": {column: [values]}}``): events-table rows that
        :func:`neuroflow.io.events.stimulus_mask` rejects are not stimuli and
        are not extracted. ``None``: every row with a ``stim_file``.

    Returns
    -------
    paths : dict of str to Path
        Layer name to store. Each store has variable ``features`` with dims
        ``(stimulus, feature)`` (coordinate ``stimulus``: the ids), and attrs
        ``extractor``, ``model``, ``layer``, ``layer_index``, ``pooling``,
        ``weights``, ``seed``, ``weights_sha256``, ``dtype``, ``modality``,
        ``transforms``, ``reduction``, ``row_unit`` (``"stimulus"``,
        ``"frame"`` or ``"word"``), ``frame_rate``, ``window_s`` and
        ``clip_frames`` (windowed rows of hf_video and hf_audio, else None),
        ``text_source``,
        ``transcript_column`` and the provenance under ``"neuroflow"``. Frame
        rows (``frame_rate`` set; id ``<stim_file>#t=<s>``) carry coordinates
        ``source_stimulus``, ``frame_time`` (s from the clip's start) and
        ``frame_duration`` (s, ``1 / frame_rate`` cut at the clip's end); word
        rows (``text_source: transcript``; id ``<stim_file>#w=<i>``) carry
        ``source_stimulus``, ``word_index``, ``word``, ``word_onset``,
        ``word_duration`` (s) and ``word_event`` (read from word events rather
        than a transcript file). Stores of file stimuli (images, audio, videos,
        frame rows) carry the coordinate ``canonical_stimulus``: the first id
        (in row order) whose file has the same contents (its own id when
        unique); each distinct file is computed once.

        With ``extractor: events`` the one store ``events`` holds, per id
        (the event's ``stim_file``, or its ``events.name_column`` value), the
        share of its events at each level of each categorical column and the
        mean of each numeric column (see :mod:`neuroflow.features.events`);
        coordinate ``feature_name`` on ``feature`` and attribute ``events``
        (the settings).
    """
    entry = fill_entry(config)
    if getattr(get_extractor(entry["extractor"]).cls, "reads_events", False):
        return _extract_events(
            entry=entry,
            tables=stimulus_ids,
            output=output,
            provenance=provenance,
            stimulus_events=stimulus_events,
        )
    clips: list[_Clip] = []
    unique_rows: np.ndarray | None = None
    if entry["text_source"] == "transcript":
        words = read_transcript(
            stimulus_ids,
            stimuli_dir=stimuli_dir,
            column=entry["transcript_column"],
            stimulus_events=stimulus_events,
        )
        modality = "text"
        layout = _word_layout(words)
        texts = transcript_texts(words, context_words=entry["context_words"])
    else:
        caption_map = (
            read_captions(captions) if isinstance(captions, str | os.PathLike) else captions
        )
        stims = read_stimulus_ids(stimulus_ids, stimulus_events=stimulus_events)
        modality = _choose_modality(entry, stims, bool(caption_map), _tables(stimulus_ids))
        layout = _Layout(stims)
        if entry["frame_rate"] is not None:
            _check_frame_support(entry["extractor"], modality)
            files = _stimulus_files(stims, stimuli_dir, modality)
            canonical = content_groups(files)
            clips = _plan_clips(
                stims,
                files,
                canonical,
                float(entry["frame_rate"]),
                float(entry["gabor"]["fps"]),
                modality,
            )
            layout = _frame_layout(clips, canonical)
            unique_rows = _source_rows(layout.coords["canonical_stimulus"][0])
            clips = [c for c in clips if canonical[c.stim] == c.stim]
        elif modality == "text":
            texts = stimulus_texts(
                stims,
                stimuli_dir=stimuli_dir,
                captions=caption_map,
                context_words=entry["context_words"],
            )
        else:
            files = _stimulus_files(stims, stimuli_dir, modality)
            canonical = content_groups(files)
            if modality == "image":
                _check_images(files, canonical)
            layout = _Layout(stims, _canonical_coord(stims, canonical))
            unique_rows = _source_rows([canonical[s] for s in stims])
    ids = layout.ids
    names = layer_names(entry)
    paths = output_paths(output, names)
    reduction = dict(entry["reduction"])
    reduce = reduction["method"] != "none"
    rows_train = (
        _train_rows(ids, train_ids, layout.sources) if reduction["method"] == "pca" else None
    )

    extractor = get_extractor(entry["extractor"]).cls(entry, modality)
    with ExitStack() as stack:
        stack.enter_context(fixed_threads())
        tmps = {name: stack.enter_context(atomic_directory(paths[name])) for name in names}
        targets = dict(tmps)
        if reduce:
            for name in names:
                scratch = stack.enter_context(
                    tempfile.TemporaryDirectory(dir=paths[name].parent, prefix=f".{name}.scratch-")
                )
                targets[name] = Path(scratch) / "raw.zarr"
        dtype = "float32" if reduce else entry["storage_dtype"]
        writers = {
            name: _RowWriter(
                targets[name],
                ids,
                dtype,
                layout.coords,
                feature_names=functools.partial(extractor.feature_names, name),
            )
            for name in names
        }
        if modality == "text":
            # equal texts (with their context) are computed once and get equal rows
            unique_rows = _source_rows(["\x00".join(text) for text in texts])
            first = np.unique(unique_rows, return_index=True)[1]
            blocks = _text_blocks(extractor, [texts[i] for i in first], entry["batch_size"])
        elif clips and modality in extractor.window_modalities:
            blocks = _window_blocks(extractor, clips, entry, modality)
        elif clips:
            blocks = _frame_blocks(extractor, clips, entry)
        else:
            unique = [s for s in ids if canonical[s] == s]
            blocks = _file_blocks(extractor, unique, entry, modality, files)
        if unique_rows is not None and unique_rows.size and unique_rows.max() + 1 < len(ids):
            blocks = _repeat_rows(blocks, unique_rows)
        unit = {"stimulus": "stimuli"}.get(layout.unit, f"{layout.unit}s")
        with Progress(len(ids), f"{entry['name']}: extraction", unit) as progress:
            for features in blocks:
                for name in names:
                    writers[name].write(features[name])
                progress.update(len(features[names[0]]))
        for writer in writers.values():
            writer.close()
        info = extractor.describe()
        reduction_info: dict[str, dict[str, Any]] = {name: {} for name in names}
        if reduce:
            for name in names:
                reduction_info[name] = _reduce(
                    writers[name].array, tmps[name], layout, rows_train, reduction, entry
                )
        for name in names:
            _finalize(
                tmps[name],
                _store_attrs(
                    entry,
                    info,
                    name,
                    modality,
                    reduction,
                    reduction_info[name],
                    train_ids,
                    provenance,
                    layout.unit,
                ),
                {"units": "a.u.", "long_name": f"{entry['name']} {name} features"},
            )
    return paths


def _check_images(files: Mapping[str, Path], canonical: Mapping[str, str]) -> None:
    """Open each distinct image file before any model loads.

    A damaged file then fails the job before any work is done (see
    :func:`neuroflow.io.files.check_image`).
    """
    for stim, path in files.items():
        if canonical[stim] == stim:
            check_image(path, "Stimulus image")


def _store_attrs(
    entry: Mapping[str, Any],
    info: Mapping[str, Any],
    name: str,
    modality: str,
    reduction: Mapping[str, Any],
    reduction_info: Mapping[str, Any],
    train_ids: Sequence[str] | Sequence[os.PathLike] | None,
    provenance: Mapping[str, Any],
    unit: str,
) -> dict[str, Any]:
    layer = dict(info["layers"][name])
    red = dict(reduction)
    if red["method"] != "none":
        red.update(reduction_info)
        if red["method"] == "pca":
            joined = "\n".join(sorted(str(t) for t in train_ids or []))
            red["fit_on"] = "train_ids"
            red["n_train"] = len({str(t) for t in train_ids or []})
            red["train_ids_sha256"] = hashlib.sha256(joined.encode()).hexdigest()
    facts = {
        "feature_set": entry["name"],
        "extractor": info["extractor"],
        "model": info.get("model"),
        "model_path": info.get("model_path"),
        "weights": info.get("weights"),
        "seed": info.get("seed"),
        "weights_sha256": info.get("weights_sha256"),
        "layer": name,
        "layer_index": layer.get("index"),
        "n_blocks": layer.get("n_blocks"),
        "pooling": layer.get("pooling", info.get("pooling")),
        "compute_dtype": info.get("compute_dtype"),
        "dtype": entry["storage_dtype"],
        "modality": modality,
        "context_words": entry["context_words"] if modality == "text" else None,
        "row_unit": unit,
        "frame_rate": entry["frame_rate"] if unit == "frame" else None,
        "window_s": info.get("window_s"),
        "clip_frames": info.get("clip_frames"),
        "text_source": entry["text_source"] if modality == "text" else None,
        "transcript_column": entry["transcript_column"] if unit == "word" else None,
        "transforms": dict(entry["transforms"]) if modality in ("image", "video") else None,
        "reduction": red,
    }
    record = dict(provenance)
    extra = dict(record.get("extra") or {})
    extra["features"] = {**facts, "describe": dict(info)}
    record["extra"] = extra
    return {**facts, PROVENANCE_KEY: record}


def _events_tables(tables: Any) -> list[Path]:
    """The events-table paths given as ``stimulus_ids`` to the events extractor."""
    if isinstance(tables, str | os.PathLike):
        return [Path(tables)]
    if isinstance(tables, Sequence) and tables and all(isinstance(t, os.PathLike) for t in tables):
        return [Path(t) for t in tables]
    raise TypeError(
        "`stimulus_ids` must be one or more events-table paths (path objects) with "
        f"`extractor: events`, got {type(tables).__name__} {tables!r:.80} instead."
    )


def _extract_events(
    *,
    entry: Mapping[str, Any],
    tables: Any,
    output: Mapping[str, str | os.PathLike] | str | os.PathLike,
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None,
) -> dict[str, Path]:
    """Write the store of the ``events`` extractor (see :func:`extract_features`)."""
    ids, names, events = read_event_features(
        _events_tables(tables), entry["events"], stimulus_events=stimulus_events
    )
    extractor = get_extractor(entry["extractor"]).cls(entry, "events")
    extractor.feature_names = list(names)
    paths = output_paths(output, layer_names(entry))
    with atomic_directory(paths[EVENTS_LAYER]) as tmp:
        writer = _RowWriter(
            tmp,
            ids,
            entry["storage_dtype"],
            feature_coords={"feature_name": (np.array(names, dtype=object), {})},
        )
        for start, _ in iter_batches(ids, entry["batch_size"]):
            batch = events[start : start + entry["batch_size"]]
            writer.write(extractor.extract(batch)[EVENTS_LAYER])
        writer.close()
        attrs = _store_attrs(
            entry,
            extractor.describe(),
            EVENTS_LAYER,
            "events",
            entry["reduction"],
            {},
            None,
            provenance,
            "stimulus",
        )
        attrs["events"] = dict(entry["events"])
        _finalize(
            tmp,
            attrs,
            {"units": "a.u.", "long_name": f"{entry['name']} condition codes and modulators"},
        )
    return paths

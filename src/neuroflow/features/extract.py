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
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import (
    PROVENANCE_KEY,
    atomic_directory,
    consolidated_metadata_allowed,
    fixed_width_strings,
    jsonable,
)
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.events import EVENTS_LAYER, read_event_features
from neuroflow.features.registry import Extractor, check_modality, get_extractor
from neuroflow.features.threads import fixed_threads
from neuroflow.features.windows import (
    iter_audio_windows,
    iter_frame_windows,
    window_frame_indices,
)
from neuroflow.io.files import check_image
from neuroflow.progress import Progress
from neuroflow.stimuli.audio import audio_info, soundtrack_files
from neuroflow.stimuli.files import (
    content_groups,
    first_row_naming,
    infer_modality,
    read_stimulus_ids,
    resolve_stimulus_files,
)
from neuroflow.stimuli.load import iter_batches, load_stimulus
from neuroflow.stimuli.text import read_captions, read_transcript, stimulus_texts, transcript_texts
from neuroflow.stimuli.video import (
    frame_id,
    frame_indices,
    frame_times,
    iter_video_frames,
    video_info,
)

__all__ = ["extract_features", "output_paths"]

#: Target size of one chunk of the features array, in bytes.
CHUNK_BYTES = 4 * 2**20
#: Text stimuli are sorted by length within windows of this many batches.
TEXT_WINDOW_BATCHES = 16


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


class _RowWriter:
    """Write rows of a 2-D float array in order, one whole chunk at a time.

    Parameters
    ----------
    path : Path
        Zarr store (created at the first write with the ``stimulus`` and
        ``feature`` coordinates).
    ids : sequence of str
        Stimulus ids (the rows).
    dtype : str
        Storage dtype.
    coords : dict of str to (ndarray, dict) | None
        Further coordinates on the ``stimulus`` dim: values, shape
        ``(n_rows,)``, and attributes.
    feature_coords : dict of str to (ndarray, dict) | None
        Coordinates on the ``feature`` dim: values, shape ``(n_features,)``,
        and attributes.
    feature_names : callable | None
        Called with the row width at the first write; the names it returns (one
        per feature, or None) become the ``feature_name`` coordinate.
    """

    def __init__(
        self,
        path: Path,
        ids: Sequence[str],
        dtype: str,
        coords: Mapping[str, tuple[np.ndarray, dict]] | None = None,
        feature_coords: Mapping[str, tuple[np.ndarray, dict]] | None = None,
        feature_names: Callable[[int], Sequence[str] | None] | None = None,
    ) -> None:
        self.path = path
        self.feature_names = feature_names
        self.ids = list(ids)
        self.coords = dict(coords or {})
        self.feature_coords = dict(feature_coords or {})
        self.dtype = np.dtype(dtype)
        self.array: Any = None
        self.buffer: list[np.ndarray] = []
        self.buffered = 0
        self.written = 0
        self.chunk_rows = 0

    def _create(self, n_features: int) -> None:
        import zarr
        from zarr.codecs import BloscCodec

        names = self.feature_names(n_features) if self.feature_names is not None else None
        if names is not None:
            if len(names) != n_features:
                raise ValueError(
                    f"Feature names must be one per feature ({n_features}), got {len(names)}."
                )
            self.feature_coords["feature_name"] = (np.array(list(names), dtype=object), {})
        coords = xr.Dataset(
            coords={
                "stimulus": ("stimulus", np.array(self.ids, dtype=object)),
                "feature": ("feature", np.arange(n_features)),
                **{
                    name: ("stimulus", values, dict(attrs))
                    for name, (values, attrs) in self.coords.items()
                },
                **{
                    name: ("feature", values, dict(attrs))
                    for name, (values, attrs) in self.feature_coords.items()
                },
            }
        )
        with consolidated_metadata_allowed():
            coords = fixed_width_strings(coords)
            coords.to_zarr(str(self.path), mode="w", zarr_format=3, consolidated=False)
        per_row = max(n_features * self.dtype.itemsize, 1)
        self.chunk_rows = int(min(len(self.ids), max(1, CHUNK_BYTES // per_row)))
        group = zarr.open_group(str(self.path), mode="a")
        self.array = group.create_array(
            "features",
            shape=(len(self.ids), n_features),
            chunks=(self.chunk_rows, n_features),
            dtype=self.dtype,
            dimension_names=["stimulus", "feature"],
            fill_value=np.nan,
            compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
        )

    def write(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows)
        if rows.ndim != 2:
            raise ValueError(f"Feature rows must be 2-D, got shape {rows.shape} instead.")
        if self.array is None:
            self._create(rows.shape[1])
        if rows.shape[1] != self.array.shape[1]:
            raise ValueError(
                f"Every batch must have {self.array.shape[1]} features, got {rows.shape[1]}."
            )
        self.buffer.append(rows.astype(self.dtype, copy=False))
        self.buffered += rows.shape[0]
        if self.buffered >= self.chunk_rows:
            self._flush(final=False)

    def _flush(self, *, final: bool) -> None:
        if not self.buffer:
            return
        block = np.concatenate(self.buffer) if len(self.buffer) > 1 else self.buffer[0]
        n = block.shape[0] if final else (block.shape[0] // self.chunk_rows) * self.chunk_rows
        if n:
            self.array[self.written : self.written + n] = block[:n]
            self.written += n
        rest = block[n:]
        self.buffer = [rest] if rest.shape[0] else []
        self.buffered = rest.shape[0]

    def close(self) -> None:
        self._flush(final=True)
        if self.array is None or self.written != len(self.ids):
            raise RuntimeError(
                f"{self.path}: wrote {self.written} of {len(self.ids)} stimulus rows."
            )


def _row_blocks(n_rows: int, block: int, minimum: int) -> list[tuple[int, int]]:
    edges = [*list(range(0, n_rows, block)), n_rows]
    blocks = list(itertools.pairwise(edges))
    if len(blocks) > 1 and blocks[-1][1] - blocks[-1][0] < minimum:
        blocks[-2] = (blocks[-2][0], blocks[-1][1])
        blocks.pop()
    return blocks


def _fit_reducer(raw: Any, train_rows: np.ndarray, spec: Mapping[str, Any]) -> tuple[Any, dict]:
    n_comp = int(spec["n_components"])
    n_features = raw.shape[1]
    if spec["method"] == "random_projection":
        from sklearn.random_projection import SparseRandomProjection

        reducer = SparseRandomProjection(
            n_components=n_comp, dense_output=True, random_state=int(spec["seed"])
        )
        reducer.fit(np.zeros((1, n_features), dtype=np.float32))
        return reducer, {}
    from sklearn.decomposition import IncrementalPCA

    if n_comp > min(len(train_rows), n_features):
        raise ValueError(
            f"`reduction.n_components` must be at most min(n_train, n_features) = "
            f"{min(len(train_rows), n_features)}, got {n_comp} instead."
        )
    reducer = IncrementalPCA(n_components=n_comp)
    block = max(4 * n_comp, CHUNK_BYTES // max(4 * n_features, 1))
    for start, stop in _row_blocks(len(train_rows), block, n_comp):
        rows = np.sort(train_rows[start:stop])
        reducer.partial_fit(np.asarray(raw.get_orthogonal_selection((rows, slice(None)))))
    info = {"explained_variance_ratio": reducer.explained_variance_ratio_.tolist()}
    return reducer, info


def _train_rows(
    ids: Sequence[str],
    train_ids: Sequence[str] | Sequence[os.PathLike] | None,
    sources: Sequence[str] | None = None,
) -> np.ndarray:
    if train_ids is None:
        raise ValueError(
            "`train_ids` must list the training stimuli when `reduction.method` is 'pca' (the PCA "
            "is fitted on them only), got None instead."
        )
    if train_ids and all(isinstance(t, os.PathLike) for t in train_ids):
        # Events tables of the training runs: their stimuli are the training ids.
        train_ids = read_stimulus_ids(list(train_ids))
    position: dict[str, list[int]] = {stim: [i] for i, stim in enumerate(ids)}
    for i, source in enumerate(sources or []):
        # A frame or word row belongs to the training set when its clip or narrative does.
        position.setdefault(source, []).append(i)
    missing = [t for t in train_ids if t not in position]
    if missing:
        raise ValueError(
            f"`train_ids` must be among the extracted stimuli, got unknown ids {missing[:5]} "
            "instead."
        )
    rows = np.unique([i for t in train_ids for i in position[t]])
    if rows.size == 0:
        raise ValueError("`train_ids` must name at least one stimulus, got none.")
    return rows


def _finalize(path: Path, attrs: Mapping[str, Any], var_attrs: Mapping[str, Any]) -> None:
    import zarr

    from neuroflow.stage_warnings import with_job_warnings

    group = zarr.open_group(str(path), mode="a")
    group.attrs.update(jsonable(with_job_warnings(attrs)))  # + the job's warnings so far
    group["features"].attrs.update(jsonable(dict(var_attrs)))
    with consolidated_metadata_allowed():
        zarr.consolidate_metadata(str(path))


@dataclass(frozen=True)
class _Clip:
    """One video (or sound: ``n_frames`` samples at ``fps`` Hz) sampled at ``frame_rate``."""

    stim: str
    path: Path
    n_frames: int
    fps: float
    times: np.ndarray
    indices: np.ndarray
    durations: np.ndarray


@dataclass(frozen=True)
class _Layout:
    """Row ids of a store, their extra coordinates and the stimulus each row comes from."""

    ids: list[str]
    coords: dict[str, tuple[np.ndarray, dict]] = field(default_factory=dict)
    sources: list[str] | None = None
    unit: str = "stimulus"


def _plan_clips(
    ids: Sequence[str],
    files: Mapping[str, Path],
    canonical: Mapping[str, str],
    rate: float,
    fps: float,
    modality: str = "video",
) -> list[_Clip]:
    """Sampling plan of every clip; a clip identical to an earlier one copies its plan.

    Sounds (``modality`` audio) are planned like videos whose frames are samples.
    """
    planned: dict[str, _Clip] = {}
    clips = []
    for stim in ids:
        first = canonical[stim]
        if first in planned:
            clips.append(replace(planned[first], stim=stim))
            continue
        path = files[stim]
        n_frames, clip_fps = audio_info(path) if modality == "audio" else video_info(path, fps=fps)
        times = frame_times(n_frames, clip_fps, rate)
        durations = np.minimum(1.0 / rate, n_frames / clip_fps - times)
        indices = frame_indices(times, clip_fps, n_frames)
        planned[first] = _Clip(stim, path, n_frames, clip_fps, times, indices, durations)
        clips.append(planned[first])
    return clips


def _frame_layout(clips: Sequence[_Clip], canonical: Mapping[str, str]) -> _Layout:
    ids = [frame_id(c.stim, t) for c in clips for t in c.times]
    if len(set(ids)) != len(ids):
        raise ValueError(
            "`frame_rate` must give distinct frame times at 3 decimals (ms), got duplicate "
            "frame ids instead; lower `frame_rate`."
        )
    sources = [c.stim for c in clips for _ in c.times]
    firsts = [frame_id(canonical[c.stim], t) for c in clips for t in c.times]
    coords = {
        "source_stimulus": (np.array(sources, dtype=object), {}),
        "frame_time": (np.concatenate([c.times for c in clips]), {"units": "s"}),
        "frame_duration": (np.concatenate([c.durations for c in clips]), {"units": "s"}),
        "canonical_stimulus": (np.array(firsts, dtype=object), {}),
    }
    return _Layout(ids, coords, sources, "frame")


def _canonical_coord(ids: Sequence[str], canonical: Mapping[str, str]) -> dict:
    """The ``canonical_stimulus`` coordinate of per-stimulus rows."""
    return {"canonical_stimulus": (np.array([canonical[s] for s in ids], dtype=object), {})}


def _source_rows(row_keys: Sequence[str]) -> np.ndarray:
    """Index of the computed row behind each store row.

    ``row_keys`` names, for each store row, the row whose features it takes
    (its own id, or the matching row of the first identical file); only the
    first occurrence of each key is computed, in order.
    """
    computed: dict[str, int] = {}
    return np.array([computed.setdefault(k, len(computed)) for k in row_keys], dtype=int)


def _repeat_rows(
    blocks: Iterator[dict[str, np.ndarray]], source: np.ndarray
) -> Iterator[dict[str, np.ndarray]]:
    """Expand blocks of computed rows into store rows, repeating rows of identical files.

    Parameters
    ----------
    blocks : iterator of dict of str to ndarray, shape (n_batch, n_features)
        Computed rows in order (``source.max() + 1`` in all).
    source : ndarray of int, shape (n_rows,)
        Computed row of each store row (see :func:`_source_rows`); the first
        occurrences are increasing.

    Yields
    ------
    features : dict of str to ndarray, shape (n_out, n_features)
        Store rows in order. Only rows needed again later are kept in memory.
    """
    last_use = np.zeros(int(source.max()) + 1 if source.size else 0, dtype=int)
    last_use[source] = np.arange(source.size)
    kept: dict[int, dict[str, np.ndarray]] = {}
    done = 0  # computed rows received
    position = 0  # store rows yielded
    for block in blocks:
        n = len(next(iter(block.values())))
        for k in range(n):
            kept[done + k] = {name: rows[k] for name, rows in block.items()}
        done += n
        out: list[dict[str, np.ndarray]] = []
        while position < source.size and source[position] < done:
            row = source[position]
            out.append(kept[row])
            if last_use[row] == position:
                del kept[row]
            position += 1
        if out:
            yield {name: np.stack([r[name] for r in out]) for name in out[0]}
    if position != source.size:
        raise RuntimeError(f"Computed features for {position} of {source.size} stimulus rows.")


def _word_layout(words: Any) -> _Layout:
    coords = {
        "source_stimulus": (words["source_stimulus"].to_numpy(dtype=object), {}),
        "word_index": (words["word_index"].to_numpy(dtype=int), {}),
        "word": (words["word"].to_numpy(dtype=object), {}),
        "word_onset": (words["word_onset"].to_numpy(dtype=float), {"units": "s"}),
        "word_duration": (words["word_duration"].to_numpy(dtype=float), {"units": "s"}),
        "word_event": (words["word_event"].to_numpy(dtype=bool), {}),
    }
    sources = words["source_stimulus"].tolist()
    return _Layout(words["stimulus"].tolist(), coords, sources, "word")


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
            blocks = _text_blocks(extractor, texts, entry["batch_size"])
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


def _file_blocks(
    extractor: Any,
    ids: Sequence[str],
    entry: Mapping[str, Any],
    modality: str,
    files: Mapping[str, Path],
) -> Iterator[dict[str, np.ndarray]]:
    """Features of consecutive batches of file stimuli, loaded batch by batch."""
    for _, batch_ids in iter_batches(ids, entry["batch_size"]):
        batch = [
            load_stimulus(
                stim,
                modality=modality,
                stimuli_dir=files[stim].parent,
                transforms=entry["transforms"],
                fps=float(entry["gabor"]["fps"]),
                path=files[stim],
            )
            for stim in batch_ids
        ]
        yield extractor.extract(batch)


def _frame_blocks(
    extractor: Any, clips: Sequence[_Clip], entry: Mapping[str, Any]
) -> Iterator[dict[str, np.ndarray]]:
    """Features of the sampled frames, clip by clip or in batches of frames across clips.

    Frames are decoded one at a time, so memory does not grow with a clip's length;
    extractors with ``needs_all_frames`` see every frame of one clip at a time.
    """
    transforms = entry["transforms"]
    if extractor.needs_all_frames:
        for clip in clips:
            frames = iter_video_frames(clip.path, np.arange(clip.n_frames), transforms=transforms)
            yield extractor.extract_clip(frames, fps=clip.fps, indices=clip.indices)
        return
    batch: list[np.ndarray] = []
    for clip in clips:
        for frame in iter_video_frames(clip.path, clip.indices, transforms=transforms):
            batch.append(frame)
            if len(batch) == entry["batch_size"]:
                yield extractor.extract_frames(batch)
                batch = []
    if batch:
        yield extractor.extract_frames(batch)


def _clip_windows(
    extractor: Any, clip: _Clip, entry: Mapping[str, Any], modality: str
) -> Iterator[Any]:
    """The windows before the sampled times of one clip (see :mod:`neuroflow.features.windows`)."""
    window_s = float(entry["window_s"])
    if modality == "audio":
        return iter_audio_windows(
            clip.path, clip.times, window_s=window_s, sfreq=clip.fps, n_samples=clip.n_frames
        )
    indices = window_frame_indices(
        clip.times,
        window_s=window_s,
        n_frames=extractor.window_length(),
        fps=clip.fps,
        n_video_frames=clip.n_frames,
    )
    return iter_frame_windows(
        clip.path, indices, transforms=entry["transforms"], prepare=extractor.prepare_frame
    )


def _window_blocks(
    extractor: Any, clips: Sequence[_Clip], entry: Mapping[str, Any], modality: str
) -> Iterator[dict[str, np.ndarray]]:
    """Features of the windows before the sampled times, in batches of ``batch_size`` windows.

    Windows are read clip by clip as they are needed, so memory holds one batch of
    windows (and, for videos, the decoded frames those windows share).
    """
    batch: list[Any] = []
    for clip in clips:
        for window in _clip_windows(extractor, clip, entry, modality):
            batch.append(window)
            if len(batch) == entry["batch_size"]:
                yield extractor.extract_windows(batch)
                batch = []
    if batch:
        yield extractor.extract_windows(batch)


def _text_blocks(
    extractor: Any, texts: Sequence[tuple[str, str]], batch_size: int
) -> Iterator[dict[str, np.ndarray]]:
    """Features of consecutive windows of texts, batched by length inside each window.

    Sorting a window of ``TEXT_WINDOW_BATCHES`` batches by length before batching
    (as sentence-transformers' ``encode`` does for its whole input) cuts padding;
    rows are put back in input order before they are yielded.
    """
    window = batch_size * TEXT_WINDOW_BATCHES
    for w_start in range(0, len(texts), window):
        chunk = texts[w_start : w_start + window]
        order = np.argsort([-(len(c) + len(t)) for c, t in chunk], kind="stable")
        parts: dict[str, list[np.ndarray]] = {}
        for b_start in range(0, len(order), batch_size):
            picked = order[b_start : b_start + batch_size]
            for name, rows in extractor.extract([chunk[i] for i in picked]).items():
                parts.setdefault(name, []).append(np.asarray(rows))
        inverse = np.argsort(order, kind="stable")
        yield {name: np.concatenate(rows)[inverse] for name, rows in parts.items()}


def _reduce(
    raw: Any,
    path: Path,
    layout: _Layout,
    rows_train: np.ndarray | None,
    reduction: Mapping[str, Any],
    entry: Mapping[str, Any],
) -> dict[str, Any]:
    rows_fit = rows_train if rows_train is not None else np.arange(raw.shape[0])
    reducer, info = _fit_reducer(raw, rows_fit, reduction)
    writer = _RowWriter(path, layout.ids, entry["storage_dtype"], layout.coords)
    block = max(1, CHUNK_BYTES // max(4 * raw.shape[1], 1))
    for start in range(0, raw.shape[0], block):
        chunk = np.asarray(raw[start : start + block], dtype=np.float32)
        writer.write(reducer.transform(chunk).astype(np.float32))
    writer.close()
    return {"n_features_in": int(raw.shape[1]), **info}


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

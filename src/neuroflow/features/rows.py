"""The rows of a feature store and the blocks they are read in.

A row is a stimulus, a sampled video frame (``<stim_file>#t=<s>``), a window before a
sampled time of a video or a sound, or a transcript word (``<stim_file>#w=<i>``); a
:class:`_Layout` holds their ids and coordinates, and the block generators read the
stimuli (files, frames, windows, text) a batch at a time in row order for
:func:`neuroflow.features.extract.extract_features`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.features.windows import (
    iter_audio_windows,
    iter_frame_windows,
    window_frame_indices,
)
from neuroflow.stimuli.audio import audio_info
from neuroflow.stimuli.load import iter_batches, load_stimulus
from neuroflow.stimuli.video import (
    frame_id,
    frame_indices,
    frame_times,
    iter_video_frames,
    video_info,
)

__all__ = ["TEXT_WINDOW_BATCHES"]


#: Text stimuli are sorted by length within windows of this many batches.
TEXT_WINDOW_BATCHES = 16


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

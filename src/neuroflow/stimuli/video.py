"""Stimulus videos: reading them, their sampled frames and the ids of those frames.

A video is a :class:`Video` (frames ``(n_frames, H, W, 3)`` float32 in [0, 1] and
fps), read whole (:func:`load_video`) or streamed frame by frame
(:func:`iter_video_frames`). A video sampled at ``frame_rate`` gives one row per
sampled frame, id ``<stim_file>#t=<seconds>`` (:func:`frame_id`,
:func:`frame_times`, :func:`frame_indices`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.extras import require
from neuroflow.stimuli.image import apply_transforms

__all__ = [
    "Video",
    "evenly_spaced",
    "frame_id",
    "frame_indices",
    "frame_times",
    "iter_video_frames",
    "load_video",
    "video_info",
]


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
        See :func:`neuroflow.stimuli.image.apply_transforms`.

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

"""Windows of video frames and audio samples behind time-continuous feature rows.

With ``frame_rate`` set, extractors that read a window of the stimulus
(``hf_video`` on videos, ``hf_audio`` on audio) give one row per sampled time
``t`` (see :func:`neuroflow.stimuli.video.frame_times`), computed from the
``window_s`` seconds before it, ``[t - window_s, t]``:

- a video row reads ``clip_frames`` frames at times evenly spaced over the
  window, the last at ``t`` (:func:`window_frame_times`); a time before the
  video's start shows its first frame (the window is clamped by repeating the
  first frame). Frames are decoded once, in order, and only the frames of the
  windows in flight are kept (:func:`iter_frame_windows`).
- an audio row reads the ``round(window_s * sfreq)`` samples ending at ``t``
  (:func:`audio_window_bounds`); samples before the sound's start are zeros
  (the window is zero-padded, i.e. silence before the onset), so every window
  has the same length. Samples are read from the memory-mapped WAV file window
  by window (:func:`iter_audio_windows`).

Memory therefore grows with the batch of windows, not with the stimulus's length.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from neuroflow.stimuli.audio import Audio, iter_audio_segments
from neuroflow.stimuli.video import frame_indices, iter_video_frames

__all__ = [
    "audio_window_bounds",
    "iter_audio_windows",
    "iter_frame_windows",
    "window_frame_indices",
    "window_frame_times",
]


def window_frame_times(times: np.ndarray, window_s: float, n_frames: int) -> np.ndarray:
    """Times of the frames of each window: evenly spaced over ``[t - window_s, t]``.

    Parameters
    ----------
    times : ndarray, shape (n_samples,)
        Window ends ``t`` in s from the stimulus's start.
    window_s : float
        Window length in s.
    n_frames : int
        Frames per window; one frame is the frame at ``t``.

    Returns
    -------
    frame_times : ndarray, shape (n_samples, n_frames)
        ``t - window_s * (n_frames - 1 - j) / (n_frames - 1)`` for frame ``j``
        (the first at ``t - window_s``, the last at ``t``); may be negative.
    """
    if n_frames < 1:
        raise ValueError(f"`clip_frames` must be a positive int, got {n_frames} instead.")
    steps = np.arange(n_frames, dtype=float) - (n_frames - 1)
    offsets = float(window_s) * steps / max(n_frames - 1, 1)
    return np.asarray(times, dtype=float)[:, None] + offsets[None, :]


def window_frame_indices(
    times: np.ndarray, *, window_s: float, n_frames: int, fps: float, n_video_frames: int
) -> np.ndarray:
    """Video frame shown at each frame time of each window, clamped at the video's start.

    Parameters
    ----------
    times : ndarray, shape (n_samples,)
        Window ends in s (non-decreasing).
    window_s : float
        Window length in s.
    n_frames : int
        Frames per window.
    fps : float
        The video's frame rate.
    n_video_frames : int
        Frames in the video.

    Returns
    -------
    indices : ndarray of int, shape (n_samples, n_frames)
        Frame indices (see :func:`neuroflow.stimuli.video.frame_indices`);
        times before the start give frame 0. Non-decreasing along both axes.
    """
    wanted = window_frame_times(times, window_s, n_frames)
    flat = frame_indices(wanted.ravel(), fps, n_video_frames)
    return flat.reshape(wanted.shape)


def iter_frame_windows(
    path: str | os.PathLike,
    indices: np.ndarray,
    *,
    transforms: Mapping[str, Any],
    prepare: Callable[[np.ndarray], np.ndarray],
) -> Iterator[np.ndarray]:
    """Stream the frame windows of one video, decoding each needed frame once.

    Parameters
    ----------
    path : path-like
        A video file OpenCV reads, or a ``.npy`` frame stack.
    indices : ndarray of int, shape (n_samples, n_frames)
        Frames of each window (see :func:`window_frame_indices`), non-decreasing
        along both axes.
    transforms : dict
        Image transforms (see :func:`neuroflow.stimuli.image.apply_transforms`).
    prepare : callable
        Maps one transformed frame, float32 ``(H, W, 3)`` in [0, 1], to the
        model's input frame (e.g. resized and normalised ``(3, h, w)``); called
        once per distinct frame.

    Yields
    ------
    window : ndarray, shape (n_frames, ...)
        The prepared frames of each window, in order. Only frames of the current
        window are kept between windows.
    """
    indices = np.asarray(indices, dtype=int)
    if indices.ndim != 2 or indices.shape[0] == 0:
        return
    needed = np.unique(indices)
    frames = iter_video_frames(path, needed, transforms=transforms)
    kept: dict[int, np.ndarray] = {}
    position = 0
    for k, row in enumerate(indices):
        while position < needed.size and needed[position] <= row[-1]:
            kept[int(needed[position])] = prepare(next(frames))
            position += 1
        yield np.stack([kept[int(i)] for i in row])
        if k + 1 < indices.shape[0]:
            oldest = int(indices[k + 1].min())
            for i in [i for i in kept if i < oldest]:
                del kept[i]


def audio_window_bounds(
    times: np.ndarray, *, window_s: float, sfreq: float, n_samples: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sample bounds ``[start, stop)`` of the window ending at each time.

    Parameters
    ----------
    times : ndarray, shape (n_samples_out,)
        Window ends in s.
    window_s : float
        Window length in s.
    sfreq : float
        The sound's sampling rate in Hz.
    n_samples : int
        Samples in the sound (``stop`` is cut there).

    Returns
    -------
    starts, stops : ndarray of int, shape (n_samples_out,)
        ``stop = round(t * sfreq)`` and ``start = stop - round(window_s * sfreq)``;
        ``start`` is negative for windows that begin before the sound (those
        samples are zeros).
    """
    length = max(1, round(float(window_s) * float(sfreq)))
    stops = np.minimum(np.round(np.asarray(times, float) * float(sfreq)).astype(int), n_samples)
    return stops - length, stops


def iter_audio_windows(
    path: str | os.PathLike, times: np.ndarray, *, window_s: float, sfreq: float, n_samples: int
) -> Iterator[Audio]:
    """Stream the audio windows of one WAV file, zero-padded before its start.

    Parameters
    ----------
    path : path-like
        PCM or float WAV.
    times : ndarray, shape (n_windows,)
        Window ends in s.
    window_s : float
        Window length in s.
    sfreq : float
        The file's sampling rate in Hz.
    n_samples : int
        Samples in the file.

    Yields
    ------
    window : Audio
        ``round(window_s * sfreq)`` mono float32 samples at ``sfreq``.
    """
    starts, stops = audio_window_bounds(times, window_s=window_s, sfreq=sfreq, n_samples=n_samples)
    yield from iter_audio_segments(path, starts, stops)

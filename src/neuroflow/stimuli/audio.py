"""Stimulus sounds: reading WAV files, their segments and resampling.

A sound is an :class:`Audio` (mono float32 waveform and sampling rate), read whole
(:func:`load_audio`) or by segments (:func:`iter_audio_segments`); a video is heard
from the WAV file of the same name (:func:`soundtrack_files`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuroflow.stimuli.files import VIDEO_EXTENSIONS

__all__ = [
    "Audio",
    "audio_info",
    "iter_audio_segments",
    "load_audio",
    "resample_audio",
    "soundtrack_files",
]


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
        Stimulus id to file (see :func:`neuroflow.stimuli.files.resolve_stimulus_files`).

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

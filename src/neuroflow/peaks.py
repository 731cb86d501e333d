"""Peaks of EEG time courses, searched at and after the stimulus onset only.

An EEG epoch starts before the stimulus (the baseline); a score, similarity or TRF
power that is largest there says nothing about the stimulus's processing (noise, or
an artefact of the baseline correction), so a reported peak latency is never negative:
every EEG peak search of the package (encoding courses, TRF power, decoding courses,
RSA time courses and model time x brain time maps) takes its maximum over the times
``>= 0`` (:data:`ONSET_TOLERANCE` absorbs rounding of a sampled zero).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ONSET_TOLERANCE", "peak_index", "peak_latency", "post_stimulus"]

#: Times down to ``-ONSET_TOLERANCE`` s count as the onset (a sampled 0 s may be -1e-12).
ONSET_TOLERANCE = 1e-9


def post_stimulus(times: np.ndarray) -> np.ndarray:
    """Which times are at or after the stimulus onset.

    Parameters
    ----------
    times : array-like, shape (n_times,)
        Seconds from the stimulus onset.

    Returns
    -------
    mask : ndarray of bool, shape (n_times,)
    """
    return np.asarray(times, dtype=np.float64) >= -ONSET_TOLERANCE


def peak_index(values: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Index of the largest finite value at or after the onset, along the last axis.

    Parameters
    ----------
    values : array-like, shape (..., n_times)
        Courses (NaN ignored).
    times : array-like, shape (n_times,)
        Seconds from the stimulus onset of each column.

    Returns
    -------
    index : ndarray of int, shape (...)
        -1 where a course has no finite value at a time ``>= 0``; a 0-d array for one
        course (``int(...)`` gives the number).
    """
    values = np.asarray(values, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or values.shape[-1:] != times.shape:
        raise ValueError(
            f"`times` must have shape ({values.shape[-1] if values.ndim else 0},) like the "
            f"last axis of `values` {values.shape}, got {times.shape} instead."
        )
    usable = np.isfinite(values) & post_stimulus(times)
    ranked = np.where(usable, values, -np.inf)
    return np.where(usable.any(axis=-1), ranked.argmax(axis=-1), -1)


def peak_latency(values: np.ndarray, times: np.ndarray) -> float:
    """Latency (s) of the largest finite value of one course at or after the onset.

    Parameters
    ----------
    values : array-like, shape (n_times,)
        One course (NaN ignored).
    times : array-like, shape (n_times,)
        Seconds from the stimulus onset.

    Returns
    -------
    latency : float
        NaN when the course has no finite value at a time ``>= 0``.
    """
    k = int(peak_index(values, times))
    return float(np.asarray(times, dtype=np.float64)[k]) if k >= 0 else float("nan")

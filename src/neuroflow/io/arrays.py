"""Coordinate arrays that readers and stages give the stores they write."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["repeat_index", "string_array"]


def string_array(values: Iterable[object]) -> np.ndarray:
    """Variable-length strings (the zarr v3 ``string`` data type).

    Parameters
    ----------
    values : iterable, shape (n,)
        Any values; each is converted with :class:`str`.

    Returns
    -------
    strings : ndarray of StringDType, shape (n,)
    """
    return np.array([str(v) for v in values], dtype=np.dtypes.StringDType())


def repeat_index(stimuli: np.ndarray) -> np.ndarray:
    """How many times each trial's stimulus was shown before it.

    Parameters
    ----------
    stimuli : ndarray of str, shape (n_trials,)
        Stimulus id of each trial, ``""`` for a trial without one.

    Returns
    -------
    repeat : ndarray of int64, shape (n_trials,)
        0 for a stimulus's first trial, 1 for its second, ...; -1 without a stimulus.
    """
    out = np.full(len(stimuli), -1, np.int64)
    seen: dict[str, int] = {}
    for t, s in enumerate(stimuli):
        if s:
            out[t] = seen.get(s, 0)
            seen[s] = out[t] + 1
    return out

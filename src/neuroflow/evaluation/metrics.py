"""Per-target prediction scores, vectorised over targets.

Every function takes arrays shaped ``(..., n_times, n_targets)``: the second to
last axis is the sample axis over which a score is computed, the last axis
indexes targets (voxels, or channels × time points for EEG), and any leading
axes (repeats, folds, subjects) broadcast. Scores are returned with the sample
axis removed, ``(..., n_targets)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_time_target", "pearson_r", "r2_score", "zscore_time"]


def check_time_target(name: str, array: np.ndarray, *, min_times: int = 2) -> np.ndarray:
    """Check that ``array`` is at least 2-D with enough samples.

    Parameters
    ----------
    name : str
        Name used in the error message.
    array : array-like, shape (..., n_times, n_targets)
        Data to check.
    min_times : int
        Minimum number of samples along the time axis.

    Returns
    -------
    array : ndarray, shape (..., n_times, n_targets)
        The data as a floating-point array.
    """
    array = np.asarray(array)
    if array.ndim < 2:
        raise ValueError(
            f"`{name}` must have shape (..., n_times, n_targets), got shape {array.shape} instead."
        )
    if array.shape[-2] < min_times:
        raise ValueError(
            f"`{name}` must have at least {min_times} time points, got {array.shape[-2]} instead."
        )
    if array.dtype.kind not in "fc":
        array = array.astype(np.float64)
    return array


def zscore_time(y: np.ndarray) -> np.ndarray:
    """Standardise every target over time (mean 0, population SD 1).

    Parameters
    ----------
    y : array-like, shape (..., n_times, n_targets)
        Data.

    Returns
    -------
    z : ndarray of float64, shape (..., n_times, n_targets)
        Standardised data; constant targets are all zero.
    """
    y = np.asarray(y, dtype=np.float64)
    centred = y - y.mean(axis=-2, keepdims=True)
    sd = np.sqrt((centred**2).mean(axis=-2, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, centred / np.where(sd > 0, sd, 1.0), 0.0)
    return z


def _broadcast_pair(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y_true = check_time_target("y_true", y_true)
    y_pred = check_time_target("y_pred", y_pred)
    try:
        shape = np.broadcast_shapes(y_true.shape, y_pred.shape)
    except ValueError:
        raise ValueError(
            "`y_true` and `y_pred` must have broadcastable shapes (..., n_times, n_targets), "
            f"got {y_true.shape} and {y_pred.shape} instead."
        ) from None
    if shape[-2:] != y_true.shape[-2:] or shape[-2:] != y_pred.shape[-2:]:
        raise ValueError(
            "`y_true` and `y_pred` must have the same (n_times, n_targets), "
            f"got {y_true.shape[-2:]} and {y_pred.shape[-2:]} instead."
        )
    return y_true, y_pred


def pearson_r(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Pearson correlation between observed and predicted time courses, per target.

    Parameters
    ----------
    y_true : array-like, shape (..., n_times, n_targets)
        Observed responses.
    y_pred : array-like, shape (..., n_times, n_targets)
        Predictions; leading axes broadcast against ``y_true`` (e.g. one
        prediction against every repeat of shape ``(n_repeats, n_times, n_targets)``).

    Returns
    -------
    r : ndarray of float64, shape (..., n_targets)
        Correlation per target; NaN where either time course is constant.
    """
    y_true, y_pred = _broadcast_pair(y_true, y_pred)
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    t = t - t.mean(axis=-2, keepdims=True)
    p = p - p.mean(axis=-2, keepdims=True)
    num = (t * p).sum(axis=-2)
    den = np.sqrt((t**2).sum(axis=-2) * (p**2).sum(axis=-2))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def r2_score(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Coefficient of determination per target, ``1 - SS_res / SS_tot``.

    Parameters
    ----------
    y_true : array-like, shape (..., n_times, n_targets)
        Observed responses.
    y_pred : array-like, shape (..., n_times, n_targets)
        Predictions; leading axes broadcast against ``y_true``.

    Returns
    -------
    r2 : ndarray of float64, shape (..., n_targets)
        Equal to :func:`sklearn.metrics.r2_score` with
        ``multioutput="raw_values"``; NaN where ``y_true`` is constant. Can be
        negative for predictions worse than the mean.
    """
    y_true, y_pred = _broadcast_pair(y_true, y_pred)
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    ss_res = ((t - p) ** 2).sum(axis=-2)
    ss_tot = ((t - t.mean(axis=-2, keepdims=True)) ** 2).sum(axis=-2)
    ss_res, ss_tot = np.broadcast_arrays(ss_res, ss_tot)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ss_tot > 0, 1.0 - ss_res / np.where(ss_tot > 0, ss_tot, 1.0), np.nan)

"""Decoding stimulus features from brain responses with the ridge solver.

Brain responses (EEG epochs flattened over channels × a time window, or fMRI trial
responses) are the regressors; every stimulus feature is a target with its own
penalty, chosen by :func:`neuroflow.models.ridge.ridge_cv` on group-respecting folds
(runs, sessions, or stimuli so that repeats of one stimulus never straddle a fold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from neuroflow.models.cv import run_splits
from neuroflow.models.ridge import ridge_cv

__all__ = [
    "FeatureDecoder",
    "bin_window",
    "fit_feature_decoder",
    "flatten_window",
    "zscore_features",
]


@dataclass
class FeatureDecoder:
    """A fitted brain-to-features ridge decoder.

    Attributes
    ----------
    coef : ndarray, shape (n_brain, n_features)
        Weights on standardised brain responses.
    x_mean, x_scale : ndarray, shape (n_brain,)
        Training mean and standard deviation of the brain responses.
    y_mean : ndarray, shape (n_features,)
        Training mean of the features.
    best_alpha : ndarray, shape (n_features,)
        Penalty chosen per feature.
    cv_score : ndarray, shape (n_features,)
        Cross-validated Pearson r per feature at the chosen penalty.
    """

    coef: np.ndarray
    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: np.ndarray
    best_alpha: np.ndarray
    cv_score: np.ndarray

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predict features.

        Parameters
        ----------
        X : array-like, shape (n_items, n_brain)
            Brain responses.

        Returns
        -------
        Y : ndarray of float64, shape (n_items, n_features)
        """
        X = (np.asarray(X, dtype=np.float64) - self.x_mean) / self.x_scale
        return X @ self.coef.astype(np.float64) + self.y_mean


def flatten_window(
    epochs: np.ndarray, times: np.ndarray, window: Sequence[float] | None
) -> np.ndarray:
    """Flatten EEG epochs over channels × the time points of a window.

    Parameters
    ----------
    epochs : array-like, shape (n_epochs, n_channels, n_times)
        Epoched data.
    times : array-like, shape (n_times,)
        Epoch time of every sample (s).
    window : (float, float) | None
        Inclusive ``[tmin, tmax]`` in s; ``None`` keeps every sample.

    Returns
    -------
    X : ndarray, shape (n_epochs, n_channels * n_window_times)
        Channel-major flattening.
    """
    epochs = np.asarray(epochs)
    times = np.asarray(times, dtype=np.float64)
    if epochs.ndim != 3 or epochs.shape[2] != times.shape[0]:
        raise ValueError(
            f"`epochs` must have shape (n_epochs, n_channels, {times.shape[0]}), "
            f"got {epochs.shape} instead."
        )
    if window is None:
        keep = np.ones(times.shape, bool)
    else:
        tmin, tmax = (float(w) for w in window)
        keep = (times >= tmin - 1e-9) & (times <= tmax + 1e-9)
        if not keep.any():
            raise ValueError(
                f"`window` must overlap the epoch times [{times[0]:g}, {times[-1]:g}] s, "
                f"got {list(window)} instead."
            )
    return epochs[:, :, keep].reshape(epochs.shape[0], -1)


def bin_window(
    epochs: np.ndarray,
    times: np.ndarray,
    window: Sequence[float] | None,
    bin_width: float | None,
) -> np.ndarray:
    """Average EEG epochs in consecutive time bins of a window, then flatten.

    Parameters
    ----------
    epochs : array-like, shape (n_epochs, n_channels, n_times)
        Epoched data.
    times : array-like, shape (n_times,)
        Epoch time of every sample (s).
    window : (float, float) | None
        Inclusive ``[tmin, tmax]`` in s; ``None`` keeps every sample.
    bin_width : float | None
        Bin width (s); bins start at ``tmin`` and a last partial bin is kept. ``None``
        keeps every sample (as :func:`flatten_window`).

    Returns
    -------
    X : ndarray, shape (n_epochs, n_channels * n_bins)
        Channel-major flattening of the bin means.
    """
    if bin_width is None:
        return flatten_window(epochs, times, window)
    if isinstance(bin_width, bool) or not isinstance(bin_width, int | float) or bin_width <= 0:
        raise ValueError(
            f"`bin_width` must be a positive float or None, got {bin_width!r} instead."
        )
    times = np.asarray(times, dtype=np.float64)
    flat = flatten_window(epochs, times, window)
    keep = np.ones(times.shape, bool)
    if window is not None:
        keep = (times >= float(window[0]) - 1e-9) & (times <= float(window[1]) + 1e-9)
    t = times[keep]
    # bins holding no sample (bins narrower than the sampling step) are skipped
    _, bins = np.unique(np.floor((t - t[0]) / float(bin_width) + 1e-9), return_inverse=True)
    n_bins = int(bins.max()) + 1
    counts = np.bincount(bins, minlength=n_bins)
    data = flat.reshape(flat.shape[0], -1, t.size)
    sums = np.zeros((data.shape[0], data.shape[1], n_bins))
    np.add.at(sums, (slice(None), slice(None), bins), data)
    return (sums / counts).reshape(flat.shape[0], -1)


def zscore_features(F: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Z-score every feature with the mean and SD of a reference set of stimuli.

    Parameters
    ----------
    F : array-like, shape (n_items, n_features)
        Features to scale.
    reference : array-like, shape (n_stimuli, n_features)
        Features of the stimuli whose statistics are used (e.g. the training stimuli,
        each once); constant features are centred only.

    Returns
    -------
    Z : ndarray of float64, shape (n_items, n_features)
    """
    F = np.asarray(F, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if F.ndim != 2 or reference.ndim != 2 or F.shape[1] != reference.shape[1]:
        raise ValueError(
            "`F` and `reference` must be 2-D with the same number of features, "
            f"got {F.shape} and {reference.shape} instead."
        )
    sd = reference.std(axis=0)
    return (F - reference.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def fit_feature_decoder(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    groups: Sequence[object] | np.ndarray,
    alphas: Sequence[float],
    n_splits: int | None = 5,
    device: str | None = None,
) -> FeatureDecoder:
    """Fit a ridge decoder from brain responses to stimulus features.

    Parameters
    ----------
    X : array-like, shape (n_items, n_brain)
        Brain responses of the training items.
    Y : array-like, shape (n_items, n_features)
        Features of the stimulus of each item.
    groups : array-like, shape (n_items,)
        CV groups (run, session or stimulus); validation folds hold whole groups.
    alphas : sequence of float
        Candidate penalties.
    n_splits : int | None
        Grouped folds, or ``None`` for leave-one-group-out; clipped to the number of
        groups.
    device : str | None
        Passed to :func:`~neuroflow.models.ridge.ridge_cv`.

    Returns
    -------
    decoder : FeatureDecoder
        Weights and preprocessing statistics.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(
            "`X` and `Y` must be 2-D with the same number of rows, "
            f"got {X.shape} and {Y.shape} instead."
        )
    groups = np.asarray(groups)
    n_groups = np.unique(groups).size
    splits = run_splits(groups, None if n_splits is None else min(int(n_splits), n_groups))
    x_mean, x_scale = X.mean(axis=0), X.std(axis=0)
    x_scale = np.where(x_scale > 0, x_scale, 1.0)
    y_mean = Y.mean(axis=0)
    result = ridge_cv(
        (X - x_mean) / x_scale,
        Y - y_mean,
        alphas=alphas,
        splits=splits,
        scoring="pearson",
        device=device,
    )
    return FeatureDecoder(
        coef=np.asarray(result.coef, dtype=np.float64),
        x_mean=x_mean,
        x_scale=x_scale,
        y_mean=y_mean,
        best_alpha=np.asarray(result.best_alpha),
        cv_score=np.asarray(result.cv_score),
    )

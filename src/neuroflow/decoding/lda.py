"""Shrinkage LDA solved for every time point at once.

:func:`sliding_lda_scores` reproduces, in closed form and batched over time points,
what :class:`mne.decoding.SlidingEstimator` (or
:class:`~mne.decoding.GeneralizingEstimator`) gives with the pipeline of
:func:`~neuroflow.decoding.classification.make_classifier` ``("lda")``: a
``StandardScaler`` fitted on the training fold, then
``LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")``, scored by balanced
accuracy. As in scikit-learn, each class covariance is estimated by Ledoit-Wolf on the
class's standardised data and rescaled, and the pooled covariance weights them by the
class priors. The permutation null of the time-resolved cluster tests refits this
model hundreds of times; solving all time points with batched matrix products instead
of one scikit-learn fit per time point is what makes that affordable.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ledoit_wolf_batched", "sliding_lda_scores"]


def _scale(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation (``ddof=0``, zeros replaced by 1) along ``axis``."""
    mean = x.mean(axis=axis, keepdims=True)
    sd = x.std(axis=axis, keepdims=True)
    return mean, np.where(sd > 0, sd, 1.0)


def ledoit_wolf_batched(x: np.ndarray) -> np.ndarray:
    """Ledoit-Wolf covariance of standardised data, rescaled, for a batch of data sets.

    Equals scikit-learn's LDA covariance estimate with ``shrinkage="auto"`` (standardise,
    :func:`sklearn.covariance.ledoit_wolf`, rescale) for every leading index.

    Parameters
    ----------
    x : ndarray, shape (n_batch, n_samples, n_features)
        One data set per batch entry.

    Returns
    -------
    cov : ndarray of float64, shape (n_batch, n_features, n_features)
    """
    x = np.asarray(x, dtype=np.float64)
    n, p = x.shape[1], x.shape[2]
    mean, sd = _scale(x, axis=1)
    z = (x - mean) / sd
    emp = np.ascontiguousarray(np.swapaxes(z, 1, 2)) @ z / n  # batched BLAS
    z2 = z**2
    trace = z2.sum(axis=(1, 2)) / n
    mu = trace / p
    beta_ = (z2.sum(axis=2) ** 2).sum(axis=1)
    delta_ = (emp**2).sum(axis=(1, 2))
    beta = (beta_ / n - delta_) / (p * n)
    delta = (delta_ - 2.0 * mu * trace + p * mu**2) / p
    beta = np.minimum(beta, delta)
    shrink = np.divide(beta, delta, out=np.zeros_like(beta), where=beta != 0)
    cov = (1.0 - shrink)[:, None, None] * emp
    cov += (shrink * mu)[:, None, None] * np.eye(p)
    s = sd[:, 0, :]
    return s[:, :, None] * cov * s[:, None, :]


def _fit(xtr: np.ndarray, y: np.ndarray, classes: np.ndarray):
    """Weights on raw data, shape (n_times, n_classes, n_channels), and biases."""
    mean, sd = _scale(xtr, axis=1)
    z = (xtr - mean) / sd
    priors = np.array([(y == k).mean() for k in classes])
    means = np.stack([z[:, y == k].mean(axis=1) for k in classes], axis=1)
    cov = sum(pk * ledoit_wolf_batched(z[:, y == k]) for pk, k in zip(priors, classes, strict=True))
    coef = np.swapaxes(np.linalg.solve(cov, np.swapaxes(means, 1, 2)), 1, 2)
    intercept = -0.5 * np.einsum("tkc,tkc->tk", means, coef) + np.log(priors)
    w = coef / sd
    b = intercept - np.einsum("tkc,tc->tk", w, mean[:, 0, :])
    return w, b


def _balanced_accuracy(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Balanced accuracy over the last axis of ``pred`` (..., n_items) for labels ``y``."""
    return np.mean([(pred[..., y == k] == k).mean(axis=-1) for k in np.unique(y)], axis=0)


def sliding_lda_scores(
    X: np.ndarray,
    y: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    generalize: bool = False,
) -> np.ndarray:
    """Balanced accuracy of standardised shrinkage LDA at every time point, per fold.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    y : array-like, shape (n_epochs,)
        Class labels.
    splits : sequence of (train, test) index arrays
        Cross-validation folds.
    generalize : bool
        Train at every time point and test at every time point.

    Returns
    -------
    scores : ndarray, shape (n_folds, n_times) or (n_folds, n_train_times, n_test_times)
        What :func:`mne.decoding.cross_val_multiscore` returns for the same folds.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 3 or y.shape != (X.shape[0],):
        raise ValueError(
            "`X` (n_epochs, n_channels, n_times) and `y` (n_epochs,) must agree, "
            f"got {X.shape} and {y.shape} instead."
        )
    Xt = np.moveaxis(X, 2, 0)
    out = []
    for train, test in splits:
        classes = np.unique(y[train])
        if classes.size < 2:
            raise ValueError(
                f"Every training fold must hold at least 2 classes, got {classes.tolist()}."
            )
        w, b = _fit(Xt[:, train], y[train], classes)
        xte = Xt[:, test]
        wt = np.ascontiguousarray(np.swapaxes(w, 1, 2))  # (n_times, n_channels, n_classes)
        if generalize:
            # every test time x every training time's weights, as ONE matrix product
            n_t, n_te, n_ch = xte.shape
            flat = xte.reshape(n_t * n_te, n_ch) @ np.moveaxis(wt, 0, 1).reshape(n_ch, -1)
            dec = np.moveaxis(flat.reshape(n_t, n_te, n_t, -1), 2, 0) + b[:, None, None, :]
        else:
            dec = xte @ wt + b[:, None, :]
        if classes.size == 2:
            # argmax over a last axis of 2 is several times slower than one comparison;
            # ties go to the first class either way
            pred = classes[(dec[..., 1] > dec[..., 0]).astype(np.intp)]
        else:
            pred = classes[dec.argmax(axis=-1)]
        out.append(_balanced_accuracy(pred, y[test]))
    return np.stack(out)

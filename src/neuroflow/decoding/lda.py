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

__all__ = [
    "ledoit_wolf_batched",
    "null_folds",
    "null_scores",
    "sliding_lda_null",
    "sliding_lda_scores",
]

#: Bytes of training data gathered per batch of labellings in :func:`sliding_lda_null`
#: (larger batches leave the processor's cache and run slower: with small epochs, 4 MiB
#: batches took 1.5 times as long as these).
NULL_BATCH_BYTES = 2**19


def _standardise(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardised ``x``, its mean and standard deviation along ``axis``.

    The standard deviation has ``ddof=0``, zeros replaced by 1; mean and deviation are
    the numbers ``x.mean`` and ``x.std`` give (the same operations), with the centred
    data computed once for both.

    Returns
    -------
    z : ndarray, same shape as ``x``
    mean, sd : ndarray, shape of ``x`` with ``axis`` of length 1
    """
    mean = x.mean(axis=axis, keepdims=True)
    centred = x - mean
    sd = np.sqrt((centred * centred).sum(axis=axis, keepdims=True) / x.shape[axis])
    sd = np.where(sd > 0, sd, 1.0)
    return np.divide(centred, sd, out=centred), mean, sd


def ledoit_wolf_batched(x: np.ndarray) -> np.ndarray:
    """Ledoit-Wolf covariance of standardised data, rescaled, for a batch of data sets.

    Equals scikit-learn's LDA covariance estimate with ``shrinkage="auto"`` (standardise,
    :func:`sklearn.covariance.ledoit_wolf`, rescale) for every leading index.

    Parameters
    ----------
    x : ndarray, shape (..., n_samples, n_features)
        One data set per leading index (any number of leading axes).

    Returns
    -------
    cov : ndarray of float64, shape (..., n_features, n_features)
    """
    x = np.asarray(x, dtype=np.float64)
    n, p = x.shape[-2], x.shape[-1]
    z, _, sd = _standardise(x, axis=-2)
    emp = np.ascontiguousarray(np.swapaxes(z, -2, -1)) @ z / n  # batched BLAS
    z2 = z**2
    trace = z2.sum(axis=(-2, -1)) / n
    mu = trace / p
    beta_ = (z2.sum(axis=-1) ** 2).sum(axis=-1)
    delta_ = (emp**2).sum(axis=(-2, -1))
    beta = (beta_ / n - delta_) / (p * n)
    delta = (delta_ - 2.0 * mu * trace + p * mu**2) / p
    beta = np.minimum(beta, delta)
    shrink = np.divide(beta, delta, out=np.zeros_like(beta), where=beta != 0)
    cov = (1.0 - shrink)[..., None, None] * emp
    cov += (shrink * mu)[..., None, None] * np.eye(p)
    s = sd[..., 0, :]
    return s[..., :, None] * cov * s[..., None, :]


def _fit(xtr: np.ndarray, y: np.ndarray, classes: np.ndarray):
    """Weights on raw data, shape (n_times, n_classes, n_channels), and biases."""
    z, mean, sd = _standardise(xtr, axis=1)
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


def _fit_many(
    z: np.ndarray, mean: np.ndarray, sd: np.ndarray, ytr: np.ndarray, classes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_fit` of several labellings with the same class counts, at once.

    ``z`` (n_times, n_train, n_channels) is the standardised training fold, ``mean`` and
    ``sd`` its scaling (n_times, 1, n_channels), ``ytr`` (n_labellings, n_train). Each
    labelling's arrays keep the memory layout :func:`_fit` gives them (the labellings
    are an outer axis), so its weights are equal to :func:`_fit`'s, bit for bit.

    Returns
    -------
    w : ndarray, shape (n_labellings, n_times, n_classes, n_channels)
    b : ndarray, shape (n_labellings, n_times, n_classes)
    """
    n_lab = ytr.shape[0]
    # the fold as (n_train, n_channels, n_times) in memory, as the epochs are stored
    buffer = np.moveaxis(z, 0, -1)
    priors = np.array([(ytr[0] == k).mean() for k in classes])
    cov, means = 0, []
    for pk, k in zip(priors, classes, strict=True):
        idx = np.nonzero(ytr == k)[1].reshape(n_lab, -1)  # each labelling's class-k items
        zk = np.moveaxis(buffer[idx], -1, 1)  # (n_labellings, n_times, n_k, n_channels)
        means.append(zk.mean(axis=2))
        cov = cov + pk * ledoit_wolf_batched(zk)
    means = np.stack(means, axis=2)  # (n_labellings, n_times, n_classes, n_channels)
    coef = np.swapaxes(np.linalg.solve(cov, np.swapaxes(means, 2, 3)), 2, 3)
    intercept = -0.5 * np.einsum("ltkc,ltkc->ltk", means, coef) + np.log(priors)
    w = coef / sd
    b = intercept - np.einsum("ltkc,tc->ltk", w, mean[:, 0, :])
    return w, b


def _balanced_accuracy_many(pred: np.ndarray, yte: np.ndarray) -> np.ndarray:
    """:func:`_balanced_accuracy` of each labelling: ``pred`` (n_labellings, ..., n_items),
    ``yte`` (n_labellings, n_items); each labelling's mean is over its own classes."""
    total, n_present = 0.0, np.zeros(yte.shape[0])
    for k in np.unique(yte):
        is_k = yte == k
        count = is_k.sum(axis=1)
        extra = (1,) * (pred.ndim - 2)
        hits = ((pred == k) & is_k.reshape(yte.shape[0], *extra, -1)).sum(axis=-1)
        acc = hits / np.maximum(count, 1).reshape(-1, *extra)
        total = total + np.where((count > 0).reshape(-1, *extra), acc, 0.0)
        n_present += count > 0
    return total / n_present.reshape(-1, *(1,) * (pred.ndim - 2))


def _predict(classes: np.ndarray, dec: np.ndarray) -> np.ndarray:
    """The class of the largest decision value (last axis; ties to the first class)."""
    if classes.size == 2:
        return classes[(dec[..., 1] > dec[..., 0]).astype(np.intp)]
    return classes[dec.argmax(axis=-1)]


def sliding_lda_null(
    X: np.ndarray,
    labels: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    generalize: bool = False,
) -> np.ndarray:
    """Fold-averaged :func:`sliding_lda_scores` of many labellings of the same epochs.

    The permutation null refits the model for every shuffle of the labels on the same
    folds: the standardisation of each training fold is shared, and the labellings
    with the same class counts in a fold are fitted together (their class means and
    Ledoit-Wolf covariances batched with the time points). The result equals
    ``sliding_lda_scores(X, y, splits, generalize=generalize).mean(axis=0)`` for each
    labelling ``y``, bit for bit.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    labels : array-like, shape (n_labellings, n_epochs)
        Class labels of every labelling.
    splits : sequence of (train, test) index arrays
        Cross-validation folds.
    generalize : bool
        Train at every time point and test at every time point.

    Returns
    -------
    scores : ndarray, shape (n_labellings, n_times) or (n_labellings, n_times, n_times)
        Balanced accuracy averaged over folds.
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels)
    if X.ndim != 3 or labels.ndim != 2 or labels.shape[1] != X.shape[0]:
        raise ValueError(
            "`X` (n_epochs, n_channels, n_times) and `labels` (n_labellings, n_epochs) must "
            f"agree, got {X.shape} and {labels.shape} instead."
        )
    if labels.shape[0] == 0:
        return np.zeros((0, *((X.shape[2],) * (2 if generalize else 1))))
    names, codes = np.unique(labels, return_inverse=True)
    return null_scores(
        null_folds(X, splits), codes.reshape(labels.shape), names, generalize=generalize
    )


def null_folds(
    X: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]]
) -> list[tuple[np.ndarray, ...]]:
    """What every labelling of :func:`null_scores` shares in each fold, computed once.

    Parameters
    ----------
    X : array-like, shape (n_epochs, n_channels, n_times)
        Epochs.
    splits : sequence of (train, test) index arrays
        Cross-validation folds.

    Returns
    -------
    folds : list of tuple
        Per fold: the training and test indices, the test epochs (n_times, n_test,
        n_channels), the standardised training epochs (n_times, n_train, n_channels)
        and their mean and standard deviation (n_times, 1, n_channels).
    """
    Xt = np.moveaxis(np.asarray(X, dtype=np.float64), 2, 0)
    folds = []
    for train, test in splits:
        z, mean, sd = _standardise(Xt[:, train], axis=1)
        folds.append((train, test, Xt[:, test], z, mean, sd))
    return folds


def null_scores(
    folds: Sequence[tuple[np.ndarray, ...]],
    codes: np.ndarray,
    names: np.ndarray,
    *,
    generalize: bool = False,
) -> np.ndarray:
    """:func:`sliding_lda_null` of labellings given as class codes, on prepared folds.

    Parameters
    ----------
    folds : list of tuple
        From :func:`null_folds`.
    codes : ndarray of int, shape (n_labellings, n_epochs)
        Index in ``names`` of every epoch's class, per labelling.
    names : ndarray, shape (n_names,)
        Class names, sorted (as :func:`numpy.unique` returns them).
    generalize : bool
        Train at every time point and test at every time point.

    Returns
    -------
    scores : ndarray, shape (n_labellings, n_times) or (n_labellings, n_times, n_times)
        Balanced accuracy averaged over folds.
    """
    codes = np.asarray(codes)
    n_lab = codes.shape[0]
    n_times = folds[0][2].shape[0] if folds else 0
    shape = (n_times, n_times) if generalize else (n_times,)
    if n_lab == 0 or not folds:
        return np.zeros((n_lab, *shape))
    out = []
    for train, test, xte, z, mean, sd in folds:
        ytr, yte = codes[:, train], codes[:, test]
        fold = np.empty((n_lab, *shape))
        # labellings with the same classes and class counts in this training fold
        counts = np.stack([(ytr == k).sum(axis=1) for k in range(len(names))], 1)
        keys = [tuple(row) for row in counts.tolist()]
        per_labelling = max(z.nbytes, 1)
        step = max(1, NULL_BATCH_BYTES // per_labelling)
        for key in dict.fromkeys(keys):
            classes = np.flatnonzero(key)
            if classes.size < 2:
                raise ValueError(
                    "Every training fold must hold at least 2 classes, got "
                    f"{names[classes].tolist()}."
                )
            members = np.array([j for j, other in enumerate(keys) if other == key])
            for chunk in np.array_split(members, -(-members.size // step)):
                w, b = _fit_many(z, mean, sd, ytr[chunk], classes)
                wt = np.ascontiguousarray(np.swapaxes(w, 2, 3))  # (lab, t, channels, classes)
                if generalize:
                    n_t, n_te, n_ch = xte.shape
                    flat_x = xte.reshape(n_t * n_te, n_ch)
                    pred = []
                    for j in range(chunk.size):
                        flat = flat_x @ np.moveaxis(wt[j], 0, 1).reshape(n_ch, -1)
                        dec = np.moveaxis(flat.reshape(n_t, n_te, n_t, -1), 2, 0)
                        pred.append(_predict(classes, dec + b[j, :, None, None, :]))
                    pred = np.stack(pred)
                else:
                    # (lab, t, test, classes)
                    pred = _predict(classes, xte @ wt + b[:, :, None, :])
                fold[chunk] = _balanced_accuracy_many(pred, yte[chunk])
        out.append(fold)
    return np.stack(out).mean(axis=0)

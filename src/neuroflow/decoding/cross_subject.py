"""Decoding across subjects: leave-one-subject-out splits and Euclidean alignment.

A decoder trained on some subjects and tested on a subject it never saw has to cope
with each head's own channel mixing (anatomy, cap placement, impedances). The standard
baseline against that is Euclidean alignment (He & Wu, 2020, *IEEE TBME*): each
subject's epochs are whitened by the inverse square root of the subject's mean trial
covariance, so that every subject's mean covariance becomes the identity. It needs no
labels of the held-out subject, only its unlabelled epochs.

Classifiers, scored by balanced accuracy on each held-out subject:

- ``"sliding"``: standardised shrinkage LDA at every time point
  (:func:`~neuroflow.decoding.lda.sliding_lda_scores`, as
  :class:`mne.decoding.SlidingEstimator` with that pipeline);
- ``"epoch_lda"``: the same model on whole vectorised epochs (channels × times);
- ``"tangent_space"``: trial covariances projected to the tangent space at their
  Riemannian mean, then logistic regression (``pyriemann``'s ``Covariances`` →
  ``TangentSpace``; needs neuroflow's ``riemann`` extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from neuroflow.extras import require

from .lda import sliding_lda_scores

__all__ = [
    "CROSS_SUBJECT_CLASSIFIERS",
    "NULL_EIGENVALUE",
    "cross_subject_scores",
    "euclidean_alignment",
    "leave_one_subject_out",
    "whole_epoch_classifier",
]

#: Classifiers :func:`cross_subject_scores` trains (see module notes).
CROSS_SUBJECT_CLASSIFIERS = ("sliding", "epoch_lda", "tangent_space")


def _check_epochs(name: str, epochs: np.ndarray) -> np.ndarray:
    epochs = np.asarray(epochs, dtype=np.float64)
    if epochs.ndim != 3 or epochs.shape[0] < 2:
        raise ValueError(
            f"`{name}` must have shape (n_epochs >= 2, n_channels, n_times), "
            f"got {epochs.shape} instead."
        )
    if not np.isfinite(epochs).all():
        raise ValueError(f"`{name}` must be finite, got NaN or infinite samples.")
    return epochs


#: Eigenvalues of the mean covariance at most this fraction of the largest are null
#: directions (an average reference, an interpolated channel: about 1e-14 in float32 data).
NULL_EIGENVALUE = 1e-10


def euclidean_alignment(epochs: np.ndarray, *, rank: str = "full") -> tuple[np.ndarray, np.ndarray]:
    """Whiten one subject's epochs by its mean trial covariance (He & Wu, 2020).

    Parameters
    ----------
    epochs : array-like, shape (n_epochs, n_channels, n_times)
        All epochs of one subject (labels are not used).
    rank : {"full", "auto"}
        ``"full"``: the mean covariance must be full rank. ``"auto"``: whiten within
        the subspace the epochs span; null directions (eigenvalues at most
        :data:`NULL_EIGENVALUE` of the largest, e.g. the one an average reference
        removes, or one per interpolated channel) stay zero.

    Returns
    -------
    aligned : ndarray of float64, shape (n_epochs, n_channels, n_times)
        ``R^(-1/2) X`` for each epoch ``X``; their mean covariance is the identity
        (with ``rank="auto"``, the projector onto the subspace the epochs span, and
        ``R^(-1/2)`` the pseudo-inverse square root).
    reference : ndarray of float64, shape (n_channels, n_channels)
        ``R``, the mean of the trial covariances ``X X^T / n_times``.
    """
    if rank not in ("full", "auto"):
        raise ValueError(f"`rank` must be 'full' or 'auto', got {rank!r} instead.")
    epochs = _check_epochs("epochs", epochs)
    reference = np.einsum("ect,edt->cd", epochs, epochs) / (epochs.shape[0] * epochs.shape[2])
    values, vectors = np.linalg.eigh(reference)
    keep = values > values.max() * NULL_EIGENVALUE
    if not keep.all() and rank == "full":
        raise ValueError(
            "The mean covariance of `epochs` must be full rank to align them, got "
            f"{int((~keep).sum())} null direction(s) of {values.size} channels "
            "(a flat, duplicated or re-referenced-away channel); drop such channels first, "
            "or pass rank='auto'."
        )
    if not keep.any():
        raise ValueError("`epochs` must not be all zero to align them.")
    vectors = vectors[:, keep]
    inv_sqrt = (vectors / np.sqrt(values[keep])) @ vectors.T
    return np.einsum("cd,edt->ect", inv_sqrt, epochs), reference


def leave_one_subject_out(subjects: Sequence[object]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Train on every subject but one, test on that one, for each subject in turn.

    Parameters
    ----------
    subjects : sequence, length n_epochs
        Subject of each epoch.

    Returns
    -------
    splits : list of (train, test) index arrays
        One per subject, in sorted subject order.
    """
    subjects = np.asarray(subjects)
    names = np.unique(subjects)
    if names.size < 2:
        raise ValueError(
            f"Leave-one-subject-out needs at least 2 subjects, got {names.tolist()} instead."
        )
    return [(np.flatnonzero(subjects != s), np.flatnonzero(subjects == s)) for s in names]


def whole_epoch_classifier(name: str = "epoch_lda", *, seed: int = 0):
    """A classifier of whole epochs (see module notes).

    Parameters
    ----------
    name : {"epoch_lda", "tangent_space"}
        Which classifier.
    seed : int
        Random state of the logistic regression.

    Returns
    -------
    pipeline : sklearn.pipeline.Pipeline
        Takes epochs of shape (n_epochs, n_channels, n_times).
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    if name == "epoch_lda":
        return make_pipeline(
            FunctionTransformer(lambda x: np.reshape(x, (len(x), -1))),
            StandardScaler(),
            LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto"),
        )
    if name == "tangent_space":
        require("pyriemann", "The `tangent_space` classifier")
        from pyriemann.estimation import Covariances
        from pyriemann.tangentspace import TangentSpace

        return make_pipeline(
            Covariances(estimator="oas"),
            TangentSpace(metric="riemann"),
            LogisticRegression(C=1.0, max_iter=1000, random_state=seed),
        )
    raise ValueError(
        f"`classifier` must be one of {', '.join(CROSS_SUBJECT_CLASSIFIERS)}, got {name!r} instead."
    )


def cross_subject_scores(
    epochs: Mapping[str, np.ndarray],
    labels: Mapping[str, np.ndarray],
    *,
    classifier: str = "sliding",
    align: bool = True,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Balanced accuracy on each subject of a decoder trained on the others.

    Parameters
    ----------
    epochs : mapping of str to array-like, shape (n_epochs_s, n_channels, n_times)
        Each subject's epochs on a shared channel set and time grid.
    labels : mapping of str to array-like, shape (n_epochs_s,)
        Each subject's class labels.
    classifier : {"sliding", "epoch_lda", "tangent_space"}
        See module notes.
    align : bool
        Euclidean-align each subject's epochs (:func:`euclidean_alignment`) first.
    seed : int
        Random state of the logistic regression.

    Returns
    -------
    scores : dict of str to ndarray
        Subject -> balanced accuracy on that subject, shape (n_times,) for
        ``"sliding"``, () otherwise.
    """
    if classifier not in CROSS_SUBJECT_CLASSIFIERS:
        raise ValueError(
            f"`classifier` must be one of {', '.join(CROSS_SUBJECT_CLASSIFIERS)}, "
            f"got {classifier!r} instead."
        )
    if set(epochs) != set(labels):
        raise ValueError(
            f"`epochs` and `labels` must name the same subjects, got {sorted(epochs)} and "
            f"{sorted(labels)} instead."
        )
    names = sorted(epochs)
    data, ys = [], []
    for name in names:
        x = _check_epochs(f"epochs[{name!r}]", epochs[name])
        y = np.asarray(labels[name])
        if y.shape != (x.shape[0],):
            raise ValueError(
                f"`labels[{name!r}]` must have shape ({x.shape[0]},), got {y.shape} instead."
            )
        data.append(euclidean_alignment(x)[0] if align else x)
        ys.append(y)
    shapes = {x.shape[1:] for x in data}
    if len(shapes) > 1:
        raise ValueError(
            "Every subject's epochs must share one channel set and time grid, got shapes "
            f"{sorted(shapes)} instead."
        )
    X, y = np.concatenate(data), np.concatenate(ys)
    subjects = np.repeat(names, [len(v) for v in ys])
    splits = leave_one_subject_out(subjects)
    if classifier == "sliding":
        fold_scores = sliding_lda_scores(X, y, splits)
        return {name: fold_scores[i] for i, name in enumerate(names)}
    from sklearn.metrics import balanced_accuracy_score

    out = {}
    for name, (train, test) in zip(names, splits, strict=True):
        model = whole_epoch_classifier(classifier, seed=seed).fit(X[train], y[train])
        out[name] = np.asarray(balanced_accuracy_score(y[test], model.predict(X[test])))
    return out

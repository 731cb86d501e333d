"""Geometry of a representation: dimensionality, spectrum decay and class manifolds.

All functions take a stimulus x feature matrix ``X`` (one row per stimulus) and work
in float64. Definitions:

- **Eigenspectrum** (:func:`eigenspectrum`): eigenvalues of the feature covariance
  ``C = Xc.T @ Xc / (n - 1)`` (``Xc``: ``X`` with each feature's mean removed), in
  descending order, computed as ``s**2 / (n - 1)`` from the singular values ``s`` of
  ``Xc``. Centring leaves at most ``min(n - 1, d)`` non-zero eigenvalues; that many
  are returned.
- **Participation ratio** (:func:`participation_ratio`): ``(sum λ)**2 / sum λ**2``,
  the effective number of dimensions the variance spreads over (Gao et al. 2017,
  bioRxiv 214262; Recanatesi et al. 2019). It equals ``d`` for isotropic data in ``d``
  dimensions and ``k`` for data spread equally over ``k`` dimensions.
- **Power-law exponent** (:func:`power_law_exponent`): ``alpha`` of
  ``λ_n ∝ n**-alpha``, fitted by least squares of ``log λ_n`` on ``log n`` over a rank
  range, as in Stringer et al. 2019, Nature 571:361 ("High-dimensional geometry of
  population responses in visual cortex"), with the R² of that fit.
- **Class manifolds** (:func:`class_manifold_geometry`), for stimuli with class labels:
  each class's dimensionality (participation ratio of its within-class covariance) and
  radius, and two measures of how separable the classes are: the Caliński-Harabasz
  (multivariate Fisher) ratio of between- to within-class variance, and the
  cross-validated balanced accuracy of a linear classifier. Degenerate classes (fewer
  than 2 members, or members with identical features) are left out of every class
  metric, which is computed over the remaining classes.
- **Out-of-distribution readout** (:func:`ood_readout`): a linear classifier of the
  classes trained on one set of stimuli (cross-validated there) and tested on a
  held-out, shifted set, with a permutation p-value for its accuracy there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg

__all__ = [
    "DEFAULT_MAX_FIT_RANK",
    "ClassGeometry",
    "OODReadout",
    "PowerLawFit",
    "class_manifold_geometry",
    "default_fit_range",
    "eigenspectrum",
    "ood_readout",
    "participation_ratio",
    "power_law_exponent",
]

#: Largest rank of the default power-law fit range (Stringer et al. 2019 fit up to 500).
DEFAULT_MAX_FIT_RANK = 500
#: Eigenvalues at or below this fraction of the largest are treated as zero.
_ZERO_FRACTION = 1e-12


class PowerLawFit(NamedTuple):
    """Least-squares fit of ``log λ_n = c - alpha * log n``."""

    #: The exponent ``alpha`` (positive for a decaying spectrum); NaN when fewer than
    #: three positive eigenvalues fall in the fit range.
    alpha: float
    #: Coefficient of determination of the log-log fit; NaN with ``alpha``.
    r2: float
    #: First and last rank (1-based, inclusive) actually fitted; (0, 0) when none.
    fit_range: tuple[int, int]


class ClassGeometry(NamedTuple):
    """Class-manifold metrics of a labelled representation (:func:`class_manifold_geometry`)."""

    #: Class labels, sorted, shape (n_classes,).
    classes: np.ndarray
    #: Stimuli per class, shape (n_classes,).
    n_members: np.ndarray
    #: Participation ratio of each class's within-class covariance, shape (n_classes,).
    dimension: np.ndarray
    #: RMS distance of members to their centroid over the centroid's distance to the
    #: centre of all centroids, shape (n_classes,).
    radius: np.ndarray
    #: Caliński-Harabasz ratio: between-class over within-class variance, per degree
    #: of freedom.
    fisher_ratio: float
    #: Cross-validated balanced accuracy of a linear classifier (chance: 1 / n_classes).
    linear_separability: float
    #: Folds of that cross-validation (0 when the metrics are NaN).
    n_folds: int
    #: Whether each class was left out of every metric (fewer than 2 members, or zero
    #: within-class variance), shape (n_classes,); its ``dimension`` and ``radius``
    #: are NaN.
    degenerate: np.ndarray
    #: Which classes were left out and why, and why the metrics are NaN when fewer
    #: than 2 usable classes remain; ``""`` when every class is used.
    note: str


class OODReadout(NamedTuple):
    """A class readout trained on one distribution, tested on another (:func:`ood_readout`)."""

    #: Cross-validated balanced accuracy on the training (in-distribution) stimuli.
    in_accuracy: float
    #: Balanced accuracy on the held-out (out-of-distribution) stimuli.
    ood_accuracy: float
    #: Chance balanced accuracy, 1 / (classes trained on).
    chance: float
    #: Permutation p-value of ``ood_accuracy`` (held-out labels shuffled).
    p_value: float
    #: Training stimuli, held-out stimuli tested and classes trained on.
    n_train: int
    n_test: int
    n_classes: int
    #: Folds of the in-distribution cross-validation (0 when the readout is NaN).
    n_folds: int
    #: What was left out and why, or why the readout is NaN; ``""`` when nothing.
    note: str


def _check_matrix(X: Any, name: str = "X") -> np.ndarray:
    """``X`` as a finite float64 array of shape (n_stimulus, n_feature), n_stimulus >= 2."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_stimulus, n_feature), got shape {X.shape} instead."
        )
    if X.shape[0] < 2:
        raise ValueError(f"{name} must have at least 2 stimuli (rows), got {X.shape[0]} instead.")
    if X.shape[1] < 1:
        raise ValueError(f"{name} must have at least 1 feature (column), got 0 instead.")
    bad = int(np.size(X) - np.count_nonzero(np.isfinite(X)))
    if bad:
        raise ValueError(f"{name} must be finite, got {bad} NaN or infinite values instead.")
    return X


def _check_eigenvalues(eigenvalues: Any) -> np.ndarray:
    """Eigenvalues as a finite, non-negative 1-D float64 array with a positive sum."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(
            f"eigenvalues must be a non-empty 1-D array, got shape {lam.shape} instead."
        )
    bad = int(lam.size - np.count_nonzero(np.isfinite(lam)))
    if bad:
        raise ValueError(f"eigenvalues must be finite, got {bad} NaN or infinite values instead.")
    scale = float(np.max(np.abs(lam)))
    if np.any(lam < -_ZERO_FRACTION * max(scale, 1e-300)):
        raise ValueError(f"eigenvalues must be non-negative, got minimum {lam.min():.3g} instead.")
    return np.clip(lam, 0.0, None)


def eigenspectrum(X: Any, *, method: str = "svd") -> np.ndarray:
    """Eigenvalues of the feature covariance, descending.

    Parameters
    ----------
    X : array-like, shape (n_stimulus, n_feature)
        One row per stimulus; finite, at least 2 rows. ``n_feature`` may exceed
        ``n_stimulus``.
    method : {"svd", "gram"}
        ``"svd"``: squared singular values of the column-centred data (LAPACK
        ``gesdd``), accurate to round-off relative to each eigenvalue's own size.
        ``"gram"``: eigenvalues of the smaller Gram matrix of the centred data
        (``min(n, d)`` squared), several times faster on large data, accurate to
        round-off relative to the largest eigenvalue only (the smallest eigenvalues
        of an ill-conditioned spectrum lose digits).

    Returns
    -------
    eigenvalues : ndarray of float64, shape (min(n_stimulus - 1, n_feature),)
        Eigenvalues of ``np.cov(X.T)`` (unbiased, ``n - 1`` normalisation), largest
        first; round-off below zero is clipped to 0.
    """
    if method not in ("svd", "gram"):
        raise ValueError(f"method must be 'svd' or 'gram', got {method!r} instead.")
    X = _check_matrix(X)
    n, d = X.shape
    centred = X - X.mean(axis=0)
    if method == "svd":
        lam = scipy.linalg.svdvals(centred, overwrite_a=True, check_finite=False) ** 2
    else:
        gram = centred.T @ centred if d <= n else centred @ centred.T
        lam = np.linalg.eigvalsh(gram)
    lam = np.sort(lam)[::-1] / (n - 1)
    return np.clip(lam[: min(n - 1, d)], 0.0, None)


def participation_ratio(eigenvalues: Any) -> float:
    """Participation ratio ``(sum λ)**2 / sum λ**2`` of a spectrum.

    Parameters
    ----------
    eigenvalues : array-like, shape (n_eigenvalues,)
        Non-negative covariance eigenvalues (e.g. from :func:`eigenspectrum`).

    Returns
    -------
    pr : float
        Between 1 and the number of non-zero eigenvalues; ``k`` when the variance is
        spread equally over ``k`` dimensions; NaN when every eigenvalue is zero
        (constant data).
    """
    lam = _check_eigenvalues(eigenvalues)
    total = lam.sum()
    if total <= 0:
        return float("nan")
    # scale first: squares of very small or large eigenvalues do not under/overflow
    p = lam / total
    return float(1.0 / np.sum(p**2))


def default_fit_range(n_eigenvalues: int) -> tuple[int, int]:
    """The rank range :func:`power_law_exponent` fits by default.

    Parameters
    ----------
    n_eigenvalues : int
        Positive eigenvalues available.

    Returns
    -------
    fit_range : tuple of int
        ``(2, min(max(n_eigenvalues // 2, 4), n_eigenvalues, DEFAULT_MAX_FIT_RANK))``
        (1-based, inclusive): the first eigenvalue, which often carries a mean or
        luminance component above the power law, is left out, and so is the lower half
        of the spectrum, whose sample eigenvalues are biased by finite sampling (they
        fall off faster than the population's).
    """
    hi = min(max(n_eigenvalues // 2, 4), n_eigenvalues, DEFAULT_MAX_FIT_RANK)
    return 2, hi


def power_law_exponent(eigenvalues: Any, fit_range: Sequence[int] | None = None) -> PowerLawFit:
    """Exponent ``alpha`` of ``λ_n ∝ n**-alpha`` (Stringer et al. 2019, Nature).

    Parameters
    ----------
    eigenvalues : array-like, shape (n_eigenvalues,)
        Non-negative eigenvalues in descending order (e.g. from :func:`eigenspectrum`).
    fit_range : sequence of two int | None
        First and last rank (1-based, inclusive) of the fit. None:
        :func:`default_fit_range` of the number of positive eigenvalues. The range is
        cut at the last positive eigenvalue.

    Returns
    -------
    fit : PowerLawFit
        ``alpha`` (slope of ``log λ_n`` against ``log n``, sign flipped), ``r2`` of that
        least-squares line and the ranks fitted; ``alpha`` and ``r2`` are NaN when fewer
        than 3 positive eigenvalues fall in the range.
    """
    lam = _check_eigenvalues(eigenvalues)
    if np.any(np.diff(lam) > 1e-12 * max(float(lam.max()), 1e-300)):
        raise ValueError("eigenvalues must be sorted in descending order, got another order.")
    n_pos = int(np.count_nonzero(lam > _ZERO_FRACTION * lam.max())) if lam.max() > 0 else 0
    if fit_range is None:
        lo, hi = default_fit_range(n_pos)
    else:
        if len(fit_range) != 2:
            raise ValueError(
                f"fit_range must be (first_rank, last_rank), got {tuple(fit_range)!r} instead."
            )
        lo, hi = (int(v) for v in fit_range)
        if lo < 1 or hi < lo:
            raise ValueError(
                f"fit_range must satisfy 1 <= first_rank <= last_rank, got ({lo}, {hi}) instead."
            )
    hi = min(hi, n_pos)
    if hi - lo + 1 < 3:
        return PowerLawFit(float("nan"), float("nan"), (0, 0))
    ranks = np.arange(lo, hi + 1, dtype=np.float64)
    x, y = np.log(ranks), np.log(lam[lo - 1 : hi])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (slope * x + intercept)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return PowerLawFit(float(-slope), r2, (lo, hi))


def _check_labels(labels: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted classes, class index of each stimulus and class sizes; checks the labels."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"labels must have one entry per stimulus ({n}), got shape {labels.shape} instead."
        )
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        bad = int(labels.size - np.count_nonzero(np.isfinite(labels)))
        raise ValueError(f"labels must not be missing, got {bad} NaN values instead.")
    if labels.dtype == object and any(v is None for v in labels):
        raise ValueError(
            f"labels must not be missing, got {sum(v is None for v in labels)} None values instead."
        )
    classes, index, counts = np.unique(labels, return_inverse=True, return_counts=True)
    if classes.size < 2:
        raise ValueError(f"labels must name at least 2 classes, got {classes.size} instead.")
    return classes, index.ravel(), counts


def _degenerate_classes(X: np.ndarray, index: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Whether each class has fewer than 2 members or members with identical features.

    Features count as identical when they differ by at most ``1e-12`` of the largest
    absolute value of ``X`` (round-off of float32 features cast to float64).
    """
    tol = _ZERO_FRACTION * max(float(np.max(np.abs(X))), 1e-300)
    out = counts < 2
    for k in np.flatnonzero(~out):
        members = X[index == k]
        out[k] = float(np.max(np.abs(members - members[0]))) <= tol
    return out


def _names(classes: np.ndarray, which: np.ndarray) -> str:
    """The classes flagged in ``which``, quoted, at most five."""
    names = [repr(c.item() if isinstance(c, np.generic) else c) for c in classes[which]]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _degenerate_note(classes: np.ndarray, counts: np.ndarray, degenerate: np.ndarray) -> str:
    """Which classes are left out and why (``""`` when none)."""
    small, constant = degenerate & (counts < 2), degenerate & (counts >= 2)
    parts = []
    if small.any():
        parts.append(f"fewer than 2 members: {_names(classes, small)}")
    if constant.any():
        parts.append(f"zero within-class variance: {_names(classes, constant)}")
    if not parts:
        return ""
    return f"left out {int(degenerate.sum())} of {classes.size} classes ({'; '.join(parts)})"


def _fisher_ratio(X: np.ndarray, index: np.ndarray, counts: np.ndarray) -> float:
    """Caliński-Harabasz ratio ``[tr(B) / (C - 1)] / [tr(W) / (n - C)]``."""
    n, n_classes = X.shape[0], counts.size
    centroids = np.zeros((n_classes, X.shape[1]))
    np.add.at(centroids, index, X)
    centroids /= counts[:, None]
    between = float(np.sum(counts * np.sum((centroids - X.mean(axis=0)) ** 2, axis=1)))
    within = float(np.sum((X - centroids[index]) ** 2))
    if n == n_classes:
        return float("nan")
    if within <= 0:
        return float("inf") if between > 0 else float("nan")
    return (between / (n_classes - 1)) / (within / (n - n_classes))


def _linear_separability(
    X: np.ndarray, index: np.ndarray, counts: np.ndarray, n_folds: int, seed: int
) -> tuple[float, int]:
    """Stratified-CV balanced accuracy of standardised L2 logistic regression."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    folds = int(min(n_folds, counts.min()))
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = cross_val_score(model, X, index, cv=cv, scoring="balanced_accuracy")
    return float(np.mean(scores)), folds


def class_manifold_geometry(
    X: Any, labels: Any, *, n_folds: int = 5, seed: int = 0, method: str = "svd"
) -> ClassGeometry:
    """Dimensionality, radius and separability of the class manifolds of ``X``.

    Parameters
    ----------
    X : array-like, shape (n_stimulus, n_feature)
        One row per stimulus; finite.
    labels : array-like, shape (n_stimulus,)
        Class of each stimulus; at least 2 classes. Degenerate classes (fewer than 2
        stimuli, or stimuli with identical features) are left out of every metric
        (:attr:`ClassGeometry.degenerate`, :attr:`ClassGeometry.note`); the metrics
        are those of the data without them, and NaN when fewer than 2 classes remain.
    n_folds : int
        Folds of the stratified cross-validation of :attr:`ClassGeometry.linear_separability`
        (fewer when the smallest class has fewer members; at least 2).
    seed : int
        Seed of the fold shuffle.
    method : {"svd", "gram"}
        How the within-class eigenvalues are computed (see :func:`eigenspectrum`).

    Returns
    -------
    geometry : ClassGeometry
        Per class ``c`` with members ``x_i`` (``n_c`` of them) and centroid ``μ_c``,
        and ``μ̄`` the mean of the class centroids:

        - ``dimension``: participation ratio of the eigenvalues of the within-class
          covariance of class ``c`` (:func:`eigenspectrum` of its members);
        - ``radius``: ``sqrt(mean_i ||x_i - μ_c||²) / ||μ_c - μ̄||``, the RMS spread of
          the class around its centroid relative to the centroid's distance from the
          centre of all classes (the ratio Chung, Lee & Sompolinsky 2018, PRX, and
          Sorscher, Ganguli & Sompolinsky 2022, PNAS, call the manifold radius);
          below 1 for compact, well separated classes; inf when the centroid sits at
          the centre.

        Over the usable classes (``C`` classes, ``n`` stimuli, ``μ`` the grand mean):

        - ``fisher_ratio``: ``[Σ_c n_c ||μ_c - μ||² / (C - 1)] /
          [Σ_c Σ_i ||x_i - μ_c||² / (n - C)]``, the Caliński-Harabasz index
          (Caliński & Harabasz 1974, Commun. Stat. 3:1), i.e. the multivariate Fisher
          (ANOVA F) ratio of between- to within-class variance summed over features;
        - ``linear_separability``: mean balanced accuracy over stratified
          ``n_folds``-fold cross-validation of a standardised, L2-regularised
          (``C=1``) multinomial logistic regression (scikit-learn); chance is
          ``1 / C``.
    """
    X = _check_matrix(X)
    classes, index, counts = _check_labels(labels, X.shape[0])
    if int(n_folds) < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds} instead.")
    degenerate = _degenerate_classes(X, index, counts)
    note = _degenerate_note(classes, counts, degenerate)
    dimension = np.full(classes.size, np.nan)
    radius = np.full(classes.size, np.nan)
    usable = np.flatnonzero(~degenerate)
    result = {
        "classes": classes,
        "n_members": counts.astype(np.int64),
        "dimension": dimension,
        "radius": radius,
        "degenerate": degenerate,
    }
    if usable.size < 2:
        reason = f"fewer than 2 usable classes ({usable.size}), class metrics are NaN"
        note = f"{note}; {reason}" if note else reason
        nan = float("nan")
        return ClassGeometry(
            **result, fisher_ratio=nan, linear_separability=nan, n_folds=0, note=note
        )
    keep = ~degenerate[index]
    X, counts_used = X[keep], counts[usable]
    index = np.searchsorted(usable, index[keep])  # 0 .. n_usable - 1, in class order
    centroids = np.stack([X[index == k].mean(axis=0) for k in range(usable.size)])
    centre = centroids.mean(axis=0)
    for k, c in enumerate(usable):
        members = X[index == k]
        dimension[c] = participation_ratio(eigenspectrum(members, method=method))
        spread = np.sqrt(np.mean(np.sum((members - centroids[k]) ** 2, axis=1)))
        distance = float(np.linalg.norm(centroids[k] - centre))
        radius[c] = spread / distance if distance > 0 else np.inf
    accuracy, folds = _linear_separability(X, index, counts_used, int(n_folds), int(seed))
    return ClassGeometry(
        **result,
        fisher_ratio=_fisher_ratio(X, index, counts_used),
        linear_separability=accuracy,
        n_folds=folds,
        note=note,
    )


def _balanced_accuracy(y: np.ndarray, predicted: np.ndarray, n_classes: int) -> np.ndarray:
    """Balanced accuracy of ``predicted`` against each row of ``y``.

    ``y`` has shape (n_draws, n_stimulus) of class indices (0 .. n_classes - 1);
    returns shape (n_draws,): the mean over the classes present in a row of the
    fraction of that class predicted correctly (scikit-learn's definition).
    """
    correct = (y == predicted[None, :]).astype(np.float64)
    offset = (np.arange(y.shape[0]) * n_classes)[:, None]
    flat = (y + offset).ravel()
    size = y.shape[0] * n_classes
    hits = np.bincount(flat, weights=correct.ravel(), minlength=size).reshape(-1, n_classes)
    total = np.bincount(flat, minlength=size).reshape(-1, n_classes)
    present = total > 0
    recall = np.where(present, hits / np.maximum(total, 1), 0.0)
    return recall.sum(axis=1) / present.sum(axis=1)


def ood_readout(
    X_train: Any,
    labels_train: Any,
    X_test: Any,
    labels_test: Any,
    *,
    n_folds: int = 5,
    n_permutations: int = 1000,
    seed: int = 0,
) -> OODReadout:
    """Out-of-distribution readout: classes learned on one stimulus set, read on another.

    A standardised, L2-regularised (``C=1``) multinomial logistic regression
    (scikit-learn, as :attr:`ClassGeometry.linear_separability`) is fitted on the
    in-distribution stimuli and applied to the held-out ones.

    Parameters
    ----------
    X_train : array-like, shape (n_train, n_feature)
        In-distribution stimuli; finite.
    labels_train : array-like, shape (n_train,)
        Their classes. Classes with fewer than 2 stimuli are left out (noted).
    X_test : array-like, shape (n_test, n_feature)
        Held-out (shifted) stimuli, the same features; finite.
    labels_test : array-like, shape (n_test,)
        Their classes; stimuli of classes not trained on are left out (noted).
    n_folds : int
        Folds of the stratified cross-validation of the in-distribution accuracy
        (fewer when the smallest class has fewer members; at least 2).
    n_permutations : int
        Shuffles of the held-out labels for the p-value (at least 1).
    seed : int
        Seed of the fold shuffle and of the permutations.

    Returns
    -------
    readout : OODReadout
        ``in_accuracy``: mean balanced accuracy over the stratified folds on the
        training stimuli; ``ood_accuracy``: balanced accuracy on the held-out stimuli
        of the model fitted on every training stimulus; ``chance``: ``1 / C`` for the
        ``C`` classes trained on; ``p_value``: ``(1 + #{b : acc_b >= acc}) / (1 +
        n_permutations)``, ``acc_b`` the held-out accuracy with the held-out labels
        shuffled (the predictions fixed). Every value is NaN (with ``note``) when
        fewer than 2 classes have 2 training stimuli or no held-out stimulus is left.
    """
    X_train = _check_matrix(X_train, "X_train")
    X_test = np.asarray(X_test, dtype=np.float64)
    if X_test.ndim != 2 or X_test.shape[1] != X_train.shape[1]:
        raise ValueError(
            f"X_test must have shape (n_test, {X_train.shape[1]}) like X_train, got "
            f"{X_test.shape} instead."
        )
    if not np.all(np.isfinite(X_test)):
        bad = int(X_test.size - np.count_nonzero(np.isfinite(X_test)))
        raise ValueError(f"X_test must be finite, got {bad} NaN or infinite values instead.")
    y_train, y_test = np.asarray(labels_train), np.asarray(labels_test)
    for name, y, n in (
        ("labels_train", y_train, X_train.shape[0]),
        ("labels_test", y_test, X_test.shape[0]),
    ):
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(
                f"{name} must have one entry per stimulus ({n}), got shape {y.shape} instead."
            )
    if int(n_folds) < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds} instead.")
    if int(n_permutations) < 1:
        raise ValueError(f"n_permutations must be at least 1, got {n_permutations} instead.")
    classes, counts = np.unique(y_train, return_counts=True)
    notes = []
    small = counts < 2
    if small.any():
        notes.append(
            f"training classes with fewer than 2 stimuli left out: {_names(classes, small)}"
        )
    classes = classes[~small]
    train = np.isin(y_train, classes)
    test = np.isin(y_test, classes)
    if not test.all():
        notes.append(f"{int((~test).sum())} held-out stimuli of classes not trained on left out")
    nan = float("nan")
    if classes.size < 2 or not test.any():
        notes.append(
            "fewer than 2 training classes with 2 stimuli"
            if classes.size < 2
            else "no held-out stimulus of a trained class"
        )
        return OODReadout(
            nan,
            nan,
            nan,
            nan,
            int(train.sum()),
            int(test.sum()),
            int(classes.size),
            0,
            "; ".join(notes),
        )
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_fit, index = X_train[train], np.searchsorted(classes, y_train[train])
    in_accuracy, folds = _linear_separability(
        X_fit, index, np.bincount(index), int(n_folds), int(seed)
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    model.fit(X_fit, index)
    predicted = model.predict(X_test[test])
    truth = np.searchsorted(classes, y_test[test])
    accuracy = float(_balanced_accuracy(truth[None, :], predicted, classes.size)[0])
    rng = np.random.default_rng(seed)
    shuffled = np.stack([rng.permutation(truth) for _ in range(int(n_permutations))])
    null = _balanced_accuracy(shuffled, predicted, classes.size)
    p_value = float((1 + np.count_nonzero(null >= accuracy - 1e-12)) / (1 + null.size))
    return OODReadout(
        in_accuracy=in_accuracy,
        ood_accuracy=accuracy,
        chance=1.0 / classes.size,
        p_value=p_value,
        n_train=int(train.sum()),
        n_test=int(test.sum()),
        n_classes=int(classes.size),
        n_folds=folds,
        note="; ".join(notes),
    )

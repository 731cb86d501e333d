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
  cross-validated balanced accuracy of a linear classifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg

__all__ = [
    "DEFAULT_MAX_FIT_RANK",
    "ClassGeometry",
    "PowerLawFit",
    "class_manifold_geometry",
    "default_fit_range",
    "eigenspectrum",
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
    #: Folds of that cross-validation.
    n_folds: int


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
    small = [f"{c.item()!r} ({k})" for c, k in zip(classes, counts, strict=True) if k < 2]
    if small:
        raise ValueError(
            f"Every class must have at least 2 stimuli, got {', '.join(small[:5])} instead."
        )
    return classes, index.ravel(), counts


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
        Class of each stimulus; at least 2 classes, each with at least 2 stimuli.
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

        Over all classes (``C`` classes, ``n`` stimuli, ``μ`` the grand mean):

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
    centroids = np.stack([X[index == k].mean(axis=0) for k in range(classes.size)])
    centre = centroids.mean(axis=0)
    dimension = np.empty(classes.size)
    radius = np.empty(classes.size)
    for k in range(classes.size):
        members = X[index == k]
        dimension[k] = participation_ratio(eigenspectrum(members, method=method))
        spread = np.sqrt(np.mean(np.sum((members - centroids[k]) ** 2, axis=1)))
        distance = float(np.linalg.norm(centroids[k] - centre))
        radius[k] = spread / distance if distance > 0 else np.inf
    accuracy, folds = _linear_separability(X, index, counts, int(n_folds), int(seed))
    return ClassGeometry(
        classes=classes,
        n_members=counts.astype(np.int64),
        dimension=dimension,
        radius=radius,
        fisher_ratio=_fisher_ratio(X, index, counts),
        linear_separability=accuracy,
        n_folds=folds,
    )

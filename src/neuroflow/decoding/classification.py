"""Cross-validated classification of categorical event labels.

Folds hold whole groups (runs, sessions, or stimuli for EEG so that repeats of one
image never sit on both sides of a fold); the score is balanced accuracy, whose
chance level is ``1 / n_classes`` whatever the class sizes.

Permutation null
----------------
Labels are exchangeable under the null only in units that the design randomised.
When labels vary within groups (e.g. several conditions per run), labels are shuffled
within each group, exactly as :func:`sklearn.model_selection.permutation_test_score`
does with ``groups``, and that function is used. When every group carries a single
label (e.g. groups are stimuli and the label is a property of the stimulus), shuffling
within groups would change nothing; whole groups then exchange labels instead, which
keeps the repeats of a stimulus together as the real design does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GroupKFold,
    LeaveOneGroupOut,
    cross_val_score,
    permutation_test_score,
)
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

__all__ = [
    "CLASSIFIERS",
    "ClassificationResult",
    "classify",
    "group_cv",
    "labels_constant_within_groups",
    "make_classifier",
    "permute_labels",
]

#: Accepted classifier names.
CLASSIFIERS = ("lda", "logistic")


@dataclass
class ClassificationResult:
    """Outcome of :func:`classify`.

    Attributes
    ----------
    score : float
        Mean balanced accuracy over folds.
    fold_scores : ndarray, shape (n_folds,)
        Balanced accuracy per fold.
    null : ndarray, shape (n_permutations,)
        Mean balanced accuracy under shuffled labels.
    p_value : float
        ``(1 + #{null >= score}) / (1 + n_permutations)``; NaN without permutations.
    chance : float
        ``1 / n_classes``.
    permutation_unit : {"within_group", "group", "none"}
        How labels were shuffled.
    """

    score: float
    fold_scores: np.ndarray
    null: np.ndarray
    p_value: float
    chance: float
    permutation_unit: str


def make_classifier(name: str = "lda", *, seed: int = 0) -> Pipeline:
    """A standardising linear classifier.

    Parameters
    ----------
    name : {"lda", "logistic"}
        Shrinkage LDA (``solver="lsqr", shrinkage="auto"``, Ledoit-Wolf) or
        L2-regularised logistic regression.
    seed : int
        Random state of the logistic solver.

    Returns
    -------
    pipeline : sklearn.pipeline.Pipeline
        ``StandardScaler`` followed by the classifier.
    """
    if name == "lda":
        clf: BaseEstimator = LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    elif name == "logistic":
        clf = LogisticRegression(C=1.0, max_iter=1000, random_state=seed)
    else:
        raise ValueError(
            f"`classifier` must be one of {', '.join(CLASSIFIERS)}, got {name!r} instead."
        )
    return make_pipeline(StandardScaler(), clf)


def group_cv(groups: Sequence[object] | np.ndarray, n_splits: int | None) -> object:
    """Grouped K-fold (or leave-one-group-out) splitter.

    Parameters
    ----------
    groups : array-like, shape (n_items,)
        Group of every item.
    n_splits : int | None
        Number of folds (clipped to the number of groups); ``None`` for
        leave-one-group-out.

    Returns
    -------
    cv : GroupKFold | LeaveOneGroupOut
    """
    n_groups = np.unique(np.asarray(groups)).size
    if n_groups < 2:
        raise ValueError(f"Cross-validation needs at least 2 groups, got {n_groups} instead.")
    if n_splits is None:
        return LeaveOneGroupOut()
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 2:
        raise ValueError(f"`n_splits` must be an int >= 2 or None, got {n_splits!r} instead.")
    return GroupKFold(n_splits=min(n_splits, n_groups))


def labels_constant_within_groups(y: np.ndarray, groups: np.ndarray) -> bool:
    """Whether every group holds a single label.

    Parameters
    ----------
    y, groups : array-like, shape (n_items,)
        Labels and groups.

    Returns
    -------
    constant : bool
    """
    y, groups = np.asarray(y), np.asarray(groups)
    _, g = np.unique(groups, return_inverse=True)
    _, lab = np.unique(y, return_inverse=True)
    pairs = np.unique(np.stack([g, lab]), axis=1)
    return pairs.shape[1] == np.unique(g).size


def permute_labels(y: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Shuffle labels between whole groups (groups that each carry one label).

    Parameters
    ----------
    y, groups : array-like, shape (n_items,)
        Labels (constant within each group) and groups.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    y_perm : ndarray, shape (n_items,)
        Labels after assigning each group the label of another group.
    """
    y, groups = np.asarray(y), np.asarray(groups)
    uniq, g = np.unique(groups, return_inverse=True)
    first = np.zeros(uniq.size, dtype=int)
    first[g[::-1]] = np.arange(len(g))[::-1]
    group_labels = y[first]
    return group_labels[rng.permutation(uniq.size)][g]


def _check_inputs(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> None:
    if X.ndim != 2:
        raise ValueError(f"`X` must be 2-D (n_items, n_features), got shape {X.shape} instead.")
    if y.shape != (X.shape[0],) or groups.shape != (X.shape[0],):
        raise ValueError(
            f"`y` and `groups` must have shape ({X.shape[0]},), got {y.shape} and "
            f"{groups.shape} instead."
        )
    if np.unique(y).size < 2:
        raise ValueError(f"`y` must hold at least 2 classes, got {np.unique(y).tolist()} instead.")


def classify(
    X: np.ndarray,
    y: Sequence[object] | np.ndarray,
    groups: Sequence[object] | np.ndarray,
    *,
    classifier: str | BaseEstimator = "lda",
    n_splits: int | None = 5,
    n_permutations: int = 100,
    seed: int = 0,
    n_jobs: int | None = None,
) -> ClassificationResult:
    """Grouped cross-validated balanced accuracy with a permutation null.

    Parameters
    ----------
    X : array-like, shape (n_items, n_features)
        Brain responses.
    y : array-like, shape (n_items,)
        Categorical labels.
    groups : array-like, shape (n_items,)
        CV groups; a group never straddles a fold.
    classifier : {"lda", "logistic"} | estimator
        See :func:`make_classifier`.
    n_splits : int | None
        Grouped folds, or ``None`` for leave-one-group-out.
    n_permutations : int
        Label shuffles (see the module notes); 0 skips the null.
    seed : int
        Seed of the shuffles.
    n_jobs : int | None
        Parallel jobs for scikit-learn.

    Returns
    -------
    result : ClassificationResult
    """
    X = np.asarray(X, dtype=np.float64)
    y, groups = np.asarray(y), np.asarray(groups)
    _check_inputs(X, y, groups)
    est = make_classifier(classifier, seed=seed) if isinstance(classifier, str) else classifier
    cv = group_cv(groups, n_splits)
    chance = 1.0 / np.unique(y).size
    if n_permutations and not labels_constant_within_groups(y, groups):
        score, null, p = permutation_test_score(
            est,
            X,
            y,
            groups=groups,
            cv=cv,
            n_permutations=int(n_permutations),
            scoring="balanced_accuracy",
            random_state=seed,
            n_jobs=n_jobs,
        )
        folds = cross_val_score(
            clone(est), X, y, groups=groups, cv=cv, scoring="balanced_accuracy", n_jobs=n_jobs
        )
        return ClassificationResult(
            float(score), folds, np.asarray(null), float(p), chance, "within_group"
        )
    folds = cross_val_score(
        clone(est), X, y, groups=groups, cv=cv, scoring="balanced_accuracy", n_jobs=n_jobs
    )
    score = float(folds.mean())
    if not n_permutations:
        return ClassificationResult(score, folds, np.zeros(0), float("nan"), chance, "none")
    rng = np.random.default_rng(seed)
    null = np.array(
        [
            cross_val_score(
                clone(est),
                X,
                permute_labels(y, groups, rng),
                groups=groups,
                cv=cv,
                scoring="balanced_accuracy",
                n_jobs=n_jobs,
            ).mean()
            for _ in range(int(n_permutations))
        ]
    )
    p = (1.0 + (null >= score - 1e-12).sum()) / (1.0 + null.size)
    return ClassificationResult(score, folds, null, float(p), chance, "group")

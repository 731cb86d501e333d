"""Choice of a penalty from cross-validation scores, stable under round-off.

Validation scores of neighbouring penalties are often equal up to round-off: on the
plateau of large penalties, or for targets without signal. A plain argmax then picks
whichever happens to be ahead in the last bits, and that changes with the thread
count, the BLAS build or a last-bit change of the features. Scores within
:data:`SCORE_TOLERANCE` of the best are therefore ties, and a tie goes to the most
regularised candidate.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SCORE_TOLERANCE", "near_best", "select_penalty"]

#: Scores within ``SCORE_TOLERANCE * max(1, |best|)`` of the best are ties: about
#: eight float32 units in the last place at 1, above the round-off of scores computed
#: from float32 features, far below any difference worth a choice.
SCORE_TOLERANCE = 1e-6


def near_best(scores: np.ndarray, tol: float = SCORE_TOLERANCE) -> np.ndarray:
    """Candidates whose score ties with the best one, per target.

    Parameters
    ----------
    scores : ndarray, shape (n_candidates, n_targets)
        Validation score of every candidate (higher is better); NaN counts as ``-inf``.
    tol : float
        Tie tolerance, relative to ``max(1, |best|)``.

    Returns
    -------
    ties : ndarray of bool, shape (n_candidates, n_targets)
        ``best - score <= tol * max(1, |best|)``, with ``best`` the column maximum.
        At least one candidate per target is marked.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] == 0:
        raise ValueError(
            f"`scores` must have shape (n_candidates, n_targets) with at least one candidate, "
            f"got shape {scores.shape} instead."
        )
    if not (np.isfinite(tol) and tol >= 0):
        raise ValueError(f"`tol` must be a non-negative finite float, got {tol!r} instead.")
    scores = np.where(np.isnan(scores), -np.inf, scores)
    best = scores.max(axis=0)
    finite = np.isfinite(best)
    margin = tol * np.maximum(1.0, np.abs(np.where(finite, best, 0.0)))
    return (scores >= best - margin) | ~finite


def select_penalty(
    scores: np.ndarray, penalties: np.ndarray, tol: float = SCORE_TOLERANCE
) -> np.ndarray:
    """Per target, the largest penalty whose score ties with the best one.

    Parameters
    ----------
    scores : ndarray, shape (n_penalties, n_targets)
        Fold-averaged validation score of every penalty (higher is better).
    penalties : ndarray, shape (n_penalties,)
        The penalties, in any order.
    tol : float
        Tie tolerance, see :func:`near_best`.

    Returns
    -------
    index : ndarray of int64, shape (n_targets,)
        Row of ``scores`` chosen for every target (the first such row when a
        penalty is listed twice). Where no tie is within ``tol``, this is the
        argmax of the scores.
    """
    penalties = np.asarray(penalties, dtype=np.float64)
    scores = np.asarray(scores)
    if penalties.shape != scores.shape[:1]:
        raise ValueError(
            f"`penalties` must have shape ({scores.shape[0] if scores.ndim else 0},), got "
            f"{penalties.shape} instead."
        )
    ties = near_best(scores, tol)
    ranked = np.where(ties, penalties[:, None], -np.inf)
    return ranked.argmax(axis=0).astype(np.int64)

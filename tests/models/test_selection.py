"""Penalty choice under near ties: the largest penalty within tolerance of the best."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.models import (
    SCORE_TOLERANCE,
    banded_ridge_cv,
    near_best,
    ridge_cv,
    run_splits,
    select_penalty,
)

ALPHAS = np.array([0.1, 1.0, 10.0, 100.0])


def test_exact_tie_goes_to_the_larger_penalty():
    scores = np.array([[0.2, 0.5], [0.5, 0.5], [0.5, 0.1], [0.3, 0.5]])
    np.testing.assert_array_equal(select_penalty(scores, ALPHAS), [2, 3])
    # Order of the candidates does not matter, only their penalties.
    order = np.array([3, 0, 2, 1])
    np.testing.assert_array_equal(order[select_penalty(scores[order], ALPHAS[order])], [2, 3])


def test_tiny_differences_are_ties():
    scores = np.array([[0.1], [0.40000001], [0.4], [0.39999999]])
    assert select_penalty(scores, ALPHAS)[0] == 3
    # Relative to |best| above 1: r2 can be far below zero.
    scores = np.array([[-50.0], [-50.00004], [-60.0], [-70.0]])
    assert select_penalty(scores, ALPHAS)[0] == 1


def test_a_clear_winner_is_kept():
    scores = np.array([[0.1, -0.3], [0.4 + 1e-4, -0.2], [0.4, -0.2 - 2e-6], [0.3, -0.25]])
    np.testing.assert_array_equal(select_penalty(scores, ALPHAS), [1, 1])
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((9, 500))
    gaps = np.diff(np.sort(scores, axis=0)[-2:], axis=0)[0]
    assert gaps.min() > 10 * SCORE_TOLERANCE  # no near ties: plain argmax
    np.testing.assert_array_equal(select_penalty(scores, np.logspace(-2, 6, 9)), scores.argmax(0))


def test_nan_scores_and_tolerance():
    scores = np.array([[np.nan, np.nan], [0.3, np.nan], [0.3 - 1e-3, np.nan], [np.nan, np.nan]])
    np.testing.assert_array_equal(select_penalty(scores, ALPHAS), [1, 3])
    assert select_penalty(scores, ALPHAS, tol=1e-2)[0] == 2
    np.testing.assert_array_equal(near_best(np.zeros((3, 2)), tol=0.0), np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="`scores` must have shape"):
        near_best(np.zeros(3))
    with pytest.raises(ValueError, match="`tol` must be"):
        near_best(np.zeros((3, 1)), tol=-1.0)
    with pytest.raises(ValueError, match="`penalties` must have shape"):
        select_penalty(np.zeros((3, 1)), ALPHAS)


def _near_tie_problem(rng, n=120, p=10, t=200):
    """Weak and absent signals, searched on a grid of penalties that come in pairs.

    The two penalties of a pair differ by 1e-5 relative, so near the optimum their
    scores differ far less than float32 round-off: with an argmax, which one wins is
    decided by the last bits.
    """
    X = rng.standard_normal((n, p))
    Y = rng.standard_normal((n, t))
    Y[:, : t // 10] += X @ rng.standard_normal((p, t // 10))
    X, Y = X - X.mean(0), Y - Y.mean(0)
    base = np.logspace(0, 4, 9)
    alphas = np.sort(np.concatenate([base, base * (1 + 1e-5)]))
    return (
        X.astype(np.float32),
        Y.astype(np.float32),
        run_splits(np.repeat(np.arange(6), 20)),
        alphas,
    )


def _fold_scores(X, Y, alphas, splits):
    """Fold-averaged R² of every alpha, in float64, shape (n_alphas, n_targets)."""
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    out = np.zeros((len(alphas), Y.shape[1]))
    for train, val in splits:
        lam, V = np.linalg.eigh(X[train].T @ X[train])
        B = V.T @ X[train].T @ Y[train]
        ss = ((Y[val] - Y[val].mean(0)) ** 2).sum(0)
        for i, a in enumerate(alphas):
            pred = X[val] @ V @ (B / (lam + a)[:, None])
            out[i] += 1 - ((Y[val] - pred) ** 2).sum(0) / ss
    return out / len(splits)


def test_relative_noise_of_1e7_keeps_every_chosen_alpha(rng):
    X, Y, splits, alphas = _near_tie_problem(rng)
    scores = _fold_scores(X, Y, alphas, splits)
    top2 = np.sort(scores, axis=0)[-2:]
    assert (top2[1] - top2[0] < 1e-7).mean() > 0.3  # the problem is full of near ties
    ref = ridge_cv(X, Y, alphas=alphas, splits=splits, device="cpu", dtype="float32")
    for seed in range(3):
        noise = np.random.default_rng(seed).standard_normal(X.shape)
        Xp = (X * (1 + 1e-7 * noise)).astype(np.float32)
        assert not np.array_equal(Xp, X)
        res = ridge_cv(Xp, Y, alphas=alphas, splits=splits, device="cpu", dtype="float32")
        np.testing.assert_array_equal(res.best_alpha, ref.best_alpha)
    # The choice is the rule applied to the exact scores: ties resolved upwards.
    np.testing.assert_array_equal(ref.best_alpha, alphas[select_penalty(scores, alphas)])


def test_ridge_equals_argmax_without_near_ties(rng):
    X = rng.standard_normal((96, 12))
    Y = X @ rng.standard_normal((12, 40)) * rng.uniform(0, 1, 40) + rng.standard_normal((96, 40))
    X, Y = X - X.mean(0), Y - Y.mean(0)
    splits = run_splits(np.repeat(np.arange(8), 12))
    alphas = np.logspace(-1, 4, 6)
    scores = _fold_scores(X, Y, alphas, splits)
    top2 = np.sort(scores, axis=0)[-2:]
    assert (top2[1] - top2[0]).min() > 1e-4
    for dtype in ("float32", "float64"):
        res = ridge_cv(X, Y, alphas=alphas, splits=splits, device="cpu", dtype=dtype)
        np.testing.assert_array_equal(res.best_alpha, alphas[scores.argmax(0)])
        np.testing.assert_allclose(res.cv_score, scores.max(0), atol=1e-5)


def test_banded_ties_go_to_the_first_weighting_and_the_largest_alpha(rng):
    X = rng.standard_normal((90, 6))
    Y = X @ rng.standard_normal((6, 5)) + rng.standard_normal((90, 5))
    X, Y = X - X.mean(0), Y - Y.mean(0)
    splits = run_splits(np.repeat(np.arange(5), 18))
    # The second band is all zeros, so its weight only rescales the alpha: gamma
    # (0.5, 0.5) with alpha a is the model of gamma (1, 0) with alpha 2a, and on a grid
    # of powers of two every interior optimum is reached by the three weightings alike.
    Xs = [X, np.zeros_like(X)]
    gammas = np.array([[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]])
    alphas = 2.0 ** np.arange(-8, 16)
    res = banded_ridge_cv(Xs, Y, alphas=alphas, splits=splits, gammas=gammas, dtype="float64")
    np.testing.assert_array_equal(res.best_gamma, np.tile(gammas[0][:, None], (1, 5)))
    # Duplicated alphas: the chosen one is the same value, and a tie within the
    # first weighting went to the larger duplicate.
    dup = np.array([0.1, 1.0, 1.0 * (1 + 1e-9), 10.0, 100.0, 1000.0])
    one = banded_ridge_cv([X], Y, alphas=dup, splits=splits, gammas=np.ones((1, 1)))
    near_one = np.isclose(one.ridge_alpha, 1.0, rtol=1e-6)
    assert near_one.any()
    np.testing.assert_array_equal(one.ridge_alpha[near_one], dup[2])

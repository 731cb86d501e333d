"""Banded ridge: himalaya's random search, planted band weights, variance split."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.models import banded_ridge_cv, dirichlet_gammas, r2_split, run_splits


def _bands(rng, n_samples=210, sizes=(8, 7, 9), signal=(1.0, 0.5, 0.0), n_targets=9, noise=2.0):
    Xs = [rng.standard_normal((n_samples, p)) for p in sizes]
    Y = noise * rng.standard_normal((n_samples, n_targets))
    for X, amp in zip(Xs, signal, strict=True):
        Y += amp * X @ rng.standard_normal((X.shape[1], n_targets))
    Xs = [X - X.mean(0) for X in Xs]
    return Xs, Y - Y.mean(0)


@pytest.mark.parametrize("form", ["primal", "kernel"])
def test_matches_himalaya_multiple_kernel_random_search(rng, form):
    from himalaya.kernel_ridge import MultipleKernelRidgeCV
    from himalaya.scoring import r2_score

    Xs, Y = _bands(rng, n_samples=140)
    splits = run_splits(np.repeat(np.arange(4), 35))
    alphas = np.logspace(-2, 4, 9)
    gammas = dirichlet_gammas(6, 3, random_state=3)
    ours = banded_ridge_cv(
        Xs, Y, alphas=alphas, splits=splits, gammas=gammas, form=form, dtype="float64"
    )
    Ks = np.stack([X @ X.T for X in Xs])
    ref = MultipleKernelRidgeCV(
        kernels="precomputed",
        solver="random_search",
        cv=splits,
        solver_params={
            "n_iter": gammas,
            "alphas": alphas,
            "score_func": r2_score,
            "progress_bar": False,
        },
    ).fit(Ks, Y)
    np.testing.assert_allclose(ours.deltas, ref.deltas_, rtol=1e-10)
    np.testing.assert_allclose(ours.predict(Xs), ref.predict(Ks), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(ours.cv_score, ref.cv_scores_.max(0), atol=1e-8)


def test_recovers_planted_band_weights(rng):
    """A band without signal gets a large penalty and ~0 share of test variance."""
    Xs, Y = _bands(rng, n_samples=280, sizes=(8, 7, 9), signal=(1.0, 0.5, 0.0), noise=1.5)
    train, test = slice(0, 240), slice(240, None)
    res = banded_ridge_cv(
        [X[train] for X in Xs],
        Y[train],
        alphas=np.logspace(-1, 4, 11),
        splits=run_splits(np.repeat(np.arange(6), 40)),
        n_iter=40,
        random_state=0,
        device="cpu",
    )
    split = r2_split(Y[test], res.predict_split([X[test] for X in Xs]))
    share = split / split.sum(0)
    assert np.all(share[2] < 0.05)
    assert np.median(share[0]) > np.median(share[1]) > 0.1
    assert np.all(np.median(res.best_alpha[2]) > 10 * np.median(res.best_alpha[0]))
    assert res.best_alpha.shape == (3, Y.shape[1])
    np.testing.assert_allclose(res.best_gamma.sum(0), 1.0)


def test_r2_split_sums_to_joint_r2_and_matches_himalaya(rng):
    from himalaya.scoring import r2_score_split

    Y = rng.standard_normal((9, 7))
    P = rng.standard_normal((3, 9, 7))
    Yc, Pc = Y - Y.mean(0), P - P.mean(1, keepdims=True)
    split = r2_split(Y, P)
    np.testing.assert_allclose(split, r2_score_split(Yc, Pc), atol=1e-12)
    joint = 1 - ((Yc - Pc.sum(0)) ** 2).sum(0) / (Yc**2).sum(0)
    np.testing.assert_allclose(split.sum(0), joint, atol=1e-12)
    with pytest.raises(ValueError, match="`Y_pred_split` must have shape"):
        r2_split(Y, P[:, :-1])


def test_single_band_equals_ridge(rng):
    from neuroflow.models import ridge_cv

    Xs, Y = _bands(rng, n_samples=64, sizes=(9,), signal=(1.0,), n_targets=7)
    splits = run_splits(np.repeat(np.arange(8), 8))
    alphas = np.logspace(-2, 3, 6)
    banded = banded_ridge_cv(Xs, Y, alphas=alphas, splits=splits, n_iter=3, dtype="float64")
    ridge = ridge_cv(Xs[0], Y, alphas=alphas, splits=splits, dtype="float64")
    np.testing.assert_allclose(banded.best_alpha[0], ridge.best_alpha)
    np.testing.assert_allclose(banded.coef, ridge.coef, rtol=1e-8, atol=1e-12)


def test_gammas_errors(rng):
    Xs, Y = _bands(rng, n_samples=42, n_targets=7)
    splits = run_splits(np.repeat(np.arange(6), 7))
    with pytest.raises(
        ValueError, match=r"`gammas` must be non-negative with shape \(n_gammas, 3\)"
    ):
        banded_ridge_cv(Xs, Y, alphas=[1.0], splits=splits, gammas=np.ones((2, 2)))
    with pytest.raises(ValueError, match="`n_iter` must be a positive int"):
        dirichlet_gammas(0, 3)


def test_banded_ridge_search_logs_its_progress(rng, caplog):
    import logging
    import re

    Xs, Y = _bands(rng, n_samples=90, sizes=(5, 4), signal=(1.0, 0.2), n_targets=7)
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        banded_ridge_cv(
            Xs,
            Y,
            alphas=[0.1, 10.0],
            splits=run_splits(np.repeat(np.arange(3), 30)),
            n_iter=13,
            device="cpu",
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    assert len(lines) == 10, lines  # every 10 % of the 13 band weightings, the end once
    assert all(re.search(r"% \(\d+/13 band weightings\), [\d,.]+/s, ", line) for line in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]

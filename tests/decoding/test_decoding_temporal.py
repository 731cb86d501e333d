"""Time-resolved decoding, cluster tests and per-time ridge."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from neuroflow.decoding.temporal import (
    _ridge_fold,
    cluster_permutation_test,
    group_cluster_test,
    shuffle_labels,
    sliding_ridge_scores,
    sliding_ridge_scores_many,
    time_resolved_null,
    time_resolved_scores,
)


def test_cluster_test_finds_planted_cluster(rng):
    null = rng.standard_normal((99, 13)) * 0.05 + 0.5
    obs = 0.5 + 0.02 * rng.standard_normal(13)
    obs[4:8] = 0.8
    res = cluster_permutation_test(obs, null)
    sig = res.significant(0.05)
    assert sig[4:8].all() and sig.sum() == 4
    assert res.p_values.min() == pytest.approx(0.01)
    with pytest.raises(ValueError, match="`null` must have shape"):
        cluster_permutation_test(obs, null[:, :5])


def test_cluster_test_2d(rng):
    null = rng.standard_normal((99, 7, 9)) * 0.05
    obs = np.zeros((7, 9))
    obs[2:4, 3:6] = 1.0
    res = cluster_permutation_test(obs, null)
    assert res.significant().sum() == 6 and res.conclusive(0.05)
    # 49 permutations reach p = 0.02 but not 0.05 / 5: inconclusive, nothing significant
    few = cluster_permutation_test(obs, null[:49])
    assert few.p_values.min() == pytest.approx(0.02) and not few.conclusive(0.05)
    assert not few.significant(0.05).any() and few.conclusive(0.1)


def test_sliding_and_generalizing_scores(rng):
    n, c, t = 72, 5, 9
    y = np.tile([0, 1], n // 2)
    groups = np.arange(n) // 2
    X = rng.standard_normal((n, c, t))
    X[:, 0, 3:6] += 3.0 * y[:, None]
    s = time_resolved_scores(X, y, groups, n_splits=4)
    assert s.shape == (4, t)
    assert s.mean(0)[3:6].min() > 0.85 and s.mean(0)[[0, 8]].max() < 0.75
    g = time_resolved_scores(X, y, groups, n_splits=4, generalize=True)
    assert g.shape == (4, t, t)
    np.testing.assert_allclose(np.diagonal(g.mean(0)), s.mean(0))
    null = time_resolved_null(X, y, groups, n_permutations=3, n_splits=4)
    assert null.shape == (3, t)


def test_shuffle_labels_units(rng):
    y = np.repeat([0, 1, 0, 1], 3)
    stim = np.repeat(np.arange(4), 3)
    yp = shuffle_labels(y, stim, rng)
    assert all(np.unique(yp[stim == s]).size == 1 for s in range(4))
    runs = np.tile(np.arange(3), 4)
    yr = shuffle_labels(y, runs, rng)
    for r in range(3):
        assert sorted(yr[runs == r]) == sorted(y[runs == r])


def test_ridge_fold_matches_sklearn_for_single_alpha(rng):
    Xtr = rng.standard_normal((3, 17, 4))
    Xte = rng.standard_normal((3, 6, 4))
    Y = rng.standard_normal((17, 2))
    Y -= Y.mean(0)
    pred = _ridge_fold(Xtr, Y, Xte, np.array([2.5]))
    for t in range(3):
        ref = Ridge(alpha=2.5, fit_intercept=False).fit(Xtr[t], Y).predict(Xte[t])
        np.testing.assert_allclose(pred[t], ref, atol=1e-10)


def test_sliding_ridge_latency(rng):
    n, c, t = 80, 6, 11
    stim = np.arange(n) // 2
    Y = rng.standard_normal((n // 2, 2))[stim]
    X = rng.standard_normal((n, c, t))
    X[:, 1, 6:8] += 1.5 * Y[:, [0]]
    scores, null = sliding_ridge_scores(X, Y, stim, n_splits=4, n_permutations=20, seed=1)
    assert scores.shape == (t, 2) and null.shape == (20, t, 2)
    assert np.argmax(scores[:, 0]) in (6, 7)
    assert scores[6:8, 0].min() > np.quantile(null[:, 6:8, 0], 0.95)
    with pytest.raises(ValueError, match="`alphas` must be positive"):
        sliding_ridge_scores(X, Y, stim, alphas=[-1.0])


def test_target_sets_on_shared_folds_score_as_each_alone(rng):
    """Each set gets, bit for bit, what it gets alone: same folds, shuffles, penalties."""
    n_stim, n_rep = 23, 3
    stim = np.repeat(np.arange(n_stim), n_rep)
    X = rng.standard_normal((stim.size, 7, 19))
    sets = [rng.standard_normal((n_stim, k))[stim] for k in (4, 1, 5)]
    sets[1] = sets[1] * 50.0 + 3.0  # another scale: other penalties win
    runs = np.tile(np.arange(n_rep), n_stim)
    together = sliding_ridge_scores_many(X, sets, runs, n_permutations=13, seed=5, units=stim)
    assert len(together) == 3
    for Y, (scores, null) in zip(sets, together, strict=True):
        alone = sliding_ridge_scores(X, Y, runs, n_permutations=13, seed=5, units=stim)
        assert scores.shape == (19, Y.shape[1]) and null.shape == (13, 19, Y.shape[1])
        np.testing.assert_array_equal(scores, alone[0])
        np.testing.assert_array_equal(null, alone[1])
    assert sliding_ridge_scores_many(X, [], runs) == []
    with pytest.raises(ValueError, match="one row per epoch, got \\[69, 68\\]"):
        sliding_ridge_scores_many(X, [sets[0], sets[0][1:]], runs)
    with pytest.raises(ValueError, match="`Y` must have shape"):
        sliding_ridge_scores_many(X, [sets[0], sets[0][:, 0]], runs)


def test_group_cluster_test(rng):
    scores = 0.5 + 0.02 * rng.standard_normal((6, 10))
    scores[:, 3:6] += 0.3
    res = group_cluster_test(scores, 0.5)
    assert res.significant(0.05)[3:6].all()
    assert 1 / 64 <= res.p_values.min() <= 0.05
    with pytest.raises(ValueError, match="n_subjects >= 2"):
        group_cluster_test(scores[:1], 0.5)


def test_ridge_fold_chooses_the_leave_one_out_alpha(rng):
    from sklearn.linear_model import RidgeCV

    alphas = np.logspace(-2, 3, 9)
    Xtr = rng.standard_normal((4, 29, 5))
    Xte = rng.standard_normal((4, 7, 5))
    Y = Xtr[0] @ rng.standard_normal((5, 3)) + rng.standard_normal((29, 3)) * [0.3, 2.0, 8.0]
    Y -= Y.mean(0)
    pred = _ridge_fold(Xtr, Y, Xte, alphas)
    for t in range(4):
        for j in range(3):
            ref = RidgeCV(alphas=alphas, fit_intercept=False).fit(Xtr[t], Y[:, j])
            np.testing.assert_allclose(pred[t, :, j], ref.predict(Xte[t]), atol=1e-9)


def test_ridge_fold_ties_go_to_the_larger_alpha(rng):
    """Penalties so large that every leave-one-out error is the target's variance up to
    round-off: the choice must not depend on the last bits (nor on the alphas' order)."""
    from sklearn.linear_model import Ridge

    Xtr = 1e-3 * rng.standard_normal((2, 23, 3))
    Xte = rng.standard_normal((2, 5, 3))
    Y = rng.standard_normal((23, 2))
    Y -= Y.mean(0)
    alphas = np.array([1e9, 1e7, 1e8])
    pred = _ridge_fold(Xtr, Y, Xte, alphas)
    for t in range(2):
        ref = Ridge(alpha=1e9, fit_intercept=False).fit(Xtr[t], Y).predict(Xte[t])
        np.testing.assert_allclose(pred[t], ref, rtol=1e-8, atol=0)
        other = Ridge(alpha=1e7, fit_intercept=False).fit(Xtr[t], Y).predict(Xte[t])
        assert not np.allclose(pred[t], other, rtol=1e-3, atol=0)


@pytest.mark.slow
def test_null_is_the_same_with_parallel_permutations(rng):
    """Workers get the labels drawn up front: the null does not depend on ``n_jobs``."""
    X = rng.standard_normal((40, 4, 6))
    y = np.repeat([0, 1], 20)
    stim = np.arange(40) // 2
    # blocks of permutations (one per 10 % of them), fitted by two workers
    one = time_resolved_null(X, y, stim, n_permutations=13, n_splits=4, seed=5)
    two = time_resolved_null(X, y, stim, n_permutations=13, n_splits=4, seed=5, n_jobs=2)
    assert one.shape == (13, 6)
    np.testing.assert_array_equal(one, two)
    with pytest.raises(ValueError, match=r"`units` must have shape \(40,\), got \(3,\)"):
        time_resolved_null(X, y, stim, n_permutations=3, units=[0, 1, 2])

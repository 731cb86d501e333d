"""Block and circular-shift permutation tests, p-values and FDR."""

import mne
import numpy as np
import pytest
from evaluation_synthetic import smooth_noise
from scipy.stats import kstest

from neuroflow.evaluation.metrics import pearson_r, zscore_time
from neuroflow.evaluation.permutation import (
    block_permutations,
    fdr_correction,
    permutation_null,
    permutation_pvalues,
    permutation_test,
)


def test_block_null_matches_direct_reordering(rng):
    n_times, block = 61, 7  # 8 full blocks and a 5-sample tail
    y_true = rng.standard_normal((n_times, 9))
    y_pred = y_true + rng.standard_normal((n_times, 9))
    r, null = permutation_null(
        y_true, y_pred, n_permutations=6, method="block", block_length=block, seed=3
    )
    orders = block_permutations(n_times, block, 6, np.random.default_rng(3))
    np.testing.assert_allclose(r, pearson_r(y_true, y_pred), rtol=1e-12)
    for order, row in zip(orders, null, strict=True):
        idx = np.concatenate([np.arange(b * block, (b + 1) * block) for b in order])
        idx = np.concatenate([idx, np.arange(idx.size, n_times)])
        np.testing.assert_allclose(row, pearson_r(y_true, y_pred[idx]), atol=1e-12)


def test_circular_null_matches_roll(rng):
    y_true = rng.standard_normal((23, 8))
    y_pred = rng.standard_normal((23, 8))
    _, null = permutation_null(
        y_true, y_pred, n_permutations=1000, method="circular_shift", block_length=4
    )
    shifts = np.arange(4, 23 - 4 + 1)
    assert null.shape == (shifts.size, 8)  # every admissible shift once
    for shift, row in zip(shifts, null, strict=True):
        expected = pearson_r(y_true, np.roll(y_pred, -shift, axis=0))
        np.testing.assert_allclose(row, expected, atol=1e-12)


def test_circular_subsample_is_seeded(rng):
    y_true, y_pred = rng.standard_normal((2, 97, 7))
    kw = {"n_permutations": 20, "method": "circular_shift", "block_length": 5}
    _, a = permutation_null(y_true, y_pred, seed=1, **kw)
    _, b = permutation_null(y_true, y_pred, seed=1, **kw)
    _, c = permutation_null(y_true, y_pred, seed=2, **kw)
    assert a.shape == (20, 7)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_pvalues_plus_one_correction():
    observed = np.array([0.5, 0.1, -0.4, np.nan])
    null = np.array([[0.6, 0.0, 0.1, 0.0], [0.2, 0.2, 0.5, 0.0], [0.1, 0.05, 0.3, 0.0]])
    np.testing.assert_allclose(permutation_pvalues(observed, null)[:3], [2 / 4, 2 / 4, 4 / 4])
    two = permutation_pvalues(observed, null, alternative="two-sided")
    np.testing.assert_allclose(two[:3], [2 / 4, 2 / 4, 2 / 4])
    assert np.isnan(two[3])
    with pytest.raises(ValueError, match="`alternative` must be one of"):
        permutation_pvalues(observed, null, alternative="less")
    with pytest.raises(ValueError, match="`null` must have shape"):
        permutation_pvalues(observed, null[:, :2])


@pytest.mark.parametrize("method", ["block", "circular_shift"])
def test_null_is_centred_on_chance(rng, method):
    # autocorrelated observation and an unrelated, autocorrelated prediction
    y_true = smooth_noise(rng, (240, 400), width=3)
    y_pred = smooth_noise(rng, (240, 400), width=3)
    r, null = permutation_null(
        y_true, y_pred, n_permutations=200, method=method, block_length=10, seed=0
    )
    assert abs(null.mean()) < 0.01
    # the null's spread matches the spread of chance correlations across targets
    assert 0.8 < null.std() / r.std() < 1.25
    p = permutation_pvalues(r, null)
    assert kstest(p, "uniform").pvalue > 0.01
    assert 0.02 < (p < 0.05).mean() < 0.09
    _, significant = fdr_correction(p, alpha=0.05)
    assert significant.sum() <= 2


@pytest.mark.parametrize("method", ["block", "circular_shift"])
def test_planted_signal_is_found(rng, method):
    signal = smooth_noise(rng, (180, 9), width=2)
    y_true = signal + smooth_noise(rng, (180, 9), width=2)
    y_pred = np.concatenate([signal[:, :5], smooth_noise(rng, (180, 4))], axis=1)
    _, p = permutation_test(y_true, y_pred, n_permutations=300, method=method, block_length=8)
    _, significant = fdr_correction(p, alpha=0.05)
    assert significant[:5].all()
    assert not significant[5:].any()


def test_fdr_matches_mne_and_skips_nan(rng):
    p = rng.uniform(0, 0.1, 9)
    p[[2, 6]] = np.nan
    adjusted, significant = fdr_correction(p, alpha=0.05)
    ref_sig, ref_adj = mne.stats.fdr_correction(p[np.isfinite(p)], alpha=0.05)
    np.testing.assert_allclose(adjusted[np.isfinite(p)], ref_adj, rtol=1e-12)
    np.testing.assert_array_equal(significant[np.isfinite(p)], ref_sig)
    assert np.isnan(adjusted[[2, 6]]).all() and not significant[[2, 6]].any()
    with pytest.raises(ValueError, match="`alpha` must be a float in"):
        fdr_correction(p, alpha=1.5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "shuffle"}, "`method` must be one of"),
        ({"block_length": 5}, "at least 2 blocks"),
        ({"method": "circular_shift", "block_length": 5}, "at most 4"),
        ({"n_permutations": 0}, "`n_permutations` must be a positive int"),
        ({"block_length": 2.5}, "`block_length` must be a positive int"),
    ],
)
def test_permutation_errors(rng, kwargs, match):
    y = rng.standard_normal((9, 7))
    with pytest.raises(ValueError, match=match):
        permutation_null(y, y, **kwargs)


def test_constant_target_gives_nan_p(rng):
    y_true = rng.standard_normal((40, 7))
    y_true[:, 3] = 1.0
    r, p = permutation_test(y_true, rng.standard_normal((40, 7)), n_permutations=9, block_length=4)
    assert np.isnan(r[3]) and np.isnan(p[3]) and np.isfinite(np.delete(p, 3)).all()
    assert zscore_time(y_true)[:, 3].tolist() == [0.0] * 40

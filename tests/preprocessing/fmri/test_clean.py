"""Numerical core: one projection equals nilearn's signal.clean."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from nilearn.signal import clean

from neuroflow.preprocessing.fmri.clean import (
    clean_signals,
    orthonormal_basis,
    polynomial_drifts,
    project_out,
    zscore,
)


def _nilearn(y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return clean(y, detrend=True, standardize="zscore_sample", t_r=2.0, **kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matches_nilearn_cosine(rng, dtype):
    n, v = 97, 203
    t = np.arange(n)
    y = rng.normal(size=(n, v)) + 0.05 * t[:, None] + np.sin(t / 30)[:, None]
    conf = rng.normal(size=(n, 9))
    y = (y + conf @ rng.normal(size=(9, v))).astype(dtype)
    ours = clean_signals(y, t_r=2.0, high_pass=0.01, confounds=conf)
    ref = _nilearn(y, confounds=conf, filter="cosine", high_pass=0.01)
    assert ours.dtype == dtype
    assert np.abs(ours - ref).max() < 1e-4


def test_matches_nilearn_without_confounds_and_filter(rng):
    y = rng.normal(size=(88, 7)) + 3.0
    ours = clean_signals(y, t_r=2.0, filter=None)
    ref = _nilearn(y, filter=False)
    np.testing.assert_allclose(ours, ref, atol=1e-10)


def test_matches_nilearn_butterworth(rng):
    y = rng.normal(size=(120, 9)) + np.linspace(0, 4, 120)[:, None]
    conf = rng.normal(size=(120, 4))
    ours = clean_signals(
        y, t_r=2.0, filter="butterworth", high_pass=0.01, low_pass=0.1, confounds=conf
    )
    ref = _nilearn(y, confounds=conf, filter="butterworth", high_pass=0.01, low_pass=0.1)
    np.testing.assert_allclose(ours, ref, atol=1e-8)


def test_spike_regressors_match_nilearn(rng):
    y = rng.normal(size=(80, 8))
    spikes = np.zeros((80, 2))
    spikes[[10, 41], [0, 1]] = 1
    y[10] += 50
    ours = clean_signals(y, t_r=2.0, high_pass=0.01, confounds=spikes)
    ref = _nilearn(y, confounds=spikes, filter="cosine", high_pass=0.01)
    np.testing.assert_allclose(ours, ref, atol=1e-8)
    np.testing.assert_allclose(ours[[10, 41]], 0, atol=1e-8)


def test_planted_drift_and_confounds_removed(rng):
    n, v = 150, 11
    t = np.arange(n) * 2.0
    noise = rng.normal(size=(n, v))
    conf = rng.normal(size=(n, 3))
    y = noise + 10 * (t / t[-1])[:, None] ** 2 + conf @ rng.normal(0, 5, (3, v))
    out = clean_signals(y, t_r=2.0, detrend_order=2, high_pass=0.008, confounds=conf)
    # residual is orthogonal to the planted components
    assert np.abs(out.T @ conf).max() < 1e-8
    assert np.abs(out.T @ (t**2 - (t**2).mean())).max() < 1e-6
    # and close to the (z-scored) noise
    corr = [np.corrcoef(out[:, i], noise[:, i])[0, 1] for i in range(v)]
    assert min(corr) > 0.9


def test_censoring_drops_volumes(rng):
    y = rng.normal(size=(50, 7))
    keep = np.ones(50, bool)
    keep[[3, 20]] = False
    out = clean_signals(y, t_r=1.5, high_pass=0.02, sample_mask=keep)
    assert out.shape == (48, 7)
    np.testing.assert_allclose(out.std(axis=0, ddof=1), 1.0, rtol=1e-10)


def test_orthonormal_basis_drops_collinear_columns(rng):
    x = rng.normal(size=(40, 3))
    x = np.c_[x, x[:, 0] + x[:, 1], np.zeros(40)]
    q = orthonormal_basis(x)
    assert q.shape == (40, 3)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)


def test_project_out_in_place_blocks(rng):
    y = rng.normal(size=(30, 25))
    q = orthonormal_basis(polynomial_drifts(np.arange(30.0), 2))
    expected = y - q @ (q.T @ y)
    project_out(y, q, block=7)
    np.testing.assert_allclose(y, expected, atol=1e-12)


def test_zscore_constant_column_stays_zero(rng):
    y = np.c_[rng.normal(size=(9, 2)), np.full(9, 3.0)]
    zscore(y)
    np.testing.assert_allclose(y[:, 2], 0.0)
    np.testing.assert_allclose(y[:, :2].std(axis=0, ddof=1), 1.0)


def test_bad_arguments(rng):
    y = rng.normal(size=(20, 3))
    with pytest.raises(ValueError, match="`t_r` must be a positive"):
        clean_signals(y, t_r=0)
    with pytest.raises(ValueError, match=r"`confounds` must have shape \(20, n_confounds\)"):
        clean_signals(y, t_r=1.0, confounds=np.ones((19, 2)))
    with pytest.raises(ValueError, match="`filter` must be"):
        clean_signals(y, t_r=1.0, filter="fir")
    with pytest.raises(ValueError, match="`order` must be a non-negative int"):
        polynomial_drifts(np.arange(5.0), -1)
    with pytest.raises(ValueError, match="Censoring is not supported"):
        keep = np.ones(20, bool)
        keep[4] = False
        clean_signals(y, t_r=1.0, filter="butterworth", high_pass=0.05, sample_mask=keep)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("n_voxels", [9, 1300])
def test_clean_signals_leaves_input_untouched(order: str, n_voxels: int) -> None:
    """With ``copy=True`` (the default) the caller's array is never modified."""
    rng = np.random.default_rng(7)
    y = np.asarray(rng.standard_normal((57, n_voxels)) + 100, dtype=np.float32, order=order)
    before = y.copy()
    out = clean_signals(y, t_r=2.0, detrend_order=1, high_pass=0.01)
    np.testing.assert_array_equal(y, before)
    assert not np.shares_memory(out, y)
    np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-4)
    inplace = clean_signals(y, t_r=2.0, detrend_order=1, high_pass=0.01, copy=False)
    np.testing.assert_allclose(inplace, out, atol=1e-5)


@pytest.mark.parametrize("detrend_order", [0, 1, 2])
def test_cleaning_basis_reproduces_the_cleaning(rng, detrend_order):
    from neuroflow.preprocessing.fmri.clean import cleaning_basis

    n = 73
    y = rng.standard_normal((n, 6)) + np.linspace(0, 5, n)[:, None] + 50.0
    conf = rng.standard_normal((n, 4))
    keep = np.ones(n, bool)
    keep[[3, 40, 41]] = False
    cfg = {
        "t_r": 2.0,
        "detrend_order": detrend_order,
        "high_pass": 0.01,
        "confounds": conf,
        "sample_mask": keep,
    }
    cleaned = clean_signals(y, **cfg)
    q = cleaning_basis(n, **cfg)
    assert q.shape[0] == keep.sum()
    np.testing.assert_allclose(q.T @ q, np.eye(q.shape[1]), atol=1e-10)
    resid = y[keep] - q @ (q.T @ y[keep])
    expected = resid / resid.std(axis=0, ddof=1)
    np.testing.assert_allclose(cleaned, expected, atol=1e-8)


def test_cleaning_basis_is_none_for_butterworth():
    from neuroflow.preprocessing.fmri.clean import cleaning_basis

    assert cleaning_basis(50, t_r=2.0, filter="butterworth", high_pass=0.01) is None
    conf = np.ones((50, 1))
    assert cleaning_basis(50, t_r=2.0, detrend_order=None, confounds=conf) is None
    with pytest.raises(ValueError, match="`t_r` must be a positive float"):
        cleaning_basis(50, t_r=0.0)

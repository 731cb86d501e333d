"""Noise ceilings: Spearman–Brown split-half and NSD's ncsnr."""

import numpy as np
import pytest

from neuroflow.evaluation.noise_ceiling import (
    ceiling_r_from_reliability,
    ncsnr,
    ncsnr_to_nc,
    noise_ceiling_r,
    normalize_score,
    spearman_brown,
    split_half_reliability,
)


def _simulate(rng, n_repeats, n_times, signal_sd):
    signal = rng.standard_normal((n_times, signal_sd.size)) * signal_sd
    return signal[None] + rng.standard_normal((n_repeats, n_times, signal_sd.size))


def test_spearman_brown_equal_halves_is_classical():
    r = np.array([-0.2, 0.0, 0.3, 0.6, 1.0, np.nan])
    rel = spearman_brown(r, n_first=2, n_second=2, n_total=4)
    expected = np.where(r > 0, 2 * r / (1 + r), 0.0)
    np.testing.assert_allclose(rel[:5], expected[:5], rtol=1e-12)
    assert np.isnan(rel[5])


def test_spearman_brown_uneven_halves_is_exact():
    q = np.array([0.5, 2.0, 7.0])  # noise-to-signal variance ratio
    a, b, n = 1, 2, 3
    r_half = 1 / np.sqrt((1 + q / a) * (1 + q / b))
    rel = spearman_brown(r_half, n_first=a, n_second=b, n_total=n)
    np.testing.assert_allclose(rel, 1 / (1 + q / n), rtol=1e-10)


def test_split_half_two_repeats_matches_direct(rng):
    y = rng.standard_normal((2, 9, 7))
    y[1] += y[0]
    r = np.array([np.corrcoef(y[0, :, v], y[1, :, v])[0, 1] for v in range(7)])
    expected = np.where(r > 0, 2 * r / (1 + r), 0.0)
    np.testing.assert_allclose(split_half_reliability(y), expected, rtol=1e-10)


def test_ncsnr_matches_direct_formula(rng):
    y = rng.standard_normal((3, 8, 7)) + rng.standard_normal((1, 8, 7))
    z = (y - y.mean(1, keepdims=True)) / y.std(1, keepdims=True)
    var_noise = np.array([[np.var(z[:, t, v], ddof=1) for v in range(7)] for t in range(8)])
    var_noise = var_noise.mean(0)
    expected = np.sqrt(np.maximum(0, 1 - var_noise)) / np.sqrt(var_noise)
    np.testing.assert_allclose(ncsnr(y), expected, rtol=1e-10)


def test_ncsnr_to_nc_formula():
    snr = np.array([0.0, 0.5, 2.0, np.inf, np.nan])
    nc = ncsnr_to_nc(snr, 4)
    np.testing.assert_allclose(nc[:3], 100 * snr[:3] ** 2 / (snr[:3] ** 2 + 1 / 4))
    assert nc[3] == 100.0 and np.isnan(nc[4])
    with pytest.raises(ValueError, match="`n_repeats` must be a positive int"):
        ncsnr_to_nc(snr, 0)


@pytest.mark.parametrize("method", ["split_half", "ncsnr"])
@pytest.mark.parametrize("n_repeats", [2, 3, 4])
def test_ceiling_recovers_planted_value(rng, method, n_repeats):
    signal_sd = np.array([0.3, 0.6, 1.0, 2.0, 0.8, 1.5, 0.4])
    y = _simulate(rng, n_repeats, 3000, signal_sd)
    expected = np.sqrt(signal_sd**2 / (signal_sd**2 + 1 / n_repeats))
    ceiling = noise_ceiling_r(y, method=method)
    np.testing.assert_allclose(ceiling, expected, atol=0.03)


def test_ceiling_of_pure_noise_is_small(rng):
    y = rng.standard_normal((4, 500, 9))
    for method in ("split_half", "ncsnr"):
        assert np.nanmean(noise_ceiling_r(y, method=method)) < 0.25


def test_noise_ceiling_undefined_cases(rng):
    y = rng.standard_normal((1, 8, 7))
    with pytest.warns(RuntimeWarning, match="at least 2 repeats"):
        assert np.isnan(noise_ceiling_r(y, method="ncsnr")).all()
    assert noise_ceiling_r(rng.standard_normal((2, 8, 7)), method="none").shape == (7,)
    assert np.isnan(noise_ceiling_r(rng.standard_normal((2, 8, 7)), method="none")).all()
    with pytest.raises(ValueError, match="`method` must be one of"):
        noise_ceiling_r(y, method="bootstrap")
    with pytest.raises(ValueError, match="at least 2 repeats"):
        split_half_reliability(y)
    with pytest.raises(ValueError, match=r"\(n_repeats, \.\.\., n_times, n_targets\)"):
        ncsnr(rng.standard_normal((8, 7)))


def test_split_half_is_seeded(rng):
    y = _simulate(rng, 6, 40, np.full(7, 0.5))
    a = split_half_reliability(y, n_splits=5, seed=1)
    np.testing.assert_array_equal(a, split_half_reliability(y, n_splits=5, seed=1))
    assert not np.array_equal(a, split_half_reliability(y, n_splits=5, seed=2))


def test_normalize_score():
    out = normalize_score(np.array([0.2, 0.2, 0.2, 0.2]), np.array([0.4, 0.0, np.nan, -0.1]))
    np.testing.assert_allclose(out[0], 0.5)
    assert np.isnan(out[1:]).all()
    np.testing.assert_allclose(ceiling_r_from_reliability([0.25, -0.1, 1.5]), [0.5, 0.0, 1.0])


def test_methods_coincide_for_two_repeats(rng):
    # with 2 z-scored repeats, 1 - var_noise is their correlation, so NC = 2r / (1 + r)
    y = _simulate(rng, 2, 9, np.full(7, 0.8))
    np.testing.assert_allclose(
        noise_ceiling_r(y, method="ncsnr"), noise_ceiling_r(y, method="split_half"), rtol=1e-10
    )

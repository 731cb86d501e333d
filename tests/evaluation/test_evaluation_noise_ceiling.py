"""Noise ceilings: Spearman–Brown split-half and NSD's ncsnr."""

import numpy as np
import pytest

from neuroflow.evaluation.noise_ceiling import (
    MIN_SPLIT_SAMPLES,
    ceiling_r_from_reliability,
    estimate_noise_ceiling,
    ncsnr,
    ncsnr_to_nc,
    noise_ceiling_r,
    normalize_score,
    separated_samples,
    spearman_brown,
    split_half,
    split_half_reliability,
)
from neuroflow.evaluation.stage import exceeds_ceiling


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


def _close_and_far(rng, n_stimuli, n_close, n_targets, signal_sd, noise_corr):
    """Two repeats per stimulus: the first ``n_close`` stimuli shown 3 s apart, their
    noise correlated as single-trial estimates of nearby trials are; the others in
    different runs. Returns responses (2, n_stimuli, n_targets), onsets and runs."""
    signal = rng.standard_normal((n_stimuli, n_targets)) * signal_sd
    shared = rng.standard_normal((n_stimuli, n_targets))
    own = rng.standard_normal((2, n_stimuli, n_targets))
    noise = own.copy()
    c = np.sqrt(noise_corr)
    noise[:, :n_close] = c * shared[None, :n_close] + np.sqrt(1 - c**2) * own[:, :n_close]
    onsets = np.stack([np.arange(n_stimuli) * 8.0, np.arange(n_stimuli) * 8.0 + 3.0])
    runs = np.array([["run-1"] * n_stimuli, ["run-1"] * n_stimuli], dtype=object)
    runs[1, n_close:] = "run-2"
    onsets[1, n_close:] = onsets[0, n_close:]  # same clock time, other run: far apart
    return signal[None] + noise, onsets, runs


def test_separated_samples_pairs_only_distant_or_other_run_repeats():
    onsets = np.array([[0.0, 10.0, 50.0, 0.0, np.nan], [3.0, 30.0, 20.0, 1.0, 4.0]])
    runs = np.array([["a"] * 5, ["a", "a", "a", "b", "a"]])
    keep = separated_samples(
        np.array([0]), np.array([1]), onsets=onsets, groups=runs, min_separation=12.0
    )
    np.testing.assert_array_equal(keep, [False, True, True, True, True])
    assert separated_samples(np.array([0]), np.array([1]), onsets=onsets, min_separation=0.0).all()


@pytest.mark.parametrize("seed", range(8))
def test_close_repeats_pure_noise_ceiling_has_no_positive_bias(seed):
    rng = np.random.default_rng(seed)
    y, onsets, runs = _close_and_far(rng, 90, 54, 600, 0.0, noise_corr=0.25)
    naive = split_half(y)
    separated = split_half(y, onsets=onsets, groups=runs, min_separation=12.0)
    # the overlap makes noise look reliable unless close repeats are kept apart
    assert np.mean(naive.r_half) > 0.12
    assert np.median(noise_ceiling_r(y)) > 0.45
    assert separated.n_samples == 36 and separated.n_excluded == 54
    r = separated.r_half
    assert abs(r.mean()) < 3 * r.std() / np.sqrt(r.size)
    # the ceiling's interval contains 0 for all but about 2.5 % of pure-noise targets
    ceiling = estimate_noise_ceiling(y, onsets=onsets, groups=runs, min_separation=12.0)
    assert np.mean(ceiling.low > 0) < 0.05
    assert "36 of 90 test samples" in ceiling.notes[0]


def test_close_repeats_planted_ceiling_matches_simulated_value(rng):
    signal_sd = np.repeat([0.5, 1.0, 2.0], 400)
    y, onsets, runs = _close_and_far(rng, 150, 60, signal_sd.size, signal_sd, noise_corr=0.3)
    expected = np.sqrt(signal_sd**2 / (signal_sd**2 + 1 / 2))
    ceiling = estimate_noise_ceiling(y, onsets=onsets, groups=runs, min_separation=12.0)
    naive = noise_ceiling_r(y)
    for level in np.unique(signal_sd):
        sel = signal_sd == level
        truth = expected[sel][0]
        assert np.median(ceiling.r[sel]) == pytest.approx(truth, abs=0.03)
        # the interval covers the simulated ceiling about 95 % of the time
        covered = (ceiling.low[sel] <= truth) & (truth <= ceiling.high[sel])
        assert 0.9 < covered.mean() <= 1.0
    assert np.median(naive[signal_sd == 0.5]) > expected[0] + 0.04


def test_too_few_separated_repeats_leave_the_ceiling_undefined(rng):
    y, onsets, runs = _close_and_far(rng, 20, 20 - MIN_SPLIT_SAMPLES + 1, 7, 1.0, 0.2)
    with pytest.warns(RuntimeWarning, match="Fewer than 5 of the 20 test samples"):
        ceiling = estimate_noise_ceiling(y, onsets=onsets, groups=runs, min_separation=12.0)
    assert np.isnan(ceiling.r).all() and np.isnan(ceiling.low).all()
    assert ceiling.n_samples == 0 and "undefined (NaN)" in ceiling.notes[0]
    with pytest.raises(ValueError, match=r"`onsets` must have shape \(n_repeats, n_times\)"):
        split_half(y, onsets=onsets[:, :5], min_separation=12.0)
    with pytest.raises(ValueError, match="`min_separation` must be a number of seconds"):
        split_half(y, onsets=onsets, min_separation=-1.0)


def test_interval_brackets_the_ceiling_and_nan_stays_nan(rng):
    y = _simulate(rng, 4, 60, np.array([0.0, 0.5, 1.0, 3.0, 0.7]))
    y[..., 4] = 1.0  # a constant target: undefined everywhere
    ceiling = estimate_noise_ceiling(y)
    ok = np.isfinite(ceiling.r)
    assert not ok[4] and np.isnan(ceiling.low[4]) and np.isnan(ceiling.high[4])
    assert (ceiling.low[ok] <= ceiling.r[ok]).all() and (ceiling.r[ok] <= ceiling.high[ok]).all()
    other = estimate_noise_ceiling(y, method="ncsnr")
    assert np.isnan(other.low).all() and np.isnan(other.high).all()


def test_exceeds_ceiling_flags_only_scores_beyond_the_interval():
    r = np.array([0.55, 0.75, 0.75, np.nan, 0.9])
    ceiling = np.array([0.5, 0.5, 0.5, 0.5, 0.1])
    high = np.array([0.6, 0.6, np.nan, 0.6, 0.3])
    reliable = np.array([True, True, True, True, False])
    # above the ceiling within its interval: not flagged; beyond it: flagged
    np.testing.assert_array_equal(
        exceeds_ceiling(r, ceiling, high, reliable), [False, True, True, False, False]
    )

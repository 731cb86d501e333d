"""NSD's ncsnr and noise ceiling from single-trial betas of repeated stimuli."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.evaluation.noise_ceiling import ncsnr_to_nc
from neuroflow.preprocessing.fmri.ncsnr import (
    ncsnr_from_betas,
    noise_ceiling_from_ncsnr,
    noise_variance,
    repeat_counts,
    typical_repeat_count,
    zscore_within,
)


def simulate_trials(rng, counts, signal_sd, noise_sd, *, n_runs=3):
    """Betas of stimuli shown ``counts[s]`` times, spread over runs with run offsets.

    Returns betas (n_trials, n_voxels), stimulus and run labels, and the signal
    (n_stimuli, n_voxels).
    """
    signal = rng.standard_normal((len(counts), signal_sd.size)) * signal_sd
    stimulus = np.repeat(np.arange(len(counts)), counts)
    rng.shuffle(stimulus)
    run = np.arange(stimulus.size) % n_runs
    noise = rng.standard_normal((stimulus.size, signal_sd.size)) * noise_sd
    offset = rng.normal(0, 5, (n_runs, signal_sd.size))  # removed by z-scoring per run
    scale = rng.uniform(0.5, 2.0, (n_runs, 1))  # run-wise gain, also removed
    betas = (signal[stimulus] + noise) * scale[run] + offset[run]
    return betas, np.array([f"s{s:04d}.png" for s in stimulus]), run, signal


def test_recovers_known_ncsnr(rng):
    signal_sd = np.linspace(0.5, 2.0, 9)
    counts = np.full(1000, 3)
    betas, stim, run, _ = simulate_trials(rng, counts, signal_sd, noise_sd=1.0)
    snr = ncsnr_from_betas(betas, stim, groups=run)
    assert snr.shape == (9,)
    np.testing.assert_allclose(snr, signal_sd, rtol=0.1)
    # without per-run z-scoring, run offsets between repeats count as noise
    assert np.all(ncsnr_from_betas(betas, stim) < 0.7 * snr)


def test_unequal_repeat_counts(rng):
    """ncsnr is recovered; NC with per-stimulus n is the R² of the averaged responses."""
    signal_sd = np.full(7, 0.8)
    counts = rng.choice([1, 2, 3, 5], size=3000, p=[0.2, 0.3, 0.3, 0.2])
    betas, stim, run, signal = simulate_trials(rng, counts, signal_sd, noise_sd=1.0, n_runs=1)
    snr = ncsnr_from_betas(betas, stim, groups=run)
    np.testing.assert_allclose(snr, 0.8, rtol=0.06)
    # NSD's correction: 1/n -> mean over stimuli of 1/n_s
    names, n_s = repeat_counts(stim)
    nc = noise_ceiling_from_ncsnr(snr, n_s)
    index = np.searchsorted(names, stim)
    means = np.stack([betas[index == s].mean(axis=0) for s in range(names.size)])
    truth = signal[[int(n[1:5]) for n in names]]
    r2 = np.array([np.corrcoef(means[:, v], truth[:, v])[0, 1] ** 2 for v in range(7)])
    np.testing.assert_allclose(nc / 100, r2, atol=0.03)
    expected = 100 * 0.64 / (0.64 + np.mean(1.0 / n_s))
    np.testing.assert_allclose(nc, expected, atol=3.0)
    # a single count instead would be far off
    assert abs(noise_ceiling_from_ncsnr(snr, 5).mean() - r2.mean() * 100) > 10


def test_pooled_noise_variance_equals_nsd_mean_for_equal_counts(rng):
    betas = rng.standard_normal((3 * 8, 5))
    stim = np.repeat([f"s{i}" for i in range(8)], 3)
    per_stimulus = betas.reshape(8, 3, 5).var(axis=1, ddof=1).mean(axis=0)
    np.testing.assert_allclose(noise_variance(betas, stim), per_stimulus, rtol=1e-12)
    # with unequal counts: the sum of squares over the total degrees of freedom
    stim_u = np.array(["a"] * 2 + ["b"] * 5 + ["c"] + [""] * 3 + ["d"] * 13)
    x = rng.standard_normal((stim_u.size, 4))
    ss = sum(((x[stim_u == s] - x[stim_u == s].mean(0)) ** 2).sum(0) for s in "abd")
    np.testing.assert_allclose(noise_variance(x, stim_u), ss / (1 + 4 + 12), rtol=1e-12)


def test_noise_ceiling_matches_evaluation_for_equal_counts(rng):
    snr = np.r_[rng.uniform(0, 3, 6), 0.0, np.inf, np.nan]
    np.testing.assert_allclose(
        noise_ceiling_from_ncsnr(snr, 3), ncsnr_to_nc(snr, 3), equal_nan=True
    )
    np.testing.assert_allclose(
        noise_ceiling_from_ncsnr(snr, np.array([3, 3, 3])), ncsnr_to_nc(snr, 3), equal_nan=True
    )


def test_edge_voxels(rng):
    signal = rng.standard_normal(10)
    stim = np.repeat([f"s{i}" for i in range(10)], 2)
    betas = np.stack(
        [np.repeat(signal, 2), np.zeros(20), rng.standard_normal(20)], axis=1
    )  # noiseless, constant, pure noise
    snr = ncsnr_from_betas(betas, stim)
    assert np.isinf(snr[0])
    assert np.isnan(snr[1])
    assert np.isfinite(snr[2])
    nc = noise_ceiling_from_ncsnr(snr, 2)
    assert nc[0] == 100 and np.isnan(nc[1])
    # no repeated stimulus: no noise estimate
    assert np.isnan(ncsnr_from_betas(betas[::2], stim[::2])).all()


def test_zscore_within_and_counts(rng):
    betas = rng.normal(3, 2, (11, 4))
    groups = np.array([0] * 5 + [1] * 6)
    z = zscore_within(betas, groups)
    for g in (0, 1):
        np.testing.assert_allclose(z[groups == g].mean(0), 0, atol=1e-12)
        np.testing.assert_allclose(z[groups == g].std(0, ddof=1), 1)
    names, counts = repeat_counts(["b", "a", "", "b", "c", "b", ""])
    assert list(names) == ["a", "b", "c"] and list(counts) == [1, 3, 1]
    assert typical_repeat_count([3, 3, 2, 2, 1, 1, 1]) == 3
    assert typical_repeat_count([2, 2, 2, 3]) == 2
    assert typical_repeat_count([1, 1]) is None


def test_errors(rng):
    with pytest.raises(ValueError, match=r"`betas` must be 2-D \(n_trials, n_voxels\)"):
        ncsnr_from_betas(np.zeros(5), ["a"] * 5)
    with pytest.raises(ValueError, match=r"`stimuli` must have one label per trial, shape \(4,\)"):
        noise_variance(np.zeros((4, 2)), ["a", "a"])
    with pytest.raises(ValueError, match="Group 1 must hold more than 1 trial"):
        zscore_within(np.zeros((3, 2)), [0, 0, 1])
    with pytest.raises(ValueError, match="`n_repeats` must be a positive int"):
        noise_ceiling_from_ncsnr(np.ones(3), 0)
    with pytest.raises(ValueError, match="`n_repeats` must be a positive int"):
        noise_ceiling_from_ncsnr(np.ones(3), [2.5, 3])

"""Significance at scale: tail approximations, calibration, max-statistic FWER, clusters.

The data are autocorrelated like BOLD time courses (AR processes); every check is made
over many seeds. Full-size versions (200,000 targets, 50 and 200 seeds) are in
``bench/bench_significance.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

from neuroflow.evaluation.permutation import permutation_null, permutation_pvalues
from neuroflow.evaluation.prewhitening import ar_prewhiten, projected_lag_matrix
from neuroflow.evaluation.significance import (
    cluster_mass_test,
    exact_pvalues,
    fisher_z,
    gaussian_tail_pvalues,
    gpd_tail_pvalues,
    maxstat_pvalues,
    permutation_inference,
    tail_pvalues,
)


def _ar(rng: np.random.Generator, n_times: int, n_targets: int, coef: float) -> np.ndarray:
    return lfilter([1.0], [1.0, -coef], rng.standard_normal((n_times, n_targets)), axis=0)


def _planted(rng, n_times, n_targets, n_signal, strength, coef=0.6):
    """Observations whose first ``n_signal`` targets follow the prediction's drive."""
    drive = _ar(rng, n_times, 1, coef)
    y = _ar(rng, n_times, n_targets, coef)
    y[:, :n_signal] += strength * drive
    pred = drive + 0.5 * _ar(rng, n_times, n_targets, coef)
    return y, pred


def test_exact_pvalues_are_the_plus_one_permutation_pvalues(rng):
    obs = rng.standard_normal(37)
    null = rng.standard_normal((211, 37))
    p, count = exact_pvalues(obs, null)
    np.testing.assert_array_equal(p, permutation_pvalues(obs, null))
    np.testing.assert_array_equal(count, (null >= obs).sum(axis=0))
    p2, _ = exact_pvalues(obs, null, alternative="two-sided")
    np.testing.assert_array_equal(p2, permutation_pvalues(obs, null, alternative="two-sided"))


@pytest.mark.slow
def test_tail_pvalues_agree_with_a_100000_permutation_reference():
    """Where the reference resolves p (>= 10 exceedances of 100,000) and the exact test
    with 1,000 permutations cannot (< 10), the Gaussian tail is within a factor 4 of the
    reference and the generalized Pareto tail is conservative (never 2x smaller)."""
    ratios = {"gaussian": [], "gpd": []}
    for seed in range(3):
        rng = np.random.default_rng(seed)
        y, pred = _planted(rng, 233, 61, 61, np.linspace(0.0, 0.4, 61))
        r, ref_null = permutation_null(y, pred, n_permutations=100_000, block_length=10, seed=7)
        p_ref, c_ref = exact_pvalues(r, ref_null)
        _, null = permutation_null(y, pred, n_permutations=1000, block_length=10, seed=8)
        _, count = exact_pvalues(r, null)
        both = (c_ref >= 10) & (count < 10)
        for tail in ratios:
            p, p_exact = tail_pvalues(r, null, tail=tail)
            np.testing.assert_array_equal(p[count >= 10], p_exact[count >= 10])
            ratios[tail].append(np.log10(p[both] / p_ref[both]))
    gauss, gpd = np.concatenate(ratios["gaussian"]), np.concatenate(ratios["gpd"])
    assert gauss.size >= 30, gauss.size
    assert np.abs(gauss).max() < np.log10(4.0), gauss
    assert np.median(np.abs(gauss)) < np.log10(1.5)
    assert gpd.min() > -np.log10(2.0), gpd
    assert np.median(gpd) < 1.0  # within a factor of 10 half the time


def test_tail_functions_on_known_nulls(rng):
    """A Gaussian null: both tails track the true normal tail beyond the permutations."""
    from scipy.stats import norm

    null = np.tanh(0.1 * rng.standard_normal((4000, 5)))
    obs = np.tanh(0.1 * np.array([3.0, 3.5, 4.0, 4.5, 2.5]))
    truth = norm.sf([3.0, 3.5, 4.0, 4.5, 2.5])
    gauss = gaussian_tail_pvalues(obs, null)
    assert np.all(np.abs(np.log10(gauss / truth)) < 0.25), (gauss, truth)
    gpd = gpd_tail_pvalues(obs, null)
    # conservative (an exponential tail at most), never far below the truth
    assert np.all(gpd >= 0.5 * truth) and np.all(gpd <= 50 * truth), (gpd, truth)
    # two-sided doubles a symmetric tail
    two = gaussian_tail_pvalues(obs, null, alternative="two-sided")
    np.testing.assert_allclose(two, 2 * gauss, rtol=0.05)
    assert np.isnan(gaussian_tail_pvalues(np.array([np.nan]), null[:, :1])).all()
    np.testing.assert_allclose(fisher_z(np.array([0.5, 1.0]))[0], np.arctanh(0.5))
    assert np.isfinite(fisher_z(np.array([1.0]))).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tail": "pareto"}, r"`tail` must be one of none, gpd, gaussian, got 'pareto'"),
        ({"alternative": "less"}, r"`alternative` must be one of greater, two-sided"),
    ],
)
def test_tail_errors(rng, kwargs, match):
    with pytest.raises(ValueError, match=match):
        tail_pvalues(rng.standard_normal(3), rng.standard_normal((50, 3)), **kwargs)


def test_gpd_needs_enough_null_values(rng):
    with pytest.raises(
        ValueError, match=r"at least 40 values per target for a tail fit, got 30 instead"
    ):
        gpd_tail_pvalues(rng.standard_normal(2), rng.standard_normal((30, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("coef", [0.6, 0.85])
def test_pvalues_are_calibrated_on_pure_noise(coef):
    """Smooth data and predictions without any relation: p <= alpha in about alpha of
    the targets at 0.05, 0.01 and 0.001 (18,000 targets over 9 seeds); without the
    whitening the null is too narrow (many times too many small p-values)."""
    n_seeds, n_targets = 9, 2000
    rates = {0.05: [], 0.01: [], 0.001: []}
    raw_small = 0
    for seed in range(n_seeds):
        rng = np.random.default_rng(100 + seed)
        y, pred = _ar(rng, 203, n_targets, coef), _ar(rng, 203, n_targets, coef)
        out = permutation_inference(y, pred, block_length=10, seed=seed, prewhiten=2)
        for alpha in rates:
            rates[alpha].append(np.mean(out.p <= alpha))
        raw = permutation_inference(y, pred, block_length=10, seed=seed, prewhiten=0)
        raw_small += int((raw.p <= 0.001).sum())
    n = n_seeds * n_targets
    for alpha, values in rates.items():
        rate = float(np.mean(values))
        # p-values of one seed share their permutations: allow 4 binomial SEs plus 30 %
        assert rate <= 1.3 * alpha + 4 * np.sqrt(alpha / n), (alpha, rate)
        assert rate >= 0.5 * alpha - 4 * np.sqrt(alpha / n), (alpha, rate)
    if coef == 0.85:
        assert raw_small / n > 2 * 0.001, raw_small / n  # the miscalibration it removes


@pytest.mark.slow
def test_fdr_finds_planted_signal_at_a_nominal_false_discovery_proportion():
    """20,000 targets, 1 % with a planted drive (r about 0.4 over 200 time points, as in
    the planted ROI of an event-related study), 10 seeds: BH at q = 0.05 finds most
    signal targets and the false discovery proportion averages at most 0.05. The exact
    p-values alone (1,000 permutations) find none."""
    from neuroflow.evaluation.permutation import fdr_correction

    fdp, power = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        n_targets, n_signal = 20_000, 200
        y, pred = _planted(rng, 200, n_targets, n_signal, 0.5)
        out = permutation_inference(y, pred, block_length=10, seed=seed, prewhiten=2)
        _, sig = fdr_correction(out.p, alpha=0.05)
        found = sig[:n_signal].sum()
        fdp.append(sig[n_signal:].sum() / max(1, sig.sum()))
        power.append(found / n_signal)
        if seed == 0:
            _, sig_exact = fdr_correction(out.p_exact, alpha=0.05)
            assert sig_exact.sum() == 0
    # FDR is the expected proportion: the mean of 10 seeds, within its sampling error
    assert np.mean(fdp) <= 0.05 + 2 * np.std(fdp) / np.sqrt(len(fdp)), fdp
    assert np.mean(fdp) <= 0.07, fdp
    assert np.mean(power) >= 0.8, power


def test_maxstat_pvalues_count_group_maxima():
    z = np.array([3.0, 1.0, 2.5, 0.0])
    group_max = np.array([[2.0, 1.0], [3.5, 0.5], [1.0, 3.0]])
    p = maxstat_pvalues(z, group_max, np.array([0, 0, 1, 1]))
    np.testing.assert_allclose(p, [(1 + 1) / 4, (1 + 3) / 4, (1 + 1) / 4, (1 + 3) / 4])


@pytest.mark.slow
def test_maxstat_family_wise_error_over_200_seeds():
    """No signal anywhere: the share of seeds with any target at p_fwer <= 0.05 stays
    at 0.05 (binomial margin over 200 seeds), whole brain and per ROI; with signal, the
    planted targets survive."""
    any_sig = {"all": 0, "roi": 0}  # families with a false positive
    for seed in range(200):
        rng = np.random.default_rng(seed)
        y, pred = _ar(rng, 157, 301, 0.6), _ar(rng, 157, 301, 0.6)
        for family, groups in (("all", np.zeros(301)), ("roi", np.arange(301) % 3)):
            out = permutation_inference(
                y, pred, n_permutations=500, block_length=10, seed=seed, prewhiten=2,
                fwer_groups=groups,
            )  # fmt: skip
            for g in np.unique(groups):  # each ROI is its own family
                any_sig[family] += bool((out.p_fwer[groups == g] <= 0.05).any())
    margin = 2 * np.sqrt(0.05 * 0.95 / 200)
    assert any_sig["all"] / 200 <= 0.05 + margin, any_sig
    assert any_sig["roi"] / 600 <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 600), any_sig
    assert any_sig["all"] >= 2, any_sig  # not a test that can never reject
    rng = np.random.default_rng(0)
    y, pred = _planted(rng, 157, 301, 20, 0.8)
    out = permutation_inference(
        y, pred, block_length=10, seed=0, prewhiten=2, fwer_groups=[0] * 301
    )
    assert (out.p_fwer[:20] <= 0.05).mean() >= 0.9
    assert (out.p_fwer[20:] <= 0.05).sum() <= 1


def _grid(shape):
    return np.argwhere(np.ones(shape, dtype=bool))


def test_cluster_mass_finds_a_planted_blob(rng):
    shape = (9, 11, 7)
    ijk = _grid(shape)
    n = ijk.shape[0]
    n_times = 150
    blob = (np.abs(ijk - [4, 5, 3]) <= 1).all(axis=1)
    drive = _ar(rng, n_times, 1, 0.5)
    y = _ar(rng, n_times, n, 0.5)
    y[:, blob] += 0.5 * drive
    pred = np.repeat(drive, n, axis=1) + 0.5 * _ar(rng, n_times, n, 0.5)
    out = permutation_inference(
        y, pred, n_permutations=300, block_length=10, seed=1, prewhiten=2, cluster_ijk=ijk,
        cluster_threshold=3.1,
    )  # fmt: skip
    p = out.clusters.target_p()
    largest = out.clusters.labels == 1  # numbered from the largest mass
    assert out.clusters.p_values[0] <= 0.05
    assert blob[largest].mean() >= 0.8 and largest[blob].mean() >= 0.5
    assert (p[~blob] <= 0.05).sum() <= 3
    assert out.clusters.null_max_mass.shape == (300,)


@pytest.mark.slow
def test_cluster_family_wise_error_over_seeds():
    shape = (7, 8, 6)
    ijk = _grid(shape)
    hits = 0
    n_seeds = 120
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        y, pred = _ar(rng, 120, ijk.shape[0], 0.5), _ar(rng, 120, ijk.shape[0], 0.5)
        out = permutation_inference(
            y, pred, n_permutations=200, block_length=10, seed=seed, prewhiten=2,
            cluster_ijk=ijk, cluster_threshold=2.3,
        )  # fmt: skip
        hits += bool((out.clusters.p_values <= 0.05).any())
    assert hits / n_seeds <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / n_seeds), hits


def test_cluster_errors(rng):
    ijk = _grid((3, 3, 3))
    z = rng.standard_normal(27)
    null = rng.standard_normal((10, 27))
    with pytest.raises(ValueError, match=r"`connectivity` must be 6, 18 or 26, got 8"):
        cluster_mass_test(z, null, ijk, connectivity=8)
    with pytest.raises(ValueError, match=r"`ijk` must have shape \(27, 3\), got \(26, 3\)"):
        cluster_mass_test(z, null, ijk[:26])
    # 6-connectivity splits a diagonal pair that 26-connectivity joins
    diag = np.zeros(27)
    diag[[0, 13]] = 5.0  # (0, 0, 0) and (1, 1, 1)
    six = cluster_mass_test(diag, null * 0, ijk, connectivity=6, threshold=1.0)
    full = cluster_mass_test(diag, null * 0, ijk, connectivity=26, threshold=1.0)
    assert six.mass.size == 2 and full.mass.size == 1


def test_prewhitening_whitens_an_ar_process(rng):
    y = _ar(rng, 4001, 3, 0.8)
    pred = rng.standard_normal((4001, 3))
    yw, pw = ar_prewhiten(y, pred, 2)
    assert yw.shape == (3999, 3) and pw.shape == (3999, 3)
    lag1 = (yw[1:] * yw[:-1]).sum(0) / (yw**2).sum(0)
    assert np.all(np.abs(lag1) < 0.05), lag1
    raw1 = (y[1:] * y[:-1]).sum(0) / (y**2).sum(0)
    assert np.all(raw1 > 0.7)
    y0, _ = ar_prewhiten(y, pred, 0)
    np.testing.assert_allclose(y0, y - y.mean(0))
    with pytest.raises(ValueError, match=r"`order` must be a non-negative int, got -1"):
        ar_prewhiten(y, pred, -1)
    # constant targets stay zero, not NaN
    yc, _ = ar_prewhiten(np.ones((50, 2)), pred[:50, :2], 2)
    assert np.all(yc == 0)


def test_inference_reports_the_raw_correlation(rng):
    y, pred = _planted(rng, 120, 17, 5, 0.6)
    out = permutation_inference(y, pred, n_permutations=100, block_length=10, prewhiten=2, chunk=4)
    whole = permutation_inference(y, pred, n_permutations=100, block_length=10, prewhiten=2)
    from neuroflow.evaluation.metrics import pearson_r

    np.testing.assert_allclose(out.r, pearson_r(y, pred), rtol=1e-10)
    # chunks of targets share one set of permutations: identical to one chunk
    np.testing.assert_allclose(out.p, whole.p, rtol=1e-9)
    np.testing.assert_array_equal(out.p_exact, whole.p_exact)


def _cleaned_runs(rng, n_runs, n_times, n_targets, coef):
    """AR(``coef``) noise and smooth predictions, each run cleaned of 32 nuisance columns
    (mean, trend, cosines, motion-like walks, their squares and differences)."""
    ys, preds, bases = [], [], []
    t = np.arange(n_times)
    for _ in range(n_runs):
        walks = np.cumsum(rng.standard_normal((n_times, 6)), axis=0)
        steps = np.diff(np.vstack([np.zeros((1, 6)), walks]), axis=0)
        cosines = np.cos(np.pi * (t[:, None] + 0.5) * np.arange(1, 5) / n_times)
        columns = [np.ones(n_times), t / n_times, cosines, walks, walks**2, steps, steps**2]
        basis, _ = np.linalg.qr(np.column_stack(columns))
        y = _ar(rng, n_times, n_targets, coef)
        pred = _ar(rng, n_times, n_targets, 0.8)
        ys.append(y - basis @ (basis.T @ y))
        preds.append(pred - basis @ (basis.T @ pred))
        bases.append(basis)
    from scipy.linalg import block_diag

    return np.vstack(ys), np.vstack(preds), block_diag(*bases)


def test_projected_lag_matrix_matches_its_definition(rng):
    from scipy.linalg import block_diag

    segments = [23, 31]
    basis = block_diag(*[np.linalg.qr(rng.standard_normal((n, 4)))[0] for n in segments])
    n = basis.shape[0]
    m = np.eye(n) - basis @ basis.T
    within = block_diag(*[np.ones((k, k)) for k in segments])

    def shift(lag):
        return np.eye(n, k=lag) * within

    def sym(lag):
        return np.eye(n) if lag == 0 else shift(lag) + shift(lag).T

    dense = np.array([[np.trace(m @ shift(a) @ m @ sym(b)) for b in range(3)] for a in range(3)])
    np.testing.assert_allclose(projected_lag_matrix(basis, 2, segments), dense, atol=1e-10)
    # with nothing projected out the expected lagged sums are the autocovariances
    identity = projected_lag_matrix(np.zeros((n, 0)), 2, segments)
    np.testing.assert_allclose(identity, np.diag([n, n - 2, n - 4]))


def test_null_calibrated_on_cleaned_autocorrelated_runs():
    """Three runs of AR(0.3) noise, each cleaned of 32 of its 109 dimensions: with the
    nuisance basis (corrected whitening and widened null) p <= alpha in about alpha of
    6,000 targets; without it the null is far too narrow."""
    rng = np.random.default_rng(11)
    y, pred, basis = _cleaned_runs(rng, 3, 109, 6000, 0.3)
    kwargs = {"n_permutations": 200, "block_length": 10, "seed": 3, "prewhiten": 2}
    plain = permutation_inference(y, pred, segments=[109] * 3, **kwargs)
    fixed = permutation_inference(y, pred, nuisance=basis, segments=[109] * 3, **kwargs)
    assert np.mean(plain.p <= 0.01) > 0.03
    for alpha in (0.05, 0.01, 0.001):
        rate = float(np.mean(fixed.p <= alpha))
        assert 0.6 * alpha - 3 * np.sqrt(alpha / 6000) <= rate, (alpha, rate)
        assert rate <= 1.3 * alpha + 3 * np.sqrt(alpha / 6000), (alpha, rate)
    np.testing.assert_array_equal(fixed.r, plain.r)


def test_null_widened_for_projected_out_dimensions():
    """White noise cleaned of k nuisance dimensions varies in n - k dimensions only:
    without the widening p <= 0.05 comes out far too often, with it near 0.05."""
    rng = np.random.default_rng(7)
    n_times, n_nuisance, n_targets = 130, 40, 5000
    t = np.arange(n_times)
    cosines = np.cos(np.pi * (t[:, None] + 0.5) * np.arange(1, 8) / n_times)
    walks = np.cumsum(rng.standard_normal((n_times, n_nuisance - 8)), axis=0)
    basis, _ = np.linalg.qr(np.column_stack([np.ones(n_times), cosines, walks]))
    y = rng.standard_normal((n_times, n_targets))
    pred = _ar(rng, n_times, n_targets, 0.8)
    y -= basis @ (basis.T @ y)
    pred -= basis @ (basis.T @ pred)
    kwargs = {"n_permutations": 200, "block_length": 1, "seed": 1, "tail": "none"}
    plain = permutation_inference(y, pred, **kwargs)
    wide = permutation_inference(y, pred, nuisance=basis, **kwargs)
    assert np.mean(plain.p <= 0.05) > 0.075
    assert 0.035 <= np.mean(wide.p <= 0.05) <= 0.065, np.mean(wide.p <= 0.05)
    np.testing.assert_allclose(wide.r, plain.r, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"`nuisance` must have one row per time point \(130\)"):
        permutation_inference(y, pred, nuisance=basis[:-1], **kwargs)
    with pytest.raises(ValueError, match=r"must leave at least 3 of the 130"):
        permutation_inference(y, pred, nuisance=np.zeros((130, 128)), **kwargs)


def test_null_widening_matches_brute_force_over_every_realignment(rng):
    """The expected projection of a re-aligned prediction, exact over all 24 orders of 4
    blocks (a trailing block of 3 kept) and over every admissible circular shift."""
    import itertools

    from neuroflow.evaluation.permutation import valid_shifts
    from neuroflow.evaluation.prewhitening import null_widening, whitened_basis

    n_times, block, n_targets = 4 * 5 + 3, 5, 7
    nuisance = np.linalg.qr(rng.standard_normal((n_times, 3)))[0]
    basis = whitened_basis(nuisance, 0)
    assert basis.shape == (n_times, 4)
    pred = _ar(rng, n_times, n_targets, 0.8)
    p = pred - pred.mean(axis=0)
    norm = (p**2).sum(axis=0)
    retained = norm - ((basis.T @ p) ** 2).sum(axis=0)

    def expected(aligned):
        proj = [((basis.T @ a) ** 2).sum(axis=0) for a in aligned]
        return np.sqrt(retained / (norm - np.mean(proj, axis=0)))

    orders = itertools.permutations(range(4))
    blocks = [
        np.concatenate([p[o * block : (o + 1) * block] for o in order] + [p[20:]])
        for order in orders
    ]
    np.testing.assert_allclose(null_widening(pred, basis, block_length=block), expected(blocks))
    shifts = valid_shifts(n_times, 4)
    rolled = [np.roll(p, -s, axis=0) for s in shifts]
    got = null_widening(pred, basis, method="circular_shift", block_length=4)
    np.testing.assert_allclose(got, expected(rolled))
    # smooth cleaned predictions need more widening than white ones
    white = rng.standard_normal((n_times, n_targets))
    white -= basis @ (basis.T @ white)
    smooth = pred - basis @ (basis.T @ pred)
    assert np.median(null_widening(smooth, basis, block_length=block)) > np.median(
        null_widening(white, basis, block_length=block)
    )
    # whitening drops the first `order` samples of every run
    assert whitened_basis(nuisance, 2, [10, 13]).shape == (n_times - 4, 4)

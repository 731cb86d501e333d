"""RDMs, comparisons, noise ceilings and alignment, checked against rsatoolbox."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rsatoolbox.data import Dataset
from rsatoolbox.inference import boot_noise_ceiling
from rsatoolbox.rdm import RDMs, calc_rdm, compare
from scipy.spatial.distance import pdist

from neuroflow.rsa import compare as rsa_compare
from neuroflow.rsa.analysis import alignment_patterns, cross_temporal_rsa, roi_alignment
from neuroflow.rsa.compare import (
    compare_rdms,
    kendall_tau_a,
    noise_ceiling,
    noise_ceilings,
    rank_rows,
)
from neuroflow.rsa.kendall import pair_counts
from neuroflow.rsa.rdm import correlation_rdm, crossnobis_rdm, n_conditions, square_rdm


def test_correlation_rdm_matches_rsatoolbox_and_scipy(rng):
    p = rng.standard_normal((9, 13))
    ours = correlation_rdm(p)
    ref = calc_rdm(Dataset(p), method="correlation").get_vectors()[0]
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    np.testing.assert_allclose(ours, pdist(p, "correlation"), atol=1e-12)
    batched = correlation_rdm(rng.standard_normal((3, 7, 8, 5)))
    assert batched.shape == (3, 7, 28)
    with pytest.raises(ValueError, match="n_conditions >= 2"):
        correlation_rdm(p[:1])


def test_square_and_sizes(rng):
    v = rng.random(21)
    sq = square_rdm(v)
    assert sq.shape == (7, 7) and np.allclose(sq, sq.T) and np.all(np.diag(sq) == 0)
    with pytest.raises(ValueError, match="`n_pairs` must be n"):
        n_conditions(20)


@pytest.mark.parametrize("method", ["spearman", "corr", "tau-a", "cosine_cov"])
def test_compare_matches_rsatoolbox(rng, method):
    a, b = rng.random((4, 36)), rng.random((3, 36))
    a[0, :5] = a[0, 0]  # ties
    ref = compare(RDMs(a), RDMs(b), method=method)
    np.testing.assert_allclose(compare_rdms(a, b, method=method), ref, atol=1e-10)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "public"])
@pytest.mark.parametrize("ties", ["none", "a", "b", "both", "constant"])
def test_kendall_tau_a_matches_rsatoolbox_with_ties(rng, monkeypatch, ties, compiled):
    if not compiled:  # without numba: tau-a from SciPy's public tau-b
        monkeypatch.setattr(rsa_compare, "_discordant_counter", lambda: None)
    a, b = rng.random((3, 57)), rng.random((4, 57))
    if ties in ("a", "both"):
        a[1] = rng.integers(0, 4, 57)  # categorical model RDM: most pairs tied
    if ties in ("b", "both"):
        b[::2] = rng.integers(0, 3, (2, 57))
    if ties == "constant":
        a[0] = 1.0
    ref = compare(RDMs(a), RDMs(b), method="tau-a")
    np.testing.assert_allclose(kendall_tau_a(a, b), ref, atol=1e-12)
    # tau-a sees ranks only: a monotone transform of either side changes nothing
    np.testing.assert_allclose(kendall_tau_a(np.exp(a), b**3), ref, atol=1e-12)


def _brute_counts(x, y):
    """Discordant, jointly tied and y-tied pairs by looking at all n (n - 1) / 2 pairs."""
    i, j = np.triu_indices(x.size, 1)
    dx, dy = np.sign(x[j] - x[i]), np.sign(y[j] - y[i])
    return int((dx * dy < 0).sum()), int(((dx == 0) & (dy == 0)).sum()), int((dy == 0).sum())


def _brute_tau_a(a, b):
    tau = np.empty((a.shape[0], b.shape[0]))
    for k, x in enumerate(a):
        for m, y in enumerate(b):
            i, j = np.triu_indices(x.size, 1)
            tau[k, m] = (np.sign(x[j] - x[i]) * np.sign(y[j] - y[i])).mean()
    return tau


@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 33, 64, 97, 300, 1021])
def test_pair_counts_match_all_pairs(rng, n):
    """The merge-sort counts equal a look at every pair, ties or not, at uneven sizes."""
    levels = max(2, n // 5)
    for x, y in [
        (rng.integers(0, levels, n), rng.integers(0, levels + 1, n)),  # ties in both
        (rng.random(n), rng.integers(0, 3, n).astype(float)),  # ties in y only
        (rng.integers(0, 2, n).astype(float), rng.random(n)),  # ties in x only
        (rng.random(n), rng.random(n)),  # none
        (np.arange(n, dtype=float), np.arange(n, 0, -1.0)),  # all discordant
    ]:
        order = np.argsort(x)
        y_in_order = y[order].copy()
        counts = pair_counts(x[order], y_in_order)
        assert counts == _brute_counts(x[order], y[order])
        np.testing.assert_array_equal(y_in_order, y[order])  # the input is not modified
    with pytest.raises(ValueError, match="must be vectors of one length, got shapes"):
        pair_counts(np.arange(4.0), np.arange(5.0))


@pytest.mark.parametrize("shape", [(5, 2), (2, 5)], ids=["more_a", "more_b"])
def test_kendall_tau_a_matches_all_pairs_and_rsatoolbox(rng, shape):
    """Either side may be the sorted one; values equal the O(n^2) definition."""
    n_pairs = 253
    a, b = rng.random((shape[0], n_pairs)), rng.random((shape[1], n_pairs))
    a[0] = rng.integers(0, 4, n_pairs)
    b[-1] = rng.integers(0, 6, n_pairs)
    b[0, :40] = b[0, 0]
    tau = kendall_tau_a(a, b)
    assert tau.shape == shape
    np.testing.assert_allclose(tau, _brute_tau_a(a, b), rtol=0, atol=1e-12)
    ref = compare(RDMs(a), RDMs(b), method="tau-a")
    np.testing.assert_allclose(tau, ref, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="`a` and `b` must have the same number of pairs"):
        kendall_tau_a(a, b[:, 1:])
    b[1, 7] = np.nan
    with pytest.raises(ValueError, match="`b` must hold no NaN, got 1 NaN values instead"):
        kendall_tau_a(a, b)


def test_kendall_tau_a_without_numba_logs_and_agrees(rng, monkeypatch, caplog):
    a, b = rng.random((3, 45)), rng.integers(0, 3, (2, 45)).astype(float)
    compiled = kendall_tau_a(a, b)
    rsa_compare._discordant_counter.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)  # `import numba` raises ImportError
    try:
        with caplog.at_level("WARNING", logger="neuroflow.rsa.compare"):
            public = kendall_tau_a(a, b)
    finally:
        rsa_compare._discordant_counter.cache_clear()
    assert "numba cannot be imported" in caplog.text and "scipy.stats.kendalltau" in caplog.text
    np.testing.assert_allclose(public, compiled, rtol=0, atol=1e-12)


@pytest.mark.slow
def test_pair_counter_compiles_once_into_the_cache(tmp_path):
    """`cache=True`: a second process loads the machine code the first one wrote."""
    script = (
        "import numpy as np; from neuroflow.rsa.kendall import pair_counts; "
        "print(pair_counts(np.arange(40.0), np.arange(40.0)[::-1]))"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_DEBUG_CACHE": "1"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    assert all(run.stdout.strip().endswith("(780, 0, 0)") for run in runs)
    assert list(tmp_path.rglob("*.nbi")) and "data saved to" in runs[0].stdout
    assert "data loaded from" in runs[1].stdout and "data saved to" not in runs[1].stdout


def test_package_uses_no_private_scipy_name():
    src = Path(rsa_compare.__file__).resolve().parents[1]
    private = re.compile(r"scipy\.[a-z_.]*\._|from scipy[\w.]* import \(?\s*_")
    hits = [
        f"{path}:{k}"
        for path in sorted(src.rglob("*.py"))
        for k, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not hits, f"private SciPy names in {hits}"


def test_rank_rows_matches_scipy(rng):
    from scipy.stats import rankdata

    a = rng.integers(0, 5, (3, 17)).astype(float)  # many ties
    np.testing.assert_allclose(rank_rows(a), rankdata(a, axis=1))
    b = rng.random((2, 9))
    np.testing.assert_allclose(rank_rows(b), rankdata(b, axis=1))


def test_compare_errors(rng):
    with pytest.raises(ValueError, match="`method` must be one of"):
        compare_rdms(rng.random((2, 6)), rng.random((2, 6)), method="dtw")
    with pytest.raises(ValueError, match="same number of pairs"):
        compare_rdms(rng.random((2, 6)), rng.random((2, 10)))


def test_noise_ceiling_is_leave_one_out(rng):
    truth = rng.random(45)
    rdms = truth + 0.3 * rng.standard_normal((5, 45))
    lower, upper = noise_ceiling(rdms, method="corr")
    # rsatoolbox pools standardised RDMs for correlation comparisons
    z = (rdms - rdms.mean(1, keepdims=True)) / rdms.std(1, keepdims=True)
    lo = np.mean([np.corrcoef(rdms[i], np.delete(z, i, 0).mean(0))[0, 1] for i in range(5)])
    up = np.mean([np.corrcoef(rdms[i], z.mean(0))[0, 1] for i in range(5)])
    assert lower == pytest.approx(lo) and upper == pytest.approx(up)
    assert lower < upper
    ref = boot_noise_ceiling(RDMs(rdms), method="spearman")
    assert noise_ceiling(rdms) == pytest.approx(tuple(ref))
    with pytest.raises(ValueError, match="at least 2 RDMs"):
        noise_ceiling(rdms[:1])


@pytest.mark.parametrize("n", [2, 3, 12])
def test_noise_ceilings_of_many_sets_equal_rsatoolbox_set_by_set(rng, n):
    n_sets, n_pairs = 7, 66
    rdms = rng.random((n_sets, n_pairs)) + 0.5 * rng.standard_normal((n, n_sets, n_pairs))
    rdms[:, :, ::5] = np.round(rdms[:, :, ::5], 1)  # tied dissimilarities
    rdms[1, 2] = 0.7  # a constant RDM: its rank comparisons are 0
    rdms[0, 4, 9] = np.nan  # a set with a NaN pair: that pair is dropped in the set
    for method in ("spearman", "tau-a", "corr"):
        if method == "corr":  # rsatoolbox cannot pool a constant RDM by correlation
            rdms[1, 2] = rng.random(n_pairs)
        bounds = noise_ceilings(rdms, method=method)
        assert bounds.shape == (n_sets, 2)
        for k in range(n_sets):
            keep = ~np.isnan(rdms[:, k]).any(axis=0)
            ref = boot_noise_ceiling(RDMs(rdms[:, k, keep]), method=method)
            # the same operations in the same order: equal to the last bit
            assert tuple(bounds[k]) == (float(ref[0]), float(ref[1])), (method, k)
    with pytest.raises(ValueError, match=r"shape \(n_measurements, n_sets, n_pairs\)"):
        noise_ceilings(rdms[0])
    with pytest.raises(ValueError, match="at least 2 RDMs per set"):
        noise_ceilings(rdms[:1])
    with pytest.raises(ValueError, match="`method` must be one of"):
        noise_ceilings(rdms, method="cosine")


def test_crossnobis_matches_rsatoolbox_call(rng):
    from rsatoolbox.data.noise import prec_from_residuals

    cond = np.tile(np.arange(7), 3)
    part = np.repeat(np.arange(3), 7)
    means = rng.standard_normal((7, 11))
    pats = means[cond] + 0.5 * rng.standard_normal((21, 11))
    vec, ids = crossnobis_rdm(pats, cond, part)
    assert ids.tolist() == [str(i) for i in range(7)] and vec.shape == (21,)
    resid = pats - np.stack([pats[cond == c].mean(0) for c in range(7)])[cond]
    noise = prec_from_residuals(resid, dof=21 - 7)
    ds = Dataset(pats, obs_descriptors={"c": cond.astype(str), "r": part.astype(str)})
    ref = calc_rdm(ds, method="crossnobis", descriptor="c", cv_descriptor="r", noise=noise)
    np.testing.assert_allclose(vec, ref.get_vectors()[0], atol=1e-10)
    # the distances track the true pattern distances
    true = pdist(means, "sqeuclidean")
    assert np.corrcoef(vec, true)[0, 1] > 0.8
    with pytest.raises(ValueError, match="at least 2 partitions"):
        crossnobis_rdm(pats[:7], cond[:7], part[:7])


def test_crossnobis_cells_of_labels_whose_concatenations_coincide(rng):
    # partitions "1"/"11" and conditions "1x"/"x": "1" + "1x" and "11" + "x" read alike
    # once joined, yet they are four different cells
    cond = np.array(["1x", "x", "1x", "x", "1x", "x", "1x", "x", "1x", "x"])
    part = np.array(["1", "1", "11", "11", "1", "11", "2", "2", "2", "1"])
    pats = rng.standard_normal((cond.size, 5))
    vec, ids = crossnobis_rdm(pats, cond, part)
    codes = {"1": "a", "11": "b", "2": "c"}
    ref, ref_ids = crossnobis_rdm(pats, cond, np.array([codes[p] for p in part]))
    assert ids.tolist() == ref_ids.tolist() == ["1x", "x"]
    np.testing.assert_allclose(vec, ref, rtol=1e-12)


def test_cross_temporal_and_alignment(rng):
    layers = rng.random((3, 28))
    brain_t = np.stack([layers[0], layers[2], rng.random(28), layers[1]])
    ct = cross_temporal_rsa(layers, brain_t)
    assert ct.shape == (3, 4)
    assert np.argmax(ct[:, 0]) == 0 and np.argmax(ct[:, 1]) == 2 and np.argmax(ct[:, 3]) == 1
    pattern = roi_alignment(rng.random((4, 28)))
    np.testing.assert_allclose(np.diag(pattern), 1.0)
    rois = np.stack([layers + 0.1 * rng.standard_normal(layers.shape) for _ in range(2)])
    res = alignment_patterns(rois, layers)
    assert res.best_layer.tolist() == [0, 1, 2]
    assert res.agreement > 0.9 and res.between_subject > 0.9
    assert res.brain.shape == (2, 3, 3) and res.subject_agreement.shape == (2,)
    with pytest.raises(ValueError, match="must share n_pairs"):
        alignment_patterns(rois, layers[:, :10])


def test_alignment_agreement_defined_for_single_layer(rng):
    from neuroflow.rsa.analysis import pattern_agreement

    rois = rng.random((2, 3, 28))
    res = alignment_patterns(rois, rng.random((1, 28)))
    assert np.isfinite(res.agreement) and np.isfinite(res.subject_agreement).all()
    # one layer claims every ROI shares its geometry: agreement is the brain's mean
    # ROI similarity, below that of a model reproducing the brain pattern
    brain_ut = res.brain_mean[np.triu_indices(3, k=1)]
    np.testing.assert_allclose(res.agreement, brain_ut.mean())
    two = alignment_patterns(rois[:, :2], rng.random((2, 28)))
    assert np.isfinite(two.agreement)
    np.testing.assert_allclose(
        pattern_agreement([[0.2, 0.5]], [[0.2, 0.5], [1.0, 1.0]]), [[1.0, 0.35]]
    )
    with pytest.raises(ValueError, match="at least 2 ROIs"):
        alignment_patterns(rois[:, :1], rng.random((2, 28)))


def test_planted_roi_by_roi_structure_is_recovered_and_a_permuted_pattern_scores_lower():
    """Five ROIs mix three latent geometries with planted weights; subjects add noise."""
    from neuroflow.rsa.analysis import pattern_agreement, upper_triangle

    rng = np.random.default_rng(11)
    n_stim = 14
    geometries = np.stack([pdist(rng.standard_normal((n_stim, 5))) for _ in range(3)])
    geometries = (geometries - geometries.mean(1, keepdims=True)) / geometries.std(1, keepdims=True)
    weights = np.array(
        [[1.0, 0.0, 0.0], [0.8, 0.4, 0.0], [0.2, 1.0, 0.1], [0.0, 0.6, 0.8], [0.0, 0.1, 1.0]]
    )
    clean = weights @ geometries  # (roi, pair)
    planted = upper_triangle(roi_alignment(clean))
    subjects = np.stack(
        [clean + 0.6 * rng.standard_normal(clean.shape) for _ in range(6)]
    )  # (subject, roi, pair)
    res = alignment_patterns(subjects, clean)  # a model whose layers are the ROIs' geometry
    recovered = upper_triangle(res.brain_mean)
    assert np.corrcoef(recovered, planted)[0, 1] > 0.9
    assert res.best_layer.tolist() == [0, 1, 2, 3, 4]
    # the same model pattern with its ROIs relabelled agrees less with the brain's
    order = np.array([3, 0, 4, 1, 2])
    permuted = upper_triangle(res.model[np.ix_(order, order)])
    ours = pattern_agreement(recovered[None], upper_triangle(res.model)[None])[0, 0]
    theirs = pattern_agreement(recovered[None], permuted[None])[0, 0]
    assert ours == pytest.approx(res.agreement)
    assert ours - theirs > 0.1, (ours, theirs)
    # a model of three pure geometries (one per latent factor) misses the graded pattern
    pure = alignment_patterns(subjects, geometries)
    assert pure.agreement < res.agreement - 0.1, (pure.agreement, res.agreement)

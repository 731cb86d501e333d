"""Calibration of the decoding cluster tests, the inconclusive rule and power.

On data without any effect, a cluster test at level ``alpha`` must find a cluster in
at most ``alpha`` of the runs. With ``n`` runs the measured rate has binomial standard
error ``sqrt(alpha (1 - alpha) / n)``; the checks accept up to ``alpha`` plus two of
them (one-sided, ~2.3% chance of failing a calibrated test). The full-size version
(200 seeds per design, stage defaults) is ``bench/bench_decoding_calibration.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.ndimage import gaussian_filter1d
from threadpoolctl import ThreadpoolController

from neuroflow.analysis_inputs import SubjectEpochs
from neuroflow.decoding.eeg_analyses import _classification
from neuroflow.decoding.stage import inconclusive_tests, resolve_config
from neuroflow.decoding.temporal import (
    cluster_permutation_test,
    group_cluster_test,
    min_permutations,
    sliding_ridge_scores,
)

ALPHA = 0.05
N_CH, N_T = 8, 30


def _margin(n: int, alpha: float = ALPHA) -> float:
    """One-sided acceptance bound: ``alpha`` plus two binomial standard errors."""
    return alpha + 2.0 * np.sqrt(alpha * (1.0 - alpha) / n)


def _smooth_maps(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Exchangeable, temporally smooth maps along every axis after the first."""
    maps = rng.standard_normal(shape)
    for axis in range(1, len(shape)):
        maps = gaussian_filter1d(maps, 1.5, axis=axis)
    return maps


def _subject(seed: int, design: str, effect: float = 0.0) -> SubjectEpochs:
    """Smooth noise epochs; labels independent of the data unless ``effect``.

    ``stimulus``: 26 stimuli x 4 repeats (one per session) sharing a stimulus response,
    labels of whole stimuli; ``epoch``: 100 epochs named by their type only.
    """
    rng = np.random.default_rng(seed)
    if design == "stimulus":
        n_stim, n_rep = 26, 4
        label = rng.permutation(np.repeat(["a", "b"], n_stim // 2))
    else:
        n_stim, n_rep = 100, 1
        label = rng.permutation(np.repeat(["a", "b"], n_stim // 2))
    stim = np.repeat(np.arange(n_stim), n_rep)
    n = stim.size
    noise = gaussian_filter1d(rng.standard_normal((n, N_CH, N_T)), 2.0, axis=2)
    shared = gaussian_filter1d(rng.standard_normal((n_stim, N_CH, N_T)), 2.0, axis=2)[stim]
    mix = rng.standard_normal((N_CH, N_CH)) / np.sqrt(N_CH)
    data = np.einsum("ij,njt->nit", mix, noise + 0.7 * shared)
    y = label[stim]
    if effect:
        bump = np.exp(-0.5 * ((np.arange(N_T) - 18) / 2.5) ** 2)
        data += effect * (y == "a")[:, None, None] * rng.standard_normal(N_CH)[:, None] * bump
    names = np.array([f"img-{i:03d}" for i in range(n_stim)])
    return SubjectEpochs(
        subject=f"{seed:03d}",
        data=data.astype(np.float32),
        times=np.arange(N_T) / 100.0,
        channels=np.array([f"E{i}" for i in range(N_CH)]),
        stimulus=y if design == "epoch" else names[stim],
        condition=y,
        session=np.tile(np.arange(n_rep), n_stim).astype(str),
        sources=[Path(f"sim-{seed}")],
    )


def test_min_permutations():
    assert [min_permutations(a) for a in (0.05, 0.01, 0.1, 0.2)] == [99, 499, 49, 24]
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match=r"`alpha` must be in \(0, 1\), got"):
            min_permutations(bad)


@pytest.mark.parametrize("shape", [(40,), (9, 13)])
def test_cluster_test_treats_every_map_alike(rng, shape):
    """Any map can play the observed one: at most ``alpha (n + 1)`` of them reach p <= alpha.

    Under the null hypothesis the observed map is one of the ``n + 1`` maps at random, so
    this bound is what makes the test exact; it holds map set by map set.
    """
    n = 59
    for _ in range(8):
        maps = _smooth_maps(rng, (n + 1, *shape))
        hits = 0
        for i in range(n + 1):
            res = cluster_permutation_test(maps[i], np.delete(maps, i, axis=0))
            hits += bool((res.p_values <= ALPHA).any())
        assert hits <= ALPHA * (n + 1)


def test_cluster_test_false_positive_rate_on_exchangeable_maps(rng):
    """2,000 sets of 20 exchangeable smooth maps: the rate is alpha up to binomial error."""
    n_runs, n_perm = 2000, 19
    hits = 0
    for _ in range(n_runs):
        maps = _smooth_maps(rng, (n_perm + 1, 40))
        hits += bool((cluster_permutation_test(maps[0], maps[1:]).p_values <= ALPHA).any())
    rate = hits / n_runs
    assert rate <= _margin(n_runs)
    assert rate >= ALPHA - 3.0 * np.sqrt(ALPHA * (1 - ALPHA) / n_runs)  # not conservative


def test_cluster_test_threshold_and_few_permutations(rng):
    null = _smooth_maps(rng, (99, 7, 11))
    obs = np.zeros((7, 11))
    obs[2:5, 3:8] = 5.0
    res = cluster_permutation_test(obs, null)
    # the observed value must exceed the 5th largest permuted value (5 = 0.05 x 100)
    np.testing.assert_array_equal(res.threshold, np.sort(null, axis=0)[-5])
    assert res.significant().sum() == 15 and res.p_values.min() == pytest.approx(0.01)
    assert res.n_permutations == 99 and res.min_p == pytest.approx(0.01) and res.conclusive()
    # 10 permutations: no point can be in the top 5% of 11 maps
    few = cluster_permutation_test(obs, null[:10])
    assert few.p_values.size == 0 and np.isinf(few.threshold).all() and not few.conclusive()
    with pytest.raises(ValueError, match=r"`cluster_alpha` must be in \(0, 1\), got 1.5"):
        cluster_permutation_test(obs, null, cluster_alpha=1.5)
    with pytest.raises(ValueError, match="`null` must hold at least one permutation"):
        cluster_permutation_test(obs, null[:0])


@pytest.mark.slow
@pytest.mark.parametrize("design", ["stimulus", "epoch"])
def test_classification_false_positive_rate(design):
    """The stage's classification on 100 null subjects: time course and generalisation.

    19 permutations keep this affordable; the test is exact for any count, so the rate
    of the p-values it computes (``*_cluster_p_raw``) must still be at most alpha.
    """
    n_seeds = 100
    cfg = resolve_config(
        {"classification": {"n_permutations": 19, "generalization_permutations": 19}}
    )
    hits = {"class": 0, "gen": 0}
    for seed in range(n_seeds):
        sub = _subject(seed, design)
        out = _classification(sub, sub.data.astype(np.float64), cfg, seed)
        assert out["cv_groups"] == design
        hits["class"] += bool(np.nanmin(out["cluster_p_raw"], initial=1.0) <= ALPHA)
        hits["gen"] += bool(np.nanmin(out["gen_cluster_p_raw"], initial=1.0) <= ALPHA)
        # inconclusive at 19 permutations: nothing reported
        assert np.isnan(out["cluster_p"]).all() and np.isnan(out["gen_cluster_p"]).all()
    rates = {k: v / n_seeds for k, v in hits.items()}
    assert max(rates.values()) <= _margin(n_seeds), rates


@pytest.mark.slow
@pytest.mark.parametrize("folds", ["stimulus", "session"])
def test_feature_decoding_false_positive_rate(folds):
    """Ridge decoding of random stimulus-level targets, 100 subjects (60 with session
    folds), 100 shuffles.

    With session folds the targets are still exchanged between whole stimuli (a
    session's epochs show different stimuli; exchanging whole sessions' targets gave a
    null of zeros).
    """
    n_seeds, hits = (100 if folds == "stimulus" else 60), 0
    for seed in range(n_seeds):
        sub = _subject(seed, "stimulus")
        rng = np.random.default_rng(seed + 1000)
        uniq, inverse = np.unique(sub.stimulus, return_inverse=True)
        Y = rng.standard_normal((uniq.size, 3))[inverse]
        score, null = sliding_ridge_scores(
            sub.data,
            Y,
            sub.session if folds == "session" else sub.stimulus,
            alphas=[1.0, 100.0, 1e4],
            n_permutations=100,
            seed=seed,
            units=sub.stimulus,
        )
        res = cluster_permutation_test(score.mean(axis=1), null.mean(axis=2))
        assert res.conclusive(ALPHA)
        hits += bool(res.significant(ALPHA).any())
    assert hits / n_seeds <= _margin(n_seeds)


@pytest.mark.slow
@pytest.mark.parametrize("cv_groups", ["epoch", "session"])
def test_repeats_permute_together_whatever_the_folds(cv_groups):
    """Folds that split an image's repeats: its label must still move as one under the null.

    Stratified epoch folds let the classifier recognise a test epoch's image from its
    training repeats; shuffling labels within folds breaks that, and the observed score
    then beat the null in most null runs. Whole-stimulus shuffles keep it.
    """
    n_seeds, hits = 60, 0
    cfg = resolve_config(
        {"cv_groups": cv_groups, "classification": {"n_permutations": 19, "generalization": False}}
    )
    for seed in range(n_seeds):
        sub = _subject(seed, "stimulus")
        out = _classification(sub, sub.data.astype(np.float64), cfg, seed)
        assert out["cv_groups"] == cv_groups
        hits += bool(np.nanmin(out["cluster_p_raw"], initial=1.0) <= ALPHA)
    assert hits / n_seeds <= _margin(n_seeds)


def test_permutation_units():
    from neuroflow.decoding.eeg_analyses import classification_groups, permutation_units
    from neuroflow.decoding.temporal import shuffle_labels

    sub = _subject(0, "stimulus")
    y = sub.condition
    for how in ("epoch", "session"):
        groups, _ = classification_groups(sub, y, how, 5, 0)
        np.testing.assert_array_equal(permutation_units(sub, y, groups), sub.stimulus)
    single = _subject(0, "epoch")  # stimulus = class: no stimulus to move as one
    groups, kind = classification_groups(single, single.condition, "auto", 5, 0)
    assert kind == "epoch"
    np.testing.assert_array_equal(permutation_units(single, single.condition, groups), groups)
    # type-named events of 4 runs: labels move within each fold's part of each run
    runs = _eeg_runs(0, "epoch")
    y = runs.condition
    groups, kind = classification_groups(runs, y, "auto", 5, 0)
    units = permutation_units(runs, y, groups)
    assert kind == "epoch" and np.unique(units).size == 20
    assert all(np.unique(runs.session[units == u]).size == 1 for u in np.unique(units))
    assert all(np.unique(groups[units == u]).size == 1 for u in np.unique(units))
    rng = np.random.default_rng(0)
    for _ in range(5):
        yp = shuffle_labels(y, units, rng)
        for r in np.unique(runs.session):
            assert (yp[runs.session == r] == "a").sum() == (y[runs.session == r] == "a").sum()
    # each run shows one class: no label can move within a run, the folds' units stay
    blocked = dataclasses.replace(runs, session=np.where(y == "a", "0", "1"))
    np.testing.assert_array_equal(permutation_units(blocked, y, groups), groups)
    Y = np.random.default_rng(0).standard_normal((sub.data.shape[0], 2))
    with pytest.raises(ValueError, match="`Y` must be equal within each permutation unit"):
        sliding_ridge_scores(sub.data, Y, sub.session, n_permutations=2, units=sub.stimulus)
    with pytest.raises(ValueError, match=r"`units` must have shape \(104,\), got \(3,\)"):
        sliding_ridge_scores(sub.data, Y, sub.session, n_permutations=2, units=[1, 2, 3])


def test_shuffles_keep_the_class_sizes(rng):
    """Labels move only between stimuli shown as often; the count of labellings is exact."""
    from neuroflow.decoding.temporal import n_relabellings, shuffle_labels

    reps = np.array([1, 1, 1, 3, 3, 3, 3])
    stim = np.repeat(np.arange(7), reps)
    y = np.repeat(np.array(["a", "b", "b", "a", "a", "b", "c"]), reps)
    sizes = {k: (y == k).sum() for k in "abc"}
    seen = set()
    for _ in range(300):
        yp = shuffle_labels(y, stim, rng)
        assert {k: (yp == k).sum() for k in "abc"} == sizes
        assert all(np.unique(yp[stim == s]).size == 1 for s in range(7))
        seen.add(tuple(yp))
    # 3 singletons (a, b, b): 3 labellings; 4 triplets (a, a, b, c): 12
    assert n_relabellings(y, stim) == len(seen) == 36
    # labels varying within groups: shuffled within each group
    runs = np.tile([0, 1], 6)
    assert n_relabellings(np.repeat([0, 1], 6), runs) == 20**2
    f = math.factorial
    assert n_relabellings(y, np.zeros(y.size)) == f(15) // (f(7) * f(5) * f(3))
    assert n_relabellings(np.tile([0, 1], 1000), np.arange(2000)) == np.inf


def test_label_tied_to_repeats_is_inconclusive(caplog):
    """The demo's design: test images shown 10 times, training images once.

    Whole-stimulus shuffles would hand the 'test' label to images shown once, and the
    permuted classes would be far smaller than the real ones (a null that barely varies,
    which a chance-level score beats). Keeping the class sizes leaves no other labelling.
    """
    rng = np.random.default_rng(3)
    stim = np.r_[np.repeat(np.arange(6), 10), np.arange(6, 66)]
    y = np.where(stim < 6, "test", "train")
    X = gaussian_filter1d(rng.standard_normal((stim.size, N_CH, N_T)), 2.0, axis=2)
    sub = SubjectEpochs(
        subject="01",
        data=X.astype(np.float32),
        times=np.arange(N_T) / 100.0,
        channels=np.array([f"E{i}" for i in range(N_CH)]),
        stimulus=np.array([f"img-{i:03d}" for i in stim]),
        condition=y,
        session=np.zeros(stim.size, dtype=str),
        sources=[Path("sim")],
    )
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        out = _classification(sub, X, resolve_config({}), 0)
    (record,) = caplog.records
    assert record.getMessage() == (
        "sub-01: the 'condition' labels (`decoding.classification.target`) allow only 1 "
        "distinct labelling(s) of the epochs, the observed one included, fewer than the 100 "
        "a test at p <= 0.05 needs (labels move only between whole stimuli (or CV groups) "
        "with as many epochs, so that the classes keep their sizes, and a label tied to how "
        "often its stimuli are shown cannot be tested by permutation); classification "
        "clusters are reported as inconclusive."
    )
    assert out["untestable"] == record.getMessage()[:-1]
    # every permuted map is the observed one: nothing is computed, nothing is significant
    np.testing.assert_array_equal(out["null"], np.repeat(out["score"][None], 99, axis=0))
    for key in ("cluster_p", "cluster_p_raw", "gen_cluster_p", "gen_cluster_p_raw"):
        assert np.isnan(out[key]).all()


@pytest.mark.slow
def test_group_test_false_positive_rate(rng):
    """Sign flips over 7 subjects whose maps are symmetric about chance, 200 groups."""
    n_groups, hits = 200, 0
    for g in range(n_groups):
        scores = 0.5 + 0.03 * _smooth_maps(rng, (7, 30))
        res = group_cluster_test(scores, 0.5, seed=g)
        assert res.exact and res.n_permutations == 127 and res.conclusive(ALPHA)
        hits += bool(res.significant(ALPHA).any())
    assert hits / n_groups <= _margin(n_groups)


def test_group_test_with_few_subjects_is_inconclusive_without_warnings(rng):
    scores = 0.5 + 0.05 * _smooth_maps(rng, (2, 17))
    scores[:, 5:9] = [[0.8], [0.8]]  # identical subjects: zero variance there
    scores[:, 12] = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = group_cluster_test(scores, 0.5)
    # MNE compares with the identity twice and never with flipping every subject
    assert res.exact and res.min_p == 0.5 and not res.conclusive(ALPHA)
    assert res.p_values.min() == 0.5 and not res.significant(ALPHA).any()
    five = 0.5 + 0.02 * _smooth_maps(rng, (5, 17))
    five[:, 5:9] += 0.3
    res5 = group_cluster_test(five, 0.5)
    assert res5.min_p == res5.p_values.min() == 1 / 16 and not res5.conclusive(ALPHA)
    six = 0.5 + 0.02 * _smooth_maps(rng, (6, 17))
    six[:, 5:9] += 0.3
    res6 = group_cluster_test(six, 0.5)
    assert res6.min_p == res6.p_values.min() == 1 / 32 and res6.conclusive(ALPHA)
    assert res6.significant(ALPHA)[5:9].all() and res6.significant(ALPHA).sum() == 4
    assert not res6.conclusive(0.01)
    many = group_cluster_test(np.concatenate([six, six]), 0.5, n_permutations=500)
    assert not many.exact and many.min_p == 1 / 500 and many.conclusive(0.01)
    flat = np.full((3, 17), 0.5)  # every subject the same: nothing to test
    assert group_cluster_test(flat, 0.5).p_values.size == 0
    with pytest.raises(ValueError, match="`sigma` must be positive, got 0"):
        group_cluster_test(five, 0.5, sigma=0)
    with pytest.raises(ValueError, match=r"`cluster_alpha` must be in \(0, 1\), got 0"):
        group_cluster_test(five, 0.5, cluster_alpha=0)


def test_inconclusive_tests_names_the_keys():
    assert inconclusive_tests(resolve_config({})) == {}
    cfg = resolve_config(
        {"classification": {"n_permutations": 20, "generalization_permutations": 0}}
    )
    assert list(inconclusive_tests(cfg)) == ["class_cluster_p"]
    assert inconclusive_tests(cfg)["class_cluster_p"] == (
        "`decoding.classification.n_permutations` = 20 cannot reach p <= 0.05 reliably: at "
        "least 99 are needed; clusters are reported as inconclusive"
    )
    strict = resolve_config({"cluster_alpha": 0.01})
    reasons = inconclusive_tests(strict)
    assert set(reasons) == {"class_cluster_p", "generalization_cluster_p", "feature_cluster_p"}
    assert "`decoding.features.n_permutations` = 100" in reasons["feature_cluster_p"]
    assert "at least 499 are needed" in reasons["feature_cluster_p"]
    assert set(inconclusive_tests(strict, {"features"})) == {"feature_cluster_p"}
    off = resolve_config({"cluster_alpha": 0.01, "classification": {"generalization": False}})
    assert "generalization_cluster_p" not in inconclusive_tests(off)


def test_planted_effect_is_found_with_the_defaults(caplog):
    """Power: a class difference around time point 18 is found by both default tests."""
    cfg = resolve_config({})
    assert cfg["classification"]["n_permutations"] >= min_permutations(cfg["cluster_alpha"])
    sub = _subject(7, "stimulus", effect=0.6)
    X = sub.data.astype(np.float64)
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        out = _classification(sub, X, cfg, 0)
    assert not caplog.records
    assert out["null"].shape == (99, N_T)
    sig = out["cluster_p"] <= ALPHA
    assert sig[16:21].all() and not sig[:8].any()
    gen_sig = np.diagonal(out["gen_cluster_p"]) <= ALPHA
    assert gen_sig[16:21].all() and not gen_sig[:8].any()
    np.testing.assert_array_equal(out["cluster_p"], out["cluster_p_raw"])
    # the sliding score from the generalisation diagonal equals the sliding decoder's
    from neuroflow.decoding.eeg_analyses import classification_groups
    from neuroflow.decoding.temporal import time_resolved_scores

    groups, _ = classification_groups(sub, sub.condition, "auto", 5, 0)
    np.testing.assert_allclose(
        out["score"], time_resolved_scores(X, sub.condition, groups).mean(axis=0)
    )


# --- EEG decoding of runs whose consecutive epochs share slow noise ----------------------


def _eeg_runs(seed: int, design: str, n_runs: int = 4, n_stim: int = 20) -> SubjectEpochs:
    """A null subject of ``n_runs`` recordings, each showing every stimulus once.

    Consecutive epochs of a run share noise (AR(1) 0.7 over epochs), each run has its
    own offset and a slow drift over its epochs, every epoch the same evoked response
    whatever its class, and a stimulus's repeats share a response of their own; the
    class of each stimulus (half ``a``) is drawn independently of all of it, and each
    run shows the stimuli in its own random order. ``stimulus`` and ``session`` name
    the stimuli (``session``: also folds by run); ``epoch`` names the events by their
    class only, and every epoch shows an image of its own; ``unnamed-repeats`` names
    them by class although the images repeat (the folds split a stimulus's repeats and
    nothing tells the null which epochs share an image).
    """
    rng = np.random.default_rng(seed)
    label = rng.permutation(np.repeat(["a", "b"], n_stim // 2))
    stim = np.concatenate([rng.permutation(n_stim) for _ in range(n_runs)])
    run = np.repeat(np.arange(n_runs), n_stim)
    n = stim.size
    fresh = gaussian_filter1d(rng.standard_normal((n, N_CH, N_T)), 2.0, axis=2)
    noise = fresh.copy()
    for i in range(1, n):
        if run[i] == run[i - 1]:
            noise[i] = 0.7 * noise[i - 1] + np.sqrt(1 - 0.7**2) * fresh[i]
    drift = np.cos(np.pi * (np.arange(n_stim) + 0.5) / n_stim)[np.arange(n) % n_stim, None]
    slow = drift * rng.standard_normal((n_runs, N_CH))[run]
    slow += 0.8 * rng.standard_normal((n_runs, N_CH))[run]
    evoked = np.exp(-0.5 * ((np.arange(N_T) - 10) / 3.0) ** 2) * rng.standard_normal((N_CH, 1))
    images = np.arange(n) if design == "epoch" else stim
    own = gaussian_filter1d(rng.standard_normal((images.max() + 1, N_CH, N_T)), 2.0, axis=2)
    signal = noise + 0.7 * own[images] + 0.5 * slow[:, :, None] + 2.0 * evoked
    mix = rng.standard_normal((N_CH, N_CH)) / np.sqrt(N_CH)
    y = label[stim]
    named = design in ("stimulus", "session")
    return SubjectEpochs(
        subject=f"{seed:03d}",
        data=np.einsum("ij,njt->nit", mix, signal).astype(np.float32),
        times=np.arange(N_T) / 100.0,
        channels=np.array([f"E{i}" for i in range(N_CH)]),
        stimulus=np.array([f"img-{i:03d}" for i in stim]) if named else y,
        condition=y,
        session=run.astype(str),
        sources=[Path(f"sim-{seed}")],
    )


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The BLAS and OpenMP pools loaded, found once (a search takes ~20 ms)."""
    return ThreadpoolController()


def _one_thread():
    """Limit every thread pool to one thread for the block (as the jobs run)."""
    return _thread_pools().limit(limits=1)


def _point_p(score: np.ndarray, null: np.ndarray) -> np.ndarray:
    """Per-point permutation p-values, ``(1 + #{null >= score}) / (1 + n)``."""
    return (1.0 + (null >= score[None] - 1e-12).sum(axis=0)) / (1.0 + null.shape[0])


def _eeg_p(seed: int, design: str, generalization: bool = False) -> dict[str, np.ndarray]:
    """p-values of the stage's EEG tests on one null subject of :func:`_eeg_runs`.

    ``*_point``: per-time-point p-values (n_times,); ``*_cluster``: the smallest cluster
    p-value the stage computed (1 without a cluster). Features: ridge decoding of 3
    random stimulus-level targets (not for ``epoch`` designs, whose stimuli are unnamed).
    """
    sub = _eeg_runs(seed, design)
    cfg = resolve_config(
        {
            "cv_groups": "session" if design == "session" else "auto",
            "classification": {"generalization": generalization},
        }
    )
    X = sub.data.astype(np.float64)
    with _one_thread():
        out = _classification(sub, X, cfg, seed)
        res = {
            "classification_point": _point_p(out["score"], out["null"]),
            "classification_cluster": np.nanmin(out["cluster_p_raw"], initial=1.0),
        }
        if generalization:
            res["generalization_cluster"] = np.nanmin(out["gen_cluster_p_raw"], initial=1.0)
        if design in ("stimulus", "session"):
            uniq, inverse = np.unique(sub.stimulus, return_inverse=True)
            Y = np.random.default_rng(seed + 1000).standard_normal((uniq.size, 3))[inverse]
            score, null = sliding_ridge_scores(
                X,
                Y,
                sub.session if design == "session" else sub.stimulus,
                alphas=cfg["features"]["alphas"],
                n_permutations=cfg["features"]["n_permutations"] - 1,
                seed=seed,
                units=sub.stimulus,
            )
            score, null = score.mean(axis=1), null.mean(axis=2)
            res["features_point"] = _point_p(score, null)
            res["features_cluster"] = np.nanmin(
                cluster_permutation_test(score, null).p_values, initial=1.0
            )
    return res


@pytest.mark.slow
@pytest.mark.parametrize("design", ["stimulus", "session", "epoch"])
def test_eeg_decoding_false_positive_rate_on_runs(design):
    """200 null subjects whose epochs share run offsets, drift and autocorrelated noise:
    per-time-point and cluster p-values of the stage's tests stay at alpha (0.05, 0.01).

    Type-named events (``epoch``) were shuffled within folds across runs, which gave
    runs shares of a class they never had: a wider null (0.02 at 0.05); labels now move
    within each fold's part of each run.
    """
    n_seeds = 200
    runs = [_eeg_p(seed, design) for seed in range(n_seeds)]
    for key in runs[0]:
        p = np.array([r[key] for r in runs])  # (n_seeds,) or (n_seeds, n_times)
        for alpha in (0.05, 0.01):
            # a mean over time points varies no more than one point: n_seeds bounds it
            rate = float((p <= alpha).mean())
            assert rate <= _margin(n_seeds, alpha), (key, alpha, rate)
        if key.endswith("_point"):
            se = np.sqrt(ALPHA * (1 - ALPHA) / n_seeds)
            assert (p <= ALPHA).mean() >= ALPHA - 3 * se, key  # not conservative


# --- fMRI identification and concept decoding on autocorrelated movie runs ------------

TR, SHOT, LAG = 1.0, 3.0, 4.5


def _ar1(rng: np.random.Generator, n: int, shape: tuple[int, ...], phi: float) -> np.ndarray:
    """Stationary AR(1) series with unit variance along the first axis."""
    out = rng.standard_normal((n, *shape))
    for t in range(1, n):
        out[t] = phi * out[t - 1] + np.sqrt(1.0 - phi**2) * out[t]
    return out


def _run_patterns(rng: np.random.Generator, n_shots: int, n_vox: int) -> np.ndarray:
    """Event patterns of one run of back-to-back 3 s shots: BOLD noise only.

    AR(1) 0.7 at the TR plus two slow cosine drifts; each pattern is the mean BOLD over
    the shot's window shifted by the haemodynamic lag, so neighbouring windows share
    slow noise. Shape (n_shots, n_vox).
    """
    n_vol = int(n_shots * SHOT / TR + 12)
    k = np.arange(n_vol)[:, None]
    bold = _ar1(rng, n_vol, (n_vox,), 0.7)
    for j in (1, 2):
        bold += 0.5 * np.cos(np.pi * (k + 0.5) * j / n_vol) * rng.standard_normal(n_vox)
    t = np.arange(n_vol) * TR
    onsets = np.arange(n_shots) * SHOT
    return np.stack([bold[(t >= o + LAG) & (t < o + LAG + SHOT)].mean(axis=0) for o in onsets])


def _movie_identification_p(seed: int, n_test: int = 60, n_vox: int = 20) -> np.ndarray:
    """Identification p-values (top1, top5, mean rank) of one null subject.

    A test movie of ``n_test`` shots is shown twice with the same onsets, four training
    movies of 30 shots once each; shot features drift smoothly along each movie
    (AR(1) 0.8 over shots), as a movie's consecutive shots look alike.
    """
    from neuroflow.decoding.fmri_identification import identify_stimuli

    rng = np.random.default_rng(seed)
    test_ids = [f"te{i:03d}" for i in range(n_test)]
    pats, stim, feats = [], [], {}
    feats.update(zip(test_ids, _ar1(rng, n_test, (6,), 0.8), strict=True))
    for _ in range(2):
        pats.append(_run_patterns(rng, n_test, n_vox))
        stim += test_ids
    for r in range(4):
        ids = [f"tr{r}-{i:03d}" for i in range(30)]
        feats.update(zip(ids, _ar1(rng, 30, (6,), 0.8), strict=True))
        pats.append(_run_patterns(rng, 30, n_vox))
        stim += ids
    stim = np.array(stim)
    res = identify_stimuli(
        np.concatenate(pats), stim, np.stack([feats[s] for s in stim]), np.isin(stim, test_ids),
        alphas=[1.0, 100.0, 1e4], top_k=[1, 5], n_splits=5, n_permutations=199,
        standardize=True, seed=seed,
    )  # fmt: skip
    return res["p"][0]


@pytest.mark.slow
def test_fmri_identification_false_positive_rate_on_movies():
    """300 null subjects: the order-keeping null stays at alpha (0.05 and 0.01).

    Free shuffles of the test labels broke the shared slow noise of neighbouring shots
    and their alike features at once: mean rank reached p <= 0.05 in about 16% of these
    subjects.
    """
    n_seeds = 300
    p = np.array([_movie_identification_p(seed) for seed in range(n_seeds)])
    for alpha in (0.05, 0.01):
        rates = (p <= alpha).mean(axis=0)
        assert (rates <= _margin(n_seeds, alpha)).all(), (alpha, rates)


def test_order_permutations_keep_neighbours():
    from neuroflow.decoding.identification import identification_null, order_permutations

    order = np.array([3, 0, 4, 1, 2])  # item 3 shown first, then 0, ...
    perms = order_permutations(order, 100)
    assert perms.shape == (9, 5) and np.unique(perms, axis=0).shape[0] == 9
    assert not (perms == np.arange(5)).all(axis=1).any()  # the observed pairing is left out
    position = np.argsort(order)
    for perm in perms:  # neighbours in time take the labels of neighbours in time
        shown = position[perm[order]]  # when the label of the j-th item shown was shown
        assert set(np.abs(np.diff(shown)).tolist()) <= {1, 4}  # +-1, or the wrap 4 <-> 0
    assert order_permutations(order, 4, seed=1).shape == (4, 5)
    assert order_permutations([1, 0], 10).tolist() == [[1, 0]]
    with pytest.raises(
        ValueError, match=r"`order` must hold each index 0 .. 2 once, got \[0, 0, 1\]"
    ):
        order_permutations([0, 0, 1], 10)
    rng = np.random.default_rng(0)
    pred, true = rng.standard_normal((7, 4)), rng.standard_normal((7, 4))
    null = identification_null(pred, true, n_permutations=50, order=np.arange(7))
    assert null["mean_rank"].shape == (13,)
    with pytest.raises(ValueError, match=r"`order` must have one entry per test item \(7\), got 3"):
        identification_null(pred, true, order=[0, 1, 2])


def _concept_p(seed: int, *, keep_order: bool, n_permutations: int = 199) -> np.ndarray:
    """Concept p-values (mAP, mean AUC) of one null subject: 6 runs of 30 shots shown
    once, 3 concepts that last over runs of consecutive shots (scenes)."""
    from neuroflow.decoding.concepts import decode_concepts, run_sets
    from neuroflow.decoding.fmri import concept_folds
    from neuroflow.decoding.identification import presentation_order

    rng = np.random.default_rng(seed)
    X = np.concatenate([_run_patterns(rng, 30, 15) for _ in range(6)])
    stim = np.array([f"s{i:03d}" for i in range(180)])
    runs = np.repeat(np.arange(6), 30).astype(str)
    switch = rng.random((180, 3)) < 0.1
    labels = (np.cumsum(switch, axis=0) + rng.integers(2, size=3)) % 2 == 1
    splits, grouping = concept_folds(stim, runs, stim, n_splits=5, seed=seed)
    assert grouping == "run"
    with _one_thread():
        res = decode_concepts(
            X, labels, ["a", "b", "c"], splits, n_permutations=n_permutations, seed=seed,
            order=presentation_order(stim) if keep_order else None,
            blocks=run_sets(stim, runs, stim) if keep_order else None,
        )  # fmt: skip
    return np.array([res.map_p, res.mean_auc_p])


@pytest.mark.slow
def test_fmri_concept_false_positive_rate_on_movies():
    """250 null subjects (~40 s): the refitted, order-keeping null stays at alpha.

    Every relabelling cross-validates the ridge decoders anew. Scoring fixed held-out
    decision values against relabelled test folds instead (each fold's model trained on
    the other folds' labels) reached p <= 0.05 in 11-13.5% of these subjects.
    """
    n_seeds = 250
    p = np.array([_concept_p(seed, keep_order=True) for seed in range(n_seeds)])
    for alpha in (0.05, 0.01):
        rates = (p <= alpha).mean(axis=0)
        assert (rates <= _margin(n_seeds, alpha)).all(), (alpha, rates)
    # not conservative either: within three standard errors of 0.05
    assert ((p <= ALPHA).mean(axis=0) >= ALPHA - 3 * np.sqrt(ALPHA * (1 - ALPHA) / n_seeds)).all()


@pytest.mark.slow
def test_fmri_concept_null_keeping_order_halves_false_positives():
    """Scenes over autocorrelated noise: free shuffles of the labels within test folds
    break the shared slow noise of neighbouring shots and their alike concepts at once,
    and noise beats that null far more often than alpha; the order-keeping one does not."""
    n_seeds = 60
    free = np.array(
        [_concept_p(seed, keep_order=False, n_permutations=99) for seed in range(n_seeds)]
    )
    kept = np.array(
        [_concept_p(seed, keep_order=True, n_permutations=99) for seed in range(n_seeds)]
    )
    assert (free <= ALPHA).mean() > _margin(n_seeds)
    assert (kept <= ALPHA).mean() < (free <= ALPHA).mean()

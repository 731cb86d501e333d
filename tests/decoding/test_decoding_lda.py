"""The batched shrinkage LDA equals MNE's sliding / generalising scikit-learn LDA."""

from __future__ import annotations

import numpy as np
import pytest
from mne.decoding import GeneralizingEstimator, SlidingEstimator, cross_val_multiscore
from sklearn.covariance import ledoit_wolf
from sklearn.preprocessing import StandardScaler

from neuroflow.decoding.classification import group_cv, make_classifier
from neuroflow.decoding.features import bin_window, zscore_features
from neuroflow.decoding.lda import ledoit_wolf_batched, sliding_lda_null, sliding_lda_scores
from neuroflow.decoding.temporal import shuffle_labels, time_resolved_null


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _data(rng, n_classes, n=61, n_channels=7, n_times=9):
    X = rng.standard_normal((n, n_channels, n_times)) * rng.uniform(0.5, 3, (1, n_channels, 1))
    y = rng.integers(0, n_classes, n)
    X[:, 0, 3:6] += 0.8 * y[:, None]
    groups = np.arange(n) % 13
    return X, y, list(group_cv(groups, 5).split(X[:, :, 0], y, groups)), groups


def test_ledoit_wolf_batched_matches_sklearn(rng):
    x = rng.standard_normal((3, 23, 5)) * [1.0, 5.0, 0.1, 2.0, 1.0]
    got = ledoit_wolf_batched(x)
    for b in range(3):
        sc = StandardScaler().fit(x[b])
        ref = ledoit_wolf(sc.transform(x[b]))[0]
        ref = sc.scale_[:, None] * ref * sc.scale_[None, :]
        np.testing.assert_allclose(got[b], ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("generalize", [False, True])
def test_sliding_lda_equals_mne_sklearn(rng, n_classes, generalize):
    X, y, splits, _ = _data(rng, n_classes)
    cls = GeneralizingEstimator if generalize else SlidingEstimator
    est = cls(make_classifier("lda"), scoring="balanced_accuracy", verbose=False)
    ref = cross_val_multiscore(est, X, y, cv=splits, verbose=False)
    got = sliding_lda_scores(X, y, splits, generalize=generalize)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-12)
    diag = got if not generalize else np.diagonal(got, axis1=1, axis2=2)
    assert diag[:, 3:6].mean() > 1.0 / n_classes + 0.1


def test_null_uses_the_same_classifier(rng):
    X, y, _, groups = _data(rng, 2)
    fast = time_resolved_null(X, y, groups, n_permutations=3, seed=2)
    slow = time_resolved_null(
        X, y, groups, n_permutations=3, seed=2, classifier=make_classifier("lda")
    )
    np.testing.assert_allclose(fast, slow, atol=1e-12)


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("generalize", [False, True])
def test_null_of_many_labellings_equals_one_at_a_time(rng, n_classes, generalize, monkeypatch):
    """The batched null is the per-labelling fit, bit for bit, whatever the batch."""
    import neuroflow.decoding.lda as lda

    X, y, splits, groups = _data(rng, n_classes, n=67, n_channels=5, n_times=7)
    # shuffles within groups: class counts differ between labellings in a training fold
    labels = np.stack([shuffle_labels(y, np.arange(67) % 3, rng) for _ in range(23)])
    one_by_one = np.stack(
        [sliding_lda_scores(X, yp, splits, generalize=generalize).mean(axis=0) for yp in labels]
    )
    counts = {tuple(np.bincount(yp[splits[0][0]], minlength=n_classes)) for yp in labels}
    assert len(counts) > 1  # several batches of class counts in one fold
    got = sliding_lda_null(X, labels, splits, generalize=generalize)
    np.testing.assert_array_equal(got, one_by_one)
    monkeypatch.setattr(lda, "NULL_BATCH_BYTES", 1)  # one labelling per batch
    np.testing.assert_array_equal(sliding_lda_null(X, labels, splits, generalize=generalize), got)
    # the stage's entry point draws the same shuffles and gets the same null
    null = time_resolved_null(X, y, groups, n_permutations=11, seed=4, generalize=generalize)
    draw = np.random.default_rng(4)
    drawn = [shuffle_labels(y, groups, draw) for _ in range(11)]
    ref = [sliding_lda_scores(X, yp, splits, generalize=generalize).mean(0) for yp in drawn]
    np.testing.assert_array_equal(null, np.stack(ref))
    with pytest.raises(ValueError, match=r"`labels` \(n_labellings, n_epochs\) must agree"):
        sliding_lda_null(X, labels[:, :5], splits)
    assert (
        sliding_lda_null(X, labels[:0], splits, generalize=generalize).shape
        == (0, 7, 7)[: 3 if generalize else 2]
    )


def test_sliding_lda_errors(rng):
    X, y, splits, _ = _data(rng, 2)
    with pytest.raises(ValueError, match="must agree"):
        sliding_lda_scores(X[:, :, 0], y, splits)
    with pytest.raises(ValueError, match="at least 2 classes"):
        sliding_lda_scores(X, np.r_[np.zeros(60, int), 1], [(np.arange(30), np.arange(30, 61))])


def test_bin_window_averages_bins(rng):
    times = np.arange(-0.1, 0.3, 0.01)
    ep = rng.standard_normal((5, 3, times.size))
    X = bin_window(ep, times, [0.0, 0.2], 0.05)
    keep = (times >= -1e-9) & (times <= 0.2 + 1e-9)
    assert X.shape == (5, 3 * 5)  # bins of 5, 5, 5, 5 samples and a last one of 1
    np.testing.assert_allclose(X.reshape(5, 3, 5)[:, :, 0], ep[:, :, keep][:, :, :5].mean(2))
    np.testing.assert_allclose(X.reshape(5, 3, 5)[:, :, -1], ep[:, :, keep][:, :, -1])
    np.testing.assert_allclose(bin_window(ep, times, None, None), ep.reshape(5, -1))
    # bins narrower than the sampling step keep every sample once
    np.testing.assert_allclose(bin_window(ep, times, None, 0.004), ep.reshape(5, -1))
    with pytest.raises(ValueError, match="`bin_width` must be a positive float"):
        bin_window(ep, times, [0.0, 0.2], 0.0)


def test_zscore_features_uses_reference(rng):
    ref = rng.standard_normal((9, 4)) * [1, 10, 100, 0] + 3
    F = rng.standard_normal((7, 4))
    Z = zscore_features(F, ref)
    np.testing.assert_allclose(Z[:, :3], (F[:, :3] - ref[:, :3].mean(0)) / ref[:, :3].std(0))
    np.testing.assert_allclose(Z[:, 3], F[:, 3] - 3)
    with pytest.raises(ValueError, match="same number of features"):
        zscore_features(F, ref[:, :3])

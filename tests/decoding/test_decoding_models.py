"""Feature decoding, classification and the contrastive decoder on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.model_selection import GroupKFold, cross_val_score

from neuroflow.analysis_inputs import average_by_stimulus
from neuroflow.decoding.classification import (
    classify,
    labels_constant_within_groups,
    make_classifier,
    permute_labels,
)
from neuroflow.decoding.contrastive import fit_contrastive, info_nce
from neuroflow.decoding.features import fit_feature_decoder, flatten_window
from neuroflow.decoding.identification import identification_metrics


def _planted(rng, n_stim=90, n_feat=7, n_brain=23, repeats=2, noise=0.8):
    F = rng.standard_normal((n_stim, n_feat))
    W = rng.standard_normal((n_feat, n_brain))
    idx = np.repeat(np.arange(n_stim), repeats)
    X = F[idx] @ W + noise * rng.standard_normal((idx.size, n_brain))
    return F, idx, X


def test_flatten_window(rng):
    ep = rng.standard_normal((7, 3, 9))
    times = np.linspace(-0.2, 0.6, 9)
    X = flatten_window(ep, times, [0.0, 0.2])
    keep = (times >= 0) & (times <= 0.2 + 1e-9)
    np.testing.assert_array_equal(X, ep[:, :, keep].reshape(7, -1))
    with pytest.raises(ValueError, match="`window` must overlap"):
        flatten_window(ep, times, [2.0, 3.0])


def test_feature_decoder_identifies(rng):
    F, idx, X = _planted(rng)
    train = idx < 70
    dec = fit_feature_decoder(
        X[train], F[idx[train]], groups=idx[train], alphas=[0.1, 10, 1000], n_splits=5
    )
    ids, pred = average_by_stimulus(dec.predict(X[~train]), idx[~train].astype(str))
    m = identification_metrics(pred, F[ids.astype(int)])
    assert m["top1"] > 0.8 > 5 * m["chance_top1"]
    with pytest.raises(ValueError, match="same number of rows"):
        fit_feature_decoder(X, F, groups=idx, alphas=[1.0])


def test_classify_matches_sklearn_and_null(rng):
    n = 84
    groups = np.repeat(np.arange(7), 12)
    y = np.tile([0, 1, 2], 28)
    X = rng.standard_normal((n, 9))
    X[:, 0] += 1.2 * y
    res = classify(X, y, groups, n_splits=7, n_permutations=19, seed=0)
    ref = cross_val_score(
        make_classifier("lda"), X, y, groups=groups, cv=GroupKFold(7), scoring="balanced_accuracy"
    )
    np.testing.assert_allclose(res.fold_scores, ref)
    assert res.permutation_unit == "within_group"
    assert res.chance == pytest.approx(1 / 3)
    assert res.p_value == pytest.approx(1 / 20)
    assert res.null.mean() < 0.5 < res.score


def test_classify_group_level_shuffle(rng):
    stim = np.repeat(np.arange(30), 3)
    y = (stim % 2).astype(int)
    X = rng.standard_normal((90, 5))
    assert labels_constant_within_groups(y, stim)
    res = classify(X, y, stim, classifier="logistic", n_splits=5, n_permutations=9)
    assert res.permutation_unit == "group" and res.null.shape == (9,)
    assert 0.0 < res.p_value <= 1.0
    yp = permute_labels(y, stim, np.random.default_rng(0))
    assert labels_constant_within_groups(yp, stim) and yp.sum() == y.sum()
    with pytest.raises(ValueError, match="`classifier` must be one of"):
        make_classifier("svm")
    with pytest.raises(ValueError, match="at least 2 classes"):
        classify(X, np.zeros(90), stim)


def test_info_nce_prefers_matched_pairs(rng):
    import torch

    f = torch.as_tensor(rng.standard_normal((8, 5)), dtype=torch.float32)
    scale = torch.tensor(np.log(10.0), dtype=torch.float32)
    assert info_nce(f, f, scale) < info_nce(f.flip(0), f, scale)


def test_contrastive_learns_planted_map(rng):
    F, idx, X = _planted(rng, n_stim=160, n_feat=12, n_brain=31, noise=1.0)
    train = idx < 130
    dec = fit_contrastive(
        X[train],
        F[idx[train]],
        idx[train],
        max_epochs=150,
        patience=15,
        lr=3e-3,
        seed=0,
        device="cpu",
    )
    ids, z = average_by_stimulus(dec.transform(X[~train]), idx[~train].astype(str))
    m = identification_metrics(z, F[ids.astype(int)])
    assert m["top1"] > 10 * m["chance_top1"]
    assert 0.01 <= dec.temperature <= 1.0
    assert len(dec.history["val_loss"]) >= dec.best_epoch + 1
    with pytest.raises(ValueError, match="`val_fraction` must be in"):
        fit_contrastive(X, F[idx], idx, val_fraction=1.5)

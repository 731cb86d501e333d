"""Identification metrics against direct per-item computations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from neuroflow.analysis_inputs import average_by_stimulus
from neuroflow.decoding.identification import (
    correlation_matrix,
    identification_metrics,
    identification_null,
    identification_ranks,
)


def _loop_ranks(pred, true):
    ranks = []
    for i in range(len(pred)):
        r = np.array([pearsonr(pred[i], t)[0] for t in true])
        ranks.append(1 + (r > r[i]).sum() + 0.5 * ((r == r[i]).sum() - 1))
    return np.array(ranks)


def test_correlation_matrix_matches_pearsonr(rng):
    a, b = rng.standard_normal((7, 9)), rng.standard_normal((8, 9))
    ref = np.array([[pearsonr(x, y)[0] for y in b] for x in a])
    np.testing.assert_allclose(correlation_matrix(a, b), ref, atol=1e-12)


def test_ranks_match_loop(rng):
    true = rng.standard_normal((11, 7))
    pred = true + 1.5 * rng.standard_normal((11, 7))
    np.testing.assert_allclose(identification_ranks(pred, true), _loop_ranks(pred, true))


def test_metrics_perfect_and_chance(rng):
    true = rng.standard_normal((9, 8))
    m = identification_metrics(true * 2 + 1, true, top_k=(1, 5))
    assert m["top1"] == 1.0 and m["mean_rank"] == 1.0
    assert m["chance_top1"] == pytest.approx(1 / 9) and m["chance_top5"] == pytest.approx(5 / 9)
    assert m["chance_mean_rank"] == 5.0
    ranks = _loop_ranks(pred := rng.standard_normal((9, 8)), true)
    m = identification_metrics(pred, true)
    assert m["top5"] == pytest.approx(np.mean(ranks <= 5))
    assert m["mean_rank"] == pytest.approx(ranks.mean())


def test_null_is_label_shuffle(rng):
    true = rng.standard_normal((10, 7))
    pred = true + 0.3 * rng.standard_normal((10, 7))
    null = identification_null(pred, true, n_permutations=50, seed=3)
    assert null["top1"].shape == (50,)
    # recompute one permutation directly: prediction i scored against stimulus perm[i]
    perms = np.random.default_rng(3).permuted(np.tile(np.arange(10), (50, 1)), axis=1)
    c = correlation_matrix(pred, true)
    i = 17
    direct = [1 + (c[k] > c[k, perms[i, k]]).sum() for k in range(10)]
    assert null["mean_rank"][i] == pytest.approx(np.mean(direct))
    assert null["top1"].mean() < 0.4 < identification_metrics(pred, true)["top1"]


def test_average_by_stimulus(rng):
    x = rng.standard_normal((7, 3))
    ids, means = average_by_stimulus(x, ["b", "a", "b", "c", "a", "a", "b"])
    assert ids.tolist() == ["a", "b", "c"]
    np.testing.assert_allclose(means[0], x[[1, 4, 5]].mean(0))
    with pytest.raises(ValueError, match="`stimuli` must have shape"):
        average_by_stimulus(x, ["a"])


def test_errors(rng):
    with pytest.raises(ValueError, match="must both have shape"):
        identification_metrics(rng.standard_normal((7, 3)), rng.standard_normal((8, 3)))
    with pytest.raises(ValueError, match="`n_permutations` must be a positive int"):
        identification_null(
            rng.standard_normal((7, 3)), rng.standard_normal((7, 3)), n_permutations=0
        )
    with pytest.raises(ValueError, match="`top_k` must hold positive ints"):
        identification_metrics(rng.standard_normal((7, 3)), rng.standard_normal((7, 3)), top_k=[0])

"""Per-target scores against scipy and scikit-learn."""

import numpy as np
import pytest
from scipy.stats import pearsonr
from sklearn.metrics import r2_score as sk_r2

from neuroflow.evaluation.metrics import pearson_r, r2_score, zscore_time


def test_pearson_r_matches_scipy(rng):
    y_true = rng.standard_normal((8, 9))
    y_pred = 0.5 * y_true + rng.standard_normal((8, 9))
    expected = [pearsonr(y_true[:, v], y_pred[:, v]).statistic for v in range(9)]
    np.testing.assert_allclose(pearson_r(y_true, y_pred), expected, rtol=1e-10)


def test_pearson_r_broadcasts_over_repeats(rng):
    y_test = rng.standard_normal((3, 8, 7))
    y_pred = rng.standard_normal((8, 7))
    r = pearson_r(y_test, y_pred[None])
    assert r.shape == (3, 7)
    for rep in range(3):
        np.testing.assert_allclose(r[rep], pearson_r(y_test[rep], y_pred), rtol=1e-12)


def test_pearson_r_constant_target_is_nan(rng):
    y_true = rng.standard_normal((8, 7))
    y_true[:, 2] = 4.0
    r = pearson_r(y_true, rng.standard_normal((8, 7)))
    assert np.isnan(r[2]) and np.isfinite(np.delete(r, 2)).all()


def test_r2_matches_sklearn(rng):
    y_true = rng.standard_normal((9, 7))
    y_pred = y_true + 0.8 * rng.standard_normal((9, 7))
    expected = sk_r2(y_true, y_pred, multioutput="raw_values")
    np.testing.assert_allclose(r2_score(y_true, y_pred), expected, rtol=1e-10)
    assert (r2_score(y_true, -y_pred) < 0).all()


def test_r2_per_repeat_shape(rng):
    y_test = rng.standard_normal((2, 9, 8))
    y_pred = rng.standard_normal((9, 8))
    r2 = r2_score(y_test, y_pred[None])
    np.testing.assert_allclose(r2[1], sk_r2(y_test[1], y_pred, multioutput="raw_values"))


def test_zscore_time(rng):
    z = zscore_time(rng.standard_normal((2, 9, 7)) * 5 + 3)
    np.testing.assert_allclose(z.mean(axis=-2), 0, atol=1e-12)
    np.testing.assert_allclose(z.std(axis=-2), 1, rtol=1e-12)


@pytest.mark.parametrize(
    ("y_true", "y_pred", "match"),
    [
        (np.zeros(8), np.zeros(8), "must have shape"),
        (np.zeros((1, 7)), np.zeros((1, 7)), "at least 2 time points"),
        (np.zeros((8, 7)), np.zeros((8, 9)), "broadcastable|same"),
        (np.zeros((8, 7)), np.zeros((9, 7)), "broadcastable|same"),
    ],
)
def test_metric_shape_errors(y_true, y_pred, match):
    with pytest.raises(ValueError, match=match):
        pearson_r(y_true, y_pred)
    with pytest.raises(ValueError, match=match):
        r2_score(y_true, y_pred)

"""Geometry metrics: participation ratio, eigenspectrum, power law, class manifolds."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.geometry import (
    class_manifold_geometry,
    default_fit_range,
    eigenspectrum,
    ood_readout,
    participation_ratio,
    power_law_exponent,
)


def _rotation(rng: np.random.Generator, d: int) -> np.ndarray:
    """A random orthogonal matrix, shape (d, d)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _with_spectrum(rng: np.random.Generator, n: int, variances: np.ndarray) -> np.ndarray:
    """``n`` Gaussian rows whose covariance has eigenvalues ``variances``, randomly rotated."""
    d = variances.size
    return (rng.standard_normal((n, d)) * np.sqrt(variances)) @ _rotation(rng, d).T + 3.0


def test_isotropic_gaussian_has_its_dimension(rng):
    X = rng.standard_normal((20_000, 37)) * 2.5 - 1.0
    assert participation_ratio(eigenspectrum(X)) == pytest.approx(37, rel=0.02)


def test_rank_k_data_has_k_dimensions(rng):
    k, d = 7, 50
    X = rng.standard_normal((4_001, k)) @ _rotation(rng, d)[:k]
    assert np.linalg.matrix_rank(X) == k
    assert participation_ratio(eigenspectrum(X)) == pytest.approx(k, rel=0.02)


@pytest.mark.parametrize("alpha", [1.0, 1.5])
def test_power_law_exponent_recovered(rng, alpha):
    d = 151
    X = _with_spectrum(rng, 8_000, np.arange(1, d + 1, dtype=float) ** -alpha)
    fit = power_law_exponent(eigenspectrum(X))
    assert fit.alpha == pytest.approx(alpha, abs=0.05)
    assert fit.r2 > 0.99
    assert fit.fit_range == default_fit_range(d)


def test_power_law_on_exact_spectrum_and_given_range():
    lam = np.arange(1, 60, dtype=float) ** -1.3
    fit = power_law_exponent(lam, fit_range=(5, 40))
    assert fit.alpha == pytest.approx(1.3, abs=1e-10)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.fit_range == (5, 40)


def test_power_law_too_few_eigenvalues_is_nan():
    fit = power_law_exponent(np.array([3.0, 2.0, 1.0]))
    assert np.isnan(fit.alpha) and np.isnan(fit.r2)
    assert fit.fit_range == (0, 0)


def test_power_law_checks_its_inputs():
    with pytest.raises(ValueError, match="descending"):
        power_law_exponent(np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(ValueError, match=r"fit_range must satisfy .* got \(3, 2\)"):
        power_law_exponent(np.linspace(5, 1, 9), fit_range=(3, 2))
    with pytest.raises(ValueError, match="eigenvalues must be non-negative"):
        power_law_exponent(np.array([2.0, 1.0, -1.0]))


def test_eigenvalues_match_numpy(rng):
    X = rng.standard_normal((313, 41)) * np.linspace(0.5, 4.0, 41) + rng.standard_normal(41)
    ours = eigenspectrum(X)
    ref = np.sort(np.linalg.eigvalsh(np.cov(X.T)))[::-1]
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, ref, rtol=1e-8)


@pytest.mark.parametrize("method", ["svd", "gram"])
def test_more_features_than_stimuli(rng, method):
    X = rng.standard_normal((23, 157))
    ours = eigenspectrum(X, method=method)
    ref = np.sort(np.linalg.eigvalsh(np.cov(X.T)))[::-1]
    assert ours.shape == (22,)  # centring leaves n - 1 non-zero eigenvalues
    np.testing.assert_allclose(ours, ref[:22], rtol=1e-8)
    assert np.all(np.abs(ref[22:]) < 1e-10 * ref[0])


def test_gram_method_matches_svd(rng):
    X = rng.standard_normal((97, 31)) * np.linspace(1.0, 3.0, 31)
    np.testing.assert_allclose(eigenspectrum(X, method="gram"), eigenspectrum(X), rtol=1e-10)
    with pytest.raises(ValueError, match="method must be 'svd' or 'gram', got 'eig'"):
        eigenspectrum(X, method="eig")


def test_input_validation(rng):
    X = rng.standard_normal((11, 5))
    X[2, 3] = np.nan
    X[4, 1] = np.inf
    with pytest.raises(ValueError, match="X must be finite, got 2 NaN or infinite values"):
        eigenspectrum(X)
    with pytest.raises(ValueError, match=r"X must have at least 2 stimuli.*got 1"):
        eigenspectrum(np.ones((1, 4)))
    with pytest.raises(ValueError, match=r"X must be 2-D .* got shape \(6,\)"):
        eigenspectrum(np.ones(6))
    with pytest.raises(ValueError, match=r"eigenvalues must be a non-empty 1-D array"):
        participation_ratio(np.ones((2, 2)))
    assert np.isnan(participation_ratio(np.zeros(3)))


def _classes(
    rng: np.random.Generator, sizes: tuple[int, ...], separation: float, d: int = 19
) -> tuple[np.ndarray, np.ndarray]:
    """Isotropic unit-variance classes with centroids ``separation`` apart along axes."""
    centroids = separation * np.eye(len(sizes), d)
    X = np.concatenate(
        [rng.standard_normal((n, d)) + c for n, c in zip(sizes, centroids, strict=True)]
    )
    labels = np.repeat([f"c{i}" for i in range(len(sizes))], sizes)
    order = rng.permutation(labels.size)
    return X[order], labels[order]


def test_separated_classes_rank_above_overlapping(rng):
    far = class_manifold_geometry(*_classes(rng, (60, 47), separation=12.0))
    near = class_manifold_geometry(*_classes(rng, (60, 47), separation=0.3))
    assert far.fisher_ratio > 10 * near.fisher_ratio
    assert far.linear_separability > 0.97
    assert near.linear_separability < 0.75
    assert np.all(far.radius < near.radius)
    assert list(far.classes) == ["c0", "c1"]
    assert list(far.n_members) == [60, 47]
    assert far.n_folds == 5


def test_fisher_ratio_is_calinski_harabasz(rng):
    from sklearn.metrics import calinski_harabasz_score

    X, labels = _classes(rng, (30, 25, 41), separation=2.0)
    geo = class_manifold_geometry(X, labels)
    assert geo.fisher_ratio == pytest.approx(calinski_harabasz_score(X, labels), rel=1e-10)


def test_class_dimensionality_follows_within_class_rank(rng):
    d, ranks, n = 30, (2, 5), 3_000
    parts, labels = [], []
    for i, k in enumerate(ranks):
        basis = _rotation(rng, d)[:k]
        parts.append(rng.standard_normal((n, k)) @ basis + 5.0 * rng.standard_normal(d))
        labels += [f"class{i}"] * n
    geo = class_manifold_geometry(np.concatenate(parts), np.array(labels))
    np.testing.assert_allclose(geo.dimension, ranks, rtol=0.02)


def test_class_labels_are_checked(rng):
    X = rng.standard_normal((9, 4))
    with pytest.raises(ValueError, match=r"labels must have one entry per stimulus \(9\)"):
        class_manifold_geometry(X, ["a"] * 8)
    single = class_manifold_geometry(X, ["a"] * 8 + ["b"])
    assert single.degenerate.tolist() == [False, True]
    assert np.isnan(single.fisher_ratio) and np.isnan(single.linear_separability)
    assert "fewer than 2 members: 'b'" in single.note
    assert "fewer than 2 usable classes (1)" in single.note
    with pytest.raises(ValueError, match="at least 2 classes, got 1"):
        class_manifold_geometry(X, ["a"] * 9)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="X must be finite, got 1 NaN"):
        class_manifold_geometry(X, ["a"] * 5 + ["b"] * 4)


def test_small_classes_use_fewer_folds(rng):
    X, labels = _classes(rng, (3, 4, 6), separation=6.0, d=8)
    assert class_manifold_geometry(X, labels).n_folds == 3


def test_constant_class_is_left_out(rng):
    X, labels = _classes(rng, (23, 9, 31, 14), separation=3.0)
    X[labels == "c2"] = 0.7  # every member of c2 has the same features
    X = np.concatenate([X, rng.standard_normal((1, X.shape[1]))])
    labels = np.append(labels, "c4")  # a class of one stimulus
    geo = class_manifold_geometry(X, labels, n_folds=4, seed=3)
    assert geo.degenerate.tolist() == [False, False, True, False, True]
    assert "zero within-class variance: 'c2'" in geo.note
    assert "fewer than 2 members: 'c4'" in geo.note
    assert "left out 2 of 5 classes" in geo.note
    kept = ~np.isin(labels, ["c2", "c4"])
    ref = class_manifold_geometry(X[kept], labels[kept], n_folds=4, seed=3)
    assert ref.note == "" and not ref.degenerate.any()
    used = ~geo.degenerate
    assert np.all(np.isfinite(geo.dimension[used])) and np.all(np.isfinite(geo.radius[used]))
    assert np.isnan(geo.dimension[~used]).all() and np.isnan(geo.radius[~used]).all()
    np.testing.assert_allclose(geo.dimension[used], ref.dimension, rtol=1e-12)
    np.testing.assert_allclose(geo.radius[used], ref.radius, rtol=1e-12)
    assert geo.fisher_ratio == pytest.approx(ref.fisher_ratio, rel=1e-12)
    assert geo.linear_separability == ref.linear_separability
    assert geo.n_folds == ref.n_folds == 4
    assert geo.n_members.tolist() == [23, 9, 31, 14, 1]


def test_too_few_usable_classes_is_nan_with_reason(rng):
    X = rng.standard_normal((12, 5))
    X[:7] = 1.5
    geo = class_manifold_geometry(X, ["a"] * 7 + ["b"] * 5)
    assert geo.degenerate.tolist() == [True, False]
    assert np.isnan(geo.fisher_ratio) and np.isnan(geo.linear_separability)
    assert np.isnan(geo.dimension).all() and geo.n_folds == 0
    assert "fewer than 2 usable classes (1), class metrics are NaN" in geo.note


def _shifted_sets(
    rng: np.random.Generator, transfer: bool, sizes: tuple[int, ...] = (31, 22, 40)
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Train and shifted test sets of three classes, in 17 features.

    With ``transfer`` the shifted set keeps the class axes (plus an offset and more
    noise); without, the shift wipes the classes out (every class at the same place).
    """
    d, k = 17, len(sizes)
    axes = 4.0 * np.eye(k, d)
    y_train = np.repeat([f"c{i}" for i in range(k)], sizes)
    y_test = np.repeat([f"c{i}" for i in range(k)], [s // 2 + 3 for s in sizes])
    codes_train = np.unique(y_train, return_inverse=True)[1]
    codes_test = np.unique(y_test, return_inverse=True)[1]
    X_train = axes[codes_train] + rng.standard_normal((y_train.size, d))
    shift = 2.0 + 1.5 * rng.standard_normal((y_test.size, d))
    X_test = (axes[codes_test] if transfer else 0.0) + shift
    return X_train, y_train, X_test, y_test


def test_ood_readout_transfers_only_with_shared_class_structure(rng):
    good = ood_readout(*_shifted_sets(rng, True), n_folds=4, n_permutations=400, seed=1)
    bad = ood_readout(*_shifted_sets(rng, False), n_folds=4, n_permutations=400, seed=1)
    for readout in (good, bad):
        assert readout.chance == pytest.approx(1 / 3)
        assert readout.in_accuracy > 0.9  # both separate their training classes
        assert readout.n_classes == 3 and readout.n_folds == 4 and readout.note == ""
        assert readout.n_train == 93 and readout.n_test == 18 + 14 + 23
    assert good.ood_accuracy > 0.8 and good.p_value < 0.05
    assert bad.ood_accuracy < 0.6 and bad.p_value > 0.05
    assert good.p_value >= 1 / 401


def test_ood_accuracy_matches_sklearn_and_permutations_are_seeded(rng):
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X_train, y_train, X_test, y_test = _shifted_sets(rng, True, sizes=(12, 19))
    X_test = X_test + 1.0 * rng.standard_normal(X_test.shape)
    readout = ood_readout(X_train, y_train, X_test, y_test, n_permutations=50, seed=4)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    expected = balanced_accuracy_score(y_test, model.fit(X_train, y_train).predict(X_test))
    assert readout.ood_accuracy == pytest.approx(expected, rel=1e-12)
    again = ood_readout(X_train, y_train, X_test, y_test, n_permutations=50, seed=4)
    assert again == readout


def test_ood_readout_leaves_out_unusable_classes(rng):
    X_train, y_train, X_test, y_test = _shifted_sets(rng, True)
    y_train = y_train.astype(object)
    y_train[0] = "lonely"
    X_test = np.concatenate([X_test, X_test[:2]])
    y_test = np.append(y_test, ["unseen", "unseen"])
    readout = ood_readout(X_train, y_train, X_test, y_test, n_permutations=20)
    assert "fewer than 2 stimuli left out: 'lonely'" in readout.note
    assert "2 held-out stimuli of classes not trained on left out" in readout.note
    assert readout.n_test == 55 and readout.n_train == 92
    none = ood_readout(X_train, y_train, X_test[-2:], y_test[-2:], n_permutations=20)
    assert np.isnan(none.ood_accuracy) and np.isnan(none.p_value)
    assert "no held-out stimulus of a trained class" in none.note
    with pytest.raises(ValueError, match=r"X_test must have shape \(n_test, 17\) .* got \(57, 3\)"):
        ood_readout(X_train, y_train, X_test[:, :3], y_test)
    with pytest.raises(ValueError, match="n_permutations must be at least 1, got 0"):
        ood_readout(X_train, y_train, X_test, y_test, n_permutations=0)
    with pytest.raises(ValueError, match=r"labels_test must have one entry per stimulus \(57\)"):
        ood_readout(X_train, y_train, X_test, y_test[:-1])

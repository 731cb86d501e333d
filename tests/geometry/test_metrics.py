"""Geometry metrics: participation ratio, eigenspectrum, power law, class manifolds."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.geometry import (
    class_manifold_geometry,
    default_fit_range,
    eigenspectrum,
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
    with pytest.raises(
        ValueError, match="Every class must have at least 2 stimuli, got 'b' \\(1\\)"
    ):
        class_manifold_geometry(X, ["a"] * 8 + ["b"])
    with pytest.raises(ValueError, match="at least 2 classes, got 1"):
        class_manifold_geometry(X, ["a"] * 9)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="X must be finite, got 1 NaN"):
        class_manifold_geometry(X, ["a"] * 5 + ["b"] * 4)


def test_small_classes_use_fewer_folds(rng):
    X, labels = _classes(rng, (3, 4, 6), separation=6.0, d=8)
    assert class_manifold_geometry(X, labels).n_folds == 3

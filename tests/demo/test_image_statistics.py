"""Tests of the low-level image statistics."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.features.image_statistics import FEATURE_NAMES, image_statistics


def _col(name: str) -> int:
    return FEATURE_NAMES.index(name)


def test_shapes_and_dtypes(rng):
    """Uint8, float and grey batches give (n_images, n_features)."""
    rgb = rng.integers(0, 256, size=(7, 9, 8, 3), dtype=np.uint8)
    out = image_statistics(rgb)
    assert out.shape == (7, len(FEATURE_NAMES))
    assert np.allclose(out, image_statistics(rgb.astype(np.float32) / 255.0), atol=1e-6)
    grey = rng.uniform(size=(3, 8, 9))
    assert image_statistics(grey).shape == (3, len(FEATURE_NAMES))
    mixed = image_statistics([rgb[0], rng.uniform(size=(12, 10, 3))])
    assert np.allclose(mixed[0], out[0])


def test_uniform_grey_has_no_contrast():
    """A uniform grey image has its mean and zero contrast and energy."""
    out = image_statistics(np.full((1, 9, 8, 3), 0.5))[0]
    assert out[_col("luminance_mean")] == pytest.approx(0.5)
    assert out[_col("rms_contrast")] == pytest.approx(0.0, abs=1e-12)
    assert out[_col("saturation_mean")] == pytest.approx(0.0)
    energy = [i for i, n in enumerate(FEATURE_NAMES) if n.startswith(("edge_", "sf_band"))]
    assert np.allclose(out[energy], 0.0, atol=1e-20)


def test_colour_means_and_band_sum(rng):
    """Channel means are exact and the frequency bands add up to the luma variance."""
    img = rng.uniform(size=(1, 8, 9, 3))
    out = image_statistics(img)[0]
    assert out[_col("red_mean")] == pytest.approx(img[0, ..., 0].mean())
    bands = [i for i, n in enumerate(FEATURE_NAMES) if n.startswith("sf_band")]
    assert out[bands].sum() == pytest.approx(out[_col("luminance_std")] ** 2)
    red = np.zeros((1, 7, 7, 3))
    red[..., 0] = 1.0
    assert image_statistics(red)[0, _col("saturation_mean")] == pytest.approx(1.0)


def test_orientation_selectivity():
    """Vertical stripes (luma varying along x) drive 0 degrees, horizontal ones 90."""
    x = np.arange(32)
    stripes = 0.5 + 0.4 * np.sin(2 * np.pi * 0.125 * x)
    vertical = np.broadcast_to(stripes[None, :], (32, 32))
    out = image_statistics(np.stack([vertical, vertical.T]))
    o0, o90 = _col("edge_f0.125_o0"), _col("edge_f0.125_o90")
    assert out[0, o0] > 50 * out[0, o90]
    assert out[1, o90] > 50 * out[1, o0]


@pytest.mark.parametrize(
    ("images", "match"),
    [
        (np.zeros((2, 8)), "must be an array of shape"),
        (np.full((1, 8, 8, 3), 2.0), r"values in \[0, 1\]"),
        (np.zeros((1, 8, 8, 4)), "must have shape"),
        (np.zeros((1, 1, 8, 3)), "at least 2x2"),
    ],
)
def test_bad_images(images, match):
    """Malformed inputs raise clear errors."""
    with pytest.raises(ValueError, match=match):
        image_statistics(images)

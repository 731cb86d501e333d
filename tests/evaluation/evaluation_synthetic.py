"""Synthetic data for the evaluation tests: prediction stores like the encoding stage's."""

from __future__ import annotations

import numpy as np
import xarray as xr


def smooth_noise(rng: np.random.Generator, shape: tuple[int, ...], width: int = 3) -> np.ndarray:
    """Unit-variance noise, autocorrelated over the second-to-last axis."""
    white = rng.standard_normal(shape)
    kernel = np.hanning(2 * width + 1)
    kernel /= np.sqrt((kernel**2).sum())
    return np.apply_along_axis(lambda x: np.convolve(x, kernel, mode="same"), -2, white)


def build_prediction_dataset(
    rng: np.random.Generator,
    *,
    n_times: int = 120,
    n_repeats: int = 2,
    rois: dict[str, tuple[int, float]] | None = None,
    subject: str = "01",
    model: str = "minilm",
    feature_spaces: tuple[str, ...] = ("minilm",),
    tr: float = 2.0,
) -> xr.Dataset:
    """A prediction store: ``y_pred`` is the planted signal, ``y_test`` signal + noise.

    ``rois`` maps an ROI label to (n_voxels, signal SD relative to a unit noise SD);
    a signal SD of 0 makes the ROI pure noise with an unrelated prediction.
    """
    rois = rois or {"early_visual": (9, 1.0), "semantic": (8, 0.5), "noise": (7, 0.0), "": (3, 0.0)}
    labels = np.concatenate([[k] * n for k, (n, _) in rois.items()])
    snr = np.concatenate([[s] * n for _, (n, s) in rois.items()])
    n_vox = labels.size
    signal = smooth_noise(rng, (n_times, n_vox)) * snr
    y_test = signal[None] + smooth_noise(rng, (n_repeats, n_times, n_vox))
    y_pred = np.where(snr > 0, signal, smooth_noise(rng, (n_times, n_vox)))
    shape = (7, 8, 9)
    flat = rng.choice(np.prod(shape), size=n_vox, replace=False)
    i, j, k = np.unravel_index(flat, shape)
    affine = np.diag([3.0, 3.0, 3.0, 1.0])
    affine[:3, 3] = [-10.0, -12.0, -14.0]
    xyz = (affine @ np.stack([i, j, k, np.ones(n_vox)]))[:3]
    coords = {
        "voxel": np.arange(n_vox),
        "roi": ("voxel", labels.astype(str)),
        "i": ("voxel", i),
        "j": ("voxel", j),
        "k": ("voxel", k),
        "x": ("voxel", xyz[0]),
        "y": ("voxel", xyz[1]),
        "z": ("voxel", xyz[2]),
    }
    return xr.Dataset(
        {
            "y_pred": (("time", "voxel"), y_pred.astype(np.float32)),
            "y_test": (("repeat", "time", "voxel"), y_test.astype(np.float32)),
        },
        coords=coords,
        attrs={
            "subject": subject,
            "feature_spaces": list(feature_spaces),
            "model": model,
            "tr": tr,
            "affine": affine.tolist(),
            "mask_shape": list(shape),
        },
    )

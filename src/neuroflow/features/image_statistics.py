"""Low-level image statistics: luminance, contrast, colour, oriented and spatial-frequency energy.

The features are classic descriptors of early visual cortex input, computed in plain
numpy from each image's luma (Rec. 709 weights on the gamma-encoded RGB values, in
[0, 1]). Every energy is a *mean squared response per pixel*, so the five
spatial-frequency bands add up to the luma variance and all features are independent
of image size for a fixed pixel pitch. Frequencies are in cycles per pixel.

==========================  =================================================================
feature                     definition
==========================  =================================================================
``luminance_mean``          mean luma
``luminance_std``           standard deviation of luma over pixels
``rms_contrast``            ``luminance_std / luminance_mean`` (0 for a black image)
``red_mean``                mean of the red channel
``green_mean``              mean of the green channel
``blue_mean``               mean of the blue channel
``saturation_mean``         mean HSV saturation, ``(max - min) / max`` per pixel (0 where black)
``edge_f{f}_o{deg}``        oriented energy: mean squared response to a log-Gabor filter
                            centred on ``f`` cycles/pixel (0.25, 0.125, 0.0625) and
                            orientation ``deg`` (0, 45, 90, 135 degrees; 0 = luma varies
                            along x, i.e. vertical edges; angles counter-clockwise with y
                            pointing up)
``sf_band{k}``              spatial-frequency energy: luma power in octave band ``k`` of the
                            radial frequency, from low (``k = 1``: below 1/32) to high
                            (``k = 5``: above 1/4 cycles/pixel), DC excluded
==========================  =================================================================
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

__all__ = ["FEATURE_NAMES", "image_statistics"]

#: Centre frequencies (cycles/pixel) of the oriented log-Gabor filters.
EDGE_FREQUENCIES = (0.25, 0.125, 0.0625)
#: Orientations (degrees) of the oriented filters.
EDGE_ORIENTATIONS = (0, 45, 90, 135)
#: Edges (cycles/pixel) of the radial spatial-frequency bands; the last band is open.
SF_BAND_EDGES = (0.0, 1 / 32, 1 / 16, 1 / 8, 1 / 4, np.inf)
#: Rec. 709 luma weights.
LUMA_WEIGHTS = np.array([0.2126, 0.7152, 0.0722])
#: Log-Gabor radial bandwidth parameter (sigma over centre frequency ratio).
_LOG_GABOR_SIGMA = 0.55
#: Angular standard deviation (radians) of the oriented filters.
_ANGULAR_SIGMA = np.pi / 8

FEATURE_NAMES: tuple[str, ...] = (
    "luminance_mean",
    "luminance_std",
    "rms_contrast",
    "red_mean",
    "green_mean",
    "blue_mean",
    "saturation_mean",
    *(f"edge_f{f:g}_o{o}" for f in EDGE_FREQUENCIES for o in EDGE_ORIENTATIONS),
    *(f"sf_band{k}" for k in range(1, len(SF_BAND_EDGES))),
)


def _as_float_rgb(image: np.ndarray, index: int) -> np.ndarray:
    """Convert one image to float64 RGB in [0, 1], shape (H, W, 3)."""
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=-1)
    if arr.ndim != 3 or arr.shape[-1] != 3:
        raise ValueError(
            f"images[{index}] must have shape (H, W), (H, W, 1) or (H, W, 3), "
            f"got {arr.shape} instead."
        )
    if min(arr.shape[:2]) < 2:
        raise ValueError(f"images[{index}] must be at least 2x2 pixels, got {arr.shape} instead.")
    if arr.dtype in (np.uint8, np.uint16):  # 8- or 16-bit samples: scaled by the bit depth
        return arr.astype(np.float64) / float(np.iinfo(arr.dtype).max)
    if arr.dtype == bool:
        return arr.astype(np.float64)
    if arr.dtype.kind not in "fiu":
        raise TypeError(f"images[{index}] must be numeric, got dtype {arr.dtype} instead.")
    out = arr.astype(np.float64)
    if not np.all(np.isfinite(out)) or out.min() < 0.0 or out.max() > 1.0:
        raise ValueError(
            f"images[{index}] must hold values in [0, 1] (or be uint8 or uint16), got range "
            f"[{np.nanmin(out):g}, {np.nanmax(out):g}] instead."
        )
    return out


def _frequency_grid(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Radial frequency and orientation (mod pi) of an FFT grid, shape (H, W) each."""
    fy = np.fft.fftfreq(shape[0])[:, None]
    fx = np.fft.fftfreq(shape[1])[None, :]
    radius = np.hypot(fx, fy)
    # Rows index y downwards, so flip fy for counter-clockwise angles with y up.
    angle = np.mod(np.arctan2(-fy, fx), np.pi)
    return radius, angle


def _filter_bank(shape: tuple[int, int]) -> np.ndarray:
    """Squared frequency responses of all filters, shape (n_filters, H, W)."""
    radius, angle = _frequency_grid(shape)
    safe = np.where(radius > 0, radius, 1.0)
    filters = []
    for f0 in EDGE_FREQUENCIES:
        radial = np.exp(-(np.log(safe / f0) ** 2) / (2 * np.log(_LOG_GABOR_SIGMA) ** 2))
        radial[radius == 0] = 0.0
        for deg in EDGE_ORIENTATIONS:
            theta = np.deg2rad(deg)
            delta = np.abs(np.mod(angle - theta + np.pi / 2, np.pi) - np.pi / 2)
            angular = np.exp(-(delta**2) / (2 * _ANGULAR_SIGMA**2))
            filters.append((radial * angular) ** 2)
    for low, high in itertools.pairwise(SF_BAND_EDGES):
        band = (radius > max(low, 0.0)) & (radius <= high)
        filters.append(band.astype(np.float64))
    return np.stack(filters)


def _statistics_same_shape(rgb: np.ndarray) -> np.ndarray:
    """Features of images that share one shape, (n, H, W, 3) -> (n, n_features)."""
    _, h, w, _ = rgb.shape
    luma = rgb @ LUMA_WEIGHTS
    lum_mean = luma.mean(axis=(1, 2))
    lum_std = luma.std(axis=(1, 2))
    contrast = np.divide(lum_std, lum_mean, out=np.zeros_like(lum_std), where=lum_mean > 0)
    channel_means = rgb.mean(axis=(1, 2))
    cmax = rgb.max(axis=-1)
    cmin = rgb.min(axis=-1)
    sat = np.divide(cmax - cmin, cmax, out=np.zeros_like(cmax), where=cmax > 0)
    power = np.abs(np.fft.fft2(luma, axes=(1, 2))) ** 2 / float(h * w) ** 2
    energies = np.einsum("nhw,khw->nk", power, _filter_bank((h, w)))
    return np.column_stack(
        [lum_mean, lum_std, contrast, channel_means, sat.mean(axis=(1, 2)), energies]
    )


def image_statistics(images: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """Compute low-level statistics of a batch of images.

    Parameters
    ----------
    images : ndarray, shape (n_images, H, W, 3) or (n_images, H, W) | sequence of ndarray
        RGB or grey images: uint8 (divided by 255), uint16 (divided by 65535) or
        floats in [0, 1]. A sequence may mix sizes.

    Returns
    -------
    features : ndarray, shape (n_images, n_features)
        float64 features in the order of :data:`FEATURE_NAMES` (see the module
        docstring for each definition).
    """
    if isinstance(images, np.ndarray):
        if images.ndim not in (3, 4):
            raise ValueError(
                "images must be an array of shape (n_images, H, W[, 3]) or a sequence of "
                f"images, got an array of shape {images.shape} instead."
            )
        seq = list(images)
    else:
        seq = list(images)
    out = np.empty((len(seq), len(FEATURE_NAMES)))
    if not seq:
        return out
    rgbs = [_as_float_rgb(img, i) for i, img in enumerate(seq)]
    shapes = sorted({r.shape for r in rgbs})
    for shape in shapes:
        idx = [i for i, r in enumerate(rgbs) if r.shape == shape]
        out[idx] = _statistics_same_shape(np.stack([rgbs[i] for i in idx]))
    return out

"""Stimulus images: reading them and the image transforms.

An image is an ``ndarray, shape (H, W, 3)``, float32 in [0, 1] (:func:`load_image`);
:func:`apply_transforms` resizes, centre-crops and blurs one image or video frame.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuroflow.io.files import read_image_unit

__all__ = ["apply_transforms", "load_image"]


def load_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image as float32 RGB, scaled by its bit depth.

    Parameters
    ----------
    path : path-like
        PNG, JPEG or any format Pillow reads, at 8 or 16 bits per sample (or a
        floating-point TIFF in [0, 1]); see :func:`neuroflow.io.files.read_image_unit`.

    Returns
    -------
    image : ndarray, shape (H, W, 3)
        Float32 in [0, 1]: a picture saved at 8 and at 16 bits gives the same values.

    Raises
    ------
    ValueError
        When Pillow cannot identify or decode the file, or its samples exceed its bit
        depth; the message names it.
    """
    return read_image_unit(path, "Stimulus image")


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, Sequence) and len(value) == 2 and all(int(v) > 0 for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"`{name}` must be a positive int or [height, width], got {value!r} instead.")


def apply_transforms(image: np.ndarray, transforms: Mapping[str, Any]) -> np.ndarray:
    """Resize, centre-crop and blur one image (or video frame).

    Parameters
    ----------
    image : ndarray, shape (H, W, 3)
        Float RGB in [0, 1].
    transforms : dict
        ``resize`` (int: shorter side in px, keeping the aspect ratio; or
        [height, width]; ``None`` to skip), ``center_crop`` (int or
        [height, width]; ``None`` to skip) and ``blur_sigma`` (Gaussian s.d. in
        px, 0 to skip), applied in that order.

    Returns
    -------
    image : ndarray, shape (H', W', 3)
        Float32.
    """
    out = image
    resize = transforms.get("resize")
    if resize is not None:
        from skimage.transform import resize as sk_resize

        h, w = out.shape[:2]
        if isinstance(resize, int):
            scale = resize / min(h, w)
            size = (max(1, round(h * scale)), max(1, round(w * scale)))
        else:
            size = _pair(resize, "transforms.resize")
        out = sk_resize(
            out, (*size, out.shape[2]), order=1, anti_aliasing=True, preserve_range=True
        )
    crop = transforms.get("center_crop")
    if crop is not None:
        ch, cw = _pair(crop, "transforms.center_crop")
        h, w = out.shape[:2]
        if ch > h or cw > w:
            raise ValueError(
                f"`transforms.center_crop` must fit in the image, got {[ch, cw]} for an image "
                f"of {[h, w]} instead."
            )
        top, left = (h - ch) // 2, (w - cw) // 2
        out = out[top : top + ch, left : left + cw]
    sigma = float(transforms.get("blur_sigma") or 0.0)
    if sigma < 0:
        raise ValueError(f"`transforms.blur_sigma` must be >= 0, got {sigma} instead.")
    if sigma > 0:
        from scipy.ndimage import gaussian_filter

        out = gaussian_filter(out, sigma=(sigma, sigma, 0.0), mode="reflect")
    return np.ascontiguousarray(out, dtype=np.float32)

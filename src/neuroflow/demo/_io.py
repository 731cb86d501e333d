"""Deterministic writers: the same content always gives the same bytes."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "png_bytes",
    "read_npz",
    "write_json",
    "write_nifti",
    "write_npz",
    "write_png",
    "write_tsv",
]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def _mkdir(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON with a trailing newline."""
    _mkdir(path).write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _cell(value: Any, decimals: int | None) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float | np.floating):
        if not np.isfinite(value):
            return "n/a"
        return f"{value:.{decimals}f}" if decimals is not None else repr(float(value))
    return str(value)


def write_tsv(
    path: Path,
    columns: Mapping[str, Sequence[Any]],
    decimals: Mapping[str, int] | None = None,
    default_decimals: int | None = 6,
) -> None:
    """Write a BIDS TSV (tab-separated, ``n/a`` for missing values, ``\\n`` line ends).

    Parameters
    ----------
    path : Path
        Output file.
    columns : dict of str to sequence
        Column name to values, all of one length.
    decimals : dict of str to int | None
        Decimals of float columns; others use ``default_decimals``.
    default_decimals : int | None
        ``None`` writes floats with ``repr``.
    """
    decimals = dict(decimals or {})
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"Columns of {path} must have equal lengths, got {sorted(lengths)}.")
    names = list(columns)
    lines = ["\t".join(names)]
    n = lengths.pop() if lengths else 0
    for i in range(n):
        lines.append(
            "\t".join(_cell(columns[c][i], decimals.get(c, default_decimals)) for c in names)
        )
    _mkdir(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays to a compressed ``.npz`` with fixed timestamps (no pickles)."""
    with zipfile.ZipFile(_mkdir(path), "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` into a dict."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def write_nifti(path: Path, data: np.ndarray, affine: np.ndarray, tr: float | None = None):
    """Write a NIfTI-1 image with mm / s units and the TR in ``pixdim[4]``."""
    import nibabel as nib

    img = nib.Nifti1Image(data, affine)
    hdr = img.header
    hdr.set_xyzt_units("mm", "sec")
    zooms = tuple(float(z) for z in np.sqrt((affine[:3, :3] ** 2).sum(axis=0)))
    if data.ndim == 4:
        if tr is None:
            raise ValueError(f"tr must be given for the 4-D image {path}.")
        zooms = (*zooms, float(tr))
    hdr.set_zooms(zooms)
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    img.to_filename(str(_mkdir(path)))


def png_bytes(image: np.ndarray) -> bytes:
    """Encode a uint8 RGB image as PNG (no timestamps), the bytes :func:`write_png` writes."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def write_png(path: Path, image: np.ndarray) -> None:
    """Write a uint8 RGB image as PNG (no timestamps)."""
    _mkdir(path).write_bytes(png_bytes(image))

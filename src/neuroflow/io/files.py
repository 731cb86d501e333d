"""Readers that name the file when an input is damaged or not what the workflow expects.

Libraries report a truncated gzip stream, an image Pillow cannot identify or a table
without a header deep inside their own code, without the file at fault. The readers
here open NIfTI images, stimulus images and TSV tables, check what the workflow needs
from them, and raise :class:`ValueError` (or :class:`FileNotFoundError`) naming the
file, what was wrong and what was expected, with the library's error as the cause.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "check_image",
    "check_nifti_data",
    "load_nifti",
    "read_image",
    "read_table",
]

#: Compressed bytes read at a time when a gzip stream is checked to its end (deflate
#: expands at most ~1000-fold, so a block decompresses to at most ~64 MB).
_BLOCK_BYTES = 2**16


def _describe(err: BaseException) -> str:
    """``"<ErrorType>: <message>"`` of a library error, on one line."""
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _nifti_errors() -> tuple[type[BaseException], ...]:
    """Errors nibabel raises on a file that is not a readable image."""
    from nibabel.filebasedimages import ImageFileError
    from nibabel.spatialimages import HeaderDataError

    return (ImageFileError, HeaderDataError, OSError, EOFError, ValueError, zlib.error)


def _expected_bytes(img: Any) -> int | None:
    """Header plus voxel bytes of a single-file NIfTI image (None for other formats)."""
    import nibabel as nib

    offset = getattr(img.dataobj, "offset", None)  # the array proxy of a file on disk
    if not isinstance(img, nib.Nifti1Image | nib.Nifti2Image) or offset is None:
        return None
    n_voxels = int(np.prod(img.shape, dtype=np.int64))
    return int(offset) + n_voxels * img.header.get_data_dtype().itemsize


def _gzip_length(path: Path, expected: int) -> tuple[int, BaseException | None]:
    """Decompressed length of a gzip file, and the error that stopped reading, if any.

    The stream's trailer (ISIZE, the length modulo 2**32) settles the common case
    without decompressing; otherwise every member of the stream is decompressed, a
    block at a time, and a stream without its end-of-stream marker gives an EOFError
    (bytes that follow a complete member and start no other are ignored).
    """
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() >= 18:
            handle.seek(-4, os.SEEK_END)
            if int.from_bytes(handle.read(4), "little") == expected % 2**32:
                return expected, None
    n, inflater, open_member, any_member = 0, zlib.decompressobj(31), False, False
    try:
        with open(path, "rb") as handle:
            while block := handle.read(_BLOCK_BYTES):
                while block:
                    n += len(inflater.decompress(block))
                    open_member = not inflater.eof
                    block = inflater.unused_data if inflater.eof else b""
                    if inflater.eof:
                        any_member = True
                        inflater = zlib.decompressobj(31)
    except zlib.error as err:
        # bytes after a complete member (zero padding) end the stream, as for gzip tools
        return n, None if any_member else err
    if open_member:
        return n, EOFError("the gzip stream ends before its end-of-stream marker")
    return n, None


def _what_gzip_holds(path: Path) -> str:
    """What a file nibabel cannot open is, for messages: a cut or damaged gzip stream."""
    with open(path, "rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            return "an unreadable file"
    length, err = _gzip_length(path, -1)
    if isinstance(err, EOFError):
        return f"a gzip stream that ends after {length} bytes (the file is truncated)"
    if err is not None:
        return f"a damaged gzip stream ({_describe(err)})"
    return "an unreadable file"


def check_nifti_data(img: Any, path: str | os.PathLike, role: str) -> None:
    """Check that a NIfTI file holds every voxel its header announces.

    Parameters
    ----------
    img : nibabel.Nifti1Image | nibabel.Nifti2Image
        The image opened from ``path`` (header only; no voxel is read). Other image
        types are not checked.
    path : path-like
        Its file (``.nii`` or ``.nii.gz``).
    role : str
        What the file is, for messages (``"BOLD image"``, ``"Mask"``).

    Raises
    ------
    ValueError
        When the file ends before the last voxel (an interrupted copy or download), or
        its gzip stream is damaged.
    """
    expected = _expected_bytes(img)
    if expected is None:
        return
    path = Path(path)
    what = f"{img.shape} {img.header.get_data_dtype()} voxels"
    with open(path, "rb") as handle:
        compressed = handle.read(2) == b"\x1f\x8b"
    if not compressed:
        size = path.stat().st_size
        if size < expected:
            raise ValueError(
                f"{role} {path} must hold {expected} bytes (its header and {what}), got a file "
                f"of {size} bytes instead: it is truncated (an interrupted copy or download?)."
            )
        return
    length, err = _gzip_length(path, expected)
    if err is not None and not isinstance(err, EOFError):
        raise ValueError(
            f"{role} {path} must be an intact gzip stream, got a damaged one instead "
            f"({_describe(err)} after {length} decompressed bytes)."
        ) from err
    if length < expected:
        raise ValueError(
            f"{role} {path} must hold {expected} bytes once decompressed (its header and "
            f"{what}), got a gzip stream that ends after {length} bytes instead: it is "
            "truncated (an interrupted copy or download?)."
        ) from err


def load_nifti(path: str | os.PathLike, role: str, *, check_data: bool = True) -> Any:
    """Open a NIfTI image (header only) and check that its file is complete.

    Parameters
    ----------
    path : path-like
        ``.nii`` or ``.nii.gz`` file (any format nibabel opens).
    role : str
        What the file is, for messages: ``"BOLD image"``, ``"Mask"``, ``"ROI atlas"``.
    check_data : bool
        Whether to check that the file holds every voxel of its header
        (:func:`check_nifti_data`; decompresses a gzip stream only when its trailer
        disagrees with the header).

    Returns
    -------
    img : nibabel.spatialimages.SpatialImage
        The image, its voxels still on disk.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        When nibabel cannot read the header, or the file is truncated or damaged; the
        library's error is the cause.
    """
    import nibabel as nib

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{role} {path} does not exist.")
    try:
        img = nib.load(path)
    except _nifti_errors() as err:
        raise ValueError(
            f"{role} {path} must be a NIfTI image nibabel can read, got "
            f"{_what_gzip_holds(path)} instead ({_describe(err)})."
        ) from err
    if check_data:
        check_nifti_data(img, path, role)
    return img


def _image_errors() -> tuple[type[BaseException], ...]:
    """Errors Pillow raises on a file that is not a readable image."""
    return (OSError, SyntaxError, ValueError, EOFError, zlib.error)


def _image_hint() -> str:
    return "an image Pillow can read (PNG, JPEG, BMP, TIFF, GIF, WebP, ...)"


def check_image(path: str | os.PathLike, role: str = "Stimulus image") -> None:
    """Check that an image file opens and that its structure is intact, without decoding it.

    Parameters
    ----------
    path : path-like
        Image file.
    role : str
        What the file is, for messages.

    Raises
    ------
    ValueError
        When Pillow cannot identify the file, or :meth:`PIL.Image.Image.verify` finds it
        damaged (a PNG cut short, a bad chunk checksum).
    """
    from PIL import Image

    path = Path(path)
    try:
        with Image.open(path) as img:
            img.verify()
    except _image_errors() as err:
        raise ValueError(
            f"{role} {path} must be {_image_hint()}, got an unreadable file instead "
            f"({_describe(err)})."
        ) from err


def read_image(path: str | os.PathLike, role: str = "Stimulus image") -> np.ndarray:
    """Decode an image as 8-bit RGB.

    Parameters
    ----------
    path : path-like
        Image file.
    role : str
        What the file is, for messages.

    Returns
    -------
    rgb : ndarray of uint8, shape (H, W, 3)
        The pixels.

    Raises
    ------
    ValueError
        When Pillow cannot identify or decode the file (a truncated JPEG, random bytes).
    """
    from PIL import Image

    path = Path(path)
    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"))
    except _image_errors() as err:
        raise ValueError(
            f"{role} {path} must be {_image_hint()}, got an unreadable file instead "
            f"({_describe(err)})."
        ) from err


def read_table(
    path: str | os.PathLike,
    role: str,
    *,
    required: Sequence[str] = (),
    header_only: bool = False,
) -> pd.DataFrame:
    """Read a tab-separated table as strings and check its columns.

    Parameters
    ----------
    path : path-like
        TSV file with a header row.
    role : str
        What the table is, for messages (``"Captions table"``).
    required : sequence of str
        Columns it must have.
    header_only : bool
        Read the header row only (no data rows).

    Returns
    -------
    table : pandas.DataFrame, shape (n_rows, n_columns)
        Every cell a ``str`` (empty cells are ``""``; nothing is parsed as NaN).

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        When the file is empty, is not text, cannot be parsed as TSV, or lacks a
        required column.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{role} {path} does not exist.")
    try:
        table = pd.read_csv(
            path, sep="\t", dtype=str, keep_default_na=False, nrows=0 if header_only else None
        )
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise ValueError(
            f"{role} {path} must be a tab-separated text table with a header row, got an "
            f"unreadable file instead ({_describe(err)})."
        ) from err
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise ValueError(
            f"{role} {path} must have column(s) {list(required)}, got columns "
            f"{list(table.columns)} instead (missing {missing})."
        )
    return table

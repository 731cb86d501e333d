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
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import nibabel as nib

__all__ = [
    "check_image",
    "check_nifti_data",
    "load_nifti",
    "nifti_voxel_rows",
    "read_image",
    "read_image_unit",
    "read_table",
    "scores_to_nifti",
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


def nifti_voxel_rows(img: Any) -> tuple[np.ndarray, float, float]:
    """The stored values of a 4-D image as one row per voxel, and their scaling.

    Parameters
    ----------
    img : nibabel.Nifti1Image
        A 4-D image of shape (x, y, z, n).

    Returns
    -------
    rows : ndarray, shape (x * y * z, n)
        The values as stored (no slope applied), voxels in Fortran order; a view where
        the file allows one.
    slope, intercept : float
        The header's scaling (``value = stored * slope + intercept``); 1 and 0 when the
        header sets none (or a slope of 0 or NaN).

    Raises
    ------
    ValueError
        When the file ends before the last voxel of its header (naming the file).
    """
    proxy = img.dataobj
    try:
        if hasattr(proxy, "get_unscaled"):
            raw = np.asanyarray(proxy.get_unscaled())
            slope = proxy.slope if proxy.slope is not None else 1.0
            inter = proxy.inter if proxy.inter is not None else 0.0
            if not np.isfinite(slope) or slope == 0:
                slope, inter = 1.0, 0.0
        else:
            raw, slope, inter = np.asanyarray(proxy), 1.0, 0.0
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(
            f"Image {img.get_filename()} must hold every voxel of its header "
            f"{img.shape}, got a file that cannot be read to its end instead "
            f"({type(err).__name__}: {err}); it is truncated or damaged."
        ) from err
    n_times = raw.shape[3]
    return raw.reshape(-1, n_times, order="F"), float(slope), float(inter)


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


#: Pillow modes of one-channel images with more than 8 bits per sample (``convert("RGB")``
#: clips them to 255 instead of scaling them).
_WIDE_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})


def _integer_top(img: Any, values: np.ndarray) -> tuple[int, str]:
    """Largest sample value of a one-channel integer image (mode ``I;16*`` or ``I``), and
    its depth in words.

    ``I;16*`` modes hold 16 bits. Mode ``I`` (32-bit integers) holds 16-bit PNGs in
    some Pillow versions and any integer TIFF: a PNG has 16 bits, a TIFF says how many
    in its BitsPerSample tag (one fewer for signed samples, SampleFormat 2); otherwise
    16 when the values fit, else 32.
    """
    if img.mode.startswith("I;16") or img.format == "PNG":
        return 2**16 - 1, "16-bit"
    tags = getattr(img, "tag_v2", None)
    if tags is not None and 258 in tags:  # BitsPerSample
        bits = tags[258]
        bits = int(bits[0] if isinstance(bits, tuple) else bits)
        fmt = tags.get(339, 1)  # SampleFormat: 1 unsigned, 2 signed
        signed = (fmt[0] if isinstance(fmt, tuple) else fmt) == 2
        return 2 ** (bits - signed) - 1, f"{bits}-bit {'signed' if signed else 'unsigned'}"
    if int(values.max(initial=0)) <= 2**16 - 1:
        return 2**16 - 1, "16-bit"
    return 2**32 - 1, "32-bit"


def _unit_grey(img: Any, values: np.ndarray, path: Path, role: str) -> np.ndarray:
    """Float32 grey levels in [0, 1] of a wide one-channel image, shape (H, W)."""
    if img.mode == "F":
        finite = values[np.isfinite(values)]
        if (
            finite.size < values.size
            or finite.min(initial=0.0) < 0.0
            or finite.max(initial=0.0) > 1.0
        ):
            shown = (
                f"range [{finite.min():g}, {finite.max():g}]" if finite.size else "no finite value"
            )
            non_finite = "" if finite.size == values.size else " (and NaN or infinite values)"
            raise ValueError(
                f"{role} {path} is a floating-point image and must hold values in [0, 1], "
                f"got {shown}{non_finite} instead; scale it to [0, 1] or save it "
                "as an 8- or 16-bit integer image."
            )
        return values.astype(np.float32)
    top, depth = _integer_top(img, values)
    if values.size and (int(values.min()) < 0 or int(values.max()) > top):
        raise ValueError(
            f"{role} {path} is a {depth} integer image and must hold values in "
            f"[0, {top}], got range [{int(values.min())}, {int(values.max())}] instead."
        )
    return (values.astype(np.float64) / top).astype(np.float32)


def _decode(path: Path, role: str) -> tuple[np.ndarray, Any]:
    """Pixels of an image file: uint8 RGB, or the raw one-channel samples of a wide mode.

    Returns the array and the image (closed; its ``mode``, ``format`` and tags remain).
    """
    from PIL import Image

    try:
        with Image.open(path) as img:
            if img.mode in _WIDE_MODES:
                return np.asarray(img), img
            return np.asarray(img.convert("RGB")), img
    except _image_errors() as err:
        raise ValueError(
            f"{role} {path} must be {_image_hint()}, got an unreadable file instead "
            f"({_describe(err)})."
        ) from err


def read_image_unit(path: str | os.PathLike, role: str = "Stimulus image") -> np.ndarray:
    """Decode an image as float RGB in [0, 1], whatever its bit depth.

    8-bit images (and palette, 1-bit, grey-alpha, CMYK ... images, which Pillow
    converts to 8-bit RGB) are divided by 255. Images with more samples per pixel
    are divided by their own maximum: 16-bit grey (Pillow modes ``I;16``,
    ``I;16B``, ...) by 65535, integer TIFFs by the maximum of their BitsPerSample
    and SampleFormat (``2**31 - 1`` for signed 32-bit), floating-point images (mode
    ``F``) are taken as they are and must lie in [0, 1]. A picture saved at 8 and
    at 16 bits gives the same values (16-bit RGB is decoded by Pillow to 8 bits per
    channel). Grey images are repeated over the three channels; an alpha channel is
    dropped.

    Parameters
    ----------
    path : path-like
        Image file.
    role : str
        What the file is, for messages.

    Returns
    -------
    rgb : ndarray of float32, shape (H, W, 3)
        The pixels, in [0, 1].

    Raises
    ------
    ValueError
        When Pillow cannot identify or decode the file, or its samples lie outside
        the range its bit depth (or, for floats, [0, 1]) allows.
    """
    path = Path(path)
    pixels, img = _decode(path, role)
    if img.mode not in _WIDE_MODES:
        return pixels.astype(np.float32) / np.float32(255.0)
    grey = _unit_grey(img, pixels, path, role)
    return np.repeat(grey[..., None], 3, axis=-1)


def read_image(path: str | os.PathLike, role: str = "Stimulus image") -> np.ndarray:
    """Decode an image as 8-bit RGB, scaling deeper images by their bit depth.

    Parameters
    ----------
    path : path-like
        Image file.
    role : str
        What the file is, for messages.

    Returns
    -------
    rgb : ndarray of uint8, shape (H, W, 3)
        The pixels (16-bit and float images rounded from :func:`read_image_unit`).

    Raises
    ------
    ValueError
        When Pillow cannot identify or decode the file (a truncated JPEG, random bytes),
        or its samples lie outside the range its bit depth allows.
    """
    path = Path(path)
    pixels, img = _decode(path, role)
    if img.mode not in _WIDE_MODES:
        return pixels
    unit = _unit_grey(img, pixels, path, role)
    return np.repeat(np.round(unit * 255.0).astype(np.uint8)[..., None], 3, axis=-1)


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


def scores_to_nifti(
    values: np.ndarray,
    ijk: np.ndarray,
    *,
    affine: np.ndarray,
    mask_shape: Sequence[int],
    undefined: float = 0.0,
) -> nib.Nifti1Image:
    """Place per-voxel scores back on their volume grid.

    Parameters
    ----------
    values : array-like, shape (n_voxels,)
        Score per voxel.
    ijk : array-like of int, shape (n_voxels, 3)
        Voxel indices on the grid.
    affine : array-like, shape (4, 4)
        Voxel-to-world affine of the grid.
    mask_shape : sequence of 3 int
        Grid shape.
    undefined : float
        Value written where a score is NaN: 0 for maps that are drawn, NaN for maps
        that are results (exported), so that an undefined score is not read as 0.

    Returns
    -------
    img : nibabel.Nifti1Image, shape mask_shape
        float32 image, 0 outside the voxels and ``undefined`` where a score is NaN.
    """
    import nibabel as nib

    values = np.asarray(values, dtype=np.float32)
    ijk = np.asarray(ijk)
    shape = tuple(int(s) for s in mask_shape)
    affine = np.asarray(affine, dtype=np.float64)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"`mask_shape` must be 3 positive ints, got {list(mask_shape)} instead.")
    if affine.shape != (4, 4):
        raise ValueError(f"`affine` must have shape (4, 4), got {affine.shape} instead.")
    if ijk.shape != (values.size, 3) or ijk.dtype.kind not in "iu":
        raise ValueError(
            f"`ijk` must be integers of shape ({values.size}, 3), "
            f"got {ijk.dtype} of shape {ijk.shape} instead."
        )
    if ijk.size and ((ijk < 0).any() or (ijk >= np.array(shape)).any()):
        raise ValueError(f"`ijk` must index the grid of shape {shape}, got indices outside it.")
    data = np.zeros(shape, dtype=np.float32)
    data[ijk[:, 0], ijk[:, 1], ijk[:, 2]] = np.where(np.isnan(values), undefined, values)
    return nib.Nifti1Image(data, affine)

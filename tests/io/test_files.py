"""Readers that name a damaged input file: NIfTI images, stimulus images and TSV tables."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from neuroflow.io.files import check_image, load_nifti, read_image, read_table

SHAPE = (5, 6, 7, 9)


@pytest.fixture
def bold(tmp_path: Path, rng: np.random.Generator) -> Path:
    """A small 4-D float32 image of uneven shape, gzipped."""
    path = tmp_path / "sub-01_task-x_bold.nii.gz"
    data = rng.normal(size=SHAPE).astype(np.float32)
    nib.save(nib.Nifti1Image(data, np.diag([2.0, 2.0, 2.5, 1.0])), path)
    return path


def _cut(path: Path, name: str, fraction: float = 0.5) -> Path:
    raw = path.read_bytes()
    out = path.with_name(name)
    out.write_bytes(raw[: int(len(raw) * fraction)])
    return out


def test_intact_images_load_without_reading_voxels(bold, tmp_path):
    img = load_nifti(bold, "BOLD image")
    assert img.shape == SHAPE
    plain = tmp_path / "plain.nii"
    nib.save(img, plain)
    assert load_nifti(plain, "BOLD image").shape == SHAPE
    # several gzip members (concatenated files), zero padding after them: complete too
    raw = plain.read_bytes()
    members = tmp_path / "members.nii.gz"
    members.write_bytes(gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]) + bytes(512))
    np.testing.assert_array_equal(
        np.asanyarray(load_nifti(members, "BOLD image").dataobj), np.asanyarray(img.dataobj)
    )


def test_truncated_gzip_nifti_names_the_file_and_the_sizes(bold):
    cut = _cut(bold, "sub-01_task-x_cut_bold.nii.gz")
    expected = 352 + int(np.prod(SHAPE)) * 4
    with pytest.raises(
        ValueError,
        match=rf"BOLD image {re.escape(str(cut))} must hold {expected} bytes once decompressed "
        r"\(its header and \(5, 6, 7, 9\) float32 voxels\), got a gzip stream that ends after "
        r"\d+ bytes instead: it is truncated",
    ) as info:
        load_nifti(cut, "BOLD image")
    assert isinstance(info.value.__cause__, EOFError)


def test_truncated_plain_nifti_and_multi_member_gzip(bold, tmp_path):
    plain = tmp_path / "mask.nii"
    nib.save(nib.load(bold), plain)
    cut = _cut(plain, "mask_cut.nii", 0.7)
    with pytest.raises(ValueError, match=rf"Mask {re.escape(str(cut))} must hold \d+ bytes"):
        load_nifti(cut, "Mask")
    raw = plain.read_bytes()
    short = tmp_path / "short.nii.gz"
    short.write_bytes(gzip.compress(raw[:1000]) + gzip.compress(raw[1000:1500]))
    with pytest.raises(ValueError, match=r"short.nii.gz must hold .* ends after 1500 bytes"):
        load_nifti(short, "ROI atlas")


def test_damaged_gzip_stream(bold, tmp_path):
    raw = bytearray(bold.read_bytes())
    raw[len(raw) // 2 : len(raw) // 2 + 40] = bytes(40)  # zeros in the middle of the stream
    raw[-4:] = bytes(4)  # and a trailer that no longer matches
    damaged = tmp_path / "damaged.nii.gz"
    damaged.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"damaged.nii.gz must (be an intact gzip|hold)"):
        load_nifti(damaged, "BOLD image")


def test_gzip_nifti_cut_inside_its_header(bold):
    cut = bold.with_name("head.nii.gz")
    cut.write_bytes(bold.read_bytes()[:60])
    with pytest.raises(
        ValueError,
        match=r"head.nii.gz must be a NIfTI image nibabel can read, got a gzip stream that ends "
        r"after \d+ bytes \(the file is truncated\)",
    ):
        load_nifti(cut, "BOLD image")


def test_unreadable_or_missing_nifti(tmp_path, rng):
    junk = tmp_path / "atlas.nii.gz"
    junk.write_bytes(rng.bytes(300))
    with pytest.raises(
        ValueError, match=r"ROI atlas .*atlas.nii.gz must be a NIfTI image nibabel can read"
    ) as info:
        load_nifti(junk, "ROI atlas")
    assert info.value.__cause__ is not None
    with pytest.raises(FileNotFoundError, match=r"Mask .*none.nii.gz does not exist"):
        load_nifti(tmp_path / "none.nii.gz", "Mask")


@pytest.fixture
def pictures(tmp_path: Path, rng: np.random.Generator) -> dict[str, Path]:
    """A PNG and a JPEG of uneven size, random bytes named .png, and both cut in half."""
    from PIL import Image

    pixels = (rng.random((13, 17, 3)) * 255).astype(np.uint8)
    out = {"png": tmp_path / "a.png", "jpg": tmp_path / "a.jpg"}
    Image.fromarray(pixels).save(out["png"])
    Image.fromarray(pixels).save(out["jpg"], quality=90)
    out["noise"] = tmp_path / "noise.png"
    out["noise"].write_bytes(rng.bytes(400))
    out["cut_png"] = _cut(out["png"], "cut.png")
    out["cut_jpg"] = _cut(out["jpg"], "cut.jpg")
    return out


def test_images_read_as_rgb(pictures):
    for kind in ("png", "jpg"):
        check_image(pictures[kind])
        rgb = read_image(pictures[kind])
        assert rgb.shape == (13, 17, 3) and rgb.dtype == np.uint8


@pytest.mark.parametrize("kind", ["noise", "cut_png", "cut_jpg"])
def test_unreadable_images_name_the_file(pictures, kind):
    path = pictures[kind]
    pattern = rf"Stimulus image {re.escape(str(path))} must be an image Pillow can read"
    with pytest.raises(ValueError, match=pattern + r".*got an unreadable file instead"):
        read_image(path)
    with pytest.raises(ValueError, match=pattern):
        check_image(path)


def test_tables_with_missing_columns_or_no_text(tmp_path, rng):
    table = tmp_path / "captions.tsv"
    table.write_text("stim_file\ttext\na.png\ta cat\n")
    with pytest.raises(
        ValueError,
        match=r"Captions table .*captions.tsv must have column\(s\) \['stim_file', 'caption'\], "
        r"got columns \['stim_file', 'text'\] instead \(missing \['caption'\]\)",
    ):
        read_table(table, "Captions table", required=("stim_file", "caption"))
    assert list(read_table(table, "T", required=("text",), header_only=True).columns) == [
        "stim_file",
        "text",
    ]
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    binary = tmp_path / "binary.tsv"
    binary.write_bytes(b"\xff\xfe" + rng.bytes(200))
    for path in (empty, binary):
        with pytest.raises(ValueError, match=rf"{path.name} must be a tab-separated text table"):
            read_table(path, "Captions table")
    with pytest.raises(FileNotFoundError, match=r"Captions table .*none.tsv does not exist"):
        read_table(tmp_path / "none.tsv", "Captions table")

"""Finding stimulus files under the stimuli folder, identical files under two ids, and
images read alike whatever their bit depth."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.features.align import canonical_ids, features_for_stimuli
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.stimuli.files import content_groups, file_sha256, resolve_stimulus_files
from neuroflow.stimuli.text import stimulus_texts


@register_extractor("test_count_pixels", modalities=("image", "video"))
class CountPixels(Extractor):
    """Mean RGB of each image or frame; counts what it is given."""

    default_layers = ("output",)
    images = 0
    frames = 0

    def layer_names(self):
        return ["output"]

    def extract(self, batch):
        type(self).images += len(batch)
        return {"output": np.array([np.asarray(img).mean(axis=(0, 1)) for img in batch])}

    def extract_frames(self, frames):
        type(self).frames += len(frames)
        return {"output": np.array([f.mean(axis=(0, 1)) for f in frames])}


def _image(path: Path, rng: np.random.Generator, shape: tuple[int, int]) -> bytes:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((rng.random((*shape, 3)) * 255).astype(np.uint8)).save(path)
    return path.read_bytes()


def _copy(data: bytes, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def counted_rglob(monkeypatch):
    """Count recursive listings of any folder."""
    calls = []
    original = Path.rglob

    def rglob(self, pattern, *args, **kwargs):
        calls.append(self)
        return original(self, pattern, *args, **kwargs)

    monkeypatch.setattr(Path, "rglob", rglob)
    return calls


def test_resolve_exact_suffix_and_basename(tmp_path, rng, counted_rglob):
    root = tmp_path / "stimuli"
    _image(root / "func" / "f013.bmp", rng, (7, 9))
    _image(root / "sets" / "meg" / "f014.bmp", rng, (8, 9))
    _image(root / "other" / "f015.bmp", rng, (9, 7))
    paths = resolve_stimulus_files(["func/f013.bmp"], root)
    assert paths == {"func/f013.bmp": root / "func" / "f013.bmp"}
    assert counted_rglob == []  # found as written: no listing
    paths = resolve_stimulus_files(
        ["meg/f014.bmp", "old/f015.bmp", "func\\f013.bmp", "meg/f014.bmp"], root
    )
    assert paths == {
        "meg/f014.bmp": root / "sets" / "meg" / "f014.bmp",  # path ends with the id
        "old/f015.bmp": root / "other" / "f015.bmp",  # same basename
        "func\\f013.bmp": root / "func" / "f013.bmp",  # backslashes read as separators
    }
    assert len(counted_rglob) == 1  # one listing for all ids


def test_suffix_match_beats_basename(tmp_path, rng):
    root = tmp_path / "stimuli"
    _image(root / "a" / "meg" / "x.png", rng, (7, 8))
    _image(root / "b" / "func" / "x.png", rng, (9, 8))
    assert resolve_stimulus_files(["meg/x.png"], root)["meg/x.png"] == root / "a" / "meg" / "x.png"


def test_ambiguous_and_missing_files(tmp_path, rng):
    root = tmp_path / "stimuli"
    _image(root / "a" / "x.png", rng, (7, 8))
    _image(root / "b" / "x.png", rng, (9, 8))
    with pytest.raises(ValueError, match=r"2 files there end with it with different") as err:
        resolve_stimulus_files(["x.png"], root)
    assert "['a/x.png', 'b/x.png']" in str(err.value)
    with pytest.raises(ValueError, match=r"2 files there are named 'x.png' with different"):
        resolve_stimulus_files(["old/x.png"], root)
    # Several copies with the same contents are one file: the first in sorted order.
    data = _image(root / "c" / "y.png", rng, (7, 7))
    _copy(data, root / "d" / "y.png")
    assert resolve_stimulus_files(["y.png"], root)["y.png"] == root / "c" / "y.png"
    with pytest.raises(
        FileNotFoundError, match=r"stim_file 'gone/z\.png'.* no file under .*stimuli"
    ):
        resolve_stimulus_files(["gone/z.png"], root)
    assert resolve_stimulus_files(["gone/z.png", "y.png"], root, missing="skip") == {
        "y.png": root / "c" / "y.png"
    }
    with pytest.raises(ValueError, match="`missing` must be 'error' or 'skip'"):
        resolve_stimulus_files(["y.png"], root, missing="warn")


def test_hidden_files_are_not_candidates(tmp_path, rng):
    root = tmp_path / "stimuli"
    _image(root / "img" / "x.png", rng, (7, 8))
    _image(root / ".cache" / "x.png", rng, (9, 8))
    assert resolve_stimulus_files(["x.png"], root)["x.png"] == root / "img" / "x.png"


def test_content_groups(tmp_path, rng):
    data = _image(tmp_path / "func" / "f013.bmp", rng, (7, 9))
    _copy(data, tmp_path / "meg" / "f013.bmp")
    _image(tmp_path / "func" / "u001.bmp", rng, (7, 9))  # same size, other contents
    _image(tmp_path / "meg" / "u001.bmp", rng, (7, 9))
    paths = {
        "func/u001.bmp": tmp_path / "func" / "u001.bmp",
        "meg/f013.bmp": tmp_path / "meg" / "f013.bmp",
        "func/f013.bmp": tmp_path / "func" / "f013.bmp",
        "meg/u001.bmp": tmp_path / "meg" / "u001.bmp",
        "again": tmp_path / "func" / "u001.bmp",
    }
    assert content_groups(paths) == {
        "func/u001.bmp": "func/u001.bmp",
        "meg/f013.bmp": "meg/f013.bmp",  # first in order
        "func/f013.bmp": "meg/f013.bmp",
        "meg/u001.bmp": "meg/u001.bmp",  # same name, different contents
        "again": "func/u001.bmp",
    }
    assert file_sha256(paths["meg/f013.bmp"]) == file_sha256(paths["func/f013.bmp"])


def _ds000117_like(root: Path, rng: np.random.Generator) -> list[str]:
    """func/ and meg/ copies of one face, a scrambled image, and a same-name different image."""
    face = _image(root / "func" / "f013.bmp", rng, (9, 11))
    _copy(face, root / "meg" / "f013.bmp")
    _image(root / "func" / "s001.bmp", rng, (8, 7))
    _image(root / "func" / "u002.bmp", rng, (7, 9))
    _image(root / "meg" / "u002.bmp", rng, (7, 9))  # same name, different contents
    return ["func/f013.bmp", "func/s001.bmp", "meg/f013.bmp", "func/u002.bmp", "meg/u002.bmp"]


def test_identical_files_are_computed_once(tmp_path, rng):
    root = tmp_path / "stimuli"
    ids = _ds000117_like(root, rng)
    CountPixels.images = 0
    out = extract_features(
        stimuli_dir=root,
        stimulus_ids=ids,
        output=tmp_path / "px",
        config={"extractor": "test_count_pixels", "batch_size": 2},
        provenance={},
    )
    assert CountPixels.images == 4  # five ids, four distinct files
    ds = open_dataset(out["output"])
    assert list(ds["stimulus"].values) == ids
    assert list(ds["canonical_stimulus"].values) == [
        "func/f013.bmp",
        "func/s001.bmp",
        "func/f013.bmp",
        "func/u002.bmp",
        "meg/u002.bmp",
    ]
    x = ds["features"].values
    np.testing.assert_array_equal(x[2], x[0])
    assert not np.allclose(x[3], x[4])
    np.testing.assert_array_equal(
        features_for_stimuli(out["output"], ["meg/f013.bmp", "func/f013.bmp"]), x[[2, 0]]
    )
    np.testing.assert_array_equal(
        canonical_ids(out["output"], ["meg/f013.bmp", "meg/u002.bmp", "unknown"]),
        ["func/f013.bmp", "meg/u002.bmp", "unknown"],
    )
    assert canonical_ids(out["output"], []).shape == (0,)


def test_canonical_ids_without_coordinate(tmp_path):
    store = xr.Dataset(
        {"features": (("stimulus", "feature"), np.zeros((2, 3)))},
        coords={"stimulus": np.array(["a", "b"], dtype=object)},
    )
    path = write_dataset(store, tmp_path / "f.zarr", provenance={})
    out = canonical_ids(path, ["b", "a", "c"])
    assert out.dtype.kind == "U"
    np.testing.assert_array_equal(out, ["b", "a", "c"])


def test_recursive_lookup_during_extraction(tmp_path, rng, counted_rglob):
    root = tmp_path / "stimuli"
    _image(root / "set-1" / "img" / "a.png", rng, (7, 9))
    _image(root / "set-1" / "img" / "b.png", rng, (9, 8))
    _image(root / "set-2" / "c.png", rng, (8, 8))
    table = tmp_path / "events.tsv"
    table.write_text(
        "onset\tduration\tstim_file\r\n0\t1\timg/a.png\r\n1\t1\timg/b.png\r\n2\t1\tc.png\r\n"
    )
    out = extract_features(
        stimuli_dir=root,
        stimulus_ids=[table],
        output=tmp_path / "x",
        config={"extractor": "image_statistics"},
        provenance={},
    )
    ds = open_dataset(out["output"])
    assert list(ds["stimulus"].values) == ["img/a.png", "img/b.png", "c.png"]
    assert list(ds["canonical_stimulus"].values) == ["img/a.png", "img/b.png", "c.png"]
    assert np.isfinite(ds["features"].values).all()
    assert len(counted_rglob) == 1
    with pytest.raises(FileNotFoundError, match=r"stim_file 'img/z\.png'"):
        extract_features(
            stimuli_dir=root,
            stimulus_ids=["img/a.png", "img/z.png"],
            output=tmp_path / "y",
            config={"extractor": "image_statistics"},
            provenance={},
        )


def test_identical_clips_share_frame_rows(tmp_path, rng):
    root = tmp_path / "stimuli"
    root.mkdir()
    clip = (rng.random((18, 7, 9, 3)) * 255).astype(np.uint8)
    np.save(root / "a.npy", clip)
    np.save(root / "b.npy", (rng.random((13, 8, 7, 3)) * 255).astype(np.uint8))
    (root / "copy").mkdir()
    np.save(root / "copy" / "a2.npy", clip)
    CountPixels.frames = 0
    out = extract_features(
        stimuli_dir=root,
        stimulus_ids=["a.npy", "b.npy", "copy/a2.npy"],
        output=tmp_path / "v",
        config={
            "extractor": "test_count_pixels",
            "frame_rate": 4,
            "batch_size": 3,
            "gabor": {"fps": 12},
        },
        provenance={},
    )
    ds = open_dataset(out["output"])
    # 1.5 s -> 6 frames, 1.083 s -> 5 frames; the copy repeats the first clip's rows.
    assert ds.sizes["stimulus"] == 17
    assert CountPixels.frames == 11
    stims = [str(s) for s in ds["stimulus"].values]
    firsts = [str(s) for s in ds["canonical_stimulus"].values]
    assert stims[11:] == [f"copy/a2.npy#t={t:.3f}" for t in np.arange(6) / 4]
    assert firsts[11:] == stims[:6] and firsts[:11] == stims[:11]
    x = ds["features"].values
    np.testing.assert_array_equal(x[11:], x[:6])
    np.testing.assert_array_equal(
        canonical_ids(ds, ["copy/a2.npy", "b.npy", "copy/a2.npy#t=0.250"]),
        ["a.npy", "b.npy", "a.npy#t=0.250"],
    )


def test_captions_apply_to_identical_files(tmp_path, rng):
    root = tmp_path / "stimuli"
    ids = _ds000117_like(root, rng)
    captions = {"func/f013.bmp": "a famous face", "func/u002.bmp": "an unfamiliar face"}
    texts = stimulus_texts(["meg/f013.bmp", "func/f013.bmp"], stimuli_dir=root, captions=captions)
    assert texts == [("", "a famous face"), ("", "a famous face")]
    with pytest.raises(ValueError, match=r"'meg/u002\.bmp' has no text"):
        stimulus_texts([ids[4]], stimuli_dir=root, captions=captions)
    # Text files are found recursively too.
    (root / "texts").mkdir()
    (root / "texts" / "story.txt").write_text("once upon a time\n")
    assert stimulus_texts(["story.txt"], stimuli_dir=root, captions=None) == [
        ("", "once upon a time")
    ]


# --------------------------------------------------------------------------- bit depth
def _png16(path: Path, samples: np.ndarray) -> None:
    """Write a 16-bit PNG by hand (Pillow writes no 16-bit colour PNG): grey (H, W) or
    RGB (H, W, 3) samples of dtype uint16."""
    import struct
    import zlib

    height, width = samples.shape[:2]
    color_type = 2 if samples.ndim == 3 else 0
    raw = b"".join(b"\x00" + samples[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        return struct.pack(">I", len(data)) + kind + data + crc

    header = struct.pack(">IIBBBBB", width, height, 16, color_type, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def _same_picture_deep(folder: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One grey and one colour picture saved at 8 bits and at 16 bits (and the grey one as
    a float TIFF and a 32-bit integer TIFF); ``{id: 8-bit samples}``."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    grey = rng.integers(0, 256, (13, 17), dtype=np.uint8)
    grey[0, 0], grey[0, 1] = 0, 255  # both ends of the range
    colour = rng.integers(0, 256, (11, 19, 3), dtype=np.uint8)
    Image.fromarray(grey).save(folder / "grey8.png")
    Image.fromarray(grey.astype(np.uint16) * 257).save(folder / "grey16.png")
    Image.fromarray(colour).save(folder / "colour8.png")
    _png16(folder / "colour16.png", colour.astype(np.uint16) * 257)
    Image.fromarray(grey.astype(np.float32) / 255).save(folder / "grey_float.tif")
    # Pillow writes mode I as signed 32-bit samples: full scale is 2**31 - 1
    top = 2**31 - 1
    Image.fromarray(np.round(grey * (top / 255)).astype(np.int32)).save(folder / "grey_int.tif")
    return {"grey8.png": grey, "colour8.png": colour}


def test_deep_images_read_like_their_8_bit_versions(tmp_path, rng):
    from PIL import Image

    from neuroflow.io.files import read_image
    from neuroflow.stimuli.image import load_image

    folder = tmp_path / "stimuli"
    eight = _same_picture_deep(folder, rng)
    assert Image.open(folder / "grey16.png").mode == "I;16"  # the mode that was misread
    assert Image.open(folder / "grey_float.tif").mode == "F"
    assert Image.open(folder / "grey_int.tif").mode in ("I", "I;16")
    expected_grey = np.repeat(eight["grey8.png"][..., None], 3, axis=-1)
    for name in ("grey8.png", "grey16.png", "grey_float.tif", "grey_int.tif"):
        unit = load_image(folder / name)
        assert unit.dtype == np.float32 and unit.shape == (13, 17, 3)
        np.testing.assert_allclose(unit, expected_grey / 255.0, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(read_image(folder / name), expected_grey, err_msg=name)
    for name in ("colour8.png", "colour16.png"):
        np.testing.assert_allclose(
            load_image(folder / name), eight["colour8.png"] / 255.0, atol=1e-6, err_msg=name
        )
        np.testing.assert_array_equal(read_image(folder / name), eight["colour8.png"])


def test_deep_image_values_beyond_their_range_are_refused(tmp_path, rng):
    from PIL import Image

    from neuroflow.stimuli.image import load_image

    path = tmp_path / "bright.tif"
    values = rng.uniform(0.6, 250.0, (6, 7)).astype(np.float32)
    values[2, 3], values[4, 1] = 0.5, 300.0
    Image.fromarray(values).save(path)
    with pytest.raises(
        ValueError,
        match=rf"Stimulus image {re.escape(str(path))} is a floating-point image and must "
        r"hold values in \[0, 1\], got range \[0\.5, 300\] instead; scale it to \[0, 1\]",
    ):
        load_image(path)
    nan = tmp_path / "nan.tif"
    Image.fromarray(np.full((4, 5), np.nan, np.float32)).save(nan)
    with pytest.raises(ValueError, match=r"got no finite value \(and NaN or infinite values\)"):
        load_image(nan)


def test_16_bit_frame_stacks_scaled_by_their_depth(tmp_path, rng):
    from neuroflow.stimuli.video import iter_video_frames, load_video

    frames = rng.integers(0, 256, (4, 6, 5, 3), dtype=np.uint8)
    np.save(tmp_path / "clip8.npy", frames)
    np.save(tmp_path / "clip16.npy", frames.astype(np.uint16) * 257)
    eight, deep = load_video(tmp_path / "clip8.npy"), load_video(tmp_path / "clip16.npy")
    np.testing.assert_allclose(deep.frames, eight.frames, atol=1e-6)
    streamed = list(iter_video_frames(tmp_path / "clip16.npy", [0, 3], transforms={}))
    np.testing.assert_allclose(streamed, eight.frames[[0, 3]], atol=1e-6)


@register_extractor("test_record_pixels", modalities=("image",))
class RecordPixels(Extractor):
    """Hands back nothing but records the pixel arrays it is given, as a model sees them."""

    default_layers = ("output",)
    seen: ClassVar[list[np.ndarray]] = []

    def layer_names(self):
        return ["output"]

    def extract(self, batch):
        type(self).seen.extend(np.array(img) for img in batch)
        return {"output": np.zeros((len(batch), 1))}


def test_8_and_16_bit_pictures_give_the_same_features(tmp_path, rng):
    """The image-statistics features and the pixels every model is fed agree within 1/255
    whether a picture is stored at 8 or at 16 bits."""
    from neuroflow.features.image_statistics import image_statistics

    folder = tmp_path / "stimuli"
    eight = _same_picture_deep(folder, rng)
    pairs = [("grey8.png", "grey16.png"), ("colour8.png", "colour16.png")]
    shallow, deep = [a for a, _ in pairs], [b for _, b in pairs]
    stores = {}
    for name, ids in (("shallow", shallow), ("deep", deep)):
        paths = extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / name,
            config={"extractor": "image_statistics"},
            provenance={},
        )
        stores[name] = open_dataset(paths["output"])["features"].values
    # the 8-bit reading is the reference: as computed from the 8-bit samples themselves
    np.testing.assert_allclose(
        stores["shallow"][1], image_statistics([eight["colour8.png"]])[0], rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(stores["deep"], stores["shallow"], rtol=1e-5, atol=1 / 255)
    assert abs(stores["deep"][0, 0] - eight["grey8.png"].mean() / 255) < 1 / 255  # luminance
    # the pixels a torch or Hugging Face model is fed (after the entry's transforms)
    RecordPixels.seen = []
    for name, ids in (("shallow_px", shallow), ("deep_px", deep)):
        extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / name,
            config={"extractor": "test_record_pixels", "transforms": {"resize": 8}},
            provenance={},
        )
    fed_shallow, fed_deep = RecordPixels.seen[:2], RecordPixels.seen[2:]
    for a, b in zip(fed_shallow, fed_deep, strict=True):
        assert a.shape == b.shape and b.dtype == np.float32
        np.testing.assert_allclose(b, a, atol=1 / 255)
        assert b.min() >= 0.0 and b.max() <= 1.0


def test_image_statistics_scale_uint16_arrays_by_their_depth(rng):
    from neuroflow.features.image_statistics import image_statistics

    images = rng.integers(0, 256, (3, 9, 10, 3), dtype=np.uint8)
    np.testing.assert_allclose(
        image_statistics(images.astype(np.uint16) * 257), image_statistics(images), atol=1e-12
    )

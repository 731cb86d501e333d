"""Finding stimulus files under the stimuli folder, and identical files under two ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.features.align import canonical_ids, features_for_stimuli
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.features.stimuli import (
    content_groups,
    file_sha256,
    resolve_stimulus_files,
    stimulus_texts,
)


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

"""The extraction stage: streaming writes, reduction, storage dtype, ids, atomicity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

import neuroflow.features.writer as writer_mod
from neuroflow.artifacts import open_dataset
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.stimuli.files import read_stimulus_ids
from neuroflow.stimuli.image import apply_transforms

N_STIM, N_FEAT = 9, 7


def _table() -> np.ndarray:
    """Train rows (first 5) vary along features 0-2; test rows vary hugely along 3-6."""
    rng = np.random.default_rng(7)
    table = np.zeros((N_STIM, N_FEAT))
    table[:5, :3] = rng.standard_normal((5, 3)) * [3.0, 2.0, 1.0]
    table[:5, 3:] = 0.01 * rng.standard_normal((5, 4))
    table[5:, 3:] = 50.0 * rng.standard_normal((4, 4))
    return table


@register_extractor("test_lookup", modalities=("text",))
class Lookup(Extractor):
    """Returns a fixed row per stimulus: the caption is the row number."""

    default_layers = ("a", "b")

    def layer_names(self):
        return ["a", "b"]

    def extract(self, batch):
        rows = _table()[[int(text.split()[0]) for _, text in batch]]
        return {"a": rows, "b": 2 * rows[:, :5]}


@register_extractor("test_failing", modalities=("text",))
class Failing(Lookup):
    """Fails on the second batch."""

    calls = 0

    def extract(self, batch):
        type(self).calls += 1
        if type(self).calls > 1:
            raise RuntimeError("boom")
        return super().extract(batch)


IDS = [f"s{i}.png" for i in range(N_STIM)]
CAPTIONS = {s: str(i) for i, s in enumerate(IDS)}


def _run(tmp_path: Path, name: str, captions: dict = CAPTIONS, **config) -> dict[str, Path]:
    return extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=IDS,
        captions=captions,
        output=tmp_path / name,
        config={"extractor": "test_lookup", "batch_size": 2, **config},
        provenance={"stage": "extract_features"},
        train_ids=IDS[:5] if config.get("reduction", {}).get("method") == "pca" else None,
    )


def test_streamed_chunks_hold_every_row(tmp_path, monkeypatch):
    monkeypatch.setattr(writer_mod, "CHUNK_BYTES", 3 * N_FEAT * 4)
    out = _run(tmp_path, "raw")
    assert set(out) == {"a", "b"}
    ds = open_dataset(out["a"])
    np.testing.assert_allclose(ds["features"].values, _table(), rtol=1e-6)
    np.testing.assert_allclose(open_dataset(out["b"])["features"].values, 2 * _table()[:, :5])
    assert zarr.open_array(str(out["a"] / "features")).chunks == (3, N_FEAT)
    assert list(ds["stimulus"].values) == IDS


def test_texts_sorted_by_length_come_back_in_order(tmp_path):
    captions = {s: f"{i} " + "word " * ((5 * i) % 7) for i, s in enumerate(IDS)}
    out = _run(tmp_path, "sorted", captions)
    np.testing.assert_allclose(open_dataset(out["a"])["features"].values, _table(), rtol=1e-6)


def test_equal_texts_are_computed_once_and_get_equal_rows(tmp_path, monkeypatch):
    """Stimuli sharing a caption share its features; each distinct text is extracted once."""
    seen: list[str] = []
    extract = Lookup.extract

    def spy(self, batch):
        seen.extend(text for _, text in batch)
        return extract(self, batch)

    monkeypatch.setattr(Lookup, "extract", spy)
    rows = [3, 1, 3, 0, 1, 3, 2, 0, 4]  # the row each stimulus's caption names
    captions = {s: f"{r} " + "word " * r for s, r in zip(IDS, rows, strict=True)}
    out = _run(tmp_path, "repeated", captions)
    ds = open_dataset(out["a"])
    np.testing.assert_allclose(ds["features"].values, _table()[rows], rtol=1e-6)
    assert list(ds["stimulus"].values) == IDS
    assert sorted(seen) == sorted(set(captions.values()))


def test_pca_is_fitted_on_training_stimuli_only(tmp_path):
    from sklearn.decomposition import PCA

    out = _run(tmp_path, "pca", reduction={"method": "pca", "n_components": 3})
    got = open_dataset(out["a"])
    reduced = got["features"].values
    assert reduced.shape == (N_STIM, 3)
    table = _table()
    expected = PCA(n_components=3).fit(table[:5]).transform(table)
    leaked = PCA(n_components=3).fit(table).transform(table)
    signs = np.sign(np.sum(reduced * expected, axis=0))
    np.testing.assert_allclose(reduced * signs, expected, rtol=1e-4, atol=1e-4)
    # The test data are built so that a fit that sees the test rows differs a lot.
    assert np.abs(np.abs(leaked) - np.abs(expected)).max() > 10
    red = got.attrs["reduction"]
    assert red["method"] == "pca" and red["fit_on"] == "train_ids" and red["n_train"] == 5
    assert red["n_features_in"] == N_FEAT
    assert len(red["explained_variance_ratio"]) == 3
    assert got.attrs["neuroflow"]["extra"]["features"]["reduction"]["train_ids_sha256"]
    assert not list(tmp_path.glob("pca/.*scratch*"))


def test_pca_requires_known_train_ids(tmp_path):
    with pytest.raises(ValueError, match="`train_ids` must list the training stimuli"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=IDS,
            captions=CAPTIONS,
            output=tmp_path / "o",
            config={"extractor": "test_lookup", "reduction": {"method": "pca"}},
            provenance={},
        )
    with pytest.raises(ValueError, match="unknown ids \\['zz'\\]"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=IDS,
            captions=CAPTIONS,
            output=tmp_path / "o",
            config={"extractor": "test_lookup", "reduction": {"method": "pca"}},
            provenance={},
            train_ids=["zz"],
        )
    with pytest.raises(ValueError, match="at most min\\(n_train, n_features\\) = 2"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=IDS,
            captions=CAPTIONS,
            output=tmp_path / "o",
            config={"extractor": "test_lookup", "reduction": {"method": "pca", "n_components": 3}},
            provenance={},
            train_ids=IDS[:2],
        )


def test_random_projection(tmp_path):
    from sklearn.random_projection import SparseRandomProjection

    out = _run(tmp_path, "srp", reduction={"method": "random_projection", "n_components": 4})
    got = open_dataset(out["a"])["features"].values
    proj = SparseRandomProjection(n_components=4, dense_output=True, random_state=0)
    expected = proj.fit(np.zeros((1, N_FEAT))).transform(_table())
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_float16_storage(tmp_path):
    out = _run(tmp_path, "f16", storage_dtype="float16")
    ds = open_dataset(out["a"])
    assert ds["features"].dtype == np.float16
    assert ds.attrs["dtype"] == "float16"
    np.testing.assert_allclose(
        ds["features"].values.astype(np.float32), _table(), rtol=2e-3, atol=2e-3
    )


def test_failure_leaves_no_store(tmp_path):
    Failing.calls = 0
    with pytest.raises(RuntimeError, match="boom"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=IDS,
            captions=CAPTIONS,
            output=tmp_path / "fail",
            config={"extractor": "test_failing", "batch_size": 2},
            provenance={},
        )
    assert not (tmp_path / "fail" / "a.zarr").exists()
    assert not list((tmp_path / "fail").iterdir())


def test_output_mapping_must_match_layers(tmp_path):
    out = extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=IDS,
        captions=CAPTIONS,
        output={"a": tmp_path / "x" / "A.zarr", "b": tmp_path / "y" / "B.zarr"},
        config={"extractor": "test_lookup"},
        provenance={},
    )
    assert out["a"] == tmp_path / "x" / "A.zarr" and out["a"].exists()
    with pytest.raises(ValueError, match="`output` must have one path per layer"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=IDS,
            captions=CAPTIONS,
            output={"a": tmp_path / "A.zarr"},
            config={"extractor": "test_lookup"},
            provenance={},
        )


def test_stimulus_ids_from_events(tmp_path):
    events = tmp_path / "sub-01_task-x_events.tsv"
    events.write_text(
        "onset\tduration\tstim_file\n0\t1\tb.png\n1\t1\tn/a\n2\t1\ta.png\n3\t1\tb.png\n4\t1\t\n"
    )
    assert read_stimulus_ids(events) == ["b.png", "a.png"]
    assert read_stimulus_ids([events, events]) == ["b.png", "a.png"]
    assert read_stimulus_ids(["x", "x", "y"]) == ["x", "y"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("onset\tfile\n0\ta\n")
    with pytest.raises(ValueError, match=r"bad\.tsv: the table has no `stim_file` column"):
        read_stimulus_ids(bad)


def test_stimulus_ids_from_real_events(shared_data):
    folder = shared_data / "bids-events" / "ds000117" / "sub-01" / "ses-mri" / "func"
    events = sorted(folder.glob("*_events.tsv"))
    if not events:
        pytest.skip(f"no ds000117 event tables under {folder}")
    ids = read_stimulus_ids(events)
    assert ids and len(ids) == len(set(ids))
    assert all(i.startswith("func/") and i.endswith(".bmp") for i in ids)


def test_image_transforms(rng):
    image = rng.random((9, 13, 3)).astype(np.float32)
    out = apply_transforms(image, {"resize": 18, "center_crop": [16, 16], "blur_sigma": 0.0})
    assert out.shape == (16, 16, 3)
    assert apply_transforms(image, {"resize": [7, 8]}).shape == (7, 8, 3)
    blurred = apply_transforms(image, {"blur_sigma": 2.0})
    assert blurred.shape == image.shape
    assert blurred.std() < image.std() * 0.6
    np.testing.assert_allclose(blurred.mean(), image.mean(), rtol=0.02)
    crop = apply_transforms(image, {"center_crop": 7})
    np.testing.assert_array_equal(crop, image[1:8, 3:10])
    with pytest.raises(ValueError, match=r"`transforms\.center_crop` must fit"):
        apply_transforms(image, {"center_crop": 20})


def test_transforms_are_recorded(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    transforms = {"resize": [20, 20], "center_crop": 16, "blur_sigma": 1.5}
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "t",
        config={
            "extractor": "motion_energy",
            "transforms": transforms,
            "gabor": {"size": [16, 16], "spatial_frequencies": [0, 2]},
        },
        provenance={},
    )
    ds = open_dataset(out["output"])
    assert ds.attrs["transforms"] == transforms
    assert ds.attrs["neuroflow"]["extra"]["features"]["transforms"] == transforms

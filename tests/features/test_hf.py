"""Hugging Face extractors on tiny random-initialised models (no downloads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from features_helpers import TINY_BERT, TINY_GPT2, TINY_VIT, TINY_WAV2VEC2, minilm_path, write_wavs

from neuroflow.artifacts import open_dataset
from neuroflow.features.config import fill_entry
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import (
    HFTextExtractor,
    HFVisionExtractor,
    ModelNotFoundError,
    hash_weight_files,
    resolve_model_dir,
    select_device,
    select_dtype,
)


def _vit_entry(**kw):
    return {
        "name": "vit",
        "extractor": "hf_vision",
        "weights": "random",
        "model_config": TINY_VIT,
        "batch_size": 3,
        **kw,
    }


def test_layer_fractions_pick_the_right_blocks(image_stimuli):
    folder, ids = image_stimuli
    entry = fill_entry(
        _vit_entry(
            layers=[{"depth": 0.5}, {"depth": 0.75}, {"depth": 1.0}, {"index": 0}, {"index": -1}],
            pooling="cls",
        )
    )
    extractor = HFVisionExtractor(entry, "image")
    from neuroflow.stimuli.image import load_image

    images = [load_image(folder / i) for i in ids[:3]]
    feats = extractor.extract(images)
    with torch.inference_mode():
        hidden = extractor.model(
            pixel_values=extractor._pixels(images), output_hidden_states=True
        ).hidden_states
    # 4 blocks: 0.5 -> 2, 0.75 -> 3, 1.0 -> 4, 0 -> embeddings, -1 -> 4.
    expected = {"depth-0.5": 2, "depth-0.75": 3, "depth-1": 4, "layer-0": 0, "layer-minus1": 4}
    for name, index in expected.items():
        np.testing.assert_allclose(feats[name], hidden[index][:, 0].numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(feats["depth-0.5"], feats["depth-0.75"])
    info = extractor.describe()
    assert info["layers"]["depth-0.75"]["index"] == 3
    assert info["layers"]["depth-0.75"]["n_blocks"] == 4


def test_vision_store_contents_and_seeded_random_weights(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    prov = {"stage": "extract_features", "version": "abc"}
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "a",
        config=_vit_entry(layers=[{"depth": 1.0}], pooling="patch_mean"),
        provenance=prov,
    )
    ds = open_dataset(out["depth-1"])
    assert ds["features"].dims == ("stimulus", "feature")
    assert ds["features"].shape == (7, 32)
    assert list(ds["stimulus"].values) == ids
    assert ds.attrs["weights"] == "random" and ds.attrs["seed"] == 0
    assert ds.attrs["layer_index"] == 4 and ds.attrs["pooling"] == "patch_mean"
    assert ds.attrs["model"] == "random:vit"
    assert len(ds.attrs["weights_sha256"]) == 64
    assert ds.attrs["neuroflow"]["version"] == "abc"
    assert (
        ds.attrs["neuroflow"]["extra"]["features"]["weights_sha256"] == ds.attrs["weights_sha256"]
    )
    again = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "b",
        config=_vit_entry(layers=[{"depth": 1.0}], pooling="patch_mean"),
        provenance=prov,
    )
    other = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "c",
        config=_vit_entry(layers=[{"depth": 1.0}], pooling="patch_mean", seed=1),
        provenance=prov,
    )
    a = ds["features"].values
    np.testing.assert_array_equal(a, open_dataset(again["depth-1"])["features"].values)
    assert not np.allclose(a, open_dataset(other["depth-1"])["features"].values)
    assert open_dataset(other["depth-1"]).attrs["weights_sha256"] != ds.attrs["weights_sha256"]


def test_vision_from_saved_folder_with_processor(image_stimuli, tmp_path):
    from transformers import AutoConfig, AutoModel, ViTImageProcessor

    cfg = dict(TINY_VIT)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    torch.manual_seed(3)
    model_dir = tmp_path / "tiny-vit"
    AutoModel.from_config(config).save_pretrained(model_dir)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(model_dir)
    folder, ids = image_stimuli
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "out",
        config={
            "name": "v",
            "extractor": "hf_vision",
            "model": str(model_dir),
            "layers": [{"index": 2}],
        },
        provenance={},
    )
    ds = open_dataset(out["layer-2"])
    assert ds.attrs["weights"] == "pretrained"
    assert ds.attrs["weights_sha256"] == hash_weight_files(model_dir)
    assert np.isfinite(ds["features"].values).all()


def test_vision_on_videos_averages_sampled_frames(tmp_path, rng):
    folder = tmp_path / "stimuli"
    folder.mkdir()
    for i, n_frames in enumerate((5, 9)):
        np.save(folder / f"v{i}.npy", rng.random((n_frames, 20, 24, 3)).astype(np.float32))
    config = _vit_entry(layers=[{"depth": 1.0}], frames_per_video=3)
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=["v0.npy", "v1.npy"],
        output=tmp_path / "vid",
        config=config,
        provenance={},
    )
    got = open_dataset(out["depth-1"])
    assert got.attrs["modality"] == "video"
    extractor = HFVisionExtractor(fill_entry(config), "image")
    frames = np.load(folder / "v1.npy")[[0, 4, 8]]
    expected = extractor.extract(list(frames))["depth-1"].mean(axis=0)
    np.testing.assert_allclose(got["features"].values[1], expected, rtol=1e-4, atol=1e-5)


def test_bert_text_random(tmp_path):
    tokenizer = str(minilm_path())
    ids = [f"w{i}" for i in range(8)]
    captions = dict(zip(ids, ["the", "cat", "sat", "on", "a", "warm", "sunny", "mat"], strict=True))
    out = extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=ids,
        captions=captions,
        output=tmp_path / "bert",
        config={
            "name": "bert",
            "extractor": "hf_text",
            "weights": "random",
            "model_config": TINY_BERT,
            "tokenizer": tokenizer,
            "layers": [{"depth": 0.5}, {"depth": 1.0}],
            "batch_size": 3,
        },
        provenance={},
    )
    a = open_dataset(out["depth-0.5"])
    assert a["features"].shape == (8, 32)
    assert a.attrs["layer_index"] == 2  # 0.5 * 3 blocks = 1.5, rounded half up
    assert a.attrs["modality"] == "text"


def test_causal_lm_context_window_changes_only_the_context(tmp_path):
    entry = fill_entry(
        {
            "extractor": "hf_text",
            "weights": "random",
            "model_config": TINY_GPT2,
            "tokenizer": str(minilm_path()),
            "layers": [{"depth": 1.0}],
            "pooling": "last",
            "context_words": 3,
        }
    )
    extractor = HFTextExtractor(entry, "text")
    assert extractor.causal
    feats = extractor.extract([("a b c", "dog"), ("x y z", "dog"), ("", "dog")])["depth-1"]
    assert not np.allclose(feats[0], feats[1])  # context matters for a causal LM
    # The same full text gives the same vector whatever the batch.
    alone = extractor.extract([("x y z", "dog")])["depth-1"]
    np.testing.assert_allclose(alone[0], feats[1], rtol=1e-4, atol=1e-5)


def test_context_words_use_preceding_stimuli(tmp_path):
    from neuroflow.stimuli.text import stimulus_texts

    ids = ["a", "b", "c", "d"]
    caps = {"a": "one two", "b": "three", "c": "four", "d": "five"}
    texts = stimulus_texts(ids, stimuli_dir=tmp_path, captions=caps, context_words=2)
    assert texts == [
        ("", "one two"),
        ("one two", "three"),
        ("two three", "four"),
        ("three four", "five"),
    ]
    with pytest.raises(ValueError, match="'e' has no text"):
        stimulus_texts(["e"], stimuli_dir=tmp_path, captions=caps)


def test_wav2vec2_audio_random(tmp_path, rng):
    folder = tmp_path / "stimuli"
    ids = write_wavs(folder, rng)
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "w2v",
        config={
            "name": "w2v",
            "extractor": "hf_audio",
            "weights": "random",
            "model_config": TINY_WAV2VEC2,
            "layers": [{"index": 0}, {"depth": 1.0}],
            "batch_size": 2,
        },
        provenance={},
    )
    ds = open_dataset(out["depth-1"])
    assert ds["features"].shape == (3, 32)
    assert ds.attrs["modality"] == "audio"
    assert np.isfinite(ds["features"].values).all()
    # Padding is masked: a clip's features do not depend on the longest clip in its batch.
    single = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids[:1],
        output=tmp_path / "w2v1",
        config={
            "name": "w2v",
            "extractor": "hf_audio",
            "weights": "random",
            "model_config": TINY_WAV2VEC2,
            "layers": [{"index": 0}, {"depth": 1.0}],
        },
        provenance={},
    )
    np.testing.assert_allclose(
        open_dataset(single["layer-0"])["features"].values[0],
        open_dataset(out["layer-0"])["features"].values[0],
        rtol=1e-4,
        atol=1e-5,
    )


def test_missing_model_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ModelNotFoundError, match="huggingface-cli download") as err:
        resolve_model_dir("no-such-org/no-such-model")
    assert "Hugging Face cache" in str(err.value)
    assert "save_pretrained" in str(err.value)
    missing = tmp_path / "models" / "vit"
    with pytest.raises(ModelNotFoundError, match=str(missing)):
        resolve_model_dir(str(missing))


def test_missing_model_in_stage_is_a_clear_error(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    with pytest.raises(ModelNotFoundError, match="not available offline"):
        extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / "x",
            config={
                "extractor": "hf_vision",
                "model": str(tmp_path / "nope"),
                "layers": [{"index": 1}],
            },
            provenance={},
        )
    assert not (tmp_path / "x" / "layer-1.zarr").exists()


def test_modality_mismatch_at_run_time(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    with pytest.raises(ValueError, match="accepts audio stimuli, got modality 'image'"):
        extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / "x",
            config={"extractor": "hf_audio", "weights": "random", "model_config": TINY_WAV2VEC2},
            provenance={},
        )


def test_device_and_dtype_selection():
    expected = "cuda" if torch.cuda.is_available() else None
    device = select_device("auto")
    if expected:
        assert device.type == expected
    assert select_dtype("auto", torch.device("cpu")) == torch.float32
    assert select_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError, match="`dtype` must be float32 or bfloat16 on CPU"):
        select_dtype("float16", torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_half_precision_on_gpu(image_stimuli):
    folder, ids = image_stimuli
    from neuroflow.stimuli.image import load_image

    entry = fill_entry(_vit_entry(layers=[{"depth": 1.0}], device="cuda", dtype="float16"))
    extractor = HFVisionExtractor(entry, "image")
    feats = extractor.extract([load_image(folder / i) for i in ids[:2]])["depth-1"]
    ref = HFVisionExtractor(fill_entry(_vit_entry(layers=[{"depth": 1.0}], device="cpu")), "image")
    ref_feats = ref.extract([load_image(folder / i) for i in ids[:2]])["depth-1"]
    assert feats.dtype == np.float32
    np.testing.assert_allclose(feats, ref_feats, rtol=0.05, atol=0.05)


def test_packaged_minilm_resolves():
    path = minilm_path()
    assert resolve_model_dir("all-MiniLM-L6-v2") == Path(path)

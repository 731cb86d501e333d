"""The hf_clip extractor on tiny CLIP and SigLIP models saved offline (no downloads)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from features_helpers import (
    TINY_VIT,
    build_model,
    save_clip_tokenizer,
    save_tiny_clip,
    tiny_clip,
    tiny_siglip,
)

from neuroflow.artifacts import open_dataset
from neuroflow.features.clip import PROJECTION, HFClipExtractor
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import ModelNotFoundError, hash_weight_files
from neuroflow.stimuli.image import load_image

REPO = Path(__file__).resolve().parents[2]
CAPTIONS = {
    "img/im0.png": "a cat",
    "img/im1.png": "the cat sat on the mat",
    "img/im2.png": "two dogs ran, then one dog sat!",
    "img/im3.png": "sun",
}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("clip-tokenizer")
    save_clip_tokenizer(folder)
    return folder


@pytest.fixture(scope="module")
def clip_dir(tmp_path_factory) -> Path:
    """A tiny CLIP saved as a model folder (weights, image processor, tokenizer)."""
    return save_tiny_clip(tmp_path_factory.mktemp("tiny-clip"))


def _load(folder: Path):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    model = CLIPModel.from_pretrained(folder, local_files_only=True).eval()
    processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return model, processor, tokenizer


def _pooled(out) -> torch.Tensor:
    """The projection of ``get_image_features`` / ``get_text_features`` (any transformers)."""
    return out if isinstance(out, torch.Tensor) else out.pooler_output


def _unit(x: torch.Tensor) -> np.ndarray:
    return torch.nn.functional.normalize(x.float(), dim=-1).numpy()


def test_image_stores_match_the_models_features(clip_dir, image_stimuli, tmp_path):
    folder, ids = image_stimuli
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "clip",
        config={
            "name": "clip",
            "extractor": "hf_clip",
            "model": str(clip_dir),
            "layers": [PROJECTION, {"index": 1}, {"depth": 1.0}],
            "batch_size": 3,
            "device": "cpu",
        },
        provenance={},
    )
    assert list(out) == ["projection", "layer-1", "depth-1"]
    model, processor, _ = _load(clip_dir)
    images = [load_image(folder / i) for i in ids]
    pixels = processor(
        images=images, return_tensors="pt", do_rescale=False, input_data_format="channels_last"
    )["pixel_values"]
    with torch.inference_mode():
        projected = _pooled(model.get_image_features(pixel_values=pixels))
        hidden = model.vision_model(pixel_values=pixels, output_hidden_states=True).hidden_states
    ds = open_dataset(out["projection"])
    got = ds["features"].values
    assert got.shape == (7, 16)
    np.testing.assert_allclose(got, _unit(projected), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    for name, index in (("layer-1", 1), ("depth-1", 3)):
        rows = open_dataset(out[name])["features"].values
        np.testing.assert_allclose(rows, hidden[index].mean(1).numpy(), rtol=1e-5, atol=1e-5)
    assert ds.attrs["layer_index"] is None and ds.attrs["pooling"] == "model"
    assert ds.attrs["weights"] == "pretrained"
    assert ds.attrs["weights_sha256"] == hash_weight_files(clip_dir)
    assert ds.attrs["model_path"] == str(clip_dir.resolve())
    assert open_dataset(out["depth-1"]).attrs["layer_index"] == 3
    info = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
    assert info["tower"] == "vision" and info["projection_dim"] == 16
    assert info["normalize"] is True and info["model_type"] == "clip"
    assert info["layers"]["layer-1"]["n_blocks"] == 3


def test_caption_stores_match_the_models_features(clip_dir, tmp_path):
    ids = list(CAPTIONS)
    out = extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=ids,
        captions=CAPTIONS,
        output=tmp_path / "clip-text",
        config={
            "name": "clip",
            "extractor": "hf_clip",
            "modality": "text",
            "model": str(clip_dir),
            "layers": [PROJECTION, {"index": 0}, {"depth": 1.0}],
            "batch_size": 2,
            "device": "cpu",
        },
        provenance={},
    )
    model, _, tokenizer = _load(clip_dir)
    expected: dict[str, list[np.ndarray]] = {"projection": [], "layer-0": [], "depth-1": []}
    for caption in CAPTIONS.values():  # each caption alone: padding must not matter
        enc = tokenizer([caption], return_tensors="pt")
        with torch.inference_mode():
            projected = _pooled(model.get_text_features(**enc))
            hidden = model.text_model(**enc, output_hidden_states=True).hidden_states
        expected["projection"].append(_unit(projected)[0])
        expected["layer-0"].append(hidden[0][0].mean(0).numpy())
        expected["depth-1"].append(hidden[2][0].mean(0).numpy())
    for name, rows in expected.items():
        ds = open_dataset(out[name])
        assert list(ds["stimulus"].values) == ids
        np.testing.assert_allclose(ds["features"].values, np.stack(rows), rtol=1e-5, atol=1e-5)
    ds = open_dataset(out["projection"])
    assert ds.attrs["modality"] == "text" and ds["features"].shape == (4, 16)
    info = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
    assert info["tower"] == "text" and info["layers"]["depth-1"]["index"] == 2


def test_images_and_captions_share_the_projection_space(clip_dir, image_stimuli):
    folder, ids = image_stimuli
    entry = fill_entry({"extractor": "hf_clip", "model": str(clip_dir), "device": "cpu"})
    assert entry["layers"] == [PROJECTION] and entry["normalize"] is True
    images = [load_image(folder / i) for i in ids[:3]]
    texts = list(CAPTIONS.values())
    image_rows = HFClipExtractor(entry, "image").extract(images)[PROJECTION]
    text_rows = HFClipExtractor(entry, "text").extract([("", t) for t in texts])[PROJECTION]
    assert image_rows.shape[1] == text_rows.shape[1] == 16
    model, processor, tokenizer = _load(clip_dir)
    pixels = processor(
        images=images, return_tensors="pt", do_rescale=False, input_data_format="channels_last"
    )["pixel_values"]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        logits = model(pixel_values=pixels, **enc).logits_per_image
        scale = model.logit_scale.exp()
    # CLIP's image-text logits are the scaled cosine similarities of the two row sets.
    np.testing.assert_allclose(
        image_rows @ text_rows.T, (logits / scale).numpy(), rtol=1e-4, atol=1e-5
    )


def test_random_weights_raw_projection_and_patch_pooling(tokenizer_dir, rng):
    from transformers import AutoTokenizer

    spec = tiny_clip(AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True))
    entry = fill_entry(
        {
            "extractor": "hf_clip",
            "weights": "random",
            "model_config": spec,
            "seed": 5,
            "normalize": False,
            "layers": [PROJECTION, {"index": -1}],
            "pooling": "patch_mean",
            "device": "cpu",
        }
    )
    extractor = HFClipExtractor(entry, "image")
    reference = build_model(spec, seed=5)
    state = extractor.model.state_dict()
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(state[key], value, rtol=0, atol=0)
    images = [rng.random((30 + 4 * i, 41, 3)).astype(np.float32) for i in range(3)]
    feats = extractor.extract(images)
    pixels = extractor._pixels(images)
    assert pixels.shape == (3, 3, 32, 32)
    with torch.inference_mode():
        projected = _pooled(reference.get_image_features(pixel_values=pixels))
        hidden = reference.vision_model(pixel_values=pixels, output_hidden_states=True)
    np.testing.assert_allclose(feats[PROJECTION], projected.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.linalg.norm(feats[PROJECTION], axis=1), 1.0)
    # 16 patch tokens after CLIP's class token.
    patches = hidden.hidden_states[3][:, 1:].mean(1).numpy()
    np.testing.assert_allclose(feats["layer-minus1"], patches, rtol=1e-5, atol=1e-5)
    info = extractor.describe()
    assert info["model"] == "random:clip" and info["seed"] == 5 and info["model_path"] is None
    assert info["normalize"] is False and info["layers"]["layer-minus1"]["index"] == 3
    other = HFClipExtractor(fill_entry({**entry, "seed": 6}), "image")
    assert other.describe()["weights_sha256"] != info["weights_sha256"]


def test_videos_average_the_frame_projections(tokenizer_dir, tmp_path, rng):
    from transformers import AutoTokenizer

    folder = tmp_path / "stimuli"
    folder.mkdir()
    for i, n_frames in enumerate((5, 9)):
        np.save(folder / f"v{i}.npy", rng.random((n_frames, 20, 24, 3)).astype(np.float32))
    spec = tiny_clip(AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True))
    config = {
        "name": "clip",
        "extractor": "hf_clip",
        "weights": "random",
        "model_config": spec,
        "frames_per_video": 3,
        "device": "cpu",
    }
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=["v0.npy", "v1.npy"],
        output=tmp_path / "vid",
        config=config,
        provenance={},
    )
    got = open_dataset(out[PROJECTION])
    assert got.attrs["modality"] == "video"
    extractor = HFClipExtractor(fill_entry(config), "video")
    frames = np.load(folder / "v1.npy")[[0, 4, 8]]
    per_frame = extractor.extract_frames(list(frames))[PROJECTION]
    expected = per_frame.mean(axis=0)
    np.testing.assert_allclose(got["features"].values[1], expected, rtol=1e-4, atol=1e-5)
    sampled = extract_features(
        stimuli_dir=folder,
        stimulus_ids=["v0.npy", "v1.npy"],
        output=tmp_path / "frames",
        config={**config, "frame_rate": 12.0},
        provenance={},
    )
    rows = open_dataset(sampled[PROJECTION])
    ids = list(rows["stimulus"].values)
    assert "v1.npy#t=0.000" in ids and len(ids) > 2
    np.testing.assert_allclose(
        rows["features"].values[ids.index("v1.npy#t=0.000")], per_frame[0], rtol=1e-4, atol=1e-5
    )


def test_siglip_images_and_captions(tokenizer_dir, rng):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
    spec = tiny_siglip(tokenizer)
    entry = fill_entry(
        {
            "extractor": "hf_clip",
            "weights": "random",
            "model_config": spec,
            "tokenizer": str(tokenizer_dir),
            "layers": [PROJECTION, {"depth": 0.5}],
            "device": "cpu",
        }
    )
    reference = build_model(spec)
    texts = list(CAPTIONS.values())
    text_feats = HFClipExtractor(entry, "text").extract([("", t) for t in texts])
    enc = tokenizer(
        texts, return_tensors="pt", padding="max_length", truncation=True, max_length=12
    )
    images = [rng.random((32, 32, 3)).astype(np.float32) for _ in range(2)]
    image_extractor = HFClipExtractor(entry, "image")
    image_feats = image_extractor.extract(images)
    pixels = (torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2) - 0.5) / 0.5
    with torch.inference_mode():
        text_proj = _pooled(reference.get_text_features(**enc))
        image_proj = _pooled(reference.get_image_features(pixel_values=pixels))
        hidden = reference.vision_model(pixel_values=pixels, output_hidden_states=True)
    np.testing.assert_allclose(text_feats[PROJECTION], _unit(text_proj), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(image_feats[PROJECTION], _unit(image_proj), rtol=1e-5, atol=1e-5)
    assert text_feats[PROJECTION].shape[1] == image_feats[PROJECTION].shape[1] == 32
    # SigLIP has no class token: every token is a patch.
    np.testing.assert_allclose(
        image_feats["depth-0.5"], hidden.hidden_states[1].mean(1).numpy(), rtol=1e-5, atol=1e-5
    )
    assert image_extractor.describe()["model_type"] == "siglip"


def test_missing_snapshot_says_where_it_looked(tmp_path, monkeypatch, image_stimuli):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    entry = fill_entry({"extractor": "hf_clip", "model": "no-such-org/no-such-clip"})
    with pytest.raises(ModelNotFoundError, match="not available offline") as err:
        HFClipExtractor(entry, "image")
    message = str(err.value)
    assert "in the Hugging Face cache at" in message and "save_pretrained" in message
    assert "huggingface-cli download no-such-org/no-such-clip" in message
    folder, ids = image_stimuli
    missing = tmp_path / "models" / "clip"
    with pytest.raises(ModelNotFoundError, match=re.escape(str(missing))):
        extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / "x",
            config={"extractor": "hf_clip", "model": str(missing)},
            provenance={},
        )
    assert not (tmp_path / "x" / "projection.zarr").exists()


def test_entry_checks():
    typo = r"Unknown key 'features\.extractors\[\]\.normalise'\. Did you mean 'normalize'\?"
    with pytest.raises(ValueError, match=typo):
        fill_entry({"extractor": "hf_clip", "normalise": False})
    with pytest.raises(ValueError, match=r"got 'projektion' instead\. Did you mean 'projection'"):
        fill_entry({"extractor": "hf_clip", "layers": ["projektion"]})
    with pytest.raises(ValueError, match=r"embedding output of the tower is \{index: 0\}"):
        fill_entry({"extractor": "hf_clip", "layers": ["embedding"]})
    with pytest.raises(ValueError, match="`normalize` must be a bool, got 'yes' instead"):
        fill_entry({"extractor": "hf_clip", "normalize": "yes"})
    with pytest.raises(ValueError, match="`context_words` must be 0 for 'hf_clip'"):
        fill_entry({"extractor": "hf_clip", "modality": "text", "context_words": 2})
    with pytest.raises(
        ValueError, match="accepts image, video, text stimuli, got modality 'audio'"
    ):
        fill_entry({"extractor": "hf_clip", "modality": "audio"})
    names = layer_names(
        {"extractor": "hf_clip", "layers": [PROJECTION, {"index": -1}, {"depth": 0.5}]}
    )
    assert names == ["projection", "layer-minus1", "depth-0.5"]
    pattern = re.search(r'layer=r"([^"]+)"', (REPO / "rules" / "common.smk").read_text())
    assert pattern is not None
    assert all(re.fullmatch(pattern.group(1), name) for name in names)


def test_model_and_tokenizer_must_fit(tokenizer_dir):
    from transformers import AutoTokenizer

    with pytest.raises(ValueError, match="must be an image-text dual encoder"):
        HFClipExtractor(
            fill_entry({"extractor": "hf_clip", "weights": "random", "model_config": TINY_VIT}),
            "image",
        )
    spec = tiny_clip(AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True))
    entry = {"extractor": "hf_clip", "weights": "random", "model_config": spec, "device": "cpu"}
    with pytest.raises(ValueError, match="`tokenizer` must name a tokenizer"):
        HFClipExtractor(fill_entry(entry), "text")
    bad = copy.deepcopy(spec)
    bad["text_config"]["eos_token_id"] = 5
    with pytest.raises(ValueError, match="end-of-text token id must be the text tower's"):
        HFClipExtractor(
            fill_entry({**entry, "model_config": bad, "tokenizer": str(tokenizer_dir)}), "text"
        )
    small = copy.deepcopy(spec)
    small["text_config"]["vocab_size"] = 40
    with pytest.raises(ValueError, match="must fit the text tower's vocabulary of 40 tokens"):
        HFClipExtractor(
            fill_entry({**entry, "model_config": small, "tokenizer": str(tokenizer_dir)}), "text"
        )


def test_config_with_an_hf_clip_entry_validates(clip_dir):
    from neuroflow.config import ConfigError, load_schema, validate_config
    from neuroflow.config.validation import deep_update

    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    entry = {
        "name": "clip",
        "extractor": "hf_clip",
        "model": str(clip_dir),
        "layers": ["projection", {"depth": 0.5}],
        "normalize": False,
    }
    overlay = {"features": {"extractors": [*base["features"]["extractors"], entry]}}
    config = validate_config(deep_update(base, overlay), schema)
    filled = [e for e in config["features"]["extractors"] if e["extractor"] == "hf_clip"]
    assert filled[0]["normalize"] is False
    assert layer_names(filled[0]) == ["projection", "depth-0.5"]
    typo = {**entry, "normalise": False}
    with pytest.raises(ConfigError, match=r"normalise'.*Did you mean 'normalize'"):
        validate_config(deep_update(base, {"features": {"extractors": [typo]}}), schema)

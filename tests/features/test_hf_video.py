"""The hf_video extractor on tiny VideoMAE, V-JEPA 2 and X-CLIP models saved offline.

Every model is built from its ``transformers`` configuration with seeded random weights,
saved with ``save_pretrained`` and read back through ``extract_features``; each row is
compared with a forward pass built here by hand on the frames the row should see.
"""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from neuroflow.artifacts import open_dataset
from neuroflow.features.config import fill_entry
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import ModelNotFoundError, hash_state_dict, hash_weight_files
from neuroflow.features.windows import (
    iter_frame_windows,
    window_frame_indices,
    window_frame_times,
)
from neuroflow.stimuli.video import load_video

FPS = 12
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
TINY_VIDEOMAE = {
    "model_type": "videomae",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "image_size": 16,
    "patch_size": 8,
    "num_frames": 4,
    "tubelet_size": 2,
}
TINY_VJEPA2 = {
    "model_type": "vjepa2",
    "hidden_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "mlp_ratio": 2.0,
    "crop_size": 16,
    "patch_size": 8,
    "frames_per_clip": 4,
    "tubelet_size": 2,
    "pred_hidden_size": 16,
    "pred_num_attention_heads": 2,
    "pred_num_hidden_layers": 1,
    "num_pooler_layers": 1,
}
TINY_XCLIP = {
    "model_type": "xclip",
    "projection_dim": 16,
    "prompt_layers": 1,
    "prompt_attention_heads": 2,
    "text_config": {
        "vocab_size": 99,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 24,
        "max_position_embeddings": 16,
    },
    "vision_config": {
        "hidden_size": 16,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 24,
        "image_size": 16,
        "patch_size": 8,
        "num_frames": 3,
        "mit_hidden_size": 16,
        "mit_intermediate_size": 24,
        "mit_num_attention_heads": 2,
    },
}


def _save_model(folder: Path, spec: dict, seed: int = 0) -> torch.nn.Module:
    """Build a model from its configuration with seeded weights and save it in ``folder``."""
    from transformers import AutoConfig, AutoModel

    spec = dict(spec)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config).eval()
    model.save_pretrained(folder)
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, torch.nn.Module]]:
    """Tiny saved models: VideoMAE, V-JEPA 2 (with a video processor file) and X-CLIP."""
    root = tmp_path_factory.mktemp("video_models")
    out = {}
    for name, spec in (("videomae", TINY_VIDEOMAE), ("vjepa2", TINY_VJEPA2), ("xclip", TINY_XCLIP)):
        out[name] = (root / name, _save_model(root / name, spec))
    processor = {
        "video_processor_type": "VJEPA2VideoProcessor",
        "do_resize": True,
        "size": {"shortest_edge": 18},
        "do_center_crop": True,
        "crop_size": {"height": 16, "width": 16},
        "do_normalize": True,
        "image_mean": [0.4, 0.5, 0.6],
        "image_std": [0.2, 0.3, 0.25],
        "resample": 2,
    }
    (root / "vjepa2" / "video_preprocessor_config.json").write_text(json.dumps(processor))
    return out


@pytest.fixture
def clips(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, np.ndarray]]:
    """Two .npy clips at 12 fps of uneven sizes: 2.5 s (30 frames, 13x17) and 1.75 s (21, 11x14)."""
    folder = tmp_path / "stimuli"
    folder.mkdir()
    frames = {
        "long.npy": (rng.random((30, 13, 17, 3)) * 255).astype(np.uint8),
        "short.npy": (rng.random((21, 11, 14, 3)) * 255).astype(np.uint8),
    }
    for name, stack in frames.items():
        np.save(folder / name, stack)
    return folder, {k: v.astype(np.float32) / 255.0 for k, v in frames.items()}


def _extract(folder: Path, out: Path, ids: list[str], **config) -> dict[str, Path]:
    return extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=out,
        config={"name": "video", "extractor": "hf_video", "gabor": {"fps": FPS}, **config},
        provenance={"stage": "extract_features"},
    )


def _window(frames: np.ndarray, t: float, window_s: float, n: int) -> np.ndarray:
    """The ``n`` frames a row at time ``t`` reads, by hand: evenly spaced over [t - w, t]."""
    times = t - window_s * np.arange(n - 1, -1, -1) / max(n - 1, 1)
    index = np.clip(np.floor(times * FPS + 1e-6).astype(int), 0, len(frames) - 1)
    return frames[index]


def _resized(frames: np.ndarray, size: tuple[int, int], mean, std) -> torch.Tensor:
    """Frames resized (bilinear, antialiased) and normalised, shape (T, 3, h, w)."""
    x = torch.from_numpy(frames).permute(0, 3, 1, 2)
    x = torch.nn.functional.interpolate(
        x, size=size, mode="bilinear", align_corners=False, antialias=True
    )
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


def _hidden(model: torch.nn.Module, key: str, pixels: torch.Tensor, **kwargs) -> tuple:
    with torch.no_grad():
        return model(**{key: pixels}, output_hidden_states=True, **kwargs).hidden_states


def test_window_frames_are_evenly_spaced_and_clamped_at_the_start():
    times = window_frame_times(np.array([0.0, 1.5]), 1.5, 4)
    np.testing.assert_allclose(times, [[-1.5, -1.0, -0.5, 0.0], [0.0, 0.5, 1.0, 1.5]])
    np.testing.assert_allclose(window_frame_times(np.array([2.0]), 3.0, 1), [[2.0]])
    idx = window_frame_indices(
        np.array([0.0, 0.5, 2.0]), window_s=1.0, n_frames=3, fps=4.0, n_video_frames=8
    )
    np.testing.assert_array_equal(idx, [[0, 0, 0], [0, 0, 2], [4, 6, 7]])


def test_videomae_rows_are_the_model_on_the_preceding_clip(models, clips, tmp_path):
    folder_model, model = models["videomae"]
    folder, frames = clips
    layers = [{"index": 0}, {"index": 1}, {"depth": 1.0}]
    out = _extract(
        folder,
        tmp_path / "f",
        ["long.npy", "short.npy"],
        model=str(folder_model),
        frame_rate=2.0,
        window_s=1.25,
        layers=layers,
        batch_size=3,
    )
    assert sorted(out) == ["depth-1", "layer-0", "layer-1"]
    ds = open_dataset(out["layer-1"])
    # 2.5 s and 1.75 s at 2 Hz: ceil(5) + ceil(3.5) rows, at k / 2 s
    times = [0.0, 0.5, 1.0, 1.5, 2.0, 0.0, 0.5, 1.0, 1.5]
    np.testing.assert_allclose(ds["frame_time"].values, times)
    np.testing.assert_allclose(ds["frame_duration"].values, [0.5] * 8 + [0.25])
    assert list(ds["source_stimulus"].values) == ["long.npy"] * 5 + ["short.npy"] * 4
    assert str(ds["stimulus"].values[6]) == "short.npy#t=0.500"
    assert ds.attrs["row_unit"] == "frame" and ds.attrs["frame_rate"] == 2.0
    assert ds.attrs["clip_frames"] == 4 and ds.attrs["window_s"] == 1.25
    assert ds.attrs["weights_sha256"] == hash_weight_files(folder_model)
    assert ds.attrs["layer_index"] == 1 and ds.attrs["n_blocks"] == 2
    stores = {name: open_dataset(path)["features"].values for name, path in out.items()}
    row = 0
    for stim in ("long.npy", "short.npy"):
        for t in times[:5] if stim == "long.npy" else times[5:]:
            clip = _window(frames[stim], t, 1.25, 4)
            hidden = _hidden(model, "pixel_values", _resized(clip, (16, 16), *IMAGENET)[None])
            for name, index in (("layer-0", 0), ("layer-1", 1), ("depth-1", 2)):
                expected = hidden[index].mean(dim=1)[0].numpy()
                np.testing.assert_allclose(stores[name][row], expected, rtol=1e-5, atol=1e-5)
            row += 1
    # the clip at t = 0 repeats the first frame: the window is clamped at the start
    first = np.repeat(frames["long.npy"][:1], 4, axis=0)
    hidden = _hidden(model, "pixel_values", _resized(first, (16, 16), *IMAGENET)[None])
    np.testing.assert_allclose(
        stores["depth-1"][0], hidden[2].mean(dim=1)[0].numpy(), rtol=1e-5, atol=1e-5
    )


def test_vjepa2_reads_its_video_processor_and_other_clip_lengths(models, clips, tmp_path):
    folder_model, model = models["vjepa2"]
    folder, frames = clips
    out = _extract(
        folder,
        tmp_path / "f",
        ["long.npy"],
        model=str(folder_model),
        frame_rate=1.5,
        window_s=0.8,
        clip_frames=6,
        layers=[{"index": -1}],
        pooling="patch_mean",
        batch_size=2,
    )
    ds = open_dataset(out["layer-minus1"])
    np.testing.assert_allclose(ds["frame_time"].values, np.arange(4) / 1.5)
    describe = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
    assert describe["input_transform"]["source"].endswith("video_preprocessor_config.json")
    assert describe["clip_frames"] == 6 and describe["model_clip_frames"] == 4
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.3, 0.25)
    for row, t in enumerate(ds["frame_time"].values):
        clip = _window(frames["long.npy"], t, 0.8, 6)
        # 13x17 -> shorter side 18: 18x23, then the centre 16x16 (top 1, left 3)
        pixels = _resized(clip, (18, 23), mean, std)[:, :, 1:17, 3:19]
        hidden = _hidden(model, "pixel_values_videos", pixels[None], skip_predictor=True)
        expected = hidden[-1].mean(dim=1)[0].numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)


def test_videomae_image_processor_file_matches_transformers(clips, tmp_path, rng):
    from transformers import VideoMAEImageProcessor

    folder_model = tmp_path / "videomae"
    model = _save_model(folder_model, TINY_VIDEOMAE, seed=3)
    processor = VideoMAEImageProcessor(
        size={"shortest_edge": 20},
        crop_size={"height": 16, "width": 16},
        image_mean=[0.45, 0.4, 0.5],
        image_std=[0.3, 0.2, 0.25],
    )
    processor.save_pretrained(folder_model)
    folder, _ = clips
    frames = rng.random((10, 20, 27, 3)).astype(np.float32)  # shorter side already 20
    np.save(folder / "wide.npy", frames)
    out = _extract(
        folder,
        tmp_path / "f",
        ["wide.npy"],
        model=str(folder_model),
        frame_rate=3.0,
        window_s=0.5,
        layers=[{"depth": 0.5}],
    )
    ds = open_dataset(out["depth-0.5"])
    assert ds.sizes["stimulus"] == 3  # 10 frames at 12 fps: 0.833 s at 3 Hz
    for row, t in enumerate(ds["frame_time"].values):
        clip = _window(frames, t, 0.5, 4)
        pixels = processor(
            list(clip),
            return_tensors="pt",
            do_rescale=False,
            do_resize=False,
            input_data_format="channels_last",
        )["pixel_values"]
        expected = _hidden(model, "pixel_values", pixels)[1].mean(dim=1)[0].numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)


def test_xclip_vision_tower_pools_each_frame_then_the_clip(models, clips, tmp_path):
    folder_model, model = models["xclip"]
    folder, frames = clips
    out = _extract(
        folder,
        tmp_path / "f",
        ["short.npy"],
        model=str(folder_model),
        frame_rate=1.0,
        window_s=1.0,
        layers=[{"index": 1}],
        pooling="cls",
    )
    ds = open_dataset(out["layer-1"])
    assert ds.sizes["stimulus"] == 2 and ds.sizes["feature"] == 16
    clip_mean = (0.48145466, 0.4578275, 0.40821073)
    clip_std = (0.26862954, 0.26130258, 0.27577711)
    for row, t in enumerate(ds["frame_time"].values):
        clip = _window(frames["short.npy"], t, 1.0, 3)
        pixels = _resized(clip, (16, 16), clip_mean, clip_std)
        hidden = _hidden(model.vision_model, "pixel_values", pixels)
        expected = hidden[1][:, 0].mean(dim=0).numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)


def test_random_weights_are_seeded_and_recorded(clips, tmp_path):
    folder, _ = clips
    config = {
        "weights": "random",
        "model_config": TINY_VIDEOMAE,
        "frame_rate": 2.0,
        "layers": [{"depth": 1.0}],
    }
    a = open_dataset(_extract(folder, tmp_path / "a", ["short.npy"], seed=1, **config)["depth-1"])
    b = open_dataset(_extract(folder, tmp_path / "b", ["short.npy"], seed=1, **config)["depth-1"])
    c = open_dataset(_extract(folder, tmp_path / "c", ["short.npy"], seed=2, **config)["depth-1"])
    np.testing.assert_array_equal(a["features"].values, b["features"].values)
    assert not np.allclose(a["features"].values, c["features"].values)
    assert a.attrs["weights"] == "random" and a.attrs["seed"] == 1
    assert a.attrs["weights_sha256"] == b.attrs["weights_sha256"] != c.attrs["weights_sha256"]
    from transformers import AutoConfig, AutoModel

    spec = dict(TINY_VIDEOMAE)
    torch.manual_seed(1)
    model = AutoModel.from_config(AutoConfig.for_model(spec.pop("model_type"), **spec))
    assert a.attrs["weights_sha256"] == hash_state_dict(model)
    assert a.attrs["window_s"] == 2.0 and a.attrs["clip_frames"] == 4


def test_avi_frames_are_decoded_once_in_order(tmp_path, rng):
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path / "stimuli"
    folder.mkdir()
    path = folder / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (18, 14))
    if not writer.isOpened():
        pytest.skip("OpenCV has no MJPG writer here")
    for _ in range(23):
        writer.write((rng.random((14, 18, 3)) * 255).astype(np.uint8))
    writer.release()
    np.save(folder / "same.npy", load_video(path).frames)  # the decoded frames, at 10 fps
    config = {
        "weights": "random",
        "model_config": TINY_VIDEOMAE,
        "frame_rate": 4.0,
        "window_s": 1.5,
        "batch_size": 4,
        "gabor": {"fps": 10},
    }
    avi = open_dataset(_extract(folder, tmp_path / "a", ["clip.avi"], **config)["depth-1"])
    npy = open_dataset(_extract(folder, tmp_path / "n", ["same.npy"], **config)["depth-1"])
    assert avi.sizes["stimulus"] == 10  # 2.3 s at 4 Hz
    np.testing.assert_allclose(avi["features"].values, npy["features"].values, atol=1e-6)


def test_only_the_frames_of_the_current_window_are_kept(tmp_path, rng):
    path = tmp_path / "long.npy"
    np.save(path, (rng.random((600, 4, 5, 3)) * 255).astype(np.uint8))
    times = np.arange(0, 600 / 24, 0.5)
    indices = window_frame_indices(times, window_s=2.0, n_frames=5, fps=24.0, n_video_frames=600)
    live, peak, calls = [0], [0], []

    def prepare(frame: np.ndarray) -> np.ndarray:
        out = frame.copy()
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        calls.append(1)
        weakref.finalize(out, lambda: live.__setitem__(0, live[0] - 1))
        return out

    n_windows = sum(1 for _ in iter_frame_windows(path, indices, transforms={}, prepare=prepare))
    assert n_windows == times.size
    assert len(calls) == np.unique(indices).size  # each needed frame prepared once
    assert peak[0] <= 5 + 1  # one window's frames, and the next one's newest


def test_configuration_errors_are_clear(models, clips, tmp_path, monkeypatch):
    folder, _ = clips
    base = {"extractor": "hf_video", "weights": "random", "model_config": TINY_VIDEOMAE}
    with pytest.raises(ValueError, match=r"`clip_frames` must be a positive int .* got 0 instead"):
        fill_entry({**base, "frame_rate": 2, "clip_frames": 0})
    with pytest.raises(
        ValueError, match=r"`window_s` must be a positive number of seconds, got -1"
    ):
        fill_entry({**base, "frame_rate": 2, "window_s": -1})
    with pytest.raises(ValueError, match=r"`frame_rate` must be a positive number of Hz for"):
        fill_entry(base)
    with pytest.raises(ValueError, match=r"`pooling` must be one of .* got 'last' instead"):
        fill_entry({**base, "frame_rate": 2, "pooling": "last"})
    with pytest.raises(ValueError, match=r"Unknown key 'features\.extractors\[\]\.clip_length'"):
        fill_entry({**base, "frame_rate": 2, "clip_length": 4})
    with pytest.raises(ValueError, match=r"`clip_frames` must be 4 \(or null\) for 'videomae'"):
        _extract(folder, tmp_path / "a", ["short.npy"], **base, frame_rate=2, clip_frames=6)
    with pytest.raises(ValueError, match="has no class token, got 'cls' instead"):
        _extract(folder, tmp_path / "b", ["short.npy"], **base, frame_rate=2, pooling="cls")
    folder_vjepa, _ = models["vjepa2"]
    with pytest.raises(ValueError, match="multiple of the tubelet size 2 of 'vjepa2', got 3"):
        _extract(
            folder,
            tmp_path / "c",
            ["short.npy"],
            model=str(folder_vjepa),
            frame_rate=2,
            clip_frames=3,
        )
    vit = {
        "model_type": "vit",
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 8,
        "image_size": 16,
        "patch_size": 8,
    }
    with pytest.raises(ValueError, match="must be a video transformer of type"):
        _extract(
            folder, tmp_path / "d", ["short.npy"], weights="random", model_config=vit, frame_rate=2
        )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(
        ModelNotFoundError, match=r"not available offline.*huggingface-cli download"
    ):
        _extract(folder, tmp_path / "e", ["short.npy"], model="MCG-NJU/videomae-base", frame_rate=2)
    assert not (tmp_path / "e").exists() or not any((tmp_path / "e").iterdir())
    with pytest.raises(ValueError, match="accepts video stimuli, got modality 'image'"):
        fill_entry({**base, "frame_rate": 2, "modality": "image"})


def test_models_inventory_finds_or_explains_video_models(models, tmp_path, monkeypatch):
    from huggingface_hub import constants

    from neuroflow.features.inventory import entry_records

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    folder_model, _ = models["videomae"]
    entry = {"name": "video", "extractor": "hf_video", "frame_rate": 2.0}
    (present,) = entry_records({**entry, "model": str(folder_model)})
    assert present.status == "present" and present.needs == "weights"
    assert present.sha256 == hash_weight_files(folder_model)
    (missing,) = entry_records({**entry, "model": "MCG-NJU/videomae-base"})
    assert missing.status == "missing"
    assert "hf download MCG-NJU/videomae-base --local-dir models/MCG-NJU/videomae-base" in (
        missing.fetch
    )
    (random,) = entry_records({**entry, "weights": "random", "model_config": TINY_VIDEOMAE})
    assert random.status == "random"

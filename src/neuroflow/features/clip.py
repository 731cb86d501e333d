"""Hugging Face image-text dual encoders (CLIP, SigLIP) on images, video frames or captions.

The model is read from disk only, as for the other Hugging Face extractors
(see :func:`neuroflow.features.hf.resolve_model_dir`): a ``save_pretrained``
folder or a snapshot in the local Hugging Face cache of a ``CLIPModel``, a
``SiglipModel`` or another model with ``get_image_features`` and
``get_text_features``. ``weights: random`` builds the architecture from
``model_config`` (e.g. ``{model_type: clip, projection_dim: 16, text_config:
{...}, vision_config: {...}}``) or from the folder's ``config.json``, with
weights drawn under ``seed``.

Stimuli go through the tower of their modality: images and video frames
through the vision tower, captions (``modality: text``) through the text
tower. A ``layers`` entry is

- ``"projection"`` (the default): the model's own embedding in the shared
  image-text space (``get_image_features`` / ``get_text_features``), scaled to
  unit length with ``normalize: true``, so that image rows and caption rows of
  one model have the same width and compare by cosine similarity;
- ``{index: i}`` or ``{depth: f}``: hidden states of the stimulus's tower (0
  is the embedding output; see :func:`neuroflow.features.layers.resolve_layer`),
  pooled over tokens with ``pooling`` (padding excluded for captions; the class
  token is the one prefix token of CLIP's vision tower for ``patch_mean``).

Images are preprocessed by the folder's image processor; random-weight models
without one are resized to the vision configuration's ``image_size`` and
normalised with CLIP's mean and s.d. (0.5 and 0.5 for SigLIP). Captions are
tokenised by the folder's tokenizer (or ``tokenizer``), truncated to
``max_length`` tokens and to the text tower's positions; SigLIP captions are
padded to that length, as SigLIP was trained. Videos are represented by
``frames_per_video`` evenly spaced frames whose features are averaged (the
mean of unit-length projections is not rescaled), or, with ``frame_rate``
set, by one row per sampled frame.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.features.hf import (
    _set_offline,
    _video_means,
    image_processor,
    load_model,
    pixel_values,
    resolve_model_dir,
    select_device,
    select_dtype,
)
from neuroflow.features.layers import layer_spec, pool, resolve_layer
from neuroflow.features.registry import Extractor, register_extractor

torch = lazy_loader.load("torch")

__all__ = ["PROJECTION", "HFClipExtractor"]

#: Layer name of the projected embedding in the shared image-text space.
PROJECTION = "projection"

#: Pixel mean and s.d. of random-weight models without an image processor.
_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
_HALF = (0.5, 0.5, 0.5)
#: SigLIP model types: captions padded to the text tower's length (as trained),
#: pixels normalised with mean and s.d. 0.5 when the folder has no image processor.
_SIGLIP_TYPES = ("siglip",)
#: Tokenizer outputs the text towers take.
_TEXT_INPUTS = ("input_ids", "attention_mask", "position_ids")


def _layers_message(spec: Any) -> str:
    hint = ""
    if isinstance(spec, str):
        close = difflib.get_close_matches(spec, [PROJECTION], n=1)
        if close:
            hint = f" Did you mean {close[0]!r}?"
        elif spec == "embedding":
            hint = " The embedding output of the tower is {index: 0}."
    return (
        f"`layers` of 'hf_clip' must be {PROJECTION!r}, block indices {{index: i}} or fractions "
        f"of depth {{depth: f}}, got {spec!r} instead.{hint}"
    )


@register_extractor("hf_clip", modalities=("image", "video", "text"))
class HFClipExtractor(Extractor):
    """Image-text dual encoders (CLIP, SigLIP) from a local Hugging Face folder.

    See the module docstring for the model sources, layers, preprocessing and
    videos. ``describe()`` records the tower read (``"vision"`` or ``"text"``),
    the width of the projection and whether it is normalised.
    """

    default_layers = (PROJECTION,)

    @classmethod
    def check_entry(cls, entry: dict[str, Any]) -> None:
        if not isinstance(entry["normalize"], bool):
            raise ValueError(f"`normalize` must be a bool, got {entry['normalize']!r} instead.")
        if entry["context_words"] != 0:
            raise ValueError(
                "`context_words` must be 0 for 'hf_clip' (its text tower embeds each caption "
                f"alone), got {entry['context_words']!r} instead; use hf_text for context."
            )
        for spec in entry["layers"] or []:
            kind, value = layer_spec(spec)
            if kind == "name" and value != PROJECTION:
                raise ValueError(_layers_message(spec))

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        _set_offline()
        type(self).check_entry(self.config)
        self.tower = "text" if modality == "text" else "vision"
        self.device = select_device(self.config["device"])
        self.dtype = select_dtype(self.config["dtype"], self.device)
        loaded = load_model(self.config, self.name)
        model, hf_config = loaded.model, loaded.hf_config
        self.folder, self.model_id = loaded.folder, loaded.model_id
        tower_config = getattr(hf_config, f"{self.tower}_config", None)
        if tower_config is None or not all(
            hasattr(model, f"get_{kind}_features") for kind in ("image", "text")
        ):
            raise ValueError(
                "`model` of 'hf_clip' must be an image-text dual encoder (CLIPModel, SiglipModel, "
                f"...), got {type(model).__name__} (model_type {hf_config.model_type!r}) instead; "
                "use hf_vision or hf_text for a single tower."
            )
        self.weights_sha256 = loaded.weights_sha256
        self.hf_config = hf_config
        self.model_type = str(hf_config.model_type)
        self.n_blocks = int(tower_config.num_hidden_layers)
        self.indices = [
            None if spec == PROJECTION else resolve_layer(spec, self.n_blocks)
            for spec in self.config["layers"]
        ]
        self.projection_dim: int | None = getattr(hf_config, "projection_dim", None)
        self.model = model.to(self.device, self.dtype).eval()
        if self.tower == "text":
            self._load_tokenizer(tower_config)
        else:
            self._load_image_processor(tower_config)

    def _load_tokenizer(self, text_config: Any) -> None:
        from transformers import AutoTokenizer

        source = self.config["tokenizer"] or self.folder
        if source is None:
            raise ValueError(
                "`tokenizer` must name a tokenizer (folder or cached id) for a random-weight "
                "'hf_clip' model built from `model_config` and given captions, got none."
            )
        tok_dir = source if isinstance(source, Path) else resolve_model_dir(source)
        self.tokenizer = AutoTokenizer.from_pretrained(tok_dir, local_files_only=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        n_positions = int(getattr(text_config, "max_position_embeddings", 0) or 0)
        self.max_length = int(self.config["max_length"])
        if n_positions:
            self.max_length = min(self.max_length, n_positions)
        self.pad_to_max_length = self.model_type in _SIGLIP_TYPES
        vocab = int(getattr(text_config, "vocab_size", 0) or 0)
        if vocab and len(self.tokenizer) > vocab:
            raise ValueError(
                f"The tokenizer of 'hf_clip' must fit the text tower's vocabulary of {vocab} "
                f"tokens, got one with {len(self.tokenizer)} tokens ({tok_dir}) instead."
            )
        # CLIP embeds a caption at its first end-of-text token (eos_token_id 2: the
        # highest token id, in configurations saved before that id was recorded).
        eos = getattr(text_config, "eos_token_id", None)
        clip_eos = self.model_type == "clip" and isinstance(eos, int) and eos != 2
        if clip_eos and self.tokenizer.eos_token_id != eos:
            raise ValueError(
                f"The tokenizer's end-of-text token id must be the text tower's eos_token_id "
                f"{eos} (CLIP embeds a caption at that token), got "
                f"{self.tokenizer.eos_token_id!r} ({tok_dir}) instead; use the model's own "
                "tokenizer."
            )

    def _load_image_processor(self, vision_config: Any) -> None:
        self.processor = image_processor(self.folder, self.config["weights"])
        size = getattr(vision_config, "image_size", 224)
        self.image_size = (size, size) if isinstance(size, int) else tuple(size)
        self.patch_size = getattr(vision_config, "patch_size", None)
        siglip = self.model_type in _SIGLIP_TYPES
        self.mean, self.std = (_HALF, _HALF) if siglip else (_CLIP_MEAN, _CLIP_STD)

    def layer_names(self) -> list[str]:
        from neuroflow.features.config import layer_name

        return [layer_name(spec) for spec in self.config["layers"]]

    def _pixels(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        return pixel_values(images, self.processor, self.image_size, self.mean, self.std)

    def _tokens(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(
                list(texts),
                return_tensors="pt",
                padding="max_length" if self.pad_to_max_length else True,
                truncation=True,
                max_length=self.max_length,
                return_attention_mask=True,
            )
        )

    def encode(
        self, inputs: Mapping[str, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        """Projected embeddings and hidden states of the stimulus's tower for one batch.

        Parameters
        ----------
        inputs : dict of str to Tensor
            ``pixel_values``, shape (n_batch, 3, H, W), for the vision tower;
            ``input_ids`` and ``attention_mask``, shape (n_batch, n_tokens), for
            the text tower.

        Returns
        -------
        projected : Tensor, shape (n_batch, n_projection)
            The model's ``get_image_features`` / ``get_text_features``, not normalised.
        hidden : tuple of Tensor, shape (n_batch, n_tokens, n_hidden) | None
            The tower's ``n_blocks + 1`` hidden states (index 0 the embedding
            output); None when no layer other than the projection is requested.
        """
        moved = {
            k: (v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device))
            for k, v in inputs.items()
        }
        want_hidden = any(index is not None for index in self.indices)
        if self.tower == "vision":
            features, tower = self.model.get_image_features, self.model.vision_model
        else:
            features, tower = self.model.get_text_features, self.model.text_model
        with torch.inference_mode():
            out = features(**moved, output_hidden_states=want_hidden)
            if not isinstance(out, torch.Tensor):
                projected, hidden = out.pooler_output, out.hidden_states
            else:  # transformers < 5 returns the projection alone
                projected, hidden = out, None
                if want_hidden:
                    hidden = tower(**moved, output_hidden_states=True).hidden_states
        if want_hidden and (hidden is None or len(hidden) != self.n_blocks + 1):
            n_got = None if hidden is None else len(hidden)
            raise ValueError(
                f"The {self.tower} tower must return {self.n_blocks + 1} hidden states "
                f"(num_hidden_layers {self.n_blocks} + the embedding output), got {n_got} instead."
            )
        return projected, None if hidden is None else tuple(hidden)

    def _rows(
        self,
        inputs: Mapping[str, torch.Tensor],
        *,
        attention_mask: torch.Tensor | None = None,
        n_patches: int | None = None,
    ) -> dict[str, np.ndarray]:
        projected, hidden = self.encode(inputs)
        projected = projected.float()
        if self.config["normalize"]:
            projected = torch.nn.functional.normalize(projected, dim=-1)
        self.projection_dim = int(projected.shape[1])
        out = {}
        for name, index in zip(self.layer_names(), self.indices, strict=True):
            if index is None:
                out[name] = projected.cpu().numpy()
                continue
            assert hidden is not None
            h = hidden[index]
            # Leading tokens before the patches: CLIP's class token, none for SigLIP.
            n_prefix = 1 if n_patches is None else max(h.shape[1] - n_patches, 0)
            pooled = pool(
                h,
                self.config["pooling"],
                attention_mask=attention_mask,
                n_prefix=n_prefix,
            )
            out[name] = pooled.cpu().numpy()
        return out

    def extract_frames(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        if self.tower != "vision":
            raise ValueError(
                f"Extractor 'hf_clip' reads video frames with its vision tower, got modality "
                f"{self.modality!r} instead."
            )
        pixels = self._pixels(frames)
        n_patches = None
        if self.patch_size:
            p = self.patch_size if isinstance(self.patch_size, int) else self.patch_size[0]
            n_patches = (pixels.shape[-2] // p) * (pixels.shape[-1] // p)
        return self._rows({"pixel_values": pixels}, n_patches=n_patches)

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        if self.modality == "video":
            return _video_means(batch, self.config["frames_per_video"], self.extract_frames)
        if self.modality == "image":
            return self.extract_frames(list(batch))
        texts = [item if isinstance(item, str) else str(item[1]) for item in batch]
        enc = self._tokens(texts)
        mask = enc["attention_mask"]
        names = [n for n in self.tokenizer.model_input_names if n in _TEXT_INPUTS]
        inputs = {k: v for k, v in enc.items() if k in names and isinstance(v, torch.Tensor)}
        return self._rows(inputs, attention_mask=mask)

    def describe(self) -> dict[str, Any]:
        layers = {}
        for name, spec, index in zip(
            self.layer_names(), self.config["layers"], self.indices, strict=True
        ):
            projection = index is None
            layers[name] = {
                "name": name,
                "spec": spec,
                "tower": self.tower,
                "index": index,
                "n_blocks": None if projection else self.n_blocks,
                "pooling": "model" if projection else self.config["pooling"],
                "normalize": bool(self.config["normalize"]) if projection else None,
            }
        return {
            "extractor": self.name,
            "model": self.model_id,
            "model_path": None if self.folder is None else str(self.folder),
            "model_type": self.model_type,
            "weights": self.config["weights"],
            "seed": self.config["seed"] if self.config["weights"] == "random" else None,
            "weights_sha256": self.weights_sha256,
            "tower": self.tower,
            "projection_dim": self.projection_dim,
            "normalize": bool(self.config["normalize"]),
            "pooling": self.config["pooling"],
            "device": str(self.device),
            "compute_dtype": str(self.dtype).removeprefix("torch."),
            "layers": layers,
        }

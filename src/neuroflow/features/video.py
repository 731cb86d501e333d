"""Hugging Face video transformers (VideoMAE, V-JEPA 2, X-CLIP's vision tower) on clips.

The model is read from disk only, as for the other Hugging Face extractors (see
:func:`neuroflow.features.hf.resolve_model_dir`): a ``save_pretrained`` folder or
a snapshot in the local Hugging Face cache of a ``VideoMAEModel``, a
``VJEPA2Model`` or an ``XCLIPModel`` (whose vision tower is read).
``weights: random`` builds the architecture from ``model_config`` (e.g.
``{model_type: videomae, hidden_size: 32, num_hidden_layers: 2, ...}``) or from
the folder's ``config.json``, with weights drawn under ``seed``.

Rows: ``frame_rate`` is required. A video gives one row per sampled time ``t``
(ids ``<stim_file>#t=<s>`` with the coordinates of frame-level features, so the
alignment places them like image features of single frames), computed from a
clip of ``clip_frames`` frames evenly spaced over the ``window_s`` seconds
before ``t``, the last one the frame on screen at ``t``; times before the
video's start show its first frame (see :mod:`neuroflow.features.windows`).
``clip_frames: null`` takes the model's own clip length (``num_frames`` of
VideoMAE and X-CLIP, which accept no other; ``frames_per_clip`` of V-JEPA 2,
which takes any multiple of its ``tubelet_size``). Frames are decoded once and
only those of the clips in flight are kept, so memory does not grow with the
video's length; ``batch_size`` clips go through the model at once.

Layers are hidden states, ``{index: i}`` or ``{depth: f}`` (0 is the embedding
output; see :func:`neuroflow.features.layers.resolve_layer`; as for hf_vision,
the last hidden state is the last block's output, before V-JEPA 2's final layer
norm), pooled over tokens with ``pooling``: ``mean`` (all tokens),
``patch_mean`` (without class tokens) or ``cls`` (X-CLIP only: VideoMAE and
V-JEPA 2 have no class token). X-CLIP's tower reads the frames of a clip as a
batch of images that exchange message tokens; its features are pooled per frame
and averaged over the clip's frames.

Frames are transformed as the snapshot's video (or image) processor says
(``video_preprocessor_config.json``, else ``preprocessor_config.json``): resized
(``size``: ``shortest_edge``, keeping the aspect ratio, or ``height`` and
``width``; bilinear or bicubic with antialiasing), centre-cropped
(``crop_size``) and normalised (``image_mean``, ``image_std``), frame by frame
in torch; frames are already in [0, 1], so the processor's rescaling is not
applied. Without a processor file the frames are resized to the configuration's
``image_size`` (``crop_size`` for V-JEPA 2) and normalised with the ImageNet
mean and s.d. (CLIP's for X-CLIP).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.features.hf import _IMAGENET_MEAN, _IMAGENET_STD, _HFExtractor
from neuroflow.features.layers import pool
from neuroflow.features.registry import register_extractor

torch = lazy_loader.load("torch")

__all__ = [
    "PROCESSOR_FILES",
    "FrameTransform",
    "HFVideoExtractor",
    "VideoFamily",
    "frame_transform",
    "resolve_clip_frames",
]

#: Processor files read from a model folder, in order of preference.
PROCESSOR_FILES = ("video_preprocessor_config.json", "preprocessor_config.json")
_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
#: PIL resampling codes of processor files -> torch interpolation modes (others: bilinear).
_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}
_POOLINGS = ("mean", "patch_mean", "cls")


@dataclass(frozen=True)
class VideoFamily:
    """How one video architecture is fed and read.

    Attributes
    ----------
    input_key : str
        Keyword of the pixel tensor in the model's ``forward``.
    frames_key, size_key : str
        Attributes of the (vision) configuration holding the clip length and the
        input side in pixels.
    fixed_frames : bool
        Whether the model accepts only its own clip length.
    per_frame : bool
        Whether frames go through the tower as a batch of images, shape
        (n_clips * n_frames, 3, h, w), rather than as clips, shape
        (n_clips, n_frames, 3, h, w).
    n_prefix : int
        Leading class tokens of each token sequence.
    mean, std : tuple of float
        Pixel normalisation without a processor file.
    """

    input_key: str
    frames_key: str
    size_key: str
    fixed_frames: bool
    per_frame: bool
    n_prefix: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]


#: Supported architectures by ``model_type``.
FAMILIES: dict[str, VideoFamily] = {
    "videomae": VideoFamily(
        "pixel_values", "num_frames", "image_size", True, False, 0, _IMAGENET_MEAN, _IMAGENET_STD
    ),
    "vjepa2": VideoFamily(
        "pixel_values_videos",
        "frames_per_clip",
        "crop_size",
        False,
        False,
        0,
        _IMAGENET_MEAN,
        _IMAGENET_STD,
    ),
    "xclip": VideoFamily(
        "pixel_values", "num_frames", "image_size", True, True, 1, _CLIP_MEAN, _CLIP_STD
    ),
}


@dataclass(frozen=True)
class FrameTransform:
    """Resize, centre crop and normalisation of one video frame (see :func:`frame_transform`).

    Attributes
    ----------
    resize : tuple of int | None
        ``(side,)``: shorter side in px, aspect kept (Hugging Face's
        ``shortest_edge``); ``(height, width)``: exact size; None: no resize.
    crop : tuple of int | None
        ``(height, width)`` of the centre crop; None: no crop.
    mean, std : tuple of float | None
        Per-channel normalisation; None: none.
    resample : str
        ``"bilinear"``, ``"bicubic"`` (both antialiased) or ``"nearest"``.
    source : str | None
        The processor file the settings come from; None for the defaults.
    """

    resize: tuple[int, ...] | None
    crop: tuple[int, int] | None
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    resample: str = "bilinear"
    source: str | None = None

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """Transform one frame.

        Parameters
        ----------
        frame : ndarray, shape (H, W, 3)
            Float RGB in [0, 1].

        Returns
        -------
        pixels : ndarray, shape (3, h, w)
            Float32 model input.
        """
        x = torch.from_numpy(np.ascontiguousarray(frame, dtype=np.float32)).permute(2, 0, 1)[None]
        height, width = int(x.shape[-2]), int(x.shape[-1])
        if self.resize is not None:
            size = _resize_target(height, width, self.resize)
            if size != (height, width):
                smooth = self.resample != "nearest"
                x = torch.nn.functional.interpolate(
                    x,
                    size=size,
                    mode=self.resample,
                    align_corners=False if smooth else None,
                    antialias=smooth,
                )
            height, width = size
        if self.crop is not None:
            ch, cw = self.crop
            if ch > height or cw > width:
                raise ValueError(
                    f"The processor's crop_size must fit in the resized frame, got {[ch, cw]} for "
                    f"a frame of {[height, width]} instead."
                )
            top, left = (height - ch) // 2, (width - cw) // 2
            x = x[..., top : top + ch, left : left + cw]
        if self.mean is not None and self.std is not None:
            mean = torch.tensor(self.mean, dtype=torch.float32).view(1, 3, 1, 1)
            std = torch.tensor(self.std, dtype=torch.float32).view(1, 3, 1, 1)
            x = (x - mean) / std
        return x[0].numpy()

    def describe(self) -> dict[str, Any]:
        """The settings, for provenance."""
        return asdict(self)


def _resize_target(height: int, width: int, resize: tuple[int, ...]) -> tuple[int, int]:
    """Output size of a resize; ``(side,)`` scales the shorter side as Hugging Face does."""
    if len(resize) == 2:
        return int(resize[0]), int(resize[1])
    side = int(resize[0])
    if height <= width:
        return side, int(side * width / height)
    return int(side * height / width), side


def _pair(value: Any, key: str, source: Path) -> tuple[int, ...] | None:
    """``size`` / ``crop_size`` of a processor file as ``(side,)`` or ``(height, width)``."""
    if value is None:
        return None
    if isinstance(value, int):
        return (value,) if key == "size" else (value, value)
    if isinstance(value, Mapping):
        if "shortest_edge" in value:
            return (int(value["shortest_edge"]),)
        if "height" in value and "width" in value:
            return int(value["height"]), int(value["width"])
    raise ValueError(
        f"{source}: `{key}` must be an int, {{shortest_edge: n}} or {{height: h, width: w}}, "
        f"got {value!r} instead."
    )


def frame_transform(
    folder: Path | None,
    image_size: int | Sequence[int],
    mean: Sequence[float],
    std: Sequence[float],
) -> FrameTransform:
    """Frame transform of a model folder's processor file, or the default one.

    Parameters
    ----------
    folder : Path | None
        Model folder; its ``video_preprocessor_config.json`` or
        ``preprocessor_config.json`` (in that order) is read when present.
    image_size : int | sequence of int
        Side (or height and width) the frames are resized to without a processor file.
    mean, std : sequence of float
        Normalisation without a processor file (or when the file names none).

    Returns
    -------
    transform : FrameTransform
        See :class:`FrameTransform`.
    """
    for name in PROCESSOR_FILES:
        path = None if folder is None else folder / name
        if path is not None and path.is_file():
            return _transform_from_file(path, mean, std)
    size = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    return FrameTransform(
        resize=(int(size[0]), int(size[1])), crop=None, mean=tuple(mean), std=tuple(std)
    )


def _transform_from_file(path: Path, mean: Sequence[float], std: Sequence[float]) -> FrameTransform:
    spec = json.loads(path.read_text(encoding="utf-8"))
    resize = _pair(spec.get("size"), "size", path) if spec.get("do_resize", True) else None
    crop_spec = _pair(spec.get("crop_size"), "crop_size", path)
    crop = None
    if spec.get("do_center_crop", crop_spec is not None) and crop_spec is not None:
        crop = (crop_spec[0], crop_spec[-1])
    normalise = spec.get("do_normalize", True)
    return FrameTransform(
        resize=resize,
        crop=crop,
        mean=tuple(spec.get("image_mean") or mean) if normalise else None,
        std=tuple(spec.get("image_std") or std) if normalise else None,
        resample=_resample_mode(spec.get("resample", 2)),
        source=str(path),
    )


def _resample_mode(value: Any) -> str:
    """Torch interpolation mode of a processor file's ``resample`` (PIL code or name)."""
    if isinstance(value, str) and value.lower() in _RESAMPLE.values():
        return value.lower()
    if isinstance(value, int) and not isinstance(value, bool):
        return _RESAMPLE.get(value, "bilinear")
    return "bilinear"


def resolve_clip_frames(
    configured: int | None, model_frames: int, *, fixed: bool, tubelet: int, model_type: str
) -> int:
    """Frames per clip: the entry's ``clip_frames``, or the model's own clip length.

    Parameters
    ----------
    configured : int | None
        ``clip_frames`` of the entry.
    model_frames : int
        The model configuration's clip length.
    fixed : bool
        Whether the model accepts only ``model_frames``.
    tubelet : int
        Frames per tubelet (temporal patch); the clip length must be a multiple.
    model_type : str
        For messages.

    Returns
    -------
    n_frames : int
        Frames per clip.
    """
    if configured is None:
        return int(model_frames)
    if fixed and configured != model_frames:
        raise ValueError(
            f"`clip_frames` must be {model_frames} (or null) for {model_type!r}, whose position "
            f"embeddings cover that many frames, got {configured} instead."
        )
    if configured % max(tubelet, 1):
        raise ValueError(
            f"`clip_frames` must be a multiple of the tubelet size {tubelet} of {model_type!r}, "
            f"got {configured} instead."
        )
    return int(configured)


def _family(hf_config: Any) -> VideoFamily:
    model_type = str(getattr(hf_config, "model_type", ""))
    if model_type not in FAMILIES:
        raise ValueError(
            f"`model` of 'hf_video' must be a video transformer of type {sorted(FAMILIES)}, got "
            f"model_type {model_type!r} instead; use hf_vision with `frame_rate` for image "
            "models on single frames."
        )
    return FAMILIES[model_type]


@register_extractor("hf_video", modalities=("video",))
class HFVideoExtractor(_HFExtractor):
    """Video transformers on clips before each sampled time (see the module docstring)."""

    window_modalities = ("video",)

    @classmethod
    def check_entry(cls, entry: dict[str, Any]) -> None:
        if entry["frame_rate"] is None:
            raise ValueError(
                "`frame_rate` must be a positive number of Hz for 'hf_video' (one row per sampled "
                "time, each from a clip of the `window_s` s before it), got None instead."
            )
        if entry["pooling"] not in _POOLINGS:
            raise ValueError(
                f"`pooling` must be one of {_POOLINGS} for 'hf_video', got {entry['pooling']!r} "
                "instead."
            )

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        type(self).check_entry(self.config)
        self.family = _family(self.hf_config)
        self.model_type = str(self.hf_config.model_type)
        vision = self.hf_config.vision_config if self.family.per_frame else self.hf_config
        self.model_frames = int(getattr(vision, self.family.frames_key))
        self.clip_frames = resolve_clip_frames(
            self.config["clip_frames"],
            self.model_frames,
            fixed=self.family.fixed_frames,
            tubelet=int(getattr(vision, "tubelet_size", 1) or 1),
            model_type=self.model_type,
        )
        if self.config["pooling"] == "cls" and self.family.n_prefix == 0:
            raise ValueError(
                f"`pooling` must be 'mean' or 'patch_mean' for {self.model_type!r}, which has no "
                "class token, got 'cls' instead."
            )
        self.transform = frame_transform(
            self.folder, getattr(vision, self.family.size_key), self.family.mean, self.family.std
        )

    def _submodel(self, model: torch.nn.Module) -> torch.nn.Module:
        if str(self.hf_config.model_type) == "xclip":
            return model.vision_model
        return model

    def window_length(self) -> int:
        return self.clip_frames

    def prepare_frame(self, frame: np.ndarray) -> np.ndarray:
        return self.transform(frame)

    def hidden_states(self, pixels: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Hidden states of a batch of clips.

        Parameters
        ----------
        pixels : Tensor, shape (n_clips, n_frames, 3, h, w)
            Transformed frames (see :meth:`prepare_frame`).

        Returns
        -------
        hidden : tuple of Tensor, shape (n_clips, n_tokens, n_hidden)
            ``n_blocks + 1`` tensors, index 0 the embedding output; for X-CLIP,
            shape (n_clips * n_frames, n_tokens, n_hidden), frame-major per clip.
        """
        if self.family.per_frame:
            pixels = pixels.reshape(-1, *pixels.shape[2:])
        kwargs: dict[str, Any] = {"skip_predictor": True} if self.model_type == "vjepa2" else {}
        with torch.inference_mode():
            out = self.model(
                **{self.family.input_key: pixels.to(self.device, self.dtype)},
                output_hidden_states=True,
                **kwargs,
            )
        return tuple(out.hidden_states)

    def extract_windows(self, windows: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        pixels = torch.from_numpy(np.stack([np.asarray(w, dtype=np.float32) for w in windows]))
        n_clips = pixels.shape[0]
        hidden = self.hidden_states(pixels)
        indices = self._resolve(len(hidden))
        out = {}
        for name, index in zip(self.layer_names(), indices, strict=True):
            pooled = pool(hidden[index], self.config["pooling"], n_prefix=self.family.n_prefix)
            if self.family.per_frame:
                pooled = pooled.reshape(n_clips, -1, pooled.shape[-1]).mean(dim=1)
            out[name] = pooled.cpu().numpy()
        return out

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        raise ValueError(
            "`frame_rate` must be set for 'hf_video': its rows are clips before sampled times."
        )

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info.update(
            {
                "clip_frames": self.clip_frames,
                "model_clip_frames": self.model_frames,
                "window_s": float(self.config["window_s"]),
                "frame_rate": self.config["frame_rate"],
                "window": (
                    "clip_frames frames evenly spaced over [t - window_s, t], the last at t; "
                    "times before the video's start show its first frame"
                ),
                "input_transform": self.transform.describe(),
            }
        )
        return info

"""Stimulus ids, loading and image transforms.

Stimulus ids are the ``stim_file`` strings of BIDS events: paths relative to the
dataset's ``stimuli/`` folder. Loaded stimuli have one type per modality:

- image: ``ndarray, shape (H, W, 3)``, float32 in [0, 1];
- video: :class:`Video` (frames ``(n_frames, H, W, 3)`` float32 in [0, 1] and fps);
- audio: :class:`Audio` (mono float32 waveform and sampling rate);
- text: ``str`` (the caption, possibly preceded by context words).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Audio",
    "Video",
    "apply_transforms",
    "infer_modality",
    "iter_batches",
    "load_audio",
    "load_image",
    "load_video",
    "read_captions",
    "read_stimulus_ids",
    "stimulus_texts",
]

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".npy")
AUDIO_EXTENSIONS = (".wav",)
TEXT_EXTENSIONS = (".txt",)
_MISSING = {"", "n/a", "nan", "none"}


@dataclass(frozen=True)
class Video:
    """Frames of one video stimulus.

    Attributes
    ----------
    frames : ndarray, shape (n_frames, H, W, 3)
        Float32 RGB in [0, 1].
    fps : float
        Frames per second.
    """

    frames: np.ndarray
    fps: float


@dataclass(frozen=True)
class Audio:
    """Waveform of one audio stimulus.

    Attributes
    ----------
    samples : ndarray, shape (n_samples,)
        Mono float32 waveform in [-1, 1].
    sfreq : float
        Sampling rate in Hz.
    """

    samples: np.ndarray
    sfreq: float


def _suffix(stim_id: str) -> str:
    return Path(stim_id).suffix.lower()


def infer_modality(stimulus_ids: Sequence[str]) -> str:
    """Modality of stimuli from their file extensions.

    Parameters
    ----------
    stimulus_ids : sequence of str
        Paths relative to ``stimuli/``.

    Returns
    -------
    modality : str
        ``"image"``, ``"video"``, ``"audio"`` or ``"text"``.
    """
    found = set()
    for stim in stimulus_ids:
        ext = _suffix(stim)
        for modality, exts in (
            ("image", IMAGE_EXTENSIONS),
            ("video", VIDEO_EXTENSIONS),
            ("audio", AUDIO_EXTENSIONS),
            ("text", TEXT_EXTENSIONS),
        ):
            if ext in exts:
                found.add(modality)
                break
        else:
            raise ValueError(
                f"Cannot tell the modality of stimulus {stim!r} from its extension {ext!r}; "
                "set `modality` in the configuration."
            )
    if len(found) != 1:
        raise ValueError(
            f"Stimuli must share one modality, got {sorted(found)} instead; extract each "
            "modality with its own configuration entry."
        )
    return found.pop()


def _clean_ids(values: Sequence[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for value in values:
        text = "" if value is None else str(value).strip()
        if text.lower() in _MISSING:
            continue
        seen.setdefault(text, None)
    return list(seen)


def read_stimulus_ids(
    source: Sequence[str] | str | os.PathLike | Sequence[os.PathLike],
) -> list[str]:
    """Unique stimulus ids, in order of first appearance.

    Parameters
    ----------
    source : list of str | path-like | list of path-like
        Either the ids themselves (a list of ``str``), or one or more TSV files
        (BIDS ``_events.tsv`` or any table) with a ``stim_file`` column, given
        as path objects (a single ``str`` is read as a path too). ``n/a`` and
        empty cells are skipped.

    Returns
    -------
    ids : list of str
        Unique ids.
    """
    if isinstance(source, str | os.PathLike):
        paths = [Path(source)]
    elif isinstance(source, Sequence) and all(isinstance(s, str) for s in source):
        ids = _clean_ids(source)
        if not ids:
            raise ValueError("`stimulus_ids` must name at least one stimulus, got none instead.")
        return ids
    elif isinstance(source, Sequence) and all(isinstance(s, os.PathLike) for s in source):
        paths = [Path(s) for s in source]
    else:
        raise TypeError(
            "`stimulus_ids` must be a list of str or one or more TSV paths, got "
            f"{type(source).__name__} instead."
        )
    values: list[Any] = []
    for path in paths:
        table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        if "stim_file" not in table.columns:
            raise ValueError(
                f"{path}: the table has no `stim_file` column (columns: {list(table.columns)})."
            )
        values.extend(table["stim_file"].tolist())
    ids = _clean_ids(values)
    if not ids:
        raise ValueError(f"No stimulus ids in the `stim_file` column of {[str(p) for p in paths]}.")
    return ids


def read_captions(path: str | os.PathLike) -> dict[str, str]:
    """Read a captions table.

    Parameters
    ----------
    path : path-like
        TSV with columns ``stim_file`` and ``caption``.

    Returns
    -------
    captions : dict of str to str
        Stimulus id to caption.
    """
    path = Path(path)
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    missing = {"stim_file", "caption"} - set(table.columns)
    if missing:
        raise ValueError(
            f"{path}: the captions table lacks column(s) {sorted(missing)} "
            f"(columns: {list(table.columns)})."
        )
    if table["stim_file"].duplicated().any():
        dup = table.loc[table["stim_file"].duplicated(), "stim_file"].iloc[0]
        raise ValueError(f"{path}: `stim_file` {dup!r} has more than one caption.")
    return dict(zip(table["stim_file"], table["caption"], strict=True))


def stimulus_texts(
    stimulus_ids: Sequence[str],
    *,
    stimuli_dir: str | os.PathLike,
    captions: Mapping[str, str] | None,
    context_words: int = 0,
) -> list[tuple[str, str]]:
    """Text of each stimulus and the context that precedes it.

    Parameters
    ----------
    stimulus_ids : sequence of str
        Ids in presentation order (the order defines the context).
    stimuli_dir : path-like
        The ``stimuli/`` folder, read for ``.txt`` stimuli without a caption.
    captions : dict of str to str | None
        Stimulus id to caption.
    context_words : int
        Number of words preceding each stimulus (from the previous stimuli's
        texts, in order) given to the model as context; 0 for none.

    Returns
    -------
    texts : list of (str, str)
        ``(context, text)`` pairs; ``context`` is ``""`` without context.
    """
    captions = dict(captions or {})
    own: list[str] = []
    for stim in stimulus_ids:
        if stim in captions:
            own.append(str(captions[stim]))
        elif _suffix(stim) in TEXT_EXTENSIONS and (Path(stimuli_dir) / stim).is_file():
            own.append((Path(stimuli_dir) / stim).read_text().strip())
        else:
            raise ValueError(
                f"Stimulus {stim!r} has no text: it is not in the captions table "
                "(`stim_file` column) and is not a .txt file under "
                f"{Path(stimuli_dir)}."
            )
    if context_words == 0:
        return [("", text) for text in own]
    out = []
    history: list[str] = []
    for text in own:
        out.append((" ".join(history[-context_words:]), text))
        history.extend(text.split())
    return out


def load_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image as float32 RGB.

    Parameters
    ----------
    path : path-like
        PNG, JPEG or any format Pillow reads.

    Returns
    -------
    image : ndarray, shape (H, W, 3)
        Float32 in [0, 1].
    """
    from PIL import Image

    with Image.open(path) as img:
        rgb = np.asarray(img.convert("RGB"), dtype=np.float32)
    return rgb / 255.0


def load_video(path: str | os.PathLike, *, fps: float = 24.0) -> Video:
    """Read all frames of a video.

    Parameters
    ----------
    path : path-like
        A video file OpenCV reads, or a ``.npy`` frame stack of shape
        ``(n_frames, H, W)`` or ``(n_frames, H, W, 3)`` (uint8, or float in [0, 1]).
    fps : float
        Frame rate of ``.npy`` stacks (video files carry their own).

    Returns
    -------
    video : Video
        Frames and frame rate.
    """
    path = Path(path)
    if path.suffix.lower() == ".npy":
        frames = np.load(path)
        rate = float(fps)
    else:
        import cv2

        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise ValueError(f"{path}: OpenCV cannot open this video file.")
        rate = float(cap.get(cv2.CAP_PROP_FPS) or fps)
        read = []
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            read.append(frame[..., ::-1])
        cap.release()
        if not read:
            raise ValueError(f"{path}: the video has no readable frames.")
        frames = np.stack(read)
    if frames.ndim == 3:
        frames = np.repeat(frames[..., None], 3, axis=-1)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(
            f"{path}: frames must have shape (n_frames, H, W[, 3]), got {frames.shape} instead."
        )
    frames = frames.astype(np.float32)
    if frames.max(initial=0.0) > 1.0:
        frames /= 255.0
    return Video(frames=frames, fps=rate)


def load_audio(path: str | os.PathLike) -> Audio:
    """Read a WAV file as a mono float waveform.

    Parameters
    ----------
    path : path-like
        PCM or float WAV.

    Returns
    -------
    audio : Audio
        Channels averaged; integers scaled to [-1, 1].
    """
    from scipy.io import wavfile

    sfreq, data = wavfile.read(path)
    if np.issubdtype(data.dtype, np.integer):
        data = data.astype(np.float32) / float(np.iinfo(data.dtype).max)
    data = np.asarray(data, dtype=np.float32)
    if data.ndim == 2:
        data = data.mean(axis=1)
    return Audio(samples=data, sfreq=float(sfreq))


def resample_audio(audio: Audio, sfreq: float) -> np.ndarray:
    """Polyphase resampling of a waveform to ``sfreq``.

    Parameters
    ----------
    audio : Audio
        Waveform.
    sfreq : float
        Target rate in Hz.

    Returns
    -------
    samples : ndarray, shape (n_samples_out,)
        Float32 waveform at ``sfreq``.
    """
    from fractions import Fraction

    from scipy.signal import resample_poly

    if audio.sfreq == sfreq:
        return audio.samples
    ratio = Fraction(round(sfreq), round(audio.sfreq)).limit_denominator(1000)
    out = resample_poly(audio.samples, ratio.numerator, ratio.denominator)
    return out.astype(np.float32)


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, Sequence) and len(value) == 2 and all(int(v) > 0 for v in value):
        return int(value[0]), int(value[1])
    raise ValueError(f"`{name}` must be a positive int or [height, width], got {value!r} instead.")


def apply_transforms(image: np.ndarray, transforms: Mapping[str, Any]) -> np.ndarray:
    """Resize, centre-crop and blur one image (or video frame).

    Parameters
    ----------
    image : ndarray, shape (H, W, 3)
        Float RGB in [0, 1].
    transforms : dict
        ``resize`` (int: shorter side in px, keeping the aspect ratio; or
        [height, width]; ``None`` to skip), ``center_crop`` (int or
        [height, width]; ``None`` to skip) and ``blur_sigma`` (Gaussian s.d. in
        px, 0 to skip), applied in that order.

    Returns
    -------
    image : ndarray, shape (H', W', 3)
        Float32.
    """
    out = image
    resize = transforms.get("resize")
    if resize is not None:
        from skimage.transform import resize as sk_resize

        h, w = out.shape[:2]
        if isinstance(resize, int):
            scale = resize / min(h, w)
            size = (max(1, round(h * scale)), max(1, round(w * scale)))
        else:
            size = _pair(resize, "transforms.resize")
        out = sk_resize(
            out, (*size, out.shape[2]), order=1, anti_aliasing=True, preserve_range=True
        )
    crop = transforms.get("center_crop")
    if crop is not None:
        ch, cw = _pair(crop, "transforms.center_crop")
        h, w = out.shape[:2]
        if ch > h or cw > w:
            raise ValueError(
                f"`transforms.center_crop` must fit in the image, got {[ch, cw]} for an image "
                f"of {[h, w]} instead."
            )
        top, left = (h - ch) // 2, (w - cw) // 2
        out = out[top : top + ch, left : left + cw]
    sigma = float(transforms.get("blur_sigma") or 0.0)
    if sigma < 0:
        raise ValueError(f"`transforms.blur_sigma` must be >= 0, got {sigma} instead.")
    if sigma > 0:
        from scipy.ndimage import gaussian_filter

        out = gaussian_filter(out, sigma=(sigma, sigma, 0.0), mode="reflect")
    return np.ascontiguousarray(out, dtype=np.float32)


def load_stimulus(
    stim_id: str,
    *,
    modality: str,
    stimuli_dir: str | os.PathLike,
    transforms: Mapping[str, Any],
    fps: float = 24.0,
) -> Any:
    """Load one non-text stimulus and apply the image transforms.

    Parameters
    ----------
    stim_id : str
        Path relative to ``stimuli_dir``.
    modality : str
        ``"image"``, ``"video"`` or ``"audio"``.
    stimuli_dir : path-like
        The ``stimuli/`` folder.
    transforms : dict
        See :func:`apply_transforms` (images and video frames only).
    fps : float
        Frame rate of ``.npy`` frame stacks.

    Returns
    -------
    stimulus : ndarray | Video | Audio
        See the module docstring.
    """
    path = Path(stimuli_dir) / stim_id
    if not path.is_file():
        raise FileNotFoundError(f"Stimulus file {path} (stim_file {stim_id!r}) does not exist.")
    if modality == "image":
        return apply_transforms(load_image(path), transforms)
    if modality == "video":
        video = load_video(path, fps=fps)
        frames = np.stack([apply_transforms(f, transforms) for f in video.frames])
        return Video(frames=frames, fps=video.fps)
    if modality == "audio":
        return load_audio(path)
    raise ValueError(f"`modality` must be image, video or audio here, got {modality!r} instead.")


def iter_batches(items: Sequence[Any], batch_size: int) -> Iterator[tuple[int, Sequence[Any]]]:
    """Consecutive slices of ``items``.

    Parameters
    ----------
    items : sequence
        Anything sliceable.
    batch_size : int
        Slice length (the last one may be shorter).

    Yields
    ------
    start : int
        Index of the slice's first item.
    batch : sequence
        The slice.
    """
    for start in range(0, len(items), batch_size):
        yield start, items[start : start + batch_size]

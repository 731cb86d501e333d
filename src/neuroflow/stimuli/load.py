"""Loading one stimulus of any non-text modality, and batching.

:func:`load_stimulus` reads an image, a video or a sound (see
:mod:`neuroflow.stimuli`) and applies the image transforms; :func:`iter_batches`
slices a sequence into consecutive batches.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.stimuli.audio import load_audio
from neuroflow.stimuli.files import FileIndex
from neuroflow.stimuli.image import apply_transforms, load_image
from neuroflow.stimuli.video import Video, load_video

__all__ = ["iter_batches", "load_stimulus"]


def load_stimulus(
    stim_id: str,
    *,
    modality: str,
    stimuli_dir: str | os.PathLike,
    transforms: Mapping[str, Any],
    fps: float = 24.0,
    path: str | os.PathLike | None = None,
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
        See :func:`neuroflow.stimuli.image.apply_transforms` (images and video frames
        only).
    fps : float
        Frame rate of ``.npy`` frame stacks.
    path : path-like | None
        The stimulus's file when already found (and checked to lie inside the
        dataset) by :func:`neuroflow.stimuli.files.resolve_stimulus_files`; ``None``:
        ``stimuli_dir / stim_id``, refused when ``stim_id`` leaves ``stimuli_dir`` or
        the file is a link to a file outside the dataset.

    Returns
    -------
    stimulus : ndarray | Video | Audio
        See :mod:`neuroflow.stimuli`.
    """
    if path is None:
        path = FileIndex(stimuli_dir).exact(stim_id) or Path(stimuli_dir) / stim_id
    path = Path(path)
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

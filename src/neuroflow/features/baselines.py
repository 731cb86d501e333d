"""Weight-free baseline extractors.

- ``image_statistics``: low-level image statistics
  (:func:`neuroflow.features.image_statistics.image_statistics`) of images, of
  video frames (``frame_rate`` set) or averaged over ``frames_per_video``
  evenly spaced frames of a clip.
- ``motion_energy``: pymoten's Gabor motion-energy pyramid on videos (mean over
  frames, or the energy at each sampled frame with ``frame_rate`` set), or a
  static Gabor pyramid on still images.
- ``audio_envelope``: summary of the broadband Hilbert envelope.
- ``mel_spectrogram``: time-averaged log-mel power.
- ``word_rate``: number of words of each text stimulus.

Each has one layer, ``"output"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from neuroflow.extras import require
from neuroflow.features.image_statistics import FEATURE_NAMES
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.stimuli.audio import Audio, resample_audio
from neuroflow.stimuli.video import Video, evenly_spaced

__all__ = [
    "AudioEnvelope",
    "ImageStatistics",
    "MelSpectrogram",
    "MotionEnergy",
    "WordRate",
    "audio_envelope",
    "luminance",
    "mel_spectrogram",
]

OUTPUT = "output"


class _Baseline(Extractor):
    """One-layer extractor without weights."""

    default_layers = (OUTPUT,)
    fixed_layers = (OUTPUT,)

    def layer_names(self) -> list[str]:
        return [OUTPUT]

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        rows = self.compute(batch)
        return {OUTPUT: np.asarray(rows, dtype=np.float32).reshape(len(batch), -1)}

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        """Features of a batch, shape (n_batch, n_features)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {
            "extractor": self.name,
            "model": self.name,
            "weights": "none",
            "seed": None,
            "weights_sha256": None,
            "pooling": None,
            "layers": {OUTPUT: {"name": OUTPUT, "spec": OUTPUT, "index": None}},
            "options": self.options(),
        }

    def options(self) -> dict[str, Any]:
        """Settings that shape the output, for provenance."""
        return {}


def _statistics(images: Sequence[np.ndarray]) -> np.ndarray:
    """Image statistics of images of any sizes, shape (n_images, n_features)."""
    from neuroflow.features.image_statistics import image_statistics

    return image_statistics(list(images))


@register_extractor("image_statistics", modalities=("image", "video"))
class ImageStatistics(_Baseline):
    """Low-level image statistics (see :mod:`neuroflow.features.image_statistics`).

    A video gives the mean statistics of ``frames_per_video`` evenly spaced
    frames, or one row per sampled frame with ``frame_rate`` set.
    """

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        if self.modality != "video":
            return _statistics(batch)
        rows = []
        for video in batch:
            assert isinstance(video, Video)
            take = evenly_spaced(video.frames.shape[0], self.config["frames_per_video"])
            rows.append(_statistics(video.frames[take]).mean(axis=0))
        return np.stack(rows)

    def feature_names(self, layer: str, n_features: int) -> list[str] | None:
        return list(FEATURE_NAMES) if n_features == len(FEATURE_NAMES) else None

    def extract_frames(self, frames: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        return {OUTPUT: _statistics(frames).astype(np.float32)}


def luminance(frames: np.ndarray, size: Sequence[int]) -> np.ndarray:
    """CIE L* luminance of RGB frames, resized.

    Parameters
    ----------
    frames : ndarray, shape (n_frames, H, W, 3)
        Float RGB in [0, 1].
    size : (int, int)
        Output (height, width).

    Returns
    -------
    lum : ndarray, shape (n_frames, height, width)
        L* / 100, in [0, 1].
    """
    from skimage.transform import resize

    rgb2lab = require("moten", "Motion-energy features").colorspace.rgb2lab

    out = np.empty((frames.shape[0], int(size[0]), int(size[1])), dtype=np.float32)
    for i, frame in enumerate(frames):
        lab = rgb2lab(np.array(frame, dtype=np.float64))
        out[i] = resize(lab[..., 0] / 100.0, out.shape[1:], order=1, anti_aliasing=True)
    return out


@register_extractor("motion_energy", modalities=("video", "image"))
class MotionEnergy(_Baseline):
    """Gabor motion-energy (videos) or static Gabor (images) pyramid via pymoten.

    Frames are converted to CIE L* luminance and resized to ``gabor.size``.
    Videos use a :class:`moten.pyramids.MotionEnergyPyramid` at the video's
    frame rate (rounded to an int) with ``gabor.temporal_frequencies`` and
    ``gabor.directions``; per-frame energies are averaged over frames, or, with
    ``frame_rate`` set, kept at the sampled frames (``extract_clip``: the
    pyramid's projection of the whole clip, read at those frames). Images
    use the static pyramid (temporal frequency 0, one-frame filters, the
    directions folded to orientations in [0, 180)).
    """

    needs_all_frames = True

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        self.gabor = dict(self.config["gabor"])
        self._pyramids: dict[int, Any] = {}

    def _pyramid(self, fps: int) -> Any:
        require("moten", "Motion-energy features")
        from moten.pyramids import MotionEnergyPyramid

        if fps not in self._pyramids:
            size = tuple(int(s) for s in self.gabor["size"])
            if self.modality == "image":
                orientations = sorted({float(d) % 180 for d in self.gabor["directions"]})
                self._pyramids[fps] = MotionEnergyPyramid(
                    stimulus_vhsize=size,
                    stimulus_fps=1,
                    temporal_frequencies=[0],
                    spatial_frequencies=list(self.gabor["spatial_frequencies"]),
                    spatial_directions=orientations,
                    filter_temporal_width=1,
                    max_temp_env=float("inf"),
                )
            else:
                self._pyramids[fps] = MotionEnergyPyramid(
                    stimulus_vhsize=size,
                    stimulus_fps=fps,
                    temporal_frequencies=list(self.gabor["temporal_frequencies"]),
                    spatial_frequencies=list(self.gabor["spatial_frequencies"]),
                    spatial_directions=list(self.gabor["directions"]),
                )
        return self._pyramids[fps]

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        size = self.gabor["size"]
        if self.modality == "image":
            lum = np.concatenate([luminance(np.asarray(im)[None], size) for im in batch])
            return self._pyramid(1).project_stimulus(lum)
        rows = []
        for video in batch:
            assert isinstance(video, Video)
            fps = max(1, round(video.fps))
            energy = self._pyramid(fps).project_stimulus(luminance(video.frames, size))
            rows.append(energy.mean(axis=0))
        return np.stack(rows)

    def extract_clip(
        self, frames: Iterable[np.ndarray], *, fps: float, indices: np.ndarray
    ) -> dict[str, np.ndarray]:
        size = self.gabor["size"]
        lum = np.stack([luminance(frame[None], size)[0] for frame in frames])
        energy = self._pyramid(max(1, round(fps))).project_stimulus(lum)
        return {OUTPUT: np.asarray(energy[np.asarray(indices, dtype=int)], dtype=np.float32)}

    def feature_names(self, layer: str, n_features: int) -> list[str] | None:
        """One name per pyramid channel: spatial and temporal frequency, direction,
        spatial envelope and centre (fractions of the frame height and width)."""
        if not self._pyramids:
            return None
        filters = next(iter(self._pyramids.values())).filters
        names = [
            f"sf{f['spatial_freq']:g}_tf{f['temporal_freq']:g}_dir{f['direction']:g}"
            f"_env{f['spatial_env']:g}_v{f['centerv']:.3f}_h{f['centerh']:.3f}"
            for f in filters
        ]
        return names if len(names) == n_features else None

    def options(self) -> dict[str, Any]:
        return {"gabor": self.gabor}


def audio_envelope(samples: np.ndarray) -> np.ndarray:
    """Summary of a waveform's broadband amplitude envelope.

    Parameters
    ----------
    samples : ndarray, shape (n_samples,)
        Waveform.

    Returns
    -------
    features : ndarray, shape (4,)
        Mean, s.d. and 95th percentile of the Hilbert envelope, and the RMS of
        the waveform.
    """
    from scipy.signal import hilbert

    env = np.abs(hilbert(samples.astype(np.float64)))
    rms = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2)))
    return np.array([env.mean(), env.std(), np.percentile(env, 95), rms], dtype=np.float32)


def mel_spectrogram(
    samples: np.ndarray, sfreq: float, *, n_mels: int, window_s: float, hop_s: float
) -> np.ndarray:
    """Log-mel power spectrogram (Slaney mel scale and normalisation).

    Parameters
    ----------
    samples : ndarray, shape (n_samples,)
        Waveform.
    sfreq : float
        Sampling rate in Hz.
    n_mels : int
        Number of mel bands (0 Hz to Nyquist).
    window_s, hop_s : float
        Hann window length and hop in seconds.

    Returns
    -------
    log_mel : ndarray, shape (n_frames, n_mels)
        ``log10`` of the mel power (floored at 1e-10).
    """
    from scipy.signal import stft
    from transformers.audio_utils import mel_filter_bank

    nperseg = max(round(window_s * sfreq), 8)
    hop = max(round(hop_s * sfreq), 1)
    if samples.shape[0] < nperseg:
        samples = np.pad(samples, (0, nperseg - samples.shape[0]))
    _, _, spec = stft(
        samples, fs=sfreq, window="hann", nperseg=nperseg, noverlap=nperseg - hop, boundary=None
    )
    power = np.abs(spec) ** 2
    bank = mel_filter_bank(
        num_frequency_bins=power.shape[0],
        num_mel_filters=n_mels,
        min_frequency=0.0,
        max_frequency=sfreq / 2,
        sampling_rate=int(sfreq),
        norm="slaney",
        mel_scale="slaney",
    )
    return np.log10(np.maximum(bank.T @ power, 1e-10)).T.astype(np.float32)


@register_extractor("audio_envelope", modalities=("audio",))
class AudioEnvelope(_Baseline):
    """Broadband envelope summary of each audio stimulus (see :func:`audio_envelope`)."""

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        sfreq = float(self.config["audio"]["sampling_rate"])
        return np.stack([audio_envelope(resample_audio(a, sfreq)) for a in batch])

    def feature_names(self, layer: str, n_features: int) -> list[str] | None:
        names = ["envelope_mean", "envelope_std", "envelope_p95", "rms"]
        return names if n_features == len(names) else None

    def options(self) -> dict[str, Any]:
        return {"sampling_rate": self.config["audio"]["sampling_rate"]}


@register_extractor("mel_spectrogram", modalities=("audio",))
class MelSpectrogram(_Baseline):
    """Time-averaged log-mel power of each audio stimulus (see :func:`mel_spectrogram`)."""

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        opts = self.config["audio"]
        sfreq = float(opts["sampling_rate"])
        rows = []
        for audio in batch:
            assert isinstance(audio, Audio)
            mel = mel_spectrogram(
                resample_audio(audio, sfreq),
                sfreq,
                n_mels=int(opts["n_mels"]),
                window_s=float(opts["window_s"]),
                hop_s=float(opts["hop_s"]),
            )
            rows.append(mel.mean(axis=0))
        return np.stack(rows)

    def options(self) -> dict[str, Any]:
        return dict(self.config["audio"])


@register_extractor("word_rate", modalities=("text",))
class WordRate(_Baseline):
    """Number of words of each text stimulus (context words excluded).

    Aligned with ``aggregation: sum``, one-word stimuli give words per TR.
    """

    def compute(self, batch: Sequence[Any]) -> np.ndarray:
        return np.array([[len(text.split())] for _, text in batch], dtype=np.float32)

    def feature_names(self, layer: str, n_features: int) -> list[str] | None:
        return ["word_count"] if n_features == 1 else None

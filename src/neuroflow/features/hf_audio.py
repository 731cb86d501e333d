"""Hugging Face speech models as an extractor (``hf_audio``): wav2vec 2.0, HuBERT,
WavLM, Whisper's encoder, Wav2Vec-BERT, read from a local folder or the offline cache
like the other Hugging Face extractors (:mod:`neuroflow.features.hf`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lazy_loader
import numpy as np

from neuroflow.features.hf import _HFExtractor
from neuroflow.features.layers import pool
from neuroflow.features.registry import register_extractor
from neuroflow.features.whisper_weights import PRESETS as WHISPER_PRESETS
from neuroflow.stimuli.audio import Audio, resample_audio

torch = lazy_loader.load("torch")

__all__ = ["HFAudioExtractor", "audio_feature_extractor", "fit_length"]


#: Audio model types whose feature extractor pads every input to a fixed length
#: (Whisper: 30 s); only the frames of real sound are pooled.
_FIXED_LENGTH_AUDIO = ("whisper",)


def fit_length(samples: np.ndarray, n_samples: int) -> np.ndarray:
    """The last ``n_samples`` samples of a waveform, zero-padded at the start when shorter.

    Parameters
    ----------
    samples : ndarray, shape (n,)
        Waveform.
    n_samples : int
        Length wanted.

    Returns
    -------
    fitted : ndarray, shape (n_samples,)
        Float32.
    """
    samples = np.asarray(samples, dtype=np.float32)[-n_samples:]
    if samples.size == n_samples:
        return samples
    return np.concatenate([np.zeros(n_samples - samples.size, np.float32), samples])


def audio_feature_extractor(folder: Path | None, hf_config: Any) -> Any:
    """The model folder's feature extractor, or the one its architecture was trained with.

    Parameters
    ----------
    folder : Path | None
        Model folder; its ``preprocessor_config.json`` is read when present.
    hf_config : transformers.PretrainedConfig
        The model's configuration.

    Returns
    -------
    feature_extractor : transformers.FeatureExtractionMixin
        From the folder; else Whisper's log-mel front end (``num_mel_bins`` bins,
        padded to the encoder's ``2 * max_source_positions`` frames), Wav2Vec-BERT's
        filter banks (SeamlessM4T), or wav2vec 2.0's normalised waveform at 16 kHz
        (with an attention mask for layer-normalised front ends).
    """
    from transformers import (
        AutoFeatureExtractor,
        SeamlessM4TFeatureExtractor,
        Wav2Vec2FeatureExtractor,
        WhisperFeatureExtractor,
    )

    if folder is not None and (folder / "preprocessor_config.json").is_file():
        return AutoFeatureExtractor.from_pretrained(folder, local_files_only=True)
    model_type = getattr(hf_config, "model_type", "")
    if model_type == "whisper":
        fe = WhisperFeatureExtractor(feature_size=int(hf_config.num_mel_bins))
        n_frames = 2 * int(hf_config.max_source_positions)
        fe.n_samples = n_frames * fe.hop_length
        fe.nb_max_frames = n_frames
        fe.chunk_length = fe.n_samples / fe.sampling_rate
        return fe
    if model_type == "wav2vec2-bert":
        return SeamlessM4TFeatureExtractor()
    layer_norm = getattr(hf_config, "feat_extract_norm", "layer") == "layer"
    return Wav2Vec2FeatureExtractor(
        sampling_rate=16000, do_normalize=True, return_attention_mask=layer_norm
    )


@register_extractor("hf_audio", modalities=("audio",))
class HFAudioExtractor(_HFExtractor):
    """Speech models (wav2vec 2.0, HuBERT, WavLM, Whisper's encoder, Wav2Vec-BERT).

    Waveforms are resampled to the feature extractor's sampling rate (16 kHz
    for random-weight models without one) and padded per batch; padded frames
    are left out of the pooling (mean over frames, or the last frame). Models
    whose convolutional front end uses group normalisation
    (``feat_extract_norm: group``, e.g. wav2vec2-base) take no attention mask,
    so padding slightly changes their features: use ``batch_size: 1`` when that
    matters. Whisper is read through its encoder alone: its log-mel input is
    padded to the encoder's context (30 s), only the encoder frames of real
    sound are pooled, and a stimulus (or window) must fit in the context.

    With ``frame_rate`` set, a sound gives one row per sampled time ``t`` (ids
    ``<stim_file>#t=<s>`` and the coordinates of frame-level video features),
    computed from the ``window_s`` seconds of sound before ``t``, zero-padded
    before the sound's start (see :mod:`neuroflow.features.windows`); every
    window has the same length, so batches need no padding. A video
    ``stim_file`` read with ``modality: audio`` is heard from the WAV file of
    the same name next to it (``movie.mp4``: ``movie.wav``), so its soundtrack
    rows share the video's ids.
    """

    window_modalities = ("audio",)

    @classmethod
    def check_entry(cls, entry: dict[str, Any]) -> None:
        preset = WHISPER_PRESETS.get(str(entry["model"]))
        if preset is not None and entry["layers"] is None:  # every encoder block
            entry["layers"] = [dict(spec) for spec in preset["layers"]]

    def __init__(self, config: Mapping[str, Any], modality: str) -> None:
        super().__init__(config, modality)
        if self.config["pooling"] not in ("mean", "last"):
            raise ValueError(
                f"`pooling` must be 'mean' or 'last' for audio models, got "
                f"{self.config['pooling']!r} instead."
            )
        self.feature_extractor = audio_feature_extractor(self.folder, self.hf_config)
        self.sampling_rate = int(self.feature_extractor.sampling_rate)
        self.fixed_length = str(self.hf_config.model_type) in _FIXED_LENGTH_AUDIO
        self.context_s: float | None = None
        if self.fixed_length:
            self.context_s = float(self.feature_extractor.n_samples) / self.sampling_rate
            n_frames = 2 * int(self.hf_config.max_source_positions)
            if int(self.feature_extractor.nb_max_frames) != n_frames:
                raise ValueError(
                    f"The feature extractor of {self.model_id!r} must pad to the encoder's "
                    f"{n_frames} input frames, got {self.feature_extractor.nb_max_frames} instead."
                )
        self.window_samples: int | None = None
        if self.config["frame_rate"] is not None:
            window = float(self.config["window_s"])
            if self.context_s is not None and window > self.context_s + 1e-9:
                raise ValueError(
                    f"`window_s` must be at most {self.context_s:g} s (the context of "
                    f"{self.hf_config.model_type!r}), got {window:g} instead."
                )
            self.window_samples = max(1, round(window * self.sampling_rate))

    def _submodel(self, model: torch.nn.Module) -> torch.nn.Module:
        if getattr(self.hf_config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
            return model.get_encoder()  # Whisper: the encoder reads the sound
        return model

    def encode(self, waves: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        """Pooled features of waveforms at the model's sampling rate.

        Parameters
        ----------
        waves : list of ndarray, shape (n_samples,)
            Float32 waveforms at ``sampling_rate`` (lengths may differ).

        Returns
        -------
        features : dict of str to ndarray, shape (n_waves, n_features)
            One array per layer name.
        """
        if self.context_s is not None:
            longest = max(len(w) for w in waves) / self.sampling_rate
            if longest > self.context_s + 1e-9:
                raise ValueError(
                    f"Audio stimuli must be at most {self.context_s:g} s long for "
                    f"{self.hf_config.model_type!r} (its context), got one of {longest:.3f} s "
                    "instead; set `frame_rate` to read windows of `window_s` s."
                )
        enc = self.feature_extractor(
            list(waves),
            sampling_rate=self.sampling_rate,
            return_tensors="pt",
            padding="max_length" if self.fixed_length else True,
            return_attention_mask=True,
        )
        keys = ("input_values", "input_features")
        if getattr(self.feature_extractor, "return_attention_mask", False) and not (
            self.fixed_length
        ):
            keys = (*keys, "attention_mask")
        inputs = {k: v for k, v in enc.items() if k in keys}
        hidden = self._forward(inputs)
        indices = self._resolve(len(hidden))
        frame_mask = None
        lengths_fn = getattr(self.model, "_get_feat_extract_output_lengths", None)
        if lengths_fn is not None and "attention_mask" in enc:
            n_frames = hidden[0].shape[1]
            lengths = lengths_fn(enc["attention_mask"].sum(-1))
            frame_mask = torch.arange(n_frames)[None, :] < lengths[:, None]
        out = {}
        for name, index in zip(self.layer_names(), indices, strict=True):
            pooled = pool(hidden[index], self.config["pooling"], attention_mask=frame_mask)
            out[name] = pooled.cpu().numpy()
        return out

    def extract(self, batch: Sequence[Any]) -> dict[str, np.ndarray]:
        waves = []
        for audio in batch:
            assert isinstance(audio, Audio)
            waves.append(resample_audio(audio, self.sampling_rate))
        return self.encode(waves)

    def extract_windows(self, windows: Sequence[Any]) -> dict[str, np.ndarray]:
        if self.window_samples is None:
            raise ValueError("`frame_rate` must be set for windows of sound, got None instead.")
        waves = []
        for audio in windows:
            assert isinstance(audio, Audio)
            waves.append(fit_length(resample_audio(audio, self.sampling_rate), self.window_samples))
        return self.encode(waves)

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["sampling_rate"] = self.sampling_rate
        info["fixed_input_s"] = self.context_s
        if self.window_samples is not None:
            info.update(
                {
                    "window_s": float(self.config["window_s"]),
                    "window_samples": self.window_samples,
                    "frame_rate": self.config["frame_rate"],
                    "window": (
                        "the window_s s of sound before each row's time t, [t - window_s, t]; "
                        "zeros before the sound's start"
                    ),
                }
            )
        return info

"""Windowed hf_audio rows (``frame_rate`` on sounds) on tiny speech models saved offline.

wav2vec 2.0, HuBERT, Whisper's encoder and Wav2Vec-BERT are built from their
``transformers`` configurations with seeded random weights and saved with
``save_pretrained``; each row is compared with the model applied here by hand to the
window of sound the row should read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from features_helpers import TINY_WAV2VEC2
from scipy.io import wavfile
from scipy.signal import resample_poly

from neuroflow.artifacts import open_dataset
from neuroflow.features.config import fill_entry
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import hash_weight_files
from neuroflow.features.windows import audio_window_bounds
from neuroflow.stimuli.audio import audio_info, iter_audio_segments

SFREQ = 16000
TINY_HUBERT = {
    "model_type": "hubert",
    "hidden_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 30,
    "conv_dim": [8, 8],
    "conv_kernel": [10, 3],
    "conv_stride": [5, 2],
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2,
    "feat_extract_norm": "group",
}
#: A 1 s context: 100 log-mel frames of 20 bins, 50 encoder frames.
TINY_WHISPER = {
    "model_type": "whisper",
    "d_model": 16,
    "encoder_layers": 2,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 24,
    "decoder_ffn_dim": 24,
    "num_mel_bins": 20,
    "max_source_positions": 50,
    "max_target_positions": 16,
    "vocab_size": 100,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}
TINY_W2V_BERT = {
    "model_type": "wav2vec2-bert",
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 24,
    "output_hidden_size": 16,
    "conv_depthwise_kernel_size": 3,
    "position_embeddings_type": "relative_key",
    "left_max_position_embeddings": 8,
    "right_max_position_embeddings": 4,
}


def _save_model(folder: Path, spec: dict, seed: int = 0) -> torch.nn.Module:
    """Build a model from its configuration with seeded weights and save it in ``folder``."""
    from transformers import AutoConfig, AutoModel

    spec = dict(spec)
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config).eval()
    model.save_pretrained(folder)
    return model


@pytest.fixture
def sounds(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, dict[str, np.ndarray]]:
    """Two 16 kHz sounds of uneven lengths (2.3 s int16, 1.1 s float32)."""
    folder = tmp_path / "stimuli"
    folder.mkdir()
    long = (0.3 * rng.standard_normal(int(2.3 * SFREQ))).astype(np.float32)
    short = (0.2 * rng.standard_normal(int(1.1 * SFREQ) + 7)).astype(np.float32)
    wavfile.write(folder / "long.wav", SFREQ, (long * 32767).astype(np.int16))
    wavfile.write(folder / "short.wav", SFREQ, short)
    return folder, {"long.wav": (long * 32767).astype(np.int16) / 32767.0, "short.wav": short}


def _extract(folder: Path, out: Path, ids: list[str], **config) -> dict[str, Path]:
    return extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=out,
        config={"name": "sound", "extractor": "hf_audio", **config},
        provenance={"stage": "extract_features"},
    )


def _window(samples: np.ndarray, t: float, window_s: float, sfreq: int = SFREQ) -> np.ndarray:
    """The samples a row at time ``t`` reads, by hand: zeros before the sound's start."""
    length = round(window_s * sfreq)
    stop = round(t * sfreq)
    padded = np.concatenate([np.zeros(length, np.float32), np.asarray(samples, np.float32)])
    return padded[stop : stop + length]


def _hidden(model: torch.nn.Module, inputs: dict) -> tuple:
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True).hidden_states


def test_window_bounds_and_zero_padded_segments(sounds):
    folder, samples = sounds
    starts, stops = audio_window_bounds(
        np.array([0.0, 0.25, 2.0]), window_s=0.5, sfreq=SFREQ, n_samples=36800
    )
    np.testing.assert_array_equal(stops, [0, 4000, 32000])
    np.testing.assert_array_equal(stops - starts, [8000] * 3)
    assert audio_info(folder / "long.wav") == (36800, 16000.0)
    got = list(iter_audio_segments(folder / "long.wav", starts, stops))
    for segment, t in zip(got, [0.0, 0.25, 2.0], strict=True):
        np.testing.assert_allclose(segment.samples, _window(samples["long.wav"], t, 0.5), atol=1e-7)
    assert not got[0].samples.any()  # the window at t = 0 is all silence
    stereo = np.stack([samples["long.wav"], -0.5 * samples["long.wav"]], axis=1)
    wavfile.write(folder / "stereo.wav", SFREQ, stereo.astype(np.float32))
    (segment,) = iter_audio_segments(folder / "stereo.wav", np.array([-5]), np.array([20]))
    expected = np.concatenate([np.zeros(5), 0.25 * samples["long.wav"][:20]])
    np.testing.assert_allclose(segment.samples, expected, atol=1e-7)


def test_wav2vec2_rows_are_the_model_on_the_preceding_window(sounds, tmp_path):
    from transformers import Wav2Vec2FeatureExtractor

    folder, samples = sounds
    folder_model = tmp_path / "w2v"
    model = _save_model(folder_model, TINY_WAV2VEC2)
    out = _extract(
        folder,
        tmp_path / "f",
        ["long.wav", "short.wav"],
        model=str(folder_model),
        frame_rate=2.0,
        window_s=0.75,
        layers=[{"index": 0}, {"depth": 1.0}],
        batch_size=3,
    )
    ds = open_dataset(out["depth-1"])
    times = [0.0, 0.5, 1.0, 1.5, 2.0, 0.0, 0.5, 1.0]  # ceil(4.6) + ceil(2.2) rows
    np.testing.assert_allclose(ds["frame_time"].values, times)
    np.testing.assert_allclose(ds["frame_duration"].values[[4, 7]], [0.3, 1.1004375 - 1.0])
    assert list(ds["source_stimulus"].values) == ["long.wav"] * 5 + ["short.wav"] * 3
    assert str(ds["stimulus"].values[1]) == "long.wav#t=0.500"
    assert ds.attrs["row_unit"] == "frame" and ds.attrs["modality"] == "audio"
    assert ds.attrs["window_s"] == 0.75 and ds.attrs["clip_frames"] is None
    assert ds.attrs["weights_sha256"] == hash_weight_files(folder_model)
    describe = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
    assert describe["window_samples"] == 12000 and describe["sampling_rate"] == SFREQ
    layer0 = open_dataset(out["layer-0"])["features"].values
    fe = Wav2Vec2FeatureExtractor(sampling_rate=SFREQ, do_normalize=True)
    for row, (stim, t) in enumerate(zip(ds["source_stimulus"].values, times, strict=True)):
        window = _window(samples[str(stim)], t, 0.75)
        inputs = fe(window, sampling_rate=SFREQ, return_tensors="pt")
        hidden = _hidden(model, {"input_values": inputs["input_values"]})
        expected = hidden[-1].mean(dim=1)[0].numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)
        expected0 = hidden[0].mean(dim=1)[0].numpy()
        np.testing.assert_allclose(layer0[row], expected0, rtol=1e-5, atol=1e-5)


def test_hubert_windows_of_a_resampled_soundtrack(tmp_path, rng):
    from transformers import Wav2Vec2FeatureExtractor

    folder = tmp_path / "stimuli"
    folder.mkdir()
    samples = (0.3 * rng.standard_normal(int(1.7 * 8000))).astype(np.float32)
    wavfile.write(folder / "clip.wav", 8000, samples)
    model = _save_model(tmp_path / "hubert", TINY_HUBERT, seed=4)
    out = _extract(
        folder,
        tmp_path / "f",
        ["clip.wav"],
        model=str(tmp_path / "hubert"),
        frame_rate=4.0,
        window_s=0.4,
        pooling="last",
        layers=[{"index": 1}],
        batch_size=5,
    )
    ds = open_dataset(out["layer-1"])
    assert ds.sizes["stimulus"] == 7  # 1.7 s at 4 Hz
    fe = Wav2Vec2FeatureExtractor(sampling_rate=SFREQ, do_normalize=True)
    for row, t in enumerate(ds["frame_time"].values):
        window = resample_poly(_window(samples, t, 0.4, 8000), 2, 1).astype(np.float32)
        inputs = fe(window, sampling_rate=SFREQ, return_tensors="pt")
        expected = _hidden(model, {"input_values": inputs["input_values"]})[1][0, -1].numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)


def test_whisper_encoder_pools_only_the_frames_of_the_window(sounds, tmp_path):
    from transformers import WhisperFeatureExtractor

    folder, samples = sounds
    folder_model = tmp_path / "whisper"
    model = _save_model(folder_model, TINY_WHISPER, seed=1)
    fe = WhisperFeatureExtractor(feature_size=20, chunk_length=1)
    fe.save_pretrained(folder_model)
    out = _extract(
        folder,
        tmp_path / "f",
        ["short.wav"],
        model=str(folder_model),
        frame_rate=2.0,
        window_s=0.45,
        layers=[{"depth": 0.5}, {"index": -1}],
    )
    ds = open_dataset(out["layer-minus1"])
    assert ds.sizes["stimulus"] == 3 and ds.sizes["feature"] == 16
    mid = open_dataset(out["depth-0.5"])["features"].values
    encoder = model.get_encoder()
    n_valid = (int(np.ceil(0.45 * SFREQ / 160)) - 1) // 2 + 1  # 45 mel frames -> 23 of 50
    for row, t in enumerate(ds["frame_time"].values):
        window = _window(samples["short.wav"], t, 0.45)
        features = fe(window, sampling_rate=SFREQ, return_tensors="pt")["input_features"]
        assert features.shape[-1] == 100  # padded to the 1 s context
        hidden = _hidden(encoder, {"input_features": features})
        expected = hidden[-1][0, :n_valid].mean(dim=0).numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)
        assert not np.allclose(ds["features"].values[row], hidden[-1][0].mean(dim=0).numpy())
        expected_mid = hidden[1][0, :n_valid].mean(dim=0).numpy()
        np.testing.assert_allclose(mid[row], expected_mid, rtol=1e-5, atol=1e-5)
    # without a feature extractor file, Whisper's front end is padded to the encoder's context
    random = _extract(
        folder,
        tmp_path / "r",
        ["short.wav"],
        weights="random",
        model_config=TINY_WHISPER,
        seed=1,
        frame_rate=2.0,
        window_s=0.45,
        layers=[{"index": -1}],
    )
    np.testing.assert_allclose(
        open_dataset(random["layer-minus1"])["features"].values, ds["features"].values, atol=1e-6
    )
    with pytest.raises(ValueError, match=r"`window_s` must be at most 1 s .*'whisper'.*got 1.5"):
        _extract(
            folder,
            tmp_path / "g",
            ["short.wav"],
            model=str(folder_model),
            frame_rate=2.0,
            window_s=1.5,
        )
    with pytest.raises(ValueError, match=r"at most 1 s long for 'whisper'.*set `frame_rate`"):
        _extract(folder, tmp_path / "h", ["long.wav"], model=str(folder_model))


def test_wav2vec_bert_windows(sounds, tmp_path):
    from transformers import SeamlessM4TFeatureExtractor

    folder, samples = sounds
    out = _extract(
        folder,
        tmp_path / "f",
        ["short.wav"],
        weights="random",
        model_config=TINY_W2V_BERT,
        seed=5,
        frame_rate=1.5,
        window_s=0.6,
        layers=[{"index": 2}],
    )
    ds = open_dataset(out["layer-2"])
    assert ds.sizes["stimulus"] == 2
    from transformers import AutoConfig, AutoModel

    spec = dict(TINY_W2V_BERT)
    torch.manual_seed(5)
    model = AutoModel.from_config(AutoConfig.for_model(spec.pop("model_type"), **spec)).eval()
    fe = SeamlessM4TFeatureExtractor()
    for row, t in enumerate(ds["frame_time"].values):
        window = _window(samples["short.wav"], t, 0.6)
        inputs = fe(window, sampling_rate=SFREQ, return_tensors="pt", return_attention_mask=True)
        expected = _hidden(model, dict(inputs))[2].mean(dim=1)[0].numpy()
        np.testing.assert_allclose(ds["features"].values[row], expected, rtol=1e-5, atol=1e-5)


def test_a_video_is_heard_from_its_soundtrack_file(sounds, tmp_path, rng):
    folder, _ = sounds
    np.save(folder / "movie.npy", (rng.random((12, 6, 8, 3)) * 255).astype(np.uint8))
    config = {"weights": "random", "model_config": TINY_WAV2VEC2, "frame_rate": 2.0}
    with pytest.raises(FileNotFoundError, match=r"movie\.npy.*has no soundtrack file .*movie\.wav"):
        _extract(folder, tmp_path / "a", ["movie.npy"], modality="audio", **config)
    (folder / "movie.wav").write_bytes((folder / "long.wav").read_bytes())
    movie = open_dataset(
        _extract(folder, tmp_path / "m", ["movie.npy"], modality="audio", **config)["depth-1"]
    )
    sound = open_dataset(_extract(folder, tmp_path / "s", ["long.wav"], **config)["depth-1"])
    assert str(movie["stimulus"].values[2]) == "movie.npy#t=1.000"
    assert list(movie["source_stimulus"].values) == ["movie.npy"] * 5
    np.testing.assert_array_equal(movie["features"].values, sound["features"].values)


def test_windowed_audio_errors(sounds, tmp_path):
    folder, _ = sounds
    base = {"extractor": "hf_audio", "weights": "random", "model_config": TINY_WAV2VEC2}
    with pytest.raises(ValueError, match=r"`window_s` must be a positive number of seconds, got 0"):
        fill_entry({**base, "frame_rate": 2, "window_s": 0})
    with pytest.raises(ValueError, match=r"`window_s` must be a positive number of seconds"):
        fill_entry({**base, "frame_rate": 2, "window_s": "2 s"})
    assert fill_entry({**base, "frame_rate": 2, "modality": "audio"})["modality"] == "audio"
    with pytest.raises(ValueError, match="`frame_rate` applies to video stimuli"):
        fill_entry({"extractor": "mel_spectrogram", "modality": "audio", "frame_rate": 2})
    with pytest.raises(ValueError, match="'mel_spectrogram' has no windowed audio features"):
        _extract(folder, tmp_path / "a", ["long.wav"], extractor="mel_spectrogram", frame_rate=2)
    with pytest.raises(ValueError, match="`pooling` must be 'mean' or 'last' for audio models"):
        _extract(folder, tmp_path / "b", ["long.wav"], **base, frame_rate=2, pooling="cls")

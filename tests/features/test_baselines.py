"""Weight-free baselines: Gabor / motion energy, audio, word rate, image statistics."""

from __future__ import annotations

import numpy as np
import pytest
from features_helpers import write_wavs

from neuroflow.artifacts import open_dataset
from neuroflow.features.baselines import audio_envelope, mel_spectrogram
from neuroflow.features.extract import extract_features

GABOR = {
    "size": [24, 32],
    "spatial_frequencies": [0, 2, 4],
    "directions": [0, 90, 180, 270],
    "temporal_frequencies": [0, 4],
    "fps": 12,
}


def _drifting_grating(n_frames: int, direction: int, h: int = 24, w: int = 32) -> np.ndarray:
    _y, x = np.mgrid[0:h, 0:w]
    t = np.arange(n_frames)[:, None, None]
    phase = 2 * np.pi * (3 * x[None] / w - direction * t / 6)
    lum = 0.5 + 0.4 * np.sin(phase)
    return np.repeat(lum[..., None], 3, axis=-1).astype(np.float32)


def test_motion_energy_on_synthetic_video(tmp_path):
    folder = tmp_path / "stimuli"
    folder.mkdir()
    np.save(folder / "right.npy", _drifting_grating(13, +1))
    np.save(folder / "left.npy", _drifting_grating(13, -1))
    np.save(folder / "still.npy", _drifting_grating(13, 0))
    ids = ["right.npy", "left.npy", "still.npy"]
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "me",
        config={"name": "me", "extractor": "motion_energy", "gabor": GABOR, "batch_size": 2},
        provenance={},
    )
    ds = open_dataset(out["output"])
    feats = ds["features"].values
    assert ds.attrs["modality"] == "video"
    assert feats.shape[0] == 3 and feats.shape[1] > 10
    assert np.isfinite(feats).all()
    # Opposite drift directions differ, and both differ from a static grating.
    assert not np.allclose(feats[0], feats[1], atol=1e-3)
    assert not np.allclose(feats[0], feats[2], atol=1e-3)
    # every channel is named by its filter: frequencies, direction, centre
    names = [str(n) for n in ds["feature_name"].values]
    assert len(names) == feats.shape[1] == len(set(names))
    assert {n.split("_")[2] for n in names} == {"dir0", "dir90", "dir180", "dir270"}
    assert {n.split("_")[1] for n in names} == {"tf0", "tf4"}


def test_motion_energy_reads_video_files(tmp_path):
    cv2 = pytest.importorskip("cv2")
    folder = tmp_path / "stimuli"
    folder.mkdir()
    frames = (_drifting_grating(9, 1) * 255).astype(np.uint8)
    writer = cv2.VideoWriter(
        str(folder / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 12.0, (32, 24)
    )
    if not writer.isOpened():
        pytest.skip("OpenCV has no MJPG writer here")
    for frame in frames:
        writer.write(frame[..., ::-1])
    writer.release()
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=["clip.avi"],
        output=tmp_path / "me",
        config={"extractor": "motion_energy", "gabor": GABOR},
        provenance={},
    )
    assert np.isfinite(open_dataset(out["output"])["features"].values).all()


def test_static_gabor_on_images(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "gabor",
        config={"extractor": "motion_energy", "gabor": GABOR, "batch_size": 4},
        provenance={},
    )
    feats = open_dataset(out["output"])["features"].values
    assert feats.shape[0] == 7 and np.isfinite(feats).all()
    assert feats.std(axis=0).max() > 0


def test_audio_baselines(tmp_path, rng):
    sfreq = 8000
    t = np.arange(sfreq) / sfreq
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    env = audio_envelope(tone)
    assert env.shape == (4,)
    np.testing.assert_allclose(env[0], 0.5, rtol=0.02)  # Hilbert envelope of a pure tone
    np.testing.assert_allclose(env[3], 0.5 / np.sqrt(2), rtol=1e-3)
    mel = mel_spectrogram(tone, sfreq, n_mels=16, window_s=0.025, hop_s=0.01)
    assert mel.shape[1] == 16
    low_band = np.argmax(mel.mean(axis=0))
    noise = rng.standard_normal(sfreq).astype(np.float32)
    mel_noise = mel_spectrogram(noise, sfreq, n_mels=16, window_s=0.025, hop_s=0.01)
    assert low_band < 8  # 440 Hz sits in the lower half of 0-4 kHz
    assert mel_noise.mean(axis=0).std() < mel.mean(axis=0).std()

    folder = tmp_path / "stimuli"
    ids = write_wavs(folder, rng)
    for name, n in (("audio_envelope", 4), ("mel_spectrogram", 9)):
        out = extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / name,
            config={"extractor": name, "audio": {"sampling_rate": 8000, "n_mels": 9}},
            provenance={},
        )
        ds = open_dataset(out["output"])
        assert ds["features"].shape == (3, n)
        # the envelope statistics are named; mel bands stay numbered
        assert ("feature_name" in ds.coords) == (name == "audio_envelope")
    envelope = open_dataset(tmp_path / "audio_envelope" / "output.zarr")
    assert envelope["feature_name"].values.tolist() == [
        "envelope_mean",
        "envelope_std",
        "envelope_p95",
        "rms",
    ]


def test_word_rate(tmp_path):
    out = extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=["a", "b", "c"],
        captions={"a": "one", "b": "two words", "c": "and three more"},
        output=tmp_path / "wr",
        config={"extractor": "word_rate", "context_words": 2},
        provenance={},
    )
    ds = open_dataset(out["output"])
    np.testing.assert_array_equal(ds["features"].values[:, 0], [1, 2, 3])
    assert ds["feature_name"].values.tolist() == ["word_count"]


def test_image_statistics_is_registered(image_stimuli, tmp_path):
    module = pytest.importorskip("neuroflow.features.image_statistics")
    folder, ids = image_stimuli
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "stats",
        config={"extractor": "image_statistics", "transforms": {"resize": [32, 32]}},
        provenance={},
    )
    feats = open_dataset(out["output"])["features"].values
    from neuroflow.stimuli.image import apply_transforms, load_image

    first = apply_transforms(load_image(folder / ids[0]), {"resize": [32, 32]})
    np.testing.assert_allclose(feats[0], module.image_statistics(first[None])[0], rtol=1e-5)
    names = open_dataset(out["output"])["feature_name"].values.tolist()
    assert names == list(module.FEATURE_NAMES) and names[0] == "luminance_mean"


def test_reduced_features_have_no_names(image_stimuli, tmp_path):
    folder, ids = image_stimuli
    out = extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=tmp_path / "pca",
        config={
            "extractor": "image_statistics",
            "reduction": {"method": "pca", "n_components": 3},
        },
        train_ids=ids,
        provenance={},
    )
    ds = open_dataset(out["output"])
    assert ds.sizes["feature"] == 3 and "feature_name" not in ds.coords  # components

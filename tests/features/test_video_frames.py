"""Frame-level video features (``frame_rate``) and their alignment to the TR grid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from features_helpers import TINY_VIT

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.features.align import align_features, place_rows
from neuroflow.features.config import fill_entry
from neuroflow.features.extract import extract_features
from neuroflow.features.hf import HFVisionExtractor
from neuroflow.features.image_statistics import image_statistics
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.features.writer import _train_rows
from neuroflow.stimuli.video import frame_indices, frame_times, iter_video_frames, load_video

FPS = 12
GABOR = {
    "size": [12, 16],
    "spatial_frequencies": [0, 2],
    "directions": [0, 90, 180, 270],
    "temporal_frequencies": [0, 4],
    "fps": FPS,
}


@register_extractor("test_video_mean", modalities=("video",))
class VideoMean(Extractor):
    """A video extractor without frame-level features."""

    default_layers = ("output",)

    def layer_names(self):
        return ["output"]

    def extract(self, batch):
        return {"output": np.array([[v.frames.mean()] for v in batch])}


def _clips(folder: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Two .npy clips at 12 fps: 2.5 s (30 frames, 9x11) and 2 s (24 frames, 10x13)."""
    folder.mkdir(parents=True, exist_ok=True)
    clips = {
        "long.npy": (rng.random((30, 9, 11, 3)) * 255).astype(np.uint8),
        "short.npy": rng.random((24, 10, 13, 3)).astype(np.float32),
    }
    for name, frames in clips.items():
        np.save(folder / name, frames)
    return clips


def _extract(folder: Path, out: Path, ids: list[str], **config) -> dict[str, Path]:
    return extract_features(
        stimuli_dir=folder,
        stimulus_ids=ids,
        output=out,
        config={"gabor": GABOR, "batch_size": 4, **config},
        provenance={"stage": "extract_features"},
    )


def test_frame_times_and_indices():
    times = frame_times(30, 12.0, 2.0)  # 2.5 s -> ceil(5.0) samples
    np.testing.assert_allclose(times, [0, 0.5, 1.0, 1.5, 2.0])
    np.testing.assert_array_equal(frame_indices(times, 12.0, 30), [0, 6, 12, 18, 24])
    assert frame_times(25, 12.0, 2.0).size == 5  # 2.083 s -> ceil(4.17)
    np.testing.assert_array_equal(frame_indices(np.array([0.99, 9.0]), 1.0, 5), [0, 4])
    with pytest.raises(ValueError, match="`frame_rate` must be a positive number"):
        frame_times(30, 12.0, 0.0)


def test_image_statistics_per_frame(tmp_path, rng):
    folder = tmp_path / "stimuli"
    clips = _clips(folder, rng)
    out = _extract(
        folder,
        tmp_path / "stats",
        ["long.npy", "short.npy"],
        name="stats",
        extractor="image_statistics",
        frame_rate=2.0,
    )
    ds = open_dataset(out["output"])
    # duration x frame_rate rows per clip: 2.5 s * 2 Hz + 2 s * 2 Hz.
    assert ds.sizes["stimulus"] == 5 + 4
    ids = [str(s) for s in ds["stimulus"].values]
    assert ids[:2] == ["long.npy#t=0.000", "long.npy#t=0.500"]
    assert ids[4:6] == ["long.npy#t=2.000", "short.npy#t=0.000"]
    assert [str(s) for s in ds["source_stimulus"].values] == ["long.npy"] * 5 + ["short.npy"] * 4
    np.testing.assert_allclose(ds["frame_time"].values, [0, 0.5, 1, 1.5, 2, 0, 0.5, 1, 1.5])
    np.testing.assert_allclose(ds["frame_duration"].values, 0.5)
    assert ds["frame_time"].attrs["units"] == "s"
    assert ds.attrs["row_unit"] == "frame" and ds.attrs["frame_rate"] == 2.0
    expected = np.concatenate(
        [
            image_statistics(clips["long.npy"][[0, 6, 12, 18, 24]]),
            image_statistics(clips["short.npy"][[0, 6, 12, 18]]),
        ]
    )
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-5, atol=1e-6)
    # Without frame_rate a clip is one row: the mean over evenly spaced frames.
    clip = _extract(
        folder, tmp_path / "clip", ["short.npy"], extractor="image_statistics", frames_per_video=3
    )
    row = open_dataset(clip["output"])["features"].values
    np.testing.assert_allclose(
        row[0], image_statistics(clips["short.npy"][[0, 11, 23]]).mean(0), rtol=1e-5
    )


def test_motion_energy_per_frame_is_the_projection_at_sampled_frames(tmp_path, rng):
    from moten.pyramids import MotionEnergyPyramid

    from neuroflow.features.baselines import luminance

    folder = tmp_path / "stimuli"
    clips = _clips(folder, rng)
    out = _extract(folder, tmp_path / "me", ["long.npy"], extractor="motion_energy", frame_rate=3.0)
    got = open_dataset(out["output"])["features"].values
    assert got.shape[0] == 8  # 2.5 s * 3 Hz = 7.5 -> 8 frames
    frames = clips["long.npy"].astype(np.float32) / 255.0
    pyramid = MotionEnergyPyramid(
        stimulus_vhsize=(12, 16),
        stimulus_fps=FPS,
        temporal_frequencies=[0, 4],
        spatial_frequencies=[0, 2],
        spatial_directions=[0, 90, 180, 270],
    )
    energy = pyramid.project_stimulus(luminance(frames, (12, 16)))
    rows = frame_indices(frame_times(30, FPS, 3.0), FPS, 30)
    np.testing.assert_array_equal(rows, [0, 4, 8, 12, 16, 20, 24, 28])
    np.testing.assert_allclose(got, energy[rows], rtol=1e-4, atol=1e-6)


def test_vision_model_per_frame(tmp_path, rng):
    folder = tmp_path / "stimuli"
    clips = _clips(folder, rng)
    config = {
        "extractor": "hf_vision",
        "weights": "random",
        "model_config": TINY_VIT,
        "model": None,
        "layers": [{"depth": 1.0}],
        "device": "cpu",
        "frame_rate": 1.0,
        "batch_size": 3,  # batches span both clips
    }
    out = _extract(folder, tmp_path / "vit", ["long.npy", "short.npy"], **config)
    ds = open_dataset(out["depth-1"])
    assert ds.sizes["stimulus"] == 3 + 2
    extractor = HFVisionExtractor(fill_entry({**config, "gabor": GABOR}), "image")
    frames = [clips["long.npy"][i].astype(np.float32) / 255 for i in (0, 12, 24)]
    frames += [clips["short.npy"][i] for i in (0, 12)]
    expected = extractor.extract(frames)["depth-1"]
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-4, atol=1e-5)


def test_streamed_frames_of_a_video_file(tmp_path, rng):
    cv2 = pytest.importorskip("cv2")
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (16, 12))
    if not writer.isOpened():
        pytest.skip("OpenCV has no MJPG writer here")
    for _ in range(17):
        writer.write((rng.random((12, 16, 3)) * 255).astype(np.uint8))
    writer.release()
    video = load_video(path)
    wanted = np.array([0, 3, 3, 16, 40])  # repeats and past-the-end indices allowed
    got = list(iter_video_frames(path, wanted, transforms={}))
    for frame, i in zip(got, wanted, strict=True):
        np.testing.assert_array_equal(frame, video.frames[min(i, 16)])
    with pytest.raises(ValueError, match="non-decreasing"):
        next(iter_video_frames(path, [3, 1], transforms={}))
    out = _extract(
        tmp_path, tmp_path / "f", ["clip.avi"], extractor="image_statistics", frame_rate=4.0
    )
    assert open_dataset(out["output"]).sizes["stimulus"] == 7  # 1.7 s * 4 Hz -> 7


def test_frame_rate_errors(tmp_path, rng):
    folder = tmp_path / "stimuli"
    _clips(folder, rng)
    with pytest.raises(ValueError, match="`frame_rate` must be a positive number"):
        fill_entry({"extractor": "image_statistics", "frame_rate": -1})
    with pytest.raises(ValueError, match="`frame_rate` applies to video stimuli"):
        fill_entry({"extractor": "image_statistics", "modality": "image", "frame_rate": 2})
    with pytest.raises(ValueError, match="no frame-level features"):
        _extract(folder, tmp_path / "x", ["long.npy"], extractor="test_video_mean", frame_rate=2)
    with pytest.raises(FileNotFoundError, match=r"stim_file 'gone\.npy'"):
        _extract(folder, tmp_path / "y", ["gone.npy"], extractor="image_statistics", frame_rate=2)


def test_training_rows_follow_their_clip():
    ids = ["a.npy#t=0.000", "a.npy#t=0.500", "b.npy#t=0.000"]
    rows = _train_rows(ids, ["b.npy"], ["a.npy", "a.npy", "b.npy"])
    np.testing.assert_array_equal(rows, [2])
    with pytest.raises(ValueError, match=r"unknown ids \['c\.npy'\]"):
        _train_rows(ids, ["c.npy"], ["a.npy", "a.npy", "b.npy"])


def _brain(tmp_path: Path, onsets, durations, stims, n_times: int = 5, tr: float = 1.0) -> Path:
    ds = xr.Dataset(
        {
            "bold": (("time", "voxel"), np.zeros((n_times, 3))),
            "event_onset": ("event", np.asarray(onsets, float)),
            "event_duration": ("event", np.asarray(durations, float)),
            "stim_file": ("event", np.array(stims, dtype=object)),
        },
        coords={"time": np.arange(n_times) * tr},
        attrs={"tr": tr},
    )
    return write_dataset(ds, tmp_path / "run.zarr", provenance={"stage": "preprocess_fmri"})


def test_two_second_clip_at_one_second_tr(tmp_path, rng):
    folder = tmp_path / "stimuli"
    _clips(folder, rng)
    out = _extract(
        folder, tmp_path / "f", ["short.npy"], extractor="image_statistics", frame_rate=2.0
    )
    feats = open_dataset(out["output"])["features"].values.astype(float)
    assert feats.shape[0] == 4  # frames at 0, 0.5, 1, 1.5 s, each 0.5 s long
    brain = _brain(tmp_path, [0.25], [2.0], ["short.npy"])
    aligned = align_features(
        features=out["output"],
        brain=brain,
        output=tmp_path / "a.zarr",
        config={},
        provenance={},
    )
    ds = open_dataset(aligned)
    # Frames cover [0.25, 0.75) [0.75, 1.25) [1.25, 1.75) [1.75, 2.25) s.
    weights = np.array(
        [
            [0.5, 0.25, 0, 0],  # TR [0, 1): overlaps of 0.5 and 0.25 s
            [0, 0.25, 0.5, 0.25],  # TR [1, 2)
            [0, 0, 0, 0.25],  # TR [2, 3)
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ]
    )
    total = weights.sum(1, keepdims=True)
    expected = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0) @ feats
    np.testing.assert_allclose(ds["features"].values, expected, rtol=1e-5, atol=1e-6)
    assert ds.attrs["n_events"] == 1 and ds.attrs["n_rows_placed"] == 4


def test_frames_are_cut_at_the_event_end_and_repeat_per_event(tmp_path, rng):
    folder = tmp_path / "stimuli"
    _clips(folder, rng)
    out = _extract(
        folder, tmp_path / "f", ["short.npy"], extractor="image_statistics", frame_rate=2.0
    )
    fds = open_dataset(out["output"])
    placed = place_rows(
        fds, np.array([1.0, 5.0]), np.array([1.2, np.nan]), ["short.npy", "short.npy"]
    )
    np.testing.assert_array_equal(placed.rows, [0, 1, 2, 0, 1, 2, 3])
    np.testing.assert_allclose(placed.onsets, [1.0, 1.5, 2.0, 5.0, 5.5, 6.0, 6.5])
    np.testing.assert_allclose(placed.durations, [0.5, 0.5, 0.2, 0.5, 0.5, 0.5, 0.5])
    assert placed.n_events == 2 and placed.skipped == []
    lanczos = align_features(
        features=out["output"],
        brain=_brain(tmp_path, [0.0], [2.0], ["short.npy"], n_times=7),
        output=tmp_path / "l.zarr",
        config={"method": "lanczos"},
        provenance={},
    )
    assert np.isfinite(open_dataset(lanczos)["features"].values).all()

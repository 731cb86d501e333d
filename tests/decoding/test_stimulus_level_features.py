"""Stimulus-level analyses read frame- and word-level feature stores as one row per stimulus."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.analysis_inputs import feature_info, stimulus_features
from neuroflow.artifacts import write_dataset


def _store(path, ids, sources, values, **attrs):
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), values)},
        coords={
            "stimulus": ("stimulus", np.array(ids, dtype=object)),
            "source_stimulus": ("stimulus", np.array(sources, dtype=object)),
        },
        attrs=attrs,
    )
    return write_dataset(ds, path, provenance={})


def test_frames_and_words_average_to_their_stimulus(tmp_path, rng):
    clips = ["a.mp4"] * 3 + ["b.mp4"] * 4
    values = rng.standard_normal((7, 5)).astype(np.float32)
    ids = [f"{c}#t={i / 2:.3f}" for i, c in enumerate(clips)]
    frames = _store(tmp_path / "frames.zarr", ids, clips, values)
    out = stimulus_features(frames, ["b.mp4", "a.mp4", "b.mp4"])
    expected = np.stack([values[3:].mean(0), values[:3].mean(0), values[3:].mean(0)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)
    # rows asked for by their own id are returned as they are
    np.testing.assert_allclose(stimulus_features(frames, ids[:2]), values[:2], rtol=1e-5, atol=1e-7)
    words = _store(tmp_path / "w.zarr", [f"s.wav#w={i}" for i in range(7)], ["s.wav"] * 7, values)
    np.testing.assert_allclose(
        stimulus_features(words, ["s.wav"])[0], values.mean(0), rtol=1e-5, atol=1e-7
    )
    with pytest.raises(ValueError, match=r"no features for stimulus id\(s\) \['c\.mp4'\]"):
        stimulus_features(frames, ["c.mp4"])


def test_variants_of_one_network_are_distinct_models(tmp_path, rng):
    values = rng.standard_normal((2, 3)).astype(np.float32)
    kw = {"model": "all-MiniLM-L6-v2"}
    a = _store(tmp_path / "a.zarr", ["x", "y"], ["x", "y"], values, feature_set="minilm", **kw)
    b = _store(tmp_path / "b.zarr", ["x", "y"], ["x", "y"], values, feature_set="minilm_rnd", **kw)
    assert feature_info(a)["model"] == "minilm" and feature_info(b)["model"] == "minilm_rnd"
    assert feature_info(a)["network"] == feature_info(b)["network"] == "all-MiniLM-L6-v2"

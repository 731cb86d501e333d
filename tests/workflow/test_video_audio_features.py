"""A video model and a windowed speech model on a movie with its soundtrack, through
``snakemake``.

The fMRI movie shape gets, per run, one event naming a whole movie (a ``.npy`` frame
stack) that has a soundtrack (the ``.wav`` file of the same name). A tiny saved VideoMAE
(``hf_video``) reads clips of the 2 s before each TR, and a tiny saved wav2vec 2.0
(``hf_audio`` with ``modality: audio``, so it hears the movie's soundtrack) reads the
1 s of sound before each TR; both are aligned to the TR grid and encoded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from dataset_shapes import make_fmri_movie
from features_helpers import TINY_WAV2VEC2
from scipy.io import wavfile
from shape_helpers import open_stores, run_shape, summary_notes, summary_table

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_VOLUMES = 40
TR = 2.0
FPS = 4
SOUND_RATE = 8000
TINY_VIDEOMAE = {
    "model_type": "videomae",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 37,
    "image_size": 16,
    "patch_size": 8,
    "num_frames": 4,
    "tubelet_size": 2,
}


def _save(folder: Path, spec: dict) -> Path:
    """A model built from its configuration with seeded weights, saved in ``folder``."""
    from transformers import AutoConfig, AutoModel

    spec = dict(spec)
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.for_model(spec.pop("model_type"), **spec)).save_pretrained(
        folder
    )
    return folder


def _with_movies(facts: dict, rng: np.random.Generator) -> None:
    """Make each run one event showing a movie (frames at 4 fps) with a soundtrack (8 kHz)."""
    root = Path(facts["root"])
    movies = root / "stimuli" / "movies"
    movies.mkdir(parents=True)
    duration = N_VOLUMES * TR
    for run in facts["runs"]:
        level = rng.uniform(40, 200, size=int(duration * FPS))
        frames = np.clip(
            level[:, None, None, None] + rng.normal(0, 25, (level.size, 12, 14, 3)), 0, 255
        )
        np.save(movies / f"run{run}.npy", frames.astype(np.uint8))
        t = np.arange(int(duration * SOUND_RATE)) / SOUND_RATE
        tone = np.sin(2 * np.pi * rng.uniform(200, 600) * t) * (0.5 + 0.5 * np.sin(t / 7.0))
        sound = 0.3 * tone + 0.05 * rng.standard_normal(t.size)
        wavfile.write(movies / f"run{run}.wav", SOUND_RATE, (sound * 32767).astype(np.int16))
    for (_, run), table in facts["events"].items():
        events = pd.DataFrame(
            {
                "onset": [0.0],
                "duration": [duration],
                "trial_type": ["movie"],
                "stim_file": [f"movies/run{run}.npy"],
            }
        )
        events.to_csv(table, sep="\t", index=False)


@pytest.fixture(scope="module")
def movie_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("av_movie")
    facts = make_fmri_movie(
        root / "bids", seed=4, n_subjects=1, n_runs=3, n_volumes=N_VOLUMES, tr=TR, image_size=16
    )
    _with_movies(facts, np.random.default_rng(4))
    videomae = _save(root / "models" / "videomae", TINY_VIDEOMAE)
    wav2vec2 = _save(root / "models" / "wav2vec2", TINY_WAV2VEC2)
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "features": {
            "extractors": [
                {
                    "name": "videomae",
                    "extractor": "hf_video",
                    "model": str(videomae),
                    "frame_rate": 1 / TR,
                    "window_s": 2.0,
                    "gabor": {"fps": FPS},
                    "batch_size": 8,
                },
                {
                    "name": "wav2vec2",
                    "extractor": "hf_audio",
                    "model": str(wav2vec2),
                    "modality": "audio",
                    "frame_rate": 1 / TR,
                    "window_s": 1.0,
                    "batch_size": 8,
                },
            ]
        },
        "encoding": {
            "models": {
                "video": {"feature_spaces": ["videomae"], "model": "ridge"},
                "sound": {"feature_spaces": ["wav2vec2"], "model": "ridge"},
            },
            "alphas": {"start": 0.0, "stop": 4.0, "num": 5},
        },
        "evaluation": {"permutation": {"n_permutations": 20}, "plots": {"enabled": False}},
        "rsa": {"enabled": False},
    }
    return run_shape(root / "run", config), facts


def test_movie_and_soundtrack_features_align_to_the_tr_grid(movie_run):
    run, facts = movie_run
    # one movie event per run: too few stimuli to hold some out and decode them
    assert any(n.startswith("decoding_fmri: skipped, it needs 4+") for n in summary_notes(run))
    features = open_stores(run, "features")
    (video,) = [ds for name, ds in features.items() if name.startswith("videomae-")]
    (sound,) = [ds for name, ds in features.items() if name.startswith("wav2vec2-")]
    n_rows = len(facts["runs"]) * N_VOLUMES  # one window per TR of each movie
    for ds, extractor in ((video, "hf_video"), (sound, "hf_audio")):
        assert ds.attrs["extractor"] == extractor and ds.attrs["row_unit"] == "frame"
        assert ds.sizes["stimulus"] == n_rows
        assert np.isfinite(ds["features"].values).all()
        np.testing.assert_allclose(ds["frame_time"].values[:N_VOLUMES], np.arange(N_VOLUMES) * TR)
    assert video.attrs["clip_frames"] == 4 and video.attrs["window_s"] == 2.0
    assert str(sound["stimulus"].values[1]) == "movies/run1.npy#t=2.000"  # the movie's ids
    assert sound.attrs["modality"] == "audio" and sound.attrs["window_s"] == 1.0

    aligned = open_stores(run, "align_features")
    assert {name.split("-")[0] for name in aligned} == {"videomae", "wav2vec2"}
    assert len(aligned) == 2 * len(facts["runs"])
    brains = open_stores(run, "preprocess_fmri")
    n_times = {ds.sizes["time"] for ds in brains.values()}
    for name, ds in aligned.items():
        assert {ds.sizes["time"]} == n_times, name  # one row per TR
        assert ds.attrs["n_rows_placed"] == N_VOLUMES, name
        assert np.isfinite(ds["features"].values).all(), name
        assert np.ptp(ds["features"].values, axis=0).max() > 0, name

    encoding = open_stores(run, "encoding")
    evaluation = open_stores(run, "evaluation")
    for model in ("video", "sound"):
        assert any(name.startswith(f"{model}-") for name in encoding), sorted(encoding)
        scores = [ds for name, ds in evaluation.items() if name.startswith(f"{model}-")]
        assert scores and all(isinstance(ds, xr.Dataset) for ds in scores)
        assert all(np.isfinite(ds["r"].values).any() for ds in scores)
    table = summary_table(run)
    encoded = table[(table["analysis"] == "encoding") & (table["statistic"] == "value")]
    assert {"video", "sound"} <= set(encoded["model"]), sorted(set(encoded["model"]))

"""Stimulus-level analyses on frame-level features, captions kept outside ``stimuli/``,
and the analysis switches, through ``snakemake``.

An EEG dataset whose events name video clips (``.npy`` frame stacks): image statistics
sampled at 4 frames per second give one row per frame, which decoding, EEG encoding and
RSA average over each clip's frames; a text model reads the clips' captions from a table
named by ``dataset.captions``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from dataset_shapes import make_eeg_only
from shape_helpers import open_stores, run_shape
from workflow_helpers import planned_jobs, write_config

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_CLIPS = 8


def _with_clips(root, rng) -> None:
    """Give every event of an EEG-only dataset a video clip and write the clips."""
    clips = root / "stimuli" / "clips"
    clips.mkdir(parents=True)
    for k in range(N_CLIPS):
        level = 30 + 25 * k
        frames = np.clip(rng.normal(level, 20, (12, 16, 16)), 0, 255).astype(np.uint8)
        np.save(clips / f"clip{k}.npy", frames)
    for table in sorted(root.rglob("*_events.tsv")):
        events = pd.read_csv(table, sep="\t", dtype=str, keep_default_na=False)
        events["stim_file"] = [f"clips/clip{i % N_CLIPS}.npy" for i in range(len(events))]
        events.to_csv(table, sep="\t", index=False)
    (root / "annotations").mkdir()
    names = [f"clips/clip{k}.npy" for k in range(N_CLIPS)]
    words = [f"a grey square, {'bright' if k > 3 else 'dark'} {k}" for k in range(N_CLIPS)]
    captions = pd.DataFrame({"stim_file": names, "caption": words})
    captions.to_csv(root / "annotations" / "clips.tsv", sep="\t", index=False)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    root = tmp_path_factory.mktemp("clips")
    make_eeg_only(root / "bids", seed=3, n_events=48)
    _with_clips(root / "bids", np.random.default_rng(3))
    config = {
        "dataset": {
            "source": "bids",
            "bids_root": str(root / "bids"),
            "captions": "annotations/clips.tsv",
        },
        "features": {
            "extractors": [
                {"name": "frames", "extractor": "image_statistics", "frame_rate": 4.0},
                {"name": "minilm", "extractor": "sentence_transformer"},
            ]
        },
        "encoding": {"models": {"frames": {"feature_spaces": ["frames"]}}},
        "decoding": {
            "classification": {"n_permutations": 4, "generalization": False},
            "features": {"n_permutations": 10},
            "identification": {"n_permutations": 20},
            "contrastive": {"enabled": False},
        },
        "qc": {"enabled": False},  # not under test
        "geometry": {"enabled": False},
    }
    return run_shape(root / "run", config), root


def test_frame_level_features_are_averaged_per_clip(clips):
    run, _ = clips
    (frames,) = open_stores(run, "features", "output.zarr").values()
    assert frames.attrs["row_unit"] == "frame"
    assert frames.sizes["stimulus"] > N_CLIPS  # several frames per clip
    (decoding,) = open_stores(run, "decoding", "decoding_eeg.zarr").values()
    assert list(decoding["feature_space"].values) == ["frames", "minilm"]
    assert np.isfinite(decoding["feature_score"].values).all()
    ident = decoding["identification"]
    assert np.isfinite(ident.sel(metric=["top1", "mean_rank"]).values).all()
    # 4 held-out clips: top-5 accuracy is undefined, not a trivial 1
    assert np.isnan(ident.sel(metric="top5").values).all()
    (rsa,) = open_stores(run, "rsa").values()
    assert list(rsa["layer"].values) == ["frames", "minilm"]
    assert np.isfinite(rsa["cross_temporal"].values).all()
    encoding = open_stores(run, "eeg_encoding")
    assert len(encoding) == 2 and all(ds.attrs["n_test_stimuli"] >= 2 for ds in encoding.values())


def test_captions_come_from_the_named_table(clips):
    run, root = clips
    (text,) = open_stores(run, "features", "embedding.zarr").values()
    assert sorted(str(s) for s in text["stimulus"].values) == [
        f"clips/clip{k}.npy" for k in range(N_CLIPS)
    ]
    assert not (root / "bids" / "stimuli" / "captions.tsv").exists()


def test_switches_and_feature_spaces_reach_the_plan(clips, tmp_path):
    run, _ = clips
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["rsa"] = {"enabled": False}
    config["decoding"]["feature_spaces"] = ["minilm"]
    config["eeg_encoding"] = {"models": {"words": {"feature_spaces": ["minilm"]}}}
    write_config(tmp_path / "config.yaml", config)
    jobs = planned_jobs(tmp_path)
    assert "rsa_eeg" not in jobs
    assert jobs["fit_eeg_encoding"] == 2  # one EEG model ("words") x 2 subjects
    assert jobs["decode_eeg"] == 1
    config["decoding"]["enabled"] = False
    config["eeg_encoding"]["enabled"] = False
    write_config(tmp_path / "config.yaml", config)
    jobs = planned_jobs(tmp_path)
    assert not {"decode_eeg", "fit_eeg_encoding", "rsa_eeg"} & set(jobs)
    assert "extract_features_frames" in jobs  # feature stores are still made

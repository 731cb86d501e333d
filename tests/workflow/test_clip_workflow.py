"""A CLIP-style dual encoder through ``snakemake``: images and captions in one space.

An EEG image-viewing dataset (test images shown twice, training images cycled) whose
images have captions. A tiny CLIP saved offline with ``save_pretrained`` embeds the
images (``hf_clip``: the image-text projection and one block of the vision tower) and
the captions (``hf_clip`` with ``modality: text``); EEG is decoded into each space and
the held-out images are identified there. ``neuroflow models`` lists the snapshot the
config needs, with the SHA-256 that the feature stores then record.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from dataset_shapes import make_eeg_only, show_images
from features_helpers import save_tiny_clip
from shape_helpers import open_stores, run_shape
from workflow_helpers import write_config

from neuroflow.features.hf import hash_weight_files

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_TEST, N_TRAIN = 4, 10
NEUROFLOW = Path(sys.executable).with_name("neuroflow")


def _models(workdir: Path, config: Path) -> subprocess.CompletedProcess:
    """``neuroflow models --json`` on ``config``, run as a user runs it."""
    return subprocess.run(
        [str(NEUROFLOW), "models", "--configfile", str(config), "--json"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _with_captions(facts: dict) -> None:
    """Write a caption for every shown image to ``annotations/captions.tsv``."""
    root = Path(facts["root"])
    images = facts["test_images"] + facts["train_images"]
    words = ["cat", "dog", "sun", "the mat", "two dogs", "a cat sat"]
    captions = [f"{words[i % len(words)]} {i}" for i in range(len(images))]
    (root / "annotations").mkdir()
    table = pd.DataFrame({"stim_file": images, "caption": captions})
    table.to_csv(root / "annotations" / "captions.tsv", sep="\t", index=False)


@pytest.fixture(scope="module")
def clip_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("clip_eeg")
    facts = show_images(
        make_eeg_only(root / "bids", seed=5, n_events=48), n_test=N_TEST, n_train=N_TRAIN
    )
    _with_captions(facts)
    clip = save_tiny_clip(root / "models" / "clip")
    config = {
        "dataset": {
            "source": "bids",
            "bids_root": str(root / "bids"),
            "captions": "annotations/captions.tsv",
        },
        "features": {
            "extractors": [
                {
                    "name": "clip",
                    "extractor": "hf_clip",
                    "model": str(clip),
                    "layers": ["projection", {"index": 1}],
                },
                {
                    "name": "clip_text",
                    "extractor": "hf_clip",
                    "model": str(clip),
                    "modality": "text",
                },
            ]
        },
        "encoding": {"models": {"clip": {"feature_spaces": ["clip"]}}},  # fMRI only
        "eeg_encoding": {"enabled": False},
        "rsa": {"enabled": False},
        "qc": {"enabled": False},  # not under test
        "geometry": {"enabled": False},
        "decoding": {
            "classification": {"enabled": False},
            "features": {"n_permutations": 10},
            "identification": {"n_permutations": 20},
            "contrastive": {"max_epochs": 20, "patience": 5},
        },
    }
    workdir = root / "run"
    workdir.mkdir()
    listed = _models(workdir, write_config(workdir / "config.yaml", config))
    return run_shape(workdir, config), clip, listed


def test_models_lists_the_snapshot_the_stores_then_record(clip_run):
    run, clip, listed = clip_run
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    assert [r["name"] for r in records] == ["clip", "clip_text"]
    sha = hash_weight_files(clip)
    for record in records:
        assert record["status"] == "present" and record["path"] == str(clip.resolve())
        assert record["sha256"] == sha
    features = open_stores(run, "features")
    assert len(features) == 3  # projection + one vision block, caption projection
    assert {ds.attrs["weights_sha256"] for ds in features.values()} == {sha}


def test_missing_snapshot_gives_the_download_command(clip_run, tmp_path):
    run, _, _ = clip_run
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["features"]["extractors"][1]["model"] = "openai/clip-vit-base-patch32"
    config["features"]["extractors"] = config["features"]["extractors"][1:]
    listed = _models(tmp_path, write_config(tmp_path / "config.yaml", config))
    assert listed.returncode == 1
    (record,) = json.loads(listed.stdout)
    assert record["status"] == "missing"
    assert "openai/clip-vit-base-patch32" in " ".join(record["fetch"])


def test_images_and_captions_share_the_projection_and_are_identified(clip_run):
    run, _, _ = clip_run
    features = {name.rsplit("/", 1)[-1]: ds for name, ds in open_stores(run, "features").items()}
    image, text = features["projection.zarr"], None
    for name, ds in open_stores(run, "features").items():
        if name.startswith("clip_text-"):
            text = ds
    assert text is not None
    assert image.sizes["feature"] == text.sizes["feature"] == 16  # the shared projection
    for ds in (image, text):
        np.testing.assert_allclose(np.linalg.norm(ds["features"].values, axis=1), 1.0, rtol=1e-5)
        assert ds.sizes["stimulus"] == N_TEST + N_TRAIN
    (decoding,) = open_stores(run, "decoding", "decoding_eeg.zarr").values()
    assert [str(s) for s in decoding["subject"].values] == ["01", "02"]
    spaces = [str(s) for s in decoding["feature_space"].values]
    assert spaces == ["clip:projection", "clip:layer-1", "clip_text"], spaces
    ident = decoding["identification"].sel(metric=["top1", "mean_rank"])
    assert {"ridge", "contrastive"} <= set(ident["decoder"].values)
    assert np.isfinite(ident.values).all()
    ranks = ident.sel(metric="mean_rank").values
    assert ((ranks >= 1) & (ranks <= N_TEST)).all()  # ranks among the 4 test images

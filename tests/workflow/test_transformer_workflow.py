"""A transformer encoding model through ``snakemake`` on a generated fMRI movie.

Two subjects watch four distinct movies (no repeats, no atlas): the last run is held
out, the third training run stops training early. The planted posterior blob follows
two image statistics of each shot; the captions describe the shots. One job trains
the transformer on both subjects, beside a ridge model of the image statistics:

- each subject's store has the ridge layout, the evaluation and the summary treat it
  as any model, and the planted blob is predicted on the held-out run, not the rest of
  the brain;
- dropping the image statistics at test time costs more in the blob than dropping the
  captions (``tribe-without-<space>`` rows); the ensemble of two seeds scores at least
  as well as each seed (``tribe-seed-<k>`` rows);
- the training curves are a store and a report figure; a transformer option reruns the
  transformer, its evaluations and the summary only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from dataset_shapes import make_fmri_movie
from shape_helpers import open_stores, run_shape, summary_dir, summary_table, voxels_in
from workflow_helpers import planned_jobs, write_config

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

#: Small and quick: the test checks the plumbing and the planted signal, not the model's
#: best accuracy.
TRANSFORMER = {
    "hidden": 32,
    "n_layers": 1,
    "n_heads": 2,
    "window_trs": 8,
    "epochs": 30,
    "patience": 8,
    "lr": 0.003,
    "seeds": [0, 1],
    "device": "cpu",
}


@pytest.fixture(scope="module")
def transformer_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("transformer")
    facts = make_fmri_movie(root / "bids", seed=1, n_runs=4, n_volumes=150, snr=1.5)
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "features": {
            "extractors": [
                {"name": "image_statistics", "extractor": "image_statistics"},
                {
                    "name": "minilm",
                    "extractor": "sentence_transformer",
                    "model": "all-MiniLM-L6-v2",
                },
            ]
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
                "tribe": {
                    "feature_spaces": ["image_statistics", "minilm"],
                    "model": "transformer",
                    "transformer": TRANSFORMER,
                },
            }
        },
        "evaluation": {"permutation": {"n_permutations": 50}},
        "qc": {"enabled": False},
        "rsa": {"enabled": False},
        "decoding": {"enabled": False},
        "geometry": {"enabled": False},
        "predict": {"stimulus_sets": {}},
    }
    run_shape(root / "run", config)
    return root / "run", facts


def test_one_job_trains_every_subject_and_scores_like_ridge(transformer_run):
    run, facts = transformer_run
    stores = open_stores(run, "encoding")
    tribe = {k: v for k, v in stores.items() if k.startswith("tribe-")}
    assert sorted(Path(k).name for k in tribe) == [
        "sub-01_encoding.zarr",
        "sub-02_encoding.zarr",
        "training.zarr",
    ]
    for name, ds in open_stores(run, "evaluation").items():
        subject = ds.attrs["subject"]
        blob = voxels_in(ds, facts["planted"]["blob"][subject])
        median_in, median_out = np.median(ds["r"].values[blob]), np.median(ds["r"].values[~blob])
        print(f"{name}: median r in the blob {median_in:.3f}, outside {median_out:.3f}")
        assert median_in > 0.25 and median_out < 0.1, name
        if name.startswith("tribe-"):
            variants = [str(v) for v in ds["variant"].values]
            assert variants == ["seed-0", "seed-1", "without-image_statistics", "without-minilm"]
            r = ds["variant_r"].to_pandas().T[blob].median()
            print(r.round(3).to_dict())
            # the captions describe the shots, so they carry some of the image statistics:
            # leaving out the planted space costs more than leaving out the captions
            assert r["without-image_statistics"] < r["without-minilm"] - 0.05
            assert median_in >= max(r["seed-0"], r["seed-1"]) - 0.02


def test_summary_rows_training_curves_and_rerun_scope(transformer_run, tmp_path):
    run, _ = transformer_run
    table = summary_table(run)
    encoding = table[(table["analysis"] == "encoding") & (table["statistic"] == "value")]
    assert {
        "visual",
        "tribe",
        "tribe-seed-0",
        "tribe-seed-1",
        "tribe-without-image_statistics",
        "tribe-without-minilm",
    } <= set(encoding["model"])
    (training,) = [
        v for k, v in open_stores(run, "encoding").items() if k.endswith("training.zarr")
    ]
    assert training["train_loss"].dims == ("seed", "epoch")
    assert (training["n_epochs"].values >= 1).all()
    assert (training["best_epoch"].values < training["n_epochs"].values).all()
    assert (summary_dir(run) / "plots" / "encoding_tribe_training.png").stat().st_size > 1000
    work = tmp_path / "run"
    shutil.copytree(run, work, symlinks=True)
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["encoding"]["models"]["tribe"]["transformer"]["epochs"] = 3
    write_config(work / "config.yaml", config)
    assert planned_jobs(work) == {
        "fit_transformer_encoding": 1,
        "evaluate_encoding": 2,
        "summarize_scores": 1,
        "summary_thumbnails": 1,
        "all": 1,
    }

"""The ``predict_eeg`` stage through ``snakemake`` on a generated EEG-only dataset.

An EEG image-viewing dataset written with MNE-BIDS (two subjects, BrainVision and FIF,
no fMRI) gets a pool of never-shown pictures and a table of sentences. The image
model's fitted EEG encoders predict the evoked response to every picture, ranked on a
channel group, the global field power and one channel within a latency window; the
sentences are left out with a note (the model reads images). Changing the window
reruns only these jobs.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dataset_shapes import make_eeg_only, show_images
from figure_helpers import assert_png
from shape_helpers import run_shape, summary_notes
from workflow_helpers import planned_jobs, write_config

from neuroflow.artifacts import read_provenance
from neuroflow.demo._io import write_png, write_tsv
from neuroflow.manifests import verify_store

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_POOL = 14
GROUP = ["O1", "Oz", "O2", "Iz"]  # Iz is not among the 32 recorded channels


def _config(root) -> dict:
    return {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "features": {
            "extractors": [{"name": "stats", "extractor": "image_statistics"}],
        },
        "encoding": {"models": {"pictures": {"feature_spaces": ["stats"]}}},
        "eeg_encoding": {"alphas": {"num": 4}, "cv": {"grouped_kfold": 3}},
        "decoding": {"enabled": False},
        "rsa": {"enabled": False},
        "geometry": {"enabled": False},
        "qc": {"enabled": False},  # not under test
        "predict": {
            "stimulus_sets": {
                "novel": {"folder": str(root / "pool"), "glob": "*.png"},
                "words": {"sentences": str(root / "sentences.tsv")},
            },
            "k": 3,
            "channel_groups": {"occipital": GROUP},
            "targets": {"channels": ["Pz"]},
            "latency_window": [0.1, 0.2],
        },
    }


@pytest.fixture(scope="module")
def eeg_run(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("predict_eeg")
    facts = show_images(make_eeg_only(root / "bids", seed=8, n_events=48), n_test=3, n_train=12)
    rng = np.random.default_rng(8)
    for i in range(N_POOL):
        level = int(20 + 230 * i / N_POOL)
        pixels = np.clip(rng.normal(level, 30, (10, 12, 3)), 0, 255).astype(np.uint8)
        write_png(root / "pool" / f"pic-{i:02d}.png", pixels)
    write_tsv(root / "sentences.tsv", {"sentence": ["a bright square", "a dark square"]})
    config = _config(root)
    return run_shape(root / "run", config), config, facts


def test_every_subject_gets_its_evoked_predictions_and_rankings(eeg_run):
    run, _, facts = eeg_run
    stores = sorted((run / "results" / "predict_eeg").glob("pictures-*/sub-*_novel.zarr"))
    assert [s.name for s in stores] == [f"sub-{s}_novel.zarr" for s in facts["subjects"]]
    assert not list((run / "results").glob("predict_eeg/*/*_words.zarr"))
    assert not (run / "results" / "predict").exists()  # no fMRI model runs
    for store in stores:
        assert verify_store(store, checksums=True) == []
        ds = xr.open_zarr(store)
        assert list(ds["roi"].values) == ["occipital", "gfp"]
        assert ds.attrs["channel_groups"] == {"occipital": ["O1", "Oz", "O2"]}
        assert ds.attrs["latency_window_source"] == "predict.latency_window"
        low, high = ds.attrs["latency_window"]
        assert 0.1 <= low <= high <= 0.2
        assert ds.sizes["stimulus"] == N_POOL
        assert ds["channel_response"].dims == ("stimulus", "channel")
        assert ds["pool_mean_response"].dims == ("channel", "latency")
        assert ds["roi_response"].attrs["units"] == "µV"
        for name in ("roi_response", "channel_response", "pool_mean_response"):
            assert np.isfinite(ds[name].values).all(), name
        # the group's response is the mean of its channels' window means
        group = ds["channel_response"].sel(channel=["O1", "Oz", "O2"]).mean("channel")
        np.testing.assert_allclose(
            ds["roi_response"].sel(roi="occipital").values, group.values, rtol=1e-5, atol=1e-6
        )
        # the store says which fitted model it read
        prov = read_provenance(store)
        assert prov["stage"] == "predict_eeg/pictures"
        assert any(i.get("stage") == "eeg_encoding/pictures" for i in prov["inputs"]), prov

        table = pd.read_csv(store.with_name(store.name.replace(".zarr", "_ranking.tsv")), sep="\t")
        assert list(dict.fromkeys(table["roi"])) == ["occipital", "gfp", "channel Pz"]
        assert len(table) == 3 * 2 * 3
        top = table[(table["roi"] == "gfp") & (table["direction"] == "top")]
        gfp = ds["roi_response"].sel(roi="gfp").to_pandas()
        assert top["stimulus"].iloc[0] == gfp.idxmax()
        sheets = store.with_name(store.name.replace(".zarr", "_contact_sheets"))
        assert sorted(p.name for p in sheets.glob("*.png")) == ["gfp.png", "occipital.png"]
        assert_png(sheets / "gfp.png")
    notes = summary_notes(run)
    assert any(n.startswith("predict_eeg/pictures: not applied to words") for n in notes), notes


def test_a_new_window_reruns_only_the_eeg_predictions(eeg_run, tmp_path):
    run, config, facts = eeg_run
    changed = copy.deepcopy(config)
    changed["predict"]["latency_window"] = None
    write_config(run / "config.yaml", changed)
    try:
        jobs = planned_jobs(run)
    finally:
        write_config(run / "config.yaml", config)
    n = len(facts["subjects"])  # and the report's thumbnails of their new contact sheets
    assert jobs == {"predict_eeg": n, "predict_eeg_thumbnails": n, "all": 1}, jobs

"""Single-trial encoding in the workflow: betas -> held-out stimuli -> scores -> summary."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from workflow_helpers import REPO, planned_jobs, snakemake, trial_config, write_config

from neuroflow.artifacts import read_provenance
from neuroflow.config import load_schema, validate_config
from neuroflow.workflow import WorkflowPlan, stage_versions


def _versions_changed(before: dict, after: dict) -> set[str]:
    a, b = stage_versions(before), stage_versions(after)
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def test_trial_versions_and_paths() -> None:
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    off = validate_config({}, schema)
    assert not [k for k in stage_versions(off) if k.startswith("trial_")]
    on = validate_config({"single_trial": {"enabled": True}}, schema)
    # layer sweeps expanded: one model per layer
    models = [k.split("/", 1)[1] for k in stage_versions(on) if k.startswith("encoding/")]
    trial_keys = {f"trial_{s}/{m}" for s in ("encoding", "evaluation") for m in models}
    # single trials add their betas, the trial models and the identification from betas
    assert _versions_changed(off, on) == {
        "single_trial",
        *trial_keys,
        "decoding_fmri",
        "summary",
        "geometry",
    }

    # the split of the trial models reaches only them; the run-based split only the runs
    changed = copy.deepcopy(on)
    changed["encoding"]["trial_split"]["cv"] = {"grouped_kfold": 3}
    assert _versions_changed(on, changed) == {*trial_keys, "summary", "geometry"}
    changed = copy.deepcopy(on)
    changed["encoding"]["delays"]["method"] = "fir"
    assert not {k for k in _versions_changed(on, changed) if k.startswith("trial_")}
    changed = copy.deepcopy(on)
    changed["encoding"]["alphas"]["num"] = 5
    assert trial_keys <= _versions_changed(on, changed)

    plan = WorkflowPlan(on)
    store = plan.trial_encoding_store("visual", "01")
    assert store.parts[-3:-1] == (
        "trial_encoding",
        f"visual-{plan.versions['trial_encoding/visual']}",
    )
    assert plan.trial_scores_store("visual", "01").name == "sub-01_scores.zarr"
    assert plan.trial_scores_store("joint", "02") in plan.all_scores_stores()
    assert plan.trial_encoding_config("joint")["trial_split"] == {
        "test": "auto",
        "test_fraction": 0.2,
        "seed": 0,
        "cv": {"grouped_kfold": 5},
    }
    assert "delays" not in plan.trial_encoding_config("joint")
    assert "trial_split" not in plan.encoding_config("joint")
    # the default split trains on most stimuli; a split that tests on more gets a note
    assert not [n for n in plan.notes if "tests on" in n]
    stimuli = sorted({s for ids in plan.design.run_stimuli.values() for s in ids if s})
    lopsided = copy.deepcopy(on)
    lopsided["encoding"]["trial_split"]["test"] = stimuli[: len(stimuli) * 3 // 4]
    notes = [n for n in WorkflowPlan(lopsided).notes if "tests on" in n]
    n_test = len(stimuli) * 3 // 4
    assert len(notes) == 1 and notes[0].startswith(
        f"trial_encoding: sub-01 trains on {len(stimuli) - n_test} stimuli and tests on {n_test} "
        "(trial_split.test (a list)); trial_split.test: auto holds out"
    ), notes


@pytest.mark.workflow
@pytest.mark.slow
def test_trial_encoding_runs_end_to_end(tmp_path: Path) -> None:
    config = trial_config()
    models = list(config["encoding"]["models"])
    write_config(tmp_path / "config.yaml", config, "# tiny demo, single-trial models\n")
    snakemake(tmp_path, "--cores", "2")
    results = tmp_path / "results"

    encoded = sorted((results / "trial_encoding").glob("*/sub-*_encoding.zarr"))
    scored = sorted((results / "trial_evaluation").glob("*/sub-*_scores.zarr"))
    assert len(encoded) == len(scored) == len(models)
    for path in encoded:
        ds = xr.open_zarr(path)
        assert ds["y_pred"].dims == ("stimulus", "voxel")
        assert ds["y_test"].dims == ("repeat", "stimulus", "voxel")
        assert ds.sizes["repeat"] == 2 and ds.sizes["stimulus"] >= 5
        assert all(str(s).startswith("shots/") for s in ds["stimulus"].values)
        assert ds.attrs["model"].endswith("_trials") and ds.attrs["design"] == "trials"
        record = read_provenance(path)
        assert record["stage"].startswith("trial_encoding/")
        assert any("single_trial" in str(i.get("stage")) for i in record["inputs"])
        # the tiny demo's 21 repeated shots are tested, its 41 others trained on
        assert ds.attrs["split_note"] == "" and ds.attrs["n_train_stimuli"] == 41
        assert np.isfinite(ds["test_onset"].values).all()
    for path in scored:
        ds = xr.open_zarr(path)
        assert np.isfinite(ds["r"].values).mean() > 0.9
        assert ds.attrs["permutation_block_samples"] == 1
        assert ds.attrs["noise_ceiling_min_separation_s"] == 12.0
        # pure-noise voxels: for most of them the ceiling's interval holds 0
        noise = (ds["roi"] == "noise").values
        assert noise.sum() >= 10
        low = ds["noise_ceiling_r_low"].values[noise]
        assert np.median(low) == 0.0 and (low <= ds["noise_ceiling_r"].values[noise]).all()
        assert ds["exceeds_ceiling"].dtype == bool

    table = next(results.glob("summary/*/scores.tsv"))
    scores = pd.read_csv(table, sep="\t", na_values=["n/a"], keep_default_na=False)
    subject_rows = scores[(scores["statistic"] == "value") & (scores["metric"] == "mean_r")]
    trials = subject_rows[subject_rows["analysis"] == "trial_encoding"]
    runs = subject_rows[subject_rows["analysis"] == "encoding"]
    for model in models:
        rows = trials[trials["model"] == f"{model}_trials"]
        assert set(rows["roi"]) >= {"early_visual", "semantic", "noise", "all"}
        assert len(rows) == len(set(rows["roi"]))  # one row per subject x model x ROI
        assert len(runs[runs["model"] == model])  # run-based models stay
    visual = trials[trials["model"] == "visual_trials"].set_index("roi")["value"]
    assert visual.loc["early_visual"] > visual.loc["noise"]

    assert planned_jobs(tmp_path) == {}

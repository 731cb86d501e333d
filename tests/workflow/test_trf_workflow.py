"""EEG temporal response functions in the workflow: continuous EEG -> TRF -> summary."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from workflow_helpers import REPO, TINY_CONFIG, planned_jobs, snakemake, write_config

from neuroflow.artifacts import read_provenance
from neuroflow.config import load_schema, validate_config
from neuroflow.workflow import WorkflowPlan, stage_versions


def _trf_config(**trf: object) -> dict:
    """The tiny demo with one model (image statistics) and TRFs switched on."""
    config = copy.deepcopy(TINY_CONFIG)
    config["features"]["extractors"] = [
        e for e in config["features"]["extractors"] if e["name"] == "image_statistics"
    ]
    config["encoding"]["models"] = {"visual": config["encoding"]["models"]["visual"]}
    config["eeg_encoding"] = {"trf": {"enabled": True, **trf}}
    return config


def _plan(config: dict) -> WorkflowPlan:
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    return WorkflowPlan(validate_config(copy.deepcopy(config), schema))


def _targets(plan: WorkflowPlan) -> list[str]:
    """The summary table (which gathers the epochs models too) and the TRF stores."""
    return [str(plan.summary_dir() / "scores.tsv"), *map(str, plan.all_trf_stores())]


def test_trf_tmax_changes_only_trf_versions(tmp_path: Path) -> None:
    on = _plan(_trf_config()).config
    changed = copy.deepcopy(on)
    changed["eeg_encoding"]["trf"]["tmax"] = 0.4
    a, b = stage_versions(on), stage_versions(changed)
    # geometry sets the layers' metrics beside the summary's scores, so it follows the summary
    assert {k for k in a if a[k] != b[k]} == {"eeg_trf/visual", "summary", "geometry"}
    assert not {k for k in a if a[k] != b[k] and k.startswith("eeg_encoding/")}

    # a dry run schedules one TRF per recording and model, and none when switched off
    write_config(tmp_path / "config.yaml", _trf_config())
    jobs = planned_jobs(tmp_path)
    assert jobs["fit_eeg_trf"] == len(_plan(_trf_config()).eeg_recordings)
    off = _trf_config(enabled=False)
    write_config(tmp_path / "config.yaml", off)
    assert "fit_eeg_trf" not in planned_jobs(tmp_path)


@pytest.mark.workflow
@pytest.mark.slow
def test_trf_runs_end_to_end(tmp_path: Path) -> None:
    config = _trf_config()
    plan = _plan(config)
    write_config(tmp_path / "config.yaml", config, "# tiny demo, TRF on continuous EEG\n")
    snakemake(tmp_path, *_targets(plan), "--cores", "2")

    stores = [tmp_path / p for p in plan.all_trf_stores()]
    assert stores and all(p.is_dir() for p in stores)
    for path in stores:
        ds = xr.open_zarr(path)
        assert ds["trf"].dims == ("lag", "feature", "channel")
        assert ds.sizes["channel"] == TINY_CONFIG["demo"]["eeg"]["n_channels"]
        lags = ds["lag"].values
        assert lags[0] == pytest.approx(-0.1) and lags[-1] == pytest.approx(0.6)
        assert ds["cv_score"].dims == ("channel",) and ds["trf_power"].dims == ("lag",)
        assert np.isfinite(ds["cv_score"].values).all()
        assert ds.attrs["model"] == "visual" and ds.attrs["design"] == "trf"
        record = read_provenance(path)
        assert record["stage"] == "eeg_trf/visual"
        assert record["version"] == plan.versions["eeg_trf/visual"]
        assert "enabled" not in record["config"]["trf"]
        assert any("preprocess_eeg" in str(i.get("stage")) for i in record["inputs"])
    # the epochs models beside them are their own stage, with their own summary rows
    assert (tmp_path / "results" / "eeg_encoding").is_dir()

    table = tmp_path / plan.summary_dir() / "scores.tsv"
    scores = pd.read_csv(table, sep="\t", dtype={"subject": str}, na_values=["n/a"])
    trf = scores[scores["analysis"] == "trf"]
    assert set(trf["metric"]) == {"cv_score_mean", "cv_score_max", "peak_latency"}
    assert set(trf.loc[trf["statistic"] == "value", "subject"]) == {"01"}
    assert set(trf["model"]) == {"visual"} and set(trf["roi"]) == {"eeg"}
    assert len(scores[scores["analysis"] == "encoding"])  # the other rows stay
    assert set(scores.loc[scores["analysis"] == "eeg_encoding", "model"]) == {"visual"}
    assert (tmp_path / plan.summary_dir() / "plots" / "trf_visual_power.png").exists()

    assert planned_jobs(tmp_path, *_targets(plan)) == {}
    # a TRF setting reruns the TRFs and the summary only
    changed = _trf_config(tmax=0.4)
    write_config(tmp_path / "config.yaml", changed)
    assert planned_jobs(tmp_path, *_targets(_plan(changed))) == {
        "fit_eeg_trf": len(stores),
        "summarize_scores": 1,
    }

"""Cross-subject EEG decoding through ``snakemake`` on four subjects with their own mixing.

The generated EEG-only oddball dataset plants one P300-like effect in every subject, seen
through each subject's own symmetric positive-definite channel mixing (the differences
of heads and caps that a decoder trained on other subjects has to bridge). Every
held-out subject must be decoded above chance, and Euclidean alignment must improve the
mean over held-out subjects.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from dataset_shapes import make_eeg_only
from shape_helpers import run_shape, summary_dir, summary_table
from workflow_helpers import planned_jobs, write_config

from neuroflow.artifacts import read_provenance
from neuroflow.variables import undescribed

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SUBJECTS = ["01", "02", "03", "04"]
#: Only what the test needs: no QC, no within-subject tests, no bad-channel search (the
#: mixing makes every channel look unlike its neighbours).
CONFIG = {
    "qc": {"enabled": False},
    "preprocess_eeg": {"find_noisy_channels": False, "find_uncorrelated_channels": False},
    "decoding": {"classification": {"n_permutations": 0, "generalization": False}},
}


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("cross_subject")
    facts = make_eeg_only(
        root / "bids",
        seed=0,
        n_events=60,
        p300_uv=15.0,
        noise_uv=4.0,
        sensor_noise_uv=6.0,
        channel_mixing=1.0,
        formats=("BrainVision",) * len(SUBJECTS),
    )
    config = {"dataset": {"source": "bids", "bids_root": str(root / "bids")}, **CONFIG}
    run_shape(root / "run", config)
    return root / "run", facts


def _store(run: Path) -> tuple[Path, xr.Dataset]:
    (path,) = (run / "results" / "decoding_cross_subject").rglob("*.zarr")
    return path, xr.open_zarr(path)


def test_held_out_subjects_decode_above_chance_and_alignment_helps(cross_run):
    run, facts = cross_run
    assert facts["subjects"] == SUBJECTS
    path, ds = _store(run)
    assert path.name == "decoding_eeg_cross_subject.zarr"
    assert read_provenance(path)["stage"] == "decoding_cross_subject"
    assert undescribed(ds) == []
    assert list(ds["held_out"].values) == SUBJECTS
    assert list(ds["alignment"].values) == ["none", "euclidean"]
    assert ds.attrs["cv"] == "leave-one-subject-out"
    assert ds.attrs["classes"] == ["deviant", "standard"]
    assert ds.sizes["channel"] == len(facts["ch_names"])
    latency, width = facts["planted"]["latency"], facts["planted"]["width"]
    near = ds["cross_subject_score"].sel(time=slice(latency - width, latency + width))
    near = near.mean("time")
    whole = ds["cross_subject_epoch_score"].sel(classifier="epoch_lda")
    print("time-resolved, around the P300:\n", near.to_pandas().round(3))
    print("epoch_lda:\n", whole.to_pandas().round(3))
    chance = ds["cross_subject_chance"].values
    np.testing.assert_array_equal(chance, 0.5)
    # every held-out subject above chance, with alignment
    assert (near.sel(alignment="euclidean").values > 0.6).all()
    assert (whole.sel(alignment="euclidean").values > 0.65).all()
    # alignment improves the mean over held-out subjects
    for scores in (near, whole):
        gain = float(scores.sel(alignment="euclidean").mean() - scores.sel(alignment="none").mean())
        assert gain > 0.03, gain


def test_summary_rows_and_figure(cross_run):
    run, _ = cross_run
    _, ds = _store(run)
    table = summary_table(run)
    rows = table[table["analysis"].str.startswith("cross_subject_")]
    assert set(rows["analysis"]) == {"cross_subject_none", "cross_subject_euclidean"}
    assert set(rows["subject"]) == {*SUBJECTS, "group"}
    group = rows[(rows["subject"] == "group") & (rows["model"] == "epoch_lda")]
    assert set(group["statistic"]) == {"mean"} and set(group["n_subjects"]) == {4}
    means = group.set_index("analysis")["value"]
    expected = ds["cross_subject_epoch_score_mean"].sel(classifier="epoch_lda")
    assert means["cross_subject_euclidean"] == pytest.approx(
        float(expected.sel(alignment="euclidean"))
    )
    assert means["cross_subject_euclidean"] > means["cross_subject_none"]
    assert (summary_dir(run) / "plots" / "decoding_cross_subject.png").stat().st_size > 1000


def test_cross_subject_settings_rerun_only_that_stage(cross_run, tmp_path):
    run, _ = cross_run
    work = tmp_path / "run"
    shutil.copytree(run, work, symlinks=True)
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["decoding"]["cross_subject"] = {"window": [0.2, 0.5]}
    write_config(work / "config.yaml", config)
    assert planned_jobs(work) == {
        "decode_eeg_cross_subject": 1,
        "summarize_scores": 1,
        "summary_thumbnails": 1,  # the report's copies of the new summary figures
        "all": 1,
    }

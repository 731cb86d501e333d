"""fMRI identification across sessions through ``snakemake`` on NSD-like betas.

Two subjects, two sessions each, of single-trial betas imported from NIfTI and scaled
int16 HDF5 (:func:`dataset_shapes.make_nsd_like`): the shared test images are shown in
both sessions, every other image once. With ``decoding.fmri.cv: leave-one-session-out``
each session's presentations of the test images are decoded by decoders trained on the
subject's other session (its training images only):

- the store keeps every held-out session's scores next to the subject's mean, and the
  subject's score is that mean;
- the planted ``early_visual`` ROI identifies the held-out images in every session, the
  ``other`` ROI does not;
- switching back to within-subject identification reruns only fMRI decoding and the
  summary.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from dataset_shapes import make_nsd_like
from shape_helpers import open_stores, run_shape, summary_dir, summary_table
from workflow_helpers import planned_jobs, write_config

from neuroflow.variables import undescribed

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def session_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("fmri_sessions")
    facts = make_nsd_like(root / "bids", seed=3, n_test=16, n_repeats=4, snr=2.5)
    config = {
        "dataset": {"source": "betas", "bids_root": str(root / "bids")},
        "preprocess_fmri": {
            "rois": {
                "atlas": "derivatives/rois/sub-{subject}_desc-rois_dseg.nii.gz",
                "labels": "derivatives/rois/rois.tsv",
            }
        },
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        "evaluation": {"permutation": {"n_permutations": 20}},
        "decoding": {
            "contrastive": {"enabled": False},
            "identification": {"n_permutations": 200},
            "fmri": {"cv": "leave-one-session-out"},
        },
        "rsa": {"enabled": False},
        "geometry": {"enabled": False},
        "predict": {"stimulus_sets": {}},
    }
    run_shape(root / "run", config)
    return root / "run", facts


def test_sessions_held_out_in_turn(session_run):
    run, facts = session_run
    (ds,) = open_stores(run, "decoding_fmri").values()
    assert undescribed(ds) == []
    assert ds.attrs["cv"] == "leave-one-session-out" and ds.attrs["held_out_unit"] == "session"
    assert [str(s) for s in ds["subject"].values] == facts["subjects"]
    assert [str(s) for s in ds["session"].values] == facts["sessions"]
    n_test = ds["n_test_stimuli_session"].to_pandas()
    print("test images per held-out session:\n", n_test)
    # the shared test images, each shown in both sessions of every subject
    assert (n_test.values >= len(facts["test_images"]) // 2).all()
    assert (n_test.sum(axis=1).values == ds["n_test_stimuli"].values).all()
    per_session = ds["identification_session"].sel(feature_space="image_statistics")
    mean = ds["identification"].sel(feature_space="image_statistics")
    np.testing.assert_allclose(mean.values, per_session.mean("session").values)
    rank = per_session.sel(decoder="ridge", metric="mean_rank")
    print("mean rank per session:\n", rank.to_series().round(2))
    chance = ds["identification_chance"].sel(feature_space="image_statistics", metric="mean_rank")
    p = ds["identification_session_p"].sel(
        feature_space="image_statistics", decoder="ridge", metric="mean_rank"
    )
    print("p per session:\n", p.to_series().round(3))
    # every held-out session of every subject: identified from early_visual, not from other
    assert (p.sel(roi="early_visual") < 0.05).all(), p.to_series()
    assert (rank.sel(roi="early_visual") < 0.75 * chance.sel(roi="early_visual")).all()
    assert (rank.sel(roi="early_visual") < rank.sel(roi="other")).all()
    # noise only: no subject's mean over sessions far beyond its label-shuffle null (a
    # 0.05 threshold would fail one noise ROI in twenty by design)
    assert (ds["identification_p"].sel(roi="other", metric="mean_rank") > 0.01).all()


def test_summary_rows_and_rerun_scope(session_run, tmp_path):
    run, facts = session_run
    table = summary_table(run)
    rows = table[(table["analysis"] == "identification_fmri") & (table["metric"] == "mean_rank")]
    rows = rows.set_index(["subject", "roi"])
    for subject in facts["subjects"]:
        early, other = rows.loc[(subject, "early_visual")], rows.loc[(subject, "other")]
        assert early["value"] < early["chance"] and early["p_value"] < 0.05
        assert other["p_value"] > 0.01 and early["value"] < other["value"]
    # group rows: the subjects' mean, tested over subjects (one-sided t-test)
    group = table[(table["analysis"] == "identification_fmri") & (table["subject"] == "group")]
    group = group[group["metric"] == "mean_rank"].set_index("roi")
    assert (group["statistic"] == "mean").all() and (group["n_subjects"] == 2).all()
    means = rows.groupby(level="roi")["value"].mean()
    np.testing.assert_allclose(group.loc[means.index, "value"], means.values)
    assert group["p_value"].between(0, 1).all()
    assert group.loc["early_visual", "p_value"] < group.loc["other", "p_value"]
    plots = {p.name for p in (summary_dir(run) / "plots").glob("*.png")}
    assert "decoding_fmri_identification.png" in plots, plots
    work = tmp_path / "run"
    shutil.copytree(run, work, symlinks=True)
    config = yaml.safe_load((work / "config.yaml").read_text())
    config["decoding"]["fmri"]["cv"] = "within-subject"
    write_config(work / "config.yaml", config)
    assert planned_jobs(work) == {
        "decode_fmri": 1,
        "summarize_scores": 1,
        "summary_thumbnails": 1,  # the report's copies of the new summary figures
        "all": 1,
    }

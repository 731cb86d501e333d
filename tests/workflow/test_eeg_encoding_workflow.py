"""EEG encoding finds a planted image-statistics response, through ``snakemake``.

A ds000117-like EEG session (two subjects, two runs each, every image shown twice,
immediately or a few trials later) whose occipital P1 at 100 ms grows with the image's
luminance statistics. With the default ``eeg_encoding`` settings every image is scored
by cross-validation over images, the cluster permutation test finds the response, and
``scores.tsv`` reports each subject's peak at 100 ms with its cluster p-value and its
bootstrap interval over images, and the group's with an interval over subjects.
"""

from __future__ import annotations

import numpy as np
import pytest
from dataset_shapes import make_ds000117_like
from shape_helpers import open_stores, run_shape, summary_table

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

TOLERANCE = 0.015  # s


@pytest.fixture(scope="module")
def faces_run(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    root = tmp_path_factory.mktemp("eeg_encoding")
    facts = make_ds000117_like(root / "bids", seed=0, eeg_feature_uv=6.0)
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids"), "sessions": ["eeg"]},
        "preprocess_eeg": {"event_column": "stim_type"},
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        # only the analysis under test
        "decoding": {"enabled": False},
        "rsa": {"enabled": False},
        "qc": {"enabled": False},
        "geometry": {"enabled": False},
    }
    return run_shape(root / "run", config), facts


def test_planted_p1_is_significant_at_100_ms_in_each_subject(faces_run):
    run, facts = faces_run
    planted = facts["planted"]["p1_latency"]
    stores = open_stores(run, "eeg_encoding")
    assert len(stores) == len(facts["subjects"])
    for ds in stores.values():
        n_images = ds.attrs["n_train_stimuli"]
        # every image is scored once, over image-grouped folds
        assert ds.attrs["test_design"] == "cross-validated"
        assert ds.attrs["n_test_stimuli"] == n_images == ds.sizes["stimulus"]
        assert ds.attrs["n_test_repeats"] == 2
        # the recordings carry no electrode positions: clusters run along latency
        assert ds.attrs["cluster_adjacency"] == "latency"
        # the permutations refit every fold and choose its penalties again (24 image
        # statistics, r2 scoring, 5 inner folds)
        assert ds.attrs["permutation_penalties"] == "chosen again"
    table = summary_table(run)
    rows = table[(table["analysis"] == "eeg_encoding") & (table["model"] == "visual")]
    rows = rows.set_index(["subject", "metric"])
    for subject in facts["subjects"]:
        peak = rows.loc[(subject, "peak_latency")]
        assert peak["statistic"] == "value"
        assert abs(peak["value"] - planted) <= TOLERANCE, (subject, peak["value"])
        assert peak["p_value"] <= 0.05 and not peak["inconclusive"], subject
        lower = rows.loc[(subject, "peak_latency_ci_lower"), "value"]
        upper = rows.loc[(subject, "peak_latency_ci_upper"), "value"]
        assert lower <= planted <= upper, (subject, lower, upper)
        assert rows.loc[(subject, "peak_r"), "p_value"] == peak["p_value"]
    group = rows.loc[("group", "peak_latency")]
    assert group["statistic"] == "mean" and group["n_subjects"] == 2
    assert abs(group["value"] - planted) <= TOLERANCE
    assert rows.loc[("group", "peak_latency_ci_lower"), "value"] <= group["value"]
    assert rows.loc[("group", "peak_latency_ci_upper"), "value"] >= group["value"]
    # the scores the evaluation stage wrote peak there too
    for ds in open_stores(run, "eeg_evaluation").values():
        best = ds["r"].max("channel")
        latency = float(
            best["latency"][int(np.nanargmax(np.where(best["latency"] >= 0, best, -1)))]
        )
        assert abs(latency - planted) <= TOLERANCE

"""EEG RSA with channel groups, bootstrap intervals and model-time RSA, through ``snakemake``.

An EEG-only dataset (2 subjects x 2 runs, 32 channels) whose events show video clips
(``.npy`` frame stacks of 1 s at 24 fps): image statistics sampled at 8 frames per second
give one row per frame, so the ``rsa_eeg`` stage runs the model time x brain time RSA
beside the time courses, over every channel and two channel groups, with bootstrap
intervals at every time point. Every other analysis is switched off.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dataset_shapes import make_eeg_only
from shape_helpers import open_stores, run_shape, summary_dir, summary_table

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

N_CLIPS, N_FRAMES, FRAME_RATE = 9, 24, 8.0
GROUPS = {"occipital": ["O1", "Oz", "O2"], "parietal": ["Pz", "CP1", "CP2"]}


def _with_clips(root, rng) -> None:
    """Give every event of an EEG-only dataset one of the clips and write the clips."""
    clips = root / "stimuli" / "clips"
    clips.mkdir(parents=True)
    for k in range(N_CLIPS):
        drift = np.linspace(0, 60 * rng.uniform(-1, 1), N_FRAMES)[:, None, None]
        frames = 40 + 20 * k + drift + rng.normal(0, 25, (N_FRAMES, 16, 16))
        np.save(clips / f"clip{k}.npy", np.clip(frames, 0, 255).astype(np.uint8))
    for table in sorted(root.rglob("*_events.tsv")):
        events = pd.read_csv(table, sep="\t", dtype=str, keep_default_na=False)
        events["stim_file"] = [f"clips/clip{i % N_CLIPS}.npy" for i in range(len(events))]
        events.to_csv(table, sep="\t", index=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("rsa_eeg")
    make_eeg_only(root / "bids", seed=5, n_events=54)
    _with_clips(root / "bids", np.random.default_rng(5))
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "features": {
            "extractors": [
                {"name": "frames", "extractor": "image_statistics", "frame_rate": FRAME_RATE}
            ]
        },
        "encoding": {"models": {"frames": {"feature_spaces": ["frames"]}}},
        "decoding": {"enabled": False},
        "eeg_encoding": {"enabled": False},
        "qc": {"enabled": False},
        "geometry": {"enabled": False},
        "rsa": {
            "channel_groups": GROUPS,
            "bootstrap": {"n_bootstraps": 200},
        },
    }
    return run_shape(root / "run", config)


def test_store_has_channel_groups_bootstrap_and_model_time(run):
    (ds,) = open_stores(run, "rsa", "rsa_eeg.zarr").values()
    assert list(ds["channel_group"].values) == ["all", "occipital", "parietal"]
    assert ds.attrs["channel_groups"] == GROUPS
    assert ds["cross_temporal"].dims == ("subject", "channel_group", "comparison", "layer", "time")
    assert ds["brain_rdm"].sizes["channel_group"] == 3
    # 2 subjects, 9 clips, 126 time points: cheap enough to resample stimuli everywhere
    assert ds.attrs["bootstrap_over"] == "both" and ds.attrs["bootstrap_times"] == "all"
    assert ds.attrs["n_bootstraps"] == 200 and ds.attrs["inference_comparison"] == "spearman"
    ci = ds["model_similarity_ci"]
    assert ci.dims == ("bound", "channel_group", "layer", "time")
    assert (ci.sel(bound="lower") <= ci.sel(bound="upper")).all()
    mean = ds["cross_temporal_mean"].isel(comparison=0)
    inside = (ci.sel(bound="lower") <= mean + 1e-9) & (mean <= ci.sel(bound="upper") + 1e-9)
    assert float(inside.mean()) > 0.95
    assert ds["layer_comparison_p"].dims == ("channel_group", "layer_a", "layer_b")
    # frame-level features: the model time x brain time map of every channel group
    assert ds.attrs["model_time"] == "computed"
    assert list(ds["frame_layer"].values) == ["frames"]
    np.testing.assert_allclose(ds["model_time"].values, np.arange(8) / FRAME_RATE)
    sim = ds["model_time_similarity"]
    assert sim.dims == ("subject", "channel_group", "frame_layer", "model_time", "time")
    assert np.isfinite(sim.values).all()
    # the peak's max-statistic test (200 permutations by default) and bootstrap (2
    # subjects: over stimuli); no model-to-brain time line without a significant peak
    assert ds.attrs["model_time_n_permutations"] == 200
    assert ds.attrs["model_time_bootstrap_over"] == "stimuli"
    p = ds["model_time_peak_p"].values
    assert p.shape == (3, 1) and ((p >= 1 / 201) & (p <= 1)).all()
    inconclusive = ds["model_time_inconclusive"].values
    np.testing.assert_array_equal(inconclusive, p > 0.05)
    for name in ("lag", "slope"):
        np.testing.assert_array_equal(np.isnan(ds[f"model_time_{name}"].values), inconclusive)
    assert ds["model_time_null_max"].dims == ("permutation", "channel_group", "frame_layer")
    ci = ds["model_time_peak_brain_time_ci"]
    assert ci.dims == ("bound", "channel_group", "frame_layer")
    assert (ds["model_time_peak_brain_time"] >= 0).all() and (ci >= 0).all()
    assert (ci.sel(bound="lower") <= ci.sel(bound="upper")).all()


def test_summary_rows_and_figures(run):
    table = summary_table(run)
    rows = table[table["analysis"] == "rsa_eeg"]
    assert set(rows["roi"]) == {"eeg", "occipital", "parietal"}
    group = rows[rows["subject"] == "group"]
    for roi in ("eeg", "occipital", "parietal"):
        here = group[(group["roi"] == roi) & (group["metric"] == "spearman_peak")]
        stats = set(here["statistic"])
        assert stats == {"mean", "bootstrap_ci_lower", "bootstrap_ci_upper", "bootstrap_se"}
        value = dict(zip(here["statistic"], here["value"], strict=True))
        assert value["bootstrap_ci_lower"] <= value["mean"] <= value["bootstrap_ci_upper"]
    model_time = group[group["metric"].str.startswith("spearman_model_time_")]
    # channel groups x (peak, its 2 times, slope, lag) x (mean, 2 bootstrap limits)
    assert len(model_time) == 3 * 5 * 3
    peaks = model_time[
        (model_time["metric"] == "spearman_model_time_peak") & (model_time["statistic"] == "mean")
    ]
    assert len(peaks) == 3 and peaks["p_value"].between(1 / 201, 1).all()
    flagged = peaks.set_index("roi")["inconclusive"].astype(str) == "True"
    for roi, inconclusive in flagged.items():
        lines = model_time[
            (model_time["roi"] == roi)
            & model_time["metric"].isin(["spearman_model_time_lag", "spearman_model_time_slope"])
        ]
        assert lines["value"].isna().all() == inconclusive
    assert (rows["metric"].str.endswith("_peak_latency") & (rows["value"] < 0)).sum() == 0
    plots = summary_dir(run) / "plots"
    assert (plots / "rsa_eeg_cross_temporal.png").exists()
    assert (plots / "rsa_eeg_model_time.png").exists()

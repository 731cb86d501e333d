"""The decode_eeg and rsa stages end to end on small synthetic stores."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.analysis_inputs import event_responses
from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.decoding import decode_eeg
from neuroflow.decoding.stage import resolve_config
from neuroflow.evaluation.analysis_plotting import (
    plot_alignment,
    plot_cross_temporal,
    plot_generalization,
    plot_rdm,
    plot_time_courses,
)
from neuroflow.evaluation.analysis_summary import append_rows, decoding_rows
from neuroflow.evaluation.rsa_summary import rsa_rows
from neuroflow.evaluation.summary import TABLE_COLUMNS
from neuroflow.rsa import rsa_eeg, rsa_fmri

N_TRAIN, N_TEST, N_REP, N_CH, N_T = 30, 10, 3, 6, 12


def _features(tmp_path, rng, name, n_feat, ids):
    F = rng.standard_normal((len(ids), n_feat)).astype(np.float32)
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), F)},
        coords={"stimulus": np.array(ids, dtype=object), "feature": np.arange(n_feat)},
        attrs={"feature_set": name, "model": f"model-{name}"},
    )
    return write_dataset(ds, tmp_path / f"{name}.zarr", provenance={}), F


def _epochs(tmp_path, rng, subject, F, ids, latency):
    stim_idx = np.r_[np.arange(N_TRAIN), np.repeat(np.arange(N_TRAIN, N_TRAIN + N_TEST), N_REP)]
    rng.shuffle(stim_idx)
    times = np.linspace(-0.1, 0.45, N_T)
    topo = rng.standard_normal((F.shape[1], N_CH))
    bump = np.exp(-0.5 * ((times - latency) / 0.04) ** 2)
    data = 0.5 * rng.standard_normal((stim_idx.size, N_CH, N_T))
    data += (F[stim_idx] @ topo)[:, :, None] * bump
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), data.astype(np.float32))},
        coords={
            "stimulus": ("epoch", np.array(ids, dtype=object)[stim_idx]),
            "condition": ("epoch", np.where(stim_idx < N_TRAIN, "train", "test").astype(object)),
            "channel": np.array([f"E{i}" for i in range(N_CH)], dtype=object),
            "time": times,
        },
        attrs={"entities": {"subject": subject}, "sfreq": 20.0},
    )
    return write_dataset(ds, tmp_path / f"sub-{subject}_epo.zarr", provenance={})


@pytest.fixture
def eeg_inputs(tmp_path, rng):
    ids = [f"img-{i:03d}" for i in range(N_TRAIN + N_TEST)]
    vis, F = _features(tmp_path, rng, "visual", 4, ids)
    sem, _ = _features(tmp_path, rng, "semantic", 5, ids)
    epochs = [_epochs(tmp_path, rng, s, F, ids, 0.1) for s in ("01", "02")]
    return epochs, {"visual": vis, "semantic": sem}


CFG = {
    "classification": {"n_permutations": 4, "generalization_permutations": 2},
    "features": {"n_components": 3, "n_permutations": 30},
    "identification": {"n_permutations": 50, "window": [0.0, 0.3]},
    "contrastive": {"max_epochs": 30, "patience": 5, "device": "cpu"},
    "n_splits": 3,
    "decim": 1,
}


@pytest.mark.slow
def test_decode_eeg_stage(tmp_path, eeg_inputs, caplog):
    epochs, features = eeg_inputs
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        out = decode_eeg(
            epochs=epochs,
            features=features,
            output=tmp_path / "dec.zarr",
            config=CFG,
            provenance={"stage": "decode_eeg"},
        )
    ds = open_dataset(out)
    # 4, 2 and 30 permutations cannot reach p <= 0.05 reliably, nor 2 subjects' 4 flips
    warned = [r.getMessage() for r in caplog.records]
    for key, n in (
        ("classification.n_permutations", 4),
        ("classification.generalization_permutations", 2),
        ("features.n_permutations", 30),
    ):
        msg = (
            f"decode_eeg: `decoding.{key}` = {n} cannot reach p <= 0.05 reliably: at least 99 "
            "are needed; clusters are reported as inconclusive."
        )
        assert warned.count(msg) == 2  # once per subject
    assert set(ds.attrs["inconclusive"]) == {
        "class_cluster_p",
        "generalization_cluster_p",
        "feature_cluster_p",
        "group_class_cluster_p",
        "group_feature_cluster_p",
    }
    assert "2 subjects allow 4 sign flips" in ds.attrs["inconclusive"]["group_class_cluster_p"]
    # 'test' images are shown 3 times, 'train' images once: no other labelling exists
    assert "sub-01: the 'condition' labels" in ds.attrs["inconclusive"]["class_cluster_p"]
    assert "sub-02: the 'condition' labels" in ds.attrs["inconclusive"]["class_cluster_p"]
    for name in ("class", "generalization", "feature"):
        assert ds[f"{name}_inconclusive"].values.all()
    assert ds.attrs["cluster_alpha"] == 0.05
    for name in ds.attrs["inconclusive"]:
        assert np.isnan(ds[name].values).all() and f"{name}_raw" in ds
    assert np.isfinite(ds["feature_cluster_p_raw"].values).any()
    assert np.isnan(ds["feature_onset_latency"].values).all()
    assert ds.sizes["subject"] == 2 and ds.sizes["time"] == N_T
    assert ds["identification"].dims == ("subject", "feature_space", "decoder", "metric")
    assert list(ds["metric"].values) == ["top1", "top5", "mean_rank"]
    assert ds["generalization"].shape == (2, N_T, N_T)
    assert ds["class_null"].shape == (2, 4, N_T)
    assert "group_feature_cluster_p" in ds
    vis = ds["identification"].sel(feature_space="visual", decoder="ridge", metric="top1")
    assert (vis > 0.3).all()  # chance 0.1
    peak = ds["feature_peak_latency"].sel(feature_space="visual").values
    assert np.all(np.abs(peak - 0.1) < 0.06)
    table = decoding_rows(ds.load(), {"visual": ["pool"]})
    assert list(table.columns) == list(TABLE_COLUMNS)
    # a compared feature space is the model, spelled with its layer
    spaced = table[table["analysis"] != "classification"]
    assert set(spaced["feature_space"]) == set(spaced["model"])
    assert "visual:pool" in set(spaced["feature_space"])
    assert table.loc[table["analysis"] == "classification", "feature_space"].isna().all()
    tested = table["metric"].isin(["peak_r", "peak_balanced_accuracy"])
    assert table.loc[tested, "inconclusive"].astype(bool).all()
    assert table.loc[tested, "p_value"].isna().all()
    assert table.loc[~tested, "inconclusive"].isna().all()
    group = table[table["subject"] == "group"]
    assert len(group) == 3 and (group["statistic"] == "mean").all()
    assert (group["n_subjects"] == 2).all()
    tsv = append_rows(table, tmp_path / "scores.tsv")
    append_rows(pd.DataFrame({"subject": ["x"], "mean_r": [0.1]}), tsv)
    back = pd.read_csv(tsv, sep="\t")
    assert len(back) == len(table) + 1 and "mean_r" in back.columns
    p = plot_time_courses(
        ds["time"].values,
        {"visual": ds["feature_score"].isel(subject=0, feature_space=0).values},
        tmp_path / "tc.png",
        significant={"visual": ds["feature_cluster_p"].isel(subject=0, feature_space=0) <= 0.05},
        chance=0.0,
    )
    assert p.stat().st_size > 0
    assert plot_generalization(
        ds["time"].values, ds["generalization"].isel(subject=0).values, tmp_path / "g.png"
    ).exists()


@pytest.mark.slow
def test_subject_parts_combine_to_the_one_call_result(tmp_path, eeg_inputs):
    """One store per subject, then the gathering job: the same store as one call."""
    from neuroflow.decoding.stage import combine_eeg_decoding, decode_eeg_subject

    epochs, features = eeg_inputs
    cfg = {**CFG, "contrastive": {"enabled": False}, "classification": {"generalization": False}}
    whole = open_dataset(
        decode_eeg(epochs=epochs, features=features, output=tmp_path / "w.zarr", config=cfg,
                   provenance={})
    ).load()  # fmt: skip
    parts = [
        decode_eeg_subject(epochs=[e], features=features, output=tmp_path / f"s{i}.zarr",
                           config=cfg, provenance={})
        for i, e in enumerate(reversed(epochs))
    ]  # fmt: skip
    one = open_dataset(parts[0])
    assert one.sizes["subject"] == 1 and "group_class_cluster_p" not in one
    combined = open_dataset(
        combine_eeg_decoding(subjects=parts, output=tmp_path / "c.zarr", config=cfg, provenance={})
    ).load()
    assert list(combined["subject"].values) == ["01", "02"]
    assert set(combined.data_vars) == set(whole.data_vars)
    for name in whole.data_vars:
        np.testing.assert_array_equal(combined[name].values, whole[name].values, err_msg=name)
    with pytest.raises(ValueError, match=r"`epochs` must be the stores of one subject"):
        decode_eeg_subject(epochs=epochs, features=features, output=tmp_path / "x.zarr",
                           config=cfg, provenance={})  # fmt: skip


def test_combine_leaves_out_an_analysis_a_subject_lacks(tmp_path, rng):
    from neuroflow.decoding.stage import combine_subjects, resolve_config

    times = np.linspace(-0.1, 0.4, 7)

    def part(subject: str, with_features: bool) -> xr.Dataset:
        data = {
            "class_score": (("subject", "time"), rng.random((1, times.size))),
            "class_chance": (("subject",), [0.5]),
        }
        if with_features:
            data["feature_score"] = (("subject", "feature_space", "time"), rng.random((1, 2, 7)))
        skipped = {} if with_features else {"features": "sub-02 show fewer than 3 stimuli"}
        return xr.Dataset(
            data,
            coords={"subject": [subject], "time": times, "feature_space": ["a", "b"]},
            attrs={"skipped": skipped, "classification_cv_groups": ["epoch"]},
        )

    cfg = resolve_config({})
    ds = combine_subjects([part("02", False), part("01", True)], cfg, sources=["x", "y"])
    assert list(ds["subject"].values) == ["01", "02"]
    assert "feature_score" not in ds and "group_class_cluster_p" in ds
    assert "sub-02 could not run it" in ds.attrs["skipped"]["features"]
    late = part("03", True).assign_coords(time=times + 0.05)
    with pytest.raises(ValueError, match=r"must share one time grid, got 7 points"):
        combine_subjects([part("01", True), late], cfg, sources=["a", "b"])
    with pytest.raises(ValueError, match=r"Every subject must appear once"):
        combine_subjects([part("01", True), part("01", True)], cfg, sources=["a", "b"])


def test_decoding_rows_flag_inconclusive_tests(rng):
    times = np.linspace(0.0, 0.5, 6)
    p = np.full((2, 6), np.nan)
    p[0, 2:4] = 0.01
    ds = xr.Dataset(
        {
            "class_score": (("subject", "time"), 0.5 + 0.1 * rng.random((2, 6))),
            "class_chance": (("subject",), [0.5, 0.5]),
            "class_cluster_p": (("subject", "time"), p),
            "class_inconclusive": (("subject",), [False, True]),
            "group_class_cluster_p": (("time",), np.full(6, np.nan)),
        },
        coords={"subject": ["01", "02"], "time": times},
        attrs={"inconclusive": {"group_class_cluster_p": "2 subjects allow 4 sign flips"}},
    )
    rows = decoding_rows(ds).set_index("subject")
    assert rows.loc["01", "p_value"] == 0.01 and rows.loc["01", "inconclusive"] == False  # noqa: E712
    assert np.isnan(rows.loc["02", "p_value"]) and rows.loc["02", "inconclusive"] == True  # noqa: E712
    group = rows.loc["group"]
    assert group["statistic"] == "mean" and group["n_subjects"] == 2 and group["inconclusive"]
    assert group["value"] == pytest.approx(float(ds["class_score"].mean("subject").max()))
    # stores of format 5 record nothing: unknown
    old = ds.drop_vars("class_inconclusive")
    old.attrs = {}
    assert decoding_rows(old)["inconclusive"].isna().all()


def test_rsa_eeg_stage(tmp_path, eeg_inputs):
    epochs, features = eeg_inputs
    out = rsa_eeg(
        epochs=epochs,
        features=features,
        output=tmp_path / "rsa.zarr",
        config={"comparisons": ["spearman"], "decim": 1},
        provenance={},
    )
    ds = open_dataset(out)
    n_pairs = N_TEST * (N_TEST - 1) // 2
    assert ds["brain_rdm"].shape == (2, 1, N_T, n_pairs)  # subject, channel group, time, pair
    assert int(ds["n_rsa_stimuli"]) == N_TRAIN + N_TEST and ds.attrs["rsa_stimuli"] == "all"
    rep = open_dataset(
        rsa_eeg(
            epochs=epochs,
            features=features,
            output=tmp_path / "rsa_rep.zarr",
            config={"comparisons": ["spearman"], "eeg_stimuli": "repeated"},
            provenance={},
        )
    )
    assert int(rep["n_rsa_stimuli"]) == N_TEST and rep.sizes["time"] == (N_T + 1) // 2
    with pytest.raises(ValueError, match=r"`rsa\.eeg_stimuli` must be 'all' or 'repeated'"):
        rsa_eeg(
            epochs=epochs,
            features=features,
            output=tmp_path / "x.zarr",
            config={"eeg_stimuli": "some"},
            provenance={},
        )
    assert ds["cross_temporal"].dims == ("subject", "channel_group", "comparison", "layer", "time")
    assert ds["noise_ceiling_subject"].shape == (2, 1, 1, 2, N_T)
    ct = ds["cross_temporal_mean"].sel(comparison="spearman", layer="visual", channel_group="all")
    assert abs(float(ds["time"][int(ct.argmax())]) - 0.1) < 0.06
    assert plot_cross_temporal(
        ds["time"].values,
        ds["cross_temporal_mean"].isel(comparison=0, channel_group=0).values,
        list(ds["layer"].values),
        tmp_path / "ct.png",
    ).exists()
    rdm = ds["brain_rdm"].isel(subject=0, channel_group=0, time=5).values
    assert plot_rdm(rdm, tmp_path / "r.png").exists()


def _fmri_run(tmp_path, rng, subject, run, ids, F, roi_maps):
    tr, n_vol = 1.0, max(60, 5 * len(ids) + 10)
    onsets = np.arange(len(ids)) * 5.0 + 1.0
    order = rng.permutation(len(ids))
    roi = np.repeat(["v1", "sem", "other"], 9)
    bold = 0.3 * rng.standard_normal((n_vol, roi.size))
    t = np.arange(n_vol) * tr
    for k, i in enumerate(order):
        pattern = np.concatenate([F[i] @ roi_maps[0], F[i] @ roi_maps[1], np.zeros(9)])
        on = (t >= onsets[k] + 4.0) & (t < onsets[k] + 8.0)
        bold[on] += pattern
    ds = xr.Dataset(
        {
            "bold": (("time", "voxel"), bold.astype(np.float32)),
            "event_onset": ("event", onsets),
            "event_duration": ("event", np.full(len(ids), 4.0)),
            "stim_file": ("event", np.array(ids, dtype=object)[order]),
        },
        coords={"time": t, "roi": ("voxel", roi.astype(object))},
        attrs={"entities": {"subject": subject, "run": run}},
    )
    return write_dataset(ds, tmp_path / f"sub-{subject}_run-{run}_bold.zarr", provenance={})


def test_rsa_fmri_stage_and_rows(tmp_path, rng):
    ids = [f"shot-{i}" for i in range(8)]
    vis, F = _features(tmp_path, rng, "visual", 4, ids)
    maps = [rng.standard_normal((4, 9)), rng.standard_normal((4, 9))]
    runs = [_fmri_run(tmp_path, rng, s, r, ids, F, maps) for s in ("01", "02") for r in "123"]
    out = rsa_fmri(
        runs=runs,
        features={"visual": vis},
        output=tmp_path / "f.zarr",
        config={"comparisons": ["spearman", "cosine_cov"]},
        provenance={},
    )
    ds = open_dataset(out).load()
    assert ds["roi_rdm"].shape == (2, 3, 28)
    sim = ds["model_similarity"].sel(comparison="spearman", layer="visual").mean("subject")
    assert (
        min(float(sim.sel(roi="v1")), float(sim.sel(roi="sem"))) > 0.3 > float(sim.sel(roi="other"))
    )
    assert ds["noise_ceiling"].sel(roi="v1", bound="upper", comparison="spearman") > 0.5
    assert ds["roi_alignment"].shape == (2, 3, 3)
    # two subjects: bootstrap over both, no subject-as-model baseline (needs three)
    assert ds.attrs["bootstrap_over"] == "both" and ds.attrs["inference_comparison"] == "spearman"
    assert ds["model_similarity_ci"].dims == ("bound", "layer", "roi")
    assert "subject_baseline" not in ds
    rows = rsa_rows(ds)
    assert set(rows["subject"]) == {"01", "02", "group"}
    # no layer order: the layer of a bare feature space is unknown, but still spelled
    assert set(rows["feature_space"]) == set(rows["model"]) == {"visual:n/a"}
    named = rsa_rows(ds, {"visual": ["early", "late"]})
    assert set(named["feature_space"]) == {"visual:late"} and set(named["layer"]) == {"late"}
    assert set(named["extractor"]) == {"visual"}
    assert plot_alignment(
        ds["roi_alignment"].mean("subject").values, list(ds["roi"].values), tmp_path / "a.png"
    ).exists()
    with pytest.raises(ValueError, match=r"`rsa.fmri_rdm` must be"):
        rsa_fmri(
            runs=runs,
            features={"visual": vis},
            output=tmp_path / "g.zarr",
            config={"fmri_rdm": "euclid"},
            provenance={},
        )


def test_rsa_fmri_bootstrap_and_subject_baseline(tmp_path, rng):
    """Three subjects, two layers: one drives v1 and sem, the other nothing."""
    from neuroflow.rsa.compare import noise_ceiling

    ids = [f"shot-{i}" for i in range(18)]
    vis, F = _features(tmp_path, rng, "visual", 4, ids)
    noise, _ = _features(tmp_path, rng, "noise", 4, ids)
    maps = [rng.standard_normal((4, 9)), rng.standard_normal((4, 9))]
    runs = [_fmri_run(tmp_path, rng, s, r, ids, F, maps) for s in ("01", "02", "03") for r in "12"]
    out = rsa_fmri(
        runs=runs,
        features={"visual": vis, "noise": noise},
        output=tmp_path / "f.zarr",
        config={"fmri_rdm": "correlation", "bootstrap": {"n_bootstraps": 200}},
        provenance={},
    )
    ds = open_dataset(out).load()
    ci = ds["model_similarity_ci"]
    assert float(ci.sel(bound="lower", layer="visual", roi="v1")) > 0.2
    assert float(ci.sel(bound="lower", layer="noise", roi="v1")) < 0
    p = ds["layer_comparison_p"].sel(roi="v1", layer_a="visual", layer_b="noise")
    assert float(p) < 0.05
    assert float(ds["layer_comparison_p"].sel(roi="v1", layer_a="visual", layer_b="visual")) == 1
    assert ds["model_similarity_se"].dims == ("layer", "roi")
    # the subject-as-model baseline averages to the lower noise ceiling
    lower, _ = noise_ceiling(ds["roi_rdm"].sel(roi="sem").values, method="spearman")
    assert float(ds["subject_baseline"].sel(roi="sem").mean()) == pytest.approx(lower)
    assert float(ds["baseline_difference"].sel(layer="noise", roi="v1")) < -0.2
    for name in ("model_similarity_ci", "layer_comparison_p", "baseline_equivalence_p"):
        assert ds[name].attrs["long_name"] and ds[name].attrs["units"]
    rows = rsa_rows(ds)
    boot = rows[(rows["statistic"] == "bootstrap_ci_lower") & (rows["roi"] == "v1")]
    assert set(boot["metric"]) == {"spearman"} and len(boot) == 2
    base = rows[rows["statistic"] == "baseline_difference"]
    assert len(base) == 2 * 3 and base["p_value"].between(0, 1).all()
    mean = rows[(rows["subject"] == "group") & (rows["statistic"] == "mean")]
    assert len(mean) == 2 * 3 * ds.sizes["comparison"] and (mean["n_subjects"] == 3).all()
    first = mean.iloc[0]
    sel = {"layer": "visual", "roi": first["roi"], "comparison": first["metric"]}
    assert first["value"] == pytest.approx(float(ds["model_similarity"].sel(sel).mean()))
    with pytest.raises(ValueError, match=r"`rsa.bootstrap.over` must be one of auto, none"):
        rsa_fmri(
            runs=runs,
            features={"visual": vis},
            output=tmp_path / "g.zarr",
            config={"bootstrap": {"over": "runs"}},
            provenance={},
        )
    from neuroflow.evaluation.report import _rsa_figures

    figures = _rsa_figures(ds, "rsa_fmri", tmp_path / "plots")
    assert [f.name for f in figures] == [
        "rsa_fmri_layer_similarity.png",
        "rsa_fmri_roi_alignment.png",
    ]
    assert all(f.stat().st_size > 1000 for f in figures)
    none = rsa_fmri(
        runs=runs,
        features={"visual": vis},
        output=tmp_path / "h.zarr",
        config={"fmri_rdm": "correlation", "bootstrap": {"over": "none"}},
        provenance={},
    )
    assert "model_similarity_ci" not in open_dataset(none)


def test_event_responses_windows():
    ds = xr.Dataset(
        {
            "bold": (("time", "voxel"), np.arange(20.0).reshape(10, 2)),
            "event_onset": ("event", [0.0, 5.0]),
            "event_duration": ("event", [2.0, 0.1]),
        },
        coords={"time": np.arange(10.0)},
    )
    r = event_responses(ds, lag=3.0)
    np.testing.assert_allclose(r[0], [7.0, 8.0])  # volumes at t = 3, 4
    np.testing.assert_allclose(r[1], [16.0, 17.0])  # nearest to 8.05
    with pytest.raises(ValueError, match=r"missing field `stim|missing field `bold"):
        event_responses(ds.drop_vars("bold"), lag=0.0)


def test_config_errors():
    assert resolve_config(None)["identification"]["top_k"] == [1, 5]
    with pytest.raises(
        ValueError, match=r"Unknown key 'decoding\.identification\.windw'\. Did you mean 'window'"
    ):
        resolve_config({"identification": {"windw": [0, 1]}})
    with pytest.raises(ValueError, match=r"`decoding.cv_groups` must be"):
        resolve_config({"cv_groups": "run"})


def test_eeg_decoding_logs_its_progress(tmp_path, eeg_inputs, caplog):
    from neuroflow.decoding.stage import decode_eeg_subject

    epochs, features = eeg_inputs
    # two classes of stimuli (alternate ones), balanced between shown-once and repeated
    ds = open_dataset(epochs[0]).load()
    number = np.array([int(s.split("-")[1]) for s in ds["stimulus"].values])
    ds = ds.assign_coords(condition=("epoch", np.where(number % 2, "odd", "even").astype(object)))
    store = write_dataset(
        ds.drop_encoding(), tmp_path / "classes" / "sub-01_epo.zarr", provenance={}
    )
    config = {
        "classification": {"n_permutations": 12, "generalization": False},
        "features": {"n_components": 2, "n_permutations": 0},
        "identification": {"n_permutations": 5, "window": [0.0, 0.3], "test_condition": None},
        "contrastive": {"enabled": False},
        "n_splits": 3,
        "decim": 1,
    }
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        decode_eeg_subject(
            epochs=[store],
            features=features,
            output=tmp_path / "sub.zarr",
            config=config,
            provenance={},
        )
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    null = [line for line in lines if line.startswith("classification null: ")]
    # a line per 10 % of the 12 permutations, each with its rate and the time left
    assert len(null) == 10, lines
    assert all(re.search(r"% \(\d+/12 permutations\), [\d,.]+/s, ", line) for line in null)
    assert all(" left (" in line for line in null[:-1]) and ", done (" in null[-1]
    # every feature space's time courses on the same 3 folds, then each identified
    assert "sub-01: feature time courses: 100% (3/3 folds)" in " ".join(lines)
    assert "sub-01: stimulus identification: 100% (2/2 feature spaces)" in " ".join(lines)

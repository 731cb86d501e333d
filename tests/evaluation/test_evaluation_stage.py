"""Stage entry points on synthetic prediction stores with planted signal."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, read_provenance
from neuroflow.evaluation.metrics import pearson_r, r2_score
from neuroflow.evaluation.stage import DEFAULT_CONFIG, block_length_samples, evaluate_model
from neuroflow.evaluation.summary import ENCODING_METRICS, METRIC_COLUMNS, TABLE_COLUMNS
from neuroflow.evaluation.summary_stage import summarize_scores

FAST = {"permutation": {"n_permutations": 200, "block_length_s": 10.0}}


def test_evaluate_model_outputs(make_prediction_store, tmp_path, provenance):
    pred = make_prediction_store(n_times=120, n_repeats=3)
    out = evaluate_model(
        prediction=pred, output=tmp_path / "scores.zarr", config=FAST, provenance=provenance
    )
    ds = open_dataset(out).load()
    src = open_dataset(pred).load()
    for name in ("r", "r2", "noise_ceiling_r", "r_normalized", "p_value", "p_fdr", "significant"):
        assert ds[name].dims == ("voxel",), name
    assert ds["r_per_repeat"].dims == ("repeat", "voxel")
    assert ds["significant"].dtype == bool
    for coord in ("roi", "i", "j", "k", "x", "y", "z"):
        np.testing.assert_array_equal(ds[coord].values, src[coord].values)
    for attr in ("subject", "model", "feature_spaces", "tr", "affine", "mask_shape"):
        assert ds.attrs[attr] == src.attrs[attr]
    assert ds.attrs["n_repeats"] == 3 and ds.attrs["permutation_block_samples"] == 5
    assert read_provenance(out)["stage"] == "test"
    y_mean = src["y_test"].values.astype(np.float64).mean(0)
    y_pred = src["y_pred"].values
    np.testing.assert_allclose(ds["r"], pearson_r(y_mean, y_pred), rtol=1e-5)
    np.testing.assert_allclose(ds["r2"], r2_score(y_mean, y_pred), rtol=1e-4, atol=1e-6)
    ceiling = ds["noise_ceiling_r"].values
    ok = ceiling >= 0.2  # evaluation.noise_ceiling.min_ceiling_r
    assert ok.any() and not ok.all()
    expected = np.where(ok, ds["r"].values / np.where(ok, ceiling, 1), np.nan)
    np.testing.assert_allclose(ds["r_normalized"], expected, rtol=1e-5)
    assert ds["r_normalized"].attrs["min_ceiling_r"] == 0.2
    # the exact permutation p beside the one tested; the max-statistic FWER p
    n_null = ds.attrs["n_permutations"]
    exact = ds["p_permutation"].values >= (1 + 10) / (1 + n_null) - 1e-7
    assert exact.any() and not exact.all()
    np.testing.assert_array_equal(ds["p_value"].values[exact], ds["p_permutation"].values[exact])
    assert ds["p_value"].values[~exact].min() < 1 / (1 + n_null)
    assert (ds["p_fwer"] >= ds["p_permutation"] - 1e-7).all()
    assert ds.attrs["p_value_tail"] == "gaussian"


def test_planted_truth_is_recovered(make_prediction_store, tmp_path, provenance):
    # per-voxel estimates of r and ceiling scatter by ~0.05 at 300 samples: average 30
    rois = {"early_visual": (31, 1.0), "semantic": (30, 0.7), "noise": (40, 0.0)}
    pred = make_prediction_store(n_times=300, n_repeats=2, rois=rois)
    out = evaluate_model(
        prediction=pred, output=tmp_path / "s.zarr", config=FAST, provenance=provenance
    )
    ds = open_dataset(out).load()
    roi = ds["roi"].values
    significant = ds["significant"].values
    # BH bounds the expected share of false discoveries, not their number
    assert significant[roi == "noise"].sum() / significant.sum() <= 0.1
    for label in ("early_visual", "semantic"):
        sel = roi == label
        assert ds["significant"].values[sel].all()
        gap = ds["r"].values[sel].mean() - ds["noise_ceiling_r"].values[sel].mean()
        assert abs(gap) < 0.05, label


@pytest.mark.parametrize("method", ["ncsnr", "none"])
def test_other_ceilings_and_metrics(make_prediction_store, tmp_path, provenance, method):
    pred = make_prediction_store(n_repeats=2)
    config = {**FAST, "noise_ceiling": {"method": method}, "metrics": ["r2_per_repeat"]}
    ds = open_dataset(
        evaluate_model(
            prediction=pred, output=tmp_path / "s.zarr", config=config, provenance=provenance
        )
    )
    assert "r2_per_repeat" in ds and "r_per_repeat" not in ds
    assert np.isnan(ds["noise_ceiling_r"].values).all() == (method == "none")


def test_single_repeat_and_no_permutations(make_prediction_store, tmp_path, provenance):
    pred = make_prediction_store(n_repeats=1)
    config = {"permutation": {"n_permutations": 0}}
    with pytest.warns(RuntimeWarning, match="at least 2 repeats"):
        out = evaluate_model(
            prediction=pred, output=tmp_path / "s.zarr", config=config, provenance=provenance
        )
    ds = open_dataset(out)
    assert np.isnan(ds["noise_ceiling_r"]).all() and np.isnan(ds["p_value"]).all()
    assert not ds["significant"].values.any()


def test_bad_prediction_store_names_file_and_field(tmp_path, rng, provenance):
    from evaluation_synthetic import build_prediction_dataset

    from neuroflow.artifacts import write_dataset

    ds = build_prediction_dataset(rng).drop_vars("y_test")
    path = write_dataset(ds, tmp_path / "bad.zarr", provenance=provenance)
    with pytest.raises(ValueError, match=r"bad\.zarr: variable `y_test` is missing"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config={}, provenance={})
    ds = build_prediction_dataset(rng)
    ds.attrs.pop("tr")
    path = write_dataset(ds, tmp_path / "bad2.zarr", provenance=provenance)
    with pytest.raises(ValueError, match=r"bad2\.zarr: attribute\(s\) \['tr'\] missing"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config={}, provenance={})
    with pytest.raises(ValueError, match=r"Unknown key 'evaluation\.x'"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config={"x": 1}, provenance={})


def test_block_length_samples():
    perm = DEFAULT_CONFIG["permutation"]
    assert block_length_samples(perm, 2.0, 100) == 10
    assert block_length_samples({**perm, "block_length_trs": 7}, 2.0, 100) == 7
    with pytest.warns(RuntimeWarning, match="fewer than 2 blocks"):
        assert block_length_samples(perm, 1.0, 9) == 4


@pytest.fixture
def score_stores(make_prediction_store, tmp_path, provenance):
    paths = []
    for subject in ("01", "02", "03"):
        for model in ("minilm", "gpt2"):
            pred = make_prediction_store(
                f"pred_{subject}_{model}.zarr",
                subject=subject,
                model=model,
                feature_spaces=(model,),
            )
            paths.append(
                evaluate_model(
                    prediction=pred,
                    output=tmp_path / f"scores_{subject}_{model}.zarr",
                    config=FAST,
                    provenance=provenance,
                )
            )
    return paths


@pytest.mark.slow
def test_summarize_scores(score_stores, tmp_path, provenance):
    table = tmp_path / "summary" / "scores.tsv"
    plots = tmp_path / "summary" / "plots"
    out = summarize_scores(
        scores=score_stores, table=table, plots_dir=plots, config={}, provenance=provenance
    )
    assert out == table
    df = pd.read_csv(
        table, sep="\t", dtype={"subject": str}, keep_default_na=False, na_values=["n/a"]
    )
    assert list(df.columns) == list(TABLE_COLUMNS)
    assert set(df["analysis"]) == {"encoding"}
    subjects = df[df["statistic"] == "value"]
    # subjects × models × (3 ROIs + all) × metrics
    assert len(subjects) == 3 * 2 * 4 * len(ENCODING_METRICS)
    assert set(subjects["roi"]) == {"early_visual", "semantic", "noise", "all"}
    assert set(subjects["metric"]) == set(ENCODING_METRICS)
    assert (subjects.loc[subjects["roi"] == "all", "n_targets"] == 27).all()
    # one row per subject's ROI and metric matches the store it came from
    ds = open_dataset(score_stores[0]).load()
    row = subjects[(subjects["subject"] == "01") & (subjects["model"] == "minilm")]
    row = row[row["roi"] == "semantic"].set_index("metric")["value"]
    sel = ds["roi"].values == "semantic"
    np.testing.assert_allclose(row["mean_r"], ds["r"].values[sel].mean(), rtol=1e-5)
    np.testing.assert_allclose(row["median_r"], np.median(ds["r"].values[sel]), rtol=1e-5)
    for flag in ("significant", "significant_fwer"):
        np.testing.assert_allclose(row[f"frac_{flag}"], ds[flag].values[sel].mean(), rtol=1e-5)
    group = df[df["subject"] == "group"]
    assert set(group["statistic"]) == {"mean", "sd", "sem"}
    mean = group[
        (group["statistic"] == "mean") & (group["model"] == "gpt2") & (group["metric"] == "mean_r")
    ]
    mean = mean.set_index("roi")["value"]
    gpt2 = subjects[(subjects["model"] == "gpt2") & (subjects["metric"] == "mean_r")]
    values = gpt2.groupby("roi")["value"]
    np.testing.assert_allclose(mean.loc[values.mean().index], values.mean(), rtol=1e-5)
    assert (group["n_subjects"] == 3).all()

    store = xr.open_zarr(table.with_suffix(".zarr"))
    assert store["mean_r"].dims == ("roi", "model")
    assert set(store["model"].values) == {"minilm", "gpt2"}
    for metric in METRIC_COLUMNS:
        assert {metric, f"{metric}_sd", f"{metric}_sem"} <= set(store.data_vars)
    sem = store["mean_r_sem"].sel(roi="all", model="gpt2").item()
    sd = store["mean_r_sd"].sel(roi="all", model="gpt2").item()
    np.testing.assert_allclose(sem, sd / np.sqrt(3), rtol=1e-5)

    names = sorted(p.name for p in plots.iterdir())
    assert "roi_mean_r.png" in names and "roi_mean_r_normalized.png" in names
    assert "sub-01_model-minilm_fs-minilm_r.png" in names
    assert len(names) == 2 + 6 * 2


def test_summarize_without_plots_and_with_nan(make_prediction_store, tmp_path, provenance):
    pred = make_prediction_store(rois={"a": (7, 0.0)}, n_repeats=1)
    config = {"permutation": {"n_permutations": 0}, "plots": {"enabled": False}}
    with pytest.warns(RuntimeWarning):
        scores = evaluate_model(
            prediction=pred, output=tmp_path / "s.zarr", config=config, provenance=provenance
        )
    table = tmp_path / "t.tsv"
    summarize_scores(
        scores=[scores], table=table, plots_dir=tmp_path / "p", config=config, provenance=provenance
    )
    assert list((tmp_path / "p").iterdir()) == []
    df = pd.read_csv(
        table, sep="\t", dtype={"subject": str}, keep_default_na=False, na_values=["n/a"]
    )
    sd = df[(df["statistic"] == "sd") & (df["metric"] == "mean_r")]
    assert len(sd) and sd["value"].isna().all()  # one subject: no spread
    assert df.loc[df["metric"] == "noise_ceiling_r", "value"].isna().all()
    with pytest.raises(ValueError, match="at least one score store"):
        summarize_scores(scores=[], table=table, plots_dir=tmp_path / "p", config={}, provenance={})


def test_summarize_plots_nan_maps(make_prediction_store, tmp_path, provenance):
    pred = make_prediction_store(rois={"a": (7, 0.0), "": (2, 0.0)}, n_repeats=1)
    config = {"permutation": {"n_permutations": 0}, "plots": {"brain_map": "stat_map"}}
    with pytest.warns(RuntimeWarning):
        scores = evaluate_model(
            prediction=pred, output=tmp_path / "s.zarr", config=config, provenance=provenance
        )
    summarize_scores(
        scores=[scores],
        table=tmp_path / "t.tsv",
        plots_dir=tmp_path / "p",
        config=config,
        provenance=provenance,
    )
    assert len(list((tmp_path / "p").glob("*.png"))) == 4


def test_roi_summary_fractions_of_fdr_and_fwer_discoveries():
    from neuroflow.evaluation.summary import roi_summary

    kw = {
        "r": np.array([0.5, 0.1, 0.2, 0.9, 0.3]),
        "r_normalized": np.full(5, np.nan),
        "noise_ceiling_r": np.full(5, np.nan),
        "significant": np.array([True, False, False, True, True]),
        "roi": ["a", "a", "b", "", "b"],
    }
    table = roi_summary(**kw, significant_fwer=np.array([False, False, False, True, True]))
    table = table.set_index("roi")
    np.testing.assert_allclose(table["frac_significant"], [0.5, 0.5, 0.6])
    np.testing.assert_allclose(table["frac_significant_fwer"], [0.0, 0.5, 0.4])
    assert list(table.index) == ["a", "b", "all"]
    without = roi_summary(**kw).set_index("roi")
    assert without["frac_significant_fwer"].isna().all()
    with pytest.raises(ValueError, match=r"`significant_fwer` must have shape \(5,\)"):
        roi_summary(**kw, significant_fwer=np.ones(4, bool))


def test_exceeds_ceiling_flags_reach_scores_tsv_and_nan_stays_nan(
    make_prediction_store, tmp_path, provenance
):
    """Each ROI's share of targets above the ceiling beyond its uncertainty, among those
    with a normalised score, is a ``frac_exceeds_ceiling`` row of scores.tsv; undefined
    normalised scores stay NaN in the store and ``n/a`` in the table, never 0."""
    from neuroflow.artifacts import write_dataset
    from neuroflow.evaluation.summary import roi_summary

    pred = make_prediction_store(rois={"a": (5, 1.0), "b": (6, 0.0)}, n_repeats=2)
    config = {**FAST, "plots": {"enabled": False}}
    scored = evaluate_model(
        prediction=pred, output=tmp_path / "s.zarr", config=config, provenance=provenance
    )
    ds = open_dataset(scored).load()
    assert ds["exceeds_ceiling"].dtype == bool
    # two of the four normalised scores of `a` above their ceiling (a mean above 1),
    # every normalised score of `b` undefined
    normalized = np.full(11, np.nan, dtype=np.float32)
    normalized[:5] = [1.3, 0.8, np.nan, 1.1, 0.9]
    flags = np.zeros(11, bool)
    flags[[0, 3]] = True
    ds["exceeds_ceiling"] = ("voxel", flags)
    ds["r_normalized"] = ("voxel", normalized, ds["r_normalized"].attrs)
    edited = write_dataset(ds, tmp_path / "edited.zarr", provenance=provenance)
    reread = open_dataset(edited).load()
    np.testing.assert_array_equal(reread["r_normalized"].values, normalized)
    table = tmp_path / "t.tsv"
    summarize_scores(
        scores=[edited], table=table, plots_dir=tmp_path / "p", config=config, provenance=provenance
    )
    text = table.read_text()
    assert "\tnan\t" not in text.lower()
    df = pd.read_csv(
        table, sep="\t", dtype={"subject": str}, keep_default_na=False, na_values=["n/a"]
    )
    value = df[df["statistic"] == "value"].set_index(["roi", "metric"])["value"]
    assert value[("a", "frac_exceeds_ceiling")] == pytest.approx(2 / 4)
    assert np.isnan(value[("b", "frac_exceeds_ceiling")])  # no ceiling to exceed
    assert value[("all", "frac_exceeds_ceiling")] == pytest.approx(2 / 4)
    assert np.isnan(value[("b", "mean_r_normalized")])
    assert value[("a", "mean_r_normalized")] == pytest.approx(1.025, rel=1e-5)
    # without the flag (older stores, variants) the share is undefined, not 0
    kw = {"r": np.ones(3), "r_normalized": np.ones(3), "noise_ceiling_r": np.ones(3)}
    unknown = roi_summary(**kw, significant=None, roi=["a", "a", "b"])
    assert unknown["frac_exceeds_ceiling"].isna().all()
    with pytest.raises(ValueError, match=r"`exceeds_ceiling` must have shape \(3,\)"):
        roi_summary(**kw, significant=None, roi=["a", "a", "b"], exceeds_ceiling=np.ones(2, bool))

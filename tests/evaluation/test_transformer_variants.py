"""Variants of a model's prediction (seeds, modality ablation) in evaluation and summary,
and the training curves of the transformer encoders in the summary figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from evaluation_synthetic import build_prediction_dataset
from figure_helpers import assert_png

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.evaluation.plotting import plot_training_curves
from neuroflow.evaluation.report import summarize_all
from neuroflow.evaluation.stage import evaluate_model
from neuroflow.evaluation.summary import ENCODING_METRICS, roi_summary
from neuroflow.evaluation.summary_stage import summarize_scores
from neuroflow.evaluation.trf_summary import training_figures
from neuroflow.workflow.report_layout import figure_entry

VARIANTS = ("seed-0", "seed-1", "without-minilm", "without-gpt2")
SPACES = ("minilm", "gpt2")
#: Noise SD added to ``y_pred`` for each variant: every variant scores differently.
VARIANT_NOISE = (0.3, 0.6, 1.0, 2.5)
NO_TEST = {"permutation": {"n_permutations": 0}, "plots": {"enabled": False}}
FAST = {"permutation": {"n_permutations": 30, "block_length_s": 8.0}}


def _with_variants(
    ds: xr.Dataset, rng: np.random.Generator, names: tuple[str, ...] = VARIANTS
) -> xr.Dataset:
    """``ds`` with ``y_pred_variant``: ``y_pred`` plus noise of a different SD per name."""
    y_pred = ds["y_pred"].values
    sds = [VARIANT_NOISE[k % len(VARIANT_NOISE)] for k in range(len(names))]
    values = np.zeros((0, *y_pred.shape))
    if sds:
        values = np.stack([y_pred + sd * rng.standard_normal(y_pred.shape) for sd in sds])
    out = ds.assign(y_pred_variant=(("variant", *ds["y_pred"].dims), values.astype(np.float32)))
    return out.assign_coords(variant=("variant", np.asarray(names, dtype=object)))


def _prediction(
    rng: np.random.Generator,
    *,
    subject: str = "01",
    rois: dict[str, tuple[int, float]] | None = None,
    names: tuple[str, ...] = VARIANTS,
    spaces: tuple[str, ...] = SPACES,
) -> xr.Dataset:
    """A transformer-like prediction store: two feature spaces, three repeats."""
    ds = build_prediction_dataset(
        rng,
        n_times=96,
        n_repeats=3,
        rois=rois or {"V1": (7, 1.0), "FFA": (5, 0.6), "noise": (4, 0.0)},
        subject=subject,
        model="tribe",
        feature_spaces=spaces,
        tr=1.5,
    )
    ds.attrs.update(layer="+".join(["embedding", "h6"][: len(spaces)]), solver="transformer")
    return _with_variants(ds, rng, names)


def _evaluate(ds: xr.Dataset, tmp_path: Path, name: str, config: dict) -> Path:
    pred = write_dataset(ds, tmp_path / f"pred_{name}.zarr", provenance={})
    return evaluate_model(
        prediction=pred, output=tmp_path / f"scores_{name}.zarr", config=config, provenance={}
    )


def _read_table(path: Path) -> pd.DataFrame:
    return pd.read_csv(
        path, sep="\t", dtype={"subject": str}, keep_default_na=False, na_values=["n/a"]
    )


def test_variants_are_scored_like_y_pred(rng, tmp_path):
    ds = _prediction(rng)
    scores = open_dataset(_evaluate(ds, tmp_path, "all", FAST)).load()
    n_voxels = ds.sizes["voxel"]
    for name in ("variant_r", "variant_r2", "variant_r_normalized"):
        assert scores[name].dims == ("variant", "voxel"), name
        assert scores[name].shape == (len(VARIANTS), n_voxels)
        assert scores[name].attrs["units"] == "1" and scores[name].attrs["long_name"]
    assert list(scores["variant"].values) == list(VARIANTS)
    # no permutation test of the variants
    on_variants = {n for n, v in scores.data_vars.items() if "variant" in v.dims}
    assert on_variants == {"variant_r", "variant_r2", "variant_r_normalized"}
    assert scores["variant_r_normalized"].attrs["min_ceiling_r"] == 0.2
    single = ds.drop_vars(["y_pred_variant", "variant"])
    for k, variant in enumerate(VARIANTS):
        alone = single.assign(y_pred=(("time", "voxel"), ds["y_pred_variant"].values[k]))
        expected = open_dataset(_evaluate(alone, tmp_path, variant, NO_TEST)).load()
        for name in ("r", "r2", "r_normalized"):
            np.testing.assert_allclose(
                scores[f"variant_{name}"].values[k], expected[name].values, rtol=1e-6
            )
        # the ceiling is the store's, computed once
        np.testing.assert_array_equal(
            expected["noise_ceiling_r"].values, scores["noise_ceiling_r"].values
        )
    # undefined where the ceiling is below min_ceiling_r, as r_normalized is
    undefined = np.isnan(scores["r_normalized"].values)
    assert undefined.any() and not undefined.all()
    np.testing.assert_array_equal(
        np.isnan(scores["variant_r_normalized"].values), np.broadcast_to(undefined, (4, n_voxels))
    )
    # noisier variants score lower over the signal voxels
    signal = ds["roi"].values != "noise"
    means = scores["variant_r"].values[:, signal].mean(1)
    assert (np.diff(means) < 0).all()


def test_variants_of_channel_by_latency_targets(rng, tmp_path):
    n_stim, n_ch, n_lat = 23, 4, 3
    signal = rng.standard_normal((n_stim, n_ch, n_lat))
    channels = np.array(["Fz", "Cz", "Pz", "Oz"], dtype=object)
    ds = xr.Dataset(
        {
            "y_pred": (("stimulus", "channel", "latency"), signal.astype(np.float32)),
            "y_test": (
                ("repeat", "stimulus", "channel", "latency"),
                (signal[None] + rng.standard_normal((2, n_stim, n_ch, n_lat))).astype(np.float32),
            ),
        },
        coords={
            "channel": channels,
            "latency": [0.0, 0.1, 0.2],
            "roi": ("channel", channels.copy()),
        },
        attrs={
            "subject": "01",
            "model": "tribe",
            "feature_spaces": list(SPACES),
            "tr": 1.0,
            "exchangeable_samples": True,
        },
    )
    ds = _with_variants(ds, rng, VARIANTS[:3])
    scores = open_dataset(_evaluate(ds, tmp_path, "eeg", NO_TEST)).load()
    assert scores["variant_r"].dims == ("variant", "channel", "latency")
    assert scores["variant_r"].shape == (3, n_ch, n_lat)
    assert list(scores["variant"].values) == list(VARIANTS[:3])
    for k in range(3):
        alone = ds.drop_vars(["y_pred_variant", "variant"]).assign(
            y_pred=(("stimulus", "channel", "latency"), ds["y_pred_variant"].values[k])
        )
        expected = open_dataset(_evaluate(alone, tmp_path, f"eeg{k}", NO_TEST)).load()
        np.testing.assert_allclose(scores["variant_r"].values[k], expected["r"].values, rtol=1e-6)
        np.testing.assert_allclose(
            scores["variant_r2"].values[k], expected["r2"].values, rtol=1e-5, atol=1e-7
        )


def test_bad_variants_are_named(rng, tmp_path):
    ds = _prediction(rng)
    wrong_dims = ds.assign(
        y_pred_variant=ds["y_pred_variant"].transpose("time", "variant", "voxel")
    )
    with pytest.raises(ValueError, match=r"`y_pred_variant` must have dims \('variant', 'time'"):
        _evaluate(wrong_dims, tmp_path, "dims", NO_TEST)
    unnamed = ds.drop_vars("variant")
    with pytest.raises(ValueError, match="must have a `variant` coordinate naming each variant"):
        _evaluate(unnamed, tmp_path, "unnamed", NO_TEST)
    twice = ds.assign_coords(variant=("variant", ["seed-0", "seed-0", "a", "b"]))
    with pytest.raises(ValueError, match=r"names must be unique and non-empty, got \['seed-0'"):
        _evaluate(twice, tmp_path, "twice", NO_TEST)


def test_no_variants_no_variant_scores(rng, tmp_path):
    ds = _prediction(rng, names=())
    assert ds.sizes["variant"] == 0
    scores = open_dataset(_evaluate(ds, tmp_path, "none", NO_TEST))
    assert "variant_r" not in scores and "variant" not in scores.dims
    table = tmp_path / "t.tsv"
    summarize_scores(
        scores=[_evaluate(ds, tmp_path, "none2", NO_TEST)],
        table=table,
        plots_dir=tmp_path / "p",
        config=NO_TEST,
        provenance={},
    )
    assert set(_read_table(table)["model"]) == {"tribe"}


def test_summary_rows_of_variants(rng, tmp_path):
    rois = {
        "01": {"V1": (7, 1.0), "FFA": (5, 0.6), "noise": (4, 0.0), "": (2, 0.0)},
        "02": {"V1": (4, 1.0), "FFA": (6, 0.6), "noise": (3, 0.0)},
    }
    paths = [
        _evaluate(_prediction(rng, subject=s, rois=r), tmp_path, s, FAST) for s, r in rois.items()
    ]
    table = tmp_path / "summary" / "scores.tsv"
    plots = tmp_path / "summary" / "plots"
    summarize_scores(scores=paths, table=table, plots_dir=plots, config=FAST, provenance={})
    df = _read_table(table)
    models = {"tribe", *(f"tribe-{v}" for v in VARIANTS)}
    assert set(df["model"]) == models
    per_subject = df[df["statistic"] == "value"]
    # subjects' own ROIs plus "all", every metric, for the model and each variant
    assert len(per_subject) == (4 + 4) * len(ENCODING_METRICS) * len(models)
    spaces = per_subject.drop_duplicates("model").set_index("model")
    assert spaces.loc["tribe-without-minilm", "feature_space"] == "gpt2:h6"
    assert spaces.loc["tribe-without-minilm", "extractor"] == "gpt2"
    assert spaces.loc["tribe-without-minilm", "layer"] == "h6"
    assert spaces.loc["tribe-without-gpt2", "feature_space"] == "minilm:embedding"
    for model in ("tribe", "tribe-seed-0", "tribe-seed-1"):
        assert spaces.loc[model, "feature_space"] == "minilm:embedding+gpt2:h6"
        assert spaces.loc[model, "layer"] == "embedding+h6"

    values = per_subject.set_index(["subject", "model", "roi", "metric"])["value"]
    for subject, path in zip(rois, paths, strict=True):
        scores = open_dataset(path).load()
        for k, variant in enumerate(VARIANTS):
            for roi in ("V1", "FFA", "all"):
                sel = np.ones(scores.sizes["voxel"], bool)
                if roi != "all":
                    sel = scores["roi"].values == roi
                key = (subject, f"tribe-{variant}", roi)
                np.testing.assert_allclose(
                    values[(*key, "mean_r")], scores["variant_r"].values[k, sel].mean(), rtol=1e-5
                )
                np.testing.assert_allclose(
                    values[(*key, "mean_r_normalized")],
                    np.nanmean(scores["variant_r_normalized"].values[k, sel]),
                    rtol=1e-5,
                )
                # the same ceiling as the model's own rows
                np.testing.assert_allclose(
                    values[(*key, "noise_ceiling_r")],
                    values[(subject, "tribe", roi, "noise_ceiling_r")],
                )
    fractions = per_subject[per_subject["metric"].str.startswith("frac_significant")]
    is_variant = fractions["model"] != "tribe"
    assert fractions.loc[is_variant, "value"].isna().all()
    assert fractions.loc[~is_variant, "value"].notna().all()

    group = df[df["subject"] == "group"]
    for model in models:
        mine = group[group["model"] == model]
        assert set(mine["statistic"]) == {"mean", "sd", "sem"}
        assert set(mine["roi"]) == {"V1", "FFA", "noise", "all"}
        assert (mine["n_subjects"] == 2).all()
    mean = group[
        (group["model"] == "tribe-without-gpt2")
        & (group["metric"] == "mean_r")
        & (group["statistic"] == "mean")
    ].set_index("roi")["value"]
    both = per_subject[
        (per_subject["model"] == "tribe-without-gpt2") & (per_subject["metric"] == "mean_r")
    ]
    np.testing.assert_allclose(mean["V1"], both[both["roi"] == "V1"]["value"].mean(), rtol=1e-6)
    store = xr.open_zarr(table.with_suffix(".zarr"))
    assert set(store["model"].values) == models

    # one set of brain maps per store, none per variant; the bar charts show every model
    names = sorted(p.name for p in plots.iterdir())
    maps = [n for n in names if n.startswith("sub-")]
    assert len(maps) == 2 * 2 and all("_model-tribe_" in n for n in maps)
    assert {"roi_mean_r.png", "roi_mean_r_normalized.png"} <= set(names)
    assert len(names) == len(maps) + 2


def test_variant_spaces_must_be_the_stores(rng, tmp_path):
    unknown = _prediction(rng, names=("seed-0", "without-clip"))
    path = _evaluate(unknown, tmp_path, "unknown", NO_TEST)
    kwargs = {"table": tmp_path / "t.tsv", "plots_dir": tmp_path / "p", "provenance": {}}
    with pytest.raises(
        ValueError,
        match=r"variant 'without-clip' must leave out one of the feature spaces "
        r"\['minilm', 'gpt2'\], got 'clip' instead",
    ):
        summarize_scores(scores=[path], config=NO_TEST, **kwargs)
    alone = _prediction(rng, names=("without-minilm",), spaces=("minilm",))
    path = _evaluate(alone, tmp_path, "alone", NO_TEST)
    with pytest.raises(ValueError, match="must leave at least one feature space"):
        summarize_scores(scores=[path], config=NO_TEST, **kwargs)


def test_roi_summary_without_significance():
    r = np.array([0.5, 0.1, 0.2, 0.9, 0.3, -0.1, 0.0])
    table = roi_summary(
        r=r,
        r_normalized=r * 2,
        significant=None,
        noise_ceiling_r=np.full(7, 0.5),
        roi=["a", "a", "b", "", "b", "b", "a"],
    ).set_index("roi")
    assert table[["frac_significant", "frac_significant_fwer"]].isna().all().all()
    np.testing.assert_allclose(table.loc["a", "mean_r"], 0.2)
    assert list(table["n_targets"]) == [3, 3, 7]
    with pytest.raises(ValueError, match=r"`significant` must have shape \(7,\) like `r`"):
        roi_summary(
            r=r,
            r_normalized=r,
            significant=np.ones(6, bool),
            noise_ceiling_r=r,
            roi=["a"] * 7,
        )


def _training_store(
    rng: np.random.Generator, model: str = "tribe", n_seeds: int = 3, n_epochs: int = 7
) -> xr.Dataset:
    """A training store like the transformer stage's; seed 1 stopped early after 4 epochs."""
    subjects = ["01", "02"]
    lengths = [n_epochs, 4, n_epochs - 1][:n_seeds]
    loss = np.full((n_seeds, n_epochs), np.nan)
    per_subject = np.full((n_seeds, n_epochs, len(subjects)), np.nan)
    for k, n in enumerate(lengths):
        loss[k, :n] = 1.0 / (1 + np.arange(n)) + 0.05 * rng.random(n)
        per_subject[k, :n] = np.linspace(0.0, 0.3, n)[:, None] + 0.05 * rng.random((n, 2))
    val_r = per_subject.mean(-1)
    best = np.array([int(np.nanargmax(v)) for v in val_r])
    seconds = np.where(np.isnan(loss), np.nan, 0.5)
    return xr.Dataset(
        {
            "train_loss": (("seed", "epoch"), loss, {"units": "mse"}),
            "val_r": (("seed", "epoch"), val_r, {"units": "1"}),
            "learning_rate": (("seed", "epoch"), np.where(np.isnan(loss), np.nan, 1e-3)),
            "epoch_seconds": (("seed", "epoch"), seconds),
            "val_r_subject": (("seed", "epoch", "subject"), per_subject),
            "best_epoch": (("seed",), best),
            "n_epochs": (("seed",), np.array(lengths)),
        },
        coords={
            "seed": np.arange(n_seeds) * 10,
            "epoch": np.arange(n_epochs),
            "subject": np.asarray(subjects, dtype=object),
        },
        attrs={
            "model": model,
            "options": {"loss": "mse", "epochs": n_epochs},
            "feature_spaces": list(SPACES),
            "subjects": subjects,
        },
    )


def test_summarize_all_draws_the_training_curves(rng, tmp_path):
    stores = [
        write_dataset(
            _training_store(rng, m, n_seeds=n), tmp_path / f"{m}_training.zarr", provenance={}
        )
        for m, n in (("tribe", 3), ("tribe_small", 2))
    ]
    plots = tmp_path / "summary" / "plots"
    config = {"plots": {"formats": ["png", "svg"]}}
    summarize_all(
        scores=[],
        table=tmp_path / "summary" / "scores.tsv",
        plots_dir=plots,
        config=config,
        provenance={},
        transformer_training=stores,
        warnings_tsv=tmp_path / "summary" / "warnings.tsv",
    )
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(
        f"encoding_{m}_training.{f}" for m in ("tribe", "tribe_small") for f in ("png", "svg")
    )
    assert_png(plots / "encoding_tribe_training.png")
    # plots off: no figure
    summarize_all(
        scores=[],
        table=tmp_path / "off" / "scores.tsv",
        plots_dir=tmp_path / "off" / "plots",
        config={"plots": {"enabled": False}},
        provenance={},
        transformer_training=stores,
    )
    assert list((tmp_path / "off" / "plots").iterdir()) == []


def test_training_figures_with_scores_and_errors(rng, tmp_path):
    ds = _prediction(rng)
    scores = _evaluate(ds, tmp_path, "s", {"permutation": {"n_permutations": 0}})
    training = write_dataset(_training_store(rng), tmp_path / "tribe_training.zarr", provenance={})
    plots = tmp_path / "summary" / "plots"
    summarize_all(
        scores=[scores],
        table=tmp_path / "summary" / "scores.tsv",
        plots_dir=plots,
        config={"permutation": {"n_permutations": 0}, "plots": {"brain_map": "stat_map"}},
        provenance={},
        transformer_training=[training],
    )
    # written after the encoding figures, into the same folder
    names = {p.name for p in plots.iterdir()}
    assert {"encoding_tribe_training.png", "roi_mean_r.png"} <= names
    assert "tribe-without-gpt2" in set(_read_table(tmp_path / "summary" / "scores.tsv")["model"])

    twice = write_dataset(_training_store(rng), tmp_path / "again_training.zarr", provenance={})
    with pytest.raises(ValueError, match=r"one store per model, got .* for model 'tribe'"):
        training_figures([training, twice], tmp_path / "x")
    broken = write_dataset(
        _training_store(rng).drop_vars("val_r"),
        tmp_path / "broken_training.zarr",
        provenance={},
    )
    with pytest.raises(ValueError, match=r"must have the variables \['train_loss', 'val_r'\]"):
        training_figures([broken], tmp_path / "x")
    flipped = _training_store(rng)
    flipped["val_r"] = flipped["val_r"].T
    flipped = write_dataset(flipped, tmp_path / "flipped_training.zarr", provenance={})
    with pytest.raises(ValueError, match=r"`val_r` must have dims \('seed', 'epoch'\)"):
        training_figures([flipped], tmp_path / "x")


def test_plot_training_curves_checks_shapes(rng):
    loss = rng.random((2, 5))
    fig = plot_training_curves(loss, loss, best_epoch=[1, 4], val_r_subject=rng.random((2, 5, 3)))
    left, right = fig.axes
    assert len(left.lines) == 2 and right.get_ylabel() == "validation r"
    with pytest.raises(ValueError, match=r"`val_r` must have shape \(2, 5\), got \(2, 4\)"):
        plot_training_curves(loss, loss[:, :4])
    with pytest.raises(ValueError, match=r"`best_epoch` must have shape \(2,\), got \(3,\)"):
        plot_training_curves(loss, loss, best_epoch=[0, 1, 2])
    with pytest.raises(ValueError, match=r"`val_r_subject` must have shape \(2, 5, n_subjects\)"):
        plot_training_curves(loss, loss, val_r_subject=rng.random((2, 5)))
    with pytest.raises(ValueError, match="`seeds` must have 2 entries, got 1 instead"):
        plot_training_curves(loss, loss, seeds=["a"])


def test_training_figure_is_placed_with_the_encoding_figures():
    entry = figure_entry("encoding_tribe_training")
    assert entry.category == figure_entry("roi_mean_r").category == "fMRI encoding"
    assert entry.labels == {"model": "tribe"}


@pytest.mark.slow
def test_transformer_stage_end_to_end(tmp_path):
    """The stage's stores through evaluation and the summary (rows and figures)."""
    from encoding.test_transformer_stage import _config, _dataset, _fit

    brain, features = _dataset(tmp_path, np.random.default_rng(7))
    *subjects, training = _fit(tmp_path, brain, features, _config())
    scores = []
    for path in subjects:
        ds = open_dataset(path).load()
        ds.attrs["mask_shape"] = [12, 12, 12]  # the synthetic runs' voxel grid
        fixed = write_dataset(ds, tmp_path / f"fixed_{path.name}", provenance={})
        scores.append(_evaluate(open_dataset(fixed).load(), tmp_path, path.stem, FAST))
    plots = tmp_path / "summary" / "plots"
    summarize_all(
        scores=scores,
        table=tmp_path / "summary" / "scores.tsv",
        plots_dir=plots,
        config=FAST,
        provenance={},
        transformer_training=[training],
    )
    df = _read_table(tmp_path / "summary" / "scores.tsv")
    models = {"tribe", "tribe-seed-0", "tribe-seed-1", "tribe-without-vis", "tribe-without-sem"}
    assert set(df["model"]) == models
    group = df[(df["subject"] == "group") & (df["statistic"] == "mean")]
    assert set(group["model"]) == models
    without = df[df["model"] == "tribe-without-vis"]
    assert set(without["extractor"]) == {"sem"}
    assert_png(plots / "encoding_tribe_training.png")

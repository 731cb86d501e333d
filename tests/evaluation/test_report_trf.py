"""TRF rows and figures of the workflow summary (neuroflow.evaluation.report)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from figure_helpers import assert_png

from neuroflow.artifacts import write_dataset
from neuroflow.evaluation import evaluate_model
from neuroflow.evaluation.report import summarize_all
from neuroflow.evaluation.summary import TABLE_COLUMNS
from neuroflow.evaluation.trf_summary import TRF_METRICS, trf_figures, trf_rows


def _trf_store(
    rng: np.random.Generator,
    *,
    subject: str,
    model: str,
    peak: float,
    n_channels: int = 7,
    lags: np.ndarray | None = None,
) -> xr.Dataset:
    """A store shaped like ``fit_trf``'s output, with its power peaking at ``peak`` s."""
    lags = np.round(np.arange(-0.1, 0.61, 0.01), 2) if lags is None else lags
    power = np.exp(-((lags - peak) ** 2) / (2 * 0.03**2)) + 0.01 * rng.random(lags.size)
    return xr.Dataset(
        {
            "trf": (
                ("lag", "feature", "channel"),
                rng.standard_normal((lags.size, 3, n_channels)).astype(np.float32),
            ),
            "cv_score": (("channel",), rng.uniform(-0.1, 0.5, n_channels).astype(np.float32)),
            "best_alpha": (("channel",), np.full(n_channels, 10.0)),
            "trf_power": (("lag",), power.astype(np.float32)),
            "peak_latency": ((), np.float32(lags[np.argmax(power)])),
        },
        coords={
            "lag": ("lag", lags, {"units": "s"}),
            "feature": np.array([f"f:{i}" for i in range(3)], dtype=object),
            "channel": np.array([f"E{i}" for i in range(n_channels)], dtype=object),
        },
        attrs={"subject": subject, "model": model, "feature_spaces": [f"{model}_space"]},
    )


@pytest.fixture
def stores(rng: np.random.Generator) -> list[xr.Dataset]:
    """Three subjects x two models; subject 03 has two recordings of the visual model."""
    out = []
    for subject in ("01", "02", "03"):
        out.append(_trf_store(rng, subject=subject, model="visual", peak=0.1, n_channels=7))
        out.append(_trf_store(rng, subject=subject, model="semantic", peak=0.4, n_channels=9))
    out.append(_trf_store(rng, subject="03", model="visual", peak=0.12, n_channels=7))
    return out


def test_trf_rows_per_subject_and_group(stores: list[xr.Dataset]) -> None:
    table = trf_rows(stores)
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert set(table["analysis"]) == {"trf"} and set(table["roi"]) == {"eeg"}
    assert set(table["metric"]) == set(TRF_METRICS)
    subjects = table[table["statistic"] == "value"]
    # one row per subject x model x metric, the two recordings of sub-03 averaged
    assert len(subjects) == 3 * 2 * len(TRF_METRICS)
    assert not subjects.duplicated(["subject", "model", "metric"]).any()
    visual_03 = subjects[(subjects["subject"] == "03") & (subjects["model"] == "visual")]
    visual_03 = visual_03.set_index("metric")["value"]
    expected = np.mean([float(ds["cv_score"].mean()) for ds in (stores[4], stores[6])])
    np.testing.assert_allclose(visual_03["cv_score_mean"], expected, rtol=1e-6)
    expected = np.mean([float(ds["peak_latency"]) for ds in (stores[4], stores[6])])
    np.testing.assert_allclose(visual_03["peak_latency"], expected, rtol=1e-6)
    semantic_02 = subjects[(subjects["subject"] == "02") & (subjects["model"] == "semantic")]
    semantic_02 = semantic_02.set_index("metric")["value"]
    np.testing.assert_allclose(semantic_02["cv_score_max"], float(stores[3]["cv_score"].max()))
    assert semantic_02["peak_latency"] == pytest.approx(0.4, abs=0.011)
    assert set(subjects["feature_space"]) == {"visual_space:n/a", "semantic_space:n/a"}
    assert set(subjects["extractor"]) == {"visual_space", "semantic_space"}
    named = trf_rows(stores, layer_order={"visual_space": ["a", "b"], "semantic_space": ["c"]})
    assert set(named["feature_space"]) == {"visual_space:b", "semantic_space:c"}

    group = table[table["subject"] == "group"]
    assert len(group) == 2 * len(TRF_METRICS) * 3
    assert (group["n_subjects"] == 3).all()
    for stat, func in (
        ("mean", lambda v: v.mean()),
        ("sd", lambda v: v.std(ddof=1)),
        ("sem", lambda v: v.std(ddof=1) / np.sqrt(v.size)),
    ):
        row = group[
            (group["statistic"] == stat)
            & (group["model"] == "semantic")
            & (group["metric"] == "cv_score_mean")
        ]
        values = subjects[
            (subjects["model"] == "semantic") & (subjects["metric"] == "cv_score_mean")
        ]["value"].to_numpy()
        np.testing.assert_allclose(row["value"].item(), func(values), rtol=1e-6)
    # chance only where it means something: scores and their means, not latencies or spreads
    scored = table["metric"].str.startswith("cv_score") & table["statistic"].isin(["value", "mean"])
    assert (table.loc[scored, "chance"] == 0.0).all()
    assert table.loc[~scored, "chance"].isna().all()


def test_trf_rows_one_subject_has_no_spread(rng: np.random.Generator) -> None:
    table = trf_rows([_trf_store(rng, subject="01", model="visual", peak=0.2)])
    group = table[table["subject"] == "group"].set_index(["statistic", "metric"])
    assert group.loc[("mean", "peak_latency"), "value"] == pytest.approx(0.2, abs=0.011)
    assert np.isnan(group.loc[("sd", "peak_latency"), "value"])
    assert np.isnan(group.loc[("sem", "cv_score_mean"), "value"])
    assert (group["n_subjects"] == 1).all()


def test_trf_rows_empty_and_errors(rng: np.random.Generator) -> None:
    empty = trf_rows([])
    assert empty.empty and list(empty.columns) == list(TABLE_COLUMNS)
    ds = _trf_store(rng, subject="01", model="visual", peak=0.2).drop_vars("cv_score")
    with pytest.raises(ValueError, match=r"sub-01_trf\.zarr: variable `cv_score` is missing"):
        trf_rows([ds], ["results/eeg_trf/sub-01_trf.zarr"])
    with pytest.raises(ValueError, match="`paths` must have one entry per store"):
        trf_rows([ds], ["a.zarr", "b.zarr"])


def test_trf_figures_one_per_model(
    stores: list[xr.Dataset], rng: np.random.Generator, tmp_path: Path
) -> None:
    # a store on a coarser lag grid is joined, not dropped
    coarse = _trf_store(
        rng, subject="04", model="visual", peak=0.1, lags=np.round(np.arange(-0.1, 0.61, 0.02), 2)
    )
    paths = trf_figures([*stores, coarse], tmp_path / "plots")
    assert [p.name for p in paths] == ["trf_semantic_power.png", "trf_visual_power.png"]
    assert_png(paths)
    assert trf_figures([], tmp_path / "none") == []


def test_summarize_all_appends_trf_rows(
    make_prediction_store, stores: list[xr.Dataset], tmp_path: Path
) -> None:
    pred = make_prediction_store("pred.zarr", subject="01", model="visual", n_times=60)
    scores = evaluate_model(
        prediction=pred,
        output=tmp_path / "scores.zarr",
        config={"permutation": {"n_permutations": 20, "block_length_s": 10.0}},
        provenance={},
    )
    trf_paths = [
        write_dataset(ds, tmp_path / f"trf_{i}.zarr", provenance={}) for i, ds in enumerate(stores)
    ]
    table = tmp_path / "with" / "scores.tsv"
    summarize_all(
        scores=[scores],
        table=table,
        plots_dir=tmp_path / "with" / "plots",
        config={},
        provenance={},
        trf=trf_paths,
    )
    df = pd.read_csv(table, sep="\t", dtype={"subject": str}, na_values=["n/a"])
    df = df.astype({"subject": str})
    trf = df[df["analysis"] == "trf"]
    assert len(trf) == len(trf_rows(stores))
    assert set(trf["metric"]) == set(TRF_METRICS)
    assert (df.loc[df["analysis"] == "encoding", "roi"] != "eeg").all()
    assert len(df[df["analysis"] == "encoding"])
    assert (tmp_path / "with" / "plots" / "trf_visual_power.png").exists()

    for name, trf_arg in (("none", None), ("empty", [])):
        table = tmp_path / name / "scores.tsv"
        summarize_all(
            scores=[scores],
            table=table,
            plots_dir=tmp_path / name / "plots",
            config={},
            provenance={},
            trf=trf_arg,
        )
        df = pd.read_csv(table, sep="\t", na_values=["n/a"])
        assert "trf" not in set(df.get("analysis", pd.Series(dtype=object)))
        assert not list((tmp_path / name / "plots").glob("trf_*.png"))

"""EEG encoding rows and figures of the workflow summary (neuroflow.evaluation.eeg_summary)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from figure_helpers import assert_png

from neuroflow.artifacts import write_dataset
from neuroflow.evaluation.eeg_summary import (
    eeg_encoding_figures,
    eeg_encoding_rows,
    peak_time_course,
    r_time_course,
)
from neuroflow.evaluation.report import summarize_all
from neuroflow.evaluation.summary import ENCODING_METRICS, TABLE_COLUMNS


def _eeg_scores(
    rng: np.random.Generator,
    *,
    subject: str,
    model: str,
    peak: float,
    channels: tuple[str, ...] = ("Fz", "Cz", "Pz", "O1", "O2"),
    latencies: np.ndarray | None = None,
    feature_spaces: tuple[str, ...] = ("effnet:blocks.3",),
) -> xr.Dataset:
    """A store shaped like the ``eeg_evaluation`` stage's: scores on (channel, latency), r
    peaks at ``peak`` s on every channel, O1 and O2 the strongest."""
    latencies = np.round(np.arange(-0.1, 0.51, 0.02), 2) if latencies is None else latencies
    gain = np.where(np.isin(channels, ["O1", "O2"]), 0.6, 0.2)
    shape = np.exp(-((latencies - peak) ** 2) / (2 * 0.05**2))
    r = gain[:, None] * shape[None, :] + 0.01 * rng.standard_normal((len(channels), latencies.size))
    r = r.astype(np.float32)
    dims = ("channel", "latency")
    names = np.array(channels, dtype=object)
    return xr.Dataset(
        {
            "r": (dims, r),
            "r_normalized": (dims, r / np.float32(0.8)),
            "significant": (dims, r > 0.3),
            "significant_fwer": (dims, r > 0.4),
            "noise_ceiling_r": (dims, np.full(r.shape, 0.8, np.float32)),
            "r_course": (("latency",), r.astype(np.float64).mean(0)),
        },
        coords={
            "channel": names,
            "latency": ("latency", latencies, {"units": "s"}),
            "roi": ("channel", names.copy()),
        },
        attrs={"subject": subject, "model": model, "feature_spaces": list(feature_spaces)},
    )


@pytest.fixture
def stores(rng: np.random.Generator) -> list[xr.Dataset]:
    """Three subjects x two models with different peaks."""
    out = []
    for i, subject in enumerate(("01", "02", "03")):
        out.append(_eeg_scores(rng, subject=subject, model="effnet", peak=0.1 + 0.02 * i))
        out.append(
            _eeg_scores(rng, subject=subject, model="words", peak=0.36, feature_spaces=("minilm",))
        )
    return out


def test_r_time_course_reads_the_stored_course(rng: np.random.Generator) -> None:
    ds = _eeg_scores(rng, subject="01", model="m", peak=0.2)
    course = r_time_course(ds)
    assert course.dims == ("latency",) and course.sizes["latency"] == 31
    np.testing.assert_allclose(course.values, ds["r"].values.astype(float).mean(0), rtol=1e-12)
    assert float(course["latency"][int(np.argmax(course.values))]) == pytest.approx(0.2)
    # the stored course is read, not recomputed from `r`
    planted = ds.assign(r_course=ds["r_course"] * 0 + np.linspace(0, 1, 31))
    np.testing.assert_array_equal(r_time_course(planted).values, np.linspace(0, 1, 31))
    # latency order of the store does not matter
    shuffled = ds.isel(latency=rng.permutation(ds.sizes["latency"]))
    np.testing.assert_allclose(r_time_course(shuffled).values, course.values, rtol=1e-12)


def test_eeg_encoding_rows_per_channel_and_peak(stores: list[xr.Dataset]) -> None:
    table = eeg_encoding_rows(stores, topk_percent=20.0)
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert set(table["analysis"]) == {"eeg_encoding"}
    roi_rows = table[table["metric"].isin(ENCODING_METRICS)]
    per_subject = roi_rows[roi_rows["statistic"] == "value"]
    # every channel and "all", per subject x model x metric
    assert len(per_subject) == 3 * 2 * 6 * len(ENCODING_METRICS)
    assert set(per_subject["roi"]) == {"Fz", "Cz", "Pz", "O1", "O2", "all"}
    mean_r = per_subject[per_subject["metric"] == "mean_r"].set_index(["subject", "model", "roi"])
    row = mean_r.loc[("02", "words", "all")]
    np.testing.assert_allclose(row["value"], float(stores[3]["r"].mean()), rtol=1e-5)
    assert row["n_targets"] == stores[3]["r"].size
    o1, fz = (mean_r.loc[("01", "effnet", ch), "value"] for ch in ("O1", "Fz"))
    assert o1 > 2 * fz
    # the layer of a lone ``name:layer`` space is its own column; a plain space has none
    assert set(per_subject.loc[per_subject["model"] == "effnet", "layer"]) == {"blocks.3"}
    assert set(per_subject.loc[per_subject["model"] == "words", "layer"]) == {"n/a"}
    assert set(per_subject.loc[per_subject["model"] == "words", "feature_space"]) == {"minilm:n/a"}
    group = roi_rows[(roi_rows["subject"] == "group") & (roi_rows["statistic"] == "mean")]
    assert len(group) == 2 * 6 * len(ENCODING_METRICS) and (group["n_subjects"] == 3).all()
    # with the extractors' layers, a plain space is spelled at its last layer
    named = eeg_encoding_rows(stores, layer_order={"minilm": ["hidden", "embedding"]})
    words = named[named["model"] == "words"]
    assert set(words["feature_space"]) == {"minilm:embedding"}
    assert set(words["layer"]) == {"embedding"} and set(words["extractor"]) == {"minilm"}

    peaks = table[~table["metric"].isin(ENCODING_METRICS)]
    peaks = peaks.set_index(["subject", "model", "metric"])
    for i, subject in enumerate(("01", "02", "03")):
        latency = peaks.loc[(subject, "effnet", "peak_latency"), "value"]
        assert latency == pytest.approx(0.1 + 0.02 * i, abs=0.021)
        # the peak of the largest r over channels (O1 / O2 here)
        course = peak_time_course(stores[2 * i])
        np.testing.assert_array_equal(course.values, stores[2 * i]["r"].values.max(0))
        assert peaks.loc[(subject, "effnet", "peak_r"), "value"] == pytest.approx(
            float(course.max()), rel=1e-6
        )
    group_peak = peaks.loc[("group", "words")]
    assert group_peak.loc["peak_latency", "value"] == pytest.approx(0.36, abs=0.021)
    assert group_peak.loc["peak_r", "statistic"] == "mean"
    assert group_peak.loc["peak_r", "n_subjects"] == 3
    assert group_peak.loc["peak_r", "chance"] == 0.0
    assert np.isnan(group_peak.loc["peak_latency", "chance"])


def test_eeg_encoding_rows_errors(rng: np.random.Generator) -> None:
    assert eeg_encoding_rows([]).empty
    ds = _eeg_scores(rng, subject="01", model="m", peak=0.2)
    path = "results/eeg_evaluation/m-1/sub-01_scores.zarr"
    with pytest.raises(ValueError, match=r"sub-01_scores\.zarr: an EEG encoding score store must"):
        eeg_encoding_rows([ds.drop_vars("latency")], [path])
    doubled = ds.assign_coords(latency=np.zeros(ds.sizes["latency"]))
    with pytest.raises(ValueError, match=r"coordinate `latency` must hold unique values"):
        eeg_encoding_rows([doubled], [path])
    flat = ds.drop_vars("r_course").stack(target=("latency", "channel"), create_index=False)
    with pytest.raises(
        ValueError, match=r"must have dims \('channel', 'latency'\), got \('target',"
    ):
        eeg_encoding_rows([flat], [path])
    with pytest.raises(ValueError, match=r"variable `r_course` is missing from the score store"):
        r_time_course(ds.drop_vars("r_course"), path)
    with pytest.raises(ValueError, match=r"`r_course` must have dims \('latency',\), got"):
        r_time_course(ds.assign(r_course=ds["r"]), path)
    with pytest.raises(ValueError, match="`paths` must have one entry per store"):
        eeg_encoding_rows([ds], ["a.zarr", "b.zarr"])


def test_eeg_encoding_figures_one_per_model(
    stores: list[xr.Dataset], rng: np.random.Generator, tmp_path: Path
) -> None:
    # a subject on a coarser latency grid is joined, not dropped
    coarse = _eeg_scores(
        rng,
        subject="04",
        model="effnet",
        peak=0.1,
        latencies=np.round(np.arange(-0.1, 0.51, 0.04), 2),
    )
    paths = eeg_encoding_figures([*stores, coarse], tmp_path / "plots")
    assert [p.name for p in paths] == ["eeg_encoding_effnet_r.png", "eeg_encoding_words_r.png"]
    assert_png(paths)
    assert eeg_encoding_figures([], tmp_path / "none") == []


def test_summarize_all_appends_eeg_encoding(stores: list[xr.Dataset], tmp_path: Path) -> None:
    paths = [
        write_dataset(ds, tmp_path / f"eeg_{i}.zarr", provenance={}) for i, ds in enumerate(stores)
    ]
    table = tmp_path / "summary" / "scores.tsv"
    summarize_all(
        scores=[],
        table=table,
        plots_dir=tmp_path / "summary" / "plots",
        config={},
        provenance={},
        eeg_scores=paths,
    )
    df = pd.read_csv(table, sep="\t", dtype={"subject": str}, na_values=["n/a"])
    assert set(df["analysis"]) == {"eeg_encoding"}
    assert len(df) == len(eeg_encoding_rows(stores))
    assert {"peak_r", "peak_latency", *ENCODING_METRICS} <= set(df["metric"])
    plots = sorted(p.name for p in (tmp_path / "summary" / "plots").glob("*.png"))
    assert plots == ["eeg_encoding_effnet_r.png", "eeg_encoding_words_r.png"]
    # the tidy table is also a store
    store = xr.open_zarr(table.with_suffix(".zarr"))
    assert store.sizes["row"] == len(df)

"""Layout of the summary table (``scores.tsv``): one tidy long table of every analysis."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.evaluation.analysis_summary import decoding_rows
from neuroflow.evaluation.report import summarize_all
from neuroflow.evaluation.rsa_summary import rsa_eeg_rows
from neuroflow.evaluation.summary import (
    ENCODING_METRICS,
    ROW_KEY,
    TABLE_COLUMNS,
    group_summary,
    long_rows,
    space_names,
    summary_table,
)
from neuroflow.evaluation.summary_stage import _store_summary

LAYERS = {"stats": ["output"], "words": ["embedding"], "cnn": ["b1", "b2", "pool"]}


def _scores(
    rng: np.random.Generator,
    *,
    subject: str,
    model: str,
    spaces: list[str],
    layer: str | None,
    rois: dict[str, int],
    design: str | None = None,
) -> xr.Dataset:
    """A score store like the evaluation stage's, with ROIs of the given sizes."""
    roi = np.concatenate([np.full(n, name, dtype=object) for name, n in rois.items()])
    n = roi.size
    r = rng.uniform(-0.2, 0.8, n)
    r[rng.random(n) < 0.1] = np.nan
    ceiling = rng.uniform(0.3, 0.9, n)
    attrs = {"subject": subject, "model": model, "feature_spaces": spaces}
    if layer is not None:
        attrs["layer"] = layer
    if design is not None:
        attrs["design"] = design
    return xr.Dataset(
        {
            "r": ("voxel", r),
            "r_normalized": ("voxel", r / ceiling),
            "significant": ("voxel", rng.random(n) < 0.3),
            "significant_fwer": ("voxel", rng.random(n) < 0.1),
            "noise_ceiling_r": ("voxel", ceiling),
        },
        coords={"roi": ("voxel", roi)},
        attrs=attrs,
    )


@pytest.fixture
def stores(rng: np.random.Generator) -> list[xr.Dataset]:
    """Uneven inputs: three subjects with ROIs of different sizes, one lacking a model,
    a joint model, a layer model and a single-trial model."""
    out = []
    sizes = {"01": {"v1": 11, "v2": 5}, "02": {"v1": 7, "v2": 13, "": 3}, "03": {"v1": 4}}
    for subject, rois in sizes.items():
        out.append(
            _scores(
                rng, subject=subject, model="visual", spaces=["stats"], layer="output", rois=rois
            )
        )
        out.append(
            _scores(
                rng,
                subject=subject,
                model="joint",
                spaces=["stats", "words"],
                layer="output+embedding",
                rois=rois,
            )
        )
        if subject != "03":
            out.append(
                _scores(
                    rng, subject=subject, model="cnn__b2", spaces=["cnn:b2"], layer="b2", rois=rois
                )
            )
    out.append(
        _scores(
            rng,
            subject="01",
            model="visual_trials",
            spaces=["stats"],
            layer="output",
            rois={"v1": 6},
            design="trials",
        )
    )
    return out


def _decoding_store(rng: np.random.Generator) -> xr.Dataset:
    """An EEG decoding store with identification, feature time courses and classification."""
    spaces = ["stats", "cnn:b1", "cnn:pool"]
    times = np.linspace(0.0, 0.4, 5)
    shape = (2, len(spaces), 2, 3)
    return xr.Dataset(
        {
            "identification": (
                ("subject", "feature_space", "decoder", "metric"),
                rng.random(shape),
            ),
            "identification_p": (
                ("subject", "feature_space", "decoder", "metric"),
                rng.random(shape),
            ),
            "identification_chance": (
                ("subject", "feature_space", "metric"),
                np.full((2, len(spaces), 3), 0.1),
            ),
            "feature_score": (("subject", "feature_space", "time"), rng.random((2, 3, 5))),
            "feature_cluster_p": (("subject", "feature_space", "time"), rng.random((2, 3, 5))),
            "feature_peak_latency": (("subject", "feature_space"), rng.random((2, 3))),
            "feature_onset_latency": (("subject", "feature_space"), rng.random((2, 3))),
            "class_score": (("subject", "time"), 0.5 + 0.1 * rng.random((2, 5))),
            "class_chance": (("subject",), [0.5, 0.5]),
            "class_cluster_p": (("subject", "time"), rng.random((2, 5))),
        },
        coords={
            "subject": ["01", "02"],
            "feature_space": spaces,
            "decoder": ["ridge", "contrastive"],
            "metric": ["top1", "top5", "mean_rank"],
            "time": times,
        },
    )


def _rsa_eeg_store(rng: np.random.Generator) -> xr.Dataset:
    layers = ["words", "cnn:b1", "cnn:pool"]
    return xr.Dataset(
        {"cross_temporal": (("subject", "comparison", "layer", "time"), rng.random((2, 2, 3, 4)))},
        coords={
            "subject": ["01", "02"],
            "comparison": ["spearman", "tau-a"],
            "layer": layers,
            "time": np.linspace(0.0, 0.3, 4),
        },
    )


def test_space_names_spell_every_feature_space() -> None:
    assert space_names("cnn:b2") == ("cnn", "b2", "cnn:b2")
    assert space_names("cnn", layer_order=LAYERS) == ("cnn", "pool", "cnn:pool")
    assert space_names(["stats", "words"], "output+embedding") == (
        "stats+words",
        "output+embedding",
        "stats:output+words:embedding",
    )
    # a recorded layer wins over the extractor's last one; nothing known: n/a
    assert space_names(["cnn"], ["b1"], LAYERS) == ("cnn", "b1", "cnn:b1")
    assert space_names(["stats", "words"], "n/a", {"words": ["embedding"]}) == (
        "stats+words",
        "n/a+embedding",
        "stats:n/a+words:embedding",
    )
    with pytest.raises(ValueError, match="must name at least one feature space"):
        space_names([])


def test_long_rows_equal_the_wide_summary(stores: list[xr.Dataset]) -> None:
    wide = pd.concat(
        [_store_summary(Path(f"s{i}.zarr"), ds, 10.0) for i, ds in enumerate(stores)],
        ignore_index=True,
    )
    wide = pd.concat([wide, group_summary(wide)], ignore_index=True)
    long = long_rows(wide, "encoding")
    assert list(long.columns) == list(TABLE_COLUMNS)
    assert len(long) == len(wide) * len(ENCODING_METRICS)
    keys = ["subject", "model", "feature_space", "layer", "roi", "statistic"]
    back = long.pivot_table(index=keys, columns="metric", values="value", dropna=False)
    expected = wide.set_index(keys)[list(ENCODING_METRICS)].sort_index()
    back = back.reindex(index=expected.index, columns=list(ENCODING_METRICS))
    np.testing.assert_allclose(back.to_numpy(float), expected.to_numpy(float), equal_nan=True)
    # target counts: a subject's own; on every group row the mean over subjects
    subject_n = long[long["statistic"] == "value"].set_index(keys)["n_targets"]
    wide_n = wide[wide["statistic"] == "value"].set_index(keys)["n_targets"]
    np.testing.assert_array_equal(subject_n.groupby(level=keys).first().loc[wide_n.index], wide_n)
    group = long[(long["subject"] == "group") & (long["model"] == "visual")]
    v1 = group[group["roi"] == "v1"]
    assert set(v1["statistic"]) == {"mean", "sd", "sem"}
    assert (v1["n_targets"] == np.mean([11, 7, 4])).all()
    with pytest.raises(ValueError, match=r"`wide` must have columns \['mean_r'\]"):
        long_rows(wide.drop(columns="mean_r"), "encoding")


def test_summary_table_checks_its_rows(stores: list[xr.Dataset]) -> None:
    wide = _store_summary(Path("s.zarr"), stores[0], 10.0)
    rows = long_rows(wide, "encoding")
    assert summary_table([rows, rows.iloc[:0]]).equals(summary_table([rows]))
    assert list(summary_table([]).columns) == list(TABLE_COLUMNS)
    with pytest.raises(ValueError, match=r"must have its own .* got 2 rows sharing one"):
        summary_table([rows, rows.iloc[:1]])
    with pytest.raises(ValueError, match="must name its metric"):
        summary_table([rows.assign(metric=np.where(rows.index == 3, "", rows["metric"]))])
    with pytest.raises(ValueError, match="must name its analysis"):
        summary_table([rows.assign(analysis=np.nan)])
    with pytest.raises(ValueError, match=r"must be spelled '<extractor>:<layer>'.* 'stats'"):
        summary_table([rows.assign(feature_space="stats")])
    with pytest.raises(ValueError, match=r"only the columns .* got \['mean_r'\] besides"):
        summary_table([rows.assign(mean_r=0.0)])


def test_summarize_all_writes_one_tidy_table(
    stores: list[xr.Dataset], rng: np.random.Generator, tmp_path: Path
) -> None:
    paths = [
        write_dataset(ds, tmp_path / f"s{i}.zarr", provenance={}) for i, ds in enumerate(stores)
    ]
    decoding = write_dataset(_decoding_store(rng), tmp_path / "decoding_eeg.zarr", provenance={})
    rsa = write_dataset(_rsa_eeg_store(rng), tmp_path / "rsa_eeg.zarr", provenance={})
    table = tmp_path / "summary" / "scores.tsv"
    summarize_all(
        scores=paths,
        decoding=[decoding],
        rsa=[rsa],
        table=table,
        plots_dir=tmp_path / "summary" / "plots",
        config={"plots": {"enabled": False}},
        provenance={},
        layer_order=LAYERS,
    )
    df = pd.read_csv(table, sep="\t", na_values=["n/a"], keep_default_na=False, dtype=str)
    assert list(df.columns) == list(TABLE_COLUMNS)
    for column in ("analysis", "metric", "statistic"):
        assert df[column].notna().all() and (df[column] != "").all(), column
    assert not df.duplicated(list(ROW_KEY)).any()
    assert set(df["analysis"]) == {
        "encoding",
        "trial_encoding",
        "identification_ridge",
        "identification_contrastive",
        "feature_time_course",
        "classification",
        "rsa_eeg",
    }
    # every feature space spelled <extractor>:<layer>; only classification has none
    spaced = df[df["feature_space"].notna()]
    assert all(":" in p for s in spaced["feature_space"] for p in s.split("+"))
    assert set(df.loc[df["feature_space"].isna(), "analysis"]) == {"classification"}
    assert (
        df.loc[df["analysis"] == "classification", ["model", "extractor", "layer"]]
        .isna()
        .all()
        .all()
    )
    # encoding models keep their configured names; compared spaces are their own model
    enc = df[df["analysis"] == "encoding"]
    assert set(enc["model"]) == {"visual", "joint", "cnn__b2"}
    joint = enc[enc["model"] == "joint"]
    assert set(joint["extractor"]) == {"stats+words"}
    assert set(joint["feature_space"]) == {"stats:output+words:embedding"}
    assert set(joint["layer"]) == {"output+embedding"}
    assert set(enc.loc[enc["model"] == "cnn__b2", "feature_space"]) == {"cnn:b2"}
    assert set(df.loc[df["analysis"] == "trial_encoding", "model"]) == {"visual_trials"}
    compared = df[~df["analysis"].isin(["encoding", "trial_encoding", "classification"])]
    assert (compared["model"] == compared["feature_space"]).all()
    assert {"stats:output", "cnn:b1", "cnn:pool"} <= set(compared["model"])
    assert set(df.loc[df["analysis"] == "rsa_eeg", "model"]) == {
        "words:embedding",
        "cnn:b1",
        "cnn:pool",
    }
    # encoding metrics are rows, their statistics on every group row
    assert set(enc["metric"]) == set(ENCODING_METRICS)
    assert set(enc["statistic"]) == {"value", "mean", "sd", "sem"}
    # the subject lacking a model counts in its group rows
    n = enc[(enc["subject"] == "group") & (enc["metric"] == "mean_r") & (enc["roi"] == "all")]
    assert (
        n.set_index(["model", "statistic"])["n_subjects"].astype(int).loc[("cnn__b2", "mean")] == 2
    )
    # decoding and RSA rows agree with their row builders
    built = decoding_rows(_decoding_store(np.random.default_rng(0)), LAYERS)
    assert len(df[df["analysis"].str.startswith(("identification", "feature", "class"))]) == len(
        built
    )
    assert len(df[df["analysis"] == "rsa_eeg"]) == len(rsa_eeg_rows(_rsa_eeg_store(rng), LAYERS))
    # the wide ROI summary stays in the store
    store = xr.open_zarr(table.with_suffix(".zarr"))
    assert store["mean_r"].dims == ("roi", "model")
    assert {f"{m}{s}" for m in ENCODING_METRICS for s in ("", "_sd", "_sem")} <= set(store)

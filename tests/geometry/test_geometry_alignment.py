"""Geometry metrics beside brain scores: the group's layer scores and their correlations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from neuroflow.geometry.alignment import (
    CORRELATION_COLUMNS,
    MIN_LAYERS,
    geometry_score_correlations,
    layer_scores,
)

SCORE_COLUMNS = ["feature_space", "layer", "analysis", "score"]


def _sweep(stage, extractor, layer, roi, metric, score, subject="group", **extra) -> dict:
    """One row of the layer-sweep table (with a few of its other columns)."""
    return {
        "stage": stage,
        "sweep": f"{extractor}_sweep",
        "extractor": extractor,
        "layer": layer,
        "position": extra.get("position", 0),
        "subject": subject,
        "roi": roi,
        "metric": metric,
        "score": score,
        "best": False,
    }


def _key(frame: pd.DataFrame) -> list[tuple]:
    return sorted(
        (r.feature_space, r.layer, r.analysis, round(r.score, 9)) for r in frame.itertuples()
    )


# --- layer_scores ------------------------------------------------------------------------------


def test_layer_scores_keeps_finite_group_rows_of_swept_layers():
    rows = [
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1),
        _sweep("rsa", "vit", "layer-2", "V1", "similarity", "0.25"),  # read as text
        _sweep("rsa", "vit", "layer-3", "V1", "similarity", np.nan),
        _sweep("rsa", "vit", "layer-4", "V1", "similarity", np.inf),
        _sweep("rsa", "vit", "layer-5", "V1", "similarity", "n/a"),
        _sweep("rsa", "vit", "layer-6", "V1", "similarity", -np.inf),
        _sweep("rsa", "vit", "selected", "V1", "similarity", 0.3),
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.9, subject="01"),
        _sweep("rsa", "vit", "layer-2", "V1", "similarity", 0.8, subject="sub-02"),
    ]
    scores = layer_scores(pd.DataFrame(rows))
    assert list(scores.columns) == SCORE_COLUMNS
    assert _key(scores) == [
        ("vit", "layer-1", "rsa similarity: V1", 0.1),
        ("vit", "layer-2", "rsa similarity: V1", 0.25),
    ]
    assert scores["score"].dtype == np.float64


def test_whole_brain_rows_are_kept_only_for_stages_without_rois():
    rows = [
        # rsa: only whole-brain rows, kept
        _sweep("rsa", "vit", "layer-1", "all", "similarity", 0.2),
        _sweep("rsa", "vit", "layer-2", "all", "similarity", 0.4),
        # identification: whole brain and an ROI, the whole brain is left out
        _sweep("identification_fmri", "vit", "layer-1", "all", "top1", 0.5),
        _sweep("identification_fmri", "vit", "layer-1", "FFA", "top1", 0.6),
        _sweep("identification_fmri", "vit", "layer-2", "all", "top1", 0.7),
        _sweep("identification_fmri", "vit", "layer-2", "FFA", "top1", 0.8),
        # an ROI whose only rows are not the group's does not count
        _sweep("rsa_eeg", "vit", "layer-1", "all", "similarity", 0.05),
        _sweep("rsa_eeg", "vit", "layer-1", "occipital", "similarity", 0.06, subject="01"),
    ]
    scores = layer_scores(pd.DataFrame(rows))
    assert _key(scores) == [
        ("vit", "layer-1", "identification_fmri top1: FFA", 0.6),
        ("vit", "layer-1", "rsa similarity: all", 0.2),
        ("vit", "layer-1", "rsa_eeg similarity: all", 0.05),
        ("vit", "layer-2", "identification_fmri top1: FFA", 0.8),
        ("vit", "layer-2", "rsa similarity: all", 0.4),
    ]


def test_layer_scores_group_and_whole_brain_names_are_parameters():
    rows = [
        _sweep("rsa", "cnn", "conv1", "brain", "similarity", 0.1, subject="avg"),
        _sweep("rsa", "cnn", "conv1", "all", "similarity", 0.2, subject="avg"),
        _sweep("rsa", "cnn", "conv1", "brain", "similarity", 0.3),
    ]
    scores = layer_scores(pd.DataFrame(rows), group="avg", all_roi="brain")
    assert _key(scores) == [("cnn", "conv1", "rsa similarity: all", 0.2)]


def test_encoding_stages_read_as_encoding():
    rows = [
        _sweep("evaluation", "vit", "layer-1", "V1", "r", 0.3),
        _sweep("trial_evaluation", "vit", "layer-1", "V1", "r", 0.2),
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1),
    ]
    scores = layer_scores(pd.DataFrame(rows))
    assert sorted(scores["analysis"]) == [
        "encoding r: V1",
        "rsa similarity: V1",
        "trial encoding r: V1",
    ]


def test_layer_scores_one_row_per_space_layer_and_analysis():
    rows = [
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1),
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1),
        _sweep("rsa", "bert", "layer-1", "V1", "similarity", 0.4),
    ]
    scores = layer_scores(pd.DataFrame(rows))
    assert len(scores) == 2
    assert not scores.duplicated(["feature_space", "layer", "analysis"]).any()


def test_layer_scores_without_group_rows_is_empty():
    rows = [
        _sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1, subject="01"),
        _sweep("rsa", "vit", "selected", "V1", "similarity", 0.1),
    ]
    scores = layer_scores(pd.DataFrame(rows))
    assert scores.empty and list(scores.columns) == SCORE_COLUMNS


def test_layer_scores_needs_the_sweep_columns():
    table = pd.DataFrame([_sweep("rsa", "vit", "layer-1", "V1", "similarity", 0.1)])
    with pytest.raises(
        ValueError,
        match=r"sweeps must have the layer-sweep columns \['extractor', 'layer', 'metric', "
        r"'roi', 'score', 'stage', 'subject'\], got \[.*\] instead \(missing \['roi', "
        r"'score'\]\)",
    ):
        layer_scores(table.drop(columns=["score", "roi"]))


# --- geometry_score_correlations ---------------------------------------------------------------


def _geometry(space: str, layers: list[str], values: dict[str, np.ndarray]) -> pd.DataFrame:
    """Rows shaped like :func:`neuroflow.geometry.stage.geometry_table`."""
    rows = [
        {
            "feature_space": space,
            "layer": layer,
            "position": j,
            "depth": j / max(len(layers) - 1, 1),
            "metric": metric,
            "value": float(column[j]),
            "units": "",
        }
        for metric, column in values.items()
        for j, layer in enumerate(layers)
    ]
    return pd.DataFrame(rows)


def _scores(space: str, layers: list[str], analysis: str, score: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "feature_space": space,
            "layer": layers,
            "analysis": analysis,
            "score": np.asarray(score, dtype=float),
        }
    )


@pytest.fixture
def five_layers(rng) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, np.ndarray], np.ndarray]:
    layers = [f"layer-{i}" for i in range(5)]
    score = rng.normal(size=5)
    values = {
        "rising": np.exp(3 * score) + 1.0,  # monotone, not linear
        "falling": -(score**3),
        "noisy": rng.normal(size=5),
        "flat": np.full(5, 2.5),
    }
    geometry = _geometry("vit", layers, values)
    scores = _scores("vit", layers, "rsa similarity: V1", score)
    return geometry, scores, values, score


def test_correlations_across_five_layers(five_layers):
    geometry, scores, values, score = five_layers
    table = geometry_score_correlations(geometry, scores)
    assert list(table.columns) == list(CORRELATION_COLUMNS)
    by_metric = table.set_index("metric")
    assert list(by_metric.index) == ["rising", "falling", "noisy", "flat"]
    assert set(table["feature_space"]) == {"vit"}
    assert set(table["analysis"]) == {"rsa similarity: V1"}
    assert (table["n_layers"] == 5).all()
    assert by_metric.loc["rising", "spearman_rho"] == pytest.approx(1.0)
    assert by_metric.loc["falling", "spearman_rho"] == pytest.approx(-1.0)
    for metric in ("rising", "falling", "noisy"):
        expected = spearmanr(values[metric], score)[0]
        assert by_metric.loc[metric, "spearman_rho"] == pytest.approx(expected, abs=1e-12)
    assert np.isnan(by_metric.loc["flat", "spearman_rho"])


def test_a_constant_score_gives_nan(five_layers):
    geometry, scores, _, _ = five_layers
    table = geometry_score_correlations(geometry, scores.assign(score=0.4))
    assert len(table) == 4 and table["spearman_rho"].isna().all()


def test_layers_are_matched_by_name_and_few_layers_give_no_row(rng):
    deep = [f"block{i}" for i in range(6)]
    geometry = pd.concat(
        [
            _geometry("deep", deep, {"pr": np.arange(6.0)}),
            _geometry("shallow", ["a", "b"], {"pr": np.array([1.0, 2.0])}),
        ]
    )
    shuffled = [deep[i] for i in (4, 0, 5, 2)]  # four of the six layers, out of order
    scores = pd.concat(
        [
            _scores("deep", shuffled, "encoding r: V1", [4.0, 0.0, 5.0, 2.0]),
            _scores("deep", deep[:2], "encoding r: V4", [0.1, 0.2]),
            _scores("shallow", ["a", "b"], "encoding r: V1", [0.3, 0.1]),
        ]
    )
    table = geometry_score_correlations(geometry, scores)
    assert table[["feature_space", "metric", "analysis", "n_layers"]].values.tolist() == [
        ["deep", "pr", "encoding r: V1", 4]
    ]
    assert table["spearman_rho"].iloc[0] == pytest.approx(1.0)


def test_non_finite_values_leave_their_layer_out():
    layers = ["l1", "l2", "l3", "l4"]
    geometry = _geometry("s", layers, {"a": np.array([1.0, np.nan, 3.0, 2.0])})
    scores = pd.concat(
        [
            _scores("s", layers, "four", [10.0, 20.0, 30.0, 20.5]),
            _scores("s", layers, "two", [1.0, 2.0, np.inf, np.nan]),
        ]
    )
    table = geometry_score_correlations(geometry, scores)
    assert table["analysis"].tolist() == ["four"]
    assert table["n_layers"].tolist() == [MIN_LAYERS]
    assert table["spearman_rho"].iloc[0] == pytest.approx(1.0)


def test_correlations_from_layer_scores():
    layers = ["layer-1", "layer-2", "layer-3"]
    sweeps = pd.DataFrame(
        [
            _sweep("rsa", "vit", layer, "all", "similarity", s)
            for layer, s in zip(layers, [3.0, 1.0, 2.0], strict=True)
        ]
        + [_sweep("rsa", "vit", "selected", "all", "similarity", 3.0)]
    )
    geometry = _geometry("vit", layers, {"pr": np.array([30.0, 10.0, 20.0])})
    table = geometry_score_correlations(geometry, layer_scores(sweeps))
    assert table.to_dict("records") == [
        {
            "feature_space": "vit",
            "metric": "pr",
            "analysis": "rsa similarity: all",
            "n_layers": 3,
            "spearman_rho": pytest.approx(1.0),
        }
    ]


def test_no_scores_give_an_empty_table(five_layers):
    geometry, _, _, _ = five_layers
    empty = layer_scores(pd.DataFrame([_sweep("rsa", "vit", "l", "V1", "r", 1.0, subject="01")]))
    table = geometry_score_correlations(geometry, empty)
    assert table.empty and list(table.columns) == list(CORRELATION_COLUMNS)

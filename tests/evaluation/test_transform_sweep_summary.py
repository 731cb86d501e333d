"""The transform-sweep summary: variant rows of scores.tsv, headline scores, the figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from figure_helpers import assert_png

from neuroflow.evaluation.transform_sweep import (
    plot_transform_sweeps,
    transform_sweep_table,
    write_transform_sweeps,
)

VARIANTS = [
    {"sweep": "stats", "extractor": f"stats__blur_sigma_{s}", "transform": "blur_sigma", "value": v}
    for s, v in (("0", 0.0), ("1p5", 1.5), ("4", 4.0))
]


def _scores(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for variant in VARIANTS:
        for subject, statistic in (("01", "value"), ("02", "value"), ("group", "mean")):
            for roi in ("V1", "FFA", "noise"):
                drop = variant["value"] * (0.05 if roi == "V1" else 0.0)
                rows.append(
                    {
                        "analysis": "encoding",
                        "subject": subject,
                        "model": f"visual__{variant['extractor'].split('__')[1]}",
                        "extractor": variant["extractor"],
                        "roi": roi,
                        "metric": "mean_r",
                        "statistic": statistic,
                        "value": 0.4 - drop + 0.01 * rng.standard_normal(),
                    }
                )
        rows.append(
            {
                "analysis": "rsa",
                "subject": "01",
                "model": "",
                "extractor": variant["extractor"],
                "roi": "V1",
                "metric": "spearman",
                "statistic": "value",
                "value": 0.3 - 0.02 * variant["value"],
            }
        )
    rows.append(  # another extractor's rows are not part of the sweep
        {
            "analysis": "encoding",
            "subject": "group",
            "model": "semantic",
            "extractor": "text",
            "roi": "V1",
            "metric": "mean_r",
            "statistic": "mean",
            "value": 0.2,
        }
    )
    return pd.DataFrame(rows)


def test_table_keeps_the_variant_rows_with_their_values() -> None:
    scores = _scores(np.random.default_rng(0))
    table = transform_sweep_table(scores, VARIANTS)
    assert len(table) == len(scores) - 1
    assert list(table.columns[:3]) == ["sweep", "transform", "transform_value"]
    assert set(table["transform_value"]) == {0.0, 1.5, 4.0}
    assert "text" not in set(table["extractor"])
    v1 = table[(table["analysis"] == "rsa")].sort_values("transform_value")
    np.testing.assert_allclose(v1["value"], [0.3, 0.27, 0.22])


def test_table_needs_the_extractor_column() -> None:
    with pytest.raises(ValueError, match="extractor"):
        transform_sweep_table(pd.DataFrame({"analysis": ["encoding"]}), VARIANTS)


def test_figure_has_one_panel_per_analysis(tmp_path) -> None:
    scores = _scores(np.random.default_rng(1))
    fig = plot_transform_sweeps(transform_sweep_table(scores, VARIANTS))
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["stats: encoding", "stats: rsa"]
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert set(lines) == {"V1", "FFA", "noise"}
    np.testing.assert_allclose(lines["V1"].get_xdata(), [0.0, 1.5, 4.0])
    # the group mean is drawn, not the subjects'
    group = scores[
        (scores["subject"] == "group") & (scores["roi"] == "V1") & (scores["extractor"] != "text")
    ]
    np.testing.assert_allclose(lines["V1"].get_ydata(), group["value"].to_numpy())
    with pytest.raises(ValueError, match="headline scores"):
        plot_transform_sweeps(transform_sweep_table(scores, VARIANTS).iloc[:0])


def test_write_from_a_scores_file(tmp_path) -> None:
    path = tmp_path / "scores.tsv"
    _scores(np.random.default_rng(2)).to_csv(path, sep="\t", index=False)
    out = write_transform_sweeps(
        scores_tsv=path,
        variants=VARIANTS,
        table=tmp_path / "t.tsv",
        plot=tmp_path / "t.png",
    )
    assert len(pd.read_csv(tmp_path / "t.tsv", sep="\t")) == len(out) > 0
    assert_png(tmp_path / "t.png")
    with pytest.raises(ValueError, match="must have rows for the transform-sweep variants"):
        write_transform_sweeps(
            scores_tsv=path,
            variants=[{**VARIANTS[0], "extractor": "absent"}],
            table=tmp_path / "u.tsv",
            plot=tmp_path / "u.png",
        )
    assert not (tmp_path / "u.tsv").exists()

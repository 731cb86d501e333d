"""A transform sweep through ``snakemake`` on a generated fMRI movie (not the demo).

``transforms: {blur_sigma: [0, 3, 12]}`` on the image-statistics extractor gives three
extractors and three variants of the model reading it, each scored like any model;
``transform_sweeps.tsv`` gathers their summary rows with the blur of each, and the
figure draws the score against the blur. The planted luminance drive survives blur (the
mean luminance does not change), so every variant predicts the blob.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dataset_shapes import make_fmri_movie
from figure_helpers import assert_png
from shape_helpers import run_shape, summary_dir, summary_table
from workflow_helpers import planned_jobs

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

BLURS = [0.0, 3.0, 12.0]


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("blur")
    make_fmri_movie(root / "bids", seed=7, n_subjects=1, n_volumes=100)
    config = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "features": {
            "extractors": [
                {
                    "name": "stats",
                    "extractor": "image_statistics",
                    "transforms": {"blur_sigma": BLURS},
                }
            ]
        },
        "encoding": {
            "models": {"visual": {"feature_spaces": ["stats"]}},
            "alphas": {"start": 0.0, "stop": 4.0, "num": 5},
        },
        "evaluation": {"permutation": {"n_permutations": 20}},
        "qc": {"enabled": False},
        "geometry": {"enabled": False},
    }
    return run_shape(root / "run", config)


def test_one_extractor_and_one_model_per_value(swept):
    results = swept / "results"
    features = sorted(p.parent.name.rsplit("-", 1)[0] for p in results.glob("features/*/*.zarr"))
    assert features == ["stats__blur_sigma_0", "stats__blur_sigma_12", "stats__blur_sigma_3"]
    for path in results.glob("features/*/*.zarr"):
        blur = xr.open_zarr(path).attrs["transforms"]["blur_sigma"]
        assert path.parent.name.startswith(f"stats__blur_sigma_{blur:g}-")
    table = summary_table(swept)
    encoding = table[(table["analysis"] == "encoding") & (table["metric"] == "mean_r")]
    assert set(encoding["model"]) == {f"visual__blur_sigma_{b:g}" for b in BLURS}
    assert planned_jobs(swept) == {}


def test_sweep_table_and_figure(swept):
    folder = summary_dir(swept)
    sweep = pd.read_csv(folder / "transform_sweeps.tsv", sep="\t", na_values="n/a")
    assert set(sweep["sweep"]) == {"stats"} and set(sweep["transform"]) == {"blur_sigma"}
    assert sorted(set(sweep["transform_value"])) == BLURS
    rows = sweep[
        (sweep["analysis"] == "encoding")
        & (sweep["metric"] == "mean_r")
        & (sweep["statistic"] == "value")
    ]
    assert len(rows) == len(BLURS)  # one subject, no atlas: one row per value
    assert set(zip(rows["transform_value"], rows["model"], strict=True)) == {
        (b, f"visual__blur_sigma_{b:g}") for b in BLURS
    }
    assert np.isfinite(rows["value"]).all() and (rows["value"] > 0).all()
    assert_png(folder / "transform_sweeps.png")

"""Long names, units and coordinates of the decoding, RSA and summary variables."""

from __future__ import annotations

import numpy as np
import xarray as xr

from neuroflow.variables import DESCRIPTIONS, describe_variables, undescribed


def _dataset(rng: np.random.Generator) -> xr.Dataset:
    return xr.Dataset(
        {
            "class_score": (("subject", "time"), rng.random((2, 7))),
            "class_null": (("subject", "permutation", "time"), rng.random((2, 5, 7))),
            "group_class_cluster_p": (("time",), rng.random(7)),
            "feature_peak_latency": (("subject",), rng.random(2), {"units": "ms"}),
            "mean_r_sem": (("roi",), rng.random(3)),
            "something_new": (("roi",), rng.random(3)),
        },
        coords={"subject": ["01", "02"], "time": np.linspace(-0.1, 0.5, 7), "roi": list("abc")},
    )


def test_describe_variables_fills_names_units_and_indices(rng: np.random.Generator) -> None:
    ds = _dataset(rng)
    out = describe_variables(ds)
    assert out["class_score"].attrs == {
        "long_name": "time-resolved classification score on held-out epochs",
        "units": "balanced accuracy",
    }
    group = out["group_class_cluster_p"].attrs
    assert group["long_name"].startswith("group test: cluster-level permutation p-value")
    assert group["units"] == "p-value"
    assert out["mean_r_sem"].attrs["long_name"].startswith("across-subject SEM of the mean test")
    # a stage's own attributes win
    assert out["feature_peak_latency"].attrs["units"] == "ms"
    assert out["feature_peak_latency"].attrs["long_name"] == "latency of the peak decoding r"
    # the permutation dim is indexed, the data untouched, the input left as it was
    np.testing.assert_array_equal(out["permutation"].values, np.arange(5))
    xr.testing.assert_equal(out["class_null"].drop_vars("permutation"), ds["class_null"])
    assert "permutation" not in ds.coords and not ds["class_score"].attrs
    assert undescribed(out) == ["something_new: no long_name", "something_new: no units"]


def test_undescribed_lists_variables_and_bare_dimensions(rng: np.random.Generator) -> None:
    problems = undescribed(_dataset(rng))
    assert "class_score: no long_name" in problems
    assert "feature_peak_latency: no units" not in problems
    assert "dimension permutation: no coordinate" in problems
    # a dimension with a non-index coordinate along it counts as described
    pairs = xr.Dataset(
        {"model_rdm": (("pair",), rng.random(3), {"long_name": "x", "units": "y"})},
        coords={"stimulus_a": ("pair", ["a", "a", "b"])},
    )
    assert undescribed(pairs) == []


def test_every_description_is_complete() -> None:
    patterns = [p for p, _, _ in DESCRIPTIONS]
    assert len(set(patterns)) == len(patterns)
    for pattern, long_name, units in DESCRIPTIONS:
        assert long_name and units, pattern

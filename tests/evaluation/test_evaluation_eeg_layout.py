"""EEG encoding scores on (channel, latency) maps; fMRI scores stay on their voxel dim."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.evaluation.metrics import pearson_r
from neuroflow.evaluation.stage import evaluate_model, flatten_targets, unflatten_targets
from neuroflow.evaluation.summary_stage import _store_summary

N_STIM, N_REP, N_CH, N_LAT = 11, 3, 5, 13
CONFIG = {
    "permutation": {"n_permutations": 200, "seed": 3},
    "metrics": ["r_per_repeat", "r2_per_repeat"],
    "fwer": {"family": "roi"},
}
PER_TARGET = (
    "r",
    "r2",
    "noise_ceiling_r",
    "noise_ceiling_r2",
    "r_normalized",
    "r2_normalized",
    "p_value",
    "p_permutation",
    "p_fdr",
    "p_fwer",
    "cv_score",
    "significant",
    "significant_fwer",
)


def _eeg_prediction(rng: np.random.Generator) -> xr.Dataset:
    """A store shaped like ``fit_eeg_encoding``'s: the planted response peaks at 0.1 s."""
    latencies = np.round(np.linspace(-0.1, 0.5, N_LAT), 3)
    channels = np.array(["Fz", "Cz", "Pz", "O1", "O2"], dtype=object)
    gain = np.exp(-((latencies - 0.1) ** 2) / (2 * 0.05**2))[None, :] * rng.uniform(
        0.3, 1.5, (N_CH, 1)
    )
    signal = rng.standard_normal((N_STIM, N_CH, N_LAT)) * gain
    y_test = signal[None] + 0.5 * rng.standard_normal((N_REP, N_STIM, N_CH, N_LAT))
    y_pred = signal + 0.3 * rng.standard_normal(signal.shape)
    uv = {"units": "µV"}
    return xr.Dataset(
        {
            "y_pred": (("stimulus", "channel", "latency"), y_pred.astype(np.float32), uv),
            "y_test": (
                ("repeat", "stimulus", "channel", "latency"),
                y_test.astype(np.float32),
                uv,
            ),
            "cv_score": (
                ("channel", "latency"),
                rng.uniform(-0.1, 0.4, (N_CH, N_LAT)).astype(np.float32),
                {"units": "1"},
            ),
            "r_course": (("latency",), np.zeros(N_LAT, np.float32), {"units": "1"}),
        },
        coords={
            "stimulus": [f"img-{i:02d}" for i in range(N_STIM)],
            "repeat": np.arange(N_REP),
            "channel": channels,
            "latency": ("latency", latencies, {"units": "s"}),
            "roi": ("channel", channels.copy()),
        },
        attrs={
            "subject": "01",
            "model": "visual",
            "feature_spaces": ["image_statistics"],
            "tr": 1.0,
            "exchangeable_samples": True,
            "design": "epochs",
        },
    )


def _flat_prediction(ds: xr.Dataset) -> xr.Dataset:
    """The same store with a flat, latency-major ``target`` dim (the former layout)."""
    flat = ds.drop_vars("r_course").stack(target=("latency", "channel"), create_index=False)
    return flat.assign_coords(target=np.arange(flat.sizes["target"]))


@pytest.fixture
def eeg_store(rng: np.random.Generator, tmp_path: Path) -> tuple[xr.Dataset, Path]:
    ds = _eeg_prediction(rng)
    return ds, write_dataset(ds, tmp_path / "sub-01_encoding.zarr", provenance={})


def test_eeg_scores_are_channel_by_latency(eeg_store, tmp_path, provenance):
    src, pred = eeg_store
    out = evaluate_model(
        prediction=pred, output=tmp_path / "scores.zarr", config=CONFIG, provenance=provenance
    )
    ds = xr.open_zarr(out).load()
    assert dict(ds.sizes) == {"channel": N_CH, "latency": N_LAT, "repeat": N_REP}
    assert "target" not in ds.dims and "target" not in ds.coords
    assert set(ds.indexes) == {"channel", "latency", "repeat"}
    for name in PER_TARGET:
        assert ds[name].dims == ("channel", "latency"), name
    for name in ("r_per_repeat", "r2_per_repeat"):
        assert ds[name].dims == ("repeat", "channel", "latency"), name
    assert ds["significant"].dtype == bool and ds["significant_fwer"].dtype == bool
    np.testing.assert_array_equal(ds["channel"].values, src["channel"].values)
    np.testing.assert_array_equal(ds["latency"].values, src["latency"].values)
    assert ds["latency"].attrs["units"] == "s"
    assert ds["roi"].dims == ("channel",)
    np.testing.assert_array_equal(ds["roi"].values, src["channel"].values)
    for name, var in ds.data_vars.items():
        if var.dtype != bool:
            assert var.attrs["units"] == "1", name
    # every map is the score of its own (channel, latency)
    y_mean = src["y_test"].values.astype(np.float64).mean(0)
    y_pred = src["y_pred"].values.astype(np.float64)
    r = pearson_r(y_mean.reshape(N_STIM, -1), y_pred.reshape(N_STIM, -1))
    np.testing.assert_allclose(ds["r"].values, r.reshape(N_CH, N_LAT), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ds["cv_score"].values, src["cv_score"].values)
    # the channel-averaged course, on latency, is what the summary and figures read
    assert ds["r_course"].dims == ("latency",)
    np.testing.assert_allclose(
        ds["r_course"].values, ds["r"].values.astype(np.float64).mean(0), rtol=1e-12
    )
    peak = float(ds["latency"][int(np.argmax(ds["r_course"].values))])
    assert abs(peak - 0.1) <= 0.06
    # the store the workflow reads back is the one written
    xr.testing.assert_identical(open_dataset(out).load().drop_attrs(), ds.drop_attrs())


def test_eeg_scores_equal_those_of_the_flat_layout(eeg_store, tmp_path, provenance):
    src, pred = eeg_store
    flat_pred = write_dataset(_flat_prediction(src), tmp_path / "flat.zarr", provenance={})
    maps = xr.open_zarr(
        evaluate_model(
            prediction=pred, output=tmp_path / "maps.zarr", config=CONFIG, provenance=provenance
        )
    ).load()
    flat = xr.open_zarr(
        evaluate_model(
            prediction=flat_pred,
            output=tmp_path / "flat_scores.zarr",
            config=CONFIG,
            provenance=provenance,
        )
    ).load()
    assert flat["r"].dims == ("target",)
    for name in (*PER_TARGET, "r_per_repeat"):
        # flat targets are latency-major: (..., latency, channel) -> (..., channel, latency)
        values = flat[name].values.reshape(*flat[name].shape[:-1], N_LAT, N_CH)
        np.testing.assert_array_equal(maps[name].values, np.swapaxes(values, -1, -2), name)
    # and so are the summary rows (the ROI of a target is its channel)
    by_map = _store_summary(Path("maps.zarr"), maps, 10.0)
    by_flat = _store_summary(Path("flat.zarr"), flat, 10.0)
    assert set(by_map["roi"]) == {"Fz", "Cz", "Pz", "O1", "O2", "all"}
    assert (by_map.loc[by_map["roi"] == "all", "n_targets"] == N_CH * N_LAT).all()
    numbers = by_map.select_dtypes("number").columns
    np.testing.assert_allclose(
        by_map[numbers].to_numpy(float), by_flat[numbers].to_numpy(float), rtol=1e-12
    )


def test_fmri_scores_keep_their_voxel_dim(make_prediction_store, tmp_path, provenance):
    pred = make_prediction_store(n_times=60, n_repeats=2)
    out = evaluate_model(
        prediction=pred, output=tmp_path / "scores.zarr", config=CONFIG, provenance=provenance
    )
    ds = xr.open_zarr(out)
    assert set(ds.dims) == {"voxel", "repeat"}
    for name in PER_TARGET:
        if name in ds:
            assert ds[name].dims == ("voxel",), name
    assert ds["r_per_repeat"].dims == ("repeat", "voxel")
    assert not {"channel", "latency", "target", "r_course"} & set(ds.variables)
    for coord in ("roi", "i", "j", "k", "x", "y", "z"):
        assert ds[coord].dims == ("voxel",), coord


def test_flatten_round_trip_leaves_no_multiindex(rng):
    ds = _eeg_prediction(rng)
    flat = flatten_targets(ds, ("channel", "latency"))
    assert flat["y_test"].dims == ("repeat", "stimulus", "target")
    assert flat.sizes["target"] == N_CH * N_LAT
    assert "target" not in flat.xindexes and "channel" not in flat.xindexes
    assert flat["roi"].dims == ("target",)
    np.testing.assert_array_equal(flat["roi"].values, np.repeat(ds["channel"].values, N_LAT))
    back = unflatten_targets(
        flat[["y_test", "cv_score"]].reset_coords(drop=True), ds, ds["cv_score"].dims
    )
    xr.testing.assert_identical(
        back["y_test"].reset_coords(drop=True), ds["y_test"].reset_coords(drop=True)
    )
    np.testing.assert_array_equal(back["cv_score"].values, ds["cv_score"].values)
    assert back["latency"].attrs == {"units": "s"} and back["roi"].dims == ("channel",)
    assert flatten_targets(ds, ("channel",)) is ds
    bad = xr.Dataset({"x": (("target", "repeat"), np.zeros((N_CH * N_LAT, 2)))})
    with pytest.raises(ValueError, match=r"`x` must have `target` as its last dim, got"):
        unflatten_targets(bad, ds, ("channel", "latency"))


def test_eeg_prediction_errors(rng, tmp_path, provenance):
    ds = _eeg_prediction(rng)
    swapped = ds.assign(y_test=ds["y_test"].transpose("repeat", "stimulus", "latency", "channel"))
    path = write_dataset(swapped, tmp_path / "swapped.zarr", provenance={})
    with pytest.raises(ValueError, match=r"`y_test` must have dims \('repeat', 'stimulus', 'chan"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config=CONFIG, provenance={})
    per_stimulus = ds.assign_coords(roi=("stimulus", np.array(["x"] * N_STIM, dtype=object)))
    path = write_dataset(per_stimulus, tmp_path / "roi.zarr", provenance={})
    with pytest.raises(ValueError, match=r"coordinate `roi` must lie on the target dims"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config=CONFIG, provenance={})
    flat = ds.drop_vars("r_course").rename(latency="target")
    path = write_dataset(flat, tmp_path / "target.zarr", provenance={})
    with pytest.raises(ValueError, match=r"must not have a `target` dim beside other target"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config=CONFIG, provenance={})
    one = ds.drop_vars(["y_test", "r_course", "cv_score"]).assign(
        y_pred=ds["y_pred"].isel(channel=0, latency=0, drop=True)
    )
    one["y_test"] = ds["y_test"].isel(channel=0, latency=0, drop=True)
    path = write_dataset(one, tmp_path / "one.zarr", provenance={})
    with pytest.raises(ValueError, match=r"`y_pred` must have dims \(time, voxel\) or"):
        evaluate_model(prediction=path, output=tmp_path / "o.zarr", config=CONFIG, provenance={})
    assert not (tmp_path / "o.zarr").exists()

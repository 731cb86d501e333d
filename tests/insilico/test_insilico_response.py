"""Responses of stored encoders to stimuli presented alone, and streaming over a pool."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding import fit_encoding
from neuroflow.encoding.stored import encoder_dataset, predict_run
from neuroflow.features.resampling import hrf_weights
from neuroflow.insilico import predict_pool, roi_means, stimulus_response
from neuroflow.models import fir_delays

TR = 2.0
N_VOXELS = 9
SIZES = {"a": 7, "b": 8}
PROV = build_provenance(stage="test", version="t", config={})


def _write_run(root, run, bold, feats):
    n = bold.shape[0]
    time = np.arange(n) * TR
    voxel = np.arange(N_VOXELS)
    ds = xr.Dataset(
        {"bold": (("time", "voxel"), bold.astype(np.float32), {"units": "z"})},
        coords={
            "time": time,
            "voxel": voxel,
            "roi": ("voxel", np.array(["V1", "V2", "FFA"] * 3, dtype=object)),
            **{c: ("voxel", voxel + k) for k, c in enumerate("ijk")},
        },
        attrs={
            "tr": TR,
            "affine": np.eye(4).tolist(),
            "mask_shape": [3, 3, 1],
            "entities": {"subject": "01", "session": None, "task": "movie", "run": run},
        },
    )
    brain = write_dataset(ds, root / f"bold_run-{run}.zarr", provenance=PROV)
    paths = {}
    for name, X in feats.items():
        fds = xr.Dataset(
            {"features": (("time", "feature"), X.astype(np.float32))},
            coords={"time": time, "feature": np.arange(X.shape[1])},
        )
        paths[name] = write_dataset(fds, root / f"{name}_run-{run}.zarr", provenance=PROV)
    return brain, paths


def _fit(tmp_path, rng, spaces, delays):
    """Fit an encoder on synthetic runs whose BOLD follows FIR-delayed features."""
    W = {s: rng.standard_normal((SIZES[s] * 2, N_VOXELS)) for s in spaces}
    test_feats = {s: rng.standard_normal((36, SIZES[s])) for s in spaces}
    runs = [("1", 44, None), ("2", 48, None), ("3", 40, None), ("4", 46, None), ("5", 36, 1)]
    brain, features = [], {s: [] for s in spaces}
    for run, n, fixed in runs:
        feats = test_feats if fixed else {s: rng.standard_normal((n, SIZES[s])) for s in spaces}
        signal = sum(fir_delays(feats[s], [1, 2]) @ W[s] for s in spaces)
        bold = signal + 0.5 * rng.standard_normal((n, N_VOXELS)) + 3.0
        b, f = _write_run(tmp_path, run, bold, feats)
        brain.append(b)
        for s in spaces:
            features[s].append(f[s])
    cfg = {
        "feature_spaces": list(spaces),
        "alphas": {"start": -1, "stop": 4, "num": 11},
        "delays": delays,
        "split": {"test_runs": ["5"]},
        "device": "cpu",
        "banded": {"n_iter": 12, "concentration": [0.1, 1.0], "random_state": 0},
    }
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "enc.zarr",
        config=cfg,
        provenance=build_provenance(stage="encoding", version="t", config=cfg),
    )
    return open_dataset(out).load()


@pytest.mark.parametrize(
    ("spaces", "delays"),
    [
        (("a",), {"method": "fir", "lags": [1, 2]}),
        (("b", "a"), {"method": "fir", "lags": [0, 3]}),
        (("b", "a"), {"method": "hrf", "hrf_model": "glover"}),
    ],
    ids=["ridge-fir", "banded-fir", "banded-hrf"],
)
def test_steady_state_is_the_limit_of_a_held_stimulus(tmp_path, rng, spaces, delays):
    ds = _fit(tmp_path, rng, spaces, delays)
    n_rows = {s: rng.standard_normal((3, SIZES[s])) for s in spaces}  # three new stimuli
    expected = stimulus_response(ds, n_rows)
    assert expected.shape == (3, N_VOXELS) and expected.dtype == np.float32
    for i in range(3):
        # a run of 60 TRs: 11 TRs of other input, then stimulus i held on
        run = {s: rng.standard_normal((60, SIZES[s])) for s in spaces}
        for s in spaces:
            run[s][11:] = n_rows[s][i]
        late = predict_run(ds, run)[-12:]
        np.testing.assert_allclose(late, np.broadcast_to(expected[i], late.shape), atol=2e-4)
        # early samples still carry the other input: the limit is not trivially reached
        assert not np.allclose(predict_run(ds, run)[11], expected[i], atol=1e-2)


def test_single_trial_model_uses_the_prediction_formula(rng):
    n_in = [5, 3]
    coef = rng.standard_normal((8, 11))
    ds = encoder_dataset(
        coef=coef,
        spaces=["img", "txt"],
        n_features=n_in,
        delays={"method": "none"},
        variants=["none"],
        design_mean=rng.standard_normal((1, 8)),
        feature_mean=rng.standard_normal((1, 8)),
        feature_scale=rng.uniform(0.5, 2.0, (1, 8)),
        target_mean=rng.standard_normal(11),
        units="beta",
    )
    ds.attrs["delays"] = {"method": "none"}
    rows = {"img": rng.standard_normal((17, 5)), "txt": rng.standard_normal((17, 3))}
    np.testing.assert_allclose(
        stimulus_response(ds, rows), predict_run(ds, rows), rtol=1e-6, atol=1e-6
    )


def _library_run(tmp_path, rng, run, n_times, weights, planted):
    """An event-related run aligned with a two-model HRF library (per-voxel HRF)."""
    times = np.arange(n_times) * TR
    onsets = np.cumsum(rng.uniform(4.0, 8.0, size=n_times // 3))
    onsets = onsets[onsets < (n_times - 10) * TR]
    rows = rng.standard_normal((onsets.size, 3))
    durations = np.ones(onsets.size)
    aligned = [hrf_weights(times, TR, onsets, durations, hrf_model=m) @ rows for m in LIBRARY]
    signal = np.column_stack([aligned[m] @ weights[:, v] for v, m in enumerate(planted)])
    bold = 4.0 * signal + rng.standard_normal(signal.shape)
    voxel = np.arange(planted.size)
    brain = xr.Dataset(
        {"bold": (("time", "voxel"), bold.astype(np.float32))},
        coords={
            "time": times,
            "voxel": voxel,
            "roi": ("voxel", np.array(["a"] * voxel.size, dtype=object)),
            **dict.fromkeys("ijk", ("voxel", voxel)),
        },
        attrs={"tr": TR, "entities": {"subject": "01", "task": "images", "run": run}},
    )
    columns = np.hstack(aligned) + 0.3  # an offset, so the variants' means differ
    feats = xr.Dataset(
        {"features": (("time", "feature"), columns.astype(np.float32))},
        coords={
            "time": times,
            "feature": np.arange(columns.shape[1]),
            "hrf_variant": ("feature", np.repeat([0, 1], 3)),
        },
        attrs={"hrf_models": LIBRARY},
    )
    return (
        write_dataset(brain, tmp_path / f"bold_{run}.zarr", provenance=PROV),
        write_dataset(feats, tmp_path / f"feat_{run}.zarr", provenance=PROV),
    )


LIBRARY = ["glover", "spm"]


def test_hrf_library_uses_each_voxels_model(tmp_path, rng):
    planted = np.array([0] * 5 + [1] * 6)
    weights = rng.standard_normal((3, planted.size))
    brain, feats = [], []
    for run, n in (("1", 131), ("2", 117), ("3", 124), ("4", 109)):
        b, f = _library_run(tmp_path, rng, run, n, weights, planted)
        brain.append(b)
        feats.append(f)
    cfg = {
        "feature_spaces": ["x"],
        "model": "ridge",
        "delays": {"method": "none"},
        "split": {"test_runs": ["4"]},
        "device": "cpu",
    }
    ds = open_dataset(
        fit_encoding(
            brain=brain,
            features={"x": feats},
            output=tmp_path / "lib.zarr",
            config=cfg,
            provenance=PROV,
        )
    ).load()
    assert set(ds["hrf_model"].values) == set(LIBRARY)
    row = rng.standard_normal((1, 3))
    expected = stimulus_response(ds, {"x": row})[0]
    # a run of 80 TRs holding the stimulus on from 10 s: each variant's regressor
    times = np.arange(80) * TR
    cols = [
        hrf_weights(times, TR, np.array([10.0]), np.array([150.0]), hrf_model=m) @ row
        for m in LIBRARY
    ]
    late = predict_run(ds, {"x": np.hstack(cols)}, variants={"x": np.repeat([0, 1], 3)})[-3:]
    np.testing.assert_allclose(late, np.broadcast_to(expected, late.shape), atol=2e-3)
    # the variants really differ: one model for every voxel would give other values
    single = ds.drop_vars("hrf_model")
    assert not np.allclose(stimulus_response(single, {"x": row})[0], expected, atol=1e-3)


def _encoder(rng, n_voxels=10, rois=None, spaces=("img", "txt"), n_in=(5, 3)):
    n = sum(n_in)
    ds = encoder_dataset(
        coef=rng.standard_normal((n, n_voxels)),
        spaces=list(spaces),
        n_features=list(n_in),
        delays={"method": "none"},
        variants=["none"],
        design_mean=rng.standard_normal((1, n)) * 0.1,
        feature_mean=rng.standard_normal((1, n)),
        feature_scale=rng.uniform(0.5, 2.0, (1, n)),
        target_mean=rng.standard_normal(n_voxels),
        units="beta",
    )
    if rois is not None:
        ds = ds.assign_coords(roi=("voxel", np.array(rois, dtype=object)))
    ds = ds.assign_coords(voxel=np.arange(n_voxels))
    ds.attrs.update(delays={"method": "none"}, subject="01", model="m")
    return ds


def test_errors_name_the_space(rng):
    ds = _encoder(rng)
    good = {"img": rng.standard_normal((4, 5)), "txt": rng.standard_normal((4, 3))}
    with pytest.raises(ValueError, match=r"every feature space of the encoder \['img', 'txt'\]"):
        stimulus_response(ds, {"img": good["img"]})
    with pytest.raises(ValueError, match=r"features\['txt'\] must have shape \(n_stimuli, 3\)"):
        stimulus_response(ds, {**good, "txt": np.zeros((4, 4))})
    nan = good["img"].copy()
    nan[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"features\['img'\] must be finite, got 1 NaN"):
        stimulus_response(ds, {**good, "img": nan})
    with pytest.raises(ValueError, match=r"features\['txt'\] must have 4 rows like the other"):
        stimulus_response(ds, {**good, "txt": np.zeros((5, 3))})
    with pytest.raises(ValueError, match="encoder must be an encoding store with the fitted"):
        stimulus_response(ds.drop_vars("coef"), good)
    bad = ds.copy()
    bad.attrs["delays"] = {"method": "spline"}
    with pytest.raises(ValueError, match=r"`delays.method` must be one of .*got 'spline'"):
        stimulus_response(bad, good)
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        predict_pool(ds, [], batch_size=0)
    with pytest.raises(ValueError, match=r"track must hold target positions in \[0, 10\)"):
        predict_pool(ds, [], track=[10])
    with pytest.raises(ValueError, match="one id per feature row, got 3 ids for 4 rows"):
        predict_pool(ds, [(["a", "b", "c"], good)])


def test_roi_means_leave_out_unlabelled_targets(rng):
    labels = ["V1", "unlabelled", "FFA", "V1", "", "FFA", "FFA"]
    response = rng.standard_normal((6, 7))
    means, rois = roi_means(response, labels)
    assert rois == ["FFA", "V1"]
    np.testing.assert_allclose(means[:, 0], response[:, [2, 5, 6]].mean(1))
    np.testing.assert_allclose(means[:, 1], response[:, [0, 3]].mean(1))
    with pytest.raises(ValueError, match=r"response must have shape \(n_stimuli, 7\)"):
        roi_means(response[:, :5], labels)


def test_pool_matches_the_dense_response(rng):
    rois = ["A", "B", "unlabelled", "A", "B", "C", "A", "C", "B", "A"]
    ds = _encoder(rng, rois=rois)
    sizes = [7, 31, 2, 19]
    batches = [
        (
            [f"s{sum(sizes[:b]) + i:03d}" for i in range(n)],
            {"img": rng.standard_normal((n, 5)), "txt": rng.standard_normal((n, 3))},
        )
        for b, n in enumerate(sizes)
    ]
    dense = stimulus_response(
        ds, {s: np.concatenate([b[1][s] for b in batches]) for s in ("img", "txt")}
    )
    pool = predict_pool(ds, iter(batches), keep_voxels=True, batch_size=8, track=[5, 0])
    assert pool.ids.tolist() == [i for b in batches for i in b[0]]
    assert pool.rois == ["A", "B", "C"]
    np.testing.assert_allclose(pool.response, dense, rtol=1e-6, atol=1e-6)
    expected, _ = roi_means(dense, rois)
    np.testing.assert_allclose(pool.roi_response, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(pool.tracked, pool.response[:, [5, 0]])
    lean = predict_pool(ds, iter(batches), batch_size=64)
    assert lean.response is None and lean.tracked is None
    np.testing.assert_allclose(lean.roi_response, pool.roi_response, rtol=1e-6)
    # an encoder without regions: one region of every target
    bare = predict_pool(ds.drop_vars("roi"), iter(batches))
    assert bare.rois == ["all"]
    np.testing.assert_allclose(bare.roi_response[:, 0], dense.mean(1), rtol=1e-5, atol=1e-5)


def test_pool_memory_is_flat_in_the_pool_size():
    rng = np.random.default_rng(7)
    n_voxels = 6000
    rois = np.array(["A", "B", "C", "unlabelled"])[rng.integers(0, 4, n_voxels)]
    ds = _encoder(rng, n_voxels=n_voxels, rois=rois, spaces=("img",), n_in=(40,))

    def batches(n_batches):
        gen = np.random.default_rng(1)
        for b in range(n_batches):
            yield [f"{b}-{i}" for i in range(64)], {"img": gen.standard_normal((64, 40))}

    def peak(n_batches):
        tracemalloc.start()
        try:
            pool = predict_pool(ds, batches(n_batches), batch_size=64)
            _, top = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert pool.roi_response.shape == (64 * n_batches, 3)
        return top

    predict_pool(ds, batches(2))  # warm up imports and caches
    few, many = peak(5), peak(100)
    # one batch's (64, 6000) responses weigh 1.5 MB; 20 times the pool adds only its ROI means
    assert many < 1.25 * few, (few, many)

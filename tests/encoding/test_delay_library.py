"""The encoder's own HRF library (``delays.hrf_model`` a list) and the event regressor's penalty."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding import fit_encoding
from neuroflow.encoding.runs import event_columns
from neuroflow.encoding.stored import predict_run
from neuroflow.models.delays import hrf_convolve

TR = 1.5
N_FEATURES = 4
PROV = build_provenance(stage="test", version="t", config={})
LIBRARY = ["spm peak 4 s", "spm peak 7 s"]
# voxels 0-5 respond with SPM's HRF peaking at 4 s, 6-14 with the one peaking at 7 s
PLANTED = np.array([0] * 6 + [1] * 9)
RUNS = (("1", 143), ("2", 131), ("3", 137), ("4", 127))


def _brain(times, bold, run):
    voxel = np.arange(bold.shape[1])
    return xr.Dataset(
        {"bold": (("time", "voxel"), bold.astype(np.float32))},
        coords={
            "time": times,
            "voxel": voxel,
            "roi": ("voxel", np.array(["a"] * voxel.size, dtype=object)),
            **dict.fromkeys("ijk", ("voxel", voxel)),
        },
        attrs={"tr": TR, "entities": {"subject": "01", "task": "movie", "run": run}},
    )


def _movie(root, seed):
    """Smooth TR-sampled features; each voxel convolves them with its planted HRF."""
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((N_FEATURES, PLANTED.size))
    brain, feats = [], []
    for run, n in RUNS:
        times = np.arange(n) * TR
        X = rng.standard_normal((n, N_FEATURES))
        conv = {m: hrf_convolve(X, TR, hrf_model=m) for m in LIBRARY}
        signal = np.column_stack([conv[LIBRARY[m]] @ weights[:, v] for v, m in enumerate(PLANTED)])
        bold = signal / signal.std(0) + 0.7 * rng.standard_normal(signal.shape)
        brain.append(
            write_dataset(_brain(times, bold, run), root / f"bold_{run}.zarr", provenance=PROV)
        )
        ds = xr.Dataset(
            {"features": (("time", "feature"), X.astype(np.float32))},
            coords={"time": times, "feature": np.arange(N_FEATURES)},
        )
        feats.append(write_dataset(ds, root / f"feat_{run}.zarr", provenance=PROV))
    return brain, feats


def _fit(root, brain, feats, hrf_model, name, model="ridge"):
    """Fit one model; ``feats`` is one space's stores or a dict of spaces."""
    spaces = feats if isinstance(feats, dict) else {"x": feats}
    config = {
        "feature_spaces": list(spaces),
        "model": model,
        "delays": {"method": "hrf", "hrf_model": hrf_model},
        "split": {"test_runs": ["4"]},
        "filter_design": False,
        "device": "cpu",
        "banded": {"n_iter": 12},
    }
    out = fit_encoding(
        brain=brain,
        features=spaces,
        output=root / f"enc_{name}.zarr",
        config=config,
        provenance=PROV,
    )
    return open_dataset(out).load()


@pytest.mark.parametrize("seed", [0, 1])
def test_encoder_library_keeps_each_voxels_planted_hrf(tmp_path, seed):
    brain, feats = _movie(tmp_path, seed)
    both = _fit(tmp_path, brain, feats, LIBRARY, "both")
    assert both.attrs["hrf_models"] == LIBRARY
    assert list(both["variant"].values) == LIBRARY
    chosen = both["hrf_model"].values
    assert np.mean(chosen == np.array(LIBRARY, dtype=object)[PLANTED]) >= 0.9, chosen
    for model in LIBRARY:
        alone = _fit(tmp_path, brain, feats, model, model.replace(" ", "_"))
        assert "hrf_model" not in alone and alone.attrs["hrf_models"] == []
        mine = chosen == model
        for name in ("y_pred", "cv_score", "best_alpha"):
            np.testing.assert_allclose(
                both[name].values[..., mine], alone[name].values[..., mine], rtol=1e-6
            )
        assert np.all(both["cv_score"].values >= alone["cv_score"].values - 1e-7)
    # the stored model rebuilds each voxel's design with its own HRF
    test = open_dataset(feats[-1])
    pred = predict_run(both, {"x": test["features"].values})
    np.testing.assert_allclose(pred, both["y_pred"].values, rtol=1e-5, atol=1e-5)


def _two_spaces(root, feats):
    """The movie's features as two spaces (columns 0-1 and 2-3)."""
    spaces = {"a": [], "b": []}
    for path in feats:
        ds = open_dataset(path).load()
        for name, cols in (("a", slice(0, 2)), ("b", slice(2, N_FEATURES))):
            part = ds.isel(feature=cols)
            spaces[name].append(
                write_dataset(part, path.with_name(f"{name}_{path.name}"), provenance=PROV)
            )
    return spaces


def test_banded_library_chooses_by_ridge_then_fits_each_hrf_once(tmp_path):
    brain, feats = _movie(tmp_path, 4)
    spaces = _two_spaces(tmp_path, feats)
    banded = _fit(tmp_path, brain, spaces, LIBRARY, "banded", model="banded_ridge")
    ridge = _fit(tmp_path, brain, spaces, LIBRARY, "ridge")
    chosen = banded["hrf_model"].values
    # the HRF of each voxel is the one ridge on the same design cross-validates best
    np.testing.assert_array_equal(chosen, ridge["hrf_model"].values)
    assert np.mean(chosen == np.array(LIBRARY, dtype=object)[PLANTED]) >= 0.9, chosen
    assert banded.attrs["solver"] == "banded_ridge" and banded.attrs["hrf_models"] == LIBRARY
    for model in LIBRARY:
        alone = _fit(tmp_path, brain, spaces, model, model.replace(" ", "_"), "banded_ridge")
        mine = chosen == model
        # banded ridge searches each voxel's penalties on its own: fitting the voxels of
        # one HRF apart gives what fitting them all with that HRF gives
        for name in ("y_pred", "cv_score", "best_alpha", "variance_split", "coef"):
            # (float32 arrays: another batch of targets rounds the last bits apart)
            got, want = banded[name].values[..., mine], alone[name].values[..., mine]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * np.abs(want).max())
    assert np.isfinite(banded["y_pred"].values).all()
    pred = predict_run(
        banded, {s: open_dataset(v[-1])["features"].values for s, v in spaces.items()}
    )
    np.testing.assert_allclose(pred, banded["y_pred"].values, rtol=1e-4, atol=1e-5)


def test_a_library_of_one_model_is_that_model(tmp_path):
    brain, feats = _movie(tmp_path, 2)
    one = _fit(tmp_path, brain, feats, ["spm"], "list")
    plain = _fit(tmp_path, brain, feats, "spm", "plain")
    assert "hrf_model" not in one and one.attrs["hrf_models"] == []
    np.testing.assert_allclose(one["y_pred"].values, plain["y_pred"].values, rtol=1e-6)


def test_two_libraries_are_an_error(tmp_path):
    brain, feats = _movie(tmp_path, 3)
    aligned = []
    for path in feats:
        ds = open_dataset(path).load()
        ds = xr.concat([ds, ds], dim="feature").assign_coords(
            feature=np.arange(2 * N_FEATURES),
            hrf_variant=("feature", np.repeat([0, 1], N_FEATURES)),
        )
        ds.attrs = {"hrf_models": ["spm", "glover"]}
        aligned.append(write_dataset(ds, path.with_name(f"lib_{path.name}"), provenance=PROV))
    with pytest.raises(ValueError, match=r"must be one HRF model when the features were aligned"):
        _fit(tmp_path, brain, aligned, LIBRARY, "bad")


# --------------------------------------------------------------- event regressor penalty


def _event_related(root, seed, n_features=10):
    """Aligned stores with an event column: a strong evoked response, weak feature effects."""
    rng = np.random.default_rng(seed)
    weights = np.zeros((n_features, 12))
    weights[:2] = 0.25 * rng.standard_normal((2, 12))
    brain, feats = [], []
    for run, n in RUNS:
        times = np.arange(n) * TR
        # events every 3-6 s: the evoked response of each is a column of ones, convolved
        onsets = np.cumsum(rng.uniform(3.0, 6.0, n // 2))
        onsets = onsets[onsets < (n - 8) * TR]
        impulses = np.zeros((n, n_features + 1))
        index = (onsets / TR).astype(int)
        rows = rng.standard_normal((onsets.size, n_features))
        np.add.at(impulses, index, np.column_stack([rows, np.ones(onsets.size)]))
        aligned = hrf_convolve(impulses, TR, hrf_model="spm")
        signal = aligned[:, :n_features] @ weights + 2.0 * aligned[:, [-1]]
        bold = signal + 0.3 * rng.standard_normal(signal.shape)
        brain.append(
            write_dataset(_brain(times, bold, run), root / f"bold_{run}.zarr", provenance=PROV)
        )
        ds = xr.Dataset(
            {"features": (("time", "feature"), aligned.astype(np.float32))},
            coords={
                "time": times,
                "feature": np.arange(n_features + 1),
                "source_feature": ("feature", np.arange(n_features + 1)),
            },
            attrs={"feature_centre": [0.0] * n_features},
        )
        feats.append(write_dataset(ds, root / f"feat_{run}.zarr", provenance=PROV))
    return brain, feats


def _fit_events(root, brain, feats, penalty):
    config = {
        "feature_spaces": ["x"],
        "model": "ridge",
        "delays": {"method": "none"},
        "split": {"test_runs": ["4"]},
        "filter_design": False,
        "event_penalty": penalty,
        "device": "cpu",
    }
    out = fit_encoding(
        brain=brain,
        features={"x": feats},
        output=root / f"enc_{penalty}.zarr",
        config=config,
        provenance=PROV,
    )
    return open_dataset(out).load()


def _test_r2(store) -> float:
    """Mean over voxels of the test R² of the stored predictions."""
    y = store["y_test"].values.mean(0)
    pred = store["y_pred"].values
    return float(np.mean(1 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)))


def test_event_columns_are_read_from_the_aligned_store(tmp_path):
    _, feats = _event_related(tmp_path, 0, n_features=3)
    np.testing.assert_array_equal(
        event_columns(open_dataset(feats[0])), [False, False, False, True]
    )
    plain = open_dataset(feats[0]).load()
    plain.attrs = {}
    assert not event_columns(plain).any()


def test_event_regressor_with_a_small_relative_penalty(tmp_path):
    """A large evoked response independent of the features: shrinking it with the
    features' penalty costs the fit, a small relative penalty keeps it, and the stored
    scale records it."""
    gains = []
    for seed in range(3):
        brain, feats = _event_related(tmp_path / str(seed), seed)
        light = _fit_events(tmp_path / str(seed), brain, feats, 1e-3)
        alike = _fit_events(tmp_path / str(seed), brain, feats, 1.0)
        gains.append(_test_r2(light) - _test_r2(alike))
        scale_light = light["feature_scale"].values[0]
        scale_alike = alike["feature_scale"].values[0]
        np.testing.assert_allclose(scale_light[:-1], scale_alike[:-1], rtol=1e-6)
        np.testing.assert_allclose(scale_light[-1], scale_alike[-1] * np.sqrt(1e-3), rtol=1e-6)
        # the stored model reproduces its predictions with the scaled event column
        test = open_dataset(feats[-1])
        pred = predict_run(light, {"x": test["features"].values})
        np.testing.assert_allclose(pred, light["y_pred"].values, rtol=1e-4, atol=1e-4)
    assert min(gains) > 0, gains

"""The encoding stage end to end on small synthetic zarr stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding import fit_encoding, group_repeats
from neuroflow.encoding.stored import predict_run
from neuroflow.models import fir_delays

TR = 2.0
N_VOXELS = 9


def _write_run(root, run, bold, feats, session=None):
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
            **{c: ("voxel", (voxel + k) * 2.5) for k, c in enumerate("xyz")},
        },
        attrs={
            "tr": TR,
            "affine": np.eye(4).tolist(),
            "mask_shape": [3, 3, 1],
            "entities": {"subject": "01", "session": session, "task": "movie", "run": run},
        },
    )
    prov = build_provenance(stage="preprocess_fmri", version="t", config={})
    brain = write_dataset(ds, root / f"bold_run-{run}.zarr", provenance=prov)
    paths = {}
    for name, X in feats.items():
        fds = xr.Dataset(
            {"features": (("time", "feature"), X.astype(np.float32))},
            coords={"time": time, "feature": np.arange(X.shape[1])},
        )
        paths[name] = write_dataset(fds, root / f"{name}_run-{run}.zarr", provenance=prov)
    return brain, paths


def _dataset(tmp_path, rng, *, spaces=("a", "b"), signal=(1.0, 0.0), test_repeats=2, noise=0.5):
    sizes = {"a": 7, "b": 8}
    W = {s: rng.standard_normal((sizes[s] * 2, N_VOXELS)) for s in spaces}
    test_feats = {s: rng.standard_normal((36, sizes[s])) for s in spaces}
    runs = [("1", 44, None), ("2", 48, None), ("3", 40, None), ("4", 46, None)]
    runs += [(str(5 + r), 36, test_feats) for r in range(test_repeats)]
    brain, features, clean = [], {s: [] for s in spaces}, {}
    for run, n, fixed in runs:
        feats = (
            fixed if fixed is not None else {s: rng.standard_normal((n, sizes[s])) for s in spaces}
        )
        signal_part = sum(
            amp * fir_delays(feats[s], [1, 2]) @ W[s] for s, amp in zip(spaces, signal, strict=True)
        )
        bold = signal_part + noise * rng.standard_normal((n, N_VOXELS)) + 3.0
        b, f = _write_run(tmp_path, run, bold, feats)
        brain.append(b)
        for s in spaces:
            features[s].append(f[s])
        clean[run] = signal_part + 3.0
    return brain, features, clean


def _config(spaces, test_runs, **over):
    cfg = {
        "feature_spaces": list(spaces),
        "alphas": {"start": -1, "stop": 4, "num": 11},
        "delays": {"method": "fir", "lags": [1, 2]},
        "split": {"test_runs": test_runs},
        "device": "cpu",
        "banded": {"n_iter": 12, "concentration": [0.1, 1.0], "random_state": 0},
    }
    cfg.update(over)
    return cfg


def _prov(cfg):
    return build_provenance(stage="encoding", version="t", config=cfg)


def test_ridge_stage_outputs_and_repeats(tmp_path, rng):
    brain, features, clean = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,))
    cfg = _config(["a"], ["5", "6"])
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "enc.zarr",
        config=cfg,
        provenance=_prov(cfg),
    )
    ds = open_dataset(out).load()
    assert ds["y_pred"].dims == ("time", "voxel") and ds["y_pred"].shape == (36, N_VOXELS)
    assert ds["y_test"].dims == ("repeat", "time", "voxel")
    assert ds["y_test"].shape == (2, 36, N_VOXELS)
    assert ds["y_pred"].dtype == np.float32 and ds["y_test"].dtype == np.float32
    assert ds["best_alpha"].dims == ("voxel",) and ds["cv_score"].dims == ("voxel",)
    assert "variance_split" not in ds
    assert list(ds["roi"].values[:3]) == ["V1", "V2", "FFA"]
    for c in "ijkxyz":
        assert ds[c].dims == ("voxel",)
    assert ds.attrs["subject"] == "01"
    assert ds.attrs["feature_spaces"] == ["a"]
    assert ds.attrs["tr"] == TR and ds.attrs["mask_shape"] == [3, 3, 1]
    assert ds.attrs["test_runs"] == ["sub-01_task-movie_run-5", "sub-01_task-movie_run-6"]
    assert ds.attrs["n_train_samples"] == 44 + 48 + 40 + 46
    assert ds.attrs["device"] == "cpu"
    assert ds.attrs["neuroflow"]["stage"] == "encoding"
    # predictions follow the noise-free response of the test stimuli
    for v in range(N_VOXELS):
        assert np.corrcoef(ds["y_pred"].values[:, v], clean["5"][:, v])[0, 1] > 0.95
    assert np.all(ds["cv_score"].values > 0.5)
    assert abs(float(ds["y_pred"].mean()) - 3.0) < 0.5  # intercept restored


def test_test_runs_never_influence_the_fit(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,))
    cfg = _config(["a"], ["5", "6"])
    first = open_dataset(
        fit_encoding(
            brain=brain,
            features=features,
            output=tmp_path / "o1.zarr",
            config=cfg,
            provenance=_prov(cfg),
        )
    ).load()
    # Replace the held-out runs' responses and features with wild values.
    for path in [brain[4], brain[5], features["a"][4], features["a"][5]]:
        ds = open_dataset(path).load()
        var = "bold" if "bold" in ds else "features"
        ds[var] = ds[var] * 100.0 + 7.0
        write_dataset(ds, path, provenance=_prov(cfg))
    second = open_dataset(
        fit_encoding(
            brain=brain,
            features=features,
            output=tmp_path / "o2.zarr",
            config=cfg,
            provenance=_prov(cfg),
        )
    ).load()
    np.testing.assert_array_equal(first["best_alpha"].values, second["best_alpha"].values)
    np.testing.assert_array_equal(first["cv_score"].values, second["cv_score"].values)
    assert not np.allclose(first["y_test"].values, second["y_test"].values)


def test_banded_stage_gives_null_space_no_share(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, signal=(1.0, 0.0), test_repeats=1, noise=0.3)
    cfg = _config(["a", "b"], ["5"], cv={"grouped_kfold": 2})
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "enc.zarr",
        config=cfg,
        provenance=_prov(cfg),
    )
    ds = open_dataset(out).load()
    assert ds.attrs["model"] == "banded_ridge"
    assert ds["best_alpha"].dims == ("space", "voxel")
    assert list(ds["space"].values) == ["a", "b"]
    assert ds["variance_split"].dims == ("space", "voxel")
    assert ds["y_test"].shape == (1, 36, N_VOXELS)
    split = ds["variance_split"].values
    assert np.all(split[0] > 0.8)
    assert np.all(np.abs(split[1]) < 0.05)


def test_distinct_test_runs_are_concatenated(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,), test_repeats=0)
    # runs 3 and 4 are held out and present different stimuli: one repeat, 86 time points
    cfg = _config(["a"], ["03", "4"])
    ds = open_dataset(
        fit_encoding(
            brain=brain,
            features=features,
            output=tmp_path / "e.zarr",
            config=cfg,
            provenance=_prov(cfg),
        )
    )
    assert ds["y_test"].shape == (1, 40 + 46, N_VOXELS)
    assert ds["y_pred"].shape == (40 + 46, N_VOXELS)
    assert ds.attrs["n_train_samples"] == 44 + 48


def test_stage_errors(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,), test_repeats=1)
    cfg = _config(["a"], ["9"])
    with pytest.raises(ValueError, match="matches none of the runs"):
        fit_encoding(
            brain=brain, features=features, output=tmp_path / "x.zarr", config=cfg, provenance={}
        )
    cfg = _config(["a", "c"], ["5"])
    with pytest.raises(ValueError, match=r"`feature_spaces` names \['c'\]"):
        fit_encoding(
            brain=brain, features=features, output=tmp_path / "x.zarr", config=cfg, provenance={}
        )
    # a feature store whose time axis does not match its run: the message names file and field
    bad = dict(features)
    bad["a"] = [features["a"][1], *features["a"][1:]]
    cfg = _config(["a"], ["5"])
    with pytest.raises(ValueError, match=r"a_run-2\.zarr: field `time` does not match"):
        fit_encoding(
            brain=brain, features=bad, output=tmp_path / "x.zarr", config=cfg, provenance={}
        )
    # FIR lags as long as the shortest run (36 volumes) would leave it an empty design
    cfg = _config(["a"], ["5"], delays={"method": "fir", "lags": [1, 36]})
    with pytest.raises(ValueError, match=r"lags` must be shorter than every run, got lag 36"):
        fit_encoding(
            brain=brain, features=features, output=tmp_path / "x.zarr", config=cfg, provenance={}
        )
    cfg = _config(["a"], ["5"], delays={"method": "fir", "lags": [-1, 1]})
    with pytest.raises(ValueError, match=r"lags` must be >= 0 TRs \(negative lags use the fu"):
        fit_encoding(
            brain=brain, features=features, output=tmp_path / "x.zarr", config=cfg, provenance={}
        )
    assert not (tmp_path / "x.zarr").exists()


def test_auto_test_runs_hold_out_the_repeated_sequence(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,))
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "auto.zarr",
        config=_config(["a"], "auto"),
        provenance={},
    )
    # the stores name no stimuli: the last run is held out
    assert xr.open_zarr(out).attrs["test_runs"] == ["sub-01_task-movie_run-6"]


def test_group_repeats_uses_stimulus_lists_first(rng):
    from neuroflow.encoding.runs import _Run

    feats = {"a": rng.standard_normal((7, 3))}

    def run(stim, X):
        return _Run(
            Path("r"), "k", {}, np.zeros((X.shape[0], 2)), np.arange(X.shape[0]), {"a": X}, stim
        )

    runs = [
        run(["x.png", "y.png"], feats["a"]),
        run(["x.png", "y.png"], feats["a"] + 1),
        run(None, feats["a"] + 2),
        run(None, feats["a"][:-1]),
        run(None, feats["a"] + 2),
    ]
    # same stimulus list despite different features; else identical features
    assert group_repeats(runs) == [[0, 1], [2, 4], [3]]


# --------------------------------------------------------------- the stored model
def _add_nuisance(paths, rng):
    """Give every run store an orthonormal drift basis, as the cleaning stores it."""
    for path in paths:
        ds = open_dataset(path).load()
        n = ds.sizes["time"]
        drift = np.column_stack([np.ones(n), np.linspace(-1, 1, n), rng.standard_normal(n)])
        basis, _ = np.linalg.qr(drift)
        ds["nuisance_basis"] = (("time", "nuisance"), basis)
        ds.attrs.pop("neuroflow", None)
        shutil.rmtree(path)
        write_dataset(
            ds, path, provenance=build_provenance(stage="preprocess_fmri", version="t", config={})
        )


def _replay(store, features):
    """Mean over the repeats of each test run's prediction from the stored model."""
    ds = open_dataset(store).load()
    repeats = ds.attrs["repeat_runs"]
    preds = []
    for group in repeats:
        per_repeat = []
        for key in group:
            run = key.rsplit("run-", 1)[1]
            brain = next(p for p in features["brain"] if p.name == f"bold_run-{run}.zarr")
            feats = {
                s: open_dataset(next(p for p in paths if p.name == f"{s}_run-{run}.zarr"))[
                    "features"
                ].values
                for s, paths in features.items()
                if s != "brain"
            }
            run_ds = open_dataset(brain)
            nuisance = run_ds["nuisance_basis"].values if "nuisance_basis" in run_ds else None
            per_repeat.append(predict_run(ds, feats, nuisance=nuisance))
        preds.append(np.mean(per_repeat, axis=0))
    return ds, np.concatenate(preds, axis=0)


@pytest.mark.parametrize(
    ("spaces", "delays", "filtered"),
    [
        (("a",), {"method": "fir", "lags": [1, 2]}, False),
        (("a", "b"), {"method": "fir", "lags": [1, 2]}, True),
        (("b", "a"), {"method": "hrf", "hrf_model": "glover"}, True),
    ],
    ids=["ridge-fir", "banded-fir-filtered", "banded-hrf-filtered"],
)
def test_stored_model_reproduces_the_test_predictions(tmp_path, rng, spaces, delays, filtered):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a", "b"), signal=(1.0, 0.5))
    if filtered:
        _add_nuisance(brain, rng)
    cfg = _config(list(spaces), ["5", "6"], delays=delays, filter_design=filtered)
    out = fit_encoding(
        brain=brain,
        features={s: features[s] for s in spaces},
        output=tmp_path / "enc.zarr",
        config=cfg,
        provenance=_prov(cfg),
    )
    ds, replayed = _replay(out, {"brain": brain, **{s: features[s] for s in spaces}})
    assert ds.attrs["design_filtered"] is filtered
    np.testing.assert_allclose(replayed, ds["y_pred"].values, rtol=1e-5, atol=1e-5)
    # the layout of the stored model
    n_inputs = {"a": 7, "b": 8}
    n_lags = len(delays.get("lags", [0])) if delays["method"] == "fir" else 1
    n_design = n_lags * sum(n_inputs[s] for s in spaces)
    assert ds["coef"].dims == ("design", "voxel") and ds["coef"].shape == (n_design, N_VOXELS)
    assert ds["coef"].dtype == np.float32
    assert list(dict.fromkeys(ds["design_space"].values)) == list(spaces)
    assert ds["feature_mean"].dims == ("variant", "input")
    assert ds["feature_scale"].shape == (1, sum(n_inputs[s] for s in spaces))
    assert ds["target_mean"].dims == ("voxel",)
    for name in ("coef", "design_mean", "feature_mean", "feature_scale", "target_mean"):
        assert ds[name].attrs["long_name"]


def test_stored_model_reads_new_features(tmp_path, rng):
    """New stimuli: the prediction is linear in the standardised features."""
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,))
    cfg = _config(["a"], ["5", "6"], delays={"method": "none"}, filter_design=False)
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "e.zarr",
        config=cfg,
        provenance=_prov(cfg),
    )
    ds = open_dataset(out).load()
    X = rng.standard_normal((13, 7))
    mean, scale = ds["feature_mean"].values[0], ds["feature_scale"].values[0]
    expected = ((X - mean) / scale - ds["design_mean"].values[0]) @ ds["coef"].values
    np.testing.assert_allclose(
        predict_run(ds, {"a": X}), expected + ds["target_mean"].values, rtol=1e-4, atol=1e-4
    )


def test_predict_errors(tmp_path, rng):
    brain, features, _ = _dataset(tmp_path, rng, spaces=("a",), signal=(1.0,))
    cfg = _config(["a"], ["5", "6"])
    out = fit_encoding(
        brain=brain,
        features=features,
        output=tmp_path / "e.zarr",
        config=cfg,
        provenance=_prov(cfg),
    )
    ds = open_dataset(out).load()
    with pytest.raises(ValueError, match=r"features must hold every feature space .*\['a'\]"):
        predict_run(ds, {"b": np.zeros((5, 7))})
    with pytest.raises(ValueError, match=r"features\['a'\] must have shape \(n_times, 7\)"):
        predict_run(ds, {"a": np.zeros((5, 6))})
    with pytest.raises(ValueError, match="encoder must be an encoding store with the fitted"):
        predict_run(xr.Dataset(attrs={"tr": 2.0}), {"a": np.zeros((5, 7))})

"""The transformer encoding stage on small synthetic run stores of two subjects."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding.transformer_stage import fit_transformer_encoding, load_encoder
from neuroflow.evaluation import evaluate_model
from neuroflow.models import fir_delays

TR = 1.5
TINY = {
    "hidden": 16,
    "n_layers": 1,
    "n_heads": 2,
    "window_trs": 4,
    "epochs": 5,
    "patience": 3,
    "batch_size": 32,
    "seeds": [0, 1],
    "device": "cpu",
}


def _write_run(root, subject, run, bold, feats, roi):
    n, n_vox = bold.shape
    time = np.arange(n) * TR
    voxel = np.arange(n_vox)
    ds = xr.Dataset(
        {"bold": (("time", "voxel"), bold.astype(np.float32), {"units": "z"})},
        coords={
            "time": time,
            "voxel": voxel,
            "roi": ("voxel", np.asarray(roi, dtype=object)),
            **{c: ("voxel", voxel + k) for k, c in enumerate("ijk")},
        },
        attrs={
            "tr": TR,
            "affine": np.eye(4).tolist(),
            "mask_shape": [n_vox, 1, 1],
            "entities": {"subject": subject, "task": "movie", "run": run},
        },
    )
    prov = build_provenance(stage="preprocess_fmri", version="t", config={})
    brain = write_dataset(ds, root / f"sub-{subject}_run-{run}.zarr", provenance=prov)
    paths = {}
    for name, X in feats.items():
        fds = xr.Dataset(
            {"features": (("time", "feature"), X.astype(np.float32))},
            coords={"time": time, "feature": np.arange(X.shape[1])},
        )
        paths[name] = write_dataset(
            fds, root / f"{name}_sub-{subject}_run-{run}.zarr", provenance=prov
        )
    return brain, paths


def _dataset(tmp_path, rng):
    """Two subjects (9 and 6 voxels) watching the same movie: four training runs of
    uneven length and a test run shown twice; ``vis`` drives the ``V1`` voxels, ``sem``
    the ``FFA`` ones, the ``noise`` voxels carry nothing."""
    sizes = {"vis": 5, "sem": 6}
    lengths = {"1": 70, "2": 64, "3": 58, "4": 66, "5": 50, "6": 50}
    movie = {
        run: {s: rng.standard_normal((n, d)) for s, d in sizes.items()}
        for run, n in lengths.items()
    }
    movie["6"] = movie["5"]  # the test movie is shown twice
    brain, features = {}, {s: {} for s in sizes}
    rois = {
        "01": ["V1"] * 4 + ["FFA"] * 3 + ["noise"] * 2,
        "02": ["V1"] * 2 + ["FFA"] * 2 + ["noise"] * 2,
    }
    for subject, roi in rois.items():
        roi = np.array(roi)
        w = {s: rng.standard_normal((2 * d, roi.size)) for s, d in sizes.items()}
        w["vis"][:, roi != "V1"] = 0.0
        w["sem"][:, roi != "FFA"] = 0.0
        brain[subject] = []
        for s in sizes:
            features[s][subject] = []
        for run, feats in movie.items():
            signal = sum(fir_delays(feats[s], [1, 2]) @ w[s] for s in sizes)
            bold = signal + 0.5 * rng.standard_normal(signal.shape) + 100.0
            b, f = _write_run(tmp_path, subject, run, bold, feats, roi)
            brain[subject].append(b)
            for s in sizes:
                features[s][subject].append(f[s])
    return brain, features


def _config(**over):
    cfg = {
        "feature_spaces": ["vis", "sem"],
        "model": "transformer",
        "split": {"test_runs": ["5", "6"]},
        "transformer": TINY,
        "name": "tribe",
    }
    cfg.update(over)
    return cfg


def _fit(tmp_path, brain, features, cfg, tag="o"):
    outputs = {s: tmp_path / f"{tag}_sub-{s}.zarr" for s in brain}
    prov = build_provenance(stage="encoding", version="t", config=cfg)
    return fit_transformer_encoding(
        brain=brain,
        features=features,
        outputs=outputs,
        training=tmp_path / f"{tag}_training.zarr",
        config=cfg,
        provenance=prov,
    )


def test_stores_have_the_ridge_layout_and_the_variants(tmp_path, rng):
    brain, features = _dataset(tmp_path, rng)
    paths = _fit(tmp_path, brain, features, _config())
    assert [p.name for p in paths] == ["o_sub-01.zarr", "o_sub-02.zarr", "o_training.zarr"]
    for path, n_vox in zip(paths[:2], (9, 6), strict=True):
        ds = open_dataset(path).load()
        assert ds["y_pred"].dims == ("time", "voxel") and ds["y_pred"].shape == (50, n_vox)
        assert ds["y_test"].shape == (2, 50, n_vox) and ds["cv_score"].shape == (n_vox,)
        assert list(ds["variant"].values) == ["seed-0", "seed-1", "without-vis", "without-sem"]
        assert ds["y_pred_variant"].shape == (4, 50, n_vox)
        # the ensemble is the mean of the seeds' predictions
        np.testing.assert_allclose(
            ds["y_pred"].values, ds["y_pred_variant"].values[:2].mean(0), rtol=1e-5, atol=1e-4
        )
        assert ds.attrs["solver"] == "transformer" and ds.attrs["model"] == "tribe"
        assert ds.attrs["test_runs"][0].endswith("run-5") and len(ds.attrs["train_runs"]) == 4
        assert abs(float(ds["y_pred"].mean()) - 100.0) < 5.0  # back in the BOLD's units
        scores = open_dataset(
            evaluate_model(
                prediction=path,
                output=tmp_path / f"scores_{path.name}",
                config={"permutation": {"n_permutations": 20}},
                provenance={},
            )
        )
        assert scores["r"].shape == (n_vox,)
    training = open_dataset(paths[2]).load()
    assert training["train_loss"].dims == ("seed", "epoch") and training.sizes["seed"] == 2
    assert training["val_r_subject"].dims == ("seed", "epoch", "subject")
    assert list(training["subject"].values) == ["01", "02"]
    n_weights = sum(int(np.prod(s)) for s in training.attrs["parameters"].values())
    assert training["weights"].shape == (2, n_weights)
    assert np.isfinite(training["train_loss"].values[:, 0]).all()


def test_test_runs_never_enter_training(tmp_path, rng):
    brain, features = _dataset(tmp_path, rng)
    cfg = _config(transformer={**TINY, "seeds": [0]})
    first = [open_dataset(p).load() for p in _fit(tmp_path, brain, features, cfg, "a")]
    # wild values in the held-out runs' BOLD: training, validation and predictions unchanged
    for subject in brain:
        for path in brain[subject][4:]:
            ds = open_dataset(path).load()
            ds["bold"] = ds["bold"] * 50.0 - 7.0
            write_dataset(ds, path, provenance={})
    second = [open_dataset(p).load() for p in _fit(tmp_path, brain, features, cfg, "b")]
    for one, two in zip(first, second, strict=True):
        for name in ("y_pred", "cv_score", "train_loss", "val_r", "weights"):
            if name in one:
                np.testing.assert_array_equal(one[name].values, two[name].values)
    assert not np.allclose(first[0]["y_test"].values, second[0]["y_test"].values)


def test_stage_errors(tmp_path, rng):
    brain, features = _dataset(tmp_path, rng)
    with pytest.raises(ValueError, match="`model` must be 'transformer', got 'ridge'"):
        _fit(tmp_path, brain, features, _config(model="ridge"))
    with pytest.raises(ValueError, match=r"sub-01: `split.test_runs` .* must hold out some"):
        _fit(tmp_path, brain, features, _config(split={"test_runs": ["9"]}))
    with pytest.raises(ValueError, match=r"Unknown key 'transformer\.layers'"):
        _fit(tmp_path, brain, features, _config(transformer={"layers": 2}))


def test_stored_weights_rebuild_the_encoder(tmp_path, rng):
    from neuroflow.models.transformer import SubjectData, predict

    brain, features = _dataset(tmp_path, rng)
    paths = _fit(tmp_path, brain, features, _config())
    trained, stats = load_encoder(paths[2], {"01": paths[0], "02": paths[1]})
    assert trained.seeds == [0, 1] and trained.spaces == ["vis", "sem"]
    # the held-out run (run 5) through the rebuilt encoder: the stored prediction again
    feats = {s: open_dataset(features[s]["02"][4])["features"].values for s in ("vis", "sem")}
    scaled = {s: (x - stats[s][0]) / stats[s][1] for s, x in feats.items()}
    again = predict(trained, SubjectData("02", [scaled]))
    stored = open_dataset(paths[1])["y_pred"].values
    np.testing.assert_allclose(again, stored, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match=r"must give the store of every subject"):
        load_encoder(paths[2], {"01": paths[0]})

"""An HRF library: one fit per HRF model, the best cross-validated one kept per voxel."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding import fit_encoding
from neuroflow.features.resampling import hrf_weights

TR = 2.0
N_FEATURES = 3
PROV = build_provenance(stage="test", version="t", config={})
LIBRARY = ["glover", "spm"]
# voxels 0-6 respond with Glover's HRF, 7-15 with SPM's
PLANTED = np.array([0] * 7 + [1] * 9)


def _events(rng, n_times):
    """Short events every 4-8 s with random features, as an event-related run."""
    onsets = np.cumsum(rng.uniform(4.0, 8.0, size=n_times // 3))
    onsets = onsets[onsets < (n_times - 10) * TR]
    return onsets, np.full(onsets.size, 1.0), rng.standard_normal((onsets.size, N_FEATURES))


def _write_run(root, run, n_times, rng, weights, library):
    times = np.arange(n_times) * TR
    onsets, durations, rows = _events(rng, n_times)
    aligned = {m: hrf_weights(times, TR, onsets, durations, hrf_model=m) @ rows for m in LIBRARY}
    signal = np.column_stack([aligned[LIBRARY[m]] @ weights[:, v] for v, m in enumerate(PLANTED)])
    bold = 4.0 * signal + rng.standard_normal(signal.shape)
    voxel = np.arange(PLANTED.size)
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
    columns = np.hstack([aligned[m] for m in library])
    feats = xr.Dataset(
        {"features": (("time", "feature"), columns.astype(np.float32))},
        coords={
            "time": times,
            "feature": np.arange(columns.shape[1]),
            "hrf_variant": ("feature", np.repeat(np.arange(len(library)), N_FEATURES)),
        },
        attrs={"hrf_models": list(library)},
    )
    tag = "-".join(library)
    return (
        write_dataset(brain, root / f"bold_{run}.zarr", provenance=PROV),
        write_dataset(feats, root / f"feat_{tag}_{run}.zarr", provenance=PROV),
    )


def _fit(root, seed, library):
    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((N_FEATURES, PLANTED.size))
    brain, feats = [], []
    for run, n in (("1", 131), ("2", 117), ("3", 124), ("4", 109)):
        b, f = _write_run(root, run, n, rng, weights, library)
        brain.append(b)
        feats.append(f)
    config = {
        "feature_spaces": ["x"],
        "model": "ridge",
        "delays": {"method": "none"},
        "split": {"test_runs": ["4"]},
        "device": "cpu",
    }
    out = fit_encoding(
        brain=brain,
        features={"x": feats},
        output=root / f"enc_{'-'.join(library)}.zarr",
        config=config,
        provenance=PROV,
    )
    return open_dataset(out).load(), brain, feats


@pytest.mark.parametrize("seed", [0, 1])
def test_library_keeps_each_voxels_planted_hrf(tmp_path, seed):
    both, _, _ = _fit(tmp_path, seed, LIBRARY)
    assert both.attrs["hrf_models"] == LIBRARY
    chosen = both["hrf_model"].values
    # the two shapes differ little: most, not all, voxels keep their planted HRF
    assert np.mean(chosen == np.array(LIBRARY, dtype=object)[PLANTED]) >= 0.85, chosen
    # every voxel's outputs are those of the one-model fit it chose
    for model in LIBRARY:
        alone, _, _ = _fit(tmp_path, seed, [model])
        assert alone.attrs["hrf_models"] == []
        assert "hrf_model" not in alone
        mine = chosen == model
        assert mine.any()
        for name in ("y_pred", "cv_score", "best_alpha"):
            np.testing.assert_allclose(
                both[name].values[..., mine], alone[name].values[..., mine], rtol=1e-6
            )
        # and the library scores at least as well in cross-validation everywhere
        assert np.all(both["cv_score"].values >= alone["cv_score"].values - 1e-7)


def test_spaces_must_share_their_library(tmp_path):
    _, brain, feats = _fit(tmp_path, 3, LIBRARY)
    other = []
    for path in feats:
        ds = open_dataset(path).load()
        ds.attrs = {"hrf_models": ["spm", "glover"]}
        other.append(write_dataset(ds, path.with_name(f"y_{path.name}"), provenance=PROV))
    with pytest.raises(ValueError, match=r"must share their HRF library, got \{'x': \['glover'"):
        fit_encoding(
            brain=brain,
            features={"x": feats, "y": other},
            output=tmp_path / "bad.zarr",
            config={
                "feature_spaces": ["x", "y"],
                "delays": {"method": "none"},
                "split": {"test_runs": ["4"]},
                "device": "cpu",
            },
            provenance=PROV,
        )


def test_a_run_aligned_with_another_library_is_an_error(tmp_path):
    _, brain, feats = _fit(tmp_path, 4, LIBRARY)
    rng = np.random.default_rng(4)
    _, odd = _write_run(tmp_path / "odd", "2", 117, rng, np.ones((N_FEATURES, 16)), ["spm"])
    feats[1] = odd
    with pytest.raises(ValueError, match=r"same HRF models in every run, got \['spm'\] instead"):
        fit_encoding(
            brain=brain,
            features={"x": feats},
            output=tmp_path / "bad.zarr",
            config={
                "feature_spaces": ["x"],
                "delays": {"method": "none"},
                "split": {"test_runs": ["4"]},
                "device": "cpu",
            },
            provenance=PROV,
        )


def test_stored_library_model_reproduces_the_test_predictions(tmp_path):
    from neuroflow.encoding.stored import predict_run

    both, _, feats = _fit(tmp_path, 2, LIBRARY)
    test = open_dataset(feats[-1])
    pred = predict_run(
        both,
        {"x": test["features"].values},
        variants={"x": test["hrf_variant"].values},
    )
    np.testing.assert_allclose(pred, both["y_pred"].values, rtol=1e-5, atol=1e-5)
    assert list(both["variant"].values) == LIBRARY
    assert both["design_mean"].dims == ("variant", "design")
    assert both["feature_mean"].shape == (len(LIBRARY), N_FEATURES)

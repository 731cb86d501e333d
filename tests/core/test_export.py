"""Exports: score maps, features and their sidecars; refusals of ambiguous or bad input."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, write_dataset
from neuroflow.export import export_features, export_results, export_score_maps


def _scores(rng: np.random.Generator, folder: Path, version: str, n: int = 11) -> Path:
    ijk = np.array([[i, j, 2] for i in range(4) for j in range(3)])[:n]
    r = rng.uniform(-0.2, 0.6, n)
    ds = xr.Dataset(
        {
            "r": ("voxel", r),
            "r_normalized": ("voxel", r / 0.8),
            "p_value": ("voxel", rng.uniform(0, 1, n)),
            "significant": ("voxel", r > 0.3),
        },
        coords={c: ("voxel", ijk[:, k]) for k, c in enumerate("ijk")},
        attrs={
            "subject": "07",
            "model": "effnet__blocks_7",
            "feature_spaces": ["effnet:blocks.7"],
            "affine": np.diag([2.0, 2.0, 2.0, 1.0]).tolist(),
            "mask_shape": [4, 3, 5],
            "test_runs": ["sub-07_ses-1_task-movie_run-04"],
        },
    )
    prov = build_provenance(stage="evaluation/effnet__blocks_7", version=version, config={})
    return write_dataset(
        ds, folder / f"effnet__blocks_7-{version}" / "sub-07_scores.zarr", provenance=prov
    )


def test_score_maps_hold_the_store_values(rng: np.random.Generator, tmp_path: Path) -> None:
    store = _scores(rng, tmp_path / "results" / "evaluation", "abc")
    paths = export_score_maps(store, tmp_path / "out")
    names = [p.name for p in paths]
    assert names == [
        "sub-07_task-movie_model-effnetblocks7_stat-r_statmap.nii.gz",
        "sub-07_task-movie_model-effnetblocks7_stat-rnormalized_statmap.nii.gz",
        "sub-07_task-movie_model-effnetblocks7_stat-p_statmap.nii.gz",
        "sub-07_task-movie_model-effnetblocks7_desc-fdr_stat-r_statmap.nii.gz",
    ]
    ds = xr.open_zarr(store)
    ijk = tuple(np.stack([ds[c].values for c in "ijk"], axis=1).T)
    img = nib.load(paths[0])
    np.testing.assert_allclose(np.asarray(img.dataobj)[ijk], ds["r"].values, rtol=1e-6)
    np.testing.assert_allclose(img.affine, np.diag([2.0, 2.0, 2.0, 1.0]))
    fdr = np.asarray(nib.load(paths[3]).dataobj)[ijk]
    np.testing.assert_allclose(fdr, np.where(ds["significant"].values, ds["r"].values, 0.0))
    sidecar = json.loads(paths[0].with_name(paths[0].name.replace(".nii.gz", ".json")).read_text())
    # the full model name, which a BIDS label cannot hold, and the version it came from
    assert sidecar["Model"] == "effnet__blocks_7" and sidecar["NeuroflowVersion"] == "abc"
    assert sidecar["Sources"] == [str(store)]


def test_two_versions_of_one_model_are_refused(rng: np.random.Generator, tmp_path: Path) -> None:
    results = tmp_path / "results" / "evaluation"
    first = _scores(rng, results, "v1")
    _scores(rng, results, "v2")
    with pytest.raises(ValueError, match=r"would be written from both .*export one version"):
        export_results([tmp_path / "results"], tmp_path / "out", kinds=["maps"])
    written = export_results([first], tmp_path / "one", kinds=["maps"])
    assert len(written["maps"]) == 4


def test_bad_requests_are_refused(rng: np.random.Generator, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="`kinds` must be among"):
        export_results([tmp_path], tmp_path / "out", kinds=["movies"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export_results([tmp_path / "missing"], tmp_path / "out")
    store = _scores(rng, tmp_path / "evaluation", "x")
    bare = xr.open_zarr(store).drop_vars(["i", "j", "k"]).load()
    prov = build_provenance(stage="evaluation/m", version="y", config={})
    bare_store = write_dataset(bare, tmp_path / "bare.zarr", provenance=prov)
    with pytest.raises(ValueError, match=r"bare\.zarr: a score map needs the voxel indices"):
        export_score_maps(bare_store, tmp_path / "out")


def test_features_as_hdf5(rng: np.random.Generator, tmp_path: Path) -> None:
    values = rng.standard_normal((6, 5)).astype(np.float32)
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), values)},
        coords={"stimulus": [f"img-{i}.png" for i in range(6)], "feature": np.arange(5)},
        attrs={"feature_set": "clip", "layer": "projection"},
    )
    prov = build_provenance(stage="features/clip", version="f1", config={})
    store = write_dataset(ds, tmp_path / "clip-f1" / "projection.zarr", provenance=prov)
    (path,) = export_features(store, tmp_path / "out", fmt="h5")
    assert path == tmp_path / "out" / "features" / "clip" / "projection.h5"
    with h5py.File(path) as f:
        np.testing.assert_array_equal(f["features"][()], values)
        assert [s.decode() for s in f["stimulus"][()]] == list(ds["stimulus"].values)
    assert json.loads(path.with_suffix(".json").read_text())["NeuroflowVersion"] == "f1"
    with pytest.raises(ValueError, match="`fmt` must be 'npy' or 'h5'"):
        export_features(store, tmp_path / "out", fmt="mat")

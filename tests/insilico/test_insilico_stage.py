"""The predict stage end to end on small synthetic stores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from figure_helpers import assert_png
from PIL import Image

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding.stored import encoder_dataset
from neuroflow.insilico import predict_stimulus_set, stimulus_response

SIZES = {"vis": 6, "txt": 4}


def _encoder_store(tmp_path, rng):
    n_voxels = 11
    n = sum(SIZES.values())
    ds = encoder_dataset(
        coef=rng.standard_normal((n, n_voxels)),
        spaces=list(SIZES),
        n_features=list(SIZES.values()),
        delays={"method": "none"},
        variants=["none"],
        design_mean=0.1 * rng.standard_normal((1, n)),
        feature_mean=rng.standard_normal((1, n)),
        feature_scale=rng.uniform(0.5, 2.0, (1, n)),
        target_mean=rng.standard_normal(n_voxels),
        units="beta",
    )
    rois = ["V1", "FFA", "unlabelled", "V1", "FFA", "PPA", "V1", "PPA", "FFA", "V1", "PPA"]
    ds = ds.assign_coords(
        voxel=np.arange(n_voxels),
        roi=("voxel", np.array(rois, dtype=object)),
        i=("voxel", np.arange(n_voxels) + 3),
    )
    ds.attrs.update(delays={"method": "none"}, subject="07", model="clip-ridge", tr=1.0)
    prov = build_provenance(stage="trial_encoding", version="abc123", config={})
    return write_dataset(ds, tmp_path / "enc.zarr", provenance=prov), ds


def _feature_store(tmp_path, space, X, ids, **attrs):
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), X.astype(np.float32))},
        coords={"stimulus": np.array(ids, dtype=object), "feature": np.arange(X.shape[1])},
        attrs={"modality": "image", "row_unit": "stimulus", **attrs},
    )
    prov = build_provenance(stage="features", version="f1", config={})
    return write_dataset(ds, tmp_path / f"{space}.zarr", provenance=prov)


def _pool(tmp_path, rng, n=23):
    ids = [f"pool/im{i:02d}.png" for i in range(n)]
    (tmp_path / "stimuli" / "pool").mkdir(parents=True)
    for i in range(n - 2):  # the last two images are missing: grey tiles
        pixels = rng.uniform(0, 255, (20, 24, 3)).astype(np.uint8)
        Image.fromarray(pixels).save(tmp_path / "stimuli" / ids[i])
    X = {s: rng.standard_normal((n, w)) for s, w in SIZES.items()}
    # the text store lists the stimuli in another order: rows are matched by id
    order = rng.permutation(n)
    stores = {
        "vis": _feature_store(tmp_path, "vis", X["vis"], ids),
        "txt": _feature_store(tmp_path, "txt", X["txt"][order], [ids[i] for i in order]),
    }
    return ids, X, stores


@pytest.mark.parametrize("keep_voxels", [False, True])
def test_predict_stage_outputs(tmp_path, rng, keep_voxels):
    encoder_path, encoder = _encoder_store(tmp_path, rng)
    ids, X, stores = _pool(tmp_path, rng)
    out_dir = tmp_path / "results" / "predict" / "clip-ridge-v1"
    out = predict_stimulus_set(
        encoder_path=encoder_path,
        feature_stores=stores,
        output=out_dir / "sub-07_novel.zarr",
        k=4,
        keep_voxels=keep_voxels,
        provenance=build_provenance(stage="predict", version="p1", config={}),
        stimuli_dir=tmp_path / "stimuli",
        voxels=[5],
        batch_size=6,
    )
    ds = open_dataset(out).load()
    # the stores hold float32 features
    expected = stimulus_response(encoder, {s: x.astype(np.float32) for s, x in X.items()})
    assert ds["roi_response"].dims == ("stimulus", "roi")
    assert ds["roi"].values.tolist() == ["FFA", "PPA", "V1"]
    assert ds["stimulus"].values.tolist() == ids
    np.testing.assert_allclose(
        ds["roi_response"].sel(roi="FFA").values, expected[:, [1, 4, 8]].mean(1), rtol=1e-5
    )
    assert ds["roi_response"].attrs["units"] == "beta" and ds["roi_response"].attrs["long_name"]
    assert ("response" in ds) is keep_voxels
    if keep_voxels:
        assert ds["response"].dims == ("stimulus", "voxel")
        np.testing.assert_allclose(ds["response"].values, expected, rtol=1e-5, atol=1e-6)
        assert ds["i"].values.tolist() == list(range(3, 14))
        assert ds["voxel_roi"].values[2] == "unlabelled"
    np.testing.assert_allclose(
        ds["tracked_response"].values[:, 0], expected[:, 5], rtol=1e-5, atol=1e-6
    )
    assert ds["roi_quantile"].dims == ("roi", "quantile")
    for name in ("roi_mean", "roi_std", "roi_skewness", "roi_tail_ratio"):
        assert ds[name].dims == ("roi",) and ds[name].attrs["long_name"]
    assert ds.attrs["stimulus_set"] == "novel" and ds.attrs["subject"] == "07"
    assert ds.attrs["model"] == "clip-ridge" and ds.attrs["encoder_version"] == "abc123"
    assert ds.attrs["response_kind"] == "single_trial" and ds.attrs["n_stimuli"] == len(ids)
    assert ds.attrs["neuroflow"]["stage"] == "predict"

    table = pd.read_csv(out_dir / "sub-07_novel_ranking.tsv", sep="\t")
    assert set(table["roi"]) == {"FFA", "PPA", "V1", "voxel 5"}
    assert len(table) == 4 * 2 * 4
    v1 = table[(table["roi"] == "V1") & (table["direction"] == "top")]
    best = np.argsort(-ds["roi_response"].sel(roi="V1").values, kind="stable")[:4]
    assert v1["stimulus"].tolist() == [ids[i] for i in best]
    sheets = sorted(p.name for p in (out_dir / "sub-07_novel_contact_sheets").iterdir())
    assert sheets == ["FFA.png", "PPA.png", "V1.png"]
    for name in sheets:
        assert_png(out_dir / "sub-07_novel_contact_sheets" / name)


def test_predict_stage_errors(tmp_path, rng):
    encoder_path, _ = _encoder_store(tmp_path, rng)
    ids, X, stores = _pool(tmp_path, rng, n=5)
    kwargs = {"encoder_path": encoder_path, "output": tmp_path / "o.zarr", "provenance": {}}
    with pytest.raises(ValueError, match=r"feature_stores must hold every feature space .*'txt'"):
        predict_stimulus_set(feature_stores={"vis": stores["vis"]}, **kwargs)
    frames = _feature_store(tmp_path, "frames", X["txt"], ids, row_unit="frame")
    with pytest.raises(ValueError, match=r"frames\.zarr: the store of space 'txt' must hold one"):
        predict_stimulus_set(feature_stores={**stores, "txt": frames}, **kwargs)
    nan = X["vis"].copy()
    nan[1, 2] = np.nan
    bad = _feature_store(tmp_path, "nan", nan, ids)
    with pytest.raises(ValueError, match=r"features\['vis'\] must be finite"):
        predict_stimulus_set(feature_stores={**stores, "vis": bad}, **kwargs)
    wide = _feature_store(tmp_path, "wide", rng.standard_normal((5, 9)), ids)
    with pytest.raises(ValueError, match=r"features\['txt'\] must have shape \(n_stimuli, 4\)"):
        predict_stimulus_set(feature_stores={**stores, "txt": wide}, **kwargs)
    fewer = _feature_store(tmp_path, "fewer", X["txt"][:3], ids[:3])
    with pytest.raises(ValueError, match=r"no features for stimulus id\(s\) \['pool/im03"):
        predict_stimulus_set(feature_stores={**stores, "txt": fewer}, **kwargs)
    assert not (tmp_path / "o.zarr").exists()


def test_duplicate_files_are_one_stimulus(tmp_path, rng):
    encoder_path, _ = _encoder_store(tmp_path, rng)
    ids = ["a.png", "b.png", "copy_of_a.png", "c.png"]
    X = {s: rng.standard_normal((4, w)) for s, w in SIZES.items()}
    canonical = {
        "canonical_stimulus": (
            "stimulus",
            np.array(["a.png", "b.png", "a.png", "c.png"], dtype=object),
        )
    }
    stores = {}
    for s in SIZES:
        path = _feature_store(tmp_path, s, X[s], ids, modality="text")
        ds = open_dataset(path).load().assign_coords(canonical)
        ds.attrs.pop("neuroflow")
        stores[s] = write_dataset(ds, tmp_path / f"{s}_dedup.zarr", provenance={})
    out = predict_stimulus_set(
        encoder_path=encoder_path,
        feature_stores=stores,
        output=tmp_path / "sub-07_words.zarr",
        k=2,
        provenance={},
        captions={"b.png": "a bird"},
    )
    ds = open_dataset(out)
    assert ds["stimulus"].values.tolist() == ["a.png", "b.png", "c.png"]
    assert ds.attrs["modality"] == "text"
    assert (tmp_path / "sub-07_words_contact_sheets" / "V1.png").is_file()

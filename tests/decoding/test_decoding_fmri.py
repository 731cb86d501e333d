"""Identification of held-out stimuli from single-trial betas (``decode_fmri``)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.decoding.fmri import decode_fmri, identify_stimuli


def _world(rng, n_train=60, n_test=9, n_rep=3, n_vox=23, n_feat=5, snr=2.0):
    """Betas that are a linear map of each stimulus's features, plus noise."""
    train = [f"tr{i}" for i in range(n_train)]
    test = [f"te{i}" for i in range(n_test)]
    stimuli = np.array(train + [s for s in test for _ in range(n_rep)])
    F = {s: rng.standard_normal(n_feat) for s in train + test}
    W = rng.standard_normal((n_feat, n_vox))
    X = np.stack([F[s] @ W for s in stimuli]) * snr + rng.standard_normal((len(stimuli), n_vox))
    return X, stimuli, np.stack([F[s] for s in stimuli]), np.isin(stimuli, test)


def test_planted_map_is_identified(rng):
    X, stim, F, test = _world(rng)
    kw = {"alphas": [0.1, 1.0, 10.0, 100.0], "n_splits": 5, "standardize": True, "seed": 0}
    res = identify_stimuli(X, stim, F, test, top_k=[1, 5], n_permutations=200, **kw)
    top1, top5, rank = res["metrics"]
    assert res["n_test"] == 9
    assert top1 > 0.6 and top5 == 1.0 and rank < 2.0
    assert res["p"][0] < 0.01 and res["chance"][0] == pytest.approx(1 / 9)
    # features unrelated to the responses: chance
    shuffled = rng.permutation(F)
    res = identify_stimuli(X, stim, shuffled, test, top_k=[1, 20], n_permutations=200, **kw)
    assert res["p"][0] > 0.01
    assert np.isnan(res["metrics"][1])  # top-20 of 9 test stimuli is undefined


def test_stage_per_roi(tmp_path, rng):
    X, stim, F, _ = _world(rng, n_vox=20)
    X[:, 10:] = rng.standard_normal((len(stim), 10))  # the second ROI carries nothing
    betas = xr.Dataset(
        {"betas": (("trial", "voxel"), X.astype(np.float32))},
        coords={
            "stimulus": ("trial", np.array(stim, dtype=object)),
            "roi": ("voxel", np.array(["v1"] * 10 + ["other"] * 10, dtype=object)),
        },
        attrs={"entities": {"subject": "07"}},
    )
    store = write_dataset(betas, tmp_path / "betas.zarr", provenance={})
    unique, first = np.unique(stim, return_index=True)
    feats = xr.Dataset(
        {"features": (("stimulus", "feature"), F[first])},
        coords={"stimulus": ("stimulus", np.array(unique, dtype=object))},
        attrs={"feature_set": "planted"},
    )
    fstore = write_dataset(feats, tmp_path / "f.zarr", provenance={})
    config = {"identification": {"n_permutations": 100, "top_k": [1, 5]}}
    out = decode_fmri(
        betas=[store], features={"planted": fstore}, output=tmp_path / "o.zarr", config=config,
        provenance={},
    )  # fmt: skip
    ds = xr.open_zarr(out)
    assert list(ds["roi"].values) == ["other", "v1", "all"]
    p = ds["identification_p"].sel(subject="07", feature_space="planted", metric="top1")
    assert float(p.sel(roi="v1")) < 0.05 and float(p.sel(roi="other")) > 0.05
    with pytest.raises(ValueError, match="must name at least one feature store"):
        decode_fmri(
            betas=[store], features={}, output=tmp_path / "x.zarr", config={}, provenance={}
        )

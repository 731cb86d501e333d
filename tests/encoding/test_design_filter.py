"""Designs filtered like the BOLD: the cleaning's nuisance basis applied to predictions."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding import fit_encoding
from neuroflow.encoding.stored import filter_like_data
from neuroflow.evaluation.metrics import pearson_r
from neuroflow.preprocessing.fmri.clean import clean_signals, cleaning_basis

TR = 1.5
N_VOXELS = 11
PROV = build_provenance(stage="test", version="t", config={})


def _run_store(root, run, n, rng, weights, *, with_basis=True, test_features=None):
    """One cleaned run whose features carry a slow trend the cleaning removes."""
    t = np.arange(n)
    feats = test_features if test_features is not None else rng.standard_normal((n, 5))
    feats = feats + np.outer(np.linspace(-2.0, 2.0, n), np.ones(5))  # drifting features
    signal = feats @ weights
    confounds = rng.standard_normal((n, 3))
    raw = signal + 0.3 * rng.standard_normal((n, N_VOXELS)) + 100.0
    clean_cfg = {"t_r": TR, "high_pass": 0.01, "confounds": confounds}
    bold = clean_signals(raw, **clean_cfg)
    variables = {"bold": (("time", "voxel"), bold.astype(np.float32))}
    if with_basis:
        basis = cleaning_basis(n, **clean_cfg)
        variables["nuisance_basis"] = (("time", "nuisance"), basis.astype(np.float32))
    voxel = np.arange(N_VOXELS)
    ds = xr.Dataset(
        variables,
        coords={
            "time": t * TR,
            "voxel": voxel,
            "roi": ("voxel", np.array(["a"] * N_VOXELS, dtype=object)),
            **dict.fromkeys("ijk", ("voxel", voxel)),
        },
        attrs={"tr": TR, "entities": {"subject": "01", "task": "movie", "run": run}},
    )
    fds = xr.Dataset(
        {"features": (("time", "feature"), feats.astype(np.float32))},
        coords={"time": t * TR, "feature": np.arange(5)},
    )
    brain = write_dataset(ds, root / f"bold_{run}.zarr", provenance=PROV)
    feat = write_dataset(fds, root / f"feat_{run}.zarr", provenance=PROV)
    truth = clean_signals(signal + 100.0, **clean_cfg)
    return brain, feat, truth


def _fit(tmp_path, rng, *, filter_design, with_basis=True, n_test=1, name="enc"):
    weights = rng.standard_normal((5, N_VOXELS))
    brain, feats, truths = [], [], []
    test_features = rng.standard_normal((83, 5))
    for run, n in (("1", 97), ("2", 88), ("3", 91)):
        b, f, _ = _run_store(tmp_path, run, n, rng, weights, with_basis=with_basis)
        brain.append(b)
        feats.append(f)
    for k in range(n_test):
        b, f, truth = _run_store(
            tmp_path,
            str(4 + k),
            83,
            rng,
            weights,
            with_basis=with_basis,
            test_features=test_features,
        )
        brain.append(b)
        feats.append(f)
        truths.append(truth)
    cfg = {
        "feature_spaces": ["x"],
        "delays": {"method": "none"},
        "split": {"test_runs": [str(4 + k) for k in range(n_test)]},
        "device": "cpu",
        "filter_design": filter_design,
    }
    out = fit_encoding(
        brain=brain,
        features={"x": feats},
        output=tmp_path / f"{name}.zarr",
        config=cfg,
        provenance=PROV,
    )
    ds = open_dataset(out).load()
    basis = [open_dataset(b)["nuisance_basis"].values for b in brain[3:]] if with_basis else []
    return ds, np.mean(truths, axis=0), basis


def test_filter_like_data_projects_out_the_basis(rng):
    X = rng.standard_normal((37, 4))
    q, _ = np.linalg.qr(rng.standard_normal((37, 3)))
    out = filter_like_data(X, q)
    np.testing.assert_allclose(q.T @ out, 0.0, atol=1e-12)
    np.testing.assert_allclose(out + q @ (q.T @ X), X, atol=1e-12)
    assert filter_like_data(X, None) is X


def test_filtered_predictions_are_orthogonal_to_the_test_basis(tmp_path, rng):
    ds, _, (basis,) = _fit(tmp_path, rng, filter_design=True)
    centred = ds["y_pred"].values - ds["y_pred"].values.mean(0)
    assert np.abs(basis.T @ centred).max() < 1e-3 * np.abs(centred).max() * len(centred)
    assert ds.attrs["design_filtered"] is True
    # the held-out run's basis is kept for the evaluation's null
    np.testing.assert_array_equal(ds["test_nuisance"].values, basis)
    assert ds.attrs["test_segments"] == [83]


def test_unfiltered_predictions_keep_the_removed_trend(tmp_path, rng):
    ds, _, (basis,) = _fit(tmp_path, rng, filter_design=False)
    centred = ds["y_pred"].values - ds["y_pred"].values.mean(0)
    share = np.linalg.norm(basis.T @ centred) / np.linalg.norm(centred)
    assert share > 0.1, share  # 0.28-0.37 for seeds 0-2
    assert ds.attrs["design_filtered"] is False


def test_filtering_brings_predictions_closer_to_the_cleaned_signal(tmp_path, rng):
    seed = int(rng.integers(1 << 31))
    on, truth, _ = _fit(tmp_path, np.random.default_rng(seed), filter_design=True, name="on")
    off, _, _ = _fit(tmp_path, np.random.default_rng(seed), filter_design=False, name="off")
    r_on = pearson_r(on["y_pred"].values, truth).mean()
    r_off = pearson_r(off["y_pred"].values, truth).mean()
    assert r_on > 0.95 and r_on > r_off + 0.05, (r_on, r_off)


def test_repeats_are_each_filtered_then_averaged(tmp_path, rng):
    both, _, _ = _fit(tmp_path, rng, filter_design=True, n_test=2)
    brain = sorted(tmp_path.glob("bold_*.zarr"))
    feats = sorted(tmp_path.glob("feat_*.zarr"))
    single = []
    for k, run in enumerate(("4", "5")):
        keep = [0, 1, 2, 3 + k]
        out = fit_encoding(
            brain=[brain[i] for i in keep],
            features={"x": [feats[i] for i in keep]},
            output=tmp_path / f"single_{run}.zarr",
            config={
                "feature_spaces": ["x"],
                "delays": {"method": "none"},
                "split": {"test_runs": [run]},
                "device": "cpu",
            },
            provenance=PROV,
        )
        single.append(open_dataset(out)["y_pred"].values)
    assert both["y_test"].shape[0] == 2
    # one repeat's basis: the time series the evaluation tests is one sequence long
    first = open_dataset(brain[3])["nuisance_basis"].values
    np.testing.assert_array_equal(both["test_nuisance"].values, first)
    np.testing.assert_allclose(both["y_pred"].values, np.mean(single, axis=0), atol=1e-4)
    assert np.abs(single[0] - single[1]).max() > 1e-2  # the two filters differ


def test_runs_without_basis_are_left_unfiltered(tmp_path, rng):
    ds, _, _ = _fit(tmp_path, rng, filter_design=True, with_basis=False)
    assert ds.attrs["design_filtered"] is False
    assert "test_nuisance" not in ds


def test_basis_with_wrong_length_is_an_error(tmp_path, rng):
    weights = rng.standard_normal((5, N_VOXELS))
    brain, feats = [], []
    for run, n in (("1", 40), ("2", 44), ("3", 42)):
        b, f, _ = _run_store(tmp_path, run, n, rng, weights)
        brain.append(b)
        feats.append(f)
    ds = open_dataset(brain[0]).load()
    bad = ds.drop_vars("nuisance_basis").assign(
        nuisance_basis=(("time2", "nuisance"), np.zeros((3, 2), np.float32))
    )
    write_dataset(bad, tmp_path / "bad.zarr", provenance=PROV)
    with pytest.raises(ValueError, match=r"bad\.zarr: `nuisance_basis` must have dims"):
        fit_encoding(
            brain=[tmp_path / "bad.zarr", *brain[1:]],
            features={"x": feats},
            output=tmp_path / "out.zarr",
            config={"feature_spaces": ["x"], "split": {"test_runs": ["3"]}, "device": "cpu"},
            provenance=PROV,
        )

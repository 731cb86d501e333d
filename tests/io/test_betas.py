"""Single-trial betas estimated elsewhere (``dataset.source: betas``): index and import."""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import replace
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np
import pandas as pd
import pytest

from neuroflow.artifacts import open_dataset
from neuroflow.io.betas import import_betas, index_betas, read_trials
from neuroflow.io.records import BetasSession
from neuroflow.preprocessing.fmri import estimate_single_trials, preprocess_fmri_run
from neuroflow.preprocessing.fmri.ncsnr import (
    ncsnr_from_betas,
    noise_ceiling_from_ncsnr,
    zscore_within,
)

PROV = {"stage": "single_trial", "version": "test"}
SHAPE = (5, 6, 4)
AFFINE = np.array(
    [[1.8, 0.0, 0.0, -4.0], [0.0, 1.8, 0.0, -5.0], [0.0, 0.0, 2.2, 3.0], [0.0, 0.0, 0.0, 1.0]]
)


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _nifti(path: Path, data: np.ndarray, affine: np.ndarray = AFFINE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, affine), path)
    return path


def _mask(path: Path, rng: np.random.Generator, shape=SHAPE, p=0.6) -> np.ndarray:
    inside = rng.random(shape) < p
    _nifti(path, inside.astype(np.uint8))
    return inside


def _trials(path: Path, stimuli, *, newline="\n", **columns) -> Path:
    table = pd.DataFrame({"stim_file": list(stimuli), **columns})
    text = table.to_csv(sep="\t", index=False, na_rep="n/a", lineterminator=newline)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def _import(sessions, tmp_path, config=None, name="betas.zarr", **kwargs):
    out = import_betas(
        sessions=sessions,
        output=tmp_path / name,
        config=config if config is not None else {},
        provenance=PROV,
        **kwargs,
    )
    return open_dataset(out).load()


# --------------------------------------------------------------------------- indexing
@pytest.fixture
def nsd(tmp_path, rng):
    """sub-01: ses-01 NIfTI in func/, ses-02 HDF5 at session level; sub-02: deep .npy."""
    root = tmp_path / "nsd"
    _touch(root / "dataset_description.json", '{"Name": "nsd", "BIDSVersion": "1.9.0"}')
    sub = root / "sub-01"
    _mask(sub / "sub-01_mask.nii.gz", rng)
    _mask(sub / "ses-02" / "sub-01_ses-02_mask.nii.gz", rng)
    np.save(sub / "sub-01_ncsnr.npy", rng.random(10))
    func = sub / "ses-01" / "func"
    _nifti(func / "sub-01_ses-01_task-nsd_betas.nii.gz", rng.standard_normal((*SHAPE, 4)))
    _trials(func / "sub-01_ses-01_task-nsd_trials.tsv", ["a", "b", "a", "c"])
    with h5py.File(sub / "ses-02" / "sub-01_ses-02_betas.h5", "w") as f:
        f["betas"] = rng.standard_normal((3, 10))
    _trials(sub / "ses-02" / "sub-01_ses-02_trials.tsv", ["a", "b", "c"])
    deep = root / "sub-02" / "derivatives" / "glmsingle"
    deep.mkdir(parents=True)
    np.save(deep / "sub-02_betas.npy", np.ones((1, 1)))
    _trials(deep / "sub-02_trials.tsv", ["a"])
    _touch(root / "sub-02" / "sub-02_ncsnr.nii.gz.bak")  # not BIDS-named: ignored
    return root


def test_index_sessions_and_inheritance(nsd):
    records = index_betas(nsd)
    assert [r.key for r in records] == ["sub-01_ses-01", "sub-01_ses-02", "sub-02"]
    ses1, ses2, sub2 = records
    assert ses1.betas.name == "sub-01_ses-01_task-nsd_betas.nii.gz"
    assert ses1.trials.name == "sub-01_ses-01_task-nsd_trials.tsv"
    # the subject-level mask applies to every session; a session's own wins
    assert ses1.mask == nsd / "sub-01" / "sub-01_mask.nii.gz"
    assert ses2.mask == nsd / "sub-01" / "ses-02" / "sub-01_ses-02_mask.nii.gz"
    assert ses1.ncsnr == ses2.ncsnr == nsd / "sub-01" / "sub-01_ncsnr.npy"
    assert (ses2.session, ses2.betas.suffix) == ("02", ".h5")
    assert sub2.session is None and sub2.mask is None and sub2.ncsnr is None
    assert sub2.betas.parent.name == "glmsingle"


def test_index_filters_strict_and_errors(nsd):
    assert [r.key for r in index_betas(nsd, sessions=["2"])] == ["sub-01_ses-02"]
    assert [r.key for r in index_betas(nsd, subjects=["02"])] == ["sub-02"]
    with pytest.raises(ValueError, match=r"No session '3'.*available: 01, 02"):
        index_betas(nsd, sessions=["3"])
    with pytest.raises(ValueError, match=r"No subject '010'.*Did you mean '01'"):
        index_betas(nsd, subjects=["010"])
    with pytest.raises(ValueError, match=r"`sessions` must hold labels without their prefix"):
        index_betas(nsd, sessions=["ses-01"])
    seen: dict[str, set[str]] = {}
    assert index_betas(nsd, sessions=["09"], strict=False, seen=seen) == []
    assert seen["ses"] == {"01", "02"} and seen["task"] == {"nsd"}
    empty = nsd.parent / "empty"
    (empty / "sub-01").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"No single-trial betas found in"):
        index_betas(empty)
    # a betas file without its trials table
    (nsd / "sub-01" / "ses-02" / "sub-01_ses-02_trials.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"sub-01_ses-02_betas.h5 must have a trials"):
        index_betas(nsd)
    _trials(nsd / "sub-01" / "ses-02" / "sub-01_ses-02_trials.tsv", ["a", "b", "c"])
    # two betas files for one session
    np.save(nsd / "sub-01" / "ses-02" / "sub-01_ses-02_acq-x_betas.npy", np.ones((1, 1)))
    _trials(nsd / "sub-01" / "ses-02" / "sub-01_ses-02_acq-x_trials.tsv", ["a"])
    with pytest.raises(ValueError, match=r"Several betas files belong to sub-01_ses-02"):
        index_betas(nsd)


def test_read_trials_crlf_and_na(tmp_path):
    path = _trials(
        tmp_path / "t.tsv",
        ["x.png", "y.png", "x.png"],
        newline="\r\n",
        trial_type=["img", None, "img"],
        onset=[1.5, None, 9.0],
        run=[1, 1, 2],
    )
    table = read_trials(path)
    assert list(table["stim_file"]) == ["x.png", "y.png", "x.png"]
    assert list(table["trial_type"]) == ["img", "", "img"]
    assert list(table["run"]) == ["1", "1", "2"]
    np.testing.assert_array_equal(table["onset"], [1.5, np.nan, 9.0])
    assert np.isnan(table["duration"]).all()
    with pytest.raises(ValueError, match=r"must have a 'stim_file' column, got columns \['a'\]"):
        read_trials(_touch(tmp_path / "u.tsv", "a\n1\n"))
    with pytest.raises(ValueError, match=r"'stim_file' must name a stimulus in every row.*row 2"):
        read_trials(_touch(tmp_path / "v.tsv", "stim_file\na\nn/a\n"))
    with pytest.raises(ValueError, match=r"'onset' must be numeric, got 'soon' in row 1"):
        read_trials(_touch(tmp_path / "w.tsv", "stim_file\tonset\na\tsoon\n"))
    with pytest.raises(FileNotFoundError, match=r"Trials table .*missing.tsv does not exist"):
        read_trials(tmp_path / "missing.tsv")


# --------------------------------------------------------------------------- import
def _session(root, rng, ses, stimuli, *, mask=None, kind="nifti", scale=None, **trial_columns):
    """One session's files; returns the record and the (trial, voxel) values in the mask."""
    folder = root / "sub-01" / f"ses-{ses}"
    stem = f"sub-01_ses-{ses}"
    n = len(stimuli)
    grid = rng.normal(2.0, 1.5, (*SHAPE, n)).astype(np.float32)
    inside = mask if mask is not None else np.ones(SHAPE, bool)
    values = grid[inside].T  # (trial, voxel), C order of the mask
    if kind == "nifti":
        path = _nifti(folder / f"{stem}_betas.nii.gz", grid)
    elif kind == "h5":
        stored = np.rint(values * scale).astype(np.int16) if scale else values
        values = stored / np.float32(scale) if scale else values
        path = folder / f"{stem}_betas.h5"
        path.parent.mkdir(parents=True, exist_ok=True)
        with h5py.File(path, "w") as f:
            f["betas"] = stored
            if scale:
                f["betas"].attrs["scale"] = scale
    else:
        path = folder / f"{stem}_betas.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, values)
    trials = _trials(folder / f"{stem}_trials.tsv", stimuli, newline="\r\n", **trial_columns)
    mask_path = None
    if mask is not None:
        mask_path = _nifti(root / "sub-01" / "sub-01_mask.nii.gz", mask.astype(np.uint8))
    record = BetasSession(subject="01", session=ses, betas=path, trials=trials, mask=mask_path)
    return record, values.astype(np.float32)


def _reference(tmp_path, rng):
    """A ``single_trial`` store from ``preprocess_fmri_run`` + ``estimate_single_trials``."""
    n, tr = 40, 2.0
    data = rng.normal(100.0, 1.0, (*SHAPE, n)).astype(np.float32)
    img = nib.Nifti1Image(data, AFFINE)
    img.header.set_zooms((1.8, 1.8, 2.2, tr))
    bold = tmp_path / "ref" / "sub-01_task-a_run-1_bold.nii.gz"
    bold.parent.mkdir(parents=True)
    nib.save(img, bold)
    sidecar = _touch(tmp_path / "ref" / "task-a_bold.json", json.dumps({"RepetitionTime": tr}))
    events = tmp_path / "ref" / "sub-01_task-a_run-1_events.tsv"
    pd.DataFrame(
        {
            "onset": [4.0, 20.0, 36.0, 52.0],
            "duration": 1.0,
            "trial_type": "img",
            "stim_file": ["a", "b", "a", "b"],
        }
    ).to_csv(events, sep="\t", index=False)
    run = preprocess_fmri_run(
        bold=bold,
        events=events,
        sidecars=[sidecar],
        output=tmp_path / "ref" / "run.zarr",
        config={"mask": {"source": "none"}},
        provenance=PROV,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = estimate_single_trials(
            runs=[run], output=tmp_path / "ref" / "st.zarr", config={}, provenance=PROV
        )
    return open_dataset(out).load()


def test_store_layout_matches_single_trial_estimates(tmp_path, rng):
    ref = _reference(tmp_path, rng)
    mask = rng.random(SHAPE) < 0.5
    root = tmp_path / "nsd"
    s1, v1 = _session(root, rng, "01", ["a", "b", "a", "c"], mask=mask, run=[1, 1, 2, 2])
    s2, v2 = _session(root, rng, "02", ["b", "c", "d"], mask=mask)
    ds = _import([s1, s2], tmp_path)
    assert set(ds.data_vars) == set(ref.data_vars)
    for name in ds.data_vars:
        assert ds[name].dims == ref[name].dims, name
        assert ds[name].dtype == ref[name].dtype, name
    assert set(ds.coords) == set(ref.coords)
    for name in ds.coords:
        assert ds[name].dims == ref[name].dims, name
        assert ds[name].dtype.kind == ref[name].dtype.kind, name
        assert ds[name].attrs == ref[name].attrs, name
    assert ds["noise_ceiling"].attrs == {"units": "%", "n_repeats": 2}
    assert ds["betas"].attrs["units"] == ref["betas"].attrs["units"] == "z"
    shared = {"n_trials", "n_repeated_stimuli", "noise_ceiling_n", "zscore", "entities"}
    assert shared <= set(ds.attrs) & set(ref.attrs)
    assert ds.attrs["entities"] == ref.attrs["entities"] == {"subject": "01"}
    assert ds.attrs["method"] == "imported"
    assert ds.attrs["mask_shape"] == list(SHAPE)
    np.testing.assert_allclose(ds.attrs["affine"], AFFINE, atol=1e-6)
    assert ds.attrs["source_files"] == [
        str(s1.betas),
        str(s1.trials),
        str(s1.mask),
        str(s2.betas),
        str(s2.trials),
    ]
    # trials
    assert ds.sizes == {"trial": 7, "voxel": int(mask.sum())}
    assert list(ds["stimulus"].values) == ["a", "b", "a", "c", "b", "c", "d"]
    assert list(ds["run"].values) == ["ses-01_run-1"] * 2 + ["ses-01_run-2"] * 2 + ["ses-02"] * 3
    assert list(ds["repeat"].values) == [0, 0, 1, 0, 1, 1, 0]
    assert list(ds["trial_type"].values) == [""] * 7
    assert np.isnan(ds["onset"].values).all() and np.isnan(ds["duration"].values).all()
    # voxels: the mask's, in C order, placed by the affine
    ijk = np.argwhere(mask)
    np.testing.assert_array_equal(np.stack([ds[c].values for c in "ijk"], axis=1), ijk)
    world = nib.affines.apply_affine(AFFINE, ijk)
    np.testing.assert_allclose(np.stack([ds[c].values for c in "xyz"], axis=1), world, atol=1e-5)
    assert (ds["roi"].values == "unlabelled").all()
    # values: z-scored within each session
    expected = np.concatenate([zscore_within(v, np.zeros(len(v))) for v in (v1, v2)])
    np.testing.assert_allclose(ds["betas"].values, expected, rtol=1e-5, atol=1e-5)
    assert ds.attrs["n_repeated_stimuli"] == 3 and ds.attrs["noise_ceiling_n"] == 2
    groups = ["ses-01"] * 4 + ["ses-02"] * 3
    snr = ncsnr_from_betas(np.concatenate([v1, v2]), list(ds["stimulus"].values), groups=groups)
    np.testing.assert_allclose(ds["ncsnr"].values, snr, rtol=1e-4)
    np.testing.assert_allclose(
        ds["noise_ceiling"].values, noise_ceiling_from_ncsnr(snr, 2), rtol=1e-4
    )
    assert ds["ncsnr"].attrs["source"] == "betas"


def test_h5_scale_npy_and_mask_order(tmp_path, rng):
    mask = rng.random(SHAPE) < 0.4
    root = tmp_path / "nsd"
    s1, v1 = _session(root, rng, "01", ["a", "b", "c"], mask=mask, kind="h5", scale=300)
    with h5py.File(s1.betas) as f:
        assert f["betas"].dtype == np.int16
    s2, v2 = _session(root, rng, "02", ["a", "d"], mask=mask, kind="npy")
    ds = _import([s1, s2], tmp_path, config={"zscore": False})
    np.testing.assert_allclose(ds["betas"].values, np.concatenate([v1, v2]), rtol=1e-6)
    assert ds["betas"].attrs["units"] == "a.u."
    np.testing.assert_array_equal(
        np.stack([ds[c].values for c in "ijk"], axis=1), np.argwhere(mask)
    )
    assert list(ds["run"].values) == ["ses-01"] * 3 + ["ses-02"] * 2


def test_gridded_betas_without_mask(tmp_path, rng):
    """4-D grids keep the voxels finite and non-zero in at least one trial."""
    grid = rng.standard_normal((4, *SHAPE)).astype(np.float32)
    grid[:, 0] = 0.0  # outside the brain: zero in every trial
    grid[:, 1, 2] = np.nan  # NaN in every trial
    grid[:2, 2, 3, 1] = 0.0  # zero in some trials only: kept
    keep = (np.isfinite(grid) & (grid != 0)).any(axis=0)
    folder = tmp_path / "sub-01"
    path = folder / "sub-01_betas.h5"
    folder.mkdir()
    with h5py.File(path, "w") as f:
        f["betas"] = grid
        f["betas"].attrs["affine"] = AFFINE
    trials = _trials(folder / "sub-01_trials.tsv", ["a", "b", "a", "b"])
    session = BetasSession(subject="01", session=None, betas=path, trials=trials)
    ds = _import([session], tmp_path, config={"zscore": False})
    ijk = np.argwhere(keep)
    np.testing.assert_array_equal(np.stack([ds[c].values for c in "ijk"], axis=1), ijk)
    np.testing.assert_allclose(ds["x"].values, nib.affines.apply_affine(AFFINE, ijk)[:, 0])
    np.testing.assert_array_equal(ds["betas"].values, grid[:, keep])
    assert list(ds["run"].values) == ["sub-01"] * 4
    # the same grid as a NIfTI (x, y, z, trial)
    nii = _nifti(folder / "sub-01_betas.nii.gz", np.moveaxis(grid, 0, -1))
    ds2 = _import([BetasSession("01", None, nii, trials)], tmp_path, {"zscore": False}, "b.zarr")
    np.testing.assert_array_equal(ds2["betas"].values, ds["betas"].values)
    np.testing.assert_allclose(ds2["z"].values, ds["z"].values)
    # a voxel with NaN in some trials only is an error, not a store with NaN
    grid[1, 4, 5, 3] = np.nan
    bad = _nifti(folder / "sub-01_betas.nii", np.moveaxis(grid, 0, -1))
    with pytest.raises(ValueError, match=r"sub-01_betas.nii has 1 NaN or infinite value\(s\)"):
        _import([BetasSession("01", None, bad, trials)], tmp_path, name="c.zarr")
    assert not (tmp_path / "c.zarr").exists()


def test_noise_ceiling_sources(tmp_path, rng, caplog):
    mask = rng.random(SHAPE) < 0.5
    n_vox = int(mask.sum())
    root = tmp_path / "nsd"
    s1, _ = _session(root, rng, "01", ["a", "b", "a", "b", "c"], mask=mask, kind="npy")
    snr = rng.random(n_vox) * 2
    snr[0] = np.nan
    np.save(root / "sub-01" / "sub-01_ncsnr.npy", snr)
    with_file = replace(s1, ncsnr=root / "sub-01" / "sub-01_ncsnr.npy")
    ds = _import([with_file], tmp_path, config={"noise_ceiling_n": 3})
    np.testing.assert_allclose(ds["ncsnr"].values, snr.astype(np.float32))
    np.testing.assert_allclose(
        ds["noise_ceiling"].values, noise_ceiling_from_ncsnr(snr, 3), rtol=1e-6
    )
    assert np.isnan(ds["noise_ceiling"].values[0])
    assert ds.attrs["noise_ceiling_n"] == 3 and ds.attrs["ncsnr_source"] == "file"
    # the same values as an image on the betas grid
    image = np.zeros(SHAPE)
    image[mask] = snr
    nii = _nifti(root / "sub-01" / "sub-01_ncsnr.nii.gz", image)
    ds = _import([replace(s1, ncsnr=nii)], tmp_path, name="n.zarr")
    np.testing.assert_allclose(ds["ncsnr"].values, snr.astype(np.float32))
    assert ds.attrs["noise_ceiling_n"] == 2  # the typical repeat count
    # no repeats and no file: NaN, with a log line
    s2, _ = _session(root, rng, "02", ["x", "y", "z"], mask=mask, kind="npy")
    with caplog.at_level(logging.WARNING, logger="neuroflow.io.betas"):
        ds = _import([s2], tmp_path, name="none.zarr")
    assert np.isnan(ds["ncsnr"].values).all() and np.isnan(ds["noise_ceiling"].values).all()
    assert ds.attrs["noise_ceiling_n"] == "n/a" and ds.attrs["n_repeated_stimuli"] == 0
    assert any("ncsnr and noise_ceiling are NaN" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match=r"ncsnr file .* must have shape \(\d+,\)"):
        np.save(root / "bad_ncsnr.npy", np.ones(n_vox + 1))
        _import([replace(s1, ncsnr=root / "bad_ncsnr.npy")], tmp_path)


def test_roi_from_atlas(tmp_path, rng):
    mask = np.zeros(SHAPE, bool)
    mask[1:4, 1:5, 1:3] = True
    root = tmp_path / "nsd"
    s1, _ = _session(root, rng, "01", ["a", "b", "a"], mask=mask, kind="npy")
    atlas = np.zeros(SHAPE, np.int16)
    atlas[:2] = 1
    atlas[2:, :3] = 7
    atlas_path = _nifti(tmp_path / "atlas.nii.gz", atlas)
    labels = _touch(tmp_path / "labels.tsv", "index\tname\n1\tV1\n7\tFFA\n")
    ds = _import([s1], tmp_path, roi_atlas=atlas_path, roi_labels=labels)
    names = {0: "unlabelled", 1: "V1", 7: "FFA"}
    expected = [names[int(v)] for v in atlas[mask]]
    assert list(ds["roi"].values) == expected
    with pytest.raises(ValueError, match=r"`roi_labels` is given but `roi_atlas` is not"):
        _import([s1], tmp_path, name="x.zarr", roi_labels=labels)


def test_import_errors(tmp_path, rng):
    mask = rng.random(SHAPE) < 0.5
    root = tmp_path / "nsd"
    s1, _ = _session(root, rng, "01", ["a", "b", "a"], mask=mask, kind="npy")

    def fails(sessions, match, error=ValueError, **kwargs):
        with pytest.raises(error, match=match):
            _import(sessions, tmp_path, name="fail.zarr", **kwargs)
        assert not (tmp_path / "fail.zarr").exists()

    # trials and betas disagree
    short = _trials(root / "short_trials.tsv", ["a", "b"])
    fails(
        [replace(s1, trials=short)],
        r"Trials table .*short_trials.tsv has 2 rows but betas file .*sub-01_ses-01_betas.npy "
        r"holds 3 trials",
    )
    # (trial, voxel) matrices need a mask with as many voxels
    fails(
        [replace(s1, mask=None)],
        r"holds a \(trial, voxel\) matrix and needs a mask",
    )
    other = _nifti(root / "other_mask.nii.gz", (~mask).astype(np.uint8))
    n_in, n_out = int(mask.sum()), int((~mask).sum())
    fails(
        [replace(s1, mask=other)],
        rf"Mask .*other_mask.nii.gz has {n_out} voxels but betas file .* holds {n_in}",
    )
    # NaN inside the mask
    values = np.load(s1.betas)
    values[0, :3] = np.nan
    nan_path = root / "nan_betas.npy"
    np.save(nan_path, values)
    fails(
        [replace(s1, betas=nan_path)],
        r"nan_betas.npy has 3 NaN or infinite value\(s\) inside the mask",
    )
    # sessions on different grids or masks
    s2, _ = _session(tmp_path / "two", rng, "02", ["a", "c"], mask=~mask, kind="npy")
    fails([s1, s2], r"Sessions of sub-01 must share one voxel grid and mask:.*differ in voxels")
    s3 = replace(s1, session="03", subject="02")
    fails([s1, s3], r"`sessions` must all belong to one subject, got subjects \['01', '02'\]")
    fails([s1, s1], r"`sessions` must hold each session once")
    fails([], r"`sessions` must be a non-empty list")
    # z-scoring needs two trials per session
    one = _trials(root / "one_trials.tsv", ["a"])
    np.save(root / "one_betas.npy", values[:1])
    single = BetasSession("01", "04", root / "one_betas.npy", one, s1.mask)
    fails([single], r"one_betas.npy has 1 trial\(s\); z-scoring betas per session")
    # files
    h5 = root / "bad_betas.h5"
    with h5py.File(h5, "w") as f:
        f["beta"] = values
    fails(
        [replace(s1, betas=h5)],
        r"HDF5 betas file .*bad_betas.h5 must hold a dataset 'betas', got \['beta'\]",
    )
    with h5py.File(h5, "w") as f:
        f["betas"] = np.zeros((3, 2, 2))
    fails(
        [replace(s1, betas=h5)],
        r"must be \(trial, voxel\) or \(trial, x, y, z\), got shape \(3, 2, 2\)",
    )
    with h5py.File(h5, "w") as f:
        f["betas"] = np.zeros((3, n_in))
        f["betas"].attrs["scale"] = 0
    fails(
        [replace(s1, betas=h5)],
        r"Attribute 'scale' of dataset 'betas' in .* must be a positive number, got 0",
    )
    flat = _nifti(root / "flat_betas.nii.gz", np.zeros(SHAPE, np.float32))
    fails(
        [replace(s1, betas=flat)],
        r"Betas image .*flat_betas.nii.gz must be 4-D \(x, y, z, trial\)",
    )
    fails(
        [replace(s1, betas=root / "gone_betas.npy")],
        r"Betas file .*gone_betas.npy does not exist",
        error=FileNotFoundError,
    )


def _int_session(root, rng, ses, *, kind, dtype=np.int16, scale=300, attribute=True):
    """A session whose betas are stored as integers times ``scale``; returns the record
    and the betas (trial, voxel) the stored integers stand for."""
    folder = root / "sub-01" / f"ses-{ses}"
    stem = f"sub-01_ses-{ses}"
    stimuli = ["a", "b", "c", "d", "e"][: 3 + int(ses) % 3]
    betas = rng.normal(1.0, 2.0, (len(stimuli), *SHAPE))
    if np.dtype(dtype).kind == "u":
        betas = np.abs(betas)
    stored = np.rint(betas * scale).astype(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "h5":
        path = folder / f"{stem}_betas.h5"
        with h5py.File(path, "w") as f:
            f["betas"] = stored.reshape(len(stimuli), -1)
            if attribute:
                f["betas"].attrs["scale"] = scale
    elif kind == "npy":
        path = folder / f"{stem}_betas.npy"
        np.save(path, stored.reshape(len(stimuli), -1))
    else:
        path = _nifti(folder / f"{stem}_betas.nii.gz", np.moveaxis(stored, 0, -1))
    mask = _nifti(root / "sub-01" / "sub-01_mask.nii.gz", np.ones(SHAPE, np.uint8))
    trials = _trials(folder / f"{stem}_trials.tsv", stimuli)
    record = BetasSession(subject="01", session=ses, betas=path, trials=trials, mask=mask)
    flat = (stored / np.float32(scale)).astype(np.float32).reshape(len(stimuli), -1)
    return record, flat


def test_integer_betas_without_a_declared_scale_are_refused(tmp_path, rng):
    root = tmp_path / "nsd"
    declared, v1 = _int_session(root, rng, "01", kind="h5")
    bare, v2 = _int_session(root, rng, "02", kind="h5", attribute=False)
    with pytest.raises(
        ValueError,
        match=rf"Dataset 'betas' of {bare.betas} stores int16 values without a declared "
        r"scale.*Declare it with the HDF5 attribute 'scale' on dataset 'betas' or "
        r"`dataset.betas_scale` \(e.g. `dataset.betas_scale: 300`\)",
    ):
        _import([declared, bare], tmp_path, config={"zscore": False})
    assert not (tmp_path / "betas.zarr").exists()
    # declared in the config, both sessions are on one scale (not one 300 times the other)
    ds = _import([declared, bare], tmp_path, config={"zscore": False}, betas_scale=300)
    np.testing.assert_allclose(ds["betas"].values, np.concatenate([v1, v2]), rtol=1e-6)
    ratio = np.abs(ds["betas"].values[len(v1) :]).mean() / np.abs(v1).mean()
    assert 0.5 < ratio < 2.0
    # the file's own attribute must agree with the config's
    with pytest.raises(
        ValueError,
        match=r"`dataset.betas_scale` is 100 but the attribute 'scale' of dataset 'betas' "
        rf"in {declared.betas} is 300; they must agree",
    ):
        _import([declared, bare], tmp_path, name="b.zarr", betas_scale=100)
    with pytest.raises(ValueError, match=r"`dataset.betas_scale` must be a positive number"):
        _import([declared], tmp_path, name="c.zarr", betas_scale=-3)


@pytest.mark.parametrize(
    ("kind", "dtype"), [("npy", np.uint16), ("npy", np.int32), ("nifti", np.int16)]
)
def test_integer_npy_and_nifti_betas_need_betas_scale(tmp_path, rng, kind, dtype):
    session, values = _int_session(tmp_path / "ds", rng, "01", kind=kind, dtype=dtype)
    how = "`dataset.betas_scale`" + (" or the NIfTI header's scl_slope" if kind == "nifti" else "")
    with pytest.raises(
        ValueError,
        match=rf"Betas file {session.betas} stores {np.dtype(dtype)} values without a "
        rf"declared scale.*Declare it with {how}",
    ):
        _import([session], tmp_path, config={"zscore": False})
    ds = _import([session], tmp_path, config={"zscore": False}, betas_scale=300)
    np.testing.assert_allclose(ds["betas"].values, values, rtol=1e-6)


def test_nifti_integer_betas_scaled_by_their_header_and_float_betas_as_they_are(tmp_path, rng):
    root = tmp_path / "ds"
    session, _ = _int_session(root, rng, "01", kind="nifti")
    # float betas saved as int16 with the header's scl_slope (nibabel picks the slope)
    betas = rng.normal(0.0, 2.0, (*SHAPE, 4)).astype(np.float32)
    img = nib.Nifti1Image(betas, AFFINE)
    img.header.set_data_dtype(np.int16)
    nib.save(img, session.betas)
    saved = nib.load(session.betas)
    assert saved.get_data_dtype() == np.int16 and saved.header.get_slope_inter()[0] != 1.0
    expected = np.asanyarray(saved.dataobj).reshape(-1, 4).T  # (trial, voxel), C order
    _trials(session.trials, ["a", "b", "c", "a"])
    ds = _import([session], tmp_path, config={"zscore": False}, betas_scale=300)
    np.testing.assert_allclose(ds["betas"].values, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ds["betas"].values, betas.reshape(-1, 4).T, atol=1e-3)
    # float betas are betas: the setting is for integer files only
    floats, v = _session(root, rng, "02", ["a", "b"], mask=np.ones(SHAPE, bool), kind="npy")
    ds = _import([floats], tmp_path, name="f.zarr", config={"zscore": False}, betas_scale=300)
    np.testing.assert_allclose(ds["betas"].values, v, rtol=1e-6)

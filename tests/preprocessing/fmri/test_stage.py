"""The preprocess_fmri stage: one BOLD run to a (time, voxel) zarr store."""

from __future__ import annotations

import json
import warnings

import nibabel as nib
import numpy as np
import pandas as pd
import pytest

from neuroflow.artifacts import open_dataset
from neuroflow.preprocessing.fmri import preprocess_fmri_run, resolve_config

PROV = {"stage": "preprocess_fmri", "version": "test"}


def _run(run, out, config=None, **kwargs):
    args = {
        "bold": run["bold"],
        "events": run["events"],
        "sidecars": run["sidecars"],
        "output": out,
        "config": config or {},
        "provenance": PROV,
    }
    args.update(kwargs)
    return preprocess_fmri_run(**args)


def test_store_layout(make_run, tmp_path):
    run = make_run()
    out = _run(run, tmp_path / "out.zarr", {"drop_volumes": 2})
    ds = open_dataset(out)
    assert ds["bold"].dims == ("time", "voxel")
    assert ds["bold"].dtype == np.float32
    assert ds.sizes["voxel"] > 20  # computed EPI mask, within the planted brain
    np.testing.assert_allclose(ds["time"].values, np.arange(2, 60) * 2.0)
    assert ds["time"].attrs["units"] == "s"
    i, j, k = (ds[c].values for c in "ijk")
    assert run["brain"][i, j, k].all()
    np.testing.assert_allclose(ds["x"].values, 2.0 * i)
    np.testing.assert_allclose(ds["z"].values, 2.5 * k)
    assert (ds["roi"].values == "unlabelled").all()
    assert ds.attrs["tr"] == 2.0
    assert ds.attrs["mask_shape"] == [7, 8, 9]
    assert np.allclose(ds.attrs["affine"], np.diag([2.0, 2.0, 2.5, 1.0]))
    assert [s["name"] for s in ds.attrs["steps"]] == [
        "drop_volumes",
        "mask",
        "detrend",
        "temporal_filter",
        "zscore",
    ]
    assert ds.attrs["source_file"].endswith("sub-01_task-movie_run-1_bold.nii.gz")
    assert ds.attrs["entities"] == {"subject": "01", "task": "movie", "run": "1"}
    # events
    np.testing.assert_allclose(ds["event_onset"].values, [0.0, 10.0, 30.5])
    assert list(ds["trial_type"].values) == ["face", "house", ""]
    assert list(ds["stim_file"].values) == ["a.png", "b.png", "c.png"]
    assert np.isnan(ds["event_response_time"].values[1])
    assert list(ds["event_stim_type"].values) == ["FAMOUS", "NEW", "FAMOUS"]
    # z-scored, drift gone
    bold = ds["bold"].values
    np.testing.assert_allclose(bold.std(axis=0, ddof=1), 1.0, rtol=1e-4)
    t = ds["time"].values
    assert np.abs(np.corrcoef(t, bold.mean(axis=1))[0, 1]) < 0.3
    assert ds["bold"].encoding["chunks"][0] == 58


def test_planted_confounds_removed(make_run, tmp_path):
    run = make_run(n=50, n_confounds=3)
    conf_path = tmp_path / "conf.tsv"
    pd.DataFrame(run["conf"], columns=["a", "b", "c"]).to_csv(conf_path, sep="\t", index=False)
    cfg = {"drop_volumes": 0, "confounds": {"strategy": ["custom"], "columns": ["a", "b", "c"]}}
    ds = open_dataset(_run(run, tmp_path / "o.zarr", cfg, confounds=conf_path))
    bold = ds["bold"].values.astype(float)
    assert np.abs(bold.T @ run["conf"]).max() < 1e-2
    assert ds.attrs["steps"][2]["columns"] == ["a", "b", "c"]


def test_fmriprep_confounds_and_non_steady_state(make_run, tmp_path, rng, fmriprep_confounds):
    run = make_run(n=64, name="sub-01_task-movie_space-T1w_desc-preproc_bold.nii.gz")
    conf_path = tmp_path / "sub-01_task-movie_desc-confounds_timeseries.tsv"
    table = fmriprep_confounds(conf_path, 64, rng, n_nss=3)
    table.loc[[20, 40], "framewise_displacement"] = 2.0
    table.to_csv(conf_path, sep="\t", index=False, na_rep="n/a")
    cfg = {
        "confounds": {
            "strategy": ["motion", "wm_csf", "scrub"],
            "motion": "basic",
            "scrub_min_segment": 0,
        }
    }
    ds = open_dataset(_run(run, tmp_path / "o.zarr", cfg, confounds=conf_path))
    assert ds.sizes["time"] == 61
    assert ds["time"].values[0] == 6.0
    steps = {s["name"]: s for s in ds.attrs["steps"]}
    assert steps["drop_volumes"] == {"name": "drop_volumes", "n": 3, "source": "fmriprep"}
    assert set(steps["confounds"]["columns"]) == {
        *("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"),
        *("white_matter", "csf"),
    }
    assert steps["scrub"]["volumes"] == [20, 40]
    bold = ds["bold"].values
    np.testing.assert_allclose(bold[[20 - 3, 40 - 3]], 0.0, atol=1e-5)


def test_auto_strategy_regresses_motion_only_where_a_table_has_it(
    make_run, tmp_path, rng, fmriprep_confounds
):
    run = make_run(n=48, name="sub-01_task-movie_space-T1w_desc-preproc_bold.nii.gz")
    conf_path = tmp_path / "sub-01_task-movie_desc-confounds_timeseries.tsv"
    fmriprep_confounds(conf_path, 48, rng)
    ds = open_dataset(_run(run, tmp_path / "prep.zarr", {}, confounds=conf_path))
    steps = {s["name"]: s for s in ds.attrs["steps"]}
    assert len(steps["confounds"]["columns"]) == 6 + 2  # motion and wm_csf "basic"
    assert {"white_matter", "csf", "trans_x"} <= set(steps["confounds"]["columns"])
    full = open_dataset(
        _run(run, tmp_path / "full.zarr", {"confounds": {"motion": "full"}}, confounds=conf_path)
    )
    columns = {s["name"]: s for s in full.attrs["steps"]}["confounds"]["columns"]
    assert len(columns) == 24 + 2 and "trans_x_derivative1_power2" in columns
    # a table with only the six parameters gets the basic model
    six = tmp_path / "sub-01_task-movie_run-2_desc-confounds_timeseries.tsv"
    table = pd.read_csv(conf_path, sep="\t")
    table[["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"]].to_csv(
        six, sep="\t", index=False
    )
    basic = open_dataset(_run(run, tmp_path / "six.zarr", {}, confounds=six))
    steps = {s["name"]: s for s in basic.attrs["steps"]}
    assert len(steps["confounds"]["columns"]) == 6
    assert steps["confounds"]["details"][0] == {"auto": ["motion"], "motion": "basic"}
    # a table without fMRIPrep's motion columns, and no table, regress nothing
    user = tmp_path / "user.tsv"
    pd.DataFrame({"a": rng.standard_normal(48)}).to_csv(user, sep="\t", index=False)
    plain = open_dataset(_run(run, tmp_path / "user.zarr", {}, confounds=user))
    steps = {s["name"]: s for s in plain.attrs["steps"]}
    assert steps["confounds"]["columns"] == []
    assert steps["confounds"]["details"] == [{"auto": [], "motion": "basic"}]
    bare = open_dataset(_run(run, tmp_path / "bare.zarr", {}))
    assert "confounds" not in [s["name"] for s in bare.attrs["steps"]]


def test_scrub_censor_mode(make_run, tmp_path, rng, fmriprep_confounds):
    run = make_run(n=40, name="sub-01_task-movie_space-T1w_desc-preproc_bold.nii.gz")
    conf_path = tmp_path / "sub-01_task-movie_desc-confounds_timeseries.tsv"
    table = fmriprep_confounds(conf_path, 40, rng)
    table.loc[17, "framewise_displacement"] = 3.0
    table.to_csv(conf_path, sep="\t", index=False, na_rep="n/a")
    cfg = {"confounds": {"strategy": ["scrub"], "scrub_mode": "censor", "scrub_min_segment": 0}}
    ds = open_dataset(_run(run, tmp_path / "o.zarr", cfg, confounds=conf_path))
    assert ds.sizes["time"] == 39
    assert 34.0 not in ds["time"].values


def test_raw_global_signal_and_skipped_components(make_run, tmp_path):
    run = make_run(n=30)
    cfg = {"standardize": False, "confounds": {"strategy": ["global_signal", "motion"]}}
    with pytest.warns(UserWarning, match=r"\['motion'\] need an fMRIPrep confounds table"):
        ds = open_dataset(_run(run, tmp_path / "o.zarr", cfg))
    assert ds.attrs["steps"][2]["columns"] == ["global_signal"]
    # regressing the global signal leaves the mean over voxels at zero
    np.testing.assert_allclose(ds["bold"].values.mean(axis=1), 0.0, atol=1e-3)


def test_rois_and_parcels(make_run, tmp_path):
    run = make_run()
    labels = np.zeros((7, 8, 9), np.int16)
    labels[1:3, 1:-1, 1:-1] = 1
    labels[3, 1:-1, 1:-1] = 2
    atlas = tmp_path / "atlas.nii.gz"
    nib.save(nib.Nifti1Image(labels, np.diag([2.0, 2.0, 2.5, 1.0])), atlas)
    tsv = tmp_path / "atlas.tsv"
    tsv.write_text("index\tname\n1\tV1\n2\tFFA\n")
    cfg = {"rois": {"atlas": str(atlas), "labels": str(tsv), "parcels": True}}
    ds = open_dataset(_run(run, tmp_path / "o.zarr", cfg))
    i = ds["i"].values
    assert set(ds["roi"].values[i < 3]) == {"V1"}
    assert set(ds["roi"].values[i == 3]) == {"FFA"}
    # voxels outside every region (the mask reaches i = 4) are labelled, never left blank
    assert set(ds["roi"].values[i >= 4]) == {"unlabelled"}
    assert list(ds["parcel"].values) == ["V1", "FFA"]
    expected = ds["bold"].values[:, ds["roi"].values == "FFA"].mean(axis=1)
    np.testing.assert_allclose(ds["parcel_bold"].values[:, 1], expected, atol=1e-5)


def test_atlas_on_other_grid_is_resampled(make_run, tmp_path):
    run = make_run()
    labels = np.ones((14, 16, 18), np.int16)
    atlas = tmp_path / "atlas.nii.gz"
    nib.save(nib.Nifti1Image(labels, np.diag([1.0, 1.0, 1.25, 1.0])), atlas)
    with pytest.warns(UserWarning, match="on another grid.*nearest-neighbour") as caught:
        ds = open_dataset(_run(run, tmp_path / "o.zarr", roi_atlas=atlas))
    assert set(ds["roi"].values) == {"label-1"}
    # both files, both shapes and both affines are named; the store keeps the warning
    (message,) = [str(w.message) for w in caught if "another grid" in str(w.message)]
    assert f"Atlas {atlas} is on another grid than the BOLD image {run['bold']}" in message
    assert "atlas shape (14, 16, 18), affine [[1 0 0 0], [0 1 0 0], [0 0 1.25 0]]" in message
    assert "BOLD shape (7, 8, 9), affine [[2 0 0 0], [0 2 0 0], [0 0 2.5 0]]" in message
    assert ds.attrs["warnings"] == [message]


def test_atlas_without_overlap(make_run, tmp_path):
    run = make_run()
    atlas = tmp_path / "far.nii.gz"
    nib.save(
        nib.Nifti1Image(
            np.ones((4, 4, 4), np.int16),
            np.diag([2, 2, 2, 1.0]) + np.c_[np.zeros((4, 3)), [500, 500, 500, 0]],
        ),
        atlas,
    )
    with pytest.raises(ValueError, match=r"Atlas .*far.nii.gz does not overlap the field of view"):
        _run(run, tmp_path / "o.zarr", roi_atlas=atlas)
    assert not (tmp_path / "o.zarr").exists()


def test_given_mask_on_other_grid_and_no_overlap(make_run, tmp_path):
    run = make_run()
    mask = tmp_path / "mask.nii.gz"
    m = np.zeros((14, 16, 18), np.uint8)
    m[4:10, 4:10, 4:10] = 1
    nib.save(nib.Nifti1Image(m, np.diag([1.0, 1.0, 1.25, 1.0])), mask)
    with pytest.warns(UserWarning, match="Mask .* on another grid"):
        ds = open_dataset(_run(run, tmp_path / "o.zarr", mask=mask))
    assert 0 < ds.sizes["voxel"] < run["brain"].sum()
    far = tmp_path / "far.nii.gz"
    aff = np.diag([2.0, 2.0, 2.5, 1.0])
    aff[:3, 3] = 900
    nib.save(nib.Nifti1Image(np.ones((7, 8, 9), np.uint8), aff), far)
    with pytest.raises(ValueError, match=r"Mask .*far.nii.gz does not overlap the field of view"):
        _run(run, tmp_path / "o2.zarr", mask=far)
    assert not (tmp_path / "o2.zarr").exists()


def test_smoothing_step(make_run, tmp_path):
    run = make_run(n=20)
    ds = open_dataset(_run(run, tmp_path / "o.zarr", {"smoothing_fwhm": 4.0}))
    assert {"name": "smooth", "fwhm_mm": 4.0} in ds.attrs["steps"]


def test_no_events_gives_empty_event_dim(make_run, tmp_path):
    run = make_run(events=False)
    ds = open_dataset(_run(run, tmp_path / "o.zarr"))
    assert ds.sizes["event"] == 0


# ---------------------------------------------------------------- bad input


def test_3d_bold(tmp_path):
    path = tmp_path / "sub-01_task-x_bold.nii.gz"
    nib.save(nib.Nifti1Image(np.ones((7, 8, 9), np.float32), np.eye(4)), path)
    with pytest.raises(ValueError, match=r"sub-01_task-x_bold.nii.gz must be 4-D.*\(7, 8, 9\)"):
        preprocess_fmri_run(bold=path, output=tmp_path / "o.zarr", config={}, provenance=PROV)
    assert not (tmp_path / "o.zarr").exists()


def test_tr_mismatch_warns_and_sidecar_wins(make_run, tmp_path):
    run = make_run(tr=1.5, header_tr=2.0, n=30)
    with pytest.warns(UserWarning, match="1.5 s in its sidecar but 2.0 s in its NIfTI header"):
        ds = open_dataset(_run(run, tmp_path / "o.zarr"))
    assert ds.attrs["tr"] == 1.5
    (message,) = [m for m in ds.attrs["warnings"] if m.startswith("RepetitionTime")]
    assert message.startswith("RepetitionTime of sub-01_task-movie_run-1_bold.nii.gz is 1.5 s")


def test_store_without_warnings_has_an_empty_list(make_run, tmp_path):
    ds = open_dataset(_run(make_run(), tmp_path / "o.zarr"))
    assert ds.attrs["warnings"] == []


def test_no_tr_anywhere(make_run, tmp_path):
    run = make_run(sidecar=False, header_tr=0.0, n=30)
    with pytest.raises(ValueError, match=r"No repetition time for sub-01.*no RepetitionTime"):
        _run(run, tmp_path / "o.zarr")


def test_header_tr_used_without_sidecar(make_run, tmp_path):
    run = make_run(sidecar=False, header_tr=2.0, n=30)
    assert open_dataset(_run(run, tmp_path / "o.zarr")).attrs["tr"] == 2.0


def test_confounds_rows_differ(make_run, tmp_path, rng, fmriprep_confounds):
    run = make_run(n=30)
    conf = tmp_path / "c.tsv"
    fmriprep_confounds(conf, 29, rng)
    with pytest.raises(ValueError, match=r"c.tsv must have one row per volume \(30\), got 29"):
        _run(run, tmp_path / "o.zarr", confounds=conf)


def test_nan_in_bold(tmp_path, make_run):
    run = make_run(n=20)
    img = nib.load(run["bold"])
    data = img.get_fdata(dtype=np.float32)
    data[3, 3, 3, 5] = np.nan
    nib.save(nib.Nifti1Image(data, img.affine, img.header), run["bold"])
    with pytest.raises(ValueError, match="NaN or infinite values in 1 voxel"):
        _run(run, tmp_path / "o.zarr")
    mask = tmp_path / "m.nii.gz"
    nib.save(nib.Nifti1Image(run["brain"].astype(np.uint8), img.affine), mask)
    with pytest.raises(ValueError, match=r"NaN or infinite .*first in volume 5"):
        _run(run, tmp_path / "o.zarr", mask=mask)
    assert not (tmp_path / "o.zarr").exists()


def test_events_past_end(make_run, tmp_path):
    run = make_run(n=10)  # 20 s
    with pytest.raises(ValueError, match=r"events.tsv: onset 30.5 s \(row 3\) is past the end"):
        _run(run, tmp_path / "o.zarr")


def test_events_missing_column(make_run, tmp_path):
    run = make_run(n=30)
    run["events"].write_text("onset\ttrial_type\n1\ta\n")
    with pytest.raises(ValueError, match="must have a 'duration' column"):
        _run(run, tmp_path / "o.zarr")


def test_bad_sidecar_tr(make_run, tmp_path):
    run = make_run(n=30)
    run["sidecars"][0].write_text(json.dumps({"RepetitionTime": "2"}))
    with pytest.raises(
        ValueError, match=r"RepetitionTime in the sidecars of .* must be a positive"
    ):
        _run(run, tmp_path / "o.zarr")


def test_config_errors():
    with pytest.raises(
        ValueError,
        match=r"Unknown key 'preprocess_fmri\.confounds\.strat'\. Did you mean 'strategy'\?",
    ):
        resolve_config({"confounds": {"strat": []}})
    with pytest.raises(ValueError, match="`drop_volumes` must be 'auto' or an int"):
        resolve_config({"drop_volumes": -1})
    with pytest.raises(ValueError, match=r"`confounds.strategy` must be 'auto', 'none' or a list"):
        resolve_config({"confounds": {"strategy": ["motion", "aroma"]}})
    assert resolve_config(None)["high_pass"] == {"filter": "cosine", "cutoff_hz": 0.01}


def test_missing_custom_column(make_run, tmp_path):
    run = make_run(n=30)
    conf = tmp_path / "c.tsv"
    pd.DataFrame({"a": np.arange(30.0)}).to_csv(conf, sep="\t", index=False)
    cfg = {"confounds": {"strategy": ["custom"], "columns": ["b"]}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"c.tsv has no column\(s\) \['b'\]"):
            _run(run, tmp_path / "o.zarr", cfg, confounds=conf)


def test_constant_bold_is_refused(make_run, tmp_path):
    run = make_run(n=30)
    img = nib.load(run["bold"])
    nib.save(nib.Nifti1Image(np.zeros(img.shape, np.float32), img.affine, img.header), run["bold"])
    mask = tmp_path / "m.nii.gz"
    nib.save(nib.Nifti1Image(run["brain"].astype(np.uint8), img.affine), mask)
    with pytest.raises(ValueError, match=r"is constant over time in every one of its \d+ in-mask"):
        _run(run, tmp_path / "o.zarr", mask=mask)
    assert not (tmp_path / "o.zarr").exists()


def test_negative_event_duration_is_refused(make_run, tmp_path):
    run = make_run(n=30)
    run["events"].write_text("onset\tduration\ttrial_type\n1\t2\ta\n5\t-1.5\tb\n")
    with pytest.raises(ValueError, match=r"'duration' must be >= 0 s .* got -1.5 in row 2"):
        _run(run, tmp_path / "o.zarr")


def _truncate(path, fraction=0.5):
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * fraction)])
    return path


def test_truncated_bold_fails_before_anything_is_written(make_run, tmp_path):
    run = make_run(n=20)
    _truncate(run["bold"])
    with pytest.raises(
        ValueError, match=r"BOLD image .*sub-01_task-movie_run-1_bold.nii.gz must hold \d+ bytes"
    ) as info:
        _run(run, tmp_path / "o.zarr")
    assert "truncated" in str(info.value)
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("role", ["mask", "atlas"])
def test_truncated_mask_or_atlas_is_named(make_run, tmp_path, rng, role):
    run = make_run(n=20)
    path = tmp_path / f"{role}.nii.gz"
    labels = (rng.random((7, 8, 9)) > 0.3).astype(np.int16)
    nib.save(nib.Nifti1Image(labels, np.diag([2.0, 2.0, 2.5, 1.0])), path)
    _truncate(path, 0.4)
    kwargs = {"mask": path} if role == "mask" else {"roi_atlas": path}
    what = "Mask" if role == "mask" else "ROI atlas"
    with pytest.raises(ValueError, match=rf"{what} .*{role}.nii.gz must .* truncated"):
        _run(run, tmp_path / "o.zarr", **kwargs)
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize(
    "section",
    [
        {},
        {"detrend_order": None, "standardize": False},
        {"high_pass": {"filter": "none"}},
        {"high_pass": {"filter": "butterworth", "cutoff_hz": 0.02}, "low_pass_hz": 0.1},
        {"high_pass": {"filter": "cosine"}, "low_pass_hz": 0.1},  # low-pass: Butterworth only
    ],
)
def test_cleaning_steps_are_the_records_of_the_cleaning(section):
    from neuroflow.preprocessing.fmri.stage import clean_time_series, cleaning_steps

    cfg = resolve_config(section)
    data = np.random.default_rng(0).standard_normal((120, 5))
    _, _, steps = clean_time_series(data, cfg, tr=2.0)
    assert steps == cleaning_steps(cfg)
    names = [s["name"] for s in steps]
    assert ("detrend" in names) == (cfg["detrend_order"] is not None)
    assert ("zscore" in names) == bool(cfg["standardize"])
    assert ("temporal_filter" in names) == (cfg["high_pass"]["filter"] != "none")
    low = [s["low_pass_hz"] for s in steps if s["name"] == "temporal_filter"]
    if cfg["high_pass"]["filter"] == "cosine":
        assert low == [None]


def test_smooth_image_keeps_grid_and_blocks_agree():
    from neuroflow.preprocessing.fmri.inputs import smooth_image

    rng = np.random.default_rng(1)
    raw = rng.standard_normal((6, 6, 6, 5)).astype(np.float32)
    affine = np.diag([2.0, 2.0, 2.0, 1.0])
    one = smooth_image(nib.Nifti1Image(raw.copy(), affine), 4.0, block=1)
    all_at_once = smooth_image(nib.Nifti1Image(raw.copy(), affine), 4.0, block=16)
    assert one.shape == raw.shape and np.allclose(one.affine, affine)
    assert one.dataobj.dtype == np.float32
    np.testing.assert_allclose(one.get_fdata(), all_at_once.get_fdata(), rtol=1e-6)
    assert not np.allclose(one.get_fdata(), raw)


def test_confounds_with_gaps_name_the_file_columns_and_rows(
    make_run, tmp_path, rng, fmriprep_confounds
):
    run = make_run(n=46)
    conf_path = tmp_path / "sub-01_task-movie_desc-confounds_timeseries.tsv"
    table = fmriprep_confounds(conf_path, 46, rng)
    # a gap in two motion columns (rows 8, 9 and 21 of the file, 1-based) and one in
    # a column the strategy does not select (std_dvars is always n/a in row 1)
    table.loc[[7, 8, 20], ["trans_x", "rot_z"]] = np.nan
    table.loc[30, "std_dvars"] = np.nan
    table.to_csv(conf_path, sep="\t", index=False, na_rep="n/a")
    with pytest.raises(
        ValueError,
        match=rf"Confounds file {conf_path}: column\(s\) \['rot_z', 'trans_x'\] must be "
        r"finite in every volume kept, got NaN or infinite values in 3 row\(s\) "
        r"\(8, 9, 21; row 1 is the first volume\) instead",
    ):
        _run(run, tmp_path / "o.zarr", {"drop_volumes": 0}, confounds=conf_path)
    assert not (tmp_path / "o.zarr").exists()
    # six gaps: the first five are listed, and the count
    table.loc[[2, 3, 4], "trans_x"] = np.nan
    table.to_csv(conf_path, sep="\t", index=False, na_rep="n/a")
    with pytest.raises(ValueError, match=r"in 6 row\(s\) \(3, 4, 5, 8, 9, \.\.\.; row 1"):
        _run(run, tmp_path / "o.zarr", {"drop_volumes": 0}, confounds=conf_path)
    # gaps only in volumes that are dropped are no error
    table = fmriprep_confounds(conf_path, 46, rng)
    table.loc[[1, 2], "trans_y"] = np.nan
    table.to_csv(conf_path, sep="\t", index=False, na_rep="n/a")
    ds = open_dataset(_run(run, tmp_path / "ok.zarr", {"drop_volumes": 3}, confounds=conf_path))
    assert np.isfinite(ds["bold"].values).all()

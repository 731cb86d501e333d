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
from neuroflow.export import (
    export_eeg_scores,
    export_features,
    export_results,
    export_score_maps,
)


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
            "model": "effnet__blocks.7",
            "feature_spaces": ["effnet:blocks.7"],
            "affine": np.diag([2.0, 2.0, 2.0, 1.0]).tolist(),
            "mask_shape": [4, 3, 5],
            "test_runs": ["sub-07_ses-1_task-movie_run-04"],
        },
    )
    prov = build_provenance(stage="evaluation/effnet__blocks.7", version=version, config={})
    return write_dataset(
        ds, folder / f"effnet__blocks.7-{version}" / "sub-07_scores.zarr", provenance=prov
    )


def test_score_maps_hold_the_store_values(rng: np.random.Generator, tmp_path: Path) -> None:
    store = _scores(rng, tmp_path / "results" / "evaluation", "abc")
    paths = export_score_maps(store, tmp_path / "out")
    names = [p.name for p in paths]
    assert names == [
        "sub-07_task-movie_model-effnet__blocks.7_stat-r_statmap.nii.gz",
        "sub-07_task-movie_model-effnet__blocks.7_stat-rnormalized_statmap.nii.gz",
        "sub-07_task-movie_model-effnet__blocks.7_stat-p_statmap.nii.gz",
        "sub-07_task-movie_model-effnet__blocks.7_desc-fdr_stat-r_statmap.nii.gz",
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
    assert sidecar["Model"] == "effnet__blocks.7" and sidecar["NeuroflowVersion"] == "abc"
    # relative to the results folder, so that it holds wherever the folder is moved
    assert sidecar["Sources"] == ["evaluation/effnet__blocks.7-abc/sub-07_scores.zarr"]
    # units, and a qform equal to the sform (native grid: scanner code 1)
    assert img.header.get_xyzt_units() == ("mm", "sec")
    assert int(img.header["qform_code"]) == int(img.header["sform_code"]) == 1
    np.testing.assert_allclose(img.get_qform(), img.get_sform())
    np.testing.assert_allclose(img.get_qform(), np.diag([2.0, 2.0, 2.0, 1.0]))


def test_two_versions_of_one_model_are_refused(rng: np.random.Generator, tmp_path: Path) -> None:
    results = tmp_path / "results" / "evaluation"
    first = _scores(rng, results, "v1")
    _scores(rng, results, "v2")
    with pytest.raises(ValueError, match=r"would be written from both .*export one version"):
        export_results([tmp_path / "results"], tmp_path / "out", kinds=["maps"])
    # refused before anything was written: no folder, no staging folder beside it
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]
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


def _features(rng: np.random.Generator, folder: Path, dims: tuple[str, str]) -> Path:
    values = rng.standard_normal((7, 3) if dims[0] == "stimulus" else (3, 7))
    ds = xr.Dataset(
        {"features": (dims, values)},
        coords={"stimulus": [f"img-{i}.png" for i in range(7)], "feature": np.arange(3)},
        attrs={"feature_set": "clip", "layer": "projection"},
    )
    prov = build_provenance(stage="features/clip", version="f1", config={})
    return write_dataset(ds, folder / "clip-f1" / "projection.zarr", provenance=prov)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_files_already_there_are_replaced_only_when_asked(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    _scores(rng, results / "evaluation", "v1")
    _features(rng, results / "features", ("stimulus", "feature"))
    out = tmp_path / "out"
    written = export_results([results], out)
    assert [len(written[k]) for k in ("maps", "epochs", "features", "summary")] == [4, 0, 2, 0]
    first = _tree(out)
    # 4 maps, 1 features array and the stimulus order, each map and array with a sidecar,
    # and the folder's dataset_description.json
    assert len(first) == 12 and "features/clip/projection_stimuli.tsv" in first
    assert "dataset_description.json" in first
    mine = out / "notes.txt"
    mine.write_text("mine")
    edited = out / "features" / "clip" / "projection.json"
    edited.write_text("{}")
    with pytest.raises(FileExistsError, match=r"already holds 11 of the 11 files .*--force"):
        export_results([results], out)
    assert edited.read_text() == "{}" and mine.read_text() == "mine"
    assert not list(tmp_path.glob(".out*"))  # no staging folder left behind
    export_results([results], out, overwrite=True)
    assert _tree(out) == {**first, "notes.txt": b"mine"}
    # a folder that holds none of the files takes the export beside what is there
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("keep")
    export_results([results], tmp_path / "other", kinds=["features"])
    assert sorted(_tree(tmp_path / "other")) == [
        "dataset_description.json",
        "features/clip/projection.json",
        "features/clip/projection.npy",
        "features/clip/projection_stimuli.tsv",
        "keep.txt",
    ]


def test_a_bad_store_is_refused_before_any_file_is_written(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    _scores(rng, results / "evaluation", "v1")  # exported first, and fine
    _features(rng, results / "features", ("feature", "stimulus"))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match=r"projection\.zarr: a feature store must have"):
        export_results([results], out)
    assert not any(out.iterdir()) and sorted(p.name for p in tmp_path.iterdir()) == [
        "out",
        "results",
    ]


def test_cli_refuses_an_output_that_is_a_file_or_holds_the_files(
    rng: np.random.Generator, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from neuroflow.cli import main

    store = _scores(rng, tmp_path / "results" / "evaluation", "v1")
    a_file = tmp_path / "maps.nii.gz"
    a_file.write_bytes(b"not a folder")
    assert main(["export", str(store), "-o", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert f"must be a new or existing folder, got the file {a_file} instead" in err
    assert "Traceback" not in err and a_file.read_bytes() == b"not a folder"
    out = tmp_path / "out"
    assert main(["export", str(store), "-o", str(out)]) == 0
    assert "maps: 4 files" in capsys.readouterr().out
    assert main(["export", str(store), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"neuroflow export: {out} already holds 8 of the 8 files" in err
    assert "sub-07/func/sub-07_task-movie_model-effnet__blocks.7_stat-r_statmap.nii.gz" in err
    assert main(["export", str(store), "-o", str(out), "--force"]) == 0


def test_epochs_export_writes_the_planned_files(rng: np.random.Generator, tmp_path: Path) -> None:
    import mne

    n_epochs, channels, n_times, sfreq = 9, ["Cz", "Pz", "Oz"], 13, 100.0
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), rng.normal(0, 1e-5, (9, 3, 13)))},
        coords={
            "channel": channels,
            "time": -0.02 + np.arange(n_times) / sfreq,
            "condition": ("epoch", ["face", "house", "face"] * 3),
            "onset": ("epoch", 1.0 + 0.7 * np.arange(n_epochs)),
        },
        attrs={"sfreq": sfreq, "entities": {"subject": "03", "task": "faces", "run": "2"}},
    )
    prov = build_provenance(stage="preprocess_eeg", version="e1", config={})
    results = tmp_path / "results" / "preprocess_eeg" / "e1"
    write_dataset(ds, results / "sub-03_task-faces_run-2_epo.zarr", provenance=prov)
    out = tmp_path / "out"
    written = export_results([tmp_path / "results"], out, kinds=["epochs"])
    stem = out / "sub-03" / "eeg" / "sub-03_task-faces_run-2_proc-clean"
    epo, ave = Path(f"{stem}_epo.fif"), Path(f"{stem}_ave.fif")
    assert written == {"epochs": [epo, ave]}
    assert {p.name for p in out.rglob("*") if p.is_file()} == {
        "dataset_description.json",
        epo.name,
        ave.name,
        epo.with_suffix(".json").name,
        ave.with_suffix(".json").name,
    }
    epochs = mne.read_epochs(epo, verbose="error")
    np.testing.assert_allclose(epochs.get_data(), ds["epochs"].values, rtol=1e-6, atol=1e-12)
    assert sorted(e.comment for e in mne.read_evokeds(ave, verbose="error")) == ["face", "house"]


def test_score_maps_keep_undefined_scores_undefined(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    store = _scores(rng, tmp_path / "results" / "evaluation", "abc")
    ds = xr.open_zarr(store).load()
    r = ds["r"].values.copy()
    r[:3] = np.nan  # e.g. constant test responses
    ds["r"][:] = r
    ds["r_normalized"][:] = r / 0.8
    ds["significant"][:] = np.where(np.isnan(r), False, ds["significant"].values)
    prov = build_provenance(stage="evaluation/effnet__blocks.7", version="nan", config={})
    nan_store = write_dataset(
        ds.drop_encoding(), tmp_path / "results" / "nan" / "sub-07_scores.zarr", provenance=prov
    )
    paths = export_score_maps(nan_store, tmp_path / "out")
    ijk = tuple(np.stack([ds[c].values for c in "ijk"], axis=1).T)
    for path in (paths[0], paths[1], paths[3]):  # r, r_normalized, FDR-thresholded r
        values = np.asarray(nib.load(path).dataobj)[ijk]
        assert np.isnan(values[:3]).all() and np.isfinite(values[3:]).all(), path.name


def test_score_maps_in_mni_space_get_the_mni_code(rng: np.random.Generator, tmp_path: Path) -> None:
    from neuroflow.export import nifti_space_code

    store = _scores(rng, tmp_path / "results" / "evaluation", "abc")
    ds = xr.open_zarr(store).load()
    ds.attrs["test_runs"] = ["sub-07_task-movie_run-04_space-MNI152NLin2009cAsym"]
    prov = build_provenance(stage="evaluation/effnet__blocks.7", version="mni", config={})
    mni = write_dataset(ds, tmp_path / "results" / "mni" / "sub-07_scores.zarr", provenance=prov)
    img = nib.load(export_score_maps(mni, tmp_path / "out")[0])
    assert int(img.header["qform_code"]) == int(img.header["sform_code"]) == 4
    assert img.header.get_xyzt_units() == ("mm", "sec")
    assert nifti_space_code({"space": "T1w"}) == 1
    assert nifti_space_code({"entities": {"space": "MNI152NLin6Asym"}}) == 4


def _epochs_store(
    rng: np.random.Generator, folder: Path, filters: dict | None, sfreq: float = 200.0
) -> Path:
    n_epochs, n_times = 7, 21
    attrs = {"sfreq": sfreq, "entities": {"subject": "02", "task": "faces", "run": "1"}}
    if filters is not None:
        attrs["filters"] = filters
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), rng.normal(0, 1e-5, (n_epochs, 4, n_times)))},
        coords={
            "channel": ["Fz", "Cz", "Pz", "Oz"],
            "time": -0.05 + np.arange(n_times) / sfreq,
            "condition": ("epoch", ["face", "house", "face", "car", "face", "house", "car"]),
            "onset": ("epoch", 2.0 + 0.9 * np.arange(n_epochs)),
        },
        attrs=attrs,
    )
    prov = build_provenance(stage="preprocess_eeg", version="e2", config={})
    return write_dataset(ds, folder / "sub-02_task-faces_run-1_epo.zarr", provenance=prov)


@pytest.mark.parametrize(
    ("filters", "band"),
    [
        ({"l_freq": 0.1, "h_freq": 40.0, "notch": [50.0]}, (0.1, 40.0)),
        # epoched input: no high-pass applied; no low-pass: the Nyquist frequency
        ({"l_freq": None, "h_freq": None, "notch": []}, (0.0, 100.0)),
    ],
)
def test_fif_files_keep_the_applied_pass_band(
    rng: np.random.Generator, tmp_path: Path, filters: dict, band: tuple[float, float]
) -> None:
    import mne

    store = _epochs_store(rng, tmp_path / "results" / "preprocess_eeg" / "e2", filters)
    epo, ave = export_results([store], tmp_path / "out", kinds=["epochs"])["epochs"]
    epochs = mne.read_epochs(epo, verbose="error")
    assert (epochs.info["highpass"], epochs.info["lowpass"]) == pytest.approx(band)
    for evoked in mne.read_evokeds(ave, verbose="error"):
        assert (evoked.info["highpass"], evoked.info["lowpass"]) == pytest.approx(band)


def test_filter_band_falls_back_to_the_provenance_config() -> None:
    from neuroflow.export import filter_band

    attrs = {"neuroflow": {"config": {"l_freq": 0.5, "h_freq": 300.0}}}
    # a low-pass above the Nyquist frequency of the stored data is capped there
    assert filter_band(attrs, 250.0) == (0.5, 125.0)
    assert filter_band({}, 100.0) == (0.0, 50.0)


def _eeg_scores(
    rng: np.random.Generator, folder: Path, latencies: np.ndarray, model: str = "visual"
) -> Path:
    channels = ["Fz", "Cz", "Pz", "O1", "O2"]
    shape = (len(channels), latencies.size)
    r = rng.uniform(-0.2, 0.5, shape)
    r[1, 2] = np.nan  # a constant channel at one latency
    ds = xr.Dataset(
        {
            "r": (("channel", "latency"), r, {"long_name": "test r", "units": "1"}),
            "p_value": (("channel", "latency"), rng.uniform(0, 1, shape), {"units": "1"}),
            "significant": (("channel", "latency"), r > 0.3),
            "r_course": (("latency",), np.nanmean(r, axis=0)),
        },
        coords={
            "channel": channels,
            "latency": ("latency", latencies, {"units": "s"}),
            "roi": ("channel", channels),
        },
        attrs={"subject": "04", "model": model, "feature_spaces": ["image_statistics"]},
    )
    prov = build_provenance(stage=f"eeg_evaluation/{model}", version="s1", config={})
    return write_dataset(ds, folder / f"{model}-s1" / "sub-04_scores.zarr", provenance=prov)


def test_eeg_scores_round_trip_as_evoked_and_tsv(rng: np.random.Generator, tmp_path: Path) -> None:
    import mne
    import pandas as pd

    results = tmp_path / "results"
    latencies = np.round(-0.1 + 0.02 * np.arange(17), 3)
    store = _eeg_scores(rng, results / "eeg_evaluation", latencies)
    written = export_results([results], tmp_path / "out")
    fif, tsv = written["eeg_scores"]
    assert fif.name == "sub-04_model-visual_stat-r_ave.fif"
    ds = xr.open_zarr(store).load()
    (evoked,) = mne.read_evokeds(fif, verbose="error")
    assert evoked.comment == "visual" and evoked.ch_names == list(ds["channel"].values)
    np.testing.assert_allclose(evoked.times, latencies, atol=1e-6)  # float32 in the file
    np.testing.assert_allclose(evoked.data, ds["r"].values, rtol=1e-6, equal_nan=True)
    table = pd.read_csv(tsv, sep="\t", na_values="n/a", keep_default_na=False)
    assert list(table.columns) == ["variable", "channel", "latency", "value"]
    # the (channel, latency) scores only: r_course (latency,) is not one of them
    assert sorted(table["variable"].unique()) == ["p_value", "r", "significant"]
    r = table[table["variable"] == "r"].pivot(index="channel", columns="latency", values="value")
    r = r.loc[list(ds["channel"].values), latencies]
    np.testing.assert_allclose(r.to_numpy(), ds["r"].values, equal_nan=True)
    sidecar = json.loads(tsv.with_suffix(".json").read_text())
    assert sidecar["Variables"]["r"] == {"Description": "test r", "Units": "1"}
    assert sidecar["Sources"] == ["eeg_evaluation/visual-s1/sub-04_scores.zarr"]


def test_eeg_scores_on_uneven_latencies_export_the_table_only(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    store = _eeg_scores(rng, tmp_path / "results" / "eeg_evaluation", np.array([0.0, 0.1, 0.3]))
    written = export_results([store], tmp_path / "out", kinds=["eeg_scores"])
    assert [p.name for p in written["eeg_scores"]] == ["sub-04_model-visual_scores.tsv"]
    fmri = _scores(rng, tmp_path / "results" / "evaluation", "v1")
    with pytest.raises(ValueError, match=r"sub-07_scores\.zarr: an EEG score store must have"):
        export_eeg_scores(fmri, tmp_path / "other")
    # a voxel-wise store holds no EEG scores: nothing of it is exported as such
    assert export_results([fmri], tmp_path / "other", kinds=["eeg_scores"])["eeg_scores"] == []


def test_decoding_and_rsa_results_as_tables(rng: np.random.Generator, tmp_path: Path) -> None:
    import pandas as pd

    from neuroflow.export import results_table

    times = np.round(np.linspace(-0.1, 0.4, 6), 3)
    score = rng.uniform(0.4, 0.8, (3, 6))
    ds = xr.Dataset(
        {
            "score": (("subject", "time"), score, {"long_name": "balanced accuracy"}),
            "cluster_p": (("time",), rng.uniform(0, 1, 6)),
            "n_epochs": ((), 41),
            "labels": (("subject",), np.array(["a", "b", "c"], dtype=object)),
        },
        coords={"subject": ["01", "02", "05"], "time": ("time", times, {"units": "s"})},
    )
    prov = build_provenance(stage="decoding", version="d3", config={})
    path = tmp_path / "results" / "decoding" / "d3" / "decoding.zarr"
    store = write_dataset(ds, path, provenance=prov)
    (path, sidecar) = export_results([tmp_path / "results"], tmp_path / "out")["tables"]
    assert path == tmp_path / "out" / "decoding" / "d3" / "decoding.tsv"
    table = pd.read_csv(
        path, sep="\t", na_values="n/a", keep_default_na=False, dtype={"subject": str}
    )
    assert table.columns[0] == "variable" and table.columns[-1] == "value"
    assert sorted(table.columns[1:-1]) == ["subject", "time"]
    got = table[table["variable"] == "score"].pivot(index="subject", columns="time", values="value")
    np.testing.assert_allclose(got.loc[["01", "02", "05"], times].to_numpy(), score)
    assert table.loc[table["variable"] == "n_epochs", "value"].tolist() == [41]
    assert table.loc[table["variable"] == "cluster_p", "subject"].isna().all()
    about = json.loads(sidecar.read_text())
    assert about["SkippedVariables"] == ["labels"]
    assert about["Variables"]["score"]["Description"] == "balanced accuracy"
    assert about["NeuroflowVersion"] == "d3"
    only_time, _ = results_table(xr.open_zarr(store), ("time",))
    assert only_time["variable"].unique().tolist() == ["cluster_p"]


def test_export_folder_is_a_bids_derivative_naming_its_stages(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    import neuroflow

    results = tmp_path / "results"
    _scores(rng, results / "evaluation", "v1")
    _features(rng, results / "features", ("stimulus", "feature"))
    out = tmp_path / "out"
    export_results([results], out, kinds=["maps"])
    description = json.loads((out / "dataset_description.json").read_text())
    assert description["DatasetType"] == "derivative" and description["BIDSVersion"]
    (generated,) = description["GeneratedBy"]
    assert generated["Name"] == "neuroflow" and generated["Version"] == neuroflow.__version__
    assert generated["Stages"] == [
        {"Stage": "evaluation/effnet__blocks.7", "Version": "v1", "FormatVersion": 1}
    ]
    # a second export into the folder adds its stages (not a clash with the first)
    export_results([results], out, kinds=["features"])
    stages = json.loads((out / "dataset_description.json").read_text())["GeneratedBy"][0]
    assert [s["Stage"] for s in stages["Stages"]] == [
        "evaluation/effnet__blocks.7",
        "features/clip",
    ]
    # a description that neuroflow did not write is never replaced without --force
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "dataset_description.json").write_text('{"Name": "mine"}')
    with pytest.raises(FileExistsError, match=r"already holds 1 of the 4 files .*dataset_desc"):
        export_results([results], tmp_path / "theirs", kinds=["features"])


def test_sources_are_relative_to_the_results_folder() -> None:
    from neuroflow.export import results_relative

    store = Path("/data/study/results/evaluation/visual-abc/sub-01_scores.zarr")
    assert (
        results_relative(store, "evaluation/visual") == "evaluation/visual-abc/sub-01_scores.zarr"
    )
    # a results folder inside a folder named like a stage: the innermost one counts
    nested = Path("/evaluation/results/evaluation/m-1/s.zarr")
    assert results_relative(nested, "evaluation/m") == "evaluation/m-1/s.zarr"
    assert results_relative(Path("/elsewhere/s.zarr"), "evaluation/m") == "/elsewhere/s.zarr"

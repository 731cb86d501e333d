"""Parcel / vertex time series (``dataset.source: timeseries``) to (time, voxel) stores."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

from neuroflow.artifacts import open_dataset
from neuroflow.io.bids import read_sidecar
from neuroflow.io.timeseries import index_timeseries_runs, timeseries_length
from neuroflow.preprocessing.fmri import preprocess_fmri_run, preprocess_timeseries_run
from neuroflow.preprocessing.fmri.clean import clean_signals, cleaning_basis
from neuroflow.preprocessing.fmri.single_trial import estimate_single_trials

PROV = {"stage": "preprocess_fmri", "version": "test"}
EVENTS = "onset\tduration\ttrial_type\tstim_file\n0\t2\tface\ta.png\n10\t2\tn/a\tb.png\n"


def _write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _npy(path: Path, data: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, data)
    return path


def _h5(path: Path, datasets: dict[str, np.ndarray], **file_attrs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        for name, data in datasets.items():
            f.create_dataset(name, data=data)
        f.attrs.update(file_attrs)
    return path


def _tsv(path: Path, data: np.ndarray, names: list[str], newline: str = "\n") -> Path:
    rows = ["\t".join(names)] + ["\t".join(f"{v:.9g}" for v in row) for row in data]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((newline.join(rows) + newline).encode())
    return path


@pytest.fixture
def dataset(tmp_path, rng):
    """sub-01 with sessions (npy, tsv, h5 per run), sub-02 with an Algonauts container."""
    root = tmp_path / "ts"
    _write(root / "dataset_description.json", '{"Name": "ts", "BIDSVersion": "1.9.0"}')
    _write(root / "task-movie_bold.json", json.dumps({"RepetitionTime": 1.5}))
    for ses in ("01", "02"):
        func = root / "sub-01" / f"ses-{ses}" / "func"
        stem = f"sub-01_ses-{ses}_task-movie"
        _npy(func / f"{stem}_run-1_timeseries.npy", rng.standard_normal((31, 7)))
        _tsv(
            func / f"{stem}_run-2_timeseries.tsv",
            rng.standard_normal((29, 3)),
            ["V1", "V2", "MT"],
        )
        _write(func / f"{stem}_run-1_events.tsv", EVENTS)
    _h5(
        root / "sub-01" / "ses-02" / "func" / "sub-01_ses-02_task-rest_run-03_timeseries.h5",
        {"data": rng.standard_normal((20, 5))},
    )
    _write(
        root / "sub-01" / "ses-02" / "func" / "sub-01_ses-02_task-movie_run-2_timeseries.json",
        json.dumps({"RepetitionTime": 1.49}),
    )
    func = root / "sub-02" / "func"
    _h5(
        func / "sub-02_task-friends_atlas-schaefer_timeseries.h5",
        {
            "ses-001_task-s01e02a": rng.standard_normal((40, 6)),
            "ses-001_task-s01e02b": rng.standard_normal((35, 6)),
            "ses-002_task-s01e03a": rng.standard_normal((33, 6)),
            "ses-002_task-s01e02a": rng.standard_normal((37, 6)),
        },
    )
    _write(func / "sub-02_ses-001_task-s01e02a_events.tsv", EVENTS)
    _write(func / "sub-02_ses-002_task-s01e02a_events.tsv", EVENTS)  # other session
    _write(root / "sub-02" / "sub-02_timeseries.json", json.dumps({"RepetitionTime": 1.49}))
    return root


def test_index_per_run_files_and_inheritance(dataset):
    runs = index_timeseries_runs(dataset, subjects=["01"])
    assert [r.key for r in runs] == [
        "sub-01_ses-01_task-movie_run-1",
        "sub-01_ses-01_task-movie_run-2",
        "sub-01_ses-02_task-movie_run-1",
        "sub-01_ses-02_task-movie_run-2",
        "sub-01_ses-02_task-rest_run-03",
    ]
    assert {r.kind for r in runs} == {"timeseries"}
    assert {r.container_key for r in runs} == {None}
    assert [r.bold.suffix for r in runs] == [".npy", ".tsv", ".npy", ".tsv", ".h5"]
    assert runs[0].events.name == "sub-01_ses-01_task-movie_run-1_events.tsv"
    assert runs[1].events is None
    assert [p.name for p in runs[0].sidecars] == ["task-movie_bold.json"]
    # the run's own _timeseries.json is more specific than the dataset's _bold.json
    assert [p.name for p in runs[3].sidecars] == [
        "task-movie_bold.json",
        "sub-01_ses-02_task-movie_run-2_timeseries.json",
    ]
    assert read_sidecar(runs[3])["RepetitionTime"] == 1.49
    assert runs[4].sidecars == ()


def test_index_containers(dataset, rng):
    root = dataset
    func = root / "sub-03" / "func"
    _h5(
        func / "sub-03_task-movie_timeseries.h5",
        {"run-1": rng.standard_normal((9, 4)), "run-2": rng.standard_normal((9, 4))},
    )
    runs = index_timeseries_runs(root, subjects=["02", "03"])
    assert [r.key for r in runs] == [
        "sub-02_ses-001_task-s01e02a",
        "sub-02_ses-001_task-s01e02b",
        "sub-02_ses-002_task-s01e02a",
        "sub-02_ses-002_task-s01e03a",
        "sub-03_task-movie_run-1",
        "sub-03_task-movie_run-2",
    ]
    first = runs[0]
    assert first.container_key == "ses-001_task-s01e02a"
    assert first.bold.name == "sub-02_task-friends_atlas-schaefer_timeseries.h5"
    assert (first.session, first.task, first.run) == ("001", "s01e02a", None)
    # events of the run's own session only, found in the file's func/ folder
    assert first.events.name == "sub-02_ses-001_task-s01e02a_events.tsv"
    assert runs[2].events.name == "sub-02_ses-002_task-s01e02a_events.tsv"
    assert runs[1].events is None and runs[3].events is None
    assert [p.name for p in first.sidecars] == ["sub-02_timeseries.json"]
    assert [r.container_key for r in runs[4:]] == ["run-1", "run-2"]


def test_index_filters_strict_and_seen(dataset):
    assert [r.key for r in index_timeseries_runs(dataset, sessions=["1"], tasks=["s01e02b"])] == [
        "sub-02_ses-001_task-s01e02b"
    ]
    assert len(index_timeseries_runs(dataset, runs=["3"])) == 1  # run-03 as an integer
    with pytest.raises(ValueError, match=r"No task 's01e02c'.*Did you mean 's01e02b', 's01e02a'"):
        index_timeseries_runs(dataset, tasks=["s01e02c"])
    with pytest.raises(ValueError, match=r"No subject '04'"):
        index_timeseries_runs(dataset, subjects=["04"])
    with pytest.raises(ValueError, match=r"`tasks` must hold labels without their prefix"):
        index_timeseries_runs(dataset, tasks=["task-movie"])
    seen: dict[str, set[str]] = {}
    assert index_timeseries_runs(dataset, tasks=["nope"], strict=False, seen=seen) == []
    assert seen["task"] == {"movie", "rest", "s01e02a", "s01e02b", "s01e03a"}
    assert seen["ses"] == {"01", "02", "001", "002"}
    assert index_timeseries_runs(dataset, subjects=["04"], strict=False) == []
    empty = dataset.parent / "empty"
    (empty / "sub-01" / "func").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"No time-series runs found"):
        index_timeseries_runs(empty)
    with pytest.raises(FileNotFoundError, match=r"`root` must be an existing folder"):
        index_timeseries_runs(dataset / "missing")


def test_index_errors(tmp_path, rng):
    func = tmp_path / "sub-01" / "func"
    bad = _h5(
        func / "sub-01_task-a_run-1_timeseries.h5",
        {"x": rng.standard_normal((5, 2)), "y": rng.standard_normal((5, 2))},
    )
    with pytest.raises(ValueError, match=r"must hold exactly one 2-D.*got 2"):
        index_timeseries_runs(tmp_path)
    bad.unlink()
    bad = _h5(
        func / "sub-01_task-a_timeseries.h5",
        {"x": rng.standard_normal((5, 2)), "y": rng.standard_normal((5, 2, 2))},
    )
    _h5(func / "sub-01_task-b_timeseries.h5", {"y": rng.standard_normal(5)})
    with pytest.raises(ValueError, match=r"sub-01_task-b_timeseries.h5 holds no run dataset"):
        index_timeseries_runs(tmp_path)
    (func / "sub-01_task-b_timeseries.h5").unlink()
    _h5(func / "sub-01_task-c_timeseries.h5", {"sub-02_run-1": rng.standard_normal((5, 2))})
    with pytest.raises(ValueError, match=r"must belong to the file's sub-01, got sub-02"):
        index_timeseries_runs(tmp_path)
    (func / "sub-01_task-c_timeseries.h5").unlink()
    _npy(func / "sub-01_task-a_timeseries.npy", rng.standard_normal((5, 2)))
    with pytest.raises(ValueError, match=r"Several time-series files.*sub-01_task-a"):
        index_timeseries_runs(tmp_path)
    # fMRIPrep confounds tables are not data
    (func / "sub-01_task-a_timeseries.npy").unlink()
    _write(func / "sub-01_task-a_desc-confounds_timeseries.tsv", "a\n1\n")
    assert [r.key for r in index_timeseries_runs(tmp_path)] == ["sub-01_task-a"]


def _container(root: Path, rng: np.random.Generator, shapes: dict[str, tuple]) -> Path:
    """sub-01's container of runs ``task-movie_run-<r>`` with one events file per run."""
    func = root / "sub-01" / "func"
    path = _h5(
        func / "sub-01_task-movie_desc-parcels_timeseries.h5",
        {name: rng.standard_normal(shape) for name, shape in shapes.items()},
    )
    for run in ("1", "2", "3"):
        _write(func / f"sub-01_task-movie_run-{run}_events.tsv", EVENTS)
    return path


def test_container_run_that_is_not_2d_is_refused(tmp_path, rng):
    path = _container(
        tmp_path,
        rng,
        {"task-movie_run-1": (23, 5), "task-movie_run-2": (23, 5), "task-movie_run-3": (23, 5, 2)},
    )
    with pytest.raises(
        ValueError,
        match=rf"Dataset 'task-movie_run-3' of time-series file {path} must be a 2-D "
        r"\(time, target\) array, got shape \(23, 5, 2\) instead.*`dataset.runs`",
    ):
        index_timeseries_runs(tmp_path)
    # a 1-D run too; leaving the run out with a filter is the way to go on without it
    _h5(path, {"task-movie_run-1": rng.standard_normal((23, 5)), "task-movie_run-3": np.ones(23)})
    (path.parent / "sub-01_task-movie_run-2_events.tsv").unlink()
    with pytest.raises(ValueError, match=r"'task-movie_run-3'.*got shape \(23,\) instead"):
        index_timeseries_runs(tmp_path)
    runs = index_timeseries_runs(tmp_path, runs=["1"])
    assert [(r.key, r.container_key) for r in runs] == [
        ("sub-01_task-movie_run-1", "task-movie_run-1")
    ]
    # only datasets named like runs are runs: other arrays of any shape stay allowed
    _h5(path, {"task-movie_run-1": rng.standard_normal((23, 5)), "labels": np.ones((2, 2, 2))})
    (path.parent / "sub-01_task-movie_run-3_events.tsv").unlink()
    assert [r.key for r in index_timeseries_runs(tmp_path)] == ["sub-01_task-movie_run-1"]


def test_container_missing_a_run_with_events_is_refused(tmp_path, rng):
    path = _container(tmp_path, rng, {"task-movie_run-1": (23, 5), "task-movie_run-2": (19, 5)})
    events = path.parent / "sub-01_task-movie_run-3_events.tsv"
    with pytest.raises(
        ValueError,
        match=rf"Events file {events} belongs to no time-series run: the time-series file "
        rf"{path} must hold its run as a 2-D \(time, target\) dataset named by the run's "
        r"entities \('task-movie_run-3'\), got datasets 'task-movie_run-1', "
        r"'task-movie_run-2' instead\. .*`dataset.runs`",
    ):
        index_timeseries_runs(tmp_path, strict=False)
    # leaving the run out (or its task) is no error, and nothing else is dropped
    runs = index_timeseries_runs(tmp_path, runs=["1", "2"])
    assert [r.events.name for r in runs] == [
        "sub-01_task-movie_run-1_events.tsv",
        "sub-01_task-movie_run-2_events.tsv",
    ]
    assert index_timeseries_runs(tmp_path, tasks=["rest"], strict=False) == []
    # an events file of another subject's folder is that subject's business
    _h5(tmp_path / "sub-02" / "func" / "sub-02_task-movie_timeseries.h5",
        {"task-movie_run-1": rng.standard_normal((9, 4))})  # fmt: skip
    with pytest.raises(ValueError, match=r"sub-01_task-movie_run-3_events.tsv belongs to no"):
        index_timeseries_runs(tmp_path)
    assert len(index_timeseries_runs(tmp_path, subjects=["02"])) == 1


def test_container_events_of_a_session_without_its_run_are_refused(dataset):
    func = dataset / "sub-02" / "func"
    orphan = _write(func / "sub-02_ses-002_task-s01e02b_events.tsv", EVENTS)
    with pytest.raises(
        ValueError,
        match=rf"Events file {orphan} belongs to no.*\('ses-002_task-s01e02b'\)",
    ):
        index_timeseries_runs(dataset, subjects=["02"])
    # task-level events apply to every run of the task: no orphan
    orphan.unlink()
    _write(func / "sub-02_task-s01e02b_events.tsv", EVENTS)
    keys = [r.key for r in index_timeseries_runs(dataset, subjects=["02"])]
    assert "sub-02_ses-001_task-s01e02b" in keys


def _reference_store(make_run, tmp_path, config):
    run = make_run(shape=(5, 6, 4), n=40, tr=2.0)
    out = preprocess_fmri_run(
        bold=run["bold"],
        events=run["events"],
        sidecars=run["sidecars"],
        output=tmp_path / "bold.zarr",
        config={**config, "mask": {"source": "none"}},
        provenance=PROV,
    )
    return run, open_dataset(out)


def test_store_layout_matches_a_bold_run(make_run, tmp_path, rng):
    config = {"drop_volumes": 2}
    run, ref = _reference_store(make_run, tmp_path, config)
    root = tmp_path / "ts"
    _write(root / "dataset_description.json", "{}")
    _write(root / "parcels.tsv", "index\tname\r\n3\tV1\r\n1\tV2\r\n2\tMT\r\n")
    path = _npy(
        root / "sub-01" / "func" / "sub-01_task-movie_run-1_timeseries.npy",
        rng.standard_normal((40, 3)),
    )
    out = preprocess_timeseries_run(
        timeseries=path,
        output=tmp_path / "ts.zarr",
        config=config,
        provenance=PROV,
        events=run["events"],
        sidecars=run["sidecars"],
    )
    ds = open_dataset(out)
    assert set(ds.data_vars) == set(ref.data_vars)
    for name in ds.data_vars:
        assert ds[name].dims == ref[name].dims, name
        assert ds[name].dtype == ref[name].dtype, name
        assert ds[name].attrs == ref[name].attrs, name
    assert set(ds.coords) == set(ref.coords) - set("ijkxyz")
    for name in ds.coords:
        assert ds[name].dims == ref[name].dims, name
    assert ds["bold"].dtype == np.float32
    assert ds.sizes["voxel"] == 3 and ds.sizes["time"] == 38
    np.testing.assert_array_equal(ds["time"].values, ref["time"].values)
    assert ds["time"].attrs["units"] == "s"
    assert list(ds["roi"].values) == ["V1", "V2", "MT"]
    for name in ("event_onset", "trial_type", "stim_file", "event_response_time"):
        np.testing.assert_array_equal(ds[name].values, ref[name].values)
    assert set(ds.attrs) == (set(ref.attrs) - {"affine", "mask_shape"}) | {"target_kind"}
    assert ds.attrs["target_kind"] == "parcel"
    assert ds.attrs["tr"] == 2.0 and ds.attrs["n_volumes_acquired"] == 40
    assert ds.attrs["entities"] == ref.attrs["entities"]
    ref_steps = [s for s in ref.attrs["steps"] if s["name"] != "mask"]
    assert [s["name"] for s in ds.attrs["steps"]] == [s["name"] for s in ref_steps]
    assert ds.attrs["steps"][0] == {"name": "drop_volumes", "n": 2, "source": "config"}
    assert ds.attrs["steps"][1:] == ref_steps[1:]
    assert ds.attrs["source_file"] == str(path)
    assert "container_key" not in ds.attrs


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"drop_volumes": 3, "detrend_order": 2, "high_pass": {"cutoff_hz": 0.02}},
        {"high_pass": {"filter": "butterworth", "cutoff_hz": 0.02}, "low_pass_hz": 0.15},
        {"high_pass": {"filter": "none"}, "detrend_order": None, "standardize": False},
    ],
)
def test_cleaning_equals_clean_signals(tmp_path, rng, config):
    raw = rng.standard_normal((47, 9)) * 3 + 100 + np.linspace(0, 5, 47)[:, None]
    path = _npy(tmp_path / "sub-01_task-a_timeseries.npy", raw)
    out = preprocess_timeseries_run(
        timeseries=path,
        output=tmp_path / "out.zarr",
        config=config,
        provenance=PROV,
        repetition_time=1.3,
    )
    ds = open_dataset(out)
    n_drop = config.get("drop_volumes", 0)
    high = config.get("high_pass", {})
    filt = high.get("filter", "cosine")
    cleaning = {
        "t_r": 1.3,
        "detrend_order": config.get("detrend_order", 1),
        "filter": None if filt == "none" else filt,
        "high_pass": None if filt == "none" else high.get("cutoff_hz", 0.01),
        "low_pass": config.get("low_pass_hz"),
        "standardize": config.get("standardize", True),
    }
    expected = clean_signals(raw.astype(np.float32)[n_drop:], **cleaning)
    np.testing.assert_allclose(ds["bold"].values, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ds["time"].values, np.arange(n_drop, 47) * 1.3)
    basis = cleaning_basis(47 - n_drop, **cleaning)
    if basis is None:
        assert "nuisance_basis" not in ds
    else:
        np.testing.assert_allclose(ds["nuisance_basis"].values, basis, atol=1e-6)
    assert ds["bold"].attrs["units"] == ("z" if cleaning["standardize"] else "a.u.")
    assert list(ds["roi"].values) == [f"target-{t:04d}" for t in range(1, 10)]


def test_formats_target_names_and_containers(tmp_path, rng):
    data = rng.standard_normal((12, 4))
    sidecar = _write(tmp_path / "task-a_bold.json", json.dumps({"RepetitionTime": 0.8}))

    def run(path, **kwargs):
        out = tmp_path / f"{path.stem}-{kwargs.get('container_key', '')}.zarr"
        raw = {"detrend_order": None, "high_pass": {"filter": "none"}, "standardize": False}
        return open_dataset(
            preprocess_timeseries_run(
                timeseries=path,
                output=out,
                config=raw,
                provenance=PROV,
                sidecars=[sidecar],
                **kwargs,
            )
        )

    # TSV with CRLF line ends: the header names the targets
    tsv = _tsv(tmp_path / "sub-01_task-a_timeseries.tsv", data, ["a", "b", "c", "d"], "\r\n")
    ds = run(tsv)
    assert list(ds["roi"].values) == ["a", "b", "c", "d"]
    np.testing.assert_allclose(ds["bold"].values, data, rtol=1e-6)
    assert ds.attrs["tr"] == 0.8
    # one 2-D dataset, names on the dataset (bytes) win over the file's
    h5 = _h5(tmp_path / "sub-01_task-a_run-1_timeseries.h5", {"grp/ts": data.astype(np.float32)})
    with h5py.File(h5, "a") as f:
        f["grp/ts"].attrs["target_names"] = np.array([b"p1", b"p2", b"p3", b"p4"])
        f.attrs["target_names"] = ["f1", "f2", "f3", "f4"]
    ds = run(h5)
    assert list(ds["roi"].values) == ["p1", "p2", "p3", "p4"]
    np.testing.assert_array_equal(ds["bold"].values, data.astype(np.float32))
    # container: the run's entities update the file's; names from the file attribute
    container = _h5(
        tmp_path / "sub-01_task-friends_timeseries.h5",
        {"ses-001_task-s01e02a": data[:, :3], "ses-001_task-s01e02b": data[:10]},
        target_names=["x", "y", "z"],
    )
    ds = run(container, container_key="ses-001_task-s01e02a")
    assert list(ds["roi"].values) == ["x", "y", "z"]
    np.testing.assert_allclose(ds["bold"].values, data[:, :3], rtol=1e-6)
    assert ds.attrs["entities"] == {"subject": "01", "task": "s01e02a", "session": "001"}
    assert ds.attrs["container_key"] == "ses-001_task-s01e02a"
    assert ds.attrs["source_file"] == str(container)


@pytest.mark.filterwarnings("ignore:No cosine regressor:UserWarning")
def test_repetition_time(tmp_path, rng):
    path = _npy(tmp_path / "sub-01_task-a_timeseries.npy", rng.standard_normal((10, 2)))
    sidecar = _write(tmp_path / "task-a_bold.json", json.dumps({"RepetitionTime": 1.5}))

    def run(**kwargs):
        out = preprocess_timeseries_run(
            timeseries=path, output=tmp_path / "o.zarr", config={}, provenance=PROV, **kwargs
        )
        return open_dataset(out).attrs["tr"]

    assert run(sidecars=[sidecar]) == 1.5
    assert run(sidecars=[sidecar], repetition_time=1.5004) == 1.5004  # explicit wins
    assert run(repetition_time=2) == 2.0
    with pytest.raises(
        ValueError, match=r"`dataset.repetition_time` is 1.6 s but.*task-a_bold.json.*1.5"
    ):
        run(sidecars=[sidecar], repetition_time=1.6)
    with pytest.raises(ValueError, match=r"No repetition time for .*timeseries.npy"):
        run()
    with pytest.raises(ValueError, match=r"`dataset.repetition_time` must be a positive number"):
        run(repetition_time=-1.0)
    bad = _write(tmp_path / "bad_bold.json", json.dumps({"RepetitionTime": "2"}))
    with pytest.raises(ValueError, match=r"RepetitionTime in the sidecars.*positive number"):
        run(sidecars=[bad])


@pytest.mark.filterwarnings("ignore:No cosine regressor:UserWarning")
def test_ignored_settings_are_logged(tmp_path, rng, caplog):
    path = _npy(tmp_path / "sub-01_task-a_timeseries.npy", rng.standard_normal((10, 2)))
    with caplog.at_level(logging.WARNING, logger="neuroflow.preprocessing.fmri.timeseries"):
        preprocess_timeseries_run(
            timeseries=path,
            output=tmp_path / "o.zarr",
            config={"smoothing_fwhm": 4.0, "mask": {"source": "none"}, "drop_volumes": "auto"},
            provenance=PROV,
            repetition_time=1.0,
        )
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "mask, smoothing_fwhm do not apply to time series" in lines[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="neuroflow.preprocessing.fmri.timeseries"):
        preprocess_timeseries_run(
            timeseries=path,
            output=tmp_path / "o2.zarr",
            config={},
            provenance=PROV,
            repetition_time=1.0,
        )
    assert not caplog.records


def test_errors(tmp_path, rng):
    def run(path, **kwargs):
        args = {"config": {}, "provenance": PROV, "repetition_time": 1.0}
        args.update(kwargs)
        return preprocess_timeseries_run(timeseries=path, output=tmp_path / "o.zarr", **args)

    good = rng.standard_normal((10, 3))
    with pytest.raises(FileNotFoundError, match=r"Time-series file .*missing.npy does not exist"):
        run(tmp_path / "missing.npy")
    path = _npy(tmp_path / "a_timeseries.npy", rng.standard_normal((10, 3, 2)))
    with pytest.raises(ValueError, match=r"must hold a 2-D \(time, target\) array, got shape"):
        run(path)
    nan = good.copy()
    nan[[1, 4], [0, 2]] = np.nan
    nan[7, 1] = np.inf
    path = _npy(tmp_path / "b_timeseries.npy", nan)
    with pytest.raises(ValueError, match=r"b_timeseries.npy has 3 NaN or infinite value\(s\)"):
        run(path)
    path = _npy(tmp_path / "c_timeseries.npy", good[:2])
    with pytest.raises(ValueError, match=r"at least 3 time points, got 2"):
        run(path)
    path = _npy(tmp_path / "d_timeseries.npy", good)
    with pytest.raises(ValueError, match=r"Dropping 8 volumes leaves fewer than 3 of the 10"):
        run(path, config={"drop_volumes": 8})
    events = _write(tmp_path / "e_events.tsv", "onset\tduration\n3\t1\n12\t1\n")
    with pytest.raises(ValueError, match=r"onset 12.0 s \(row 2\) is past the end of the run"):
        run(path, events=events)
    with pytest.raises(ValueError, match=r"`container_key` only applies to HDF5 files"):
        run(path, container_key="run-1")
    # TSV: n/a cells are missing values (an error), text is not a number
    tsv = _write(tmp_path / "f_timeseries.tsv", "a\tb\n1\t2\nn/a\t3\n4\t5\n6\t7\n")
    with pytest.raises(ValueError, match=r"f_timeseries.tsv has 1 NaN or infinite value"):
        run(tsv)
    tsv = _write(tmp_path / "g_timeseries.tsv", "a\tb\n1\t2\nx\t3\n4\t5\n")
    with pytest.raises(ValueError, match=r"column 'a' must be numeric, got 'x' in row 2"):
        run(tsv)
    # HDF5: the dataset to read, and names of the right length
    h5 = _h5(tmp_path / "h_timeseries.h5", {"run-1": good, "run-2": good})
    with pytest.raises(ValueError, match=r"has no dataset 'run-3' \(datasets: 'run-1', 'run-2'\)"):
        run(h5, container_key="run-3")
    with pytest.raises(ValueError, match=r"exactly one 2-D \(time, target\) dataset, got 2"):
        run(h5)
    with h5py.File(h5, "a") as f:
        f["run-1"].attrs["target_names"] = ["a", "b"]
    with pytest.raises(ValueError, match=r"dataset 'run-1'\) must have one name per target \(3\)"):
        run(h5, container_key="run-1")
    nan_h5 = _h5(tmp_path / "i_timeseries.h5", {"run-1": nan})
    with pytest.raises(ValueError, match=r"i_timeseries.h5 \(dataset 'run-1'\) has 3 NaN"):
        run(nan_h5, container_key="run-1")
    # parcels.tsv with the wrong number of rows
    root = tmp_path / "ds"
    _write(root / "dataset_description.json", "{}")
    _write(root / "parcels.tsv", "index\tname\n1\tV1\n2\tV2\n")
    path = _npy(root / "sub-01" / "func" / "sub-01_task-a_timeseries.npy", good)
    with pytest.raises(
        ValueError, match=r"parcels.tsv must have one row per target .*\(3\), got 2"
    ):
        run(path)
    with pytest.raises(ValueError, match=r"must be a .h5, .npy or .tsv file"):
        run(_write(tmp_path / "j_timeseries.csv", "a\n"))
    assert not (tmp_path / "o.zarr").exists()


def test_single_trial_estimates_run_on_timeseries_stores(tmp_path, rng):
    """Downstream stages read time-series stores as they read BOLD stores."""
    stores = []
    for run in (1, 2):
        onsets = np.arange(4.0, 100.0, 12.0)
        events = pd.DataFrame(
            {
                "onset": onsets,
                "duration": 1.0,
                "trial_type": "img",
                "stim_file": [f"s{t % 4}.png" for t in range(len(onsets))],
            }
        )
        ev = tmp_path / f"sub-01_task-a_run-{run}_events.tsv"
        events.to_csv(ev, sep="\t", index=False)
        path = _npy(tmp_path / f"sub-01_task-a_run-{run}_timeseries.npy", rng.normal(size=(60, 5)))
        stores.append(
            preprocess_timeseries_run(
                timeseries=path,
                output=tmp_path / f"run-{run}.zarr",
                config={},
                provenance=PROV,
                events=ev,
                repetition_time=2.0,
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = estimate_single_trials(
            runs=stores, output=tmp_path / "betas.zarr", config={}, provenance=PROV
        )
    ds = open_dataset(out)
    assert ds["betas"].shape == (16, 5)
    assert list(ds["roi"].values) == [f"target-{t:04d}" for t in range(1, 6)]
    assert np.isfinite(ds["betas"].values).all()


def test_timeseries_length_reads_shapes_only(tmp_path, rng):
    func = tmp_path / "sub-01" / "func"
    h5 = _h5(
        func / "sub-01_task-a_timeseries.h5",
        {
            "task-a_run-1": rng.standard_normal((23, 4)),
            "task-a_run-2": rng.standard_normal((31, 4)),
        },
    )
    single = _h5(func / "sub-01_task-b_run-1_timeseries.h5", {"x": rng.standard_normal((17, 3))})
    npy = _npy(func / "sub-01_task-c_run-1_timeseries.npy", rng.standard_normal((29, 2)))
    tsv = _tsv(
        func / "sub-01_task-d_run-1_timeseries.tsv",
        rng.standard_normal((13, 2)),
        ["a", "b"],
        "\r\n",
    )
    assert timeseries_length(h5, "task-a_run-2") == 31
    assert timeseries_length(single) == 17
    assert timeseries_length(npy) == 29
    assert timeseries_length(tsv) == 13
    with pytest.raises(ValueError, match=r"has no dataset 'task-a_run-3'"):
        timeseries_length(h5, "task-a_run-3")

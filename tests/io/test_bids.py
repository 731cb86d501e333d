"""Glob-free BIDS indexing of fMRI runs, fMRIPrep derivatives and EEG recordings."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from neuroflow.io.bids import index_fmri_runs, parse_bids_name, read_sidecar
from neuroflow.io.bids_eeg import index_eeg_recordings

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def raw(tmp_path):
    """sub-01 (ses-01, ses-02), sub-02 (ses-01 only), two runs each, sidecars at 3 levels."""
    root = tmp_path / "bids"
    _touch(root / "dataset_description.json", '{"Name": "x", "BIDSVersion": "1.8.0"}')
    _touch(root / "task-movie_bold.json", json.dumps({"RepetitionTime": 2.0, "TaskName": "movie"}))
    _touch(root / "sub-01" / "sub-01_task-movie_bold.json", json.dumps({"EchoTime": 0.03}))
    for sub, sessions in (("01", ("01", "02")), ("02", ("01",))):
        for ses in sessions:
            func = root / f"sub-{sub}" / f"ses-{ses}" / "func"
            for run in ("01", "02"):
                stem = f"sub-{sub}_ses-{ses}_task-movie_run-{run}"
                _touch(func / f"{stem}_bold.nii.gz")
                _touch(func / f"{stem}_events.tsv", "onset\tduration\n")
            _touch(
                func / f"sub-{sub}_ses-{ses}_task-movie_run-02_bold.json",
                json.dumps({"RepetitionTime": 1.5}),
            )
    return root


def test_parse_bids_name():
    assert parse_bids_name("sub-01_ses-a_task-rest_run-1_bold.nii.gz") == (
        {"sub": "01", "ses": "a", "task": "rest", "run": "1"},
        "bold",
        ".nii.gz",
    )
    assert parse_bids_name("README") == ({}, "README", "")
    assert parse_bids_name("not a bids name.txt") is None


def test_raw_index_missing_session_and_inheritance(raw):
    runs = index_fmri_runs(raw)
    assert [r.key for r in runs] == [
        "sub-01_ses-01_task-movie_run-01",
        "sub-01_ses-01_task-movie_run-02",
        "sub-01_ses-02_task-movie_run-01",
        "sub-01_ses-02_task-movie_run-02",
        "sub-02_ses-01_task-movie_run-01",
        "sub-02_ses-01_task-movie_run-02",
    ]
    first, second = runs[0], runs[1]
    assert first.events.name == "sub-01_ses-01_task-movie_run-01_events.tsv"
    assert [p.name for p in first.sidecars] == [
        "task-movie_bold.json",
        "sub-01_task-movie_bold.json",
    ]
    assert [p.name for p in second.sidecars][-1] == "sub-01_ses-01_task-movie_run-02_bold.json"
    assert read_sidecar(first) == {"RepetitionTime": 2.0, "TaskName": "movie", "EchoTime": 0.03}
    assert read_sidecar(second)["RepetitionTime"] == 1.5  # most specific wins
    assert [p.name for p in runs[4].sidecars] == ["task-movie_bold.json"]
    assert first.mask is None and first.confounds is None and first.space is None


def test_filters_and_run_numbers(raw):
    runs = index_fmri_runs(raw, subjects=["02"], runs=["2"])
    assert [r.key for r in runs] == ["sub-02_ses-01_task-movie_run-02"]
    assert len(index_fmri_runs(raw, sessions=["02"])) == 2


def test_unknown_filter_values(raw):
    with pytest.raises(ValueError, match=r"No subject '03' in .*bids \(available: 01, 02\)"):
        index_fmri_runs(raw, subjects=["03"])
    with pytest.raises(ValueError, match=r"No subject '012' in .*Did you mean '0[12]'"):
        index_fmri_runs(raw, subjects=["012"])
    with pytest.raises(ValueError, match=r"No task 'moive' in .*Did you mean 'movie'"):
        index_fmri_runs(raw, tasks=["moive"])
    with pytest.raises(ValueError, match="`subjects` must hold labels without their prefix"):
        index_fmri_runs(raw, subjects=["sub-01"])


def test_nothing_found_names_folder(tmp_path):
    (tmp_path / "empty" / "sub-01" / "anat").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"No BOLD runs found in .*empty \(looked for sub-\*"):
        index_fmri_runs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="`bids_root` must be an existing folder"):
        index_fmri_runs(tmp_path / "nope")


def test_no_sessions_and_confounds_pattern(tmp_path):
    root = tmp_path / "ds"
    _touch(root / "sub-a" / "func" / "sub-a_task-rest_bold.nii")
    _touch(root / "derivatives" / "conf" / "sub-a_task-rest_confounds.tsv", "x\n1\n")
    (run,) = index_fmri_runs(
        root, confounds_pattern="derivatives/conf/sub-{subject}_task-{task}_confounds.tsv"
    )
    assert run.session is None and run.run is None and run.events is None
    assert run.confounds.name == "sub-a_task-rest_confounds.tsv"
    with pytest.raises(FileNotFoundError, match=r"No confounds file .*sub-a_task-rest_x.tsv"):
        index_fmri_runs(root, confounds_pattern="sub-{subject}_task-{task}_x.tsv")


def _fmriprep(tmp_path, raw, spaces=("MNI152NLin2009cAsym", "T1w")):
    deriv = tmp_path / "fmriprep"
    for sub, ses in (("01", "01"), ("01", "02"), ("02", "01")):
        func = deriv / f"sub-{sub}" / f"ses-{ses}" / "func"
        for run in ("01", "02"):
            stem = f"sub-{sub}_ses-{ses}_task-movie_run-{run}"
            for space in spaces:
                _touch(func / f"{stem}_space-{space}_desc-preproc_bold.nii.gz")
                _touch(
                    func / f"{stem}_space-{space}_desc-preproc_bold.json", '{"SkullStripped": true}'
                )
                _touch(func / f"{stem}_space-{space}_desc-brain_mask.nii.gz")
            _touch(func / f"{stem}_desc-confounds_timeseries.tsv")
            _touch(func / f"{stem}_desc-confounds_timeseries.json", "{}")
    return deriv


def test_fmriprep_index(tmp_path, raw):
    deriv = _fmriprep(tmp_path, raw)
    runs = index_fmri_runs(raw, fmriprep_dir=deriv, space="T1w", subjects=["01"])
    assert len(runs) == 4
    run = runs[1]
    assert run.bold.name == "sub-01_ses-01_task-movie_run-02_space-T1w_desc-preproc_bold.nii.gz"
    assert run.mask.name == "sub-01_ses-01_task-movie_run-02_space-T1w_desc-brain_mask.nii.gz"
    assert run.confounds.name == "sub-01_ses-01_task-movie_run-02_desc-confounds_timeseries.tsv"
    assert run.events.parent.is_relative_to(raw)
    assert run.sidecars[-1].name.endswith("space-T1w_desc-preproc_bold.json")
    assert read_sidecar(run)["RepetitionTime"] == 1.5
    assert run.space == "T1w"
    with pytest.raises(ValueError, match=r"`space` must be given: .*fmriprep holds several spaces"):
        index_fmri_runs(raw, fmriprep_dir=deriv)
    with pytest.raises(ValueError, match=r"No space 'T1' in .*Did you mean 'T1w'"):
        index_fmri_runs(raw, fmriprep_dir=deriv, space="T1")


def test_fmriprep_single_space_needs_no_space(tmp_path, raw):
    deriv = _fmriprep(tmp_path, raw, spaces=("T1w",))
    assert len(index_fmri_runs(raw, fmriprep_dir=deriv)) == 6


def test_eeg_index_with_inherited_tables(tmp_path):
    root = tmp_path / "eeg_ds"
    _touch(root / "task-oddball_eeg.json", json.dumps({"SamplingFrequency": 500}))
    eeg = root / "sub-01" / "ses-1" / "eeg"
    _touch(eeg / "sub-01_ses-1_task-oddball_run-1_eeg.vhdr")
    _touch(eeg / "sub-01_ses-1_task-oddball_run-1_eeg.eeg")
    _touch(eeg / "sub-01_ses-1_task-oddball_run-1_events.tsv")
    _touch(eeg / "sub-01_ses-1_task-oddball_channels.tsv")
    _touch(eeg / "sub-01_ses-1_space-CapTrak_electrodes.tsv")
    _touch(root / "sub-02" / "eeg" / "sub-02_task-oddball_eeg.edf")
    recs = index_eeg_recordings(root)
    assert [r.key for r in recs] == ["sub-01_ses-1_task-oddball_run-1", "sub-02_task-oddball"]
    first = recs[0]
    assert first.eeg.suffix == ".vhdr"
    assert first.events.name == "sub-01_ses-1_task-oddball_run-1_events.tsv"
    assert first.channels.name == "sub-01_ses-1_task-oddball_channels.tsv"
    assert first.electrodes.name == "sub-01_ses-1_space-CapTrak_electrodes.tsv"
    assert read_sidecar(first) == {"SamplingFrequency": 500}
    assert recs[1].events is None and recs[1].channels is None
    with pytest.raises(ValueError, match="No EEG recordings found in"):
        index_eeg_recordings(tmp_path / "eeg_ds" / "sub-01")


def test_real_events_tables_are_indexed(tmp_path):
    src = SHARED / "bids-events" / "ds000117"
    if not src.is_dir():
        pytest.skip(f"shared test data not found at {src}")
    root = tmp_path / "ds000117"
    for events in src.glob("sub-*/ses-mri/func/*_events.tsv"):
        target = root / events.relative_to(src)
        _touch(target, events.read_text())
        _touch(target.with_name(target.name.replace("_events.tsv", "_bold.nii.gz")))
    runs = index_fmri_runs(root, tasks=["facerecognition"], runs=["3"])
    assert [r.key for r in runs] == [
        "sub-01_ses-mri_task-facerecognition_run-03",
        "sub-02_ses-mri_task-facerecognition_run-03",
    ]
    assert runs[0].events.read_text().startswith("onset\tduration")


def test_index_speed_200_subjects(tmp_path):
    root = tmp_path / "big"
    _touch(root / "task-movie_bold.json", '{"RepetitionTime": 1.0}')
    for s in range(200):
        for ses in ("1", "2"):
            func = root / f"sub-{s:03d}" / f"ses-{ses}" / "func"
            func.mkdir(parents=True)
            for run in range(1, 5):
                stem = f"sub-{s:03d}_ses-{ses}_task-movie_run-{run}"
                (func / f"{stem}_bold.nii.gz").touch()
                (func / f"{stem}_events.tsv").touch()
    start = time.perf_counter()
    runs = index_fmri_runs(root)
    elapsed = time.perf_counter() - start
    assert len(runs) == 1600
    assert all(r.events is not None and len(r.sidecars) == 1 for r in runs)
    assert elapsed < 2.0, f"indexing took {elapsed:.2f} s"

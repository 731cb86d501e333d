"""Indexing EEG recordings of every kind: continuous, epoched (epo, EEGLAB) and MEG + EEG."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io

from neuroflow.io.bids import read_sidecar
from neuroflow.io.bids_eeg import index_eeg_recordings, is_epoched_eeglab
from neuroflow.preprocessing.eeg import recording_from_path


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _set_file(path: Path, trials: int, *, layout: str = "top") -> Path:
    """An EEGLAB header with ``trials`` (data in a separate .fdt, not written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = {"nbchan": 7.0, "trials": float(trials), "pnts": 9.0, "srate": 100.0}
    fields["data"] = path.with_suffix(".fdt").name
    if layout == "top":
        scipy.io.savemat(path, fields, appendmat=False)
    elif layout == "struct":
        scipy.io.savemat(path, {"EEG": fields}, appendmat=False, do_compression=True)
    else:  # MATLAB v7.3: HDF5 behind a 512-byte user block
        with h5py.File(path, "w", userblock_size=512) as f:
            group = f if layout == "h5-top" else f.create_group("EEG")
            for key in ("nbchan", "trials", "pnts", "srate"):
                group[key] = np.array([[fields[key]]])
        with path.open("r+b") as fh:
            fh.write(b"MATLAB 7.3 MAT-file")
    return path


@pytest.fixture
def mixed(tmp_path) -> Path:
    """Continuous, epoched and MEG + EEG files, with sidecars at several levels."""
    root = tmp_path / "ds"
    _touch(root / "task-a_eeg.json", json.dumps({"PowerLineFrequency": 50}))
    _touch(root / "task-a_meg.json", json.dumps({"PowerLineFrequency": 60}))
    eeg1 = root / "sub-01" / "eeg"
    _touch(eeg1 / "sub-01_task-a_run-1_eeg.vhdr")
    _touch(eeg1 / "sub-01_task-a_run-1_events.tsv")
    _touch(eeg1 / "sub-01_task-a_run-2_epo.fif")
    _touch(eeg1 / "sub-01_task-a_channels.tsv")
    _set_file(eeg1 / "sub-01_task-b_eeg.set", trials=9)
    _set_file(root / "sub-03" / "eeg" / "sub-03_task-b_eeg.set", trials=1, layout="struct")
    meg = root / "sub-02" / "ses-meg" / "meg"
    for name in (
        "sub-02_ses-meg_task-a_run-1_meg.fif",
        "sub-02_ses-meg_task-a_run-1_events.tsv",
        "sub-02_ses-meg_task-a_run-1_meg.json",
        "sub-02_ses-meg_task-a_channels.tsv",
        "sub-02_ses-meg_task-a_run-2_split-01_meg.fif",
        "sub-02_ses-meg_task-a_run-2_split-02_meg.fif",
        "sub-02_ses-meg_acq-crosstalk_meg.fif",
        "sub-02_ses-meg_coordsystem.json",
    ):
        _touch(meg / name, "{}" if name.endswith(".json") else "")
    _touch(
        root
        / "sub-emptyroom"
        / "ses-20200101"
        / "meg"
        / "sub-emptyroom_ses-20200101_task-noise_meg.fif"
    )
    return root


def test_index_finds_every_kind(mixed):
    recs = index_eeg_recordings(mixed)
    assert [(r.key, r.datatype, r.epoched) for r in recs] == [
        ("sub-01_task-a_run-1", "eeg", False),
        ("sub-01_task-a_run-2", "eeg", True),
        ("sub-01_task-b", "eeg", True),
        ("sub-02_ses-meg_task-a_run-1", "meg", False),
        ("sub-02_ses-meg_task-a_run-2", "meg", False),
        ("sub-03_task-b", "eeg", False),
    ]
    by_key = {r.key: r for r in recs}
    epo = by_key["sub-01_task-a_run-2"]
    assert epo.eeg.name == "sub-01_task-a_run-2_epo.fif"
    assert epo.channels.name == "sub-01_task-a_channels.tsv" and epo.events is None
    assert read_sidecar(epo) == {"PowerLineFrequency": 50}
    meg = by_key["sub-02_ses-meg_task-a_run-1"]
    assert meg.events.name == "sub-02_ses-meg_task-a_run-1_events.tsv"
    assert meg.channels.name == "sub-02_ses-meg_task-a_channels.tsv"
    assert [p.name for p in meg.sidecars] == [
        "task-a_meg.json",
        "sub-02_ses-meg_task-a_run-1_meg.json",
    ]
    assert by_key["sub-02_ses-meg_task-a_run-2"].eeg.name.endswith("_split-01_meg.fif")
    assert by_key["sub-02_ses-meg_task-a_run-2"].events is None

    no_meg = index_eeg_recordings(mixed, include_meg=False)
    assert [r.datatype for r in no_meg] == ["eeg"] * 4


def test_filters_and_seen_cover_meg_files(mixed):
    seen: dict[str, set[str]] = {}
    recs = index_eeg_recordings(mixed, sessions=["meg"], runs=["1"], seen=seen)
    assert [r.key for r in recs] == ["sub-02_ses-meg_task-a_run-1"]
    assert {"meg"} <= seen["ses"] and {"1", "2"} <= seen["run"]
    with pytest.raises(ValueError, match="No session 'mri'"):
        index_eeg_recordings(mixed, sessions=["mri"])
    assert index_eeg_recordings(mixed, sessions=["mri"], strict=False) == []


def test_eeg_file_wins_over_epochs_and_meg(tmp_path, caplog):
    root = tmp_path / "ds"
    _touch(root / "sub-01" / "eeg" / "sub-01_task-a_eeg.edf")
    _touch(root / "sub-01" / "eeg" / "sub-01_task-a_epo.fif")
    _touch(root / "sub-01" / "meg" / "sub-01_task-a_meg.fif")
    _touch(root / "sub-01" / "meg" / "sub-01_task-b_meg.fif")
    _touch(root / "sub-01" / "eeg" / "sub-01_task-b_epo.fif")
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        recs = index_eeg_recordings(root)
    assert [(r.key, r.eeg.name) for r in recs] == [
        ("sub-01_task-a", "sub-01_task-a_eeg.edf"),
        ("sub-01_task-b", "sub-01_task-b_epo.fif"),
    ]
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3
    assert any("sub-01_task-a_meg.fif" in w and "continuous EEG" in w for w in warnings)
    assert any("sub-01_task-b_meg.fif" in w and "epoched EEG" in w for w in warnings)


def test_same_kind_twice_is_an_error(tmp_path):
    root = tmp_path / "ds"
    _touch(root / "sub-01" / "eeg" / "sub-01_task-a_eeg.edf")
    _touch(root / "sub-01" / "eeg" / "sub-01_task-a_eeg.bdf")
    with pytest.raises(ValueError, match="Several continuous EEG files share the entities sub-01"):
        index_eeg_recordings(root)


def test_nothing_found_lists_every_pattern(tmp_path):
    root = tmp_path / "ds"
    _touch(root / "sub-01" / "anat" / "sub-01_T1w.nii.gz")
    with pytest.raises(
        ValueError,
        match=r"looked for sub-\*/\[ses-\*/\]eeg/\*_eeg\.\{vhdr,edf,bdf,set,fif\}, "
        r"sub-\*/\[ses-\*/\]eeg/\*_epo\.fif, sub-\*/\[ses-\*/\]meg/\*_meg\.fif\)",
    ):
        index_eeg_recordings(root)
    with pytest.raises(ValueError, match=r"_epo\.fif\)\.$"):
        index_eeg_recordings(root, include_meg=False)


@pytest.mark.parametrize(
    ("layout", "trials", "expected"),
    [
        ("top", 7, True),
        ("top", 1, False),
        ("struct", 8, True),
        ("struct", 1, False),
        ("h5-top", 9, True),
        ("h5-struct", 9, True),
        ("h5-struct", 1, False),
    ],
)
def test_is_epoched_eeglab(tmp_path, layout, trials, expected):
    assert is_epoched_eeglab(_set_file(tmp_path / "x_eeg.set", trials, layout=layout)) is expected


def test_is_epoched_eeglab_unreadable(tmp_path, caplog):
    bad = _touch(tmp_path / "ds" / "sub-01" / "eeg" / "sub-01_task-a_eeg.set", "not a mat file")
    with pytest.raises(ValueError, match=r"sub-01_task-a_eeg\.set could not be read as an EEGLAB"):
        is_epoched_eeglab(bad)
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        (rec,) = index_eeg_recordings(tmp_path / "ds")
    assert not rec.epoched and "continuous" in caplog.records[0].getMessage()


def test_recording_from_path_kinds(tmp_path):
    meg = _touch(tmp_path / "meg" / "sub-03_task-a_run-2_meg.fif")
    _touch(tmp_path / "meg" / "sub-03_task-a_run-2_meg.json", "{}")
    _touch(tmp_path / "meg" / "sub-03_task-a_run-2_events.tsv")
    rec = recording_from_path(meg)
    assert (rec.datatype, rec.epoched, rec.key) == ("meg", False, "sub-03_task-a_run-2")
    assert rec.sidecars[0].name == "sub-03_task-a_run-2_meg.json"
    assert rec.events.name == "sub-03_task-a_run-2_events.tsv"
    epo = recording_from_path(_touch(tmp_path / "eeg" / "sub-03_task-a_epo.fif"))
    assert (epo.datatype, epo.epoched, epo.key) == ("eeg", True, "sub-03_task-a")
    epoched_set = recording_from_path(_set_file(tmp_path / "eeg" / "sub-03_task-b_eeg.set", 4))
    assert epoched_set.epoched and epoched_set.key == "sub-03_task-b"

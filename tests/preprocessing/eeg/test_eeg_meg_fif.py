"""The EEG of MEG + EEG FIF recordings, events tables without a name column, finite data."""

from __future__ import annotations

import csv
import json
import logging
import shutil
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pybv
import pytest
from eeg_helpers import CHANNELS, synthetic_raw

from neuroflow.artifacts import build_provenance, open_dataset
from neuroflow.io.bids_eeg import index_eeg_recordings
from neuroflow.preprocessing.eeg import (
    preprocess_eeg_recording,
    preprocess_recording,
    recording_from_path,
)
from neuroflow.preprocessing.eeg.sidecars import read_events_tsv

DS117 = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "bids-events" / "ds000117"
QUIET = {
    "find_flat_channels": False,
    "find_noisy_channels": False,
    "find_uncorrelated_channels": False,
    "notch_freq": None,
}
N_MAG, N_GRAD, N_EEG = 3, 6, 7


@pytest.fixture
def ds117() -> Path:
    """The real ds000117 events tables; skips when absent."""
    if not DS117.is_dir():
        pytest.skip(f"real ds000117 events tables not found at {DS117.resolve()}")
    return DS117


def _meg_eeg_raw(rng: np.random.Generator, *, eeg: bool = True) -> mne.io.RawArray:
    """MEG sensors (mag, grad), EEG on 10-20 positions and a trigger channel, 25 s at 200 Hz."""
    sfreq, n_times = 200.0, 5000
    names = [f"MEG{i:04d}" for i in range(N_MAG + N_GRAD)]
    types = ["mag"] * N_MAG + ["grad"] * N_GRAD
    if eeg:
        names += CHANNELS[:N_EEG]
        types += ["eeg"] * N_EEG
    names.append("STI101")
    types.append("stim")
    data = np.empty((len(names), n_times))
    data[: N_MAG + N_GRAD] = rng.standard_normal((N_MAG + N_GRAD, n_times)) * 1e-12
    if eeg:
        data[N_MAG + N_GRAD : -1] = synthetic_raw(
            rng, n_eeg=N_EEG, sfreq=sfreq, duration=n_times / sfreq
        ).get_data()
    data[-1] = 0.0
    for i, onset in enumerate(np.arange(2.0, 23.0, 2.5)):
        data[-1, int(onset * sfreq) : int(onset * sfreq) + 5] = 5 + i % 2
    raw = mne.io.RawArray(data, mne.create_info(names, sfreq, types), verbose="error")
    if eeg:
        raw.set_montage("colin27_1020", on_missing="ignore", verbose="error")
    return raw


def _write_meg_bids(root: Path, raw: mne.io.BaseRaw, *, sidecar: dict | None = None) -> Path:
    """A ``meg/`` folder with the FIF, ``_meg.json`` and ``_channels.tsv``."""
    meg = root / "sub-01" / "ses-meg" / "meg"
    meg.mkdir(parents=True)
    stem = meg / "sub-01_ses-meg_task-faces_run-01"
    fif = Path(f"{stem}_meg.fif")
    raw.save(fif, verbose="error")
    meta = {"SamplingFrequency": raw.info["sfreq"], "PowerLineFrequency": 50, "MEGChannelCount": 9}
    Path(f"{stem}_meg.json").write_text(json.dumps({**meta, **(sidecar or {})}))
    bids_types = {"mag": "MEGMAG", "grad": "MEGGRADPLANAR", "eeg": "EEG", "stim": "TRIG"}
    pd.DataFrame(
        {
            "name": raw.ch_names,
            "type": [bids_types[t] for t in raw.get_channel_types()],
            "units": "n/a",
            "status": ["bad" if n == "C3" else "good" for n in raw.ch_names],
        }
    ).to_csv(f"{stem}_channels.tsv", sep="\t", index=False)
    return fif


def test_meg_eeg_fif_keeps_the_eeg(rng, tmp_path):
    """Only EEG reaches detection, reference and epochs; MEG rows of _channels.tsv are fine."""
    raw = _meg_eeg_raw(rng)
    raw._data[N_MAG + N_GRAD + 2] = 0.0  # Pz flat
    root = tmp_path / "bids"
    _write_meg_bids(root, raw)
    (recording,) = index_eeg_recordings(root)
    assert recording.datatype == "meg" and recording.sidecars[-1].name.endswith("_meg.json")
    config = {
        "l_freq": None,
        "h_freq": None,
        "notch_freq": None,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "epochs_tmin": -0.1,
        "epochs_tmax": 0.4,
    }
    provenance = build_provenance(stage="preprocess_eeg", version="0", config=config)
    ep_path, cont_path = preprocess_eeg_recording(
        recording=recording,
        epochs_output=tmp_path / "ep.zarr",
        continuous_output=tmp_path / "cont.zarr",
        config=config,
        provenance=provenance,
    )
    ep, cont = open_dataset(ep_path), open_dataset(cont_path)
    eeg_names = CHANNELS[:N_EEG]
    assert list(ep["channel"].values) == eeg_names == list(cont["channel"].values)
    assert set(ep["ch_type"].values) == {"eeg"}
    assert np.isfinite(ep["ch_x"]).all()  # positions from the FIF
    assert ep.attrs["bad_channel_reasons"] == {"channels_tsv": ["C3"], "flat": ["Pz"]}
    assert ep.attrs["interpolated_channels"] == ["Pz", "C3"]
    assert ep.attrs["event_source"] == "stim_channel" and ep.attrs["input"] == "continuous"
    assert list(ep["condition"].values) == ["5", "6"] * 4 + ["5"]

    # MNE on the EEG alone: the MEG sensors changed nothing
    ref = raw.copy().pick("eeg")
    ref.info["bads"] = ["Pz", "C3"]
    ref.interpolate_bads(reset_bads=False, verbose="error")
    ref.set_eeg_reference("average", verbose="error")
    expected = ref.get_data()
    np.testing.assert_allclose(cont["eeg"].values, expected, atol=1e-6 * np.abs(expected).max())


def test_meg_only_fif_is_a_clear_error(rng, tmp_path):
    raw = _meg_eeg_raw(rng, eeg=False)
    fif = _write_meg_bids(tmp_path / "bids", raw)
    recording = recording_from_path(fif)
    assert recording.datatype == "meg"
    with pytest.raises(
        ValueError,
        match=r"_meg\.fif must hold EEG channels, got only channel types grad \(6\), mag \(3\), "
        r"stim \(1\) instead\. neuroflow analyses the EEG channels of MEG recordings; set "
        r"`dataset\.eeg_from_meg: false`",
    ):
        preprocess_recording(recording, QUIET)


def test_meg_json_sampling_rate_checked(rng, tmp_path):
    fif = _write_meg_bids(tmp_path / "bids", _meg_eeg_raw(rng), sidecar={"SamplingFrequency": 1000})
    with pytest.raises(ValueError, match=r"_meg\.json field 'SamplingFrequency' says 1000 Hz"):
        preprocess_recording(recording_from_path(fif), QUIET)


def test_real_meg_events_without_name_column(ds117, tmp_path, caplog):
    """ds000117's MEG events (no trial_type, no value) name every event 'stimulus'."""
    src = (
        ds117
        / "sub-01"
        / "ses-meg"
        / "meg"
        / "sub-01_ses-meg_task-facerecognition_run-01_events.tsv"
    )
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        events = read_events_tsv(path, event_column="trial_type", stim_column="stim_file")
    (warning,) = [r.getMessage() for r in caplog.records]
    assert str(path) in warning and "'trial_type'" in warning
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(events) == len(rows) and set(events["name"]) == {"stimulus"}
    assert events["stimulus"].tolist() == [r["stim_file"].strip() for r in rows]
    np.testing.assert_allclose(events["onset"], [float(r["onset"]) for r in rows])
    by_type = read_events_tsv(path, event_column="stim_type", stim_column="stim_file")
    assert set(by_type["name"]) == {"Famous", "Unfamiliar", "Scrambled"}


def test_real_crlf_table_with_na_cells(ds117, tmp_path):
    """CRLF line ends leave no stray '\\r'; 'n/a' cells are missing values."""
    src = (
        ds117
        / "sub-01"
        / "ses-mri"
        / "func"
        / "sub-01_ses-mri_task-facerecognition_run-01_events.tsv"
    )
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    assert b"\r\n" in path.read_bytes()
    events = read_events_tsv(path, event_column="stim_type", stim_column="stim_file")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    named = [r for r in rows if r["stim_type"].strip() != "n/a"]
    assert 0 < len(events) == len(named) < len(rows)
    assert events["name"].tolist() == [r["stim_type"] for r in named]
    assert events["stimulus"].tolist() == [r["stim_file"].strip() for r in named]
    assert not any("\r" in s for s in events["stimulus"])


@pytest.mark.parametrize(
    ("columns", "expected"),
    [
        ({"value": ["3", "4"], "trial_type": ["a", "b"]}, ["3", "4"]),
        ({"trial_type": ["a", "b"]}, ["a", "b"]),
        ({"stim_type": ["a", "b"]}, ["stimulus", "stimulus"]),
    ],
)
def test_event_name_fallbacks(tmp_path, columns, expected):
    path = tmp_path / "sub-01_task-a_events.tsv"
    pd.DataFrame({"onset": [1.0, 2.5], **columns}).to_csv(path, sep="\t", index=False)
    events = read_events_tsv(path, event_column="condition", stim_column=None)
    assert events["name"].tolist() == expected


def _nan_raw(rng: np.random.Generator) -> mne.io.RawArray:
    raw = synthetic_raw(rng, n_eeg=8, sfreq=100.0, duration=12.0)
    raw._data[1, 200:207] = np.nan  # Cz
    raw._data[6, 50] = np.inf  # C4
    raw.set_annotations(mne.Annotations([3.0, 6.0], 0.0, ["go", "go"]))
    return raw


def test_nan_samples_in_brainvision(rng, tmp_path):
    raw = _nan_raw(rng)
    pybv.write_brainvision(
        data=raw.get_data() * 1e6,
        sfreq=raw.info["sfreq"],
        ch_names=raw.ch_names,
        fname_base="sub-01_task-go_eeg",
        folder_out=tmp_path,
        fmt="binary_float32",
        events=np.array([[300, 1], [600, 1]]),
    )
    vhdr = tmp_path / "sub-01_task-go_eeg.vhdr"
    with pytest.raises(
        ValueError,
        match=r"sub-01_task-go_eeg\.vhdr must be finite, got 7 NaN and 1 infinite samples in "
        r"channel\(s\) Cz \(7\), C4 \(1\) instead",
    ):
        preprocess_recording(vhdr, QUIET)


def test_nan_samples_in_fif_and_in_a_bad_channel(rng, tmp_path):
    raw = _nan_raw(rng)
    raw._data[6, 50] = 0.0
    path = tmp_path / "sub-01_task-go_eeg.fif"
    raw.save(path, verbose="error")
    with pytest.raises(ValueError, match=r"must be finite, got 7 NaN samples in channel\(s\) Cz "):
        preprocess_recording(path, QUIET)
    # marked bad, the channel is interpolated and the output is finite
    pd.DataFrame({"name": raw.ch_names, "type": "EEG", "status": "good"}).assign(
        status=lambda t: np.where(t["name"] == "Cz", "bad", "good")
    ).to_csv(tmp_path / "sub-01_task-go_channels.tsv", sep="\t", index=False)
    ep, cont = preprocess_recording(path, {**QUIET, "eeg_template_montage": "colin27_1020"})
    assert ep.attrs["interpolated_channels"] == ["Cz"]
    assert np.isfinite(ep["epochs"].values).all() and np.isfinite(cont["eeg"].values).all()

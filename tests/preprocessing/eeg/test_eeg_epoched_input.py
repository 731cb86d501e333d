"""Epoched inputs (MNE ``_epo.fif``, epoched EEGLAB ``.set``) to the epochs store."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
import scipy.io
from eeg_helpers import CHANNELS, synthetic_raw

from neuroflow.artifacts import build_provenance, open_dataset, read_provenance
from neuroflow.io.records import EegRecording
from neuroflow.preprocessing.eeg import (
    preprocess_eeg_epochs,
    preprocess_epochs,
    preprocess_recording,
    recording_from_path,
)

QUIET = {
    "find_flat_channels": False,
    "find_noisy_channels": False,
    "find_uncorrelated_channels": False,
    "notch_freq": None,
}
KINDS = ["face", "house", "face", "face", "house", "face", "house", "house", "face"]


def _eeg_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bids" / "sub-01" / "eeg"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _epochs_from_raw(
    raw: mne.io.BaseRaw, onsets: np.ndarray, kinds: list[str], tmin: float, tmax: float
) -> mne.Epochs:
    """Epochs of ``raw`` at ``onsets`` named by ``kinds``, without baseline correction."""
    event_id = {k: i + 1 for i, k in enumerate(sorted(set(kinds)))}
    samples = np.round(onsets * raw.info["sfreq"]).astype(int) + raw.first_samp
    events = np.column_stack([samples, np.zeros(len(onsets), int), [event_id[k] for k in kinds]])
    return mne.Epochs(
        raw, events, event_id, tmin, tmax, baseline=None, preload=True, verbose="error"
    )


def _write_eeglab_epochs(path: Path, epochs: mne.BaseEpochs) -> None:
    """An epoched EEGLAB ``.set``: through eeglabio when installed, else by hand."""
    if importlib.util.find_spec("eeglabio") is not None:
        mne.export.export_epochs(path, epochs, fmt="eeglab", overwrite=True, verbose="error")
        return
    data = epochs.get_data() * 1e6  # EEGLAB stores µV, (channel, time, trial)
    n_trials, n_channels, n_times = data.shape
    sfreq = epochs.info["sfreq"]
    chanlocs = np.zeros((n_channels,), dtype=[("labels", object), ("type", object)])
    for i, name in enumerate(epochs.ch_names):
        chanlocs[i] = (name, "EEG")
    names = {code: name for name, code in epochs.event_id.items()}
    event = np.zeros((n_trials,), dtype=[("type", object), ("latency", float), ("epoch", float)])
    epoch = np.zeros((n_trials,), dtype=[("event", float), ("eventtype", object)])
    for i, code in enumerate(epochs.events[:, 2]):
        latency = i * n_times - epochs.tmin * sfreq + 1  # 1-based, in concatenated samples
        event[i] = (names[code], latency, i + 1)
        epoch[i] = (i + 1, names[code])
    scipy.io.savemat(
        path,
        {
            "setname": "epochs",
            "nbchan": float(n_channels),
            "trials": float(n_trials),
            "pnts": float(n_times),
            "srate": sfreq,
            "xmin": epochs.tmin,
            "xmax": epochs.tmax,
            "times": epochs.times * 1e3,
            "data": data.transpose(1, 2, 0).astype(np.float32),
            "chanlocs": chanlocs,
            "event": event,
            "epoch": epoch,
            "icawinv": np.array([]),
            "icasphere": np.array([]),
            "icaweights": np.array([]),
            "ref": "common",
        },
        appendmat=False,
    )


def test_epoched_fif_has_raw_path_layout_and_values(rng, tmp_path):
    """An _epo.fif cut from a recording gives the raw path's store, values included."""
    raw = synthetic_raw(rng, n_eeg=9, sfreq=200.0, duration=30.0)
    onsets = np.linspace(2.0, 27.0, len(KINDS))
    stim = [f"stimuli/{k}_{i:02d}.png" for i, k in enumerate(KINDS)]
    table = pd.DataFrame({"onset": onsets, "duration": 0.5, "trial_type": KINDS, "stim_file": stim})
    # the raw path, from the continuous recording
    raw_dir = tmp_path / "raw" / "sub-01" / "eeg"
    raw_dir.mkdir(parents=True)
    raw.save(raw_dir / "sub-01_task-vis_eeg.fif", verbose="error")
    table.to_csv(raw_dir / "sub-01_task-vis_events.tsv", sep="\t", index=False)
    config = {**QUIET, "l_freq": None, "h_freq": None, "conditions": {"face": "F", "house": "H"}}
    config |= {"epochs_tmin": -0.2, "epochs_tmax": 0.8}  # inside the stored [-0.35, 1.1] s
    expected, _ = preprocess_recording(raw_dir / "sub-01_task-vis_eeg.fif", config)
    # the same events cut wider than the configured window, stored as epochs
    eeg_dir = _eeg_dir(tmp_path)
    _epochs_from_raw(raw, onsets, KINDS, -0.35, 1.1).save(
        eeg_dir / "sub-01_task-vis_epo.fif", verbose="error"
    )
    table.to_csv(eeg_dir / "sub-01_task-vis_events.tsv", sep="\t", index=False)
    (eeg_dir / "sub-01_task-vis_eeg.json").write_text(json.dumps({"SamplingFrequency": 200.0}))
    recording = recording_from_path(eeg_dir / "sub-01_task-vis_epo.fif")
    assert recording.epoched and recording.events.name == "sub-01_task-vis_events.tsv"

    out = preprocess_eeg_epochs(
        recording=recording,
        epochs_output=tmp_path / "out" / "epochs.zarr",
        config=config,
        provenance=build_provenance(stage="preprocess_eeg", version="0", config=config),
    )
    got = open_dataset(out)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["epochs.zarr"]
    assert read_provenance(out)["stage"] == "preprocess_eeg"
    assert set(got.data_vars) == set(expected.data_vars) == {"epochs"}
    assert set(got.coords) == set(expected.coords)
    assert got["epochs"].dims == expected["epochs"].dims == ("epoch", "channel", "time")
    assert got["epochs"].dtype == np.float32 and got["epochs"].attrs["units"] == "V"
    assert set(got.attrs) - {"neuroflow"} == set(expected.attrs)  # + provenance
    assert got.attrs["input"] == "epochs" and expected.attrs["input"] == "continuous"
    assert got.attrs["event_source"] == "events_tsv"
    assert got.attrs["filters"] == {"l_freq": None, "h_freq": None, "notch": []}
    assert got.attrs["entities"] == {"subject": "01", "session": None, "task": "vis", "run": None}
    assert got.attrs["n_events"] == len(KINDS) and got.attrs["dropped_epochs"] == []
    assert got.sizes == expected.sizes == {"epoch": 9, "channel": 9, "time": 201}
    for name in ("channel", "ch_type", "condition", "stimulus", "event_index"):
        assert list(got[name].values) == list(expected[name].values), name
    assert list(got["condition"].values[:3]) == ["F", "H", "F"]
    assert got["stimulus"].values[4] == "stimuli/house_04.png"
    np.testing.assert_allclose(got["onset"].values, onsets)
    np.testing.assert_allclose(got["time"].values, expected["time"].values, atol=1e-9)
    scale = float(np.abs(expected["epochs"]).max())
    np.testing.assert_allclose(got["epochs"].values, expected["epochs"].values, atol=1e-5 * scale)


def test_own_event_names_lowpass_and_skipped_highpass(rng, tmp_path, caplog):
    """Without _events.tsv the epochs' event names are the conditions; low-pass as MNE."""
    n_epochs, n_channels, n_times, sfreq = 11, 7, 141, 100.0
    data = rng.standard_normal((n_epochs, n_channels, n_times)) * 5e-6
    codes = np.array([1, 2, 2, 1, 3, 2, 1, 1, 3, 2, 2])
    events = np.column_stack([np.arange(n_epochs) * 200 + 50, np.zeros(n_epochs, int), codes])
    info = mne.create_info(CHANNELS[:n_channels], sfreq, "eeg")
    event_id = {"face": 1, "house": 2, "car": 3}
    epochs = mne.EpochsArray(data, info, events, tmin=-0.4, event_id=event_id, verbose="error")
    path = _eeg_dir(tmp_path) / "sub-01_task-vis_run-2_epo.fif"
    epochs.save(path, verbose="error")
    config = {
        **QUIET,
        "h_freq": 20.0,
        "epochs_tmin": -0.2,
        "epochs_tmax": 0.6,
        "baseline": [-0.2, 0.0],
        "conditions": ["house", "car"],
    }
    with caplog.at_level(logging.INFO, logger="neuroflow"):
        ds = preprocess_epochs(path, config)
    highpass = [r for r in caplog.records if "l_freq" in r.getMessage()]
    assert len(highpass) == 1 and highpass[0].levelno == logging.WARNING
    assert "continuous data" in highpass[0].getMessage() and str(path) in highpass[0].getMessage()
    assert ds.attrs["event_source"] == "epochs" and ds.attrs["n_events"] == 7
    assert ds.attrs["filters"] == {"l_freq": None, "h_freq": 20.0, "notch": []}
    assert list(ds["condition"].values) == [
        "house",
        "house",
        "car",
        "house",
        "car",
        "house",
        "house",
    ]
    assert list(ds["stimulus"].values) == list(ds["condition"].values)
    np.testing.assert_allclose(ds["onset"].values, events[codes != 1, 0] / sfreq)
    assert list(ds["event_index"].values) == list(range(7))

    ref = epochs[np.flatnonzero(codes != 1)]
    ref.filter(None, 20.0, verbose="error").set_eeg_reference("average", verbose="error")
    ref.crop(-0.2, 0.6).apply_baseline((-0.2, 0.0), verbose="error")
    assert ds["epochs"].shape == (7, n_channels, 81)
    np.testing.assert_allclose(ds["epochs"].values, ref.get_data(), atol=1e-6 * 5e-6)
    np.testing.assert_allclose(ds["time"].values, ref.times)


def test_flat_channel_found_on_concatenated_epochs_and_interpolated(rng, tmp_path):
    """Bad-channel detection runs on the epochs end to end; the channel is interpolated."""
    raw = synthetic_raw(rng, n_eeg=8, sfreq=250.0, duration=20.0)
    raw._data[5] = 0.0  # C3 flat
    onsets = np.arange(1.5, 18.0, 2.1)
    epochs = _epochs_from_raw(raw, onsets, ["go"] * len(onsets), -0.2, 0.8)
    path = _eeg_dir(tmp_path) / "sub-01_task-vis_epo.fif"
    epochs.save(path, verbose="error")
    config = {
        "l_freq": None,
        "notch_freq": None,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "eeg_template_montage": "colin27_1020",
        "resample_sfreq": 125.0,
    }
    ds = preprocess_epochs(path, config)
    assert ds.attrs["bad_channel_reasons"] == {"flat": ["C3"]}
    assert ds.attrs["interpolated_channels"] == ["C3"]
    assert ds.attrs["montage"] == "colin27_1020" and np.isfinite(ds["ch_x"]).all()
    assert float(ds["epochs"].sel(channel="C3").std()) > 1e-7
    assert ds.attrs["sfreq"] == 125.0 and ds.sizes["time"] == 126
    assert ds.sizes == {"epoch": len(onsets), "channel": 8, "time": 126}


def test_rejection_and_channel_types_on_epochs(rng, tmp_path):
    """_channels.tsv types and status, drop_channels and peak-to-peak rejection apply."""
    n_epochs, names = 9, [*CHANNELS[:7], "VEOG", "EMG1"]
    data = rng.standard_normal((n_epochs, len(names), 101)) * 5e-6
    data[6, 2, 40:45] += 4e-4  # epoch 6, channel Pz
    info = mne.create_info(names, 100.0, "eeg")
    epochs = mne.EpochsArray(data, info, tmin=-0.2, verbose="error")
    eeg_dir = _eeg_dir(tmp_path)
    path = eeg_dir / "sub-01_task-vis_epo.fif"
    epochs.save(path, verbose="error")
    types = ["EEG"] * 7 + ["VEOG", "EMG"]
    status = ["good"] * 3 + ["bad"] + ["good"] * 5  # F3 bad
    pd.DataFrame({"name": names, "type": types, "status": status}).to_csv(
        eeg_dir / "sub-01_task-vis_channels.tsv", sep="\t", index=False
    )
    recording = recording_from_path(path)
    config = {**QUIET, "l_freq": None, "reject": {"eeg": 2e-4}, "drop_channels": ["EMG1"]}
    ds = preprocess_epochs(recording, config)
    assert list(ds["channel"].values) == CHANNELS[:3] + CHANNELS[4:7]  # F3 bad, no positions
    assert ds.attrs["bad_channel_reasons"] == {"channels_tsv": ["F3"]}
    assert [r["epoch"] for r in ds.attrs["dropped_epochs"]] == [6]
    assert "Pz" in ds.attrs["dropped_epochs"][0]["reason"]
    assert list(ds["event_index"].values) == [0, 1, 2, 3, 4, 5, 7, 8]
    assert list(ds["condition"].values) == ["1"] * 8  # EpochsArray's default event name


def test_epoched_eeglab_set(rng, tmp_path):
    """An epoched EEGLAB file is recognised and read with its event names."""
    n_channels, sfreq = 7, 128.0
    info = mne.create_info(CHANNELS[:n_channels], sfreq, "eeg")
    kinds = ["std", "odd", "std", "std", "odd", "std", "std", "odd"]
    event_id = {"std": 1, "odd": 2}
    events = np.column_stack(
        [np.arange(len(kinds)) * 300 + 30, np.zeros(len(kinds), int), [event_id[k] for k in kinds]]
    )
    data = rng.standard_normal((len(kinds), n_channels, 103)) * 4e-6
    epochs = mne.EpochsArray(data, info, events, tmin=-0.2, event_id=event_id, verbose="error")
    path = _eeg_dir(tmp_path) / "sub-01_task-oddball_eeg.set"
    _write_eeglab_epochs(path, epochs)
    check = mne.read_epochs_eeglab(path, verbose="error")
    np.testing.assert_allclose(check.get_data(), data, rtol=1e-5, atol=1e-12)

    recording = recording_from_path(path)
    assert recording.epoched and recording.datatype == "eeg"
    config = {**QUIET, "l_freq": None, "h_freq": None, "baseline": None, "eeg_reference": None}
    config |= {"epochs_tmin": -0.1, "epochs_tmax": 0.5}
    ds = preprocess_epochs(recording, config)
    assert list(ds["condition"].values) == kinds
    expected = epochs.copy().crop(-0.1, 0.5).get_data()
    assert ds.sizes == {"epoch": 8, "channel": n_channels, "time": expected.shape[-1]}
    np.testing.assert_allclose(ds["epochs"].values, expected, rtol=1e-5, atol=1e-12)


def test_window_outside_the_epochs(rng, tmp_path):
    data = rng.standard_normal((7, 8, 61)) * 1e-6
    epochs = mne.EpochsArray(data, mne.create_info(CHANNELS[:8], 100.0, "eeg"), tmin=-0.1)
    path = _eeg_dir(tmp_path) / "sub-01_task-vis_epo.fif"
    epochs.save(path, verbose="error")
    explicit = {**QUIET, "epochs_tmin": -0.2, "epochs_tmax": 0.8}
    with pytest.raises(ValueError, match=r"\[-0\.2, 0\.8\] s for epochs spanning \[-0\.1, 0\.5\]"):
        preprocess_epochs(path, explicit)
    with pytest.raises(ValueError, match=r"\[-0\.1, 0\.9\] s for epochs spanning"):
        preprocess_epochs(path, {**QUIET, "epochs_tmax": 0.9})  # tmin stays auto
    ds = preprocess_epochs(path, {**QUIET, "l_freq": None})  # auto: the stored window
    np.testing.assert_allclose(ds["time"].values, epochs.times)
    assert ds.attrs["epochs_window"] == [-0.1, 0.5]


def test_events_tsv_must_match_epochs(rng, tmp_path, caplog):
    """A table without one row per epoch is an error for 'events_tsv', a fallback for 'auto'."""
    data = rng.standard_normal((7, 8, 101)) * 1e-6
    epochs = mne.EpochsArray(data, mne.create_info(CHANNELS[:8], 100.0, "eeg"), tmin=-0.2)
    eeg_dir = _eeg_dir(tmp_path)
    path = eeg_dir / "sub-01_task-vis_epo.fif"
    epochs.save(path, verbose="error")
    pd.DataFrame({"onset": [1.0, 2.0, 3.0], "trial_type": ["a", "b", "a"]}).to_csv(
        eeg_dir / "sub-01_task-vis_events.tsv", sep="\t", index=False
    )
    config = {**QUIET, "l_freq": None, "event_source": "events_tsv"}
    with pytest.raises(ValueError, match=r"_events\.tsv holds 3 events .* holds 7 epochs"):
        preprocess_epochs(path, config)
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        ds = preprocess_epochs(path, {**config, "event_source": "auto"})
    assert ds.attrs["event_source"] == "epochs" and ds.sizes["epoch"] == 7
    assert any("own event names" in r.getMessage() for r in caplog.records)


def test_continuous_and_epoched_entry_points_refuse_each_other(rng, tmp_path):
    raw = synthetic_raw(rng, n_eeg=7, sfreq=100.0, duration=10.0)
    raw_path = tmp_path / "sub-01_task-x_eeg.fif"
    raw.save(raw_path, verbose="error")
    epochs = mne.make_fixed_length_epochs(raw, duration=1.0, preload=True, verbose="error")
    epo_path = tmp_path / "sub-01_task-x_epo.fif"
    epochs.save(epo_path, verbose="error")
    with pytest.raises(ValueError, match=r"must be an epochs file .* got the continuous recording"):
        preprocess_epochs(raw_path, QUIET)
    with pytest.raises(ValueError, match="must be a continuous recording, got the epochs file"):
        preprocess_recording(epo_path, QUIET)
    record = EegRecording(subject="01", session=None, task="x", run=None, eeg=epo_path)
    with pytest.raises(ValueError, match="must be an epochs file"):
        preprocess_epochs(record, QUIET)

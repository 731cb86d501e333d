"""The stage on real recordings in four formats (MNE's testing data)."""

from __future__ import annotations

import mne
import numpy as np
import pandas as pd

from neuroflow.io.records import EegRecording
from neuroflow.preprocessing.eeg import preprocess_recording


def test_eeglab_square_epochs(eeg_data):
    """EEGLAB: epochs around the 80 'square' events equal MNE's own pipeline."""
    path = eeg_data / "eeglab" / "test_raw.set"
    config = {
        "conditions": {"square": "visual"},
        "notch_freq": None,
        "find_flat_channels": False,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "l_freq": 0.5,
        "h_freq": 30.0,
        "epochs_tmin": -0.2,
        "epochs_tmax": 0.6,
    }
    ep, cont = preprocess_recording(path, config)
    assert ep["epochs"].shape == (80, 32, 104)  # round(-0.2 * 128) .. round(0.6 * 128)
    assert set(ep["condition"].values) == {"visual"}
    assert ep.attrs["event_source"] == "annotations"
    assert np.isnan(ep["ch_x"]).all()  # the file has no positions

    raw = mne.io.read_raw_eeglab(path, preload=True, verbose="error")
    raw.filter(0.5, 30.0, verbose="error").set_eeg_reference("average", verbose="error")
    events, event_id = mne.events_from_annotations(raw, event_id={"square": 1}, verbose="error")
    ref = mne.Epochs(raw, events, event_id, -0.2, 0.6, baseline=(None, 0), verbose="error")
    expected = ref.get_data()
    np.testing.assert_allclose(ep["epochs"].values, expected, atol=1e-6 * np.abs(expected).max())
    np.testing.assert_allclose(ep["onset"].values, (events[:, 0] - raw.first_samp) / 128.0)
    assert cont.sizes["time"] == 30504


def test_eeglab_default_bad_channel_detection(eeg_data):
    """Automatic detection on real data keeps most channels and reports its reasons."""
    ep, _ = preprocess_recording(eeg_data / "eeglab" / "test_raw.set", {"conditions": ["square"]})
    found = sum(len(v) for v in ep.attrs["bad_channel_reasons"].values())
    assert found <= 4
    # without positions, bad channels cannot be interpolated and are left out
    assert ep.sizes["channel"] == 32 - found
    assert ep.attrs["interpolated_channels"] == []


def test_edf_annotations(eeg_data):
    """EDF: epochs on its 'type A'/'type B' annotations; the stim channel is left out."""
    config = {
        "conditions": ["type A", "type B"],
        "epochs_tmin": -0.1,
        "epochs_tmax": 0.3,
        "find_uncorrelated_channels": False,
        "find_noisy_channels": False,
        "h_freq": 100.0,
    }
    ep, cont = preprocess_recording(eeg_data / "edf" / "test_reduced.edf", config)
    assert "Status" not in ep["channel"].values
    assert ep.sizes["channel"] == 138
    assert list(ep["condition"].values) == ["type A", "type A", "type B", "type A"]
    assert cont.attrs["sfreq"] == 512.0
    assert ep.attrs["filters"]["notch"] == []  # no sidecar, no power-line frequency


def test_brainvision_with_events_tsv(eeg_data, tmp_path):
    """BrainVision without markers: events come from an _events.tsv; 0.45 s at 5 kHz."""
    events = tmp_path / "sub-01_task-x_events.tsv"
    pd.DataFrame(
        {"onset": [0.1, 0.2, 0.3], "trial_type": ["t", "t", "t"], "stim_file": ["a", "b", "c"]}
    ).to_csv(events, sep="\t", index=False)
    rec = EegRecording(
        subject="01",
        session=None,
        task="x",
        run=None,
        eeg=eeg_data / "brainvision" / "test_NO.vhdr",
        events=events,
    )
    config = {
        "l_freq": 5.0,
        "h_freq": 200.0,
        "epochs_tmin": -0.05,
        "epochs_tmax": 0.1,
        "baseline": None,
        "find_uncorrelated_channels": False,
    }
    ep, _ = preprocess_recording(rec, config)
    assert list(ep["stimulus"].values) == ["a", "b", "c"]
    assert ep.sizes["time"] == 751
    assert ep.attrs["event_source"] == "events_tsv"


def test_bdf_stim_channel(eeg_data):
    """BDF: events from the Status channel, one condition per trigger code."""
    config = {"epochs_tmin": -0.1, "epochs_tmax": 0.4, "find_uncorrelated_channels": False}
    ep, _ = preprocess_recording(eeg_data / "bdf" / "test_bdf_stim_channel.bdf", config)
    assert ep.attrs["event_source"] == "stim_channel"
    assert list(ep["channel"].values) == ["C3", "C4", "Cz"]
    assert list(ep["condition"].values) == ["4", "2", "1", "1", "1", "1", "1", "1", "1"]
    np.testing.assert_allclose(ep["onset"].values[:2], [242 / 500, 310 / 500])

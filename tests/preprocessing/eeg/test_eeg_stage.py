"""End-to-end tests of the preprocess_eeg stage on synthetic BIDS EEG data."""

from __future__ import annotations

import mne
import numpy as np
import pytest
from eeg_helpers import events_table, synthetic_raw

from neuroflow.artifacts import build_provenance, open_dataset, read_provenance
from neuroflow.preprocessing.eeg import (
    notch_frequencies,
    preprocess_eeg_recording,
    preprocess_recording,
)

QUIET = {
    "find_flat_channels": False,
    "find_noisy_channels": False,
    "find_uncorrelated_channels": False,
    "notch_freq": None,
}


def _provenance(config: dict) -> dict:
    return build_provenance(stage="preprocess_eeg", version="abc", config=config)


def test_bids_recording_to_stores(rng, make_bids, tmp_path):
    """Sidecars drive channel types, bads, montage and notch; stores carry every coord."""
    raw = synthetic_raw(rng, n_eeg=9, eog=True)
    raw._data[2] = 0.0  # Pz flat
    onsets = np.arange(2.0, 27.0, 2.9)[:8]
    recording = make_bids(raw, events_table(onsets, 250.0), status={"F4": "bad"})
    config = {
        "h_freq": None,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "conditions": {"face": "faces", "house": "houses"},
    }
    epochs_path, cont_path = preprocess_eeg_recording(
        recording=recording,
        epochs_output=tmp_path / "ep.zarr",
        continuous_output=tmp_path / "cont.zarr",
        config=config,
        provenance=_provenance(config),
    )
    ep, cont = open_dataset(epochs_path), open_dataset(cont_path)
    assert ep["epochs"].dims == ("epoch", "channel", "time")
    assert ep["epochs"].dtype == np.float32
    assert ep.sizes["epoch"] == 8 and ep.sizes["channel"] == 9
    assert list(ep["channel"].values) == raw.ch_names[:9]  # VEOG left out, bads interpolated
    assert set(ep["ch_type"].values) == {"eeg"}
    assert np.isfinite(ep["ch_x"]).all()
    assert ep["stimulus"].values[1] == "stimuli/house_01.png"
    assert list(ep["condition"].values[:2]) == ["faces", "houses"]
    np.testing.assert_allclose(ep["onset"].values, onsets)
    np.testing.assert_allclose(ep["time"].values[[0, -1]], [-0.2, 0.8])
    assert ep.attrs["filters"] == {"l_freq": 0.1, "h_freq": None, "notch": [50.0, 100.0]}
    assert ep.attrs["bad_channels"] == ["F4", "Pz"]
    assert ep.attrs["bad_channel_reasons"] == {"channels_tsv": ["F4"], "flat": ["Pz"]}
    assert ep.attrs["interpolated_channels"] == ["Pz", "F4"]
    assert ep.attrs["entities"] == {"subject": "01", "session": None, "task": "vis", "run": "1"}
    assert ep.attrs["reference"] == "average"
    assert ep.attrs["source_file"] == str(recording.eeg)
    assert ep.attrs["dropped_epochs"] == []
    # the interpolated flat channel now carries signal
    assert float(ep["epochs"].sel(channel="Pz").std()) > 1e-7
    assert cont["eeg"].dims == ("channel", "time") and cont.sizes["time"] == raw.n_times
    assert list(cont["event_stimulus"].values) == list(ep["stimulus"].values)
    assert read_provenance(epochs_path)["stage"] == "preprocess_eeg"


def test_matches_mne_calls(rng, tmp_path):
    """Filter + reference + epoch + baseline equal MNE's own calls with the same parameters."""
    raw = synthetic_raw(rng, n_eeg=7, sfreq=200.0, duration=25.0)
    onsets = np.linspace(1.0, 22.0, 9)
    raw.set_annotations(mne.Annotations(onsets, 0.1, ["a", "b", "a", "b", "a", "b", "a", "b", "a"]))
    path = tmp_path / "sub-02_task-x_raw.fif"
    raw.save(path, verbose="error")
    config = {
        **QUIET,
        "l_freq": 1.0,
        "h_freq": 30.0,
        "epochs_tmin": -0.1,
        "epochs_tmax": 0.5,
        "baseline": [None, 0.0],
    }
    ep, cont = preprocess_recording(path, config)

    ref = mne.io.read_raw_fif(path, preload=True, verbose="error")
    ref.filter(1.0, 30.0, verbose="error").set_eeg_reference("average", verbose="error")
    events, event_id = mne.events_from_annotations(ref, verbose="error")
    expected = mne.Epochs(
        ref, events, event_id, -0.1, 0.5, baseline=(None, 0.0), preload=True, verbose="error"
    )
    got = ep["epochs"].values
    assert got.shape == (9, 7, 121)
    scale = np.abs(expected.get_data()).max()
    np.testing.assert_allclose(got, expected.get_data(), rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(cont["eeg"].values, ref.get_data(), rtol=0, atol=1e-6 * scale)
    assert list(ep["condition"].values) == ["a", "b"] * 4 + ["a"]
    assert list(ep["stimulus"].values) == list(ep["condition"].values)
    assert ep.attrs["entities"]["subject"] == "02"


def test_resample_named_reference_and_template_montage(rng, tmp_path):
    """Resampling changes sfreq and time; a named reference zeroes its channel."""
    raw = synthetic_raw(rng, n_eeg=8, sfreq=256.0, duration=20.0)
    raw.set_annotations(mne.Annotations([3.0, 7.0, 11.0], 0.0, ["go"] * 3))
    path = tmp_path / "rec_raw.fif"
    raw.save(path, verbose="error")
    config = {
        **QUIET,
        "resample_sfreq": 128.0,
        "eeg_reference": ["Cz"],
        "eeg_template_montage": "colin27_1020",
    }
    ep, cont = preprocess_recording(path, config)
    assert ep.attrs["sfreq"] == 128.0
    assert cont.sizes["time"] == 20 * 128
    assert ep.sizes["time"] == 129
    assert ep.attrs["reference"] == "Cz"
    np.testing.assert_allclose(cont["eeg"].sel(channel="Cz").values, 0.0, atol=1e-12)
    montaged = raw.copy().set_montage("colin27_1020", verbose="error")
    expected = montaged.info["chs"][0]["loc"][:3]
    np.testing.assert_allclose(
        [float(ep[c].sel(channel="Fz")) for c in ("ch_x", "ch_y", "ch_z")], expected
    )
    np.testing.assert_allclose(cont["event_onset"].values, [3.0, 7.0, 11.0])


@pytest.mark.parametrize("reject", [{"eeg": 1e-4}, "auto"])
def test_rejection_logs_dropped_epochs(rng, tmp_path, reject):
    """An artefact in one epoch drops it, with its onset and the channel in the log."""
    raw = synthetic_raw(rng, n_eeg=7, sfreq=100.0, duration=30.0)
    onsets = np.arange(1.0, 28.0, 3.0)
    raw._data[3, 1300:1310] += 5e-4  # epoch at 13 s, channel F3
    raw.set_annotations(mne.Annotations(onsets, 0.0, ["x"] * len(onsets)))
    path = tmp_path / "rec_raw.fif"
    raw.save(path, verbose="error")
    config = {**QUIET, "reject": reject, "eeg_reference": None, "l_freq": None}
    ep, _ = preprocess_recording(path, config)
    log = ep.attrs["dropped_epochs"]
    assert [r["epoch"] for r in log] == [4]
    assert log[0]["onset"] == 13.0
    assert "F3" in log[0]["reason"] and "peak-to-peak" in log[0]["reason"]
    assert ep.sizes["epoch"] == len(onsets) - 1
    assert 13.0 not in ep["onset"].values
    assert list(ep["event_index"].values) == [0, 1, 2, 3, 5, 6, 7, 8, 9][: ep.sizes["epoch"]]


@pytest.mark.filterwarnings("ignore:FastICA did not converge")
def test_ica_removes_eog_component(rng, tmp_path):
    """ICA with an EOG channel excludes at least one component and keeps the shapes."""
    raw = synthetic_raw(rng, n_eeg=8, sfreq=100.0, duration=40.0, eog=True)
    blinks = np.zeros(raw.n_times)
    for start in rng.integers(0, raw.n_times - 30, 25):
        blinks[start : start + 30] += np.hanning(30) * 2e-4
    raw._data[:8] += np.linspace(1.0, 0.1, 8)[:, None] * blinks
    raw._data[8] += blinks
    raw.set_annotations(mne.Annotations([5.0, 15.0, 25.0], 0.0, ["s"] * 3))
    path = tmp_path / "rec_raw.fif"
    raw.save(path, verbose="error")
    config = {
        **QUIET,
        "spatial_filter": "ica",
        "ica_n_components": 7,
        "ica_eog_threshold": 2.0,
        "ica_max_iterations": 2000,
        "l_freq": None,
    }
    ep, _ = preprocess_recording(path, config)
    assert ep.attrs["ica"]["labelling"] in ("eog-correlation", "mne-icalabel")
    assert len(ep.attrs["ica"]["excluded"]) >= 1
    assert ep["epochs"].shape == (3, 8, 101)


@pytest.mark.parametrize(
    ("line", "sfreq", "h_freq", "expected"),
    [
        (50.0, 1000.0, None, [50.0 * i for i in range(1, 10)]),
        (60.0, 250.0, None, [60.0, 120.0]),
        (50.0, 250.0, 40.0, []),
        (50.0, 500.0, 45.0, [50.0]),
        (None, 500.0, None, []),
    ],
)
def test_notch_frequencies(line, sfreq, h_freq, expected):
    assert notch_frequencies(line, sfreq, h_freq, "auto") == expected


def test_drop_log_for_duplicates_edges_and_bad_annotations(rng, tmp_path):
    """Every event that yields no epoch appears in the log with its reason."""
    raw = synthetic_raw(rng, n_eeg=7, sfreq=100.0, duration=12.0)
    raw.set_annotations(
        mne.Annotations(
            [2.0, 2.0, 5.0, 8.0, 11.9, 7.9],
            [0, 0, 0, 0, 0, 0.3],
            ["a", "b", "a", "b", "a", "BAD_x"],
        )
    )
    path = tmp_path / "rec_raw.fif"
    raw.save(path, verbose="error")
    ep, cont = preprocess_recording(path, QUIET)
    log = {r["epoch"]: (r["onset"], r["reason"]) for r in ep.attrs["dropped_epochs"]}
    assert log == {
        1: (2.0, "another event at the same sample"),
        3: (8.0, "overlaps annotation 'BAD_x'"),
        4: (11.9, "epoch window extends past the edge of the recording"),
    }
    assert list(ep["event_index"].values) == [0, 2]
    assert ep.attrs["n_events"] == 5 and cont.sizes["event"] == 5

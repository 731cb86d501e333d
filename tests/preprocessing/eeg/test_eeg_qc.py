"""Quality control of preprocessed EEG: spectra, bad channels, drop log, evoked responses."""

from __future__ import annotations

import mne
import numpy as np
import pytest
from eeg_helpers import events_table, synthetic_raw

from neuroflow.artifacts import build_provenance, open_dataset, read_provenance
from neuroflow.preprocessing.eeg import preprocess_eeg_epochs, preprocess_eeg_recording
from neuroflow.qc import qc_eeg_recording
from neuroflow.qc.eeg import EEG_QC_FIGURES, eeg_qc_dataset, eeg_qc_figures, psd_welch
from neuroflow.variables import undescribed


def _provenance(stage: str, config: dict) -> dict:
    return build_provenance(stage=stage, version="abc", config=config)


@pytest.fixture
def processed(rng, make_bids, tmp_path):
    """A recording with line noise, a flat and a status-bad channel and one artefact."""
    raw = synthetic_raw(rng, n_eeg=9, sfreq=250.0, duration=41.0)
    times = raw.times
    raw._data[:9] += 4e-6 * np.sin(2 * np.pi * 50.0 * times)  # line noise
    raw._data[2] = 0.0  # Pz flat
    onsets = np.arange(2.0, 38.0, 2.3)  # 16 events
    artefact = round(onsets[5] * 250.0) + 50
    raw._data[5, artefact : artefact + 5] += 8e-4  # C3 artefact in the 6th epoch
    recording = make_bids(raw, events_table(onsets, 250.0), status={"F4": "bad"})
    config = {
        "h_freq": None,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "reject": {"eeg": 2e-4},
        "conditions": {"face": "faces", "house": "houses"},
    }
    epochs, continuous = preprocess_eeg_recording(
        recording=recording,
        epochs_output=tmp_path / "ep.zarr",
        continuous_output=tmp_path / "cont.zarr",
        config=config,
        provenance=_provenance("preprocess_eeg", config),
    )
    return recording, epochs, continuous, onsets


def test_qc_dataset_measures(processed):
    """Spectra, bad channels, drop log, counts and ERPs match independent computations."""
    recording, epochs_path, cont_path, onsets = processed
    qc = eeg_qc_dataset(recording=recording, epochs_store=epochs_path, continuous_store=cont_path)
    assert undescribed(qc) == []
    ep, cont = open_dataset(epochs_path), open_dataset(cont_path)
    freqs = qc["frequency"].values
    at50 = int(np.argmin(np.abs(freqs - 50.0)))
    assert freqs[at50] == pytest.approx(50.0)
    # the notch removes the planted line noise: >= 20 dB less power at 50 Hz
    good = [c for c in qc["channel"].values if c not in ("Pz", "F4")]
    before = qc["psd_before"].sel(channel=good).values[:, at50]
    after = qc["psd_after"].sel(channel=good).values[:, at50]
    assert np.all(before / after > 100)
    expected, expected_freqs = psd_welch(cont["eeg"].values, 250.0, 125.0, 500)
    np.testing.assert_allclose(expected_freqs, freqs)
    np.testing.assert_allclose(qc["psd_after"].values, expected, rtol=1e-5)
    # bad channels with their reasons
    reasons = dict(zip(qc["bad_channel"].values, qc["bad_reason"].values, strict=True))
    assert set(reasons) == {"F4", "Pz"}
    assert "channels tsv" in reasons["F4"] and "flat" in reasons["Pz"]
    assert qc["bad_interpolated"].values.all()
    # drop log: every event, one dropped by peak-to-peak, conditions counted
    assert qc.sizes["event"] == len(onsets)
    np.testing.assert_allclose(qc["event_onset"].values, onsets)
    dropped = np.flatnonzero(~qc["event_kept"].values)
    assert dropped.tolist() == [5]
    assert "peak-to-peak" in str(qc["drop_reason"].values[5])
    assert str(qc["event_condition"].values[5]) == "houses"
    assert qc["n_events"].sel(condition="houses").item() == 8
    assert qc["n_kept"].sel(condition="houses").item() == 7
    assert qc["n_kept"].sel(condition="faces").item() == 8
    # ERPs: the mean of the kept epochs, overall and per condition
    np.testing.assert_allclose(
        qc["erp"].sel(erp_condition="all").values, ep["epochs"].values.mean(0), atol=1e-12
    )
    houses = ep["condition"].values.astype(object) == "houses"
    np.testing.assert_allclose(
        qc["erp"].sel(erp_condition="houses").values,
        ep["epochs"].values[houses].mean(0),
        atol=1e-12,
    )
    assert list(qc["erp_condition"].values) == ["all", "faces", "houses"]
    assert "ica_excluded" not in qc


def test_qc_stage_writes_store_and_figures(processed, tmp_path):
    """The stage entry point writes the store and one PNG per figure kind."""
    recording, epochs_path, cont_path, _ = processed
    store, plots = qc_eeg_recording(
        recording=recording,
        epochs_store=epochs_path,
        continuous_store=cont_path,
        output=tmp_path / "qc.zarr",
        plots=tmp_path / "qc",
        prefix="sub-01_task-vis_run-1",
        config={"enabled": True, "dpi": 60},
        provenance=_provenance("qc_eeg", {"enabled": True, "dpi": 60}),
    )
    qc = open_dataset(store)
    assert qc["psd_after"].dims == ("channel", "frequency")
    assert read_provenance(store)["stage"] == "qc_eeg"
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(f"sub-01_task-vis_run-1_qc-{k}.png" for k in EEG_QC_FIGURES)
    assert all((plots / n).stat().st_size > 5000 for n in names)


def test_qc_of_epoched_input_without_positions(rng, tmp_path):
    """Epochs files (no continuous store, no positions) get spectra and figures too."""
    raw = synthetic_raw(rng, n_eeg=5, sfreq=200.0, duration=40.0)
    onsets = np.arange(1.0, 37.0, 1.7)
    kinds = ["a", "b", "c"] * (len(onsets) // 3) + ["a"] * (len(onsets) % 3)
    event_id = {k: i + 1 for i, k in enumerate("abc")}
    events = np.column_stack(
        [
            np.round(onsets * 200).astype(int),
            np.zeros(len(onsets), int),
            [event_id[k] for k in kinds],
        ]
    )
    epochs = mne.Epochs(
        raw, events, event_id, -0.1, 0.5, baseline=None, preload=True, verbose="error"
    )
    path = tmp_path / "sub-01_task-x_epo.fif"
    epochs.save(path, verbose="error")
    config = {
        "find_flat_channels": False,
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "epochs_tmin": -0.1,
        "epochs_tmax": 0.5,
    }
    store = preprocess_eeg_epochs(
        recording=path,
        epochs_output=tmp_path / "ep.zarr",
        config=config,
        provenance=_provenance("preprocess_eeg", config),
    )
    qc = eeg_qc_dataset(recording=path, epochs_store=store)
    assert qc.sizes["channel"] == 5 and qc.sizes["bad_channel"] == 0
    assert qc["event_kept"].values.all()
    assert qc["n_kept"].values.tolist() == [kinds.count(k) for k in "abc"]
    assert np.isfinite(qc["psd_before"].values).all()
    assert qc["frequency"].values[-1] <= 100.0
    paths = eeg_qc_figures(qc, out_dir=tmp_path / "figs", prefix="sub-01_task-x", dpi=50)
    assert [p.name for p in paths] == [f"sub-01_task-x_qc-{k}.png" for k in EEG_QC_FIGURES]


def test_qc_refuses_a_recording_without_the_stored_channels(processed, rng, tmp_path):
    """A recording whose channels are not the store's fails with both named."""
    _, epochs_path, cont_path, _ = processed
    other = mne.io.RawArray(
        rng.standard_normal((2, 2500)) * 1e-6,
        mne.create_info(["X1", "X2"], 250.0, "eeg"),
        verbose="error",
    )
    other.set_meas_date(None)
    path = tmp_path / "other_raw.fif"
    other.save(path, verbose="error")
    with pytest.raises(ValueError, match=r"other_raw\.fif.*preprocessed channels"):
        eeg_qc_dataset(recording=path, epochs_store=epochs_path, continuous_store=cont_path)


def test_spectra_are_computed_by_channel_group_with_progress(rng, caplog):
    import logging
    import re

    data = rng.standard_normal((3, 23, 400))  # epochs, channels, times
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        psd, freqs = psd_welch(data, 200.0, 60.0, 128, "spectra")
    # the same as one call over every channel
    ref, ref_freqs = mne.time_frequency.psd_array_welch(
        data, 200.0, fmin=0.0, fmax=60.0, n_fft=128, n_per_seg=128, verbose="error"
    )
    np.testing.assert_allclose(freqs, ref_freqs)
    np.testing.assert_allclose(psd, ref.mean(axis=0), rtol=1e-12)
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    assert len(lines) == 10, lines
    assert all(re.search(r"^spectra: \d+% \(\d+/23 channels\), [\d,.]+/s, ", s) for s in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]

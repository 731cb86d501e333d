"""PREP bad-channel detection and autoreject epoch rejection beside the heuristics.

Each option flags the channels and epochs planted in a generated recording, and its
numbers equal those of the library called directly on the same data.
"""

from __future__ import annotations

import importlib.util
import sys

import mne
import numpy as np
import pandas as pd
import pytest
from eeg_helpers import events_table

from neuroflow.extras import MissingExtraError
from neuroflow.preprocessing.eeg import preprocess_recording, resolve_config
from neuroflow.preprocessing.eeg.bads import find_bad_channels_pyprep
from neuroflow.preprocessing.eeg.rejection import (
    reject_autoreject,
    reject_autoreject_global,
    reject_epochs,
)

NAMES = ["Fp1", "Fp2", "F7", "F3", "Fz", "F4", "F8", "T7", "C3", "Cz", "C4", "T8", "P7",
         "P3", "Pz", "P4", "P8", "O1", "O2"]  # fmt: skip
NOISY, FLAT = "C4", "P7"
ARTEFACT_EPOCHS = [3, 11, 17]

needs_pyprep = pytest.mark.skipif(
    importlib.util.find_spec("pyprep") is None,
    reason="pyprep is not installed (pip install 'neuroflow[eegclean]')",
)
needs_autoreject = pytest.mark.skipif(
    importlib.util.find_spec("autoreject") is None,
    reason="autoreject is not installed (pip install 'neuroflow[eegclean]')",
)


def _recording(rng: np.random.Generator, *, duration: float = 61.3) -> mne.io.RawArray:
    """19 channels with 10-20 positions sharing 4 smooth sources; C4 noisy, P7 flat."""
    sfreq = 200.0
    n_times = int(duration * sfreq)
    t = np.arange(n_times) / sfreq
    sources = np.vstack(
        [
            np.sin(2 * np.pi * 10.0 * t + rng.uniform(0, np.pi)),
            np.sin(2 * np.pi * 6.3 * t + rng.uniform(0, np.pi)),
            np.cumsum(rng.standard_normal((2, n_times)), axis=1) * 0.05,
        ]
    )
    sources -= sources.mean(axis=1, keepdims=True)
    mixing = rng.uniform(0.6, 1.4, (len(NAMES), len(sources)))
    data = (mixing @ sources) * 1e-5 + rng.standard_normal((len(NAMES), n_times)) * 1e-6
    data[NAMES.index(NOISY)] = rng.standard_normal(n_times) * 2e-4
    data[NAMES.index(FLAT)] = 0.0
    raw = mne.io.RawArray(data, mne.create_info(NAMES, sfreq, "eeg"), verbose="error")
    raw.set_montage("standard_1020", verbose="error")
    return raw


def _clean(raw: mne.io.RawArray) -> mne.io.RawArray:
    """``raw`` with its noisy and flat channels replaced by scaled neighbours."""
    raw._data[NAMES.index(NOISY)] = raw._data[NAMES.index("C3")] * 0.9
    raw._data[NAMES.index(FLAT)] = raw._data[NAMES.index("P3")] * 1.1
    return raw


def _plant_artefacts(raw: mne.io.RawArray, onsets: np.ndarray) -> None:
    """Add 300 µV for 150 ms to 12 channels 200 ms after the onsets of ARTEFACT_EPOCHS."""
    for i in ARTEFACT_EPOCHS:
        start = round(onsets[i] * raw.info["sfreq"]) + 40
        raw._data[:12, start : start + 30] += 3e-4


def _epochs(rng: np.random.Generator) -> mne.Epochs:
    """24 epochs of 19 clean channels; epochs 3, 11, 17 hold a large artefact."""
    raw = _clean(_recording(rng))
    onsets = np.arange(24) * 2.4 + 1.0
    _plant_artefacts(raw, onsets)
    samples = np.round(onsets * raw.info["sfreq"]).astype(int)
    events = np.column_stack([samples, np.zeros(24, int), np.ones(24, int)])
    return mne.Epochs(
        raw, events, tmin=-0.2, tmax=0.8, baseline=None, preload=True, verbose="error"
    )


# -- pyprep ---------------------------------------------------------------------------


@needs_pyprep
def test_pyprep_flags_planted_channels_as_pyprep_does(rng):
    """NoisyChannels flags the noisy and the flat channel; same lists as pyprep directly."""
    import pyprep

    raw = _recording(rng)
    raw.info["bads"] = ["Fp1"]  # already bad: not reported again
    picks = np.arange(len(NAMES))
    found = find_bad_channels_pyprep(raw, picks, ransac=False, random_state=7)
    assert NOISY in found["pyprep_deviation"]
    assert found["pyprep_flat"] == [FLAT]
    assert all("Fp1" not in names for names in found.values())

    direct = pyprep.NoisyChannels(raw.copy(), do_detrend=True, random_state=7)
    direct.find_all_bads(ransac=False)
    expected = direct.get_bads(as_dict=True)
    for key, names in found.items():
        criterion = "bad_by_" + key.removeprefix("pyprep_")
        assert names == [n for n in expected[criterion] if n != "Fp1"], key


@needs_pyprep
def test_pyprep_ransac_is_seeded(rng):
    """RANSAC runs with positions; the same seed gives the same channels as pyprep."""
    import pyprep

    raw = _recording(rng, duration=40.7)
    found = find_bad_channels_pyprep(raw, np.arange(len(NAMES)), ransac=True, random_state=3)
    direct = pyprep.NoisyChannels(raw.copy(), do_detrend=True, random_state=3)
    direct.find_all_bads(ransac=True)
    assert found["pyprep_ransac"] == direct.get_bads(as_dict=True)["bad_by_ransac"]
    assert NOISY in set().union(*found.values())


@needs_pyprep
def test_stage_with_pyprep_records_the_method(rng, make_bids):
    """The stage flags the planted channels with pyprep and says so in its attributes."""
    raw = _recording(rng)
    onsets = np.arange(2.0, 58.0, 3.1)
    recording = make_bids(raw, events_table(onsets, raw.info["sfreq"]), electrodes=False)
    config = {
        "bad_channels_method": "pyprep",
        "pyprep_ransac": False,
        "eeg_template_montage": "standard_1020",
        "notch_freq": None,
        "amplitude_bounds": {"min_sd": None, "max_sd": None, "action": "error"},
    }
    ep, cont = preprocess_recording(recording, config)
    flagged = set(ep.attrs["bad_channels"])
    assert {NOISY, FLAT} <= flagged
    assert all(k.startswith(("pyprep_", "channels_tsv")) for k in ep.attrs["bad_channel_reasons"])
    assert ep.attrs["bad_channels_method"] == cont.attrs["bad_channels_method"] == "pyprep"
    assert ep.attrs["reject_method"] == "none"
    assert set(ep.attrs["interpolated_channels"]) == flagged


def test_missing_extra_names_the_extra(rng, monkeypatch):
    """Without pyprep / autoreject the error names the module and the extra."""
    monkeypatch.setitem(sys.modules, "pyprep", None)
    monkeypatch.setitem(sys.modules, "autoreject", None)
    raw = _recording(rng, duration=5.3)
    with pytest.raises(
        MissingExtraError, match=r"needs the module 'pyprep'.*pip install 'neuroflow\[eegclean\]'"
    ):
        find_bad_channels_pyprep(raw, np.arange(3), ransac=False, random_state=0)
    epochs = mne.make_fixed_length_epochs(raw, duration=0.5, preload=True, verbose="error")
    config = resolve_config({"reject_method": "autoreject_global"})
    with pytest.raises(
        MissingExtraError,
        match=r"autoreject_global`.*needs the module 'autoreject'.*neuroflow\[eegclean\]",
    ):
        reject_epochs(epochs, config)


# -- autoreject -----------------------------------------------------------------------


@needs_autoreject
def test_autoreject_global_drops_planted_epochs_as_autoreject_does(rng):
    """The global limit drops the artefact epochs; limit and drops equal autoreject's."""
    import autoreject

    epochs = _epochs(rng)
    direct = epochs.copy()
    reasons, limits = reject_autoreject_global(epochs, random_state=5)
    assert sorted(reasons) == ARTEFACT_EPOCHS
    assert "autoreject's global limit" in reasons[ARTEFACT_EPOCHS[0]]
    expected = autoreject.get_rejection_threshold(
        direct, ch_types=["eeg"], random_state=5, cv=5, verbose=False
    )
    assert limits == pytest.approx({"eeg": expected["eeg"]}, rel=1e-12)
    direct.drop_bad(reject=expected, verbose="error")
    np.testing.assert_array_equal(epochs.selection, direct.selection)
    np.testing.assert_array_equal(epochs.get_data(), direct.get_data())


@needs_autoreject
@pytest.mark.slow
def test_autoreject_local_drops_planted_epochs_as_autoreject_does(rng):
    """Local autoreject drops the artefact epochs; log and data equal AutoReject's."""
    import autoreject

    epochs = _epochs(rng)
    direct = epochs.copy()
    reasons, log = reject_autoreject(epochs, random_state=5)
    assert sorted(reasons) == ARTEFACT_EPOCHS
    ar = autoreject.AutoReject(picks=NAMES, cv=10, random_state=5, verbose=False)
    ar.fit(direct)
    cleaned, direct_log = ar.transform(direct, return_log=True)
    np.testing.assert_array_equal(log.bad_epochs, direct_log.bad_epochs)
    np.testing.assert_array_equal(log.labels, direct_log.labels)
    np.testing.assert_array_equal(epochs.selection, cleaned.selection)
    np.testing.assert_allclose(epochs.get_data(), cleaned.get_data(), rtol=0, atol=0)


def test_autoreject_refusals(rng):
    """Too few epochs, no positions, and `reject` beside autoreject are refused."""
    raw = _recording(rng, duration=6.1)
    epochs = mne.make_fixed_length_epochs(raw, duration=1.0, preload=True, verbose="error")
    with pytest.raises(ValueError, match=r"needs at least 10 epochs, got 6 in rec\.vhdr"):
        reject_autoreject(epochs, random_state=0, path="rec.vhdr")
    long = mne.make_fixed_length_epochs(
        _recording(rng, duration=12.2), duration=1.0, preload=True, verbose="error"
    )
    long.set_montage(None)
    with pytest.raises(ValueError, match=r"needs the position of every EEG channel.*Fp1"):
        reject_autoreject(long, random_state=0, path="rec.vhdr")
    with pytest.raises(ValueError, match=r"`reject` must be null when `reject_method` is"):
        resolve_config({"reject_method": "autoreject", "reject": {"eeg": 1e-4}})
    with pytest.raises(ValueError, match=r"`reject_method` must be one of"):
        resolve_config({"reject_method": "ransac"})
    with pytest.raises(ValueError, match=r"`bad_channels_method` must be one of"):
        resolve_config({"bad_channels_method": "prep"})


@needs_autoreject
def test_stage_with_autoreject_global_logs_the_drops(rng, make_bids):
    """The stage drops the artefact epochs with autoreject_global and records the method."""
    raw = _clean(_recording(rng))
    onsets = np.arange(2.0, 58.0, 2.5)
    _plant_artefacts(raw, onsets)
    recording = make_bids(raw, events_table(onsets, raw.info["sfreq"]), electrodes=False)
    config = {
        "reject_method": "autoreject_global",
        "find_noisy_channels": False,
        "find_uncorrelated_channels": False,
        "notch_freq": None,
    }
    ep, _ = preprocess_recording(recording, config)
    dropped = pd.DataFrame(ep.attrs["dropped_epochs"])
    # the learnt limit may also catch a clean epoch at the edge of the amplitude range
    assert set(ARTEFACT_EPOCHS) <= set(dropped["epoch"]) and len(dropped) <= 5
    assert dropped["reason"].str.contains("autoreject's global limit").all()
    assert ep.attrs["reject_method"] == "autoreject_global"
    assert ep.attrs["bad_channels_method"] == "heuristic"

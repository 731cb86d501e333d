"""Inputs the demo never has: short stored epochs, implausible units, event-free recordings."""

from __future__ import annotations

import logging
from pathlib import Path

import jsonschema
import mne
import numpy as np
import pytest
import yaml
from dataset_shapes.eeg_inputs import make_eeg_inputs
from eeg_helpers import events_table, synthetic_raw

from neuroflow.artifacts import build_provenance, open_dataset
from neuroflow.io.records import EegRecording
from neuroflow.preprocessing.eeg import (
    preprocess_eeg_recording,
    preprocess_epochs,
    preprocess_recording,
    recording_from_path,
    resolve_config,
)
from neuroflow.preprocessing.eeg.amplitude import amplitude_problem
from neuroflow.preprocessing.eeg.config import CONTINUOUS_WINDOW, epoch_window
from neuroflow.preprocessing.eeg.read import read_epochs_window
from neuroflow.preprocessing.eeg.window import check_epoch_windows

REPO = Path(__file__).resolve().parents[3]
QUIET = {"find_noisy_channels": False, "find_uncorrelated_channels": False}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("eeg_inputs") / "bids"
    return root, make_eeg_inputs(root, seed=3)


def _recording(root: Path, facts: dict, epoched: bool) -> EegRecording:
    (rec,) = [r for r in facts["recordings"] if r["epoched"] == epoched]
    ext = "set" if epoched else "vhdr"
    return recording_from_path(root / f"sub-{rec['subject']}" / "eeg" / f"{rec['key']}_eeg.{ext}")


def _write(recording: EegRecording, out: Path, config: dict) -> tuple[Path, Path]:
    return preprocess_eeg_recording(
        recording=recording,
        epochs_output=out / "epochs.zarr",
        continuous_output=out / "continuous.zarr",
        config=config,
        provenance=build_provenance(stage="preprocess_eeg", version="0", config=config),
    )


# ------------------------------------------------------------------ epoch window
def test_epoch_window_resolves_auto():
    assert epoch_window({}) == CONTINUOUS_WINDOW == (-0.2, 0.8)
    assert epoch_window(resolve_config(None)) == (-0.2, 0.8)  # the demo's window
    assert epoch_window({"epochs_tmin": "auto", "epochs_tmax": "auto"}, (-0.06, 0.08)) == (
        -0.06,
        0.08,
    )
    assert epoch_window({"epochs_tmin": -0.05, "epochs_tmax": "auto"}, (-0.06, 0.08)) == (
        -0.05,
        0.08,
    )
    assert epoch_window({"epochs_tmin": -0.1, "epochs_tmax": 0.3}, (-0.5, 1.0)) == (-0.1, 0.3)
    with pytest.raises(
        ValueError, match=r"`epochs_tmin` must be a number \(s\) or 'auto', got 'x'"
    ):
        epoch_window({"epochs_tmin": "x"})
    with pytest.raises(ValueError, match=r"`epochs_tmax` must be a number \(s\) or 'auto', got "):
        resolve_config({"epochs_tmax": float("nan")})
    resolve_config({"epochs_tmin": 0.9})  # only resolved per recording


def test_schema_accepts_auto_and_amplitude_bounds():
    schema = yaml.safe_load((REPO / "workflow/schemas/preprocess_eeg.schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"epochs_tmin": "auto", "epochs_tmax": 0.5})
    validator.validate({"amplitude_bounds": {"max_sd": 0.01, "action": "warn"}})
    for bad in (
        {"epochs_tmin": "automatic"},
        {"amplitude_bounds": {"action": "exclude"}},
        {"amplitude_bounds": {"max_sd": 0}},
        {"amplitude_bounds": {"max": 1.0}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)


def test_epoched_eeglab_defaults_to_its_own_window(inputs):
    """Epochs stored over [-0.06, 0.08] s run with the defaults and match MNE's steps."""
    root, facts = inputs
    recording = _recording(root, facts, epoched=True)
    assert recording.epoched
    ds = preprocess_epochs(recording, QUIET)
    assert ds.attrs["epochs_window"] == pytest.approx([-0.06, 0.08])
    np.testing.assert_allclose(ds["time"].values[[0, -1]], [-0.06, 0.08], atol=1e-9)
    assert ds.sizes == {"epoch": 40, "channel": 16, "time": 36}
    assert sorted(set(ds["condition"].values)) == ["face", "scrambled"]
    ref = mne.read_epochs_eeglab(recording.eeg, verbose="error")
    ref.filter(None, 40.0, verbose="error").set_eeg_reference("average", verbose="error")
    ref.apply_baseline((None, 0.0), verbose="error")
    scale = float(np.abs(ref.get_data()).max())
    np.testing.assert_allclose(ds["epochs"].values, ref.get_data(), atol=1e-5 * scale)


def test_explicit_window_outside_the_stored_epochs(inputs):
    root, facts = inputs
    recording = _recording(root, facts, epoched=True)
    name = r"sub-01_task-faces_eeg\.set"
    with pytest.raises(
        ValueError,
        match=rf"must lie within the epochs of .*{name}, got \[-0\.2, 0\.8\] s for epochs "
        r"spanning \[-0\.06, 0\.08\] s",
    ):
        preprocess_epochs(recording, {**QUIET, "epochs_tmin": -0.2, "epochs_tmax": 0.8})


def test_plan_check_reads_headers_only(inputs, monkeypatch, rng, tmp_path):
    """The plan-time check names the file, its window and the configured one."""
    root, facts = inputs
    epoched = _recording(root, facts, epoched=True)
    continuous = _recording(root, facts, epoched=False)

    def no_data(*args, **kwargs):
        raise AssertionError("the plan must not load epochs")

    monkeypatch.setattr(mne, "read_epochs_eeglab", no_data)
    windows = check_epoch_windows([epoched, continuous], {})
    assert windows[epoched.key] == pytest.approx((-0.06, 0.08))
    assert windows[continuous.key] == (-0.2, 0.8)
    with pytest.raises(
        ValueError,
        match=r"sub-01_task-faces_eeg\.set, got \[-0\.2, 0\.8\] s for epochs spanning "
        r"\[-0\.06, 0\.08\] s instead.*\(configured: \[-0\.2, 0\.8\]\.\)",
    ):
        check_epoch_windows([epoched], {"epochs_tmin": -0.2, "epochs_tmax": 0.8})
    with pytest.raises(ValueError, match=r"configured: \[auto, 0\.5\]"):
        check_epoch_windows([epoched], {"epochs_tmin": "auto", "epochs_tmax": 0.5})
    with pytest.raises(
        ValueError,
        match=r"below `epochs_tmax` for the continuous recording .*sub-02_task-rest_eeg\.vhdr, "
        r"got \[0\.9, auto\] \(resolved to \[0\.9, 0\.8\] s\)",
    ):
        check_epoch_windows([continuous], {"epochs_tmin": 0.9})
    # FIF epochs: the header (preload=False) gives the same window as the data
    data = rng.standard_normal((5, 3, 47)) * 1e-6
    epochs = mne.EpochsArray(data, mne.create_info(3, 125.0, "eeg"), tmin=-0.128, verbose="error")
    path = tmp_path / "sub-09_task-x_epo.fif"
    epochs.save(path, verbose="error")
    assert read_epochs_window(path) == pytest.approx((epochs.tmin, epochs.tmax, 125.0))


# ------------------------------------------------------------------ amplitudes
def test_amplitude_problem():
    bounds = {"min_sd": 1e-8, "max_sd": 1e-3}
    assert amplitude_problem(2e-5, bounds) is None
    assert amplitude_problem(465.0, bounds) == "above"
    assert amplitude_problem(1e-11, bounds) == "below"
    assert amplitude_problem(465.0, {"min_sd": None, "max_sd": None}) is None
    assert amplitude_problem(float("nan"), bounds) is None
    with pytest.raises(ValueError, match=r"`amplitude_bounds\.min_sd` must be below"):
        resolve_config({"amplitude_bounds": {"min_sd": 1e-3, "max_sd": 1e-6}})
    with pytest.raises(ValueError, match=r"`amplitude_bounds\.action` must be one of"):
        resolve_config({"amplitude_bounds": {"action": "drop"}})


@pytest.mark.parametrize(
    ("scale", "match"),
    [
        (1e6, r"must be at most 0\.01 V \(`amplitude_bounds\.max_sd`\), got [0-9.]+ V instead"),
        (1e-6, r"must be at least 1e-08 V \(`amplitude_bounds\.min_sd`\), got [0-9.]+e-1[0-9] V"),
    ],
)
def test_implausible_units_stop_the_stage(rng, make_bids, tmp_path, scale, match):
    """Samples 10^6 off fail naming the file, the _channels.tsv units, the SD and the bound."""
    raw = synthetic_raw(rng, n_eeg=9, sfreq=250.0, duration=24.0)
    expected_sd = float(np.median(raw.copy().filter(0.1, 40.0, verbose="error").get_data().std(1)))
    raw._data *= scale
    recording = make_bids(raw, events_table(np.arange(2.0, 23.0, 3.0), 250.0))
    with pytest.raises(ValueError, match=match) as err:
        _write(recording, tmp_path / "out", QUIET)
    message = str(err.value)
    assert str(recording.eeg) in message
    assert f"{recording.channels} gives their 'units' as 'V'" in message
    measured = float(message.split("got ")[1].split(" V")[0])
    assert measured == pytest.approx(expected_sd * scale, rel=0.05)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_implausible_units_with_warn_action(rng, make_bids, tmp_path, caplog):
    raw = synthetic_raw(rng, n_eeg=9, sfreq=250.0, duration=24.0)
    raw._data *= 1e6
    recording = make_bids(raw, events_table(np.arange(2.0, 23.0, 3.0), 250.0))
    config = {**QUIET, "amplitude_bounds": {"action": "warn"}}
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        epochs_path, _ = _write(recording, tmp_path / "out", config)
    (record,) = [r for r in caplog.records if "amplitude_bounds" in r.getMessage()]
    assert "is kept" in record.getMessage() and str(recording.eeg) in record.getMessage()
    assert open_dataset(epochs_path).attrs["median_channel_sd"] > 1.0


def test_implausible_units_of_epoched_input(rng, tmp_path):
    data = rng.standard_normal((9, 7, 61)) * 1e-5 * 1e6
    epochs = mne.EpochsArray(data, mne.create_info(7, 100.0, "eeg"), tmin=-0.1, verbose="error")
    path = tmp_path / "sub-01_task-x_epo.fif"
    epochs.save(path, verbose="error")
    with pytest.raises(ValueError, match=r"sub-01_task-x_epo\.fif .*no _channels\.tsv"):
        preprocess_epochs(path, {**QUIET, "l_freq": None})


# ------------------------------------------------------------------ event-free
def test_event_free_recording_is_preprocessed(inputs, tmp_path):
    """A resting recording without events gives both stores; the epochs store is empty."""
    root, facts = inputs
    recording = _recording(root, facts, epoched=False)
    assert recording.events is None
    epochs_path, cont_path = _write(recording, tmp_path / "out", {})
    ep, cont = open_dataset(epochs_path), open_dataset(cont_path)
    assert ep.sizes == {"epoch": 0, "channel": 16, "time": 251}
    assert ep.attrs["event_source"] == "none" and ep.attrs["n_events"] == 0
    assert ep.attrs["epochs_window"] == [-0.2, 0.8]
    assert cont.sizes == {"channel": 16, "time": 7500, "event": 0}
    assert 1e-6 < cont.attrs["median_channel_sd"] < 1e-4
    np.testing.assert_allclose(ep["time"].values[[0, -1]], [-0.2, 0.8])


def test_recording_without_any_event_source_is_event_free(rng, tmp_path):
    raw = synthetic_raw(rng, n_eeg=7, sfreq=100.0, duration=12.0)
    path = tmp_path / "quiet_raw.fif"
    raw.save(path, verbose="error")
    epochs, continuous = preprocess_recording(path, QUIET)
    assert epochs.sizes["epoch"] == 0 and epochs.attrs["event_source"] == "none"
    assert continuous.sizes["time"] == 1200


# ------------------------------------------------------------------ faces vs scrambled
#: The recipe: ds000117's stim types mapped to the faces-vs-scrambled contrast, decoded
#: over time by the classification analysis.
FACES_RECIPE = {
    "preprocess_eeg": {
        "event_column": "stim_type",
        "conditions": {"Famous": "face", "Unfamiliar": "face", "Scrambled": "scrambled"},
    },
    "decoding": {"classification": {"target": "condition"}},
}


@pytest.mark.slow
def test_faces_vs_scrambled_recipe_decodes_the_planted_n170(tmp_path):
    """The contrast decodes above chance at 150-200 ms and at chance before the image."""
    from dataset_shapes.eeg_inputs import make_faces_eeg

    from neuroflow.decoding.temporal import time_resolved_scores

    schemas = REPO / "workflow" / "schemas"
    for section, recipe in FACES_RECIPE.items():
        schema = yaml.safe_load((schemas / f"{section}.schema.yaml").read_text())
        jsonschema.Draft202012Validator(schema).validate(recipe)
    facts = make_faces_eeg(tmp_path / "bids", seed=4)
    epochs, _ = preprocess_recording(facts["eeg"], FACES_RECIPE["preprocess_eeg"])
    y = epochs["condition"].values.astype(str)
    expected = ["scrambled" if k == "Scrambled" else "face" for k in facts["stim_types"]]
    assert y.tolist() == expected
    times = epochs["time"].values
    scores = time_resolved_scores(epochs["epochs"].values, y, np.arange(len(y)), n_splits=5).mean(
        axis=0
    )
    n170 = (times >= 0.15) & (times <= 0.2)
    before = scores[times < 0].mean()
    assert abs(before - 0.5) < 0.1  # chance before the image
    assert scores[n170].mean() > max(0.65, before + 0.12), scores[n170]
    peak = times[np.argmax(np.convolve(scores, np.ones(5) / 5, mode="same"))]
    assert 0.12 <= peak <= 0.22

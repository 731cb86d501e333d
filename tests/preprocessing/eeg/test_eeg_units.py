"""Unit tests of bad-channel detection, rejection thresholds, sidecars and config files."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml
from eeg_helpers import synthetic_raw

from neuroflow.config import fill_defaults
from neuroflow.preprocessing.eeg import DEFAULT_CONFIG, recording_from_path
from neuroflow.preprocessing.eeg.bads import (
    find_bad_channels,
    find_flat,
    find_noisy,
    find_uncorrelated,
    neighbours,
)
from neuroflow.preprocessing.eeg.rejection import describe_drop, ptp_thresholds
from neuroflow.preprocessing.eeg.sidecars import (
    read_channels_tsv,
    read_electrodes_tsv,
    read_events_tsv,
)

REPO = Path(__file__).resolve().parents[3]


def test_flat_and_noisy(rng):
    std = rng.uniform(0.9e-5, 1.1e-5, 9)
    std[2], std[6] = 1e-9, 8e-5
    flat = find_flat(std, 1e-7)
    assert np.flatnonzero(flat).tolist() == [2]
    assert np.flatnonzero(find_noisy(std, 5.0, flat)).tolist() == [6]
    assert not find_noisy(std[:2], 5.0, np.zeros(2, bool)).any()  # too few channels


def test_uncorrelated_channel_found(rng):
    shared = rng.standard_normal((7, 1, 50))
    windows = shared + 0.3 * rng.standard_normal((7, 8, 50))
    windows[:, 5] = rng.standard_normal((7, 50))
    nb = neighbours(None, 8)
    assert all(i not in n for i, n in enumerate(nb))
    found = find_uncorrelated(windows, nb, 0.4, np.zeros(8, bool))
    assert np.flatnonzero(found).tolist() == [5]
    excluded = np.zeros(8, bool)
    excluded[5] = True
    assert not find_uncorrelated(windows, nb, 0.4, excluded).any()


def test_neighbours_by_position(rng):
    pos = rng.standard_normal((9, 3))
    pos[4] = pos[0] + 1e-3
    nb = neighbours(pos, 9, k=3)
    assert nb[0][0] == 4 and len(nb[0]) == 3


def test_find_bad_channels_on_raw(rng):
    raw = synthetic_raw(rng, n_eeg=9, sfreq=100.0, duration=20.0)
    shared = rng.standard_normal(raw.n_times) * 1e-5
    raw._data[:] = (
        rng.uniform(0.8, 1.2, (9, 1)) * shared + rng.standard_normal(raw._data.shape) * 3e-6
    )
    raw._data[1] = 0.0
    raw._data[4] *= 50.0
    raw._data[7] = rng.standard_normal(raw.n_times) * 1e-5
    raw.info["bads"] = ["P4"]
    found = find_bad_channels(
        raw,
        np.arange(9),
        flat_threshold=1e-7,
        noisy_z_threshold=5.0,
        correlation_threshold=0.4,
    )
    assert found == {"flat": ["Cz"], "noisy": ["F4"], "uncorrelated": ["P3"]}


def test_ptp_thresholds_and_reasons(rng):
    ptp = rng.uniform(1.0, 2.0, (9, 7))
    thr = ptp_thresholds(ptp, 3.0)
    med = np.median(ptp, axis=0)
    np.testing.assert_allclose(thr, med + 3.0 * 1.4826 * np.median(np.abs(ptp - med), axis=0))
    assert "edge of the recording" in describe_drop(("TOO_SHORT",), None)
    assert "'BAD_blink'" in describe_drop(("BAD_blink",), None)
    assert describe_drop(("Fz", "Cz"), {"eeg": 1e-4}).endswith("(eeg 0.0001 V) on Fz, Cz")


def test_channels_tsv_types_and_status(tmp_path):
    path = tmp_path / "sub-01_channels.tsv"
    pd.DataFrame(
        {
            "name": ["Fz", "HEOG", "TRIG"],
            "type": ["EEG", "heog", "TRIG"],
            "status": ["good", "bad", "n/a"],
        }
    ).to_csv(path, sep="\t", index=False)
    table = read_channels_tsv(path)
    assert table["mne_type"].tolist() == ["eeg", "eog", "stim"]
    assert table["status"].tolist() == ["good", "bad", "good"]
    pd.DataFrame({"name": ["Fz"], "type": ["BRAIN"]}).to_csv(path, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"sub-01_channels\.tsv field 'type' must be one of"):
        read_channels_tsv(path)


def test_electrodes_units_inferred_from_radius(tmp_path):
    path = tmp_path / "sub-01_electrodes.tsv"
    pd.DataFrame(
        {"name": ["Fz", "Cz", "GND"], "x": [0, 0, "n/a"], "y": [60, 0, 1], "z": [60, 85, 1]}
    ).to_csv(path, sep="\t", index=False)
    pos = read_electrodes_tsv(path)
    assert sorted(pos) == ["Cz", "Fz"]
    np.testing.assert_allclose(pos["Cz"], [0.0, 0.0, 0.085])


def test_events_tsv_na_rows_and_value_fallback(tmp_path):
    path = tmp_path / "sub-01_task-a_events.tsv"
    path.write_text(
        "onset\tduration\tvalue\tstim_file\n1.5\t0\t3\ta.png\nn/a\t0\t4\tb.png\n2.5\t0\tn/a\tn/a\n"
    )
    events = read_events_tsv(path, event_column="trial_type", stim_column="stim_file")
    assert events["row"].tolist() == [1]
    assert events["name"].tolist() == ["3"] and events["stimulus"].tolist() == ["a.png"]


def test_recording_from_path_finds_sidecars(tmp_path):
    eeg = tmp_path / "sub-07_ses-2_task-rest_run-3_eeg.vhdr"
    eeg.touch()
    for name in (
        "sub-07_ses-2_task-rest_run-3_events.tsv",
        "sub-07_ses-2_electrodes.tsv",
        "sub-07_ses-2_task-rest_run-3_channels.tsv",
        "sub-07_ses-2_task-rest_eeg.json",
    ):
        (tmp_path / name).touch()
    rec = recording_from_path(eeg)
    assert (rec.subject, rec.session, rec.task, rec.run) == ("07", "2", "rest", "3")
    assert rec.electrodes.name == "sub-07_ses-2_electrodes.tsv"
    assert rec.sidecars[0].name == "sub-07_ses-2_task-rest_eeg.json"
    assert rec.events is not None and rec.channels is not None


def test_schema_and_draft_match_defaults():
    schema = yaml.safe_load((REPO / "workflow/schemas/preprocess_eeg.schema.yaml").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    defaults = {k: v["default"] for k, v in schema["properties"].items()}
    assert defaults == DEFAULT_CONFIG
    assert fill_defaults({}, schema) == DEFAULT_CONFIG
    for key, prop in schema["properties"].items():
        assert prop.get("description"), key
    draft = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert draft["preprocess_eeg"] == DEFAULT_CONFIG
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(DEFAULT_CONFIG)
    validator.validate({**DEFAULT_CONFIG, "reject": {"eeg": 1e-4}, "conditions": {"1": "a"}})
    with pytest.raises(jsonschema.ValidationError, match="l_fre"):
        validator.validate({"l_fre": 1.0})

"""Bad inputs fail with a message naming the file and field, and write nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
from eeg_helpers import events_table, synthetic_raw

from neuroflow.artifacts import build_provenance
from neuroflow.io.records import EegRecording
from neuroflow.preprocessing.eeg import preprocess_eeg_recording, resolve_config

QUIET = {"find_noisy_channels": False, "find_uncorrelated_channels": False}


@pytest.fixture
def recording(rng, make_bids) -> EegRecording:
    """A valid 9-channel BrainVision recording with 7 events."""
    raw = synthetic_raw(rng, n_eeg=9, sfreq=250.0, duration=24.0)
    return make_bids(raw, events_table(np.arange(2.0, 23.0, 3.0), 250.0))


def _run(recording: EegRecording, tmp_path: Path, config: dict | None = None) -> None:
    config = {**QUIET, **(config or {})}
    preprocess_eeg_recording(
        recording=recording,
        epochs_output=tmp_path / "out" / "epochs.zarr",
        continuous_output=tmp_path / "out" / "continuous.zarr",
        config=config,
        provenance=build_provenance(stage="preprocess_eeg", version="0", config=config),
    )


def _assert_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir())


def test_valid_recording_writes_both_stores(recording, tmp_path):
    _run(recording, tmp_path)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "continuous.zarr",
        "epochs.zarr",
    ]


def test_truncated_brainvision(recording, tmp_path):
    data = recording.eeg.with_suffix(".eeg")
    with data.open("r+b") as fh:
        fh.truncate(data.stat().st_size // 2 + 1)
    with pytest.raises(ValueError, match=r"test_|\.eeg is truncated"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_truncated_by_recording_duration(recording, tmp_path):
    """Whole samples cut off the end are caught by the sidecar's RecordingDuration."""
    data = recording.eeg.with_suffix(".eeg")
    frame = 9 * 4  # 9 channels of float32
    with data.open("r+b") as fh:
        fh.truncate(frame * 250 * 20)
    with pytest.raises(ValueError, match=r"'RecordingDuration'.*truncated"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_unreadable_header(recording, tmp_path):
    recording.eeg.write_text("not a BrainVision header\n")
    with pytest.raises(ValueError, match=r"sub-01_task-vis_run-1_eeg\.vhdr could not be read"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_truncated_edf(eeg_data, tmp_path):
    edf = tmp_path / "rec.edf"
    shutil.copyfile(eeg_data / "edf" / "test_reduced.edf", edf)
    edf.chmod(0o644)
    with edf.open("r+b") as fh:
        fh.truncate(edf.stat().st_size * 2 // 3)
    rec = EegRecording(subject="x", session=None, task=None, run=None, eeg=edf)
    with pytest.raises(ValueError, match=r"rec\.edf is truncated"):
        _run(rec, tmp_path)
    _assert_nothing_written(tmp_path)


def test_events_past_the_end(recording, tmp_path):
    table = pd.read_csv(recording.events, sep="\t")
    table.loc[len(table)] = [30.0, 0.5, 7500, "face", "stimuli/late.png"]
    table.to_csv(recording.events, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"_events\.tsv row 8: field 'onset' 30\.0 s.*outside"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_channels_tsv_lists_missing_channel(recording, tmp_path):
    table = pd.read_csv(recording.channels, sep="\t")
    table.loc[len(table)] = ["Oz", "EEG", "V", "good"]
    table.to_csv(recording.channels, sep="\t", index=False)
    with pytest.raises(ValueError, match=r"_channels\.tsv field 'name'.*absent.*\['Oz'\]"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_sidecar_sampling_rate_disagrees(recording, tmp_path):
    sidecar = recording.sidecars[-1]
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "SamplingFrequency": 500}))
    with pytest.raises(ValueError, match=r"_eeg\.json field 'SamplingFrequency' says 500 Hz"):
        _run(recording, tmp_path)
    _assert_nothing_written(tmp_path)


def test_all_channels_bad(rng, make_bids, tmp_path):
    raw = synthetic_raw(rng, n_eeg=9, sfreq=250.0, duration=12.0)
    status = dict.fromkeys(raw.ch_names, "bad")
    rec = make_bids(raw, events_table(np.array([2.0, 5.0, 8.0]), 250.0), status=status)
    with pytest.raises(ValueError, match=r"All 9 channels of .*_eeg\.vhdr are bad"):
        _run(rec, tmp_path)
    _assert_nothing_written(tmp_path)


def test_no_epochs_left(recording, tmp_path):
    with pytest.raises(ValueError, match=r"No epochs of .*_eeg\.vhdr are left after rejection"):
        _run(recording, tmp_path, {"reject": {"eeg": 1e-9}})
    _assert_nothing_written(tmp_path)


def test_no_events_of_selected_conditions(recording, tmp_path):
    with pytest.raises(ValueError, match=r"_events\.tsv holds no events of the selected"):
        _run(recording, tmp_path, {"conditions": ["car"]})
    _assert_nothing_written(tmp_path)


def test_named_reference_missing(recording, tmp_path):
    with pytest.raises(ValueError, match=r"`eeg_reference` channels must be channels of"):
        _run(recording, tmp_path, {"eeg_reference": ["TP9"]})


def test_events_tsv_without_onset(recording, tmp_path):
    pd.DataFrame({"when": [1.0], "trial_type": ["face"]}).to_csv(
        recording.events, sep="\t", index=False
    )
    with pytest.raises(ValueError, match=r"_events\.tsv must have the column\(s\) \['onset'\]"):
        _run(recording, tmp_path)


def recording_from(path: Path) -> EegRecording:
    return EegRecording(subject="q", session=None, task=None, run=None, eeg=path)


def test_unknown_format(tmp_path):
    path = tmp_path / "rec.txt"
    path.write_text("1 2 3")
    with pytest.raises(ValueError, match=r"`eeg` must be one of .*'rec\.txt'"):
        _run(recording_from(path), tmp_path)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"l_fre": 1.0}, r"Unknown key 'preprocess_eeg\.l_fre'\. Did you mean 'l_freq'\?"),
        ({"epochs_tmin": 0.5, "epochs_tmax": 0.1}, r"`epochs_tmin` must be below"),
        ({"l_freq": 40.0, "h_freq": 1.0}, r"`l_freq` must be below `h_freq`"),
        ({"reject": "sometimes"}, r"`reject` must be null, 'auto' or a mapping"),
        ({"event_source": "magic"}, r"`event_source` must be one of"),
        ({"l_freq": -1}, r"`l_freq` must be a positive number, got -1"),
        ({"baseline": [0.0]}, r"`baseline` must be null or a \[start, stop\] pair"),
    ],
)
def test_config_errors(config, match):
    with pytest.raises(ValueError, match=match):
        resolve_config(config)


def test_template_montage_unknown(rng, tmp_path):
    raw = synthetic_raw(rng, n_eeg=7, sfreq=100.0, duration=5.0)
    raw.set_annotations(mne.Annotations([1.0], 0.0, ["x"]))
    path = tmp_path / "m_raw.fif"
    raw.save(path, verbose="error")
    with pytest.raises(ValueError, match=r"`eeg_template_montage` must be one of"):
        _run(recording_from(path), tmp_path, {"eeg_template_montage": "nope_1020"})

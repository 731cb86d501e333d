"""neuroflow's EEG reader yields what ``mne_bids.read_raw_bids`` yields on the same folder.

Each BIDS folder is written by ``mne_bids.write_raw_bids``: from the real recordings in
``shared/data/eeg`` (BrainVision, EDF, BDF, EEGLAB are copied as they are; FIF is saved
from the EEGLAB recording), from an EGI MFF recording written with mffpy, and from
generated recordings converted to BrainVision, the path MNE-BIDS takes for EGI, Nihon
Kohden and CNT files (formats BIDS does not allow for EEG). Compared: the data, the
channel names and types, the bad channels, the sampling and power-line frequencies,
electrode positions, events (onset, duration, name) and the ``BAD_*`` stretches used to
drop epochs.

Deliberate differences are tested as such, each with its reason:

* an event name with several ``value`` codes stays one name (MNE-BIDS renames the events
  ``name/value``): conditions are named by ``event_column`` alone;
* ``_channels.tsv`` types ``PPG``, ``STIM`` and ``SYSCLOCK`` map to MNE's ``bio``,
  ``stim`` and ``syst`` (MNE-BIDS: ``misc``), and ``OTHER`` keeps the file's own type;
* a channel bad in the data file stays bad when ``_channels.tsv`` says ``good``, and the
  file's own ``BAD_*`` annotations stay beside those of ``_events.tsv``: neuroflow never
  analyses data that either source marks bad.
"""

from __future__ import annotations

import json
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
import scipy.io
from mne_bids import BIDSPath, read_raw_bids, write_raw_bids

from neuroflow.io.bids_eeg import index_eeg_recordings
from neuroflow.preprocessing.eeg.events import find_events
from neuroflow.preprocessing.eeg.read import (
    apply_channels_tsv,
    apply_montage,
    check_sidecar,
    read_epochs_file,
    read_raw_file,
)
from neuroflow.preprocessing.eeg.sidecars import recording_from_path

_READERS = {
    ".set": mne.io.read_raw_eeglab,
    ".edf": mne.io.read_raw_edf,
    ".vhdr": mne.io.read_raw_brainvision,
    ".bdf": mne.io.read_raw_bdf,
    ".fif": mne.io.read_raw_fif,
}
_EEG10 = ["Fz", "Cz", "Pz", "F3", "F4", "C3", "C4", "P3", "P4", "O1"]


def _neuroflow_read(path: Path) -> tuple[mne.io.BaseRaw, pd.DataFrame, dict]:
    """The recording as neuroflow's stage reads it, before any cleaning."""
    recording = recording_from_path(path)
    root = path.parents[2]
    (indexed,) = [r for r in index_eeg_recordings(root) if r.eeg == path]
    for field in ("events", "channels", "electrodes"):  # the workflow finds the same files
        assert getattr(indexed, field) == getattr(recording, field), field
    raw = read_raw_file(recording.eeg)
    sidecar = check_sidecar(raw, recording)
    if recording.channels is not None:
        apply_channels_tsv(raw, recording.channels, eeg_file=recording.eeg, use_status=True)
    apply_montage(raw, electrodes_tsv=recording.electrodes, template=None)
    events, _ = find_events(
        raw,
        events_tsv=recording.events,
        source="auto",
        event_column="trial_type",
        stim_column=None,
        stim_channel=None,
    )
    return raw, events, sidecar


def _annotations(raw: mne.io.BaseRaw, *, bad: bool) -> pd.DataFrame:
    """Annotations (onset from the first sample) that are (not) ``BAD_*``/``EDGE``."""
    ann = raw.annotations
    is_bad = np.array([d.upper().startswith(("BAD", "EDGE")) for d in ann.description], bool)
    keep = is_bad if bad else ~is_bad
    return pd.DataFrame(
        {
            "onset": np.round(ann.onset[keep] - raw.first_time, 6),
            "duration": np.round(ann.duration[keep], 6),
            "description": [str(d) for d in ann.description[keep]],
        }
    )


def _positions(raw: mne.io.BaseRaw) -> np.ndarray:
    return np.array([ch["loc"][:3] for ch in raw.info["chs"]])


def _assert_equivalent(bids_path: BIDSPath, data_file: Path) -> tuple[mne.io.BaseRaw, ...]:
    """Assert that neuroflow's reading of ``data_file`` equals ``read_raw_bids``'s."""
    ref = read_raw_bids(bids_path, verbose="error").load_data(verbose="error")
    raw, events, sidecar = _neuroflow_read(data_file)
    assert raw.ch_names == ref.ch_names
    np.testing.assert_array_equal(raw.get_data(), ref.get_data())
    assert raw.first_samp == ref.first_samp
    assert raw.info["sfreq"] == ref.info["sfreq"]
    assert raw.get_channel_types() == ref.get_channel_types()
    assert raw.info["bads"] == ref.info["bads"]
    line = sidecar.get("PowerLineFrequency")
    assert (None if line in (None, "n/a") else line) == ref.info["line_freq"]
    np.testing.assert_allclose(_positions(raw), _positions(ref), atol=1e-9, equal_nan=True)
    expected = _annotations(ref, bad=False)
    got = pd.DataFrame(
        {
            "onset": np.round(events["onset"].to_numpy(float), 6),
            "duration": np.round(events["duration"].to_numpy(float), 6),
            "description": events["name"].astype(str).to_numpy(),
        }
    )
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)
    # every BAD stretch MNE-BIDS reads is one neuroflow drops epochs on
    bad_ref, bad_nf = _annotations(ref, bad=True), _annotations(raw, bad=True)
    assert set(map(tuple, bad_ref.to_numpy())) <= set(map(tuple, bad_nf.to_numpy()))
    return raw, ref


def _write(raw: mne.io.BaseRaw, root: Path, task: str, **kwargs) -> tuple[BIDSPath, Path]:
    """Write ``raw`` with MNE-BIDS; return its BIDSPath and the data file written."""
    bids_path = BIDSPath(subject="01", task=task, datatype="eeg", root=root)
    write_raw_bids(raw, bids_path, overwrite=True, verbose="error", **kwargs)
    (data_file,) = [
        p
        for p in (root / "sub-01" / "eeg").glob(f"sub-01_task-{task}_eeg.*")
        if p.suffix in _READERS
    ]
    return bids_path, data_file


# -- real recordings ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relpath", "n_events"),
    [
        ("eeglab/test_raw.set", 154),
        ("edf/test_reduced.edf", 5),
        ("brainvision/test_NO.vhdr", 0),
    ],
)
def test_real_recording_copied_by_mne_bids(eeg_data, tmp_path, relpath, n_events):
    """Copied files (annotations to _events.tsv, one channel marked bad) read alike."""
    raw = _READERS[Path(relpath).suffix](eeg_data / relpath, verbose="error")
    raw.info["line_freq"] = 50.0
    raw.info["bads"] = [raw.ch_names[3]]
    bids_path, data_file = _write(raw, tmp_path / "bids", "real")
    assert data_file.suffix == Path(relpath).suffix  # copied, not converted
    nf, _ = _assert_equivalent(bids_path, data_file)
    assert nf.info["bads"] == [raw.ch_names[3]]
    assert len(_annotations(nf, bad=False)) >= n_events


def test_real_bdf_stim_channel_events(eeg_data, tmp_path):
    """BDF: events found on its Status channel, written to _events.tsv, read alike."""
    raw = mne.io.read_raw_bdf(eeg_data / "bdf" / "test_bdf_stim_channel.bdf", verbose="error")
    found = mne.find_events(raw, shortest_event=1, verbose="error")
    event_id = {f"code{c}": int(c) for c in np.unique(found[:, 2])}
    bids_path, data_file = _write(raw, tmp_path / "bids", "bdf", events=found, event_id=event_id)
    nf, _ = _assert_equivalent(bids_path, data_file)
    assert "stim" in nf.get_channel_types()
    assert len(found) > 0


def _as_eeg_fif(raw: mne.io.BaseRaw, root: Path, task: str) -> tuple[BIDSPath, Path]:
    """A ``_eeg.fif`` with the sidecars MNE-BIDS writes for ``raw``.

    MNE-BIDS converts EEG-only FIF files to BrainVision, so the FIF file replaces the
    converted one beside the sidecars it wrote; both readers then read the FIF file.
    """
    bids_path, converted = _write(raw, root, task, allow_preload=True, format="BrainVision")
    for ext in (".vhdr", ".vmrk", ".eeg"):
        converted.with_suffix(ext).unlink()
    fif = converted.with_suffix(".fif")
    raw.save(fif, verbose="error")
    return bids_path.copy().update(extension=".fif"), fif


def test_real_fif_with_first_sample_and_bad_stretches(eeg_data, tmp_path):
    """FIF (first sample not 0, a BAD_ annotation, a bad channel) reads alike."""
    raw = mne.io.read_raw_eeglab(eeg_data / "eeglab" / "test_raw.set", preload=True)
    raw.crop(10.0, 70.0)  # first_samp becomes 1280
    raw.set_annotations(raw.annotations + mne.Annotations([20.0], [1.5], ["BAD_motion"]))
    raw.info["bads"] = ["EEG 007"]
    raw.info["line_freq"] = 60.0
    bids_path, data_file = _as_eeg_fif(raw, tmp_path / "bids", "fif")
    nf, ref = _assert_equivalent(bids_path, data_file)
    assert nf.first_samp == 1280
    assert "BAD_motion" in _annotations(ref, bad=True)["description"].tolist()
    assert "BAD_motion" in _annotations(nf, bad=True)["description"].tolist()


# -- generated recordings: the conversion path of EGI, Nihon Kohden and CNT -------------
# (an EGI MFF file itself is written with mffpy; MNE reads but writes neither Nihon Kohden
# nor CNT files, and no public package writes them, so their path is the RawArray one)


def _generated(rng: np.random.Generator, meas_date: float | None) -> mne.io.RawArray:
    """10 EEG (10-20 positions), EOG, ECG, misc and stim channels, 9.3 s at 250 Hz."""
    names = [*_EEG10, "VEOG", "ECG", "Resp", "STI 014"]
    types = ["eeg"] * 10 + ["eog", "ecg", "misc", "stim"]
    n_times = 2333
    data = rng.standard_normal((len(names), n_times)) * 1e-5
    data[-1] = 0.0
    raw = mne.io.RawArray(data, mne.create_info(names, 250.0, types), verbose="error")
    raw.set_montage("standard_1020", verbose="error")
    raw.set_meas_date(meas_date)
    raw.set_annotations(
        mne.Annotations(
            [1.0, 2.504, 4.0, 6.2, 7.1],
            [0.0, 0.5, 0.0, 1.0, 0.0],
            ["face", "house", "face", "BAD_blink", "house"],
        )
    )
    raw.info["bads"] = ["C3"]
    raw.info["line_freq"] = 50.0
    return raw


@pytest.mark.parametrize("meas_date", [1.6e9, None])
def test_converted_recording(rng, tmp_path, meas_date):
    """Converted to BrainVision: data, types, bads, positions, events and BAD_ alike."""
    raw = _generated(rng, meas_date)
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "conv", allow_preload=True, format="BrainVision"
    )
    assert data_file.suffix == ".vhdr"
    assert next((tmp_path / "bids" / "sub-01" / "eeg").glob("*_space-*_electrodes.tsv"))
    nf, _ = _assert_equivalent(bids_path, data_file)
    assert nf.get_channel_types()[10:] == ["eog", "ecg", "misc", "stim"]
    assert np.isfinite(_positions(nf)[:10]).all() and np.abs(_positions(nf)[:10]).sum() > 0
    # the BAD_blink row of _events.tsv is no event but drops the epochs it overlaps
    _, events, _ = _neuroflow_read(data_file)
    assert "BAD_blink" not in set(events["name"])
    epochs = mne.Epochs(
        nf, np.array([[1650, 0, 1]]), tmin=0, tmax=0.1, baseline=None, verbose="error"
    )
    epochs.drop_bad(verbose="error")
    assert epochs.drop_log == (("BAD_blink",),)


def _egi_mff(path: Path, rng: np.random.Generator) -> Path:
    """An EGI MFF recording as a HydroCel GSN 32 net writes it (32 channels and the vertex
    reference, 10 s at 250 Hz, sensor layout and coordinates, an event track of two
    codes), made with mffpy, EGI's own reader and writer."""
    from datetime import UTC, datetime, timedelta

    from mffpy import Writer
    from mffpy.writer import BinWriter

    start = datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    signal = BinWriter(sampling_rate=250, data_type="EEG")
    signal.add_block((rng.standard_normal((33, 2500)) * 10).astype(np.float32))  # µV
    writer = Writer(str(path))
    writer.addxml("fileInfo", recordTime=start)
    writer.add_coordinates_and_sensor_layout("HydroCel GSN 32 1.0")
    writer.addbin(signal)
    onsets = [(1.0, "face"), (2.5, "scrm"), (4.04, "face"), (6.0, "scrm"), (8.2, "face")]
    events = [
        {"beginTime": start + timedelta(seconds=t), "duration": 1000, "code": c, "label": c}
        for t, c in onsets
    ]
    writer.addxml("eventTrack", name="Events", trackType="EVNT", events=events)
    writer.write()
    return path


@pytest.mark.filterwarnings("ignore:Encountered unsupported non-voltage units")
def test_egi_mff_converted_by_mne_bids(rng, tmp_path):
    """An EGI MFF recording (MNE's EGI reader: the net's 33 EEG channels with positions,
    one stim channel per event code, events as annotations) converted by MNE-BIDS to
    BrainVision reads alike, with its events named by their codes."""
    raw = mne.io.read_raw_egi(_egi_mff(tmp_path / "rec.mff", rng), verbose="error")
    raw.info["line_freq"] = 60.0
    raw.info["bads"] = ["E7"]
    assert raw.ch_names[32] == "Vertex Reference" and raw.ch_names[33:] == ["face", "scrm"]
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "egi", allow_preload=True, format="BrainVision"
    )
    assert data_file.suffix == ".vhdr"
    nf, _ = _assert_equivalent(bids_path, data_file)
    assert nf.get_channel_types() == ["eeg"] * 33 + ["stim"] * 2
    assert nf.info["bads"] == ["E7"]
    assert np.isfinite(_positions(nf)[:33]).all() and np.abs(_positions(nf)[:33]).sum() > 0
    _, events, _ = _neuroflow_read(data_file)
    assert events["name"].tolist() == ["face", "scrm", "face", "scrm", "face"]
    np.testing.assert_allclose(events["onset"], [1.0, 2.5, 4.04, 6.0, 8.2], atol=1 / 250)


def _events_tsv(data_file: Path) -> Path:
    return data_file.with_name(data_file.name.replace("_eeg.vhdr", "_events.tsv"))


def test_trial_type_all_na_falls_back_to_value(rng, tmp_path):
    """A trial_type of n/a only names events by value, as MNE-BIDS does."""
    raw = _generated(rng, 1.6e9)
    raw.set_annotations(None)
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "na", allow_preload=True, format="BrainVision"
    )
    pd.DataFrame(
        {
            "onset": [0.5, 1.25, 3.0],
            "duration": [0.0, 0.2, 0.0],
            "trial_type": "n/a",
            "value": ["3", "7", "3"],
        }
    ).to_csv(_events_tsv(data_file), sep="\t", index=False)
    _, events, _ = _neuroflow_read(data_file)
    assert events["name"].tolist() == ["3", "7", "3"]
    _assert_equivalent(bids_path, data_file)


def test_several_values_per_trial_type_is_a_deliberate_difference(rng, tmp_path):
    """MNE-BIDS renames a name with several codes 'face/1', 'face/2'; neuroflow keeps
    'face': conditions are the `event_column` values, the codes are bookkeeping."""
    raw = _generated(rng, 1.6e9)
    raw.set_annotations(None)
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "hier", allow_preload=True, format="BrainVision"
    )
    pd.DataFrame(
        {
            "onset": [0.5, 1.5, 2.5],
            "duration": 0.0,
            "trial_type": ["face", "face", "house"],
            "value": [1, 2, 3],
        }
    ).to_csv(_events_tsv(data_file), sep="\t", index=False)
    ref = read_raw_bids(bids_path, verbose="error")
    _, events, _ = _neuroflow_read(data_file)
    assert list(ref.annotations.description) == ["face/1", "face/2", "house"]
    assert events["name"].tolist() == ["face", "face", "house"]
    np.testing.assert_allclose(events["onset"], ref.annotations.onset - ref.first_time)


def test_channel_type_mapping_differences_are_deliberate(rng, tmp_path):
    """PPG, STIM and SYSCLOCK map to bio, stim and syst (MNE-BIDS: misc); OTHER keeps the
    file's type (MNE-BIDS: misc); every other type maps alike."""
    raw = _generated(rng, 1.6e9)
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "types", allow_preload=True, format="BrainVision"
    )
    channels = data_file.with_name(data_file.name.replace("_eeg.vhdr", "_channels.tsv"))
    table = pd.read_csv(channels, sep="\t", dtype=str, keep_default_na=False)
    table.loc[table["name"] == "F3", "type"] = "PPG"
    table.loc[table["name"] == "STI 014", "type"] = "STIM"
    table.loc[table["name"] == "Resp", "type"] = "SYSCLOCK"
    table.loc[table["name"] == "F4", "type"] = "OTHER"
    table.loc[table["name"] == "VEOG", "type"] = "HEOG"
    table.to_csv(channels, sep="\t", index=False)
    ref = read_raw_bids(bids_path, verbose="error")
    nf, _, _ = _neuroflow_read(data_file)
    differ = {
        n: (a, b)
        for n, a, b in zip(
            nf.ch_names, nf.get_channel_types(), ref.get_channel_types(), strict=True
        )
        if a != b
    }
    assert differ == {
        "F3": ("bio", "misc"),
        "STI 014": ("stim", "misc"),
        "Resp": ("syst", "misc"),
        "F4": ("eeg", "misc"),
    }


def test_bads_of_the_file_stay_bad(eeg_data, tmp_path):
    """A FIF's own bad channel stays bad when _channels.tsv says good (MNE-BIDS: good)."""
    raw = mne.io.read_raw_eeglab(eeg_data / "eeglab" / "test_raw.set", preload=True)
    raw.crop(0, 20).info["bads"] = ["EEG 002"]
    bids_path, data_file = _as_eeg_fif(raw, tmp_path / "bids", "bads")
    channels = data_file.with_name(data_file.name.replace("_eeg.fif", "_channels.tsv"))
    table = pd.read_csv(channels, sep="\t", dtype=str, keep_default_na=False)
    table["status"] = "good"
    table.loc[table["name"] == "EEG 010", "status"] = "bad"
    table.to_csv(channels, sep="\t", index=False)
    ref = read_raw_bids(bids_path, verbose="error")
    nf, _, _ = _neuroflow_read(data_file)
    assert ref.info["bads"] == ["EEG 010"]
    assert nf.info["bads"] == ["EEG 002", "EEG 010"]


# -- epoched recordings: MNE-BIDS reads no epochs; MNE's readers are the reference -------


def _write_epoched_eeglab(path: Path, epochs: mne.BaseEpochs) -> None:
    """An epoched EEGLAB ``.set`` (data in µV, channel x time x trial)."""
    data = epochs.get_data() * 1e6
    n_trials, n_channels, _ = data.shape
    chanlocs = np.zeros((n_channels,), dtype=[("labels", object), ("type", object)])
    for i, name in enumerate(epochs.ch_names):
        chanlocs[i] = (name, "EEG")
    names = {code: name for name, code in epochs.event_id.items()}
    n_times = data.shape[2]
    event = np.zeros((n_trials,), dtype=[("type", object), ("latency", float), ("epoch", float)])
    epoch = np.zeros((n_trials,), dtype=[("event", float), ("eventtype", object)])
    for i, code in enumerate(epochs.events[:, 2]):
        event[i] = (names[code], i * n_times - epochs.tmin * epochs.info["sfreq"] + 1, i + 1)
        epoch[i] = (i + 1, names[code])
    scipy.io.savemat(
        path,
        {
            "setname": "epochs",
            "nbchan": float(n_channels),
            "trials": float(n_trials),
            "pnts": float(n_times),
            "srate": epochs.info["sfreq"],
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


@pytest.mark.parametrize("ext", [".fif", ".set"])
def test_epoched_input_reads_as_mne_and_takes_the_channels_tsv(rng, tmp_path, ext):
    """Epoched FIF / EEGLAB: data and events as MNE's readers give them; channel types
    and bads from _channels.tsv as MNE-BIDS gives them for the continuous recording."""
    raw = _generated(rng, 1.6e9)
    raw.set_annotations(None)
    raw.pick([*_EEG10[:7], "VEOG"])
    bids_path, data_file = _write(
        raw, tmp_path / "bids", "cont", allow_preload=True, format="BrainVision"
    )
    ref_raw = read_raw_bids(bids_path, verbose="error")
    events = np.array([[s, 0, c] for s, c in [(300, 1), (700, 2), (1100, 1), (1600, 2)]])
    epochs = mne.Epochs(
        mne.io.read_raw_brainvision(data_file, preload=True, verbose="error"),
        events,
        {"face": 1, "house": 2},
        -0.1,
        0.3,
        baseline=None,
        preload=True,
        verbose="error",
    )
    eeg_dir = data_file.parent
    epo = (
        eeg_dir / f"sub-01_task-ep_epo{ext}"
        if ext == ".fif"
        else eeg_dir / "sub-01_task-ep_eeg.set"
    )
    if ext == ".fif":
        epochs.save(epo, verbose="error")
        reference = mne.read_epochs(epo, proj=False, verbose="error")
    else:
        epochs.set_channel_types({"VEOG": "eeg"}, verbose="error")  # EEGLAB types by hand
        _write_epoched_eeglab(epo, epochs)
        reference = mne.read_epochs_eeglab(epo, verbose="error")
    channels = eeg_dir / "sub-01_task-cont_channels.tsv"
    (eeg_dir / "sub-01_task-ep_channels.tsv").write_bytes(channels.read_bytes())
    nf = read_epochs_file(epo)
    np.testing.assert_array_equal(nf.get_data(), reference.get_data())
    np.testing.assert_array_equal(nf.events, reference.events)
    assert nf.event_id == reference.event_id
    recording = recording_from_path(epo)
    assert recording.epoched
    apply_channels_tsv(nf, recording.channels, eeg_file=epo, use_status=True)
    assert nf.get_channel_types() == ref_raw.get_channel_types()
    assert nf.info["bads"] == ref_raw.info["bads"] == ["C3"]
    assert json.loads((eeg_dir / "sub-01_task-cont_eeg.json").read_text())["PowerLineFrequency"]

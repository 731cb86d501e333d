"""Tests of the written demo dataset, at a small size."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neuroflow.demo import demo_layout, generate_demo_dataset, load_ground_truth
from neuroflow.demo.eeg import _montage
from neuroflow.demo.generate import foreign_files

SMALL = {
    "seed": 3,
    "n_subjects": 1,
    "image_size": 32,
    "fmri": {"n_train_runs": 2, "n_test_repeats": 2, "n_volumes": 40, "grid_shape": [12, 13, 11]},
    "eeg": {
        "n_trials": 40,
        "n_test_images": 4,
        "n_repeats": 3,
        "sfreq": 200.0,
        "snr": 2.0,
        "n_components": 3,
    },
}


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".neuroflow.json"
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, float]:
    """A small dataset and the seconds it took to generate."""
    root = tmp_path_factory.mktemp("demo") / "bids"
    start = time.perf_counter()
    generate_demo_dataset(output=root, config=SMALL, provenance={"stage": "demo", "v": "x"})
    return root, time.perf_counter() - start


def test_files_match_layout(small):
    """Exactly the promised files are written, plus the provenance marker."""
    root, seconds = small
    layout = demo_layout(SMALL, root)
    written = {p for p in root.rglob("*") if p.is_file()}
    assert written == set(layout.files)
    assert json.loads((root / ".neuroflow.json").read_text())["v"] == "x"
    assert not list(root.parent.glob(".*partial*"))
    assert seconds < 60


def test_fmri_files_readable(small):
    """BOLD, mask and events agree with the sidecar and the stimuli."""
    import nibabel as nib

    root, _ = small
    layout = demo_layout(SMALL, root)
    tr = json.loads((root / "task-movie_bold.json").read_text())["RepetitionTime"]
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")
    for rec in layout.fmri_runs:
        img = nib.load(rec.bold)
        assert img.shape == (12, 13, 11, 40)
        assert img.header.get_zooms()[3] == pytest.approx(tr)
        assert nib.load(rec.mask).shape == (12, 13, 11)
        ev = pd.read_csv(rec.events, sep="\t")
        assert list(ev.columns) == ["onset", "duration", "trial_type", "stim_file"]
        assert ev["onset"].iloc[-1] + ev["duration"].iloc[-1] == pytest.approx(40 * tr)
        assert set(ev["stim_file"]) <= set(captions["stim_file"])
        assert all((root / "stimuli" / f).exists() for f in ev["stim_file"])
        conf = pd.read_csv(rec.confounds, sep="\t", na_values="n/a")
        assert conf.shape == (40, 25) and np.isnan(conf["framewise_displacement"].iloc[0])
        assert np.isnan(conf["rot_z_derivative1"].iloc[0])
        np.testing.assert_allclose(conf["trans_y_power2"], conf["trans_y"] ** 2, atol=1e-6)
    test = [pd.read_csv(r.events, sep="\t") for r in layout.fmri_runs if r.run in ("3", "4")]
    pd.testing.assert_frame_equal(test[0], test[1])
    train_shots = [set(pd.read_csv(r.events, sep="\t")["stim_file"]) for r in layout.fmri_runs]
    assert not train_shots[0] & train_shots[1] and not train_shots[0] & train_shots[2]


def test_confounds_give_fmriprep_motion_models(small):
    """The 24-parameter motion model of the preprocessing stage loads from the demo."""
    from neuroflow.preprocessing.fmri.confounds import select_confounds
    from neuroflow.preprocessing.fmri.stage import resolve_config

    root, _ = small
    rec = demo_layout(SMALL, root).fmri_runs[0]
    counts = {}
    for model in ("basic", "full"):
        cfg = resolve_config({"confounds": {"strategy": ["motion"], "motion": model}})
        selected = select_confounds(path=rec.confounds, n_volumes=40, config=cfg["confounds"])
        assert np.isfinite(selected.table.to_numpy()).all()
        counts[model] = selected.table.shape[1]
    assert counts == {"basic": 6, "full": 24}


def test_eeg_files_readable(small):
    """The BrainVision recording and its BIDS tables are consistent."""
    import mne

    root, _ = small
    rec = demo_layout(SMALL, root).eeg_recordings[0]
    raw = mne.io.read_raw_brainvision(rec.eeg, preload=True, verbose="error")
    assert raw.info["sfreq"] == 200.0 and len(raw.ch_names) == 32
    assert set(raw.ch_names) <= set(_montage().ch_names)
    assert raw.info["meas_date"] is None
    ev = pd.read_csv(rec.events, sep="\t")
    assert list(ev.columns) == ["onset", "duration", "trial_type", "value", "sample", "stim_file"]
    assert len(ev) == 40 and (ev["trial_type"] == "test").sum() == 4 * 3
    assert ev.loc[ev["trial_type"] == "test", "stim_file"].nunique() == 4
    np.testing.assert_allclose(raw.annotations.onset, ev["sample"] / 200.0)
    assert pd.read_csv(rec.channels, sep="\t")["name"].tolist() == raw.ch_names
    assert pd.read_csv(rec.electrodes, sep="\t").shape == (32, 4)
    side = json.loads(rec.sidecars[0].read_text())
    assert side["PowerLineFrequency"] == 50.0 and side["SamplingFrequency"] == 200.0
    assert np.abs(raw.get_data()).max() < 1e-3


def test_planted_fmri_signal_is_recoverable(small):
    """Planted voxels follow their noiseless signal; noise voxels carry none."""
    import nibabel as nib

    root, _ = small
    truth = load_ground_truth(root)
    fmri = truth["subject"]["01"]["fmri"]
    assert truth["fmri"]["test_runs"] == ["3", "4"]
    assert truth["fmri"]["repeat_groups"] == [["3", "4"]]
    rec = demo_layout(SMALL, root).fmri_runs[2]
    ijk = fmri["voxel_ijk"]
    data = np.asarray(nib.load(rec.bold).dataobj)[ijk[:, 0], ijk[:, 1], ijk[:, 2]].T
    data = data - data.mean(axis=0)
    signal = fmri["signal"][2]
    for roi in (1, 2):
        sel = fmri["roi"] == roi
        r = [np.corrcoef(signal[:, v], data[:, v])[0, 1] for v in np.flatnonzero(sel)]
        assert np.median(r) > 0.2
        assert 0.4 < np.median(fmri["ceiling_single"][sel]) < 0.95
        assert np.all(fmri["ceiling_mean"][sel] >= fmri["ceiling_single"][sel])
    noise = fmri["roi"] == 3
    assert np.all(fmri["signal"][:, :, noise] == 0) and np.all(fmri["ceiling_single"][noise] == 0)
    assert np.abs(fmri["weights_visual"][fmri["roi"] == 2]).max() == 0
    n_stim = len(truth["stimuli"]["stimulus"])
    assert truth["stimuli"]["visual"].shape == (n_stim, 24)
    assert truth["stimuli"]["semantic"].shape == (n_stim, 384)


def test_planted_eeg_latencies(small):
    """The stimulus-driven variance peaks at the planted latencies."""
    import mne

    root, _ = small
    truth = load_ground_truth(root)
    eeg = truth["subject"]["01"]["eeg"]
    assert eeg["latencies"].tolist() == [0.1, 0.4]
    assert eeg["topographies_visual"].shape == (3, 32)
    raw = mne.io.read_raw_brainvision(
        demo_layout(SMALL, root).eeg_recordings[0].eeg, preload=True, verbose="error"
    )
    data = raw.get_data() * 1e6
    offsets = np.arange(-20, 120)
    epochs = np.stack([data[:, o + offsets] for o in eeg["onsets"]])
    for kind, latency in (("visual", 0.1), ("semantic", 0.4)):
        amps = eeg[f"amplitudes_{kind}"][:, 0]
        chan = int(np.argmax(np.abs(eeg[f"topographies_{kind}"][0])))
        r = [np.corrcoef(amps, epochs[:, chan, i])[0, 1] for i in range(len(offsets))]
        peak = offsets[int(np.argmax(np.abs(r)))] / 200.0
        assert abs(peak - latency) < 0.05


def test_captions_vary(small):
    """Captions describe the photo and its framing, and differ across shots."""
    root, _ = small
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")["caption"]
    assert captions.nunique() > len(captions) / 3
    assert captions.str.match(r"^a (wide shot|medium shot|close-up) of ").all()


@pytest.mark.slow
def test_deterministic(small, tmp_path):
    """The same seed writes identical bytes; another seed writes different data."""
    root, _ = small
    again = tmp_path / "again"
    generate_demo_dataset(output=again, config=SMALL, provenance={"stage": "demo"})
    assert _hashes(again) == _hashes(root)
    other = tmp_path / "other"
    generate_demo_dataset(output=other, config={**SMALL, "seed": 4}, provenance={})
    h_other, h_root = _hashes(other), _hashes(root)
    bold = "sub-01/func/sub-01_task-movie_run-1_bold.nii.gz"
    assert h_other[bold] != h_root[bold]


@pytest.mark.slow
def test_cache_generates_each_demo_once_and_copies_it(small, tmp_path, monkeypatch):
    """With the cache folder set, a demo is generated into it once, with the bytes an
    uncached generation writes, and copied from there; another config, package source or
    library version is another entry."""
    import neuroflow.demo.cache as cache
    import neuroflow.demo.generate as generate

    root, _ = small
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    first = tmp_path / "first"
    generate_demo_dataset(output=first, config=SMALL, provenance={"stage": "demo"})
    (entry,) = (tmp_path / "cache").iterdir()
    assert _hashes(first) == _hashes(root) == _hashes(entry)

    def fail(folder, config):
        raise AssertionError("generated again")

    monkeypatch.setattr(generate, "_generate", fail)
    second = tmp_path / "second"
    generate_demo_dataset(output=second, config=SMALL, provenance={"stage": "demo", "v": "2"})
    assert _hashes(second) == _hashes(root)
    assert json.loads((second / ".neuroflow.json").read_text())["v"] == "2"
    with pytest.raises(AssertionError, match="generated again"):
        generate_demo_dataset(output=tmp_path / "x", config={**SMALL, "seed": 4}, provenance={})
    resolved = generate.resolve_config(SMALL)
    key = cache.cache_key(resolved)
    monkeypatch.setattr(cache, "_source_digest", lambda: "changed")
    assert cache.cache_key(resolved) != key
    monkeypatch.undo()
    monkeypatch.setattr(cache, "_version", lambda name: "0.0")
    assert cache.cache_key(resolved) != key
    assert not (tmp_path / "x").exists() and [entry] == list((tmp_path / "cache").iterdir())


def test_files_the_demo_did_not_write_are_found(small, tmp_path, capsys):
    """The marker lists what the demo wrote; anything else stops `neuroflow demo-data`."""
    from neuroflow.cli import main

    root, _ = small
    copy = tmp_path / "bids"
    shutil.copytree(root, copy)
    marker = json.loads((copy / ".neuroflow.json").read_text())
    layout = demo_layout(SMALL, root)
    assert marker["files"] == sorted(p.relative_to(root).as_posix() for p in layout.files)
    assert foreign_files(copy) == [] and foreign_files(tmp_path / "missing") == []
    (copy / "keep.txt").write_text("mine")
    (copy / "derivatives" / "mine").mkdir(parents=True)
    (copy / "derivatives" / "mine" / "notes.tsv").write_text("a\tb\n")
    (copy / "derivatives" / "empty").mkdir()
    mine = [copy / "derivatives" / "empty", copy / "derivatives" / "mine" / "notes.tsv"]
    mine.append(copy / "keep.txt")
    assert foreign_files(copy) == mine
    assert main(["demo-data", str(copy)]) == 2
    err = capsys.readouterr().err
    assert f"{copy} already holds files that neuroflow did not write (3: " in err
    assert "derivatives/mine/notes.tsv, keep.txt); generating the demo there" in err
    assert "--force" in err and (copy / "keep.txt").read_text() == "mine"
    assert (copy / "derivatives" / "mine" / "notes.tsv").is_file()
    # a marker written before it listed the files: the layout of its config decides
    marker.pop("files")
    (copy / ".neuroflow.json").write_text(json.dumps({**marker, "config": SMALL}))
    assert foreign_files(copy) == mine
    # the record of another stage is no demo marker: everything there is foreign
    (copy / ".neuroflow.json").write_text(json.dumps({"stage": "encoding/visual"}))
    assert len(foreign_files(copy)) == len(layout.files) + len(mine)

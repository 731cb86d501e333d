"""The dataset-shape generators: readable files, documented facts, determinism, planted signal.

The signal checks are deliberately plain (numpy least squares, scikit-learn LDA), so that
a fixture cannot silently lose the effect that workflow tests rely on.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dataset_shapes import (
    make_algonauts_like,
    make_ds000117_like,
    make_eeg_only,
    make_event_related,
    make_fmri_movie,
    make_interaction_movie,
    make_nsd_like,
)
from dataset_shapes._common import digest, hrf_convolve, image_features, prepare_root

MAX_BYTES = 20 * 1024**2


# --------------------------------------------------------------------------------------
# helpers


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _corr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of matching columns."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    return (a * b).sum(axis=0) / np.sqrt((a**2).sum(axis=0) * (b**2).sum(axis=0))


def _detrend(y: np.ndarray, n_cos: int = 3) -> np.ndarray:
    """Remove a constant, a linear trend and slow cosines from the columns of ``y``."""
    n = len(y)
    frames = np.arange(n)
    basis = np.column_stack(
        [np.ones(n), frames / n]
        + [np.cos(np.pi * (frames + 0.5) * k / n) for k in range(1, n_cos + 1)]
    )
    return y - basis @ np.linalg.lstsq(basis, y, rcond=None)[0]


def _zfeatures(values: dict[str, np.ndarray], stim_files) -> np.ndarray:
    """Feature rows of ``stim_files``, z-scored over every stimulus of the dataset."""
    allv = np.array(list(values.values()))
    return (np.array([values[s] for s in stim_files]) - allv.mean(0)) / allv.std(0)


def _epochs(data: np.ndarray, samples: np.ndarray, sfreq: float) -> np.ndarray:
    """(epoch, channel, time) from -0.2 to 0.8 s, baseline-corrected."""
    offsets = np.arange(round(-0.2 * sfreq), round(0.8 * sfreq))
    ep = data[:, samples[:, None] + offsets[None]].transpose(1, 0, 2)
    return ep - ep[:, :, : round(0.2 * sfreq)].mean(axis=-1, keepdims=True)


def _lda_curve(x: np.ndarray, y: np.ndarray, step: int) -> np.ndarray:
    """Cross-validated balanced accuracy of shrinkage LDA every ``step`` samples."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    lda = LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    return np.array(
        [
            balanced_accuracy_score(y, cross_val_predict(lda, x[:, :, t], y, cv=cv))
            for t in range(0, x.shape[-1], step)
        ]
    )


def _filtered(raw):
    raw.load_data().filter(0.1, 40.0, verbose=False)
    return raw.get_data(picks="eeg")


# --------------------------------------------------------------------------------------
# fixtures: every dataset generated once per module (and twice for determinism)


@pytest.fixture(scope="module")
def eeg_only(tmp_path_factory):
    return make_eeg_only(tmp_path_factory.mktemp("eeg_only") / "bids", seed=0)


@pytest.fixture(scope="module")
def fmri_movie(tmp_path_factory):
    return make_fmri_movie(tmp_path_factory.mktemp("fmri_movie") / "bids", seed=0)


@pytest.fixture(scope="module")
def ds117(tmp_path_factory):
    return make_ds000117_like(tmp_path_factory.mktemp("ds117") / "bids", seed=0)


@pytest.fixture(scope="module")
def ds117_options(tmp_path_factory):
    return make_ds000117_like(
        tmp_path_factory.mktemp("ds117_opt") / "bids",
        seed=0,
        fmriprep=True,
        meg_fif=True,
        header_tr=None,
    )


@pytest.fixture(scope="module")
def nsd(tmp_path_factory):
    return make_nsd_like(tmp_path_factory.mktemp("nsd") / "bids", seed=0)


@pytest.fixture(scope="module")
def algonauts(tmp_path_factory):
    return make_algonauts_like(tmp_path_factory.mktemp("algonauts") / "bids", seed=0)


@pytest.fixture(scope="module")
def event_related(tmp_path_factory):
    return make_event_related(tmp_path_factory.mktemp("event_related") / "bids", seed=0)


def test_root_must_be_empty(tmp_path):
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(FileExistsError, match="must be an empty or absent folder"):
        prepare_root(tmp_path)
    with pytest.raises(FileExistsError, match="must be an empty or absent folder"):
        make_fmri_movie(tmp_path)
    assert prepare_root(tmp_path / "new").is_dir()


@pytest.mark.parametrize(
    ("make", "files"),
    [
        (
            make_eeg_only,
            [
                "sub-01/eeg/sub-01_task-oddball_run-01_eeg.eeg",
                "sub-01/eeg/sub-01_task-oddball_run-01_events.tsv",
                "sub-01/eeg/sub-01_task-oddball_run-01_channels.tsv",
            ],
        ),
        (
            make_fmri_movie,
            [
                "sub-01/func/sub-01_task-movie_run-1_bold.nii.gz",
                "sub-01/func/sub-01_task-movie_run-1_events.tsv",
                "stimuli/captions.tsv",
                "stimuli/shots/run2_shot03.png",
            ],
        ),
        (
            make_ds000117_like,
            [
                "sub-01/ses-mri/func/sub-01_ses-mri_task-facerecognition_run-01_bold.nii.gz",
                "sub-01/ses-mri/func/sub-01_ses-mri_task-facerecognition_run-01_events.tsv",
                "sub-02/ses-eeg/eeg/sub-02_ses-eeg_task-facerecognition_run-02_eeg.eeg",
                "sub-02/ses-eeg/eeg/sub-02_ses-eeg_task-facerecognition_run-02_eeg.vmrk",
                "stimuli/func/f001.bmp",
                "stimuli/func/s036.bmp",
            ],
        ),
        (
            make_nsd_like,
            [
                "sub-01/ses-01/func/sub-01_ses-01_betas.nii.gz",
                "sub-02/ses-02/func/sub-02_ses-02_betas.h5",
                "sub-02/ses-01/func/sub-02_ses-01_trials.tsv",
                "sub-01/sub-01_ncsnr.nii.gz",
            ],
        ),
        (
            make_algonauts_like,
            [
                "sub-01/func/sub-01_task-movie_desc-parcels_timeseries.h5",
                "sub-02/func/sub-02_task-movie_run-3_events.tsv",
                "parcels.tsv",
            ],
        ),
        (
            make_event_related,
            [
                "derivatives/fmriprep/sub-01/ses-02/func/"
                "sub-01_ses-02_task-images_run-03_space-MNI152NLin2009cAsym_desc-preproc_bold.nii.gz",
                "sub-01/ses-03/func/sub-01_ses-03_task-images_run-01_events.tsv",
                "derivatives/fmriprep/sub-01/ses-01/func/"
                "sub-01_ses-01_task-images_run-02_desc-confounds_timeseries.tsv",
                "stimuli/img_007.png",
            ],
        ),
    ],
    ids=["eeg_only", "fmri_movie", "ds000117", "nsd", "algonauts", "event_related"],
)
def test_deterministic_per_seed(make, files, tmp_path, request):
    """Same seed, same bytes; another seed changes the data."""
    fixture = {
        "make_eeg_only": "eeg_only",
        "make_fmri_movie": "fmri_movie",
        "make_ds000117_like": "ds117",
        "make_nsd_like": "nsd",
        "make_algonauts_like": "algonauts",
        "make_event_related": "event_related",
    }[make.__name__]
    first = request.getfixturevalue(fixture)["root"]
    again = make(tmp_path / "again", seed=0)["root"]
    for name in files:
        assert digest(first / name) == digest(again / name), name
    assert sorted(p.relative_to(first) for p in first.rglob("*")) == sorted(
        p.relative_to(again) for p in again.rglob("*")
    )
    other = make(tmp_path / "other", seed=1)["root"]
    assert digest(first / files[0]) != digest(other / files[0])


@pytest.mark.slow
def test_interaction_movie_is_deterministic_and_carries_its_features(tmp_path):
    first = make_interaction_movie(tmp_path / "a", seed=0)
    again = make_interaction_movie(tmp_path / "b", seed=0)
    other = make_interaction_movie(tmp_path / "c", seed=1)
    bold = "sub-02/func/sub-02_task-movie_run-2_bold.nii.gz"
    assert digest(first["root"] / bold) == digest(again["root"] / bold)
    assert digest(first["root"] / bold) != digest(other["root"] / bold)
    events = pd.read_csv(first["root"] / "sub-01/func/sub-01_task-movie_run-1_events.tsv", sep="\t")
    columns = [*first["visual_columns"], *first["semantic_columns"]]
    assert list(events.columns) == ["onset", "duration", "trial_type", "stim_file", *columns]
    # shots start on volumes and tile the run; every shot's image exists
    steps = events["onset"] / first["tr"]
    np.testing.assert_allclose(steps, np.round(steps))
    end = events["onset"].iloc[-1] + events["duration"].iloc[-1]
    assert end == pytest.approx(first["n_volumes"] * first["tr"])
    assert all((first["root"] / "stimuli" / s).is_file() for s in events["stim_file"])
    masks = list(first["planted"]["rois"]["01"].values())
    assert sum(int(m.sum()) for m in masks) == int(np.logical_or.reduce(masks).sum()) > 60


# --------------------------------------------------------------------------------------
# 1. EEG only


def test_eeg_only_layout(eeg_only):
    root = eeg_only["root"]
    assert eeg_only["subjects"] == ["01", "02"]
    assert eeg_only["runs"] == ["01", "02"]
    assert eeg_only["formats"] == {"01": "BrainVision", "02": "FIF"}
    assert not list(root.rglob("func")) and not (root / "stimuli").exists()
    desc = json.loads((root / "dataset_description.json").read_text())
    assert desc["GeneratedBy"][0]["Name"] == "MNE-BIDS"
    assert (root / "participants.tsv").exists() and (root / "README").exists()
    assert eeg_only["sfreq"] <= 250
    for rec in eeg_only["recordings"]:
        assert rec["path"].exists(), rec["path"]
        assert rec["path"].suffix == {"BrainVision": ".vhdr", "FIF": ".fif"}[rec["format"]]
        assert f"_run-{rec['run']}_" in rec["path"].name
        events = pd.read_csv(rec["events"], sep="\t")
        assert "stim_file" not in events.columns
        assert {"onset", "duration", "trial_type", "value", "sample"} <= set(events.columns)
        assert set(events["trial_type"]) == {"standard", "deviant"}
        assert len(events) == rec["n_events"] == 80
        assert (events["trial_type"] == "deviant").sum() == rec["n_deviants"] == 20
        iti = np.diff(events["onset"])
        assert iti.min() > 0.85 and iti.max() < 1.15
        sidecar = json.loads(rec["sidecar"].read_text())
        assert sidecar["PowerLineFrequency"] == 50
        assert sidecar["SamplingFrequency"] == eeg_only["sfreq"]
        channels = pd.read_csv(rec["channels"], sep="\t")
        assert len(channels) == 32 and set(channels["type"]) == {"EEG"}
    assert list(root.glob("sub-01/eeg/*_electrodes.tsv"))
    assert _size(root) < MAX_BYTES


def test_eeg_only_readable_with_mne_bids(eeg_only):
    import mne_bids

    for rec in eeg_only["recordings"]:
        bids_path = mne_bids.get_bids_path_from_fname(rec["path"])
        raw = mne_bids.read_raw_bids(bids_path, verbose=False)
        assert raw.ch_names == eeg_only["ch_names"]
        assert raw.info["sfreq"] == eeg_only["sfreq"]
        assert raw.info["line_freq"] == 50
        assert raw.get_montage() is not None
        assert not np.isnan(np.array([ch["loc"][:3] for ch in raw.info["chs"]])).any()
        assert sorted(set(raw.annotations.description)) == ["deviant", "standard"]
        assert len(raw.annotations) == rec["n_events"]
        data = raw.get_data()
        assert np.isfinite(data).all() and data.shape == (32, rec["n_times"])


def test_eeg_only_sessions(tmp_path):
    import mne_bids

    facts = make_eeg_only(tmp_path / "bids", seed=3, sessions=True)
    assert facts["sessions"] == ["01"]
    root = facts["root"]
    assert sorted(p.name for p in root.glob("sub-*/ses-01/*_scans.tsv")) == [
        "sub-01_ses-01_scans.tsv",
        "sub-02_ses-01_scans.tsv",
    ]
    assert not list(root.glob("sub-*/eeg"))
    path = mne_bids.BIDSPath(
        subject="01", session="01", task="oddball", run="02", datatype="eeg", root=root
    )
    assert mne_bids.read_raw_bids(path, verbose=False).info["sfreq"] == facts["sfreq"]


def test_eeg_only_p300_decodable_and_line_noise(eeg_only):
    """Deviants vs standards: above chance around 0.35 s, at chance before onset, not perfect."""
    import mne_bids

    for sub in eeg_only["subjects"]:
        x, y = [], []
        for rec in [r for r in eeg_only["recordings"] if r["subject"] == sub]:
            raw = mne_bids.read_raw_bids(mne_bids.get_bids_path_from_fname(rec["path"]))
            sfreq = raw.info["sfreq"]
            unfiltered = raw.get_data()
            spectrum = np.abs(np.fft.rfft(unfiltered, axis=1)).mean(axis=0)
            freqs = np.fft.rfftfreq(unfiltered.shape[1], 1 / sfreq)
            near = (freqs > 42) & (freqs < 48)
            assert spectrum[np.argmin(np.abs(freqs - 50))] > 20 * np.median(spectrum[near])
            events = pd.read_csv(rec["events"], sep="\t")
            x.append(_epochs(_filtered(raw), events["sample"].to_numpy(), sfreq))
            y.append((events["trial_type"] == "deviant").to_numpy())
        x, y = np.concatenate(x), np.concatenate(y)
        step = 4
        acc = _lda_curve(x, y, step)
        times = (np.arange(x.shape[-1]) / sfreq - 0.2)[::step]
        window = (times >= 0.25) & (times <= 0.45)
        assert acc[window].max() > 0.7, (sub, acc.round(2))
        assert acc.max() < 0.97
        assert acc[times < 0].mean() < 0.58


# --------------------------------------------------------------------------------------
# 2. fMRI movie


def test_fmri_movie_layout(fmri_movie):
    import nibabel as nib
    from PIL import Image

    root = fmri_movie["root"]
    assert fmri_movie["runs"] == ["1", "2", "3"]
    assert not (root / "derivatives").exists()
    assert not list(root.glob("task-*_bold.json"))
    assert not list(root.rglob("*dseg*")) and not list(root.rglob("*mask*"))
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")
    seen = []
    for (sub, run), path in fmri_movie["bold"].items():
        img = nib.load(path)
        assert img.shape == (*fmri_movie["grid_shape"], fmri_movie["n_volumes"])
        assert len(set(img.shape[:3])) == 3
        sidecar = json.loads(fmri_movie["sidecars"][sub, run].read_text())
        assert sidecar["RepetitionTime"] == 2.0
        events = pd.read_csv(fmri_movie["events"][sub, run], sep="\t")
        assert list(events.columns) == ["onset", "duration", "trial_type", "stim_file"]
        assert set(events["trial_type"]) == {"shot"}
        assert events["duration"].between(1.99, 6.01).all()
        np.testing.assert_allclose(events["onset"].iloc[1:], (events.onset + events.duration)[:-1])
        assert events["stim_file"].str.fullmatch(rf"shots/run{run}_shot\d+\.png").all()
        if sub == "01":
            seen += list(events["stim_file"])
        assert np.isfinite(np.asarray(img.dataobj, dtype=float)).all()
    assert len(seen) == len(set(seen)) == len(fmri_movie["stimuli"])
    assert set(captions["stim_file"]) == set(seen) and captions["caption"].str.len().min() > 5
    pixels = [np.asarray(Image.open(root / "stimuli" / s)) for s in seen]
    assert len({p.tobytes() for p in pixels}) == len(pixels)
    np.testing.assert_allclose(
        image_features(np.stack(pixels)),
        np.array([fmri_movie["feature_values"][s] for s in seen]),
    )
    assert _size(root) < MAX_BYTES


def test_fmri_movie_ridge_predicts_last_run(fmri_movie):
    import nibabel as nib

    values = fmri_movie["feature_values"]
    for sub in fmri_movie["subjects"]:
        blob = fmri_movie["planted"]["blob"][sub]
        rest = fmri_movie["planted"]["brain"][sub] & ~blob
        xs, ys = {}, {}
        for run in fmri_movie["runs"]:
            events = pd.read_csv(fmri_movie["events"][sub, run], sep="\t")
            tr = json.loads(fmri_movie["sidecars"][sub, run].read_text())["RepetitionTime"]
            data = np.asarray(nib.load(fmri_movie["bold"][sub, run]).dataobj, dtype=float)
            feats = _zfeatures(values, events["stim_file"])
            x = hrf_convolve(feats, events.onset, events.duration, data.shape[-1], tr)
            xs[run] = _detrend(x)
            ys[run] = _detrend(data[blob | rest].T)
        train, (test,) = fmri_movie["train_runs"], fmri_movie["test_runs"]
        x = np.concatenate([xs[r] for r in train])
        w = np.linalg.solve(x.T @ x + np.eye(2), x.T @ np.concatenate([ys[r] for r in train]))
        r = _corr(xs[test] @ w, ys[test])
        in_blob = blob[blob | rest]
        assert np.median(r[in_blob]) > 0.45, np.median(r[in_blob])
        assert r[in_blob].min() > 0.2
        assert abs(np.median(r[~in_blob])) < 0.1


# --------------------------------------------------------------------------------------
# 3. ds000117-like

FMRI_HEADER = (
    "onset\tduration\tcircle_duration\tstim_type\ttrigger\tbutton_pushed\tresponse_time\tstim_file"
)
MEG_HEADER = "onset\tduration\tonset_sample\tstim_type\ttrigger\tstim_file"


def _check_repeats(table: pd.DataFrame, stim_types: dict[str, int]) -> None:
    """Every image twice: first (base code), then immediate (+1, next row) or delayed (+2)."""
    rows = table[table["trigger"] != 999].reset_index(drop=True)
    for stim, group in rows.groupby("stim_file"):
        assert len(group) == 2, stim
        first, second = group.index
        base = stim_types[group["stim_type"].iloc[0]]
        assert group["trigger"].iloc[0] == base
        if second == first + 1:
            assert group["trigger"].iloc[1] == base + 1, stim
        else:
            assert group["trigger"].iloc[1] == base + 2 and second - first > 2, stim


def test_ds000117_fmri_layout(ds117):
    import nibabel as nib

    root = ds117["root"]
    assert json.loads((root / "task-facerecognition_bold.json").read_text())[
        "RepetitionTime"
    ] == pytest.approx(2.0)
    assert not list(root.glob("sub-*/**/*_bold.json"))
    codes = {"FAMOUS": 5, "UNFAMILIAR": 13, "SCRAMBLED": 17}
    for (sub, run), path in ds117["fmri_events"].items():
        raw = path.read_bytes()
        assert raw.count(b"\r\n") == raw.count(b"\n") > 50
        assert raw.decode().split("\r\n")[0] == FMRI_HEADER
        table = pd.read_csv(path, sep="\t")
        assert not table["stim_file"].str.contains("\r").any()
        rest = table[table["trigger"] == 999]
        assert len(rest) == 1
        assert rest["stim_type"].isna().all() and rest["duration"].iloc[0] == 20
        assert rest["stim_file"].iloc[0] == "func/i999.bmp"
        stims = table.drop(rest.index)
        assert set(stims["stim_type"]) == set(codes)
        assert stims["stim_file"].str.fullmatch(r"func/[fus]\d{3}\.bmp").all()
        lines = raw.decode().split("\r\n")[1:-1]
        cells = [line.split("\t") for line in lines]
        assert cells[0][0] == "0"
        assert all(re.fullmatch(r"\.\d{3}|20\.000", c[1]) for c in cells)
        assert all(re.fullmatch(r"\d*\.\d{3}", c[6]) for c in cells)
        _check_repeats(table, codes)
        img = nib.load(ds117["bold"][sub, run])
        assert img.shape == (*ds117["grid_shape"], ds117["n_volumes"])
        assert img.header.get_zooms()[3] == pytest.approx(2.0)
        assert stims["onset"].max() + 20 < ds117["n_volumes"] * ds117["tr"]
        for stim in table["stim_file"]:
            assert (root / "stimuli" / stim).exists()
    assert _size(root) < MAX_BYTES


def test_ds000117_stimuli_folders(ds117):
    from PIL import Image

    stim = ds117["root"] / "stimuli"
    assert (stim / "func" / "i999.bmp").exists()
    func = {p.name for p in (stim / "func").glob("*.bmp")}
    meg = {p.name for p in (stim / "meg").glob("*.bmp")}
    assert meg < func and len(meg) > 0.5 * len(func)
    same = sorted(n for n in meg if digest(stim / "func" / n) == digest(stim / "meg" / n))
    assert same == ds117["identical"]
    assert meg - set(same) == {ds117["conflict"]}
    img = Image.open(stim / "func" / "f001.bmp")
    assert img.format == "BMP" and img.mode == "L"


def test_ds000117_eeg_readable(ds117):
    import mne

    for (_, _), rec in ds117["eeg"].items():
        raw = mne.io.read_raw_brainvision(rec["path"], preload=True, verbose=False)
        assert raw.info["sfreq"] == ds117["eeg_sfreq"] and len(raw.ch_names) >= 32
        assert np.isfinite(raw.get_data()).all()
        data = rec["events"].read_bytes()
        assert data.decode().split("\r\n")[0] == MEG_HEADER
        table = pd.read_csv(rec["events"], sep="\t")
        assert len(table) == rec["n_trials"] and "trial_type" not in table.columns
        assert set(table["stim_type"]) == {"Famous", "Unfamiliar", "Scrambled"}
        assert table["stim_file"].str.fullmatch(r"meg/[fus]\d{3}\.bmp").all()
        np.testing.assert_allclose(table["onset"] * raw.info["sfreq"], table["onset_sample"])
        _check_repeats(table, {"Famous": 5, "Unfamiliar": 13, "Scrambled": 17})
        markers = raw.annotations[raw.annotations.description != "New Segment/"]
        np.testing.assert_allclose(markers.onset, table["onset"], atol=1e-6)
        assert [int(d.split("S")[-1]) for d in markers.description] == list(table["trigger"])
        channels = pd.read_csv(rec["channels"], sep="\t")
        assert list(channels["name"]) == raw.ch_names
        assert json.loads(rec["sidecar"].read_text())["PowerLineFrequency"] == 50


def test_ds000117_fmri_signal(ds117):
    """Faces > scrambled in the face blob; luminance/contrast predict the visual blob."""
    import nibabel as nib

    values = ds117["image_features"]
    for sub in ds117["subjects"]:
        xs, ys = [], []
        for run in ds117["fmri_runs"]:
            table = pd.read_csv(ds117["fmri_events"][sub, run], sep="\t")
            table = table[table["trigger"] != 999]
            data = np.asarray(nib.load(ds117["bold"][sub, run]).dataobj, dtype=float)
            design = np.column_stack(
                [
                    table["stim_type"] != "SCRAMBLED",
                    table["stim_type"] == "SCRAMBLED",
                    _zfeatures(values, table["stim_file"]),
                ]
            ).astype(float)
            x = hrf_convolve(design, table.onset, table.duration, data.shape[-1], ds117["tr"])
            y = data.reshape(-1, data.shape[-1]).T
            xs.append(_detrend(x))
            ys.append(_detrend(100 * y / y.mean(axis=0)))
        face = ds117["planted"]["face_blob"][sub].ravel()
        vis = ds117["planted"]["visual_blob"][sub].ravel()
        other = ds117["planted"]["brain"][sub].ravel() & ~face & ~vis
        x, y = np.concatenate(xs), np.concatenate(ys)
        beta = np.linalg.lstsq(x, y, rcond=None)[0]
        resid = y - x @ beta
        sigma2 = (resid**2).sum(axis=0) / (len(x) - x.shape[1])
        c = np.array([1.0, -1.0, 0.0, 0.0])
        t_face = c @ beta / np.sqrt(sigma2 * (c @ np.linalg.inv(x.T @ x) @ c))
        assert np.median(t_face[face]) > 6, np.median(t_face[face])
        assert np.percentile(np.abs(t_face[other]), 95) < 3
        # leave-one-run-out: image statistics (and onsets) predict the visual blob
        r = []
        for k in range(len(xs)):
            train = [i for i in range(len(xs)) if i != k]
            xt = np.concatenate([xs[i] for i in train])
            w = np.linalg.lstsq(xt, np.concatenate([ys[i][:, vis] for i in train]), rcond=None)
            r.append(_corr(xs[k] @ w[0], ys[k][:, vis]))
        assert np.median(np.mean(r, axis=0)) > 0.4


def test_ds000117_eeg_faces_decodable(ds117):
    import mne

    for sub in ds117["subjects"]:
        x, y = [], []
        for run in ds117["eeg_runs"]:
            rec = ds117["eeg"][sub, run]
            raw = mne.io.read_raw_brainvision(rec["path"], verbose=False)
            table = pd.read_csv(rec["events"], sep="\t")
            sfreq = raw.info["sfreq"]
            x.append(_epochs(_filtered(raw), table["onset_sample"].to_numpy(), sfreq))
            y.append((table["stim_type"] != "Scrambled").to_numpy())
        x, y = np.concatenate(x), np.concatenate(y)
        acc = _lda_curve(x, y, 4)
        times = (np.arange(x.shape[-1]) / sfreq - 0.2)[::4]
        window = (times >= 0.14) & (times <= 0.2)
        assert acc[window].max() > 0.68, (sub, acc.round(2))
        assert acc.max() < 0.97 and acc[times < 0].mean() < 0.58


def test_ds000117_options(ds117_options):
    import mne
    import nibabel as nib

    facts = ds117_options
    root = facts["root"]
    assert facts["sessions"] == ["mri", "eeg", "meg"]
    img = nib.load(facts["bold"]["01", "01"])
    assert img.header.get_zooms()[3] != pytest.approx(2.0)  # TR only in the sidecar
    prep = facts["fmriprep"]
    desc = json.loads((root / "derivatives/fmriprep/dataset_description.json").read_text())
    assert desc["DatasetType"] == "derivative"
    for key, path in prep["preproc"].items():
        assert "space-MNI152NLin2009cAsym_desc-preproc_bold" in path.name
        bold = nib.load(path)
        mask = nib.load(prep["mask"][key])
        assert bold.shape == (*prep["grid_shape"], facts["n_volumes"])
        assert bold.shape[:3] != facts["grid_shape"]
        np.testing.assert_allclose(bold.affine, mask.affine)
        assert bold.get_data_dtype() == np.float32
        conf = pd.read_csv(prep["confounds"][key], sep="\t")
        assert list(conf.columns[:6]) == [
            "trans_x",
            "trans_y",
            "trans_z",
            "rot_x",
            "rot_y",
            "rot_z",
        ]
        assert {"framewise_displacement", "non_steady_state_outlier00"} <= set(conf.columns)
        assert len(conf) == facts["n_volumes"] and np.isnan(conf["framewise_displacement"][0])
        assert conf["non_steady_state_outlier00"].tolist() == [1] + [0] * (len(conf) - 1)
        data = np.asarray(bold.dataobj)
        brain = np.asarray(mask.dataobj) > 0
        assert np.isfinite(data).all()
        assert data[brain, 0].mean() > 1.2 * data[brain, 1:].mean()
    for sub, rec in facts["meg"].items():
        raw = mne.io.read_raw_fif(rec["path"], preload=True, verbose=False)
        types = raw.get_channel_types()
        assert {"mag", "grad", "eeg", "stim"} == set(types)
        assert types.count("eeg") >= 60 and types.count("grad") == 2 * types.count("mag")
        assert raw.ch_names[:3] == ["MEG0111", "MEG0112", "MEG0113"]
        assert "EEG001" in raw.ch_names and raw.info["line_freq"] == 50
        assert np.isfinite(raw.get_data()).all()
        table = pd.read_csv(rec["events"], sep="\t")
        assert rec["events"].read_bytes().split(b"\r\n")[0].decode() == MEG_HEADER
        found = mne.find_events(raw, stim_channel="STI101", verbose=False)
        np.testing.assert_array_equal(found[:, 0], table["onset_sample"])
        np.testing.assert_array_equal(found[:, 2], table["trigger"])
        # faces vs scrambled show in the EEG of the FIF too (mean N170 over the run)
        eeg = _filtered(raw)
        ep = _epochs(eeg, table["onset_sample"].to_numpy(), raw.info["sfreq"])
        face = (table["stim_type"] != "Scrambled").to_numpy()
        peak = round((0.2 + 0.17) * raw.info["sfreq"])
        diff = ep[face, :, peak].mean(0) - ep[~face, :, peak].mean(0)
        assert diff.min() < -3e-6, sub
        assert (root / f"sub-{sub}/ses-meg/meg/sub-{sub}_ses-meg_coordsystem.json").exists()
    assert _size(root) < MAX_BYTES


# --------------------------------------------------------------------------------------
# 4. NSD-like


def _nsd_betas(nsd, sub: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trial, voxel) betas z-scored per session, stim_files, early-visual column flags."""
    import h5py
    import nibabel as nib

    brain = nsd["planted"]["brain"][sub]
    betas, stims = [], []
    for ses in nsd["sessions"]:
        trials = pd.read_csv(nsd["trials"][sub, ses], sep="\t")
        path = nsd["betas"][sub, ses]
        if path.suffix == ".h5":
            with h5py.File(path) as f:
                stored = f["betas"]
                assert stored.dtype == np.int16 and stored.attrs["scale"] == 300
                b = stored[:] / stored.attrs["scale"]
        else:
            img = nib.load(path)
            assert img.get_data_dtype() == np.float32 and img.ndim == 4
            b = np.asarray(img.dataobj)[brain].T
        assert b.shape[0] == len(trials)
        betas.append((b - b.mean(0)) / b.std(0))
        stims += list(trials["stim_file"])
    flags = nsd["planted"]["early_visual"][sub][brain]
    return np.concatenate(betas), np.array(stims), flags


def test_nsd_layout(nsd):
    import h5py
    import nibabel as nib

    root = nsd["root"]
    rois = pd.read_csv(nsd["rois_tsv"], sep="\t")
    assert rois.to_dict("list") == {"index": [1, 2], "name": ["early_visual", "other"]}
    mask = np.asarray(nib.load(nsd["mask"]).dataobj)
    with h5py.File(nsd["betas"]["02", "01"]) as f:
        assert f["betas"].shape == (nsd["n_trials"], int((mask != 0).sum()))
    np.testing.assert_array_equal(mask != 0, nsd["planted"]["brain"]["02"])
    sub01 = nib.load(nsd["betas"]["01", "01"])
    assert sub01.shape == (*nsd["grid_shape"]["01"], nsd["n_trials"])
    assert (np.asarray(sub01.dataobj)[~nsd["planted"]["brain"]["01"]] == 0).all()
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")
    assert set(captions["stim_file"]) == set(nsd["stimuli"])
    per_subject = {}
    for sub in nsd["subjects"]:
        dseg = nib.load(nsd["rois"][sub])
        assert dseg.shape == nsd["grid_shape"][sub]
        labels = np.asarray(dseg.dataobj)
        np.testing.assert_array_equal(labels == 1, nsd["planted"]["early_visual"][sub])
        sessions = {}
        for ses in nsd["sessions"]:
            trials = pd.read_csv(nsd["trials"][sub, ses], sep="\t")
            assert list(trials.columns) == ["stim_file", "trial_type", "run"]
            assert len(trials) == nsd["n_trials"] and set(trials["trial_type"]) == {"image"}
            assert sorted(set(trials["run"])) == [1, 2, 3]
            assert trials["stim_file"].str.fullmatch(r"nsd/nsd\d{5}\.png").all()
            sessions[ses] = trials["stim_file"]
        counts = pd.concat(sessions.values()).value_counts()
        assert (counts[nsd["test_images"]] == nsd["n_repeats"]).all()
        assert (counts.drop(nsd["test_images"]) == 1).all()
        both = set(sessions["01"]) & set(sessions["02"])
        assert both and both <= set(nsd["test_images"])
        per_subject[sub] = set(counts.index)
    assert per_subject["01"] & per_subject["02"] == set(nsd["test_images"])
    for stim in nsd["stimuli"]:
        assert (root / "stimuli" / stim).exists()
    ncsnr = np.asarray(nib.load(nsd["ncsnr"]).dataobj)
    assert np.isfinite(ncsnr).all()
    ev = nsd["planted"]["early_visual"]["01"]
    assert np.median(ncsnr[ev]) > 2 * np.median(ncsnr[nsd["planted"]["brain"]["01"] & ~ev])
    assert _size(root) < MAX_BYTES


def test_nsd_early_visual_predicts_test_images(nsd):
    for sub in nsd["subjects"]:
        betas, stims, vis = _nsd_betas(nsd, sub)
        assert np.isfinite(betas).all()
        x = _zfeatures(nsd["feature_values"], stims)
        test = np.isin(stims, nsd["test_images"])
        design = np.column_stack([x, np.ones(len(x))])
        w = np.linalg.lstsq(design[~test], betas[~test], rcond=None)[0]
        images = nsd["test_images"]
        observed = np.array([betas[stims == t].mean(0) for t in images])
        xt = np.column_stack([_zfeatures(nsd["feature_values"], images), np.ones(len(images))])
        r = _corr(xt @ w, observed)
        assert np.median(r[vis]) > 0.6, np.median(r[vis])
        assert abs(np.median(r[~vis])) < 0.15


# --------------------------------------------------------------------------------------
# 5. Algonauts-like


def test_algonauts_layout(algonauts):
    import h5py

    root = algonauts["root"]
    parcels = pd.read_csv(algonauts["parcels_tsv"], sep="\t")
    assert len(parcels) == 40 and list(parcels["index"]) == list(range(1, 41))
    assert parcels["name"].str.fullmatch(r"7Networks_(LH|RH)_[A-Za-z]+_\d+").all()
    assert parcels["name"].str.contains("_Vis_").sum() == len(algonauts["planted"]["visual"])
    assert json.loads(algonauts["sidecar"].read_text())["RepetitionTime"] == 1.49
    for sub, path in algonauts["timeseries"].items():
        with h5py.File(path) as f:
            assert sorted(f) == [f"task-movie_run-{r}" for r in algonauts["runs"]]
            for name in f:
                assert f[name].shape == (algonauts["n_volumes"], 40)
                assert f[name].dtype == np.float32 and np.isfinite(f[name][:]).all()
                assert not f[name].attrs.keys()
        events = {r: algonauts["events"][sub, r].read_bytes() for r in algonauts["runs"]}
        assert events["3"] == events["4"]
        assert len({events["1"], events["2"], events["3"]}) == 3
    stims = [s for r in ("1", "2", "3") for s in algonauts["run_stimuli"][r]]
    assert len(stims) == len(set(stims)) == len(algonauts["stimuli"])
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")
    assert set(captions["stim_file"]) == set(stims)
    assert all((root / "stimuli" / s).exists() for s in stims)
    assert _size(root) < MAX_BYTES


def test_algonauts_visual_parcels(algonauts):
    import h5py

    tr = json.loads(algonauts["sidecar"].read_text())["RepetitionTime"]
    vis = np.array(algonauts["planted"]["visual_index"])
    other = np.setdiff1d(np.arange(40), vis)
    for sub in algonauts["subjects"]:
        xs, ys = {}, {}
        with h5py.File(algonauts["timeseries"][sub]) as f:
            for run in algonauts["runs"]:
                y = f[algonauts["datasets"][run]][:].astype(float)
                events = pd.read_csv(algonauts["events"][sub, run], sep="\t")
                feats = _zfeatures(algonauts["feature_values"], events["stim_file"])
                xs[run] = hrf_convolve(feats, events.onset, events.duration, len(y), tr)
                ys[run] = (y - y.mean(0)) / y.std(0)
        x = np.concatenate([xs[r] for r in algonauts["train_runs"]])
        x = x - x.mean(0)
        y = np.concatenate([ys[r] for r in algonauts["train_runs"]])
        w = np.linalg.solve(x.T @ x + np.eye(2), x.T @ y)
        test = np.mean([ys[r] for r in algonauts["test_runs"]], axis=0)
        r = _corr(xs["3"] @ w, test)
        assert np.median(r[vis]) > 0.5 and r[vis].min() > 0.3
        assert abs(np.median(r[other])) < 0.1
        retest = _corr(ys["3"], ys["4"])
        assert np.median(retest[vis]) > 0.25 and abs(np.median(retest[other])) < 0.1


def test_ds000117_one_subject_is_the_first_of_two(tmp_path):
    sizes = {"n_volumes": 34, "n_fmri_runs": 2, "fmri_per_run": 2, "eeg_per_run": 2}
    one = make_ds000117_like(tmp_path / "one", seed=0, n_subjects=1, **sizes)
    two = make_ds000117_like(tmp_path / "two", seed=0, **sizes)
    assert one["subjects"] == ["01"] and two["subjects"] == ["01", "02"]
    participants = pd.read_csv(tmp_path / "one" / "participants.tsv", sep="\t")
    assert list(participants["participant_id"]) == ["sub-01"]
    assert not (tmp_path / "one" / "sub-02").exists()
    for name in ("bold", "eeg"):
        assert set(one[name]) == {k for k in two[name] if k[0] == "01"}
    for key, path in one["bold"].items():
        assert digest(path) == digest(two["bold"][key])
    for key, facts in one["eeg"].items():
        assert digest(facts["path"]) == digest(two["eeg"][key]["path"])
    with pytest.raises(ValueError, match=r"`n_subjects` must be 1 or 2, got 0 instead"):
        make_ds000117_like(tmp_path / "none", seed=0, n_subjects=0)


def test_algonauts_one_subject_is_the_first_of_two(algonauts, tmp_path):
    import h5py

    one = make_algonauts_like(tmp_path / "one", seed=0, n_subjects=1)
    assert one["subjects"] == ["01"] and not (tmp_path / "one" / "sub-02").exists()
    with h5py.File(one["timeseries"]["01"]) as f, h5py.File(algonauts["timeseries"]["01"]) as g:
        for name in g:
            np.testing.assert_array_equal(f[name][:], g[name][:])
    with pytest.raises(ValueError, match=r"`n_subjects` must be 1 or 2, got 3 instead"):
        make_algonauts_like(tmp_path / "three", seed=0, n_subjects=3)


# --------------------------------------------------------------------------------------
# 6. Event-related fMRIPrep derivatives


def test_event_related_layout(event_related):
    facts = event_related
    root = facts["root"]
    assert len(facts["runs"]) == 12 and facts["sessions"] == ["01", "02", "03"]
    events = pd.read_csv(facts["events"]["02", "03"], sep="\t", na_values="n/a")
    assert list(events.columns) == ["onset", "duration", "trial_type", "stim_file", "response_time"]
    rest = events[events.trial_type == "rest"]
    assert len(rest) == 1 and rest.stim_file.isna().all() and rest.duration.iloc[0] == 16.0
    images = events[events.trial_type != "rest"]
    assert set(images.trial_type) == {"animal", "object"}
    assert images.duration.between(0.8, 1.2).all() and events.response_time.isna().any()
    assert all((root / "stimuli" / s).is_file() for s in images.stim_file)
    conf = pd.read_csv(facts["confounds"]["01", "01"], sep="\t", na_values="n/a")
    assert {"trans_x_derivative1_power2", "white_matter", "csf"} <= set(conf.columns)
    assert conf["non_steady_state_outlier00"].tolist()[:2] == [1, 0]
    assert facts["rois"]["visual"].sum() > 30 and facts["rois"]["category"].sum() > 30
    assert not (facts["rois"]["visual"] & facts["rois"]["category"]).any()
    assert _size(root) < MAX_BYTES


def test_event_related_signal_and_motion_leak(event_related):
    """The planted regressors explain the ROIs beyond drifts and motion; motion explains
    voxels outside them beyond drifts."""
    import nibabel as nib

    facts = event_related
    brain = facts["brain"]
    gains = {"visual": [], "category": []}
    motion_gain, other_gain = [], []
    runs = list(facts["runs"])

    def r2(x, y):
        pred = x @ np.linalg.lstsq(x, y, rcond=None)[0]
        return 1 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)

    for key in facts["runs"]:
        y = nib.load(facts["preproc"][key]).get_fdata()[brain].T[1:]
        n = len(y)
        frames = np.arange(n)
        drifts = np.column_stack(
            [np.ones(n)] + [np.cos(np.pi * (frames + 0.5) * k / n) for k in range(1, 6)]
        )
        columns = ["trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z"]
        conf = pd.read_csv(facts["confounds"][key], sep="\t", na_values="n/a")
        motion = conf[columns].to_numpy()[1:]
        other_key = runs[(runs.index(key) + 1) % len(runs)]
        other = pd.read_csv(facts["confounds"][other_key], sep="\t")[columns].to_numpy()[1:]
        nuisance = np.column_stack([drifts, motion])
        base = r2(nuisance, y)
        for roi in gains:
            full = np.column_stack([nuisance, facts["design"][key][roi][1:]])
            gains[roi].append(r2(full, y) - base)
        motion_gain.append(base - r2(drifts, y))
        other_gain.append(r2(np.column_stack([drifts, other]), y) - r2(drifts, y))
    outside = ~(facts["rois"]["visual"] | facts["rois"]["category"])[brain]
    for roi, gain in gains.items():
        gain = np.mean(gain, axis=0)
        inside = facts["rois"][roi][brain]
        assert gain[inside].mean() > 0.1 and gain[outside].mean() < 0.04, roi
    # the run's own motion explains voxels outside the ROIs; another run's does not
    leak = np.mean(motion_gain, axis=0)[outside].mean()
    assert leak > 2 * np.mean(other_gain, axis=0)[outside].mean(), leak

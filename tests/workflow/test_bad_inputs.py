"""Bad inputs fed to ``snakemake``: refused with a message naming the file or key, and
nothing that looks like a result is written."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from dataset_shapes import make_fmri_movie
from workflow_helpers import snakemake, write_config

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture
def movie(tmp_path):
    facts = make_fmri_movie(tmp_path / "bids", seed=4, n_subjects=1, n_volumes=40)
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        "rsa": {"enabled": False},
    }  # fmt: skip
    return tmp_path, facts, config


def test_acausal_lags_fail_before_any_job(movie):
    root, _, config = movie
    for section, values in (
        ("encoding", {"delays": {"method": "fir", "lags": [-1, 1]}}),
        ("features", {"alignment": {"delays": [-2, 0]}}),
    ):
        bad = {**config, section: {**config.get(section, {}), **values}}
        write_config(root / "config.yaml", bad)
        proc = snakemake(root, "-n", check=False)
        text = proc.stdout + proc.stderr
        assert proc.returncode != 0
        assert "must be >= 0" in text or "less than the minimum of 0" in text, text[-2000:]
        assert not (root / "results").exists()


def test_constant_bold_run_fails_with_the_file_named(movie):
    root, facts, config = movie
    bold = facts["bold"][("01", "2")]
    img = nib.load(bold)
    nib.save(nib.Nifti1Image(np.zeros(img.shape, np.int16), img.affine, img.header), bold)
    write_config(root / "config.yaml", config)
    proc = snakemake(root, "--cores", "2", check=False)
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (root / "logs" / "preprocess_fmri").rglob("*.log"))
    assert f"BOLD image {bold} is constant over time" in logs
    # the failed run has no store; nothing downstream was fitted
    assert not list((root / "results").rglob("*run-2_desc-clean_bold.zarr"))
    assert not (root / "results" / "encoding").exists()


@pytest.mark.parametrize(
    ("sections", "message"),
    [
        ({"preprocess_eeg": {"epochs_tmin": 0.5, "epochs_tmax": 0.1}},
         "`preprocess_eeg.epochs_tmin` must be smaller than `preprocess_eeg.epochs_tmax`"),
        ({"preprocess_eeg": {"l_freq": 40.0, "h_freq": 10.0}},
         "`preprocess_eeg.l_freq` must be smaller than `preprocess_eeg.h_freq`"),
        ({"encoding": {"cv": {"grouped_kfold": 3}}},
         "`encoding.cv.grouped_kfold` must be at most the number of training runs, got 3"),
        ({"encoding": {"alphas": {"start": 0.0, "stop": 400.0, "num": 5}}},
         "`encoding.alphas.stop` is a base-10 exponent and must be between -30 and 30"),
        ({"dataset": {"subjects": ["03"]}},
         "No subject '03' in {root} (available: 01): `dataset.subjects` must name labels"),
        ({"dataset": {"tasks": ["movei"]}}, "`dataset.tasks` must name labels the dataset "
         "has. Did you mean 'movie'?"),
        ({"encoding": {"models": {"visual": {"feature_spaces": ["image_statistic"]}}}},
         "Did you mean 'image_statistics'?"),
    ],
)  # fmt: skip
def test_plan_time_mistakes_fail_the_dry_run(movie, sections, message):
    root, _, config = movie
    bad = {**config}
    for section, values in sections.items():
        bad[section] = {**config.get(section, {}), **values}
    write_config(root / "config.yaml", bad)
    proc = snakemake(root, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert message.format(root=root / "bids") in text, text[-2000:]
    assert not (root / "results").exists()


def test_negative_event_duration_fails_the_run_naming_file_and_row(movie):
    root, _, config = movie
    events = root / "bids" / "sub-01" / "func" / "sub-01_task-movie_run-1_events.tsv"
    lines = events.read_text().splitlines()
    head = lines[0].split("\t")
    row = lines[2].split("\t")
    row[head.index("duration")] = "-1.5"
    lines[2] = "\t".join(row)
    events.write_text("\n".join(lines) + "\n")
    write_config(root / "config.yaml", config)
    proc = snakemake(root, "--cores", "2", check=False)
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (root / "logs").rglob("*.log"))
    assert f"Events file {events}" in logs and "'duration' must be >= 0 s" in logs, logs[-3000:]
    assert "got -1.5 in row 2 instead" in logs
    assert not list((root / "results").rglob("*run-1_desc-clean_bold.zarr"))
    assert not (root / "results" / "encoding").exists()


def test_nan_eeg_samples_fail_that_recording_and_keep_the_others(tmp_path):
    import mne
    from dataset_shapes import make_eeg_only

    facts = make_eeg_only(tmp_path / "bids", seed=3)
    fif = next(r for r in facts["recordings"] if r["format"] == "FIF")
    raw = mne.io.read_raw_fif(fif["path"], preload=True, verbose="error")
    raw._data[2, 1000:1500] = np.nan  # half a second of one channel
    raw.save(fif["path"], overwrite=True, verbose="error")
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "decoding": {"classification": {"n_permutations": 4}},
        "qc": {"enabled": False},  # not under test
    }
    write_config(tmp_path / "config.yaml", config)
    proc = snakemake(tmp_path, "--cores", "2", "--keep-going", check=False)
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (tmp_path / "logs" / "preprocess_eeg").rglob("*.log"))
    assert f"{fif['path']} must be finite, got 500 NaN samples in channel(s)" in logs, logs[-3000:]
    epochs = sorted(p.name for p in (tmp_path / "results").rglob("*_epo.zarr"))
    stem = Path(fif["path"]).name.split("_eeg")[0]
    assert epochs and not any(name.startswith(stem) for name in epochs)
    # nothing pooled over the subject's recordings was made from the other, finite one;
    # the other subject is decoded by its own job, and no store gathers the subjects
    decoded = sorted(p.name for p in (tmp_path / "results").rglob("*decoding_eeg.zarr"))
    assert f"sub-{fif['subject']}_decoding_eeg.zarr" not in decoded
    assert "decoding_eeg.zarr" not in decoded


def test_unsupported_stim_file_fails_the_dry_run(movie):
    root, _, config = movie
    events = root / "bids" / "sub-01" / "func" / "sub-01_task-movie_run-2_events.tsv"
    lines = events.read_text().splitlines()
    head = lines[0].split("\t")
    row = lines[3].split("\t")
    row[head.index("stim_file")] = "notes.docx"
    lines[3] = "\t".join(row)
    events.write_text("\n".join(lines) + "\n")
    (root / "bids" / "stimuli" / "notes.docx").write_bytes(b"PK\x03\x04 not an image")
    write_config(root / "config.yaml", config)
    proc = snakemake(root, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        f"Stimulus file 'notes.docx' (stim_file in {events}, row 3) must have an extension "
        "neuroflow reads, got '.docx' instead: `features.extractors[0]` ('image_statistics') "
        "infers the modality of its stimuli from their extensions (`modality: auto`)."
    ) in text, text[-2000:]
    assert "Convert the file, or set `modality` in the extractor's entry." in text
    assert not (root / "results").exists()


@pytest.fixture
def eeg_images(tmp_path):
    from dataset_shapes import make_eeg_only, show_images

    facts = make_eeg_only(tmp_path / "bids", seed=2, n_events=20)
    show_images(facts, n_test=3, n_train=8)
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
    }  # fmt: skip
    return tmp_path, config


def test_identification_top_k_above_every_test_count_fails_the_dry_run(eeg_images):
    root, config = eeg_images
    write_config(
        root / "config.yaml", {**config, "decoding": {"identification": {"top_k": [3, 5]}}}
    )
    proc = snakemake(root, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        "`decoding.identification.top_k` must hold at least one value smaller than the number "
        "of test stimuli, got [3, 5] but sub-01 has 3 EEG test stimuli (condition 'test') "
        "instead."
    ) in text, text[-2000:]
    assert not (root / "results").exists()


def test_identification_top_k_partly_too_large_only_warns(eeg_images):
    root, config = eeg_images
    write_config(root / "config.yaml", config)  # top_k [1, 5], 3 test images
    proc = snakemake(root, "-n", check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (
        "neuroflow: decoding: top-k accuracy for `decoding.identification.top_k` value(s) [5] "
        "left undefined (NaN) for sub-01 and sub-02, which have 3 EEG test stimuli each "
        "(condition 'test')"
    ) in proc.stderr, proc.stderr[-3000:]
    assert "decode_eeg" in proc.stdout

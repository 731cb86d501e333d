"""Inputs that a run would once have taken without a word, fed to ``snakemake -n``.

Each is refused before any job runs, with the file, the key and what was expected, or
(where the run can go on meaningfully) noted before the run: a parcel time-series run
missing from its container, or stored with another shape; integer betas without a
declared scale; a transformer window longer
than every run and validation runs that leave nothing to validate on; a
``results_dir`` that is a file; a per-subject ROI atlas one subject lacks.
"""

from __future__ import annotations

import copy
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np
import pytest
from dataset_shapes import make_algonauts_like, make_fmri_movie, make_nsd_like
from workflow_helpers import TINY_CONFIG, snakemake, write_config

from neuroflow.cli import main

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SMALL = {
    "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
    "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
    "rsa": {"enabled": False},
    "decoding": {"enabled": False},
    "predict": {"stimulus_sets": {}},
}


def _dry_run(root: Path, config: dict) -> tuple[int, str]:
    write_config(root / "config.yaml", config)
    proc = snakemake(root, "-n", check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def parcels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("parcels")
    facts = make_algonauts_like(root / "bids", seed=2, n_volumes=30, image_size=16)
    return root, facts


def test_container_run_missing_or_not_2d_fails_the_plan(parcels):
    root, facts = parcels
    container = facts["timeseries"]["01"]
    config = {"dataset": {"source": "timeseries", "bids_root": str(facts["root"])}, **SMALL}
    with h5py.File(container, "a") as f:
        data = f["task-movie_run-4"][()]
        del f["task-movie_run-4"]  # the second repeat of the test movie is gone
    code, text = _dry_run(root, config)
    assert code != 0
    events = facts["events"]["01", "4"]
    assert f"Events file {events} belongs to no time-series run" in text, text[-3000:]
    assert f"the time-series file {container} must hold its run" in text
    assert "('task-movie_run-4')" in text and "`dataset.runs`" in text
    # the same run stored as (time, target, 1): named like a run, so refused as one
    with h5py.File(container, "a") as f:
        f.create_dataset("task-movie_run-4", data=data[:, :, np.newaxis])
    code, text = _dry_run(root, config)
    assert code != 0
    assert (
        f"Dataset 'task-movie_run-4' of time-series file {container} must be a 2-D "
        f"(time, target) array, got shape {(*data.shape, 1)} instead" in text
    ), text[-3000:]
    # leaving the run out is the way to go on without it
    code, text = _dry_run(
        root, {**config, "dataset": {**config["dataset"], "runs": ["1", "2", "3"]}}
    )
    assert code == 0, text[-3000:]
    assert not (root / "results").exists()


def _transformer(**options) -> dict:
    config = copy.deepcopy(TINY_CONFIG)
    config["encoding"]["models"]["tribe"] = {
        "feature_spaces": ["image_statistics"],
        "model": "transformer",
        "transformer": {"device": "cpu", **options},
    }
    return config


def test_transformer_window_and_validation_runs_are_checked_by_the_plan(tmp_path):
    code, text = _dry_run(tmp_path, _transformer(window_trs=1000))
    assert code != 0
    assert (
        "`encoding.models.tribe.transformer.window_trs` must be at most the length of the "
        "longest run, 60 volumes (sub-01_task-movie_run-" in text
    ), text[-3000:]
    assert "got 1000 instead" in text
    # two training runs per subject and validation_runs 2: nothing is validated, said
    # before the run (not only in the job's log)
    code, text = _dry_run(tmp_path, _transformer(window_trs=12, validation_runs=2))
    assert code == 0, text[-3000:]
    assert (
        "neuroflow: encoding/tribe: no validation run: `encoding.models.tribe.transformer."
        "validation_runs` is 2 but every subject has at most 2 training run(s)" in text
    ), text[-3000:]
    code, text = _dry_run(tmp_path, _transformer(window_trs=12, validation_runs=1))
    assert code == 0 and "encoding/tribe: no validation run" not in text


def test_results_dir_that_is_a_file_fails_the_plan_and_check_config(tmp_path, capsys, monkeypatch):
    taken = tmp_path / "results"
    taken.write_text("not a folder\n")
    code, text = _dry_run(tmp_path, {**copy.deepcopy(TINY_CONFIG), "results_dir": str(taken)})
    assert code != 0
    message = f"`results_dir` must be a folder (or a path where one can be made), got '{taken}'"
    assert f"{message} instead, an existing file." in text, text[-3000:]
    assert taken.read_text() == "not a folder\n"
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    assert main(["check-config", "--config", f"results_dir={taken}/v1"]) == 2
    err = capsys.readouterr().err
    assert f"got '{taken}/v1' instead, below the file {taken}." in err


def test_per_subject_atlas_missing_for_one_subject_fails_the_plan(tmp_path):
    facts = make_fmri_movie(tmp_path / "bids", seed=5, n_runs=2, n_volumes=30, image_size=16)
    bold = facts["bold"][("01", "1")]
    img = nib.load(bold)
    atlas = tmp_path / "bids" / "derivatives" / "atlas" / "sub-01_dseg.nii.gz"
    atlas.parent.mkdir(parents=True)
    nib.save(nib.Nifti1Image(np.ones(img.shape[:3], np.int16), img.affine), atlas)
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "preprocess_fmri": {"rois": {"atlas": "derivatives/atlas/sub-{subject}_dseg.nii.gz"}},
        **SMALL,
    }
    code, text = _dry_run(tmp_path, config)
    assert code != 0
    assert (
        "`preprocess_fmri.rois.atlas` must name an existing file for every subject, got "
        "'derivatives/atlas/sub-{subject}_dseg.nii.gz', which for sub-02 is "
        "'derivatives/atlas/sub-02_dseg.nii.gz': it is neither in the working folder "
        f"({tmp_path}) nor in the dataset ({tmp_path / 'bids'})" in text
    ), text[-3000:]
    assert "MissingInputException" not in text
    # with the subject left out, the plan goes on
    code, text = _dry_run(
        tmp_path, {**config, "dataset": {**config["dataset"], "subjects": ["01"]}}
    )
    assert code == 0, text[-3000:]


def test_integer_betas_without_a_scale_fail_the_plan(tmp_path):
    facts = make_nsd_like(tmp_path / "bids", seed=1, n_trials=40, n_test=5, image_size=16)
    bare = facts["betas"]["02", "02"]
    with h5py.File(bare, "a") as f:
        del f["betas"].attrs["scale"]  # the other session keeps its scale = 300
    config = {
        "dataset": {"source": "betas", "bids_root": str(tmp_path / "bids")},
        "single_trial": {"zscore": False},
        **SMALL,
    }
    code, text = _dry_run(tmp_path, config)
    assert code != 0
    assert f"Dataset 'betas' of {bare} stores int16 values without a declared scale" in text, text[
        -3000:
    ]
    assert "Declare it with the HDF5 attribute 'scale' on dataset 'betas' or " in text
    assert "`dataset.betas_scale` (e.g. `dataset.betas_scale: 300`)" in text
    assert not (tmp_path / "results").exists()
    declared = {**config, "dataset": {**config["dataset"], "betas_scale": 300}}
    code, text = _dry_run(tmp_path, declared)
    assert code == 0, text[-3000:]
    assert "import_betas" in text

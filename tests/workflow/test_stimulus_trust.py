"""Stimuli the plan refuses before any job: ``stim_file`` values that leave the dataset's
``stimuli/`` folder, and files of another modality among an extractor's stimuli.

The plan-level checks run on :class:`neuroflow.workflow.WorkflowPlan`; the last tests
show the same refusals (and the note that ``features.unavailable: skip`` gives instead)
through ``snakemake -n``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from dataset_shapes import make_fmri_movie
from workflow_helpers import snakemake, write_config

from neuroflow.config import load_schema, validate_config
from neuroflow.workflow import WorkflowPlan
from neuroflow.workflow.stimulus_checks import stimulus_modality

REPO = Path(__file__).resolve().parents[2]
IMAGE_STATS = {"name": "image_statistics", "extractor": "image_statistics"}
EVENTS = {"name": "events", "extractor": "events", "events": {"categorical": ["trial_type"]}}
RUN1 = Path("sub-01") / "func" / "sub-01_task-movie_run-1_events.tsv"
RUN2 = Path("sub-01") / "func" / "sub-01_task-movie_run-2_events.tsv"


def _given(root: Path, *extractors: dict, **features) -> dict:
    """The configuration a user writes: image statistics (or ``extractors``) on ``root``."""
    extractors = extractors or (IMAGE_STATS,)
    return {
        "dataset": {"source": "bids", "bids_root": str(root)},
        "features": {"extractors": list(extractors), **features},
        "encoding": {"models": {"visual": {"feature_spaces": [extractors[0]["name"]]}}},
        "rsa": {"enabled": False},
    }


def _plan(root: Path, *extractors: dict, **features) -> WorkflowPlan:
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    return WorkflowPlan(validate_config(_given(root, *extractors, **features), schema))


def _set_stim_files(events: Path, values: dict[int, str]) -> None:
    """Write ``stim_file`` values into data rows (1-based) of an events table."""
    table = pd.read_csv(events, sep="\t", dtype=str, keep_default_na=False)
    for row, value in values.items():
        table.loc[row - 1, "stim_file"] = value
    table.to_csv(events, sep="\t", index=False)


@pytest.fixture(scope="module")
def movie(tmp_path_factory) -> Path:
    """A one-subject fMRI movie (three runs of PNG shots), never modified."""
    root = tmp_path_factory.mktemp("movie") / "bids"
    make_fmri_movie(root, seed=5, n_subjects=1, n_volumes=40)
    return root


@pytest.fixture
def dataset(movie, tmp_path) -> Path:
    """A copy of the movie that a test may change, and a file just outside it."""
    root = tmp_path / "bids"
    shutil.copytree(movie, root)
    shutil.copy(next((root / "stimuli" / "shots").glob("*.png")), tmp_path / "outside.png")
    return root


# --------------------------------------------------------------------------- containment
def test_stim_files_leaving_the_stimuli_folder_fail_the_plan(dataset, tmp_path):
    outside = tmp_path / "outside.png"
    _set_stim_files(dataset / RUN1, {3: str(outside)})
    _set_stim_files(dataset / RUN2, {2: "../../../outside.png", 5: "shots/../../outside.png"})
    with pytest.raises(
        ValueError,
        match=rf"`stim_file` must name a file inside the dataset's stimuli folder "
        rf"{re.escape(str(dataset / 'stimuli'))}, got {re.escape(repr(str(outside)))} \(an "
        rf"absolute path; stim_file in {re.escape(str(dataset / RUN1))}, row 3\) instead. "
        r"Other such stim_files: '\.\./\.\./\.\./outside\.png' \(stim_file in "
        rf"{re.escape(str(dataset / RUN2))}, row 2\), 'shots/\.\./\.\./outside\.png' "
        rf"\(stim_file in {re.escape(str(dataset / RUN2))}, row 5\)\. Write each stim_file "
        r"relative to the stimuli folder",
    ):
        _plan(dataset)


def test_stim_file_linked_outside_the_dataset_fails_the_plan(dataset, tmp_path):
    (dataset / "stimuli" / "linked.png").symlink_to(tmp_path / "outside.png")
    _set_stim_files(dataset / RUN1, {4: "linked.png"})
    with pytest.raises(
        ValueError,
        match=rf"got 'linked.png' \(a link to {re.escape(str(tmp_path / 'outside.png'))}, "
        rf"outside the dataset; stim_file in {re.escape(str(dataset / RUN1))}, row 4\) instead",
    ):
        _plan(dataset)
    # a link that stays in the dataset (git-annex keeps contents under .git) is read
    store = dataset / ".git" / "annex" / "objects" / "linked.png"
    store.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "outside.png", store)
    (dataset / "stimuli" / "linked.png").unlink()
    (dataset / "stimuli" / "linked.png").symlink_to(store)
    assert _plan(dataset).scope.extractors == ("image_statistics",)


def test_stim_files_as_labels_only_are_not_refused(dataset):
    """Without an extractor that reads stimulus files, a stim_file is only a label."""
    _set_stim_files(dataset / RUN1, {3: "/elsewhere/outside.png"})
    assert _plan(dataset, EVENTS).scope.extractors == ("events",)


# --------------------------------------------------------------------------- modality
def test_stimulus_modality_prefers_what_the_extractor_reads():
    stims = ["a.png", "b.png", "notes.txt", "c.mp4", "d.mp4", "e.mp4", "x.docx"]
    assert stimulus_modality(stims, ("image",)) == "image"  # fewer, but the one it reads
    assert stimulus_modality(stims, ("image", "video")) == "video"
    assert stimulus_modality(stims, ("audio",)) == "video"  # none read: the most files
    assert stimulus_modality(["a.png", "b.mp4"], ("image", "video")) == "image"  # tie
    assert stimulus_modality(["x.docx"], ("image",)) is None


def _with_text_row(dataset: Path) -> Path:
    """A ``.txt`` stim_file in row 3 of run 2 (the file exists)."""
    (dataset / "stimuli" / "notes.txt").write_text("a note, not a picture\n")
    _set_stim_files(dataset / RUN2, {3: "notes.txt"})
    return dataset / RUN2


def test_text_file_among_images_fails_the_plan_unless_skipped(dataset):
    events = _with_text_row(dataset)
    message = (
        rf"The stimuli of `features.extractors\[0\]` \('image_statistics'\) must all be "
        rf"image files, got stim_file 'notes.txt' \(a text file; stim_file in "
        rf"{re.escape(str(events))}, row 3\) instead. Remove or correct the row, extract the "
        r"text stimuli with an entry of their own \(`modality: text`\), or set "
        r"`features.unavailable: skip`"
    )
    with pytest.raises(ValueError, match=message):
        _plan(dataset)  # not set
    with pytest.raises(ValueError, match=message):
        _plan(dataset, unavailable="error")
    forced = {**IMAGE_STATS, "modality": "image"}  # set: the file would not be read either
    with pytest.raises(ValueError, match=r"must all be image files, got stim_file 'notes.txt'"):
        _plan(dataset, forced)
    plan = _plan(dataset, unavailable="skip")
    assert plan.scope.extractors == ()
    assert (
        f"features/image_statistics: skipped, its stimuli must all be image files, got "
        f"stim_file 'notes.txt' (a text file; stim_file in {events}, row 3) "
        "(`features.unavailable: skip`)"
    ) in plan.notes
    assert any(n.startswith("encoding/visual: skipped") for n in plan.notes)


def test_text_extractors_and_events_take_any_stim_file(dataset):
    _with_text_row(dataset)
    minilm = {"name": "minilm", "extractor": "sentence_transformer"}
    assert _plan(dataset, minilm).scope.extractors == ("minilm",)  # reads the captions
    assert _plan(dataset, EVENTS).scope.extractors == ("events",)


# --------------------------------------------------------------------------- snakemake
@pytest.mark.workflow
@pytest.mark.slow
def test_snakemake_refuses_untrusted_stim_files_before_any_job(dataset, tmp_path):
    config = tmp_path / "config.yaml"
    outside = tmp_path / "outside.png"
    run1, run2 = dataset / RUN1, dataset / RUN2
    original = {p: p.read_bytes() for p in (run1, run2)}

    # an absolute stim_file and one that climbs out with '..': refused, named with rows
    _set_stim_files(run1, {3: str(outside)})
    _set_stim_files(run2, {2: "../../../outside.png"})
    write_config(config, _given(dataset))
    proc = snakemake(tmp_path, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        f"got {str(outside)!r} (an absolute path; stim_file in {run1}, row 3) instead. Other "
        f"such stim_files: '../../../outside.png' (stim_file in {run2}, row 2)."
    ) in text, text[-3000:]
    assert not (tmp_path / "results").exists()

    # a .txt among the images: refused by default, left out with a note under `skip`
    for path, data in original.items():
        path.write_bytes(data)
    events = _with_text_row(dataset)
    proc = snakemake(tmp_path, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        "The stimuli of `features.extractors[0]` ('image_statistics') must all be image "
        f"files, got stim_file 'notes.txt' (a text file; stim_file in {events}, row 3) instead."
    ) in text, text[-3000:]
    assert not (tmp_path / "results").exists()
    write_config(config, _given(dataset, unavailable="skip"))
    proc = snakemake(tmp_path, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert (
        "neuroflow: features/image_statistics: skipped, its stimuli must all be image files, "
        f"got stim_file 'notes.txt' (a text file; stim_file in {events}, row 3)"
    ) in text, text[-3000:]
    assert not (tmp_path / "results").exists()

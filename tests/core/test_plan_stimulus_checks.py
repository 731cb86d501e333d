"""Stimuli a job would refuse, refused by the plan: unsupported stim_file extensions and
identification top-k values at or above the number of test stimuli."""

from __future__ import annotations

import copy
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from dataset_shapes import make_eeg_only, make_fmri_movie, make_nsd_like, show_images

from neuroflow.config import load_schema, validate_config
from neuroflow.trial_split import select_test_stimuli
from neuroflow.workflow import WorkflowPlan
from neuroflow.workflow.stimulus_checks import eeg_epoch_labels, eeg_test_stimuli

REPO = Path(__file__).resolve().parents[2]
IMAGE_STATS = {"name": "image_statistics", "extractor": "image_statistics"}
MINILM = {"name": "minilm", "extractor": "sentence_transformer"}


def _config(root: Path, source: str = "bids", **sections) -> dict:
    given = {
        "dataset": {"source": source, "bids_root": str(root)},
        "features": {"extractors": [IMAGE_STATS]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
    }
    for section, values in sections.items():
        given[section] = {**given.get(section, {}), **values}
    return validate_config(given, load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml"))


def _top_k(config: dict, top_k: list[int], **identification) -> dict:
    out = copy.deepcopy(config)
    out["decoding"]["identification"].update(top_k=top_k, **identification)
    return out


# --------------------------------------------------------------------------- extensions
@pytest.fixture(scope="module")
def docx_movie(tmp_path_factory) -> tuple[Path, Path]:
    """An fMRI movie whose run-1 events name ``notes.docx`` in their third row."""
    root = tmp_path_factory.mktemp("docx") / "bids"
    make_fmri_movie(root, seed=0, n_subjects=1, n_volumes=40)
    events = root / "sub-01" / "func" / "sub-01_task-movie_run-1_events.tsv"
    table = pd.read_csv(events, sep="\t", dtype=str, keep_default_na=False)
    table.loc[2, "stim_file"] = "notes.docx"
    table.to_csv(events, sep="\t", index=False)
    (root / "stimuli" / "notes.docx").write_bytes(b"PK\x03\x04 not an image")
    return root, events


def test_unsupported_stim_file_fails_the_plan(docx_movie):
    root, events = docx_movie
    with pytest.raises(
        ValueError,
        match=rf"Stimulus file 'notes.docx' \(stim_file in {re.escape(str(events))}, row 3\) "
        r"must have an extension neuroflow reads, got '.docx' instead: "
        r"`features.extractors\[1\]` \('image_statistics'\) infers the modality of its "
        r"stimuli from their extensions \(`modality: auto`\). Supported: image .png .*; "
        r"audio .wav; text .txt. Convert the file, or set `modality` in the extractor's entry.",
    ):
        # the text extractor (index 0) reads captions: only the image one is named
        WorkflowPlan(_config(root, features={"extractors": [MINILM, IMAGE_STATS]}))
    blur = {**IMAGE_STATS, "name": "blur", "transforms": {"blur_sigma": 2.0}}
    with pytest.raises(
        ValueError,
        match=r"`features.extractors\[0\]` \('image_statistics'\) and `features.extractors"
        r"\[1\]` \('blur'\) infer the modality of their stimuli from their extensions",
    ):
        WorkflowPlan(_config(root, features={"extractors": [IMAGE_STATS, blur]}))


def test_unsupported_stim_file_spares_set_modalities_text_and_skipped_extractors(
    docx_movie, tmp_path
):
    root, _ = docx_movie
    # `modality` set: the job reads the file by its contents (and names it if it fails)
    forced = {**IMAGE_STATS, "modality": "image"}
    assert WorkflowPlan(_config(root, features={"extractors": [forced]})).scope.extractors == (
        "image_statistics",
    )
    # a text extractor reads the captions, whatever the stim_file extensions
    text = WorkflowPlan(
        _config(
            root,
            features={"extractors": [MINILM]},
            encoding={"models": {"semantic": {"feature_spaces": ["minilm"]}}},
        )
    )
    assert text.scope.extractors == ("minilm",)
    # an extractor the plan leaves out (no stimuli/ folder) is given nothing
    bare = tmp_path / "bids"
    shutil.copytree(root, bare, ignore=shutil.ignore_patterns("stimuli"))
    plan = WorkflowPlan(_config(bare))
    assert plan.scope.extractors == ()
    assert any(n.startswith("features/image_statistics: skipped") for n in plan.notes)


def test_design_records_where_each_stim_file_is_named(docx_movie):
    root, events = docx_movie
    plan = WorkflowPlan(
        _config(root, features={"extractors": [{**IMAGE_STATS, "modality": "image"}]})
    )
    rows = plan.design.stim_file_rows
    assert rows["notes.docx"] == (events, 3)
    assert set(rows) == set(plan.design.stimulus_ids)


# --------------------------------------------------------------------------- EEG top-k
@pytest.fixture(scope="module")
def eeg_images(tmp_path_factory) -> dict:
    """Two EEG subjects who saw 3 test images (twice per run) and 8 training images."""
    root = tmp_path_factory.mktemp("eeg_images") / "bids"
    return show_images(make_eeg_only(root, seed=0, n_events=20), n_test=3, n_train=8)


def test_eeg_top_k_all_at_or_above_the_test_stimuli_fails_the_plan(eeg_images):
    config = _config(eeg_images["root"])
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`decoding.identification.top_k` must hold at least one value smaller than the "
            "number of test stimuli, got [3, 5] but sub-01 has 3 EEG test stimuli (condition "
            "'test') instead. Add a value below 3"
        ),
    ):
        WorkflowPlan(_top_k(config, [3, 5]))


def test_eeg_top_k_partly_too_large_is_a_note(eeg_images):
    plan = WorkflowPlan(_config(eeg_images["root"]))  # the defaults [1, 5]
    assert plan.decoding_enabled
    assert (
        "decoding: top-k accuracy for `decoding.identification.top_k` value(s) [5] left "
        "undefined (NaN) for sub-01 and sub-02, which have 3 EEG test stimuli each "
        "(condition 'test'); k must be smaller than the number of test stimuli"
    ) in plan.notes
    assert not any("top_k" in n for n in WorkflowPlan(_top_k(plan.config, [1, 2])).notes)


def test_eeg_test_stimuli_follow_conditions_and_test_condition(eeg_images):
    root = eeg_images["root"]
    renamed = _config(root, preprocess_eeg={"conditions": {"test": "held", "train": "train"}})
    counts = eeg_test_stimuli(WorkflowPlan(_top_k(renamed, [1], test_condition="held")))
    assert {s: (c.n_test, c.n_train) for s, c in counts.items()} == {"01": (3, 8), "02": (3, 8)}
    # no epoch of that condition: chosen as `test: auto` chooses them, as the job does
    plan = WorkflowPlan(_top_k(_config(root), [1], test_condition="held"))
    shown = [
        stim
        for rec in plan.recordings_of("01")
        for stim in pd.read_csv(rec.events, sep="\t")["stim_file"]
    ]
    found = eeg_test_stimuli(plan)["01"]
    assert found.n_test == len(select_test_stimuli(shown, "auto"))
    assert "no epoch has condition 'held'" in found.how


def test_eeg_top_k_is_left_to_the_job_where_the_plan_cannot_count(eeg_images, tmp_path):
    root = eeg_images["root"]
    # events from annotations: the events tables do not tell the epochs
    annotations = _config(root, preprocess_eeg={"event_source": "annotations"})
    WorkflowPlan(_top_k(annotations, [50]))
    # identification off, or nothing to identify with (no feature space)
    WorkflowPlan(_top_k(_config(root), [50], enabled=False))
    oddball = tmp_path / "bids"
    make_eeg_only(oddball, seed=1, n_events=20)
    WorkflowPlan(_top_k(_config(oddball), [50]))


def test_eeg_epoch_labels_read_events_as_preprocessing_does():
    table = pd.DataFrame(
        {
            "onset": ["1.0", "2.0", "n/a", "4.0", "5.0"],
            "value": ["a", "b", "a", "c", "n/a"],
            "stim_file": ["x.png", "n/a", "y.png", "z.png", "w.png"],
            "kind": ["stim", "stim", "stim", "resp", "stim"],
        }
    )
    prep = {"event_column": "trial_type", "stim_column": "stim_file", "conditions": None}
    # no trial_type column: named by `value`; a missing onset or name drops the row; a
    # missing stimulus id takes the event's name
    assert eeg_epoch_labels(table, prep, None) == (["a", "b", "c"], ["x.png", "b", "z.png"])
    select = {"select": {"kind": ["stim"]}}
    assert eeg_epoch_labels(table, prep, select) == (["a", "b"], ["x.png", "b"])
    renamed = {**prep, "conditions": {"a": "test"}}
    assert eeg_epoch_labels(table, renamed, None) == (["test"], ["x.png"])
    assert eeg_epoch_labels(table.drop(columns="onset"), prep, None) is None


def test_demo_top_k_checked_against_its_test_images():
    defaults = validate_config(
        {}, load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    )
    with pytest.raises(ValueError, match=r"got \[40, 50\] but sub-01 has 40 EEG test stimuli"):
        WorkflowPlan(_top_k(defaults, [40, 50]))


# --------------------------------------------------------------------------- fMRI top-k
def test_fmri_identification_top_k_checked_against_the_betas(tmp_path):
    facts = make_nsd_like(tmp_path / "bids", seed=0)
    n_test = len(facts["test_images"])
    config = _config(tmp_path / "bids", source="betas")
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"got [{n_test}] but sub-01 has {n_test} single-trial test stimuli (chosen as "
            "`eeg_encoding.test: auto` chooses them) instead."
        ),
    ):
        WorkflowPlan(_top_k(config, [n_test]))
    plan = WorkflowPlan(_top_k(config, [1, n_test + 5]))
    assert any(
        n.startswith(f"decoding_fmri: top-k accuracy for `decoding.identification.top_k` "
                     f"value(s) [{n_test + 5}] left undefined (NaN) for sub-01 and sub-02")
        for n in plan.notes
    )  # fmt: skip
    # fMRI decoding off: nothing to check
    off = copy.deepcopy(config)
    off["decoding"]["identification"]["enabled"] = False
    WorkflowPlan(_top_k(off, [n_test]))

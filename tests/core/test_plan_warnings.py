"""Dataset problems found when the workflow is planned: warnings, or errors naming the file."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from dataset_shapes import make_fmri_movie

from neuroflow.config import load_schema, validate_config
from neuroflow.io.bids import dataset_description_warnings
from neuroflow.workflow import WorkflowPlan

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def movie(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("movie") / "bids"
    make_fmri_movie(root, seed=2, n_subjects=1, n_runs=3, n_volumes=30)
    return root


@pytest.fixture(scope="module")
def defaults() -> dict:
    return validate_config({}, load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml"))


def _bids(defaults: dict, root: Path, **dataset) -> dict:
    config = copy.deepcopy(defaults)
    config["dataset"] = {**config["dataset"], "source": "bids", "bids_root": str(root), **dataset}
    return config


def test_missing_dataset_description_is_a_plan_warning(defaults, movie, tmp_path):
    assert WorkflowPlan(_bids(defaults, movie)).warnings == ()
    root = tmp_path / "bids"
    shutil.copytree(movie, root)
    (root / "dataset_description.json").unlink()
    plan = WorkflowPlan(_bids(defaults, root))
    (warning,) = plan.warnings
    assert warning.startswith(f"The BIDS dataset {root} has no dataset_description.json; BIDS")
    assert plan.notes[0] == f"warning: {warning}"
    assert plan.encoding_models()  # the data is still read and modelled


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{not json", r"must be a JSON object, got a file that is not JSON"),
        ("[1, 2]", r"must be a JSON object, got a list instead"),
        (json.dumps({"Name": "x"}), r"must have the fields \['Name', 'BIDSVersion'\].*missing"),
    ],
)
def test_incomplete_dataset_description(tmp_path, content, match):
    (tmp_path / "dataset_description.json").write_text(content)
    (warning,) = dataset_description_warnings(tmp_path)
    assert str(tmp_path / "dataset_description.json") in warning
    assert re.search(match, warning)


def test_missing_captions_named_in_the_config_fail_the_plan(defaults, movie):
    with pytest.raises(
        FileNotFoundError,
        match=r"`dataset.captions` must name an existing captions table .*got 'stimuli/capz.tsv' "
        r"instead: .*capz.tsv does not exist",
    ):
        WorkflowPlan(_bids(defaults, movie, captions="stimuli/capz.tsv"))

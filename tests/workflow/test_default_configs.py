"""The default configuration runs to its summary and report on every dataset shape.

A config with only a ``dataset`` block asks for every analysis neuroflow has; each shape
of ``dataset_shapes`` supplies only some of their inputs. The plan must leave out what
does not apply, with a note, so that no job refuses its inputs: every run ends with
``results/summary/<v>/scores.tsv`` and a report, and no job log says that an analysis
does not apply.

Shapes that other workflow tests already run with a dataset-only config (fewer
permutations at most) are checked on those runs (:data:`REUSED`); the others are run
here once each, at the smallest size their generator allows, on 2 cores, except those
of :data:`NOT_RUN`, with fewer permutations where :data:`FEWER_PERMUTATIONS` says (which
analyses apply does not depend on them).
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dataset_shapes
import pandas as pd
import pytest
from dataset_shapes import (
    make_algonauts_like,
    make_ds000117_like,
    make_event_related,
    make_interaction_movie,
    make_nsd_like,
    make_resting_eeg,
    make_roi_geometry,
    make_single_condition_eeg,
)
from dataset_shapes.eeg_inputs import make_eeg_inputs, make_faces_eeg
from name_helpers import artifact_strings, misspellings, run_layers, run_sweeps
from shape_helpers import run_shape, summary_dir, summary_notes

# session fixtures: runs of a dataset-only config that those modules' tests read too
from test_shape_eeg_only import eeg_only  # noqa: F401
from test_shape_fmri import movie  # noqa: F401
from workflow_helpers import config_leaves, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

#: Shape -> the session fixture of another test module that runs it with a dataset-only
#: config (fewer permutations at most), and the generator it runs.
REUSED: dict[str, tuple[str, str]] = {
    "eeg_only": ("eeg_only", "make_eeg_only"),
    "fmri_movie": ("movie", "make_fmri_movie"),
}


def _source(kind: str) -> Callable[[dict], dict]:
    return lambda facts: {"source": kind, "bids_root": str(facts["root"])}


def _fmriprep(facts: dict) -> dict:
    return {
        "source": "fmriprep",
        "bids_root": str(facts["root"]),
        "fmriprep_dir": str(facts["fmriprep_dir"]),
    }


def _fmriprep_derivatives(facts: dict) -> dict:
    """fMRIPrep source with the derivatives in the dataset's ``derivatives/fmriprep``."""
    root = Path(facts["root"])
    return {
        "source": "fmriprep",
        "bids_root": str(root),
        "fmriprep_dir": str(root / "derivatives" / "fmriprep"),
    }


#: Shape -> (generator, its smallest sizes, the ``dataset`` block from its facts).
SHAPES: dict[str, tuple[Callable[..., dict], dict[str, Any], Callable[[dict], dict]]] = {
    # two subjects: one in NIfTI, one in scaled int16 HDF5
    "nsd_like": (
        make_nsd_like,
        {"n_trials": 30, "n_test": 4, "n_repeats": 2, "image_size": 16},
        _source("betas"),
    ),
    "algonauts_like": (
        make_algonauts_like,
        {"n_subjects": 1, "n_volumes": 40, "image_size": 16},
        _source("timeseries"),
    ),
    "event_related": (
        make_event_related,
        {"n_sessions": 1, "n_runs": 2, "n_volumes": 40, "image_size": 16},
        _fmriprep,
    ),
    # a movie whose shots carry numeric feature columns in the events tables, TR 1.5 s
    "interaction_movie": (
        make_interaction_movie,
        {"n_subjects": 1, "n_runs": 3, "n_volumes": 60},
        _source("bids"),
    ),
    "roi_geometry": (make_roi_geometry, {"n_stimuli": 12, "image_size": 16}, _source("betas")),
    "single_condition_eeg": (
        make_single_condition_eeg,
        {"n_subjects": 1, "n_events": 12},
        _source("bids"),
    ),
    "resting_eeg": (make_resting_eeg, {"n_subjects": 1, "duration": 10.0}, _source("bids")),
    "eeg_inputs": (make_eeg_inputs, {"n_epochs": 12, "duration": 10.0}, _source("bids")),
    "faces_eeg": (make_faces_eeg, {"n_trials": 12}, _source("bids")),
    # fMRI (fMRIPrep derivatives) and EEG sessions of one subject: a face task whose
    # events are short images between rest rows
    "ds000117_like": (
        make_ds000117_like,
        {
            "fmriprep": True,
            "n_subjects": 1,
            "n_fmri_runs": 2,
            "n_volumes": 80,
            "fmri_per_run": 6,
            "eeg_per_run": 6,
            "eeg_sfreq": 125.0,
            "image_size": 16,
        },
        _fmriprep_derivatives,
    ),
}

#: Shape -> the permutation counts its run sets besides the ``dataset`` block: the
#: ds000117-like run fits seven EEG encoding models (the EfficientNet layer sweep and
#: image statistics), each with an exact refitting null (200 permutations by default,
#: ~12 s per model here; the default count runs in ``test_eeg_encoding_workflow.py``).
FEWER_PERMUTATIONS: dict[str, dict] = {
    "ds000117_like": {"eeg_encoding": {"inference": {"n_permutations": 20}}},
}

#: Generators whose default-config run is not part of the suite, and why.
NOT_RUN: dict[str, str] = {}

#: What a job that refuses an analysis the plan kept logs.
REFUSAL = re.compile(r"does not apply|\bno [\w -]+ applies", re.IGNORECASE)
#: The summary's log repeats the plan's notes on what it left out.
PLAN_NOTE = "Left out:"


def _generators() -> set[str]:
    """Names of every ``make_*`` function of the ``dataset_shapes`` modules."""
    names = set()
    for info in pkgutil.iter_modules(dataset_shapes.__path__):
        if info.name.startswith(("_", "test_")):
            continue
        module = importlib.import_module(f"dataset_shapes.{info.name}")
        names |= {
            name
            for name, func in inspect.getmembers(module, inspect.isfunction)
            if name.startswith("make_") and func.__module__ == module.__name__
        }
    return names


def refusals(run: Path) -> list[str]:
    """Job log lines and summary warnings of a run that say an analysis does not apply.

    Parameters
    ----------
    run : Path
        A finished run's working folder.

    Returns
    -------
    lines : list of str
        ``<log file>: <line>`` (or ``warnings.tsv: <row>``) for each refusal.
    """
    out = [
        f"{path.relative_to(run)}: {line}"
        for path in sorted((run / "logs").rglob("*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if REFUSAL.search(line) and PLAN_NOTE not in line
    ]
    warnings = pd.read_csv(summary_dir(run) / "warnings.tsv", sep="\t", dtype=str)
    out += [
        f"warnings.tsv: {row}"
        for row in warnings.fillna("").agg(" ".join, axis=1)
        if REFUSAL.search(row)
    ]
    return out


def check_default_run(run: Path, report: Path) -> None:
    """Assert that a finished run of a default config reached its summary and report."""
    assert not refusals(run)
    summary = summary_dir(run)
    table = pd.read_csv(summary / "scores.tsv", sep="\t")
    assert {"analysis", "subject", "value"} <= set(table.columns)
    snakemake(run, "--report", str(report))
    assert report.stat().st_size > 0
    check_layer_names(run / "results", report)


def check_layer_names(results: Path, report: Path, *more: Path) -> None:
    """Each layer is spelled in its two forms only, in ``results``, ``more`` and the report."""
    layers = run_layers(results)
    strings = artifact_strings(results, *more, report=report)
    assert not misspellings(strings, layers, run_sweeps(results))


def test_every_generator_is_covered():
    covered = {make.__name__ for make, _, _ in SHAPES.values()}
    reused = {generator for _, generator in REUSED.values()}
    assert not covered & reused and not (covered | reused) & set(NOT_RUN)
    assert covered | reused | set(NOT_RUN) == _generators()


def test_runs_set_nothing_but_permutation_counts_besides_the_dataset():
    assert set(FEWER_PERMUTATIONS) <= set(SHAPES)
    for extra in FEWER_PERMUTATIONS.values():
        assert "dataset" not in extra
        assert all(path[-1] == "n_permutations" for path, _ in config_leaves(extra)), extra


def test_a_refusal_in_a_job_log_is_found(tmp_path: Path):
    logs = tmp_path / "logs" / "decoding" / "abc"
    logs.mkdir(parents=True)
    (logs / "sub-02.log").write_text(
        "INFO neuroflow: decoding abc: decode_eeg_subject\n"
        "ValueError: sub-02_epo.zarr: no decoding analysis applies: classification: ...\n"
    )
    summary = tmp_path / "results" / "summary" / "v1"
    summary.mkdir(parents=True)
    (summary / "warnings.tsv").write_text(
        "stage\tstore\tmessage\nrsa\tx.zarr\tEEG RSA does not apply to sub-01\n"
    )
    (tmp_path / "logs" / "summary.log").write_text(
        "INFO report: Left out: decoding: skipped, no decoding analysis applies (...)\n"
    )
    found = refusals(tmp_path)
    assert len(found) == 2
    assert found[0].startswith("logs/decoding/abc/sub-02.log: ValueError")
    assert found[1] == "warnings.tsv: rsa x.zarr EEG RSA does not apply to sub-01"


def test_a_layer_spelled_another_way_is_found(tmp_path: Path):
    """The spellings the layer check accepts, and those it finds."""
    layers = {"efficientnet": {"blocks.7", "blocks.14", "avg-pooling"}, "minilm": {"embedding"}}
    sweeps = {"deep": "efficientnet"}
    right = [
        "efficientnet:blocks.7",
        "efficientnet__blocks.7-0123456789",
        "deep__avg-pooling",
        "image_statistics:output+efficientnet:blocks.14",
        "sub-01_task-movie_run-1_blocks.7.zarr",
        "sub-01_model-deep__blocks.7_fs-efficientnet__blocks.7_layer-blocks.7_r.png",
        "eeg_encoding_efficientnet__blocks.14_r.png",
        "blocks.14",
        "output+blocks.7",
        "minilm_embedding",  # no punctuation to lose: not checked
    ]
    wrong = [
        "efficientnet__blocks_7",
        "model-efficientnetblocks7",
        "efficientnet-blocks-7",
        "_blocks.7",
        "efficientnet_blocks.7",
        "avg_pooling",
        "other:blocks.7",
    ]
    strings = [("x", text) for text in right + wrong]
    found = misspellings(strings, layers, sweeps)
    assert [f.split("'")[1] for f in found] == sorted(wrong)
    # in stores: names and JSON strings, except the PyTorch module a layer was read from
    store = tmp_path / "features" / "efficientnet-0123456789" / "blocks.7.zarr"
    store.mkdir(parents=True)
    attrs = {"layers": {"blocks.7": {"module": "_blocks.7", "spec": "_blocks.7"}}}
    (store / "zarr.json").write_text(json.dumps({"attributes": attrs}))
    assert run_layers(tmp_path) == {"efficientnet": {"blocks.7"}}
    found = misspellings(artifact_strings(tmp_path), run_layers(tmp_path), {})
    assert found == [
        "features/efficientnet-0123456789/blocks.7.zarr/zarr.json: '_blocks.7' "
        "(layer efficientnet:blocks.7)"
    ]  # the spec, not the module


@pytest.mark.parametrize("shape", list(REUSED))
def test_default_config_runs_to_the_report_reused(
    shape: str, request: pytest.FixtureRequest, tmp_path: Path
):
    run, _ = request.getfixturevalue(REUSED[shape][0])
    check_default_run(run, tmp_path / "report.html")
    if shape == "fmri_movie":
        # the exports of a run spell each layer as its stores do
        exported = tmp_path / "export"
        proc = subprocess.run(
            [sys.executable, "-m", "neuroflow.cli", "export", "results", "-o", str(exported)],
            cwd=run,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        check_layer_names(run / "results", tmp_path / "report.html", exported)
        assert any("__blocks." in p.name for p in exported.rglob("*.nii.gz"))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_default_config_runs_to_the_report(shape: str, tmp_path: Path):
    make, sizes, dataset = SHAPES[shape]
    facts = make(tmp_path / "bids", seed=0, **sizes)
    run = run_shape(
        tmp_path / "run", {"dataset": dataset(facts), **FEWER_PERMUTATIONS.get(shape, {})}
    )
    check_default_run(run, tmp_path / "report.html")
    notes = summary_notes(run)
    if shape == "single_condition_eeg":
        assert any(n.startswith("decoding: skipped, no decoding analysis applies") for n in notes)
    if shape in ("resting_eeg", "eeg_inputs"):
        assert any("no event to cut epochs around" in n for n in notes)
        assert (run / "results" / "qc_eeg").is_dir()

"""Rerun semantics of the versioned workflow, end to end on the tiny demo.

Every stage's output path carries a hash of its own config section and of its
inputs' versions, so Snakemake schedules exactly the stages a config change
reaches, and reverting a change selects the earlier outputs again.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflow_helpers import TINY_CONFIG, planned_jobs, write_config

pytestmark = [pytest.mark.slow, pytest.mark.workflow]

#: Rules upstream of the encoding stage (the demo, every preprocessing and features rule).
UPSTREAM_OF_ENCODING = {
    "generate_demo",
    "preprocess_fmri",
    "preprocess_eeg",
    "extract_features_image_statistics",
    "extract_features_minilm",
    "align_features",
}
#: Rules that read only EEG (and features), never the cleaned fMRI.
EEG_ONLY = {
    "fit_eeg_encoding",
    "evaluate_eeg_encoding",
    "decode_eeg_subject",
    "decode_eeg",
    "decode_eeg_cross_subject",
    "rsa_eeg",
    "predict_eeg",
}
#: Report thumbnails of the figures that a new encoding fit redraws.
NEW_FIGURES = {"predict_thumbnails", "summary_thumbnails", "geometry_thumbnail"}


def _changed(config: dict, dotted: str, value: Any) -> dict:
    """A deep copy of ``config`` with the key at ``dotted`` (``"a.b.c"``) set to ``value``."""
    out = copy.deepcopy(config)
    *parents, leaf = dotted.split(".")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return out


def _store_mtimes(results: Path) -> dict[str, int]:
    """Modification time (ns) of every zarr store's metadata file under ``results``."""
    return {
        str(meta.parent.relative_to(results)): meta.stat().st_mtime_ns
        for meta in results.rglob("zarr.json")
        if meta.parent.suffix == ".zarr"
    }


def _write_tiny(workdir: Path, config: dict, header: str = "# tiny demo run\n") -> None:
    write_config(workdir / "config.yaml", config, header)


def _cosmetic(config: dict, sort_keys: bool = False) -> str:
    """``config`` as YAML with other comments, indentation, spacing and blank lines."""
    text = yaml.safe_dump(config, sort_keys=sort_keys, indent=4, default_flow_style=None)
    text = text.replace(": ", ":    ").replace("\n", "   # a comment\n\n", 5)
    return "# the same run, reformatted\n\n" + text + "\n# end\n"


def test_unchanged_and_cosmetic_config_has_nothing_to_do(tiny_copy: Path) -> None:
    """An unchanged config, and one with other comments and whitespace, schedule no job."""
    assert planned_jobs(tiny_copy) == {}
    text = _cosmetic(TINY_CONFIG)
    assert text != (tiny_copy / "config.yaml").read_text()
    assert yaml.safe_load(text) == TINY_CONFIG
    (tiny_copy / "config.yaml").write_text(text)
    assert planned_jobs(tiny_copy) == {}


def test_reordered_config_keys_have_nothing_to_do(tiny_copy: Path) -> None:
    """The same settings with keys in another order schedule no job."""
    text = _cosmetic(TINY_CONFIG, sort_keys=True)
    assert yaml.safe_load(text) == TINY_CONFIG
    (tiny_copy / "config.yaml").write_text(text)
    assert planned_jobs(tiny_copy) == {}


def test_encoding_change_schedules_only_encoding_and_downstream(tiny_copy: Path) -> None:
    """A shared encoding setting refits both models; nothing upstream reruns."""
    _write_tiny(tiny_copy, _changed(TINY_CONFIG, "encoding.alphas.num", 4))
    jobs = planned_jobs(tiny_copy)
    # the in-silico predictions use the refitted models; the geometry plot the new scores;
    # the report gets thumbnails of their new figures
    downstream = {"predict", "summarize_scores", "geometry", "all", *NEW_FIGURES}
    assert set(jobs) == {"fit_encoding", "evaluate_encoding", *downstream}, jobs
    assert jobs["fit_encoding"] == jobs["evaluate_encoding"] == 2  # visual, semantic x 1 subject
    assert jobs["predict"] == 2  # the demo's one pool


def test_one_model_change_schedules_only_that_model(tiny_copy: Path) -> None:
    """Changing one model's entry leaves the other model's fit and scores in place."""
    config = _changed(TINY_CONFIG, "encoding.models.visual.model", "banded_ridge")
    _write_tiny(tiny_copy, config)
    jobs = planned_jobs(tiny_copy)
    assert jobs == {
        "fit_encoding": 1,
        "evaluate_encoding": 1,
        "predict": 1,
        "summarize_scores": 1,
        "geometry": 1,
        **dict.fromkeys(NEW_FIGURES, 1),
        "all": 1,
    }


def test_preprocess_fmri_change_schedules_fmri_and_downstream(tiny_copy: Path) -> None:
    """A cleaning setting reruns fMRI cleaning and what uses it, not the demo, EEG or features."""
    _write_tiny(tiny_copy, _changed(TINY_CONFIG, "preprocess_fmri.detrend_order", 2))
    jobs = planned_jobs(tiny_copy)
    fmri_chain = {
        "preprocess_fmri",
        "qc_fmri",
        "align_features",
        "fit_encoding",
        "evaluate_encoding",
        "rsa_fmri",
        "decode_fmri",
        "predict",
        "summarize_scores",
        "geometry",
        "qc_fmri_thumbnails",
        *NEW_FIGURES,
        "all",
    }
    assert set(jobs) == fmri_chain, jobs
    assert not set(jobs) & (UPSTREAM_OF_ENCODING - {"preprocess_fmri", "align_features"}), jobs
    assert not set(jobs) & EEG_ONLY, jobs
    fmri = TINY_CONFIG["demo"]["fmri"]
    n_runs = fmri["n_train_runs"] + fmri["n_test_repeats"]
    assert jobs["preprocess_fmri"] == jobs["qc_fmri"] == jobs["qc_fmri_thumbnails"] == n_runs
    assert jobs["align_features"] == 2 * n_runs  # two extractors with one layer each


def test_revert_selects_earlier_versions_without_recomputation(
    tiny_run: Path, tiny_changed_copy: Path
) -> None:
    """Run a changed config, then revert: the first run's outputs are selected again.

    ``tiny_changed_copy`` is a copy of ``tiny_run`` (modification times kept) run again
    with ``encoding.alphas.num`` 4.
    """
    before = _store_mtimes(tiny_run / "results")
    assert before, f"no zarr stores under {tiny_run / 'results'}"

    assert yaml.safe_load((tiny_changed_copy / "config.yaml").read_text()) == _changed(
        TINY_CONFIG, "encoding.alphas.num", 4
    )
    results = tiny_changed_copy / "results"
    after_change = _store_mtimes(results)
    new = set(after_change) - set(before)
    new_stages = {Path(p).parts[0] for p in new}
    assert new_stages == {"encoding", "evaluation", "predict", "summary", "geometry"}, new
    # The first run's stores are still there, untouched: nothing upstream was recomputed.
    assert {k: after_change[k] for k in before} == before
    assert planned_jobs(tiny_changed_copy) == {}

    _write_tiny(tiny_changed_copy, TINY_CONFIG)
    assert planned_jobs(tiny_changed_copy) == {}
    # Both versions stay on disk side by side; switching back wrote nothing.
    assert _store_mtimes(results) == after_change
    assert not any(name.startswith(".partial-") for _, dirs, _ in os.walk(results) for name in dirs)

"""Warnings recorded by a stage, kept in its store and listed by the summary."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, write_dataset
from neuroflow.evaluation.report import summarize_all
from neuroflow.stage_warnings import (
    WARNING_COLUMNS,
    record_warnings,
    store_warnings,
    upstream_warnings,
    warnings_table,
)


def test_record_warnings_keeps_showing_them():
    with pytest.warns(UserWarning, match="header TR") as caught, record_warnings() as messages:
        warnings.warn("header TR 1.5 s disagrees", UserWarning, stacklevel=1)
        logging.getLogger("neuroflow.preprocessing").warning("%d voxels constant", 3)
        logging.getLogger("neuroflow.preprocessing").info("not a warning")
        logging.getLogger("other").warning("not ours")
    assert messages == ["header TR 1.5 s disagrees", "3 voxels constant"]
    assert len(caught) == 1
    # the handler is gone and showwarning is restored afterwards
    logging.getLogger("neuroflow").warning("after")
    assert messages == ["header TR 1.5 s disagrees", "3 voxels constant"]


def _store(path: Path, rng: np.random.Generator, stage: str, inputs=(), messages=None) -> Path:
    ds = xr.Dataset({"x": (("row",), rng.normal(size=3))})
    if messages is not None:
        ds.attrs["warnings"] = list(messages)
    record = build_provenance(stage=stage, version="v1", config={}, inputs=list(inputs))
    return write_dataset(ds, path, provenance=record)


@pytest.fixture
def chain(tmp_path, rng):
    """preprocess (2 runs) -> encoding -> evaluation, with warnings on two stores."""
    run1 = _store(
        tmp_path / "run-1_bold.zarr",
        rng,
        "preprocess_fmri",
        messages=["RepetitionTime of run-1 is 2.0 s in its sidecar\tbut 1.5 s", "again"],
    )
    run2 = _store(tmp_path / "run-2_bold.zarr", rng, "preprocess_fmri", messages=[])
    events = tmp_path / "events.tsv"
    events.write_text("onset\n0\n")
    enc = _store(
        tmp_path / "enc.zarr",
        rng,
        "encoding/visual",
        [run1, run2, events],
        messages=["again", "again"],
    )
    scores = _store(tmp_path / "scores.zarr", rng, "evaluation/visual", [enc])
    return {"run1": run1, "run2": run2, "enc": enc, "scores": scores}


def test_upstream_warnings_follow_provenance(chain):
    table = upstream_warnings([chain["scores"], chain["scores"]])
    assert list(table.columns) == list(WARNING_COLUMNS)
    assert table.to_dict("list") == {
        "stage": ["encoding/visual", "preprocess_fmri", "preprocess_fmri"],
        "store": [str(chain["enc"]), str(chain["run1"]), str(chain["run1"])],
        "message": [
            "again",
            "RepetitionTime of run-1 is 2.0 s in its sidecar but 1.5 s",  # one line
            "again",
        ],
    }
    messages, record = store_warnings(chain["run2"])
    assert messages == [] and record["stage"] == "preprocess_fmri"


def test_plan_warnings_come_first(chain):
    table = warnings_table([chain["run1"]], ["no dataset_description.json", "no ..."])
    assert table["stage"].tolist() == ["plan", "plan", "preprocess_fmri", "preprocess_fmri"]
    assert table["store"].tolist()[:2] == ["n/a", "n/a"]
    assert warnings_table([], []).empty


def test_summary_writes_the_warnings_table(tmp_path, caplog):
    out = tmp_path / "summary"
    with caplog.at_level(logging.WARNING, logger="neuroflow"):
        summarize_all(
            scores=[],
            table=out / "scores.tsv",
            plots_dir=out / "plots",
            config={"plots": {"enabled": False}},
            provenance={"stage": "summary", "version": "v1"},
            warnings_tsv=out / "warnings.tsv",
            plan_warnings=["The BIDS dataset /data has no dataset_description.json"],
        )
    table = pd.read_csv(out / "warnings.tsv", sep="\t", keep_default_na=False)
    assert table.to_dict("list") == {
        "stage": ["plan"],
        "store": ["n/a"],
        "message": ["The BIDS dataset /data has no dataset_description.json"],
    }
    assert "has no dataset_description.json" in caplog.text
    assert not list(out.glob(".*partial"))

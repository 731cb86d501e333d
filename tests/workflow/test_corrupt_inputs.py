"""Damaged inputs and dataset warnings through ``snakemake``: a truncated BOLD file fails its
job with the file named, and warnings about the dataset reach the summary and the report."""

from __future__ import annotations

import nibabel as nib
import pandas as pd
import pytest
from dataset_shapes import make_fmri_movie
from workflow_helpers import snakemake, write_config

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture
def movie(tmp_path):
    facts = make_fmri_movie(tmp_path / "bids", seed=7, n_subjects=1, n_volumes=40)
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        "evaluation": {"permutation": {"n_permutations": 20}, "plots": {"enabled": False}},
        "rsa": {"enabled": False},
    }  # fmt: skip
    return tmp_path, facts, config


def test_truncated_bold_fails_its_job_with_the_file_named(movie):
    root, facts, config = movie
    bold = facts["bold"][("01", "2")]
    raw = bold.read_bytes()
    bold.write_bytes(raw[: len(raw) // 2])
    write_config(root / "config.yaml", config)
    proc = snakemake(
        root, "--cores", "2", "--keep-going", "--until", "preprocess_fmri", check=False
    )
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (root / "logs" / "preprocess_fmri").rglob("*.log"))
    assert f"BOLD image {bold} must hold" in logs
    assert "it is truncated" in logs
    assert "EOFError" not in logs.split("Job failed.")[0]  # the message, not a traceback, first
    assert not list((root / "results").rglob("*run-2_desc-clean_bold.zarr"))
    assert len(list((root / "results").rglob("*_desc-clean_bold.zarr"))) == 2  # the others


def test_dataset_warnings_reach_the_summary_and_the_report(movie):
    root, facts, config = movie
    (root / "bids" / "dataset_description.json").unlink()
    bold = facts["bold"][("01", "1")]
    img = nib.load(bold)
    img.header["pixdim"][4] = 1.5  # the sidecar says 2.0 s
    nib.save(nib.Nifti1Image(img.get_fdata(), img.affine, img.header), bold)
    write_config(root / "config.yaml", config)
    proc = snakemake(root, "--cores", "2")
    assert "neuroflow: warning: The BIDS dataset" in proc.stderr

    (summary,) = (root / "results" / "summary").glob("*/warnings.tsv")
    table = pd.read_csv(summary, sep="\t", keep_default_na=False)
    assert list(table.columns) == ["stage", "store", "message"]
    plan = table[table["stage"] == "plan"]
    assert plan["message"].str.contains("has no dataset_description.json").all()
    assert len(plan) == 1
    tr = table[table["message"].str.startswith("RepetitionTime of")]
    assert tr["stage"].tolist() == ["preprocess_fmri"]
    assert tr["store"].iloc[0].endswith("sub-01_task-movie_run-1_desc-clean_bold.zarr")
    assert (
        f"{bold.name} is 2.0 s in its sidecar but 1.5 s in its NIfTI header"
        in (tr["message"].iloc[0])
    )
    log = next((root / "logs" / "preprocess_fmri").rglob("*run-1.log")).read_text()
    assert "1.5 s in its NIfTI header" in log

    snakemake(root, "--report", "results/report.html")
    html = (root / "results" / "report.html").read_text()
    # the Warnings section's table (its caption), beside the summary's params
    assert "<td>plan</td>" in html and "<td>preprocess_fmri</td>" in html
    assert "has no dataset_description.json" in html
    assert "1.5 s in its NIfTI header" in html

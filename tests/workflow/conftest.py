"""Fixtures that run the workflow on a tiny demo in a temporary folder.

The helpers live in ``workflow_helpers`` (importable from every test module).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from workflow_helpers import TINY_CONFIG, snakemake, write_config


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workdir in which the whole workflow has run once on the tiny config."""
    workdir = tmp_path_factory.mktemp("tiny_run")
    write_config(workdir / "config.yaml", TINY_CONFIG, "# tiny demo run\n")
    snakemake(workdir, "--cores", "2")
    return workdir


@pytest.fixture
def tiny_copy(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished tiny run (results, logs and metadata)."""
    dest = tmp_path / "run"
    shutil.copytree(tiny_run, dest, symlinks=True)
    return dest

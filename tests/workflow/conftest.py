"""Fixtures that run the workflow on a tiny demo in a temporary folder.

The helpers live in ``workflow_helpers`` (importable from every test module). The runs
here are built once per pytest session and shared by every test process (see
:func:`workflow_helpers.shared_run`): tests read them only, and a test that writes into
a run asks for its ``*_copy`` fixture instead. Each process checks at its end that no
file of a shared run was written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from workflow_helpers import (
    TINY_CONFIG,
    assert_run_unchanged,
    copy_run,
    shared_folder,
    shared_run,
    snakemake,
    write_config,
)

from neuroflow.demo.cache import CACHE_ENV

#: The tiny config with one encoding setting changed (``encoding.alphas.num`` 5 -> 4).
TINY_CHANGED_CONFIG = copy.deepcopy(TINY_CONFIG)
TINY_CHANGED_CONFIG["encoding"]["alphas"]["num"] = 4


@pytest.fixture(autouse=True)
def demo_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs a workflow test makes copy each demo they generate from a folder of the
    session (:mod:`neuroflow.demo.cache`): each demo config is generated once."""
    monkeypatch.setenv(CACHE_ENV, str(shared_folder(tmp_path_factory) / "demo-cache"))


def _build_tiny(workdir: Path) -> None:
    workdir.mkdir()
    write_config(workdir / "config.yaml", TINY_CONFIG, "# tiny demo run\n")
    snakemake(workdir, "--cores", "2")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A workdir in which the whole workflow has run once on the tiny config (read only)."""
    workdir = shared_run(tmp_path_factory, "tiny_run", _build_tiny)
    yield workdir
    assert_run_unchanged(tmp_path_factory, workdir)


@pytest.fixture
def tiny_copy(tiny_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished tiny run (results, logs and metadata)."""
    return copy_run(tiny_run, tmp_path / "run")


@pytest.fixture(scope="session")
def tiny_changed_run(tmp_path_factory: pytest.TempPathFactory, tiny_run: Path) -> Iterator[Path]:
    """A copy of :func:`tiny_run` run again with :data:`TINY_CHANGED_CONFIG` (read only).

    Its ``config.yaml`` is the changed config; the tiny run's versions stay beside the
    new ones, their files as the tiny run wrote them.
    """

    def build(workdir: Path) -> None:
        copy_run(tiny_run, workdir)
        write_config(workdir / "config.yaml", TINY_CHANGED_CONFIG, "# tiny demo run\n")
        snakemake(workdir, "--cores", "2")

    workdir = shared_run(tmp_path_factory, "tiny_changed_run", build)
    yield workdir
    assert_run_unchanged(tmp_path_factory, workdir)


@pytest.fixture
def tiny_changed_copy(tiny_changed_run: Path, tmp_path: Path) -> Path:
    """A private copy of :func:`tiny_changed_run`."""
    return copy_run(tiny_changed_run, tmp_path / "changed_run")

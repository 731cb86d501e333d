"""Snakemake keeps a store a concurrent ``--nolock`` run committed after this run planned.

The job objects are stand-ins holding real Snakemake output files; the deletion is
Snakemake's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr
from snakemake.io import IOFile, directory

from neuroflow.artifacts import is_intact_store, write_dataset
from neuroflow.workflow.concurrent_runs import (
    TIMESTAMP,
    keep_concurrently_committed_outputs,
    outputs_to_keep,
    stamped_outputs,
)


class _Job:
    """The part of ``snakemake.jobs.Job`` that output removal touches."""

    def __init__(self, outputs: list[Path], missing: list[Path], log: Path) -> None:
        self.output = [IOFile(directory(str(p))) for p in outputs]
        self.log = [IOFile(str(log))]
        reason = SimpleNamespace(missing_output={str(p) for p in missing})
        self.dag = SimpleNamespace(reason=lambda job: reason)

    async def remove_existing_output(self) -> None:  # Snakemake's, in short
        for f in self.output:
            with contextlib.suppress(FileNotFoundError):
                await f.remove(remove_non_empty_dir=False)
        for f in self.log:
            await f.remove(remove_non_empty_dir=False)


class _Dag:
    """The part of ``snakemake.dag.DAG`` that stamps a finished job's outputs."""

    def __init__(self, missing: list[Path]) -> None:
        reason = SimpleNamespace(missing_output={str(p) for p in missing})
        self.reason = lambda job: reason

    async def check_and_touch_output(self, job: SimpleNamespace, wait: int = 3) -> None:
        for f in job.output:  # Snakemake's, in short: stamp every directory output
            if Path(f).is_dir():
                (Path(f) / TIMESTAMP).touch()


class _OldJob:
    """A job class from a Snakemake with no ``remove_existing_output``."""


def _store(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    ds = xr.Dataset({"x": (("time", "voxel"), rng.standard_normal((7, 3)))})
    return write_dataset(ds, path, provenance={"stage": "test"})


@pytest.fixture
def job_class() -> type[_Job]:
    cls = type("Job", (_Job,), {})
    assert keep_concurrently_committed_outputs(cls)
    return cls


def test_store_committed_after_planning_is_kept(tmp_path: Path, job_class: type) -> None:
    store = _store(tmp_path / "a.zarr", 0)
    log = tmp_path / "a.log"
    log.write_text("old")
    job = job_class([store], missing=[store], log=log)
    asyncio.run(job.remove_existing_output())
    assert is_intact_store(store)
    assert not log.exists()  # the job's log is still its own


def test_output_present_when_planned_is_deleted(tmp_path: Path, job_class: type) -> None:
    """A forced or incomplete rerun recomputes: its existing outputs go."""
    store = _store(tmp_path / "a.zarr", 1)
    job = job_class([store], missing=[], log=tmp_path / "a.log")
    asyncio.run(job.remove_existing_output())
    assert not store.exists()


def test_broken_store_is_deleted_even_if_new(tmp_path: Path, job_class: type) -> None:
    store = _store(tmp_path / "a.zarr", 2)
    chunk = next(p for p in store.rglob("*") if p.is_file() and "x" in p.parts[-3:])
    chunk.write_bytes(chunk.read_bytes()[:-1])  # truncated: the manifest no longer holds
    other = tmp_path / "b.zarr"
    other.mkdir()  # no manifest: not a committed store
    job = job_class([store, other], missing=[store, other], log=tmp_path / "a.log")
    assert outputs_to_keep([str(store), str(other)], [str(store), str(other)]) == set()
    asyncio.run(job.remove_existing_output())
    assert not store.exists() and not other.exists()


def test_only_the_committed_output_of_several_is_kept(tmp_path: Path, job_class: type) -> None:
    kept = _store(tmp_path / "kept.zarr", 3)
    rerun = _store(tmp_path / "rerun.zarr", 4)
    job = job_class([kept, rerun], missing=[kept], log=tmp_path / "a.log")
    asyncio.run(job.remove_existing_output())
    assert is_intact_store(kept) and not rerun.exists()


def test_wrapping_twice_wraps_once(job_class: type) -> None:
    wrapped = job_class.remove_existing_output
    assert keep_concurrently_committed_outputs(job_class)
    assert job_class.remove_existing_output is wrapped


def _stamp(store: Path, mtime: float) -> Path:
    stamp = store / TIMESTAMP
    stamp.touch()
    os.utime(stamp, (mtime, mtime))
    return stamp


def test_stamp_of_a_store_committed_after_planning_is_left_as_it_was(tmp_path: Path) -> None:
    """The concurrent run's stamp stays: its downstream jobs are not made out of date."""
    dag_class = type("DAG", (_Dag,), {})
    assert keep_concurrently_committed_outputs(type("Job", (_Job,), {}), dag_class)
    committed = _stamp(_store(tmp_path / "committed.zarr", 5), 1_000_000.0)
    fresh = _store(tmp_path / "fresh.zarr", 6)  # written by this job: not stamped yet
    rerun = _stamp(_store(tmp_path / "rerun.zarr", 7), 1_000_000.0)  # present when planned
    outputs = [committed.parent, fresh, rerun.parent]
    assert stamped_outputs([str(p) for p in outputs], [str(committed.parent), str(fresh)]) == {
        committed: (1_000_000.0, 1_000_000.0)
    }
    job = SimpleNamespace(output=[IOFile(directory(str(p))) for p in outputs])
    asyncio.run(dag_class([committed.parent, fresh]).check_and_touch_output(job, wait=0))
    assert committed.stat().st_mtime == 1_000_000.0
    assert (fresh / TIMESTAMP).stat().st_mtime > 1_000_000.0
    assert rerun.stat().st_mtime > 1_000_000.0  # a deliberate rerun is dated as new


def test_snakemake_without_the_method_is_left_alone() -> None:
    assert not keep_concurrently_committed_outputs(_OldJob)
    assert not hasattr(_OldJob, "remove_existing_output")


def test_snakemake_job_class_has_what_the_wrapper_needs() -> None:
    """The installed Snakemake still deletes outputs in ``Job.remove_existing_output``."""
    from snakemake.jobs import Job

    assert asyncio.iscoroutinefunction(Job.remove_existing_output)
    assert keep_concurrently_committed_outputs()
    assert getattr(Job.remove_existing_output, "_neuroflow_keeps_committed_outputs", False)


def test_snakemake_dag_class_has_what_the_wrapper_needs() -> None:
    """The installed Snakemake still stamps outputs in ``DAG.check_and_touch_output``."""
    from snakemake.dag import DAG

    assert asyncio.iscoroutinefunction(DAG.check_and_touch_output)
    assert keep_concurrently_committed_outputs()
    assert getattr(DAG.check_and_touch_output, "_neuroflow_keeps_committed_outputs", False)


def test_figure_folder_of_a_committed_job_is_kept(tmp_path: Path, job_class: type) -> None:
    """A QC-like job: its figure folder is renamed into place before its store."""
    store = _store(tmp_path / "run_qc.zarr", 5)
    plots = tmp_path / "run_qc"
    plots.mkdir()
    (plots / "run_qc-tsnr.png").write_bytes(b"png")
    job = job_class([store, plots], missing=[store, plots], log=tmp_path / "a.log")
    assert outputs_to_keep([str(store), str(plots)], [str(store), str(plots)]) == {
        str(store),
        str(plots),
    }
    asyncio.run(job.remove_existing_output())
    assert is_intact_store(store) and (plots / "run_qc-tsnr.png").is_file()


def test_figure_folder_committed_before_its_store_is_kept(tmp_path: Path, job_class: type) -> None:
    """The concurrent job renamed its figure folder into place and writes its store: the
    folder stays (deleting it would fail that job), the store is not there yet."""
    store, plots = tmp_path / "run_qc.zarr", tmp_path / "run_qc"
    plots.mkdir()
    (plots / "run_qc-tsnr.png").write_bytes(b"png")
    partial = tmp_path / ".run_qc.zarr.partial-0123abcd"  # the store being written
    partial.mkdir()
    job = job_class([store, plots], missing=[store, plots], log=tmp_path / "a.log")
    assert outputs_to_keep([str(store), str(plots)], [str(store), str(plots)]) == {str(plots)}
    asyncio.run(job.remove_existing_output())
    assert (plots / "run_qc-tsnr.png").is_file() and partial.is_dir()
    # a folder that was there when the run was planned is a deliberate rerun's: it goes
    job = job_class([store, plots], missing=[store], log=tmp_path / "a.log")
    asyncio.run(job.remove_existing_output())
    assert not plots.exists()

"""Runs of several configs at once (``--nolock``) that share their upstream stores.

Before a job runs, Snakemake deletes whatever already sits at the job's output paths.
When two runs of different configs write into one results folder, both may plan the
same shared job (say, the alignment of one run's features): the first to finish commits
the store, and the second, starting its copy of the job a moment later, would delete it
while jobs of the first run read it lazily, or race the first run's rename and fail
with "Directory not empty".

:func:`keep_concurrently_committed_outputs` makes Snakemake leave such a store alone:
an output that was missing when this run planned the job and that is now an intact,
committed store (its manifest verifies) was written by a concurrent run from the same
inputs and config (its path is versioned), and so was a figure folder that now exists
where none was (a folder never has its final name before it is complete; a job renames
its figure folders into place before its store, so the folder may come first: deleting
it then would leave the concurrent run's finished job without it); the job still runs,
and its atomic writes discard its identical copies
(:func:`neuroflow.artifacts.keep_committed_stores`). An
output that existed when the run was planned (a forced or incomplete rerun) is deleted
as before, so deliberate reruns recompute.

After a job, Snakemake touches each directory output's ``.snakemake_timestamp``. For a
store the concurrent run committed and already stamped, that touch would date the store
to the end of this run's (discarded) job, after the concurrent run's downstream jobs
had read it, and the next run would redo them as having "updated input files". The
stamp of such a store is therefore put back as it was.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from neuroflow.artifacts import is_intact_store

_PATCHED = "_neuroflow_keeps_committed_outputs"
TIMESTAMP = ".snakemake_timestamp"


def outputs_to_keep(outputs: Iterable[str], missing_when_planned: Iterable[str]) -> set[str]:
    """The outputs a concurrent run committed after this run planned the job.

    Parameters
    ----------
    outputs : iterable of str
        The job's output paths.
    missing_when_planned : iterable of str
        The outputs that did not exist when the run built its DAG.

    Returns
    -------
    keep : set of str
        Outputs missing at planning time that are now committed stores, and those that
        are now folders other than stores (figure folders a concurrent copy of the job
        renamed into place, before its store; a folder never has its final name before
        it is complete).
    """
    missing = {str(f) for f in missing_when_planned}
    stores = {str(f) for f in outputs if str(f) in missing and is_intact_store(f)}
    folders = {
        str(f)
        for f in outputs
        if str(f) in missing and not str(f).endswith(".zarr") and Path(str(f)).is_dir()
    }
    return stores | folders


async def _remove_unless_committed(path: Any) -> None:
    """Delete one output as Snakemake does, unless a concurrent run commits it meanwhile."""
    try:
        await path.remove(remove_non_empty_dir=False)
    except FileNotFoundError:
        pass
    except OSError as err:
        # the other run renamed its finished store into place while this one deleted
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not is_intact_store(path):
            raise


def _keeping(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def remove_existing_output(job: Any) -> None:
        try:
            missing = job.dag.reason(job).missing_output
        except AttributeError:  # a Snakemake without the planning record: as before
            await original(job)
            return
        keep = outputs_to_keep(job.output, missing)
        for f in job.output:
            if str(f) in keep or "update" in getattr(f, "flags", {}):
                continue
            if str(f) in {str(m) for m in missing}:
                await _remove_unless_committed(f)
            else:
                with contextlib.suppress(FileNotFoundError):
                    await f.remove(remove_non_empty_dir=False)
        for f in job.log:
            await f.remove(remove_non_empty_dir=False)

    setattr(remove_existing_output, _PATCHED, True)
    return remove_existing_output


def stamped_outputs(
    outputs: Iterable[str], missing_when_planned: Iterable[str]
) -> dict[Path, tuple[float, float]]:
    """Timestamps of outputs a concurrent run committed and stamped after this run planned.

    Parameters
    ----------
    outputs : iterable of str
        The job's output paths.
    missing_when_planned : iterable of str
        The outputs that did not exist when the run built its DAG.

    Returns
    -------
    stamps : dict of Path to (float, float)
        ``.snakemake_timestamp`` path -> its (atime, mtime), for each output that was
        missing when planned and is now a directory holding a stamp.
    """
    missing = {str(f) for f in missing_when_planned}
    stamps = {}
    for f in outputs:
        stamp = Path(str(f)) / TIMESTAMP
        if str(f) in missing and stamp.is_file():
            info = stamp.stat()
            stamps[stamp] = (info.st_atime, info.st_mtime)
    return stamps


def restore_stamps(stamps: dict[Path, tuple[float, float]]) -> None:
    """Put back timestamps recorded by :func:`stamped_outputs` (gone ones are skipped)."""
    for stamp, times in stamps.items():
        with contextlib.suppress(FileNotFoundError):
            os.utime(stamp, times)


def _keeping_stamps(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def check_and_touch_output(dag: Any, job: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            missing = dag.reason(job).missing_output
        except AttributeError:  # a Snakemake without the planning record: as before
            return await original(dag, job, *args, **kwargs)
        stamps = stamped_outputs([str(f) for f in job.output], missing)
        try:
            return await original(dag, job, *args, **kwargs)
        finally:
            restore_stamps(stamps)

    setattr(check_and_touch_output, _PATCHED, True)
    return check_and_touch_output


def _patch(cls: type, name: str, wrap: Callable[..., Any]) -> bool:
    original = getattr(cls, name, None)
    if original is None:
        return False
    if not getattr(original, _PATCHED, False):
        setattr(cls, name, wrap(original))
    return True


def keep_concurrently_committed_outputs(
    job_class: type | None = None, dag_class: type | None = None
) -> bool:
    """Make Snakemake keep outputs that a concurrent run committed (see module notes).

    Parameters
    ----------
    job_class : type | None
        The class whose ``remove_existing_output`` coroutine to wrap; None (default):
        ``snakemake.jobs.Job``.
    dag_class : type | None
        The class whose ``check_and_touch_output`` coroutine to wrap so that it leaves
        the stamp of such an output as it was; None (default): ``snakemake.dag.DAG``
        when ``job_class`` is None, else nothing.

    Returns
    -------
    installed : bool
        False when the job class has no such method (another Snakemake), which leaves
        Snakemake's behaviour unchanged.
    """
    if job_class is None:
        import snakemake.api  # noqa: F401  (imports the modules below in their own order)
        from snakemake.dag import DAG
        from snakemake.jobs import Job

        job_class, dag_class = Job, DAG if dag_class is None else dag_class
    if not hasattr(job_class, "remove_existing_output"):
        return False
    if dag_class is not None:
        _patch(dag_class, "check_and_touch_output", _keeping_stamps)
    return _patch(job_class, "remove_existing_output", _keeping)

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
inputs and config (its path is versioned); the job still runs, and its atomic write
discards its identical copy (:func:`neuroflow.artifacts.keep_committed_stores`). An
output that existed when the run was planned (a forced or incomplete rerun) is deleted
as before, so deliberate reruns recompute.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from collections.abc import Callable, Iterable
from typing import Any

from neuroflow.artifacts import is_intact_store

_PATCHED = "_neuroflow_keeps_committed_outputs"


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
        Outputs missing at planning time that are now committed stores.
    """
    missing = {str(f) for f in missing_when_planned}
    return {str(f) for f in outputs if str(f) in missing and is_intact_store(f)}


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


def keep_concurrently_committed_outputs(job_class: type | None = None) -> bool:
    """Make Snakemake keep outputs that a concurrent run committed (see module notes).

    Parameters
    ----------
    job_class : type | None
        The class whose ``remove_existing_output`` coroutine to wrap; None (default):
        ``snakemake.jobs.Job``.

    Returns
    -------
    installed : bool
        False when the class has no such method (another Snakemake), which leaves
        Snakemake's behaviour unchanged.
    """
    if job_class is None:
        from snakemake.jobs import Job

        job_class = Job
    original = getattr(job_class, "remove_existing_output", None)
    if original is None:
        return False
    if not getattr(original, _PATCHED, False):
        job_class.remove_existing_output = _keeping(original)
    return True

"""Run one package function as a Snakemake job.

Scripts in ``scripts/`` stay thin: they unpack ``snakemake.input/output`` and
call :func:`run_job` with one package function. This module routes logging and
warnings to the rule's log file, builds the provenance record from the rule's
params (``stage``, ``version``, ``cfg``) and passes it on.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from neuroflow.artifacts import build_provenance, keep_committed_stores
from neuroflow.heap import frozen_heap, retain_freed_memory
from neuroflow.progress import job_label
from neuroflow.stage_warnings import record_warnings
from neuroflow.workflow.versions import FORMAT_VERSIONS

__all__ = ["job_logging", "peak_rss_mib", "run_job"]

logger = logging.getLogger("neuroflow")


@contextlib.contextmanager
def job_logging(log_path: str | Path | None) -> Iterator[logging.Logger]:
    """Send ``neuroflow``, MNE and Python warnings to a log file.

    Parameters
    ----------
    log_path : path-like | None
        The rule's log file; ``None`` logs to standard error.

    Yields
    ------
    logger : logging.Logger
        The ``neuroflow`` logger.
    """
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(log_path).write_text("")
        # Append mode: libraries that close their loggers' handlers (MNE does) must not
        # silence the rest of the job's log; a closed handler reopens and appends.
        handler: logging.Handler = logging.FileHandler(log_path, mode="a")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    names = ("neuroflow", "mne", "py.warnings")
    loggers = [logging.getLogger(n) for n in names]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            yield logger
    except BaseException:
        logger.exception("Job failed.")
        raise
    finally:
        logging.captureWarnings(False)
        for lg in loggers:
            lg.removeHandler(handler)
        handler.close()


def _paths(value: Any) -> list[str]:
    if isinstance(value, str | Path):
        return [str(value)]
    if isinstance(value, Sequence):
        return [str(v) for v in value]
    return []


def _job_name(smk: Any) -> str:
    """The stage and the job's wildcards other than the version, e.g. ``decoding sub-01``."""
    wildcards = getattr(smk, "wildcards", None)
    items = list(wildcards.items()) if hasattr(wildcards, "items") else []
    parts = [f"{k}-{v}" for k, v in items if k not in ("version", "model")]
    return " ".join([str(smk.params.stage), *parts])


def run_job(smk: Any, func: Callable[..., Any], /, **kwargs: Any) -> Any:
    """Call ``func`` for a Snakemake job with config and provenance.

    Parameters
    ----------
    smk : snakemake.script.Snakemake
        The ``snakemake`` object of a ``script:`` directive. Its params must
        hold ``stage``, ``version`` and ``cfg`` (the stage's config section).
    func : callable
        Package function; called as ``func(**kwargs, config=cfg,
        provenance=record)``.
    **kwargs
        Input and output paths for ``func``.

    Returns
    -------
    result : object
        Whatever ``func`` returns.
    """
    params = smk.params
    stage = params.stage
    log = smk.log[0] if len(smk.log) else None
    # large temporaries are reused instead of page-faulted in afresh (neuroflow.heap)
    retain_freed_memory()
    with job_logging(log) as log_:
        provenance = build_provenance(
            stage=stage,
            version=params.version,
            config=params.cfg,
            inputs=_paths(list(smk.input)),
            format_version=FORMAT_VERSIONS.get(stage.split("/")[0], 1),
        )
        log_.info("%s %s: %s", stage, params.version, func.__qualname__)
        start = time.perf_counter()
        # warnings kept in every store the job writes; a store that a concurrent run of
        # the same version committed first is kept, never replaced under its readers
        # what the imports built lives as long as the job: out of every full collection
        with (
            frozen_heap(),
            record_warnings(),
            keep_committed_stores(),
            job_label(_job_name(smk)),
        ):
            result = func(**kwargs, config=params.cfg, provenance=provenance)
        log_.info(
            "done in %.1f s, peak resident memory %.0f MiB",
            time.perf_counter() - start,
            peak_rss_mib(),
        )
    return result


def peak_rss_mib() -> float:
    """Peak resident set size of this process and its waited-for children, in MiB.

    The kernel's own high-water marks, so short peaks between polls are counted;
    this is the figure to size a job's memory request on. On Linux the process's
    own mark is ``VmHWM`` of ``/proc/self/status``, which starts afresh when the
    job's interpreter is executed (``getrusage`` would also report the resident
    size of the parent that forked it, e.g. Snakemake's); elsewhere ``getrusage``.
    NaN on platforms without :mod:`resource` (Windows).
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return float("nan")
    # getrusage reports KiB on Linux, bytes on macOS
    unit = 1.0 if sys.platform == "darwin" else 1024.0
    own = _vm_hwm_bytes()
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * unit
    return max(own, children) / 2**20


def _vm_hwm_bytes() -> float | None:
    """``VmHWM`` of ``/proc/self/status`` in bytes; None where there is none."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024.0  # kB
    return None

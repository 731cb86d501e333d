"""Hold the results lock in another process, as a live run does."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from neuroflow.workflow.lock import read_holder

#: Takes the lock of the results folder given as argument, then sleeps until killed.
HOLDER = """
import sys, time
from neuroflow.workflow.lock import hold_results_lock
hold_results_lock(sys.argv[1], command="test holder")
time.sleep(600)
"""


def hold_lock(results: Path, cwd: Path) -> subprocess.Popen:
    """Start a process that holds the lock of ``results``; return once it holds it.

    The caller kills it (``proc.kill()``: SIGKILL, which must release the lock).
    """
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(results)], cwd=cwd)
    deadline = time.monotonic() + 120  # safety net only: taking the lock takes ~1 s
    while read_holder(results).get("pid") != proc.pid:
        if proc.poll() is not None:
            raise AssertionError(f"the lock holder exited early ({proc.returncode})")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the lock holder did not take the lock")
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """Kill a holder with SIGKILL and reap it."""
    proc.kill()
    proc.wait(timeout=120)

"""Shared fixtures."""

from __future__ import annotations

import contextlib
import gc
import json
import os
from pathlib import Path

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Test processes run side by side, one per core: one BLAS/OpenMP thread each (idle
    # OpenBLAS/OpenMP threads spin, so oversubscribed cores slow every worker). Set
    # before NumPy and PyTorch load; workflow jobs get their rule's threads from Snakemake.
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np
import pytest

from neuroflow.heap import retain_freed_memory
from neuroflow.workflow.warm_jobs import OFFLINE_DEFAULTS, OFFLINE_ENVIRONMENT, RUN_DEFAULTS

# The Hugging Face variables that loading a model sets in its process (offline, quiet),
# and the run defaults that reading the Snakefile sets in its process (a job graph built
# in a test process), set from the start: every Snakemake run a test process starts then
# has one environment, whatever tests ran before it, and reuses the process's warm
# launcher and job server (a run whose environment differs starts cold, with a server of
# its own: seconds of CPU each).
os.environ.update(OFFLINE_ENVIRONMENT)
for _var, _value in {**OFFLINE_DEFAULTS, **RUN_DEFAULTS}.items():
    os.environ.setdefault(_var, _value)
# For the same reason, OpenCV (video stimuli), which prepends its library folder to
# LD_LIBRARY_PATH when imported, is imported first.
with contextlib.suppress(ImportError):
    import cv2  # noqa: F401

# As in every workflow job: freed arrays are reused, not page-faulted in again.
retain_freed_memory()

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded random generator."""
    return np.random.default_rng(20261130)


@pytest.fixture
def repo_root() -> Path:
    """Root of the checkout."""
    return REPO_ROOT


@pytest.fixture
def shared_data() -> Path:
    """Real recordings shipped beside the checkout; skips when absent."""
    if not SHARED_DATA.exists():
        pytest.skip(f"shared test data not found at {SHARED_DATA}")
    return SHARED_DATA


#: Seconds each test module took in a full run on the 2-core machine (modules of 5 s or
#: more; update with ``python tests/module_seconds.py <junit.xml>``).
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")


def _weight(item: pytest.Item) -> float:
    """Rough cost of a test in seconds: a workflow run, a slow test, or a quick one."""
    if item.get_closest_marker("workflow"):
        return 20.0
    return 5.0 if item.get_closest_marker("slow") else 0.1


def pytest_configure(config: pytest.Config) -> None:
    """Keep the module order of :func:`pytest_collection_modifyitems` under xdist.

    pytest-xdist hands whole modules out (``--dist loadfile``) sorted by their number of
    tests unless ``--no-loadscope-reorder`` is given: a long module of one test (the
    job-graph walk of every config key) then started last and ran alone at the end.
    """
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the costliest modules first, each module's tests in their own order.

    Test processes take whole modules (``--dist loadfile``) in this order: the long
    workflow modules start at once and the quick ones fill the gaps at the end, so
    that no process waits idle beside one that started a long module last. A module's
    cost is its recorded time (:data:`MODULE_SECONDS`), else a guess from its markers.
    """
    root = Path(__file__).resolve().parent.parent
    recorded = json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {}
    cost: dict[Path, float] = {}
    for item in items:
        cost[item.path] = cost.get(item.path, 0.0) + _weight(item)
    for path in cost:
        with contextlib.suppress(ValueError):
            cost[path] = float(
                recorded.get(path.resolve().relative_to(root).as_posix(), cost[path])
            )
    items.sort(key=lambda item: -cost[item.path])  # stable: modules stay whole


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made out of the cyclic garbage collector.

    The test modules and the libraries they import live as long as the test process;
    without this, each full collection visits all of them again (a quarter of a second
    with PyTorch and MNE loaded, and nilearn collects before it reads each image).
    """
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope="module")
def _freeze_what_earlier_modules_left() -> None:
    """Freeze, as collection's, what is alive when a module starts (the libraries and
    session fixtures earlier modules loaded): a plotting module that ran after the long
    workflow modules took ten times as long, its every image read walking them again."""
    gc.collect()
    gc.freeze()

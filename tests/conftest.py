"""Shared fixtures."""

from __future__ import annotations

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


def _weight(item: pytest.Item) -> float:
    """Rough cost of a test: a workflow run, a slow test, or a quick one."""
    if item.get_closest_marker("workflow"):
        return 10.0
    return 3.0 if item.get_closest_marker("slow") else 0.1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the costliest modules first, each module's tests in their own order.

    Test processes take whole modules (``--dist loadfile``) in this order: the long
    workflow modules start at once and the quick ones fill the gaps at the end, so
    that no process waits idle beside one that started a long module last.
    """
    cost: dict[Path, float] = {}
    for item in items:
        cost[item.path] = cost.get(item.path, 0.0) + _weight(item)
    items.sort(key=lambda item: -cost[item.path])  # stable: modules stay whole

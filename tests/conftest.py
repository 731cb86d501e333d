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

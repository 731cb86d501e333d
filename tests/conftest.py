"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

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

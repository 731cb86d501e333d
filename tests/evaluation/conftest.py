"""Fixtures of the evaluation tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from evaluation_synthetic import build_prediction_dataset

from neuroflow.artifacts import write_dataset


@pytest.fixture
def rng() -> np.random.Generator:
    """Seeded random generator."""
    return np.random.default_rng(42)


@pytest.fixture
def provenance() -> dict:
    """Minimal provenance record."""
    return {"stage": "test", "version": "0000000000"}


@pytest.fixture
def make_prediction_store(
    tmp_path: Path, rng: np.random.Generator, provenance: dict
) -> Callable[..., Path]:
    """Write a synthetic prediction store and return its path."""

    def make(name: str = "pred.zarr", **kwargs) -> Path:
        ds = build_prediction_dataset(rng, **kwargs)
        return write_dataset(ds, tmp_path / name, provenance=provenance)

    return make

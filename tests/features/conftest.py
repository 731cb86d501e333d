"""Fixtures of the feature-extraction tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from features_helpers import write_images


@pytest.fixture
def image_stimuli(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, list[str]]:
    """Seven small random PNGs of uneven sizes: (stimuli folder, ids)."""
    folder = tmp_path / "stimuli"
    return folder, write_images(folder, rng)

"""Checks of written figures, shared by the tests of every stage that draws."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

#: The first bytes of every PNG file.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(paths: Path | Iterable[Path], min_bytes: int = 1000) -> None:
    """Each path is a PNG file (signature) of at least ``min_bytes`` bytes."""
    for path in [paths] if isinstance(paths, Path) else list(paths):
        data = Path(path).read_bytes()
        assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG file"
        assert len(data) >= min_bytes, f"{path} has only {len(data)} bytes"

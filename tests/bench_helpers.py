"""Load a script of ``bench/`` as a module, for tests that share its generators."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


@contextmanager
def loaded_bench(name: str) -> Iterator[ModuleType]:
    """``bench/<name>.py`` imported as module ``name`` for the duration of the block.

    The module is registered in ``sys.modules`` while loaded (its dataclasses look
    themselves up there) and removed afterwards.
    """
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)

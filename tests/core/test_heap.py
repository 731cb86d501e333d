"""Objects alive on entry stay out of full collections inside :func:`frozen_heap`, and
freed arrays are reused without page faults after :func:`retain_freed_memory`."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import pytest

from neuroflow.heap import frozen_heap, retain_freed_memory


class _Node:
    """An object that can sit in a reference cycle and be watched with a weak ref."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_garbage_from_before_the_block_waits_and_the_blocks_own_is_collected() -> None:
    gc.disable()
    try:
        before = _cycle()  # garbage already when the block starts: frozen with the rest
        with frozen_heap():
            assert gc.get_freeze_count() > 0
            inside = _cycle()
            gc.collect()
            assert inside() is None
            assert before() is not None
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert before() is None
    finally:
        gc.enable()


def test_nothing_stays_frozen_after_nested_blocks_or_an_error() -> None:
    try:
        with frozen_heap():
            with frozen_heap():
                pass
            raise KeyError("inside")
    except KeyError:
        pass
    assert gc.get_freeze_count() == 0


_FAULTS = """
import resource, sys
import numpy as np
from neuroflow.heap import retain_freed_memory
if sys.argv[1] == "retain":
    assert retain_freed_memory()
a = np.ones(6_000_000)  # 48 MB: above glibc's largest default heap block (32 MiB)
(a * 2.0).sum()  # the first product faults its pages in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    (a * 2.0).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="mallopt is glibc's: elsewhere retain_freed_memory changes nothing and returns False",
)
def test_freed_arrays_are_reused_without_page_faults() -> None:
    def faults(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True
        )
        return int(out.stdout.strip())

    # 48 MB given back and faulted in again: 11,719 faults of 4 KiB pages, or 24 of
    # 2 MiB transparent huge pages, per product
    assert faults("default") >= 5 * 24
    assert faults("retain") < 24


def test_retained_bytes_are_checked() -> None:
    with pytest.raises(ValueError, match="`n_bytes` must be an int in"):
        retain_freed_memory(0)
    with pytest.raises(ValueError, match="`n_bytes` must be an int in"):
        retain_freed_memory(2**31)

"""Memory management of a job: the garbage collector and the C allocator.

:func:`frozen_heap` keeps long-lived objects out of the garbage collector's full
collections. Some library code (nilearn's image access, for one) calls :func:`gc.collect` on every
image it reads. A full collection walks every tracked object, and a job that has
imported PyTorch, scikit-learn, xarray and nilearn holds a few million of them, so
each call costs a sizeable part of a second (4 calls per glass-brain figure). Objects
that exist when :func:`frozen_heap` is entered (modules, classes, functions) are moved
to the collector's permanent generation for the duration, so that those collections
only walk what the block itself creates.

:func:`retain_freed_memory` keeps the memory of freed arrays in the process. glibc's
allocator hands blocks of more than 128 KiB (up to 32 MiB as it adapts) straight from
the kernel and gives them back when they are freed, so every large NumPy temporary is
page-faulted in afresh, one fault per 4 KiB page. In a loop that makes tens of MiB of
temporaries per step (ridge over time points, batched decompositions), those faults
cost more than the arithmetic: up to 20x for an element-wise product of 16 MiB on a
virtual machine, where a fault is expensive. Kept memory is reused without faults; the
job's peak resident memory does not grow, only its return to the system waits for the
job's end (or for more than :data:`RETAINED_BYTES` free at the top of the heap).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Iterator

__all__ = ["RETAINED_BYTES", "frozen_heap", "retain_freed_memory"]

#: Blocks up to this size come from the heap (not from fresh kernel mappings), and free
#: memory up to this size stays at the heap's top instead of going back to the kernel.
RETAINED_BYTES = 1 << 30

# mallopt(3) parameters of glibc
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the objects alive now (:func:`gc.freeze`) until the block ends.

    Objects the block creates are collected as usual, and nothing stays frozen after
    the block: a block inside another freezes what exists on entry (the outer block's
    garbage included) and thaws everything on exit, so the outer block goes on
    unfrozen rather than keeping garbage alive.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def retain_freed_memory(n_bytes: int = RETAINED_BYTES) -> bool:
    """Make glibc keep freed memory for reuse instead of returning it to the kernel.

    Sets ``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` (:manpage:`mallopt(3)`) for the
    rest of the process. Results do not change, only the time spent in page faults.

    Parameters
    ----------
    n_bytes : int
        Largest block served from the heap, and free memory kept at its top.

    Returns
    -------
    applied : bool
        ``False`` where the C library is not glibc (macOS, musl): nothing is changed.
    """
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, int) or not 0 < n_bytes < 2**31:
        raise ValueError(f"`n_bytes` must be an int in (0, 2**31), got {n_bytes!r} instead.")
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, n_bytes)) and bool(mallopt(_M_TRIM_THRESHOLD, n_bytes))

"""Keep long-lived objects out of the garbage collector's full collections.

Some library code (nilearn's image access, for one) calls :func:`gc.collect` on every
image it reads. A full collection walks every tracked object, and a job that has
imported PyTorch, scikit-learn, xarray and nilearn holds a few million of them, so
each call costs a sizeable part of a second (4 calls per glass-brain figure). Objects
that exist when :func:`frozen_heap` is entered (modules, classes, functions) are moved
to the collector's permanent generation for the duration, so that those collections
only walk what the block itself creates.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["frozen_heap"]


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

"""Objects alive on entry stay out of full collections inside :func:`frozen_heap`."""

from __future__ import annotations

import gc
import weakref

from neuroflow.heap import frozen_heap


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

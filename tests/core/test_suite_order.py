"""The test processes take the costliest modules first (``tests/conftest.py``)."""

from __future__ import annotations

import pytest


def test_xdist_keeps_the_recorded_module_order(pytestconfig: pytest.Config) -> None:
    """pytest-xdist would hand modules out by their number of tests instead."""
    if not pytestconfig.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not installed: no test processes to order")
    assert pytestconfig.option.loadscopereorder is False

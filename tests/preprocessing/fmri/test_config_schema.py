"""The config schema, the commented draft section and the code defaults agree."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from neuroflow.preprocessing.fmri import DEFAULT_CONFIG

ROOT = Path(__file__).resolve().parents[3]


def _walk(schema: dict, path: str = "") -> None:
    if schema.get("type") == "object":
        if "properties" not in schema:
            # a mapping of user-chosen keys ({column: [values]}): its values are typed
            assert isinstance(schema.get("additionalProperties"), dict), path
            return
        assert schema.get("additionalProperties") is False, path
        for key, sub in schema["properties"].items():
            assert "description" in sub and "default" in sub, f"{path}{key}"
            _walk(sub, f"{path}{key}.")


def _section(section: str) -> dict:
    """The section from config/config.yaml."""
    content = yaml.safe_load((ROOT / "config" / "config.yaml").read_text()) or {}
    return content[section]


@pytest.mark.parametrize("section", ["preprocess_fmri", "dataset"])
def test_schema_and_draft(section):
    jsonschema = pytest.importorskip("jsonschema")
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / f"{section}.schema.yaml").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    _walk(schema)
    draft = _section(section)
    jsonschema.Draft202012Validator(schema).validate(draft)
    defaults = {key: sub["default"] for key, sub in schema["properties"].items()}
    assert defaults == draft
    if section == "preprocess_fmri":
        assert draft == DEFAULT_CONFIG
    bad = {**draft, "unknown": 1}
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        jsonschema.Draft202012Validator(schema).validate(bad)

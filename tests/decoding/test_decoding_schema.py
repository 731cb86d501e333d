"""The decoding and rsa schemas, their defaults and the draft config sections agree."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from neuroflow.decoding.stage import DEFAULT_CONFIG as DECODING_DEFAULTS
from neuroflow.rsa.options import DEFAULT_CONFIG as RSA_DEFAULTS
from neuroflow.rsa.options import resolve_config as resolve_rsa

ROOT = Path(__file__).resolve().parents[2]


def _defaults(node: dict) -> object:
    if node.get("type") == "object" and "properties" in node:
        return {k: _defaults(v) for k, v in node["properties"].items()}
    return node["default"]


def _check_objects(node: dict, where: str) -> None:
    # objects without properties are mappings of free names (e.g. channel groups)
    if node.get("type") == "object" and "properties" in node:
        assert node.get("additionalProperties") is False, where
        for key, sub in node["properties"].items():
            assert "description" in sub and "default" in sub, f"{where}.{key}"
            _check_objects(sub, f"{where}.{key}")


@pytest.mark.parametrize(
    ("name", "defaults"), [("decoding", DECODING_DEFAULTS), ("rsa", RSA_DEFAULTS)]
)
def test_schema_defaults_and_draft(name, defaults):
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / f"{name}.schema.yaml").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    _check_objects(schema, name)
    assert _defaults(schema) == defaults
    section = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())[name]
    jsonschema.validate(section, schema)
    assert section == defaults
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        jsonschema.validate({"not_a_key": 1}, schema)


def test_rsa_config_errors():
    with pytest.raises(
        ValueError, match=r"Unknown key 'rsa\.comparison'\. Did you mean 'comparisons'\?"
    ):
        resolve_rsa({"comparison": ["spearman"]})
    with pytest.raises(ValueError, match=r"`rsa.comparisons` must name"):
        resolve_rsa({"comparisons": []})

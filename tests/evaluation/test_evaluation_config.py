"""The evaluation config section: schema, draft defaults and code defaults agree."""

from pathlib import Path

import jsonschema
import pytest
import yaml

from neuroflow.evaluation.stage import DEFAULT_CONFIG

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "evaluation.schema.yaml"
CONFIG_YAML = ROOT / "config" / "config.yaml"


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA.read_text())


def _defaults(node):
    if node.get("type") == "object":
        return {k: _defaults(v) for k, v in node["properties"].items()}
    return node["default"]


def _objects(node, path="evaluation"):
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _objects(child, f"{path}.{name}")


def test_schema_is_valid_2020_12(schema):
    jsonschema.Draft202012Validator.check_schema(schema)


def test_every_key_documented_and_closed(schema):
    for path, node in _objects(schema):
        assert "description" in node, path
        assert "default" in node, path
        if node.get("type") == "object":
            assert node.get("additionalProperties") is False, path


def test_defaults_agree(schema):
    assert _defaults(schema) == DEFAULT_CONFIG
    draft = yaml.safe_load(CONFIG_YAML.read_text())
    assert draft["evaluation"] == DEFAULT_CONFIG
    jsonschema.Draft202012Validator(schema).validate(DEFAULT_CONFIG)


@pytest.mark.parametrize(
    "bad",
    [
        {"noise_ceiling": {"method": "bootstrap"}},
        {"permutation": {"n_permutations": -1}},
        {"fdr": {"alpha": 1.0}},
        {"plots": {"formats": ["gif"]}},
        {"topk_percent": 0},
        {"unknown": 1},
    ],
)
def test_schema_rejects_bad_values(schema, bad):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)

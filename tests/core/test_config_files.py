"""The shipped config files validate against the schema."""

from __future__ import annotations

from pathlib import Path

import yaml

from neuroflow.config import load_config, load_schema, validate_config
from neuroflow.config.validation import deep_update

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def test_default_config_equals_schema_defaults() -> None:
    """config/config.yaml spells out the schema's defaults, so either documents the other."""
    config = load_config(REPO / "config" / "config.yaml", SCHEMA)
    assert config == validate_config({}, load_schema(SCHEMA))


def test_every_schema_key_has_description_and_default() -> None:
    def walk(node: dict, path: str) -> None:
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is not True, path
            for key, sub in node.get("properties", {}).items():
                assert sub.get("description"), f"{path}.{key} has no description"
                assert "default" in sub, f"{path}.{key} has no default"
                walk(sub, f"{path}.{key}")
            if isinstance(node.get("additionalProperties"), dict):
                walk(node["additionalProperties"], f"{path}.<name>")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    walk(load_schema(SCHEMA), "config")


def test_example_overlay_validates() -> None:
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    overlay = yaml.safe_load((REPO / "resources" / "example_fmriprep.yaml").read_text())
    config = validate_config(deep_update(base, overlay), load_schema(SCHEMA))
    assert config["dataset"]["source"] == "fmriprep"


def test_presets_validate_and_are_consistent() -> None:
    from neuroflow.workflow.checks import config_errors

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    presets = sorted((REPO / "config" / "presets").glob("*.yaml"))
    assert presets
    for path in presets:
        config = validate_config(
            deep_update(base, yaml.safe_load(path.read_text())), load_schema(SCHEMA)
        )
        assert config_errors(config) == [], path.name


def test_hrf_alignment_is_not_convolved_twice() -> None:
    from neuroflow.workflow.checks import config_errors

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    overlay = {"features": {"alignment": {"method": "hrf"}}}
    config = validate_config(deep_update(base, overlay), load_schema(SCHEMA))
    (message,) = config_errors(config)
    assert message.startswith(
        "`encoding.delays.method` must be 'none' or 'fir' when `features.alignment.method` is"
    )

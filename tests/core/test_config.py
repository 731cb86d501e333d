"""Config validation: unknown keys, types, defaults, did-you-mean hints."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from neuroflow.config import ConfigError, fill_defaults, load_config, load_schema, validate_config

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "results_dir": {"type": "string", "default": "results", "description": "d"},
        "encoding": {
            "type": "object",
            "additionalProperties": False,
            "description": "d",
            "default": {},
            "properties": {
                "alphas": {
                    "type": "array",
                    "items": {"type": "number"},
                    "default": [1.0],
                    "description": "d",
                },
                "n_folds": {"type": "integer", "default": 5, "description": "d"},
                "solver": {
                    "type": "string",
                    "enum": ["eigh", "svd"],
                    "default": "eigh",
                    "description": "d",
                },
            },
        },
    },
}


def test_defaults_filled_recursively() -> None:
    out = validate_config({}, SCHEMA)
    assert out == {
        "results_dir": "results",
        "encoding": {"alphas": [1.0], "n_folds": 5, "solver": "eigh"},
    }


def test_misspelt_key_names_path_and_suggests() -> None:
    with pytest.raises(
        ConfigError, match=r"Unknown key 'encoding\.n_fold'.*Did you mean 'n_folds'"
    ):
        validate_config({"encoding": {"n_fold": 3}}, SCHEMA)


def test_misspelt_top_level_key() -> None:
    with pytest.raises(ConfigError, match=r"Unknown key 'encodng'.*Did you mean 'encoding'"):
        validate_config({"encodng": {}}, SCHEMA)


def test_wrong_type_names_path_type_and_value() -> None:
    with pytest.raises(ConfigError, match=r"'encoding\.n_folds' .* must be an integer, got 'five'"):
        validate_config({"encoding": {"n_folds": "five"}}, SCHEMA)


def test_wrong_item_type_in_list() -> None:
    with pytest.raises(ConfigError, match=r"'encoding\.alphas\[1\]' .* must be a number"):
        validate_config({"encoding": {"alphas": [1, "x"]}}, SCHEMA)


def test_enum_suggests_closest() -> None:
    with pytest.raises(ConfigError, match=r"must be one of 'eigh', 'svd', got 'egh'.*'eigh'"):
        validate_config({"encoding": {"solver": "egh"}}, SCHEMA)


def test_non_mapping_config() -> None:
    with pytest.raises(ConfigError, match="must be a mapping of sections, got list"):
        validate_config([1, 2], SCHEMA)


def test_schema_refs_are_inlined(tmp_path: Path) -> None:
    (tmp_path / "section.schema.yaml").write_text(yaml.safe_dump(SCHEMA["properties"]["encoding"]))
    main = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"encoding": {"$ref": "section.schema.yaml"}},
    }
    (tmp_path / "config.schema.yaml").write_text(yaml.safe_dump(main))
    schema = load_schema(tmp_path / "config.schema.yaml")
    assert schema["properties"]["encoding"]["properties"]["n_folds"]["default"] == 5
    assert fill_defaults({}, schema)["encoding"]["solver"] == "eigh"


def test_schema_is_read_again_when_a_file_it_came_from_changes(tmp_path: Path) -> None:
    """Each call returns a schema of its own; an edited section file is read again."""
    import os

    section = tmp_path / "section.schema.yaml"
    section.write_text(yaml.safe_dump(SCHEMA["properties"]["encoding"]))
    main = {"type": "object", "properties": {"encoding": {"$ref": "section.schema.yaml"}}}
    (tmp_path / "config.schema.yaml").write_text(yaml.safe_dump(main))
    first = load_schema(tmp_path / "config.schema.yaml")
    first["properties"]["encoding"]["properties"].clear()
    again = load_schema(tmp_path / "config.schema.yaml")
    assert again["properties"]["encoding"]["properties"]["n_folds"]["default"] == 5
    edited = yaml.safe_load(section.read_text())
    edited["properties"]["n_folds"]["default"] = 7
    section.write_text(yaml.safe_dump(edited))
    stamp = section.stat().st_mtime_ns + 10**9  # a file system with coarse times
    os.utime(section, ns=(stamp, stamp))
    reread = load_schema(tmp_path / "config.schema.yaml")
    assert reread["properties"]["encoding"]["properties"]["n_folds"]["default"] == 7
    section.unlink()
    with pytest.raises(ConfigError, match=r"section\.schema\.yaml referenced from .* not exist"):
        load_schema(tmp_path / "config.schema.yaml")


def test_load_config_reports_file_name(tmp_path: Path) -> None:
    schema_path = tmp_path / "s.yaml"
    schema_path.write_text(yaml.safe_dump(SCHEMA))
    cfg = tmp_path / "my.yaml"
    cfg.write_text("encoding:\n  n_folds: 2.5\n")
    with pytest.raises(ConfigError, match=r"my\.yaml must be an integer, got 2\.5"):
        load_config(cfg, schema_path)


def test_invalid_yaml(tmp_path: Path) -> None:
    schema_path = tmp_path / "s.yaml"
    schema_path.write_text(yaml.safe_dump(SCHEMA))
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("encoding: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml is not valid YAML"):
        load_config(cfg, schema_path)


def test_merge_defaults_fills_checks_and_hints():
    from neuroflow.config import merge_defaults

    defaults = {"alpha": 1.0, "nested": {"a": 1, "b": [1, 2]}, "free": {"x": 1}}
    out = merge_defaults(
        defaults, {"nested": {"b": [3]}, "free": {"y": 2}}, "stage", opaque=["free"]
    )
    assert out == {"alpha": 1.0, "nested": {"a": 1, "b": [3]}, "free": {"y": 2}}
    out["nested"]["b"].append(9)
    assert defaults["nested"]["b"] == [1, 2]  # defaults untouched
    assert merge_defaults(defaults, None, "stage") == defaults
    with pytest.raises(ValueError, match=r"Unknown key 'stage\.alpah'\. Did you mean 'alpha'\?"):
        merge_defaults(defaults, {"alpah": 2}, "stage")
    with pytest.raises(ValueError, match=r"Unknown key 'stage\.nested\.c'.*Valid keys here: a, b"):
        merge_defaults(defaults, {"nested": {"c": 1}}, "stage")
    with pytest.raises(TypeError, match=r"`stage\.nested` must be a mapping, got int instead"):
        merge_defaults(defaults, {"nested": 3}, "stage")
    with pytest.raises(TypeError, match=r"`stage` must be a mapping, got list instead"):
        merge_defaults(defaults, [1], "stage")

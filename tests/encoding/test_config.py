"""The encoding config schema, its draft defaults and the stage's defaults agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from jsonschema import Draft202012Validator, ValidationError

from neuroflow.encoding import DEFAULT_CONFIG, make_alphas, with_defaults

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "encoding.schema.yaml"
CONFIG_YAML = ROOT / "config" / "config.yaml"


def _walk(node, path="encoding"):
    if isinstance(node, dict) and node.get("type") == "object":
        extra = node.get("additionalProperties")
        # Closed objects, or named mappings whose values are themselves closed objects.
        assert extra is False or isinstance(extra, dict), path
        if isinstance(extra, dict):
            _walk(extra, f"{path}.<name>")
        for key, sub in node.get("properties", {}).items():
            assert "description" in sub and "default" in sub, f"{path}.{key}"
            _walk(sub, f"{path}.{key}")
    for branch in node.get("oneOf", []) if isinstance(node, dict) else []:
        _walk(branch, path)


def test_schema_is_strict_and_matches_defaults():
    schema = yaml.safe_load(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    _walk(schema)
    draft = yaml.safe_load(CONFIG_YAML.read_text())["encoding"]
    Draft202012Validator(schema).validate(draft)
    defaults = {k: v["default"] for k, v in schema["properties"].items()}
    assert draft == defaults
    # One model's settings = the shared settings + that model's entry.
    per_model = {k: v for k, v in defaults.items() if k != "models"}
    for entry in defaults["models"].values():
        # a sweep's layer models drop `layer_sweep` (see neuroflow.workflow.sweeps)
        entry = {k: v for k, v in entry.items() if k != "layer_sweep"}
        assert set(entry) == {"feature_spaces", "model"}
        # `transformer` (options of a transformer model) is an entry key of such models
        assert {**per_model, **entry, "transformer": None}.keys() == DEFAULT_CONFIG.keys()
    validator = Draft202012Validator(schema)
    validator.validate({"cv": {"grouped_kfold": 3}})
    with pytest.raises(ValidationError):
        validator.validate({"cv": {"grouped_kfold": 3, "shuffle": True}})
    with pytest.raises(ValidationError):
        validator.validate({"delays": {"method": "fir", "lag": [1]}})


def test_with_defaults_and_alphas():
    cfg = with_defaults({"delays": {"lags": [2, 3]}, "dtype": "float64"})
    library = ["glover", "spm peak 4 s", "spm", "spm peak 6 s", "spm peak 7 s"]
    assert cfg["delays"] == {"method": "hrf", "lags": [2, 3], "hrf_model": library}
    assert cfg["event_penalty"] == pytest.approx(1.0)
    assert cfg["dtype"] == "float64" and cfg["model"] == "auto"
    assert DEFAULT_CONFIG["delays"]["lags"] == [1, 2, 3, 4]  # defaults untouched
    np.testing.assert_allclose(make_alphas({"start": -1, "stop": 2, "num": 4}), [0.1, 1, 10, 100])
    with pytest.raises(ValueError, match=r"`alphas\.num` must be a positive int"):
        make_alphas({"start": 0, "stop": 1, "num": 0})

"""Layer sweeps: one encoding model per layer of an extractor, planned before any job."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from neuroflow.config import ConfigError, load_schema, validate_config
from neuroflow.workflow import WorkflowPlan
from neuroflow.workflow.sweeps import expand_layer_sweeps, sweep_model_name

REPO = Path(__file__).resolve().parents[2]
LAYERS = {"cnn": ["blocks.0", "blocks.4", "avg-pooling"], "text": ["embedding"]}


def _config(models: dict) -> dict:
    return {"encoding": {"models": models, "alphas": {"num": 3}}, "features": {}}


def test_a_sweep_becomes_one_model_per_layer_in_place():
    models = {
        "first": {"feature_spaces": ["text"]},
        "cnn": {"feature_spaces": ["cnn"], "model": "ridge", "layer_sweep": True},
        "last": {"feature_spaces": ["text", "cnn:blocks.0"]},
    }
    config = _config(models)
    out, sweeps = expand_layer_sweeps(config, LAYERS.__getitem__)
    assert list(out["encoding"]["models"]) == [
        "first",
        "cnn__blocks.0",
        "cnn__blocks.4",
        "cnn__avg-pooling",
        "last",
    ]
    assert out["encoding"]["models"]["cnn__blocks.4"] == {
        "feature_spaces": ["cnn:blocks.4"],
        "model": "ridge",
    }
    assert out["encoding"]["alphas"] == {"num": 3}
    assert [(s.layer, s.position, s.depth) for s in sweeps["cnn"]] == [
        ("blocks.0", 0, 0.0),
        ("blocks.4", 1, 0.5),
        ("avg-pooling", 2, 1.0),
    ]
    assert sweeps["cnn"][2].as_dict() == {
        "sweep": "cnn",
        "model": "cnn__avg-pooling",
        "extractor": "cnn",
        "layer": "avg-pooling",
        "position": 2,
        "depth": 1.0,
    }
    # the input is left as it was
    assert config["encoding"]["models"] == models


def test_without_sweeps_the_config_is_unchanged():
    config = _config({"a": {"feature_spaces": ["text"]}})
    out, sweeps = expand_layer_sweeps(config, LAYERS.__getitem__)
    assert out == config and sweeps == {}
    # the schema's default is dropped, so the stages (and versions) never see it
    off = _config({"a": {"feature_spaces": ["text"], "layer_sweep": False}})
    assert expand_layer_sweeps(off, LAYERS.__getitem__)[0] == config
    one, sweeps = expand_layer_sweeps(
        _config({"t": {"feature_spaces": ["text"], "layer_sweep": True}}), LAYERS.__getitem__
    )
    assert list(one["encoding"]["models"]) == ["t__embedding"]
    assert sweeps["t"][0].depth == 0.0


@pytest.mark.parametrize("spaces", [["cnn", "text"], ["cnn:blocks.4"]])
def test_a_sweep_names_exactly_one_extractor(spaces):
    config = _config({"bad": {"feature_spaces": spaces, "layer_sweep": True}})
    with pytest.raises(ConfigError, match=r"`encoding.models.bad.layer_sweep` needs exactly one"):
        expand_layer_sweeps(config, LAYERS.__getitem__)


def test_layer_model_names_must_be_free():
    config = _config(
        {
            "cnn": {"feature_spaces": ["cnn"], "layer_sweep": True},
            "cnn__blocks.4": {"feature_spaces": ["text"]},
        }
    )
    with pytest.raises(ConfigError, match=r"'cnn__blocks.4' of layer 'blocks.4' is already taken"):
        expand_layer_sweeps(config, LAYERS.__getitem__)
    # layer names that differ only in punctuation keep apart: each keeps its own name
    close = {"x": ["a.b", "a-b"]}
    config = _config({"s": {"feature_spaces": ["x"], "layer_sweep": True}})
    out, _ = expand_layer_sweeps(config, close.__getitem__)
    assert list(out["encoding"]["models"]) == ["s__a.b", "s__a-b"]
    assert sweep_model_name("s", "depth-0.5") == "s__depth-0.5"


def test_the_plan_runs_every_layer_model_of_a_sweep():
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = validate_config({}, schema)
    config = copy.deepcopy(config)
    config["features"]["extractors"][1]["layers"] = [{"index": 0}, {"index": 3}, {"depth": 1.0}]
    config["encoding"]["models"] = {
        "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
        "text_layers": {"feature_spaces": ["minilm"], "layer_sweep": True},
    }
    plan = WorkflowPlan(validate_config(config, schema))
    names = ["text_layers__layer-0", "text_layers__layer-3", "text_layers__depth-1"]
    assert plan.encoding_models() == ["visual", *names]
    assert plan.encoding_config(names[1])["feature_spaces"] == ["minilm:layer-3"]
    assert "layer_sweep" not in plan.encoding_config(names[1])
    assert [s["model"] for s in plan.layer_sweeps()] == names
    assert [s["depth"] for s in plan.layer_sweeps()] == [0.0, 0.5, 1.0]
    # every layer model is a model of its own, with its own version
    assert len({plan.versions[f"encoding/{m}"] for m in names}) == 3
    config["features"]["extractors"][1]["layers"].insert(1, {"index": 1})
    wider = WorkflowPlan(validate_config(config, schema))
    assert len(wider.encoding_models()) == 5


def test_the_schema_refuses_a_non_boolean_sweep():
    schema = load_schema(REPO / "workflow" / "schemas" / "config.schema.yaml")
    config = {"encoding": {"models": {"m": {"feature_spaces": ["minilm"], "layer_sweep": "yes"}}}}
    with pytest.raises(ConfigError, match=r"layer_sweep"):
        validate_config(config, schema)

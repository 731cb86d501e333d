"""Shipped default models whose extractors a config replaces are left out with a note."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from neuroflow.config import load_schema, validate_config
from neuroflow.workflow.defaults import drop_orphan_defaults, shipped_encoding_models
from neuroflow.workflow.plan import WorkflowPlan

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def defaults() -> dict:
    return validate_config({}, load_schema(SCHEMA))


def _own_extractors(defaults: dict, **models: dict) -> dict:
    """The defaults with one random-weight ViT as the only extractor, plus ``models``."""
    config = copy.deepcopy(defaults)
    vit = {"model_type": "vit", "hidden_size": 32, "num_hidden_layers": 2}
    config["features"]["extractors"] = [
        {**config["features"]["extractors"][1], "name": "vit", "extractor": "hf_vision",
         "weights": "random", "model_config": {**vit, "num_attention_heads": 2,
                                               "intermediate_size": 37}},
    ]  # fmt: skip
    for name, entry in models.items():
        config["encoding"]["models"][name] = {"model": "ridge", "layer_sweep": False, **entry}
    return validate_config(config, load_schema(SCHEMA))


def test_shipped_models_are_the_schema_defaults(defaults):
    shipped = shipped_encoding_models()
    assert set(shipped) == {"visual", "semantic", "joint", "efficientnet"}
    assert shipped == defaults["encoding"]["models"]


def test_default_models_without_their_extractors_are_left_out(defaults):
    config = _own_extractors(defaults, mine={"feature_spaces": ["vit"]})
    out, notes = drop_orphan_defaults(config)
    assert list(out["encoding"]["models"]) == ["mine"]
    assert len(notes) == 4 and all("the default model is left out" in n for n in notes)
    assert "extractor(s) ['image_statistics', 'minilm']" in " ".join(notes)
    assert list(config["encoding"]["models"])[:4] == ["visual", "semantic", "joint", "efficientnet"]
    plan = WorkflowPlan(config)
    assert plan.encoding_models() == ["mine"]
    assert any(n.startswith("encoding/joint: the default model is left out") for n in plan.notes)


def test_a_changed_or_own_model_naming_a_missing_extractor_is_an_error(defaults):
    config = _own_extractors(defaults, mine={"feature_spaces": ["vti"]})
    with pytest.raises(ValueError, match=r"names feature space 'vti'.*Did you mean 'vit'"):
        WorkflowPlan(config)
    config = _own_extractors(defaults, mine={"feature_spaces": ["vit"]})
    config["encoding"]["models"]["visual"]["model"] = "banded_ridge"  # no longer the default
    assert "visual" in drop_orphan_defaults(config)[0]["encoding"]["models"]
    with pytest.raises(ValueError, match=r"visual\.feature_spaces` names feature space"):
        WorkflowPlan(config)


def test_nothing_is_left_out_when_every_extractor_is_there(defaults):
    out, notes = drop_orphan_defaults(defaults)
    assert notes == [] and out["encoding"]["models"] == defaults["encoding"]["models"]

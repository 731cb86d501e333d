"""Registry, configuration defaults and the schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from neuroflow.features.config import (
    DEFAULT_ALIGNMENT,
    DEFAULT_ENTRY,
    fill_alignment,
    fill_entry,
    layer_name,
    layer_names,
)
from neuroflow.features.registry import (
    Extractor,
    available_extractors,
    check_modality,
    get_extractor,
    register_extractor,
)

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_extractors_declare_modalities():
    extractors = available_extractors()
    assert extractors["hf_vision"] == ("image", "video")
    assert extractors["hf_text"] == ("text",)
    assert extractors["hf_audio"] == ("audio",)
    assert extractors["sentence_transformer"] == ("text",)
    assert set(extractors["motion_energy"]) == {"image", "video"}
    for name in ("image_statistics", "audio_envelope", "mel_spectrogram", "word_rate"):
        assert name in extractors


def test_register_extractor_rejects_unknown_modality():
    with pytest.raises(ValueError, match="modalities"):
        register_extractor("bad", modalities=("smell",))


def test_register_and_lookup_custom_extractor():
    @register_extractor("test_constant", modalities=("text",))
    class Constant(Extractor):
        def layer_names(self):
            return ["output"]

        def extract(self, batch):
            return {"output": [[1.0]] * len(batch)}

    assert get_extractor("test_constant").cls is Constant
    assert Constant.modalities == ("text",)


def test_unknown_extractor_is_a_clear_error():
    with pytest.raises(ValueError, match="`extractor` must be one of"):
        get_extractor("no_such_model")


def test_modality_mismatch_in_config_fails():
    with pytest.raises(ValueError, match="accepts text stimuli, got modality 'image'"):
        fill_entry({"extractor": "sentence_transformer", "modality": "image"})
    with pytest.raises(ValueError, match="accepts audio"):
        check_modality("hf_audio", "video")


def test_fill_entry_defaults_and_unknown_keys():
    entry = fill_entry({"extractor": "hf_vision", "model": "x", "reduction": {"method": "pca"}})
    assert entry["layers"] == [{"depth": 1.0}]
    assert entry["reduction"] == {"method": "pca", "n_components": 64, "seed": 0}
    assert fill_entry({})["layers"] == ["embedding"]
    assert fill_entry({"extractor": "word_rate"})["layers"] == ["output"]
    with pytest.raises(ValueError, match=r"Unknown key 'features\.extractors\[\]\.colour'"):
        fill_entry({"extractor": "hf_vision", "colour": 1})
    with pytest.raises(ValueError, match="must be \\['output'\\]"):
        fill_entry({"extractor": "word_rate", "layers": [{"index": 3}]})
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        fill_entry({"pooling": "max"})
    with pytest.raises(ValueError, match="fraction of depth"):
        fill_entry({"extractor": "hf_text", "layers": [{"depth": 1.5}]})
    with pytest.raises(
        ValueError, match=r"`layers` entry 1\.0 is ambiguous: write \{depth: 1\.0\}"
    ):
        fill_entry({"extractor": "hf_text", "layers": [1.0]})
    with pytest.raises(ValueError, match="must name each layer once"):
        fill_entry({"extractor": "hf_text", "layers": [{"depth": 1}, {"depth": 1.0}]})


def test_layer_names_are_known_before_loading():
    assert layer_name({"depth": 0.5}) == "depth-0.5"
    assert layer_name({"depth": 1.0}) == "depth-1"
    assert layer_name({"depth": 1}) == "depth-1"
    assert layer_name({"index": 3}) == "layer-3"
    assert layer_name({"index": -1}) == "layer-minus1"
    with pytest.raises(ValueError, match="ambiguous"):
        layer_name(3)
    layers = [{"index": 0}, {"depth": 0.75}, "x"]
    assert layer_names({"extractor": "hf_text", "layers": layers}) == [
        "layer-0",
        "depth-0.75",
        "x",
    ]


def test_fill_alignment_checks_delays():
    assert fill_alignment({}) == DEFAULT_ALIGNMENT
    with pytest.raises(ValueError, match="`delays` must be"):
        fill_alignment({"delays": [1, 1]})
    with pytest.raises(ValueError, match="`method` must be one of"):
        fill_alignment({"method": "cubic"})


def _schema_defaults(schema: dict) -> dict:
    return {key: spec["default"] for key, spec in schema["properties"].items()}


def _check_object_levels(node: dict, where: str) -> None:
    if node.get("type") == "object" and "properties" in node:
        assert node.get("additionalProperties") is False, where
        for key, spec in node["properties"].items():
            assert "description" in spec and "default" in spec, f"{where}.{key}"
            _check_object_levels(spec, f"{where}.{key}")
    for key in ("items",):
        if isinstance(node.get(key), dict):
            _check_object_levels(node[key], f"{where}[]")


def test_schema_matches_python_defaults():
    path = ROOT / "workflow" / "schemas" / "features.schema.yaml"
    schema = yaml.safe_load(path.read_text())
    _check_object_levels(schema, "features")
    entry = schema["$defs"]["extractor"]
    _check_object_levels(entry, "extractor")
    assert _schema_defaults(entry) == DEFAULT_ENTRY
    # the workflow's `auto` values are resolved per dataset by the plan
    from neuroflow.features.design import AUTO_ALIGNMENT

    alignment = {**DEFAULT_ALIGNMENT, **AUTO_ALIGNMENT}
    assert _schema_defaults(schema["properties"]["alignment"]) == alignment
    assert schema["properties"]["alignment"]["default"] == alignment
    for key in ("transforms", "gabor", "audio", "reduction"):
        assert entry["properties"][key]["default"] == _schema_defaults(entry["properties"][key])
    draft = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["features"]
    assert draft["alignment"] == alignment
    assert draft["extractors"] == schema["properties"]["extractors"]["default"]
    for item in draft["extractors"]:
        fill_entry(item)


def test_schema_validates_draft_config():
    jsonschema = pytest.importorskip("jsonschema")
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "features.schema.yaml").read_text())
    draft = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["features"]
    jsonschema.Draft202012Validator(schema).validate(draft)
    bad = {**draft, "alignment": {**draft["alignment"], "delays": "zero"}}
    with pytest.raises(jsonschema.ValidationError, match="zero"):
        jsonschema.Draft202012Validator(schema).validate(bad)

"""Transform sweeps: list-valued transforms expand into extractor and model variants."""

from __future__ import annotations

import copy

import pytest

from neuroflow.config import ConfigError
from neuroflow.workflow.transform_sweeps import expand_transform_sweeps, variant_suffix


def _config(blur=(0, 1.5, 4)) -> dict:
    return {
        "features": {
            "extractors": [
                {
                    "name": "stats",
                    "extractor": "image_statistics",
                    "transforms": {"blur_sigma": list(blur)},
                },
                {"name": "text", "extractor": "sentence_transformer"},
            ]
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["stats"], "model": "ridge"},
                "layers": {"feature_spaces": ["stats"], "layer_sweep": True},
                "joint": {"feature_spaces": ["stats:output", "text"]},
                "semantic": {"feature_spaces": ["text"]},
            }
        },
        "eeg_encoding": {"models": {}},
        "decoding": {"feature_spaces": ["stats", "text"]},
        "rsa": {"feature_spaces": []},
    }


def _transforms(config: dict) -> dict:
    return config["features"]["extractors"][0]["transforms"]


def test_value_suffixes_are_wildcard_safe() -> None:
    assert variant_suffix("blur_sigma", 0) == "blur_sigma_0"
    assert variant_suffix("blur_sigma", 0.25) == "blur_sigma_0p25"
    assert variant_suffix("blur_sigma", 4.0) == "blur_sigma_4"


def test_nothing_swept_returns_the_same_config() -> None:
    config = _config()
    config["features"]["extractors"][0]["transforms"]["blur_sigma"] = 2.0
    out, sweeps = expand_transform_sweeps(config)
    assert out is config and sweeps == {}


def test_extractors_models_and_spaces_expand_per_value() -> None:
    config = _config()
    before = copy.deepcopy(config)
    out, sweeps = expand_transform_sweeps(config)
    assert config == before  # the input is not modified
    names = [e["name"] for e in out["features"]["extractors"]]
    assert names == [
        "stats__blur_sigma_0",
        "stats__blur_sigma_1p5",
        "stats__blur_sigma_4",
        "text",
    ]
    blurs = [e["transforms"]["blur_sigma"] for e in out["features"]["extractors"][:3]]
    assert blurs == [0.0, 1.5, 4.0]
    models = out["encoding"]["models"]
    assert list(models) == [
        *(f"visual__blur_sigma_{v}" for v in ("0", "1p5", "4")),
        *(f"layers__blur_sigma_{v}" for v in ("0", "1p5", "4")),
        *(f"joint__blur_sigma_{v}" for v in ("0", "1p5", "4")),
        "semantic",
    ]
    assert models["joint__blur_sigma_1p5"]["feature_spaces"] == [
        "stats__blur_sigma_1p5:output",
        "text",
    ]
    assert models["layers__blur_sigma_4"]["layer_sweep"] is True  # layer sweeps expand next
    assert models["visual__blur_sigma_0"]["model"] == "ridge"
    assert out["decoding"]["feature_spaces"] == [
        "stats__blur_sigma_0",
        "stats__blur_sigma_1p5",
        "stats__blur_sigma_4",
        "text",
    ]
    assert out["rsa"]["feature_spaces"] == []  # empty = every extractor, variants included
    (variants,) = sweeps.values()
    assert [(v.extractor, v.value) for v in variants] == [
        ("stats__blur_sigma_0", 0.0),
        ("stats__blur_sigma_1p5", 1.5),
        ("stats__blur_sigma_4", 4.0),
    ]
    assert variants[1].models == (
        "visual=visual__blur_sigma_1p5",
        "layers=layers__blur_sigma_1p5",
        "joint=joint__blur_sigma_1p5",
    )
    assert variants[1].as_dict()["transform"] == "blur_sigma"


def test_eeg_models_of_their_own_expand_too() -> None:
    config = _config(blur=(0, 2))
    config["eeg_encoding"]["models"] = {"erp": {"feature_spaces": ["stats"]}}
    out, _ = expand_transform_sweeps(config)
    assert list(out["eeg_encoding"]["models"]) == ["erp__blur_sigma_0", "erp__blur_sigma_2"]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            lambda c: c["features"]["extractors"][0]["transforms"].update(blur_sigma=[1, 1]),
            "distinct",
        ),
        (lambda c: c["features"]["extractors"][0]["transforms"].update(blur_sigma=[]), "distinct"),
        (
            lambda c: c["features"]["extractors"][1].update(transforms={"blur_sigma": [0, 1]}),
            "at most one transform-swept extractor",
        ),
        (
            lambda c: c["features"]["extractors"].append(
                {"name": "stats__blur_sigma_0", "extractor": "image_statistics"}
            ),
            "already an entry's name",
        ),
        (
            lambda c: c["encoding"]["models"].update(
                visual__blur_sigma_4={"feature_spaces": ["text"]}
            ),
            "already taken",
        ),
    ],
)
def test_bad_sweeps_are_config_errors(change, match) -> None:
    config = _config()
    change(config)
    with pytest.raises(ConfigError, match=match):
        expand_transform_sweeps(config)

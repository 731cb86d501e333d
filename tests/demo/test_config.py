"""Tests of the demo configuration and layout (no files written)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from neuroflow.demo import DEFAULT_CONFIG, demo_layout, resolve_config

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "demo.schema.yaml"
CONFIG_YAML = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def _schema_defaults(schema: dict) -> dict:
    out = {}
    for key, prop in schema["properties"].items():
        out[key] = _schema_defaults(prop) if prop.get("type") == "object" else prop["default"]
    return out


def _check_objects(schema: dict, where: str = "demo") -> None:
    assert schema.get("additionalProperties") is False, where
    for key, prop in schema["properties"].items():
        assert "description" in prop and "default" in prop, f"{where}.{key}"
        if prop.get("type") == "object":
            _check_objects(prop, f"{where}.{key}")


def test_schema_matches_defaults_and_draft():
    """Schema defaults, the draft config and DEFAULT_CONFIG agree and validate."""
    import jsonschema

    schema = yaml.safe_load(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    _check_objects(schema)
    assert _schema_defaults(schema) == DEFAULT_CONFIG
    draft = yaml.safe_load(CONFIG_YAML.read_text())["demo"]
    assert draft == DEFAULT_CONFIG
    jsonschema.validate(draft, schema)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"n_subjects": 0}, r"`demo.n_subjects` must be an int in \[1, 99\], got 0"),
        ({"seed": -1}, "`demo.seed` must be an int"),
        ({"colour": 1}, r"Unknown key 'demo\.colour'"),
        ({"fmri": {"tr": 0}}, "`demo.fmri.tr` must be a number"),
        ({"fmri": {"grid_shape": [7, 8, 9]}}, "`demo.fmri.grid_shape` must be three ints"),
        ({"fmri": {"shot_duration": [5.0, 3.0]}}, "`demo.fmri.shot_duration` must be a pair"),
        ({"fmri": {"snr": {"semantic": -1}}}, "`demo.fmri.snr.semantic`"),
        ({"eeg": {"n_channels": 8}}, "`demo.eeg.n_channels`"),
        ({"eeg": {"n_trials": 7, "n_test_images": 4, "n_repeats": 2}}, "must not exceed"),
        ({"eeg": {"sfreq": 90.0}}, "`demo.eeg.sfreq` must be in"),
        ({"eeg": {"soa": [0.3, 0.4]}}, "`demo.eeg.soa` must start"),
        ({"eeg": {"latencies": {"semantic": 2.0}}}, "`demo.eeg.latencies.semantic`"),
        ({"fmri": "no"}, "`demo.fmri` must be a mapping"),
    ],
)
def test_bad_config(config, match):
    """Bad values raise errors naming the key and the value."""
    with pytest.raises((ValueError, TypeError), match=match):
        resolve_config(config)


def test_layout_is_pure_and_consistent(tmp_path):
    """The layout writes nothing and lists runs, splits and stimuli consistently."""
    cfg = {"n_subjects": 3, "fmri": {"n_train_runs": 2, "n_test_repeats": 3}}
    layout = demo_layout(cfg, tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
    assert layout.subjects == ("01", "02", "03")
    assert len(layout.fmri_runs) == 3 * 5
    assert layout.train_runs == ("1", "2") and layout.test_runs == ("3", "4", "5")
    assert len(layout.eeg_recordings) == 3
    assert layout.fmri_runs[0].bold == (
        tmp_path / "ds" / "sub-01" / "func" / "sub-01_task-movie_run-1_bold.nii.gz"
    )
    assert len(set(layout.stimulus_ids)) == len(layout.stimulus_ids)
    n_eeg = sum(s.startswith("images/") for s in layout.stimulus_ids)
    assert n_eeg == 1200 - 40 * 10 + 40
    assert layout == demo_layout(cfg, tmp_path / "ds")

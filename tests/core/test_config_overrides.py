"""``--config KEY=VALUE`` overrides: typed by the schema, and errors that name the entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from snakemake.cli import parse_config

from neuroflow.cli import main
from neuroflow.config import ConfigError, coerce_overrides, load_schema, validate_config
from neuroflow.workflow.runs import override_error, snakemake_config

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
DELAYS = 'encoding={"delays": {"method": "fir", "lags": [1, 2, 3]}}'


@pytest.fixture(scope="module")
def schema() -> dict:
    return load_schema(SCHEMA)


def test_snakemake_reads_nested_override_values_as_strings(schema):
    """Without coercion the documented override is refused (the reason it exists)."""
    raw = parse_config([DELAYS])
    assert raw["encoding"]["delays"]["lags"] == ["1", "2", "3"]
    with pytest.raises(ConfigError, match=r"encoding\.delays\.lags\[0\]' in --config must be"):
        validate_config(raw, schema, source="--config")


def test_nested_override_values_are_typed_by_the_schema(schema):
    coerced = coerce_overrides(parse_config([DELAYS]), schema)
    assert coerced["encoding"]["delays"] == {"method": "fir", "lags": [1, 2, 3]}
    validate_config(coerced, schema)


def test_strings_the_schema_takes_stay_strings(schema):
    """Subject labels stay "01" (YAML would read 1); "auto" and "fir" stay words."""
    entries = [
        'dataset={"subjects": ["01", "02"], "runs": ["1"]}',
        'preprocess_eeg={"notch_freq": "auto", "l_freq": "null", "h_freq": "30.5"}',
    ]
    coerced = coerce_overrides(parse_config(entries), schema)
    assert coerced["dataset"] == {"subjects": ["01", "02"], "runs": ["1"]}
    eeg = coerced["preprocess_eeg"]
    assert eeg == {"notch_freq": "auto", "l_freq": None, "h_freq": 30.5}
    validate_config(coerced, schema)


def test_alternatives_of_the_schema_are_typed(schema):
    """A oneOf key takes the first alternative its typed value fits (an object here)."""
    entries = ['encoding={"cv": {"grouped_kfold": 3}}', 'preprocess_eeg={"notch_freq": [50, 100]}']
    coerced = coerce_overrides(parse_config(entries), schema)
    assert coerced["encoding"]["cv"] == {"grouped_kfold": 3}
    assert coerced["preprocess_eeg"]["notch_freq"] == [50, 100]
    validate_config(coerced, schema)


def test_unreadable_value_names_the_entry(schema):
    raw = parse_config(['encoding={"alphas": {"start": "[1, 2"}}'])
    with pytest.raises(
        ConfigError, match=r"'encoding\.alphas\.start' in --config must be a number written in YAML"
    ):
        coerce_overrides(raw, schema)


def test_wrong_value_is_left_for_validation_to_name(schema):
    coerced = coerce_overrides(parse_config(['encoding={"alphas": {"num": "many"}}']), schema)
    assert coerced["encoding"]["alphas"]["num"] == "many"
    with pytest.raises(
        ConfigError, match=r"'encoding\.alphas\.num' in --config must be an integer"
    ):
        validate_config(coerced, schema, source="--config")


def test_run_config_types_overrides():
    """The config `neuroflow check-config` / `gc` / `versions` build gets typed overrides."""
    config = snakemake_config(
        [], [DELAYS, "results_dir=elsewhere"], base=REPO / "config" / "config.yaml", schema=SCHEMA
    )
    assert config["encoding"]["delays"]["lags"] == [1, 2, 3]
    assert config["results_dir"] == "elsewhere"


def test_dotted_key_message_gives_the_mapping_form():
    message = override_error("encoding.delays.method=fir", ValueError("bad"))
    assert "'encoding.delays.method=fir'" in message
    assert "--config encoding='{delays: {method: fir}}'" in message
    assert override_error("=3", ValueError("Invalid")) == "--config entry '=3' is invalid: Invalid"


def test_check_config_names_the_failing_entry(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "check-config",
            "--no-recorded-config",
            "--config",
            "results_dir=r2",
            "encoding.alpha=3",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "--config entry 'encoding.alpha=3' must be KEY=VALUE with a top-level KEY" in err
    assert "results_dir=r2" not in err  # only the failing entry is named
    assert "--config encoding='{alpha: 3}'" in err


def test_check_config_names_an_unknown_nested_key(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["check-config", "--no-recorded-config", "--config", "encoding={alpha: 3}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Unknown key 'encoding.alpha'" in err and "Did you mean 'alphas'?" in err

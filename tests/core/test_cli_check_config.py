"""``neuroflow check-config``: the config a run would get, validated, and what it would do."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuroflow.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # config/config.yaml is read from the working folder


def test_default_config_reports_the_plan(capsys):
    assert main(["check-config"]) == 0
    out = capsys.readouterr().out
    layers = ("blocks.2", "blocks.4", "blocks.7", "blocks.10", "blocks.14", "avg-pooling")
    sweep = ", ".join(f"efficientnet__{layer}" for layer in layers)
    assert f"encoding models: {sweep}, joint, semantic, visual" in out
    assert "sub-01 held-out runs: sub-01_task-movie_run-4, sub-01_task-movie_run-5" in out
    assert out.rstrip().endswith("lists the jobs.")


def _user_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A builder package whose import would leave a file behind; the file it would write."""
    package = tmp_path / "code" / "labnet"
    package.mkdir(parents=True)
    ran = tmp_path / "user-code-ran"
    (package / "__init__.py").write_text(f"open({str(ran)!r}, 'w').close()\n")
    (package / "build.py").write_text(f"open({str(ran)!r}, 'w').close()\ndef net(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    return ran


def _torch_config(tmp_path: Path, weights: Path) -> Path:
    config = tmp_path / "mine.yaml"
    config.write_text(
        f"features:\n  code_dirs: [{str(tmp_path / 'code')!r}]\n  extractors:\n"
        "    - {name: labnet, extractor: torch_module, builder: 'labnet.build:net', "
        f"weights_file: {str(weights)!r}, layers: [fc]}}\n"
    )
    return config


def test_missing_weights_are_reported_without_running_user_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import sys

    ran = _user_code(tmp_path, monkeypatch)
    weights = tmp_path / "weights" / "labnet.pt"
    config = _torch_config(tmp_path, weights)
    assert main(["check-config", "--configfile", str(config)]) == 1
    captured = capsys.readouterr()
    assert "encoding models: " in captured.out  # the plan is reported first
    assert f"labnet: MISSING, `weights_file` file {str(weights)!r} does not exist" in captured.out
    assert "Config OK" not in captured.out
    assert "1 model(s) that its extractors read are missing (labnet)" in captured.err
    # `neuroflow models` agrees, with the same exit status
    assert main(["models", "--no-hash", "--configfile", str(config)]) == 1
    assert "labnet: MISSING" in capsys.readouterr().out
    # weights that are not a torch file at all: found on disk, never loaded
    weights.parent.mkdir()
    weights.write_bytes(b"not a torch file")
    assert main(["check-config", "--configfile", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"labnet: weights file (`weights_file`), found at {weights}" in out
    assert out.rstrip().endswith("lists the jobs.")
    assert not ran.exists() and "labnet" not in sys.modules


def test_yaml_syntax_error_names_file_line_and_column(tmp_path, capsys):
    bad = tmp_path / "my.yaml"
    bad.write_text("encoding:\n  models:\n    mine: {feature_spaces: [minilm]\n  alphas: 3\n")
    assert main(["check-config", "--configfile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"Config file {bad} must be valid YAML, got a syntax error at line 4, column 3" in err


def test_cross_field_error_and_override(tmp_path, capsys):
    assert main(["check-config", "--config", "results_dir=elsewhere"]) == 0
    assert "results: elsewhere" in capsys.readouterr().out
    mine = tmp_path / "my.yaml"
    mine.write_text("preprocess_eeg: {epochs_tmin: 0.5, epochs_tmax: 0.2}\n")
    assert main(["check-config", "--configfile", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "`preprocess_eeg.epochs_tmin` must be smaller than `preprocess_eeg.epochs_tmax`" in err


def test_replace_workflow_config_keeps_only_the_users_models(tmp_path, capsys):
    mine = tmp_path / "my.yaml"
    mine.write_text("encoding:\n  models:\n    mine: {feature_spaces: [minilm]}\n")
    assert main(["check-config", "--configfile", str(mine)]) == 0
    out = capsys.readouterr().out
    assert "encoding models: efficientnet__blocks.2, " in out  # the default's layer sweep
    assert "efficientnet__avg-pooling, joint, mine, semantic, visual\n" in out
    args = ["check-config", "--configfile", str(mine), "--replace-workflow-config"]
    assert main(args) == 0
    assert "encoding models: mine\n" in capsys.readouterr().out


def test_configfiles_of_a_snakemake_command_line():
    from neuroflow.cli.run import snakemake_configfiles

    argv = ["-n", "--configfile", "a.yaml", "b.yaml", "--cores", "2", "--configfile=c.yaml"]
    assert snakemake_configfiles(argv) == ["a.yaml", "b.yaml", "c.yaml"]
    assert snakemake_configfiles(["--configfiles", "d.yaml", "all"]) == ["d.yaml", "all"]
    assert snakemake_configfiles(["--cores", "1", "all"]) == []


def test_run_names_the_yaml_error_before_snakemake_starts(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "my.yaml"
    bad.write_text("encoding:\n  models:\n    mine: {feature_spaces: [minilm]\n  alphas: 3\n")
    cmd = [sys.executable, "-m", "neuroflow.cli", "run", "-n", "--cores", "1", "--configfile"]
    proc = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert f"Config file {bad} must be valid YAML, got a syntax error at line 4, column 3" in (
        proc.stderr
    )
    missing = subprocess.run(
        [*cmd, str(tmp_path / "none.yaml")], capture_output=True, text=True, timeout=300
    )
    assert missing.returncode == 2 and "must be an existing file" in missing.stderr
    # valid files: snakemake itself runs with the arguments unchanged
    good = tmp_path / "good.yaml"
    good.write_text("encoding:\n  models:\n    mine: {feature_spaces: [minilm]}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "neuroflow.cli", "run", "--configfile", str(good), "--version"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip()[0].isdigit(), proc.stdout + proc.stderr

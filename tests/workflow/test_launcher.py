"""The tests' warm Snakemake launcher gives what a new ``python -m snakemake`` gives."""

from __future__ import annotations

import os
import subprocess
import sys

import snakemake_launcher
from workflow_helpers import REPO


def _both(args: list[str], cwd) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cold = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=cwd,
    )
    return cold, snakemake_launcher.run(args, env, 600, cwd)


def test_output_and_exit_status_are_those_of_a_new_interpreter(tmp_path):
    (tmp_path / "config.yaml").write_text("dataset:\n  sources: demo\n")  # a misspelt key
    args = ["-n", "-s", str(REPO / "Snakefile"), "--configfile", "config.yaml"]
    cold, warm = _both(args, tmp_path)
    assert warm.returncode == cold.returncode == 1
    assert "Did you mean 'source'" in cold.stdout
    assert warm.stderr == cold.stderr and warm.stdout == cold.stdout
    cold, warm = _both(["--version"], tmp_path)
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout and warm.stdout.strip()
    # the child reads the run's folder, not the launcher's
    cold, warm = _both(["-n", "-s", str(REPO / "Snakefile"), "-d", "."], tmp_path)
    assert warm.returncode == cold.returncode
    assert warm.stderr.replace(str(tmp_path), "<run>") == cold.stderr.replace(
        str(tmp_path), "<run>"
    )

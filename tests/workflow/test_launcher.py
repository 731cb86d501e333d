"""The tests' warm Snakemake launcher gives what a new ``python -m snakemake`` gives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import snakemake_launcher
from workflow_helpers import REPO


def _both(
    args: list[str], cwd, module: str = "snakemake"
) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cold = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=cwd,
    )
    return cold, snakemake_launcher.run(args, env, 600, cwd, module=module)


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


def _outcome(proc: subprocess.CompletedProcess) -> tuple:
    return proc.returncode, proc.stdout, proc.stderr


def test_the_neuroflow_command_gives_what_a_new_interpreter_gives(tmp_path):
    (tmp_path / "config.yaml").write_text("dataset:\n  sources: demo\n")  # a misspelt key
    cold, warm = _both(["check-config", "--configfile", "config.yaml"], tmp_path, "neuroflow.cli")
    assert cold.returncode != 0 and "Did you mean 'source'" in cold.stdout + cold.stderr
    assert _outcome(warm) == _outcome(cold)
    cold, warm = _both(["models"], tmp_path, "neuroflow.cli")
    assert cold.returncode == 0 and cold.stdout.strip()
    assert _outcome(warm) == _outcome(cold)


@pytest.mark.parametrize("launched", [True, False])
def test_a_started_run_is_polled_killed_and_read_back(tmp_path, launched):
    """:func:`snakemake_launcher.start`, in a fork of the launcher or as a new interpreter."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if not launched:
        env[snakemake_launcher.SWITCH] = "0"
    # a workflow that stops while Snakemake reads it, without a process of its own
    (tmp_path / "Snakefile").write_text("import time\nprint('reading')\ntime.sleep(600)\n")
    proc = snakemake_launcher.start(["-n", "-s", "Snakefile"], env, tmp_path)
    assert isinstance(proc, snakemake_launcher.Started) is launched
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.5)
    proc.kill()
    assert proc.poll() == proc.returncode == -signal.SIGKILL
    assert proc.result().returncode == -signal.SIGKILL
    done = snakemake_launcher.start(["--version"], env, tmp_path)
    assert done.wait(600) == 0
    out = done.result()
    assert out.returncode == 0 and out.stdout.strip()

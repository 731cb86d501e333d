"""The tests' warm Snakemake launcher gives what a new ``python -m snakemake`` gives."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import pytest
import snakemake_launcher
from workflow_helpers import REPO

ENV = {**os.environ, "PYTHONHASHSEED": "0"}


@pytest.fixture(scope="module")
def launcher():
    """A launcher of this module's own (the process's may have started with another
    environment, and would then start every run as a new interpreter)."""
    launcher = snakemake_launcher.Launcher(ENV)
    yield launcher
    launcher.close()


def _both(
    launcher: snakemake_launcher.Launcher, args: list[str], cwd, module: str = "snakemake"
) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    cold = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
        cwd=cwd,
    )
    return cold, launcher.run(args, ENV, 600, cwd, module=module)


def test_output_and_exit_status_are_those_of_a_new_interpreter(launcher, tmp_path):
    (tmp_path / "config.yaml").write_text("dataset:\n  sources: demo\n")  # a misspelt key
    args = ["-n", "-s", str(REPO / "Snakefile"), "--configfile", "config.yaml"]
    cold, warm = _both(launcher, args, tmp_path)
    assert warm.returncode == cold.returncode == 1
    assert "Did you mean 'source'" in cold.stdout
    assert warm.stderr == cold.stderr and warm.stdout == cold.stdout
    cold, warm = _both(launcher, ["--version"], tmp_path)
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout and warm.stdout.strip()
    # the child reads the run's folder, not the launcher's
    cold, warm = _both(launcher, ["-n", "-s", str(REPO / "Snakefile"), "-d", "."], tmp_path)
    assert warm.returncode == cold.returncode
    assert warm.stderr.replace(str(tmp_path), "<run>") == cold.stderr.replace(
        str(tmp_path), "<run>"
    )


def _outcome(proc: subprocess.CompletedProcess) -> tuple:
    return proc.returncode, proc.stdout, proc.stderr


def test_the_neuroflow_command_gives_what_a_new_interpreter_gives(launcher, tmp_path):
    (tmp_path / "config.yaml").write_text("dataset:\n  sources: demo\n")  # a misspelt key
    args = ["check-config", "--configfile", "config.yaml"]
    cold, warm = _both(launcher, args, tmp_path, "neuroflow.cli")
    assert cold.returncode != 0 and "Did you mean 'source'" in cold.stdout + cold.stderr
    assert _outcome(warm) == _outcome(cold)
    cold, warm = _both(launcher, ["models"], tmp_path, "neuroflow.cli")
    assert cold.returncode == 0 and cold.stdout.strip()
    assert _outcome(warm) == _outcome(cold)


@pytest.mark.parametrize("launched", [True, False])
def test_a_started_run_is_polled_killed_and_read_back(launcher, tmp_path, launched):
    """A run of a launcher (:meth:`snakemake_launcher.Launcher.start`), or of
    :func:`snakemake_launcher.start` as a new interpreter."""
    env = dict(ENV)
    if not launched:
        env[snakemake_launcher.SWITCH] = "0"
    start = launcher.start if launched else snakemake_launcher.start
    # a workflow that stops while Snakemake reads it, without a process of its own
    (tmp_path / "Snakefile").write_text("import time\nprint('reading')\ntime.sleep(600)\n")
    proc = start(["-n", "-s", "Snakefile"], env, tmp_path)
    assert isinstance(proc, snakemake_launcher.Started) is launched
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(0.5)
    proc.kill()
    assert proc.poll() == proc.returncode == -signal.SIGKILL
    assert proc.result().returncode == -signal.SIGKILL
    done = start(["--version"], env, tmp_path)
    assert done.wait(600) == 0
    out = done.result()
    assert out.returncode == 0 and out.stdout.strip()


def test_looking_for_a_model_or_reading_a_video_leaves_the_environment_as_it_was():
    """Looking for a model sets the Hugging Face variables in its process, and importing
    OpenCV (video stimuli) prepends its library folder to ``LD_LIBRARY_PATH``; the test
    processes start with both, so that a Snakemake run started after such a test still
    has the environment of the launcher and the warm job server (else it starts cold,
    with a job server of its own)."""
    from neuroflow.features.inventory import model_inventory

    before = dict(os.environ)
    model_inventory([{"name": "minilm", "extractor": "sentence", "model": None}], hashes=False)
    with contextlib.suppress(ImportError):
        import cv2  # noqa: F401
    after = dict(os.environ)
    ignored = {"PYTEST_CURRENT_TEST", *snakemake_launcher.PER_TEST}
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= ignored, {k: (before.get(k), after.get(k)) for k in changed - ignored}


def test_building_a_job_graph_in_process_leaves_the_environment_as_it_was(tmp_path, monkeypatch):
    """Reading the Snakefile sets its run defaults (``OMP_WAIT_POLICY``) where unset, in
    the process that reads it: a test that builds a job graph in its own process (the
    config-key walk) would change the environment of every run started after it, which
    then started cold. The test processes start with them."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import DAGSettings, OutputSettings, Quietness, ResourceSettings

    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            snakefile=REPO / "Snakefile",
            workdir=tmp_path,
        )
        assert workflow.dag(DAGSettings()).workflow_api._workflow.rules  # the Snakefile ran
    after = dict(os.environ)
    ignored = {"PYTEST_CURRENT_TEST", *snakemake_launcher.PER_TEST}
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= ignored, {k: (before.get(k), after.get(k)) for k in changed - ignored}


def test_parse_cache_gives_snakemakes_translation_once_per_file_content(tmp_path):
    """A workflow file read again is not translated again unless its content or the rule
    count it starts from changed; a hit gives Snakemake's own code and line map."""
    import types

    import snakemake.api  # noqa: F401  (first: snakemake.workflow alone is a circular import)
    from snakemake.parser import parse
    from snakemake.sourcecache import LocalSourceFile

    rules = tmp_path / "rules.smk"
    rules.write_text(
        'X = 1\n\nrule a:\n    output:\n        "a.txt"\n    shell:\n        "touch {output}"\n'
    )

    def open_source(path):
        return open(path.get_path_or_uri(secret_free=True), encoding="utf-8")

    workflow = types.SimpleNamespace(sourcecache=types.SimpleNamespace(open=open_source))
    translated: list[int] = []

    def counted(path, wf, linemap, overwrite_shellcmd=None, rulecount=0):
        translated.append(rulecount)
        return parse(path, wf, linemap, overwrite_shellcmd, rulecount)

    store = snakemake_launcher._Folder(tmp_path / "parsed")
    cache = snakemake_launcher.ParseCache(counted, store)
    expected_lines: dict[int, int] = {}
    expected = parse(LocalSourceFile(str(rules)), workflow, expected_lines, None, 3)
    for _ in range(2):
        lines: dict[int, int] = {}
        assert cache(LocalSourceFile(str(rules)), workflow, lines, None, 3) == expected
        assert lines == expected_lines
    assert translated == [3] and len(store) == 1
    cache(LocalSourceFile(str(rules)), workflow, {}, None, 4)
    rules.write_text(rules.read_text().replace("X = 1", "X = 2"))
    code, _ = cache(LocalSourceFile(str(rules)), workflow, {}, None, 3)
    assert translated == [3, 4, 3] and len(store) == 3
    assert "X = 2" in code

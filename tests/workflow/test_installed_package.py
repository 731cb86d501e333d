"""A wheel of neuroflow carries the workflow: ``neuroflow run`` plans it from any folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: What a build reads: the package, its metadata and the workflow tree.
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "LICENSE",
    "src",
    "Snakefile",
    "rules",
    "scripts",
    "config",
    "envs",
    "workflow",
)
#: Files the packaged workflow must have, relative to ``neuroflow/_workflow``.
WORKFLOW_FILES = (
    "Snakefile",
    "rules/common.smk",
    "scripts/generate_demo.py",
    "config/config.yaml",
    "workflow/schemas/config.schema.yaml",
    "workflow/profiles/local/config.yaml",
    "workflow/profiles/slurm/config.yaml",
    "workflow/report/workflow.rst",
)

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A wheel built from a copy of the sources, installed into its own folder."""
    tmp = tmp_path_factory.mktemp("installed")
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "_workflow")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    pip = [sys.executable, "-m", "pip"]
    _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), "."],
        source,
        env,
    )
    (wheel,) = (tmp / "dist").glob("neuroflow-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [n for n in WORKFLOW_FILES if f"neuroflow/_workflow/{n}" not in names]
    assert not missing, f"the wheel lacks {missing}"
    site = tmp / "site"
    _run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], tmp, env)
    return site, {**env, "PYTHONPATH": str(site), "PYTHONHASHSEED": "0"}


def test_wheel_runs_the_workflow_from_any_folder(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    site, env = installed
    where = _run(
        [
            sys.executable,
            "-c",
            "import neuroflow; from neuroflow.workflow.defaults import workflow_root; "
            "print(neuroflow.__file__); print(workflow_root())",
        ],
        tmp_path,
        env,
    ).stdout.split()
    assert where == [str(site / "neuroflow" / "__init__.py"), str(site / "neuroflow" / "_workflow")]
    for name in WORKFLOW_FILES:
        assert (site / "neuroflow" / "_workflow" / name).is_file(), name

    # the demo workflow, planned from an empty folder with the shipped default config
    neuroflow = [sys.executable, "-m", "neuroflow.cli"]
    proc = _run([*neuroflow, "run", "-n", "--cores", "1"], tmp_path, env)
    out = proc.stdout + proc.stderr
    assert "This was a dry-run" in out
    assert str(site / "neuroflow" / "_workflow" / "Snakefile") in out
    for rule in ("generate_demo", "preprocess_fmri", "fit_encoding", "summarize_scores"):
        assert f"\n{rule} " in out, rule
    assert not (tmp_path / "results").exists()

    # the console script of the wheel; commands that read the config work outside a clone
    script = site / "bin" / "neuroflow"
    versions = [str(script)] if script.is_file() else neuroflow
    assert (
        "No versions on disk under results" in _run([*versions, "versions"], tmp_path, env).stdout
    )
    assert "Nothing to remove" in _run([*neuroflow, "gc", "--dry-run"], tmp_path, env).stdout

"""The conda environments for ``snakemake --use-conda``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from neuroflow.workflow.conda_envs import (
    ENV_KINDS,
    complete_env,
    conda_env_file,
    env_kind,
    neuroflow_requirement,
)

REPO = Path(__file__).resolve().parents[2]
ENV_FILES = sorted((REPO / "envs").glob("neuroflow-*.yaml"))
#: conda-forge names of PyPI distributions, where they differ.
CONDA_TO_PYPI = {"pytorch-cpu": "torch", "pytorch-gpu": "torch"}


def _declared_distributions() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    return {spec.split(">")[0].split("=")[0].split("[")[0].strip().lower() for spec in specs}


def test_env_files_cover_every_kind():
    assert [p.stem for p in ENV_FILES] == [f"neuroflow-{k}" for k in ENV_KINDS]


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_files_use_conda_forge_only(path):
    env = yaml.safe_load(path.read_text())
    assert env["channels"] == ["conda-forge"]
    names = [d for d in env["dependencies"] if isinstance(d, str)]
    # Metapackages of the `pytorch` channel that current releases no longer have.
    assert not {"cpuonly", "pytorch-cuda"} & {n.split(">")[0].split("=")[0] for n in names}
    # neuroflow itself is added by the workflow, with an absolute path.
    assert not any(isinstance(d, dict) for d in env["dependencies"])


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_packages_are_declared_dependencies(path):
    declared = _declared_distributions()
    env = yaml.safe_load(path.read_text())
    for spec in env["dependencies"]:
        name = spec.split(">")[0].split("=")[0].split("<")[0].strip()
        if name in {"python", "pip"}:
            continue
        assert CONDA_TO_PYPI.get(name, name) in declared, name


def test_env_kind_reads_the_variable():
    assert env_kind({}) == "cpu"
    assert env_kind({"NEUROFLOW_CONDA_ENV": " GPU "}) == "gpu"
    with pytest.raises(ValueError, match="NEUROFLOW_CONDA_ENV must be one of cpu, gpu"):
        env_kind({"NEUROFLOW_CONDA_ENV": "cuda"})


def test_requirement_of_a_source_tree_is_its_absolute_path(tmp_path):
    assert neuroflow_requirement(REPO, "0.1.0") == f"-e {REPO}[demo,video]"
    # A workflow shipped inside an installed package: the installed release.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert neuroflow_requirement(tmp_path, "1.2.3") == "neuroflow[demo,video]==1.2.3"


def test_complete_env_appends_to_an_existing_pip_list():
    template = {
        "name": "x",
        "channels": ["conda-forge"],
        "dependencies": ["python>=3.11", {"pip": ["pyriemann"]}],
    }
    env = complete_env(template, "-e /src[demo,video]")
    assert env["dependencies"] == [
        "python>=3.11",
        "pip",
        {"pip": ["pyriemann", "-e /src[demo,video]"]},
    ]
    assert template["dependencies"][1] == {"pip": ["pyriemann"]}  # not modified


@pytest.mark.parametrize("kind", ENV_KINDS)
def test_completed_file_resolves_from_any_folder(tmp_path, kind):
    out = conda_env_file(REPO, tmp_path / ".snakemake" / "neuroflow-envs", kind=kind)
    assert out.is_absolute() and out.name == f"neuroflow-{kind}.yaml"
    env = yaml.safe_load(out.read_text())
    pip = env["dependencies"][-1]["pip"]
    assert pip[-1].startswith("-e /")
    source = Path(pip[-1].removeprefix("-e ").split("[")[0])
    assert (source / "pyproject.toml").is_file() and (source / "Snakefile").is_file()
    # Unchanged content is not rewritten (Snakemake hashes the file).
    before = out.stat().st_mtime_ns
    os.utime(out, ns=(before - 10**9, before - 10**9))
    conda_env_file(REPO, tmp_path / ".snakemake" / "neuroflow-envs", kind=kind)
    assert out.stat().st_mtime_ns == before - 10**9


def test_missing_env_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"must hold envs/neuroflow-gpu\.yaml"):
        conda_env_file(tmp_path, tmp_path / "out", kind="gpu", version="0.1.0")


@pytest.mark.slow
@pytest.mark.skipif(
    not (shutil.which("mamba") or shutil.which("conda")),
    reason="neither conda nor mamba is installed: the environment's solve cannot be checked",
)
@pytest.mark.parametrize("kind", ENV_KINDS)
def test_conda_solves_the_environment(tmp_path, kind):
    tool = shutil.which("mamba") or shutil.which("conda")
    out = conda_env_file(REPO, tmp_path, kind=kind)
    env = yaml.safe_load(out.read_text())
    specs = [d for d in env["dependencies"] if isinstance(d, str)]
    proc = subprocess.run(
        [tool, "create", "--dry-run", "--json", "-n", "neuroflow-solve-check",
         "--override-channels", "-c", "conda-forge", *specs],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]

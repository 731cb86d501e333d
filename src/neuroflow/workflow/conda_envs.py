"""Conda environments for ``snakemake --use-conda``, completed with neuroflow itself.

``envs/neuroflow-<kind>.yaml`` list what conda-forge provides (Python, PyTorch's CPU or
CUDA build, the compiled libraries). neuroflow itself must come from pip, from the very
source the workflow runs from, but Snakemake creates every environment from a copy of its
file under ``.snakemake/conda/``, where a path relative to the original file (``-e ..``)
no longer resolves. :func:`conda_env_file` therefore writes a completed copy of the
chosen file, with the absolute path of the source tree (an editable install, so that the
environment runs the same code as the workflow's scripts) or, for a workflow that ships
inside an installed package, the installed release's requirement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "ENV_KINDS",
    "ENV_VARIABLE",
    "PIP_EXTRAS",
    "complete_env",
    "conda_env_file",
    "env_kind",
    "neuroflow_requirement",
]

#: The environment files under ``envs/``: ``neuroflow-<kind>.yaml``.
ENV_KINDS = ("cpu", "gpu")
#: Environment variable that selects the kind (default ``cpu``).
ENV_VARIABLE = "NEUROFLOW_CONDA_ENV"
#: Optional parts of neuroflow the environments install (pyproject's extras).
PIP_EXTRAS = "demo,video"


def env_kind(environ: Mapping[str, str] | None = None) -> str:
    """The environment kind that ``NEUROFLOW_CONDA_ENV`` selects.

    Parameters
    ----------
    environ : mapping | None
        The environment variables (default: ``os.environ``).

    Returns
    -------
    kind : str
        One of :data:`ENV_KINDS`; ``"cpu"`` when the variable is unset or empty.
    """
    environ = os.environ if environ is None else environ
    kind = environ.get(ENV_VARIABLE, "").strip().lower() or "cpu"
    if kind not in ENV_KINDS:
        raise ValueError(
            f"{ENV_VARIABLE} must be one of {', '.join(ENV_KINDS)}, got {kind!r} instead."
        )
    return kind


def _is_neuroflow_source(folder: Path) -> bool:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return False
    import tomllib

    with pyproject.open("rb") as handle:
        return tomllib.load(handle).get("project", {}).get("name") == "neuroflow"


def neuroflow_requirement(workflow_root: str | os.PathLike, version: str) -> str:
    """The pip requirement line that installs the neuroflow a workflow runs with.

    Parameters
    ----------
    workflow_root : path-like
        The folder that holds the ``Snakefile``.
    version : str
        The installed neuroflow's version (used when ``workflow_root`` is not a source
        tree, i.e. the workflow ships inside an installed package).

    Returns
    -------
    requirement : str
        ``-e /abs/source[demo,video]`` for a source tree, else
        ``neuroflow[demo,video]==<version>``.
    """
    root = Path(workflow_root).resolve()
    if _is_neuroflow_source(root):
        return f"-e {root}[{PIP_EXTRAS}]"
    return f"neuroflow[{PIP_EXTRAS}]=={version}"


def _package_name(spec: str) -> str:
    """``"numpy>=1.26"`` -> ``"numpy"`` (a conda match spec's package name)."""
    return re.split(r"[\s<>=!~]", spec.strip(), maxsplit=1)[0].split("::")[-1]


def complete_env(template: Mapping[str, Any], requirement: str) -> dict[str, Any]:
    """An environment file's content with neuroflow's pip entry added.

    Parameters
    ----------
    template : dict
        A parsed ``envs/neuroflow-<kind>.yaml`` (``name``, ``channels``,
        ``dependencies``; may already hold a ``pip`` list of other packages).
    requirement : str
        The pip line for neuroflow (:func:`neuroflow_requirement`).

    Returns
    -------
    env : dict
        A copy with ``requirement`` last in the ``pip`` list (and ``pip`` among the
        conda dependencies, which conda needs to run that list).
    """
    dependencies = list(template.get("dependencies") or [])
    if not isinstance(dependencies, list):
        raise ValueError(
            f"An environment's `dependencies` must be a list, got {type(dependencies).__name__} "
            "instead."
        )
    pip_lists = [d for d in dependencies if isinstance(d, Mapping) and "pip" in d]
    conda = [d for d in dependencies if not (isinstance(d, Mapping) and "pip" in d)]
    pip = [line for entry in pip_lists for line in entry["pip"]]
    if "pip" not in {_package_name(d) for d in conda if isinstance(d, str)}:
        conda.append("pip")
    env = {key: value for key, value in template.items() if key != "dependencies"}
    env["dependencies"] = [*conda, {"pip": [*pip, requirement]}]
    return env


def conda_env_file(
    workflow_root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    kind: str | None = None,
    version: str | None = None,
) -> Path:
    """Write the completed environment file the rules use, and return its absolute path.

    Parameters
    ----------
    workflow_root : path-like
        The folder that holds the ``Snakefile`` and ``envs/``.
    out_dir : path-like
        Where to write the completed copy (e.g. ``.snakemake/neuroflow-envs``).
    kind : str | None
        ``"cpu"`` or ``"gpu"``; default from ``NEUROFLOW_CONDA_ENV`` (:func:`env_kind`).
    version : str | None
        The installed neuroflow's version (default: ``neuroflow.__version__``).

    Returns
    -------
    path : Path
        ``out_dir/neuroflow-<kind>.yaml``, rewritten (atomically) only when its content
        changes, so that Snakemake's environment hash stays the same between runs.
    """
    if version is None:
        from neuroflow import __version__ as version
    kind = env_kind() if kind is None else kind
    if kind not in ENV_KINDS:
        raise ValueError(f"kind must be one of {', '.join(ENV_KINDS)}, got {kind!r} instead.")
    template_path = Path(workflow_root) / "envs" / f"neuroflow-{kind}.yaml"
    if not template_path.is_file():
        raise FileNotFoundError(
            f"The conda environment file {template_path} is missing: the workflow folder "
            f"{workflow_root} must hold envs/neuroflow-{kind}.yaml."
        )
    template = yaml.safe_load(template_path.read_text()) or {}
    env = complete_env(template, neuroflow_requirement(workflow_root, version))
    text = (
        f"# Written by neuroflow from {template_path.resolve()}; edit that file instead.\n"
        + yaml.safe_dump(env, sort_keys=False)
    )
    out = Path(out_dir).resolve() / f"neuroflow-{kind}.yaml"
    if not out.is_file() or out.read_text() != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(out)
    return out

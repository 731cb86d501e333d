"""Build hook: wheels carry the workflow inside the package, as ``neuroflow/_workflow``.

The workflow (Snakefile, rules/, scripts/, config/, envs/ and workflow/ with the config
schemas, execution profiles and report captions) lives at the top of the repository, where
``snakemake`` run in a clone finds it. Building a wheel copies it into the built package so
that ``pip install neuroflow`` gives the whole pipeline (``neuroflow run`` runs it from any
folder). Editable installs get no copy: they run the clone's own files. Everything else is
configured in ``pyproject.toml``; ``MANIFEST.in`` puts the same files in the source
distribution, so a wheel built from it carries them too.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: Files and folders of the workflow, relative to the repository and to ``_workflow``.
WORKFLOW_PATHS = (
    "Snakefile",
    "rules",
    "scripts",
    "config",
    "envs",
    "workflow/schemas",
    "workflow/profiles",
    "workflow/report",
)
IGNORED = shutil.ignore_patterns("__pycache__", "*.py[cod]", ".*")


class BuildPyWithWorkflow(build_py):
    """``build_py`` that also copies the workflow into ``<build>/neuroflow/_workflow``."""

    def run(self) -> None:
        """Build the package, then add the workflow tree to it (not for editable installs)."""
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "neuroflow" / "_workflow"
        shutil.rmtree(target, ignore_errors=True)
        for name in WORKFLOW_PATHS:
            source = ROOT / name
            if not source.exists():
                raise FileNotFoundError(
                    f"The workflow path {name} must exist to build neuroflow, got no "
                    f"{source} instead (build from a clone or the source distribution)."
                )
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, destination, ignore=IGNORED)
            else:
                shutil.copy2(source, destination)


setup(cmdclass={"build_py": BuildPyWithWorkflow})

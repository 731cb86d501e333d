"""How a user's config file combines with the default one (dry runs through ``snakemake``)."""

from __future__ import annotations

import os
import re
import shutil

import pytest
import snakemake_launcher
from workflow_helpers import DEFAULT_SWEEP_MODELS, REPO

pytestmark = [pytest.mark.workflow]


def _planned_models(workdir, *args: str) -> set[str]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    args = ["-n", "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args]
    proc = snakemake_launcher.run(args, env, 600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(re.findall(r"model=([\w.\-]+)", proc.stdout + proc.stderr))


def test_a_user_file_extends_the_default_models_unless_it_replaces_the_config(tmp_path):
    # The Snakefile's `configfile: config/config.yaml` is read from the working folder,
    # as when snakemake runs in a clone of the repository.
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    mine = tmp_path / "mine.yaml"
    mine.write_text("encoding:\n  models:\n    mine: {feature_spaces: [minilm]}\n")
    merged = _planned_models(tmp_path, "--configfile", str(mine))
    assert merged == {"visual", "semantic", "joint", "mine", *DEFAULT_SWEEP_MODELS}
    replaced = _planned_models(tmp_path, "--configfile", str(mine), "--replace-workflow-config")
    assert replaced == {"mine"}

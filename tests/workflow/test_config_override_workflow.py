"""``snakemake --config`` overrides nested in a mapping are typed before validation."""

from __future__ import annotations

import pytest
import yaml
from workflow_helpers import TINY_CONFIG, snakemake

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY_CONFIG))
    return tmp_path


def test_documented_override_is_accepted(workdir):
    """The override the recipes show parses (its lags arrive as the strings "1", "2", "3")."""
    proc = snakemake(
        workdir,
        "--list-rules",
        "--config",
        'encoding={"delays": {"method": "fir", "lags": [1, 2]}}',
    )
    assert "fit_encoding" in proc.stdout


def test_unreadable_override_names_the_entry(workdir):
    proc = snakemake(
        workdir, "--list-rules", "--config", 'encoding={"alphas": {"start": "[1, 2"}}', check=False
    )
    assert proc.returncode != 0
    assert "'encoding.alphas.start' in --config must be a number written in YAML" in proc.stderr

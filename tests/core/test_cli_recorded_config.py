"""``neuroflow gc``, ``versions`` and ``check-config`` build the config of the recorded runs.

A run of ``snakemake -s <repo>/Snakefile -d <folder> --configfile x.yaml`` from a folder
without ``config/config.yaml`` reads ``x.yaml`` alone; ``neuroflow run`` (and the
commands given the same arguments without a record) put the shipped default config
under it. The fixture records such a run by hand on the demo dataset.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuroflow.cli import main
from neuroflow.workflow.plan import WorkflowPlan
from neuroflow.workflow.runs import run_record, snakemake_config, write_run_record

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
#: A model of its own: on top of the shipped config, the shipped models come too.
OVERLAY = "demo: {n_subjects: 1}\nencoding:\n  models:\n    mine: {feature_spaces: [minilm]}\n"

pytestmark = pytest.mark.slow


def _names(plan: WorkflowPlan) -> set[str]:
    return {p.relative_to(plan.results).as_posix() for p in plan.all_version_dirs()}


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The versions of a recorded run without config/config.yaml, and the shipped-base ones."""
    monkeypatch.chdir(tmp_path)
    Path("x.yaml").write_text(OVERLAY)
    none = Path(os.devnull) / "none"
    run = WorkflowPlan(snakemake_config(["x.yaml"], base=none, schema=SCHEMA))
    shipped = WorkflowPlan(
        snakemake_config(["x.yaml"], base=REPO / "config" / "config.yaml", schema=SCHEMA)
    )
    for folder in run.all_version_dirs():
        folder.mkdir(parents=True)
        (folder / "data.bin").write_bytes(b"\0" * 100)
    record = run_record(
        run.results, run.all_version_dirs(), ["x.yaml"], [], workflow_configfiles=[]
    )
    write_run_record(run.results, record)
    return {"run": _names(run), "shipped": _names(shipped)}


def _main(capsys: pytest.CaptureFixture, *args: str) -> str:
    assert main([*args, "--schema", str(SCHEMA)]) == 0
    return capsys.readouterr().out


def _on_disk() -> set[str]:
    return {
        f"{stage.name}/{folder.name}"
        for stage in Path("results").iterdir()
        if not stage.name.startswith(".")
        for folder in stage.iterdir()
    }


def test_commands_use_the_config_the_run_was_built_with(recorded, capsys) -> None:
    # the shipped config under x.yaml selects another summary than the run wrote
    summary = {name for name in recorded["run"] if name.startswith("summary/")}
    assert summary and not summary & recorded["shipped"]
    args = ("--configfile", "x.yaml")
    out = _main(capsys, "gc", "--dry-run", "--keep-runs", "0", "--keep-days", "0", *args)
    first, *rest = out.splitlines()
    assert first.startswith("config: as the run of ") and "--configfile " in first
    assert first.endswith("(without config/config.yaml: its working folder had none)")
    assert rest == ["Nothing to remove.", "Would free 0.0 kB in total."]
    out = _main(capsys, "versions", *args)
    assert out.startswith("config: as the run of ")
    rows = [line for line in out.splitlines() if line[:2] in (" *", "  ")]
    assert len(rows) == len(recorded["run"]) and all(row.startswith(" *") for row in rows)
    assert out.rstrip().endswith("(* = selected by that config)")
    out = _main(capsys, "check-config", *args)
    assert out.startswith("config: as the run of ") and "encoding models: mine\n" in out
    Path("other.yaml").write_text(OVERLAY)
    out = _main(capsys, "versions", "summary", "--configfile", "other.yaml")
    assert out.startswith("config: built from these arguments as `neuroflow run` builds it")
    assert not any(line.startswith(" *") for line in out.splitlines())
    # built from the arguments alone (the shipped config under x.yaml), the run's
    # versions are not selected, but the newest run of their config selects them: kept
    out = _main(
        capsys,
        "gc",
        "--keep-runs",
        "0",
        "--keep-days",
        "0",
        "--include-recent",
        "--yes",
        "--no-recorded-config",
        *args,
    )
    assert not out.startswith("config:") and "removing" not in out
    assert "kept, selected by the newest run of its config, the run of " in out
    assert f"  results/{min(summary)} (" in out
    assert _on_disk() == recorded["run"]


def test_versions_the_newest_run_no_longer_selects_can_go(recorded, capsys) -> None:
    # x.yaml changed since the run: its config now selects other versions, so the
    # run's count only as a recent run's (none with --keep-runs 0 --keep-days 0)
    Path("x.yaml").write_text(OVERLAY.replace("n_subjects: 1", "n_subjects: 2"))
    out = _main(capsys, "gc", "--keep-runs", "0", "--keep-days", "0")
    assert out.startswith("config: as the run of ") and "kept" not in out
    assert f"removing results/{min(recorded['run'])} (" in out
    assert _on_disk() == set()

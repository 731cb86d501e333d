"""Run records, the results lock, and ``neuroflow gc`` on a hand-made results folder."""

from __future__ import annotations

import io
import json
import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from lock_helpers import hold_lock, stop
from workflow_helpers import REPO

from neuroflow.cli import main
from neuroflow.config import ConfigError
from neuroflow.workflow.lock import (
    ResultsLockedError,
    acquire_lock,
    hold_results_lock,
    lock_path,
    locked_message,
    probe_lock,
    read_holder,
    try_lock,
)
from neuroflow.workflow.plan import WorkflowPlan
from neuroflow.workflow.runs import (
    RunRecord,
    describe_run,
    read_run_records,
    recent_runs,
    run_record,
    runs_dir,
    snakemake_config,
    versions_of_runs,
    write_run_record,
)

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


def _record(hours_ago: float, *versions: str, pid: int = 1) -> RunRecord:
    return RunRecord(
        time=NOW - timedelta(hours=hours_ago), host="node", pid=pid, cwd="/w", versions=versions
    )


# --------------------------------------------------------------------------- run records
def test_run_record_round_trip(tmp_path: Path) -> None:
    results = tmp_path / "results"
    record = run_record(
        results,
        [results / "encoding" / "visual-0123456789", results / "demo" / "abcdef0123"],
        [tmp_path / "overlay.yaml"],
        ["results_dir=results", "demo={seed: 3}"],
        now=NOW,
    )
    assert record.versions == ("demo/abcdef0123", "encoding/visual-0123456789")
    assert record.pid == os.getpid() and record.cwd == os.getcwd() and record.host
    assert record.configfiles == (str(tmp_path / "overlay.yaml"),)
    path = write_run_record(results, record)
    assert path.parent == runs_dir(results) == results / ".neuroflow" / "runs"
    assert path.name == f"20260131T120000.000000Z-{os.getpid()}.json"
    assert json.loads(path.read_text())["time"] == "2026-01-31T12:00:00+00:00"
    (read,), unreadable = read_run_records(results)
    assert read == record and read.path == path and unreadable == []
    text = describe_run(read)
    assert "2026-01-31 12:00:00 UTC" in text and record.host in text
    assert "--configfile " + str(tmp_path / "overlay.yaml") in text
    assert "--config results_dir=results demo={seed: 3}" in text


def test_run_record_rejects_folders_outside_results(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must lie inside the results folder"):
        run_record(tmp_path / "results", [tmp_path / "elsewhere" / "x"])


def test_records_are_read_newest_first_and_bad_ones_reported(tmp_path: Path) -> None:
    for hours in (5, 1, 30):
        write_run_record(tmp_path, _record(hours, f"encoding/m-{hours:010d}", pid=hours))
    folder = runs_dir(tmp_path)
    (folder / "broken.json").write_text("{not json")
    (folder / "partial.json").write_text(json.dumps({"time": NOW.isoformat()}))
    records, unreadable = read_run_records(tmp_path)
    assert [r.pid for r in records] == [1, 5, 30]
    assert sorted(p.name for p in unreadable) == ["broken.json", "partial.json"]
    with pytest.raises(ValueError, match="must have time, host, pid, cwd"):
        RunRecord.from_dict({"time": NOW.isoformat(), "host": "h", "pid": 1, "cwd": "/"})


def test_recent_runs_are_the_last_n_and_those_of_the_last_days() -> None:
    records = [_record(h, pid=int(h)) for h in (1, 30, 50, 24 * 10, 24 * 20)]
    recent = recent_runs(records, keep_runs=2, keep_days=3, now=NOW)
    assert [r.pid for r in recent] == [1, 30, 50]  # the last 2, and the third within 3 days
    recent = recent_runs(records, keep_runs=4, keep_days=0, now=NOW)
    assert [r.pid for r in recent] == [1, 30, 50, 240]
    assert recent_runs(records, keep_runs=0, keep_days=0, now=NOW) == []
    with pytest.raises(ValueError, match="`keep_runs` must be >= 0, got -1 instead"):
        recent_runs(records, keep_runs=-1, keep_days=1)
    with pytest.raises(ValueError, match=r"`keep_days` must be >= 0, got -0\.5 instead"):
        recent_runs(records, keep_runs=1, keep_days=-0.5)


def test_each_version_names_the_newest_run_that_used_it() -> None:
    old = _record(10, "a/1", "b/1", pid=1)
    new = _record(1, "b/1", "c/1", pid=2)
    by_version = versions_of_runs([new, old])
    assert {k: r.pid for k, r in by_version.items()} == {"a/1": 1, "b/1": 2, "c/1": 2}


# --------------------------------------------------------------------------- config
def test_config_is_merged_like_snakemake(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("config").mkdir()
    Path("config/config.yaml").write_text("results_dir: base\ndemo: {seed: 1, n_subjects: 1}\n")
    Path("a.yaml").write_text("demo: {seed: 2}\nresults_dir: from_a\n")
    Path("b.json").write_text(json.dumps({"demo": {"image_size": 40}}))
    config = snakemake_config(
        ["a.yaml", "b.json"], ["results_dir=cli"], base="config/config.yaml", schema=SCHEMA
    )
    assert config["results_dir"] == "cli"
    assert {k: config["demo"][k] for k in ("seed", "n_subjects", "image_size")} == {
        "seed": 2,
        "n_subjects": 1,
        "image_size": 40,
    }
    assert config["encoding"]["models"]  # schema defaults filled in
    assert list(config) == sorted(config)  # sorted, as the Snakefile sorts
    # the base may be missing when --configfile files are given, as in Snakemake
    Path("config/config.yaml").unlink()
    assert (
        snakemake_config(["a.yaml"], base="config/config.yaml", schema=SCHEMA)["demo"]["seed"] == 2
    )
    with pytest.raises(ConfigError, match=r"config/config\.yaml must exist when no --configfile"):
        snakemake_config(base="config/config.yaml", schema=SCHEMA)
    with pytest.raises(ConfigError, match=r"Config files must exist, got 'missing\.yaml'"):
        snakemake_config(["missing.yaml"], base="config/config.yaml", schema=SCHEMA)
    with pytest.raises(ConfigError, match="name=value"):
        snakemake_config(["a.yaml"], ["results_dir"], base="config/config.yaml", schema=SCHEMA)
    with pytest.raises(ConfigError, match=r"Unknown key 'demo\.sed'"):
        snakemake_config(["a.yaml"], ["demo={sed: 1}"], base="x.yaml", schema=SCHEMA)


# --------------------------------------------------------------------------- lock
def test_lock_records_its_holder_and_is_released(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert probe_lock(results) is None and not results.exists()  # probing creates nothing
    lock = try_lock(results, command="a test")
    assert lock is not None
    holder = json.loads(lock_path(results).read_text())
    assert holder["pid"] == os.getpid() and holder["command"] == "a test"
    assert {"host", "cwd", "started"} <= set(holder)
    lock.release()
    assert lock_path(results).read_text() == ""
    again = try_lock(results)
    assert again is not None
    again.release()


def test_hold_results_lock_keeps_one_lock_per_folder(tmp_path: Path) -> None:
    assert hold_results_lock(tmp_path / "off", enabled=False) is None
    assert not (tmp_path / "off").exists()
    first = hold_results_lock(tmp_path / "on")
    try:
        assert hold_results_lock(tmp_path / "on") is first
    finally:
        first.release()
    assert first.file.closed


def test_a_lock_held_by_another_process_blocks_until_it_is_killed(tmp_path: Path) -> None:
    results = tmp_path / "results"
    holder = hold_lock(results, cwd=tmp_path)
    try:
        assert try_lock(results) is None
        assert probe_lock(results)["pid"] == holder.pid
        with pytest.raises(ResultsLockedError, match=rf"pid {holder.pid}, working folder") as err:
            acquire_lock(results)
        assert err.value.holder["command"] == "test holder"
        message = str(err.value)
        assert str(results.resolve()) in message and str(tmp_path) in message
        assert "Wait for that run to finish" in message and "results_dir" in message
    finally:
        stop(holder)
    assert holder.returncode == -signal.SIGKILL
    # the kernel released the lock of the killed process
    assert probe_lock(results) is None
    lock = acquire_lock(results)
    lock.release()


def test_locked_message_without_a_holder_record(tmp_path: Path) -> None:
    message = locked_message(tmp_path, {})
    assert "pid unknown" in message and str(tmp_path.resolve()) in message
    assert read_holder(tmp_path / "nowhere") == {}


# --------------------------------------------------------------------------- gc
@pytest.fixture
def demo_results(tmp_path: Path, monkeypatch) -> dict[str, Path]:
    """A results folder of the demo config: its versions, an old one, a recent run's."""
    monkeypatch.chdir(tmp_path)
    Path("config").mkdir()
    Path("config/config.yaml").write_text("demo: {n_subjects: 1}\n")
    plan = WorkflowPlan(snakemake_config(base="config/config.yaml", schema=SCHEMA))
    results = plan.results
    folders = {
        "old": results / "encoding" / "visual-0000000000",
        "recent": results / "encoding" / "visual-1111111111",
        "recent_demo": results / "demo" / "2222222222",
        "selected": plan.stage_dir("encoding", "visual"),
    }
    for folder in [*folders.values(), *plan.all_version_dirs()]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "data.bin").write_bytes(b"\0" * 1000)
    record = run_record(results, [folders["recent"], folders["recent_demo"]])
    write_run_record(results, record)
    return folders


def _gc(capsys, *args: str) -> str:
    assert main(["gc", "--schema", str(SCHEMA), *args]) == 0
    return capsys.readouterr().out


def test_gc_keeps_the_versions_of_recent_runs(demo_results, capsys, monkeypatch) -> None:
    out = _gc(capsys, "--dry-run")
    assert f"would remove {demo_results['old']} (1.0 kB)" in out
    assert "kept, used by the run of" in out
    assert f"  {demo_results['recent']} (1.0 kB)" in out
    assert "Would free 1.0 kB in total." in out
    assert all(p.exists() for p in demo_results.values())

    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    out = _gc(capsys, "--include-recent")
    assert "Kept the versions of recent runs." in out and "Freed 1.0 kB in total." in out
    assert not demo_results["old"].exists() and demo_results["recent"].exists()

    out = _gc(capsys, "--include-recent", "--yes")
    assert f"removing {demo_results['recent']}" in out
    assert not demo_results["recent"].exists()
    # the demo dataset of a recent run is never removed
    assert demo_results["recent_demo"].exists() and "never removed" in out
    assert demo_results["selected"].exists()


def test_gc_removes_versions_of_runs_that_are_no_longer_recent(demo_results, capsys) -> None:
    out = _gc(capsys, "--keep-runs", "0", "--keep-days", "0")
    assert "kept" not in out and "Freed 3.0 kB in total." in out
    assert not any(demo_results[k].exists() for k in ("old", "recent", "recent_demo"))
    assert demo_results["selected"].exists()
    assert (Path("results") / ".neuroflow" / "runs").is_dir()  # no stage, never removed
    assert _gc(capsys).splitlines()[-2:] == ["Nothing to remove.", "Freed 0.0 kB in total."]


def test_gc_leaves_interrupted_writes_alone_while_a_run_holds_the_lock(
    demo_results, capsys, tmp_path
) -> None:
    partial = demo_results["selected"] / ".x.zarr.partial-0000"
    partial.mkdir()
    holder = hold_lock(Path("results"), cwd=tmp_path)
    try:
        for args in (("--dry-run",), ()):
            out = _gc(capsys, *args)
            assert f"left alone {partial}" in out and f"pid {holder.pid}" in out
            assert partial.exists()
        assert not demo_results["old"].exists()  # the rest is collected as usual
    finally:
        stop(holder)
    out = _gc(capsys)
    assert f"removing {partial}" in out and not partial.exists()

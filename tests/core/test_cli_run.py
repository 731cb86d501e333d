"""``neuroflow run``: the snakemake command line it builds, and where the workflow is."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuroflow.cli import main, run
from neuroflow.cli.run import snakemake_run_args
from neuroflow.workflow import defaults

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workflow tree with the files ``neuroflow run`` points at."""
    root = tmp_path / "workflow_root"
    for name in ("workflow/profiles/local", "workflow/profiles/slurm", "config"):
        (root / name).mkdir(parents=True)
    (root / "Snakefile").write_text("")
    (root / "config" / "config.yaml").write_text("results_dir: results\n")
    return root.resolve()


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working folder, the current one."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def test_defaults_snakefile_profile_and_config(root: Path, work: Path) -> None:
    args, files = snakemake_run_args(["--cores", "2", "-n"], root)
    assert args == [
        "-s",
        str(root / "Snakefile"),
        "--workflow-profile",
        str(root / "workflow" / "profiles" / "local"),
        "--cores",
        "2",
        "-n",
        "--configfile",
        str(root / "config" / "config.yaml"),
    ]
    assert files == []
    # a leading "--" only separates neuroflow's arguments from snakemake's
    assert snakemake_run_args(["--", "--cores", "2", "-n"], root) == (args, files)


def test_config_files_in_order_after_the_default(root: Path, work: Path) -> None:
    argv = [
        "--config",
        "a.yaml",
        "results_dir=out",
        "--cores",
        "1",
        "--configfile",
        "b.yaml",
        "c.yaml",
        "-C",
        "demo={seed: 3}",
        "--configfile=d.yaml",
        "all",
        "--report",
        "report.html",
    ]
    args, files = snakemake_run_args(argv, root)
    assert files == ["a.yaml", "b.yaml", "c.yaml", "d.yaml"]
    # one --configfile and one --config list: snakemake keeps only the last of each
    assert args.count("--configfile") == 1 and args.count("--config") == 1
    assert args[4:] == [
        "--cores",
        "1",
        "all",
        "--report",
        "report.html",
        "--configfile",
        str(root / "config" / "config.yaml"),
        *files,
        "--config",
        "results_dir=out",
        "demo={seed: 3}",
    ]
    # a file whose name holds "=" is still a file
    (work / "x=1.yaml").write_text("{}\n")
    _, files = snakemake_run_args(["--config", "x=1.yaml"], root)
    assert files == ["x=1.yaml"]


def test_working_folder_config_replaces_the_shipped_default(root: Path, work: Path) -> None:
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text("{}\n")
    args, _ = snakemake_run_args(["-n"], root)
    assert "--configfile" not in args  # the Snakefile's configfile: reads it
    args, _ = snakemake_run_args(["-n", "--config", "mine.yaml"], root)
    assert args[-2:] == ["--configfile", "mine.yaml"]
    # -d: the config folder of that directory counts
    other = work / "other"
    other.mkdir()
    args, _ = snakemake_run_args(["-n", "-d", str(other)], root)
    assert "--configfile" in args and args[args.index("-d") + 1] == str(other)


def test_replace_workflow_config_leaves_out_the_default(root: Path, work: Path) -> None:
    args, _ = snakemake_run_args(["--replace-workflow-config", "--config", "m.yaml"], root)
    assert args[-3:] == ["--replace-workflow-config", "--configfile", "m.yaml"]


def test_user_profile_replaces_the_local_one(root: Path, work: Path) -> None:
    args, _ = snakemake_run_args(["--profile", "mycluster", "-n"], root)
    assert "--workflow-profile" not in args
    assert args[2:5] == ["--profile", "mycluster", "-n"]
    # a profile path of the workflow tree is found from any folder
    args, _ = snakemake_run_args(["--workflow-profile", "workflow/profiles/slurm"], root)
    assert args[2:4] == ["--workflow-profile", str(root / "workflow" / "profiles" / "slurm")]
    args, _ = snakemake_run_args(["--profile=workflow/profiles/slurm"], root)
    assert args[2] == f"--profile={root / 'workflow' / 'profiles' / 'slurm'}"
    # ... unless the working folder has it
    (work / "workflow" / "profiles" / "slurm").mkdir(parents=True)
    args, _ = snakemake_run_args(["--profile", "workflow/profiles/slurm"], root)
    assert args[2:4] == ["--profile", "workflow/profiles/slurm"]


def test_own_snakefile_passes_through(root: Path, work: Path) -> None:
    args, _ = snakemake_run_args(["-s", "Other.smk", "-n"], root)
    assert args == [
        "--workflow-profile",
        str(root / "workflow" / "profiles" / "local"),
        "-s",
        "Other.smk",
        "-n",
    ]


def test_run_execs_snakemake_on_the_workflow(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    calls: list[list[str]] = []

    def fake_execv(path: str, command: list[str]) -> None:
        calls.append(command)

    monkeypatch.setattr(run.os, "execv", fake_execv)
    mine = work / "my.yaml"
    mine.write_text("demo: {seed: 3}\n")
    assert main(["run", "--config", "my.yaml", "--cores", "2", "-n"]) == 0
    (command,) = calls
    root = defaults.workflow_root()
    assert command[command.index("-s") + 1] == str(root / "Snakefile")
    assert command[-3:] == ["--configfile", str(root / "config" / "config.yaml"), "my.yaml"]
    # a missing file is named before snakemake starts
    assert main(["run", "--config", "none.yaml"]) == 2
    assert "Config file none.yaml must be an existing file" in capsys.readouterr().err
    assert len(calls) == 1


def test_workflow_root_of_a_clone_and_the_default_config(work: Path) -> None:
    assert defaults.workflow_root() == REPO
    assert defaults.SCHEMA == REPO / "workflow" / "schemas" / "config.schema.yaml"
    assert defaults.default_config() == REPO / "config" / "config.yaml"
    assert defaults.default_config(REPO) == REPO / "config" / "config.yaml"
    (work / "config").mkdir()
    (work / "config" / "config.yaml").write_text("{}\n")
    assert defaults.default_config() == Path("config") / "config.yaml"


def test_missing_workflow_tree_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, work: Path, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(defaults, "REPOSITORY", tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match=r"must be installed with the package.*pip"):
        defaults.workflow_root()
    assert main(["run", "-n"]) == 2
    assert "pip install --force-reinstall neuroflow" in capsys.readouterr().err


@pytest.mark.slow
def test_commands_outside_a_clone_read_the_shipped_config(
    work: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["check-config"]) == 0
    assert "results: results" in capsys.readouterr().out
    (work / "mine.yaml").write_text("results_dir: elsewhere\n")
    assert main(["check-config", "--config", "mine.yaml"]) == 0
    assert "results: elsewhere" in capsys.readouterr().out
    assert main(["check-config", "--config", "mine.yaml", "results_dir=other"]) == 0
    assert "results: other" in capsys.readouterr().out
    assert main(["versions"]) == 0
    assert "No versions on disk under results" in capsys.readouterr().out
    assert main(["gc", "--dry-run"]) == 0
    assert "Nothing to remove" in capsys.readouterr().out

"""``neuroflow gc`` after a run with overlays, and the results lock, through ``snakemake``.

The fixture is a small EEG-only BIDS dataset (2 subjects x 2 runs, 40 events each) run
with a base config (``config/config.yaml`` in the working folder, the Snakefile's
``configfile:``), an overlay (``--configfile config.yaml``) and a ``--config`` override,
so that the base config alone selects none of the versions the run wrote. A copy of it
then runs without the base config (``snakemake -d``), as a folder without
``config/config.yaml`` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import snakemake_launcher
from dataset_shapes import make_eeg_only
from lock_helpers import hold_lock, stop
from workflow_helpers import REPO, snakemake, write_config

from neuroflow.workflow.runs import read_run_records, runs_dir

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
OVERRIDE = "decoding={cv_groups: epoch}"
#: The run's config arguments, as ``neuroflow gc`` / ``versions`` take them.
RUN_ARGS = ("--configfile", "config.yaml", "--config", OVERRIDE)


def _neuroflow(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m neuroflow.cli ARGS --schema SCHEMA`` in ``workdir`` (started warm)."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    args = (*args, "--schema", str(SCHEMA))
    proc = snakemake_launcher.run(list(args), env, 600, workdir, module="neuroflow.cli")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _version_folders(results: Path) -> set[str]:
    return {
        f"{stage.name}/{folder.name}"
        for stage in results.iterdir()
        if stage.is_dir() and not stage.name.startswith(".")
        for folder in stage.iterdir()
        if folder.is_dir()
    }


@pytest.fixture(scope="module")
def overlay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gc_overlay")
    make_eeg_only(root / "bids", seed=0, n_events=40)
    work = root / "run"
    base = {
        "dataset": {"source": "bids", "bids_root": str(root / "bids")},
        "decoding": {"classification": {"n_permutations": 4, "generalization": False}},
    }
    (work / "config").mkdir(parents=True)
    write_config(work / "config" / "config.yaml", base)
    # the snakemake() helper passes <work>/config.yaml as --configfile
    write_config(work / "config.yaml", {"preprocess_eeg": {"h_freq": 30.0}})
    snakemake(work, "--cores", "2", "--config", OVERRIDE)
    return work


@pytest.fixture
def run_copy(overlay_run: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "run"
    shutil.copytree(overlay_run, dest, symlinks=True)
    return dest


def test_gc_keeps_what_a_run_with_overlays_produced(overlay_run: Path, run_copy: Path) -> None:
    results = run_copy / "results"
    produced = _version_folders(results)
    assert {name.split("/")[0] for name in produced} == {
        "preprocess_eeg",
        "qc_eeg",
        "decoding",
        "decoding_cross_subject",
        "summary",
    }
    (record,), _ = read_run_records(results)
    assert record.configfiles == (str(overlay_run / "config.yaml"),)
    assert record.config_args == (OVERRIDE,)
    assert produced <= set(record.versions)

    # without config arguments gc builds the config of the recorded run, and says so
    dry = _neuroflow(run_copy, "gc", "--dry-run").stdout.splitlines()
    assert dry[0].startswith("config: as the run of ") and f"--config {OVERRIDE}" in dry[0]
    assert dry[0].endswith(f"(on top of {overlay_run / 'config' / 'config.yaml'})")
    assert dry[1:] == ["Nothing to remove.", "Would free 0.0 kB in total."]
    # from config/config.yaml alone, which selects none of them, they are kept all the
    # same (the newest run of their config selects them) and listed
    dry = _neuroflow(run_copy, "gc", "--dry-run", "--no-recorded-config").stdout
    assert "would remove" not in dry and "Nothing to remove." in dry
    assert "kept, selected by the newest run of its config" in dry
    assert f"--config {OVERRIDE}" in dry
    for name in produced:
        assert f"  results/{name} (" in dry
    real = _neuroflow(run_copy, "gc", "--no-recorded-config", "--include-recent", "--yes").stdout
    assert "removing" not in real
    assert _version_folders(results) == produced

    # with the run's own arguments gc selects exactly what the run wrote
    same = _neuroflow(run_copy, "gc", "--dry-run", *RUN_ARGS).stdout.splitlines()
    assert same[0].startswith("config: as the run of ")
    assert same[1:] == ["Nothing to remove.", "Would free 0.0 kB in total."]
    listed = _neuroflow(run_copy, "versions", *RUN_ARGS).stdout
    rows = [line for line in listed.splitlines() if line.startswith("  ") or line[:2] == " *"]
    assert len(rows) == len(produced) and all(row.startswith(" *") for row in rows)


def test_gc_keeps_the_summary_of_a_run_without_a_working_folder_config(
    overlay_run: Path, run_copy: Path
) -> None:
    """``snakemake -s <repo>/Snakefile -d <folder> --configfile X`` from a folder without
    config/config.yaml reads X alone; `neuroflow run` would put the shipped default config
    under X, which adds the shipped encoding models to X's own and so selects another
    summary."""
    results = run_copy / "results"
    shutil.rmtree(runs_dir(results))
    (run_copy / "config" / "config.yaml").unlink()
    config = {
        "dataset": {"source": "bids", "bids_root": str(overlay_run.parent / "bids")},
        "decoding": {"classification": {"n_permutations": 4, "generalization": False}},
        "preprocess_eeg": {"h_freq": 30.0},
        "encoding": {"models": {"mine": {"feature_spaces": ["image_statistics"]}}},
    }
    write_config(run_copy / "config.yaml", config)
    before = _version_folders(results)
    snakemake(run_copy, "--cores", "2", "--config", OVERRIDE)  # the summary alone is new
    (record,), _ = read_run_records(results)
    assert record.workflow_configfiles == ()
    assert record.configfiles == (str(run_copy / "config.yaml"),)
    (summary,) = [name for name in record.versions if name.startswith("summary/")]
    assert _version_folders(results) - before == {summary}
    (old,) = [name for name in before if name.startswith("summary/")]

    plain = _neuroflow(run_copy, "versions", "summary", "--no-recorded-config", *RUN_ARGS)
    assert not any(line.startswith(" *") for line in plain.stdout.splitlines())
    listed = _neuroflow(run_copy, "versions", "summary", *RUN_ARGS).stdout.splitlines()
    assert listed[0].startswith("config: as the run of ") and "--configfile " in listed[0]
    assert listed[0].endswith("(without config/config.yaml: its working folder had none)")
    assert any(line.startswith(f" * {summary.split('/')[1]}") for line in listed)
    dry = _neuroflow(run_copy, "gc", "--dry-run", "--keep-runs", "0", *RUN_ARGS).stdout
    assert f"would remove results/{old} (" in dry and summary not in dry
    everything = ("--keep-runs", "0", "--keep-days", "0", "--include-recent", "--yes")
    real = _neuroflow(run_copy, "gc", *everything).stdout  # the recorded run's config
    assert f"removing results/{old} (" in real and summary not in real
    assert _version_folders(results) == before - {old} | {summary}
    # a config that selects another summary: the newest run of this one still selects it
    other = _neuroflow(run_copy, "gc", *everything, "--no-recorded-config", *RUN_ARGS).stdout
    assert f"kept, selected by the newest run of its config, the run of {record.time:%Y}" in (other)
    assert f"  results/{summary} (" in other and (results / summary).is_dir()


def test_a_second_run_on_locked_results_stops_and_gc_spares_partials(run_copy: Path) -> None:
    results = run_copy / "results"
    (decoding,) = (results / "decoding").iterdir()
    partial = decoding / ".decoding_eeg.zarr.partial-0000"
    partial.mkdir()
    n_records = len(read_run_records(results)[0])
    rerun = ("--cores", "2", "--config", OVERRIDE, "--forcerun", "summarize_scores")
    holder = hold_lock(results, cwd=run_copy.parent)
    try:
        proc = snakemake(run_copy, *rerun, check=False)
        text = proc.stdout + proc.stderr
        assert proc.returncode != 0
        assert f"The results folder {results.resolve()} is in use by another run" in text
        assert f"pid {holder.pid}, working folder {run_copy.parent}" in text
        assert "Wait for that run to finish" in text and "--nolock" in text
        assert "Finished jobid" not in text
        assert len(read_run_records(results)[0]) == n_records  # stopped before its record

        gc = _neuroflow(run_copy, "gc", *RUN_ARGS).stdout
        assert f"left alone {partial.relative_to(run_copy)}" in gc and partial.exists()

        # --nolock: runs writing different versions side by side on purpose
        snakemake(run_copy, *rerun, "--nolock")
        assert len(read_run_records(results)[0]) == n_records + 1
    finally:
        stop(holder)
    gc = _neuroflow(run_copy, "gc", *RUN_ARGS).stdout
    assert f"removing {partial.relative_to(run_copy)}" in gc and not partial.exists()

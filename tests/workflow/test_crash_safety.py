"""Crash safety, measured: runs killed with SIGKILL mid-write, then resumed.

The tiny demo workflow is started again and again and killed with SIGKILL (the Snakemake
process, whose jobs, forks of the test process's warm job server, die as its connections
close; a run started as a new interpreter: its whole process group) as soon as a store
that was not yet interrupted starts being written, at least ten times over the stages.
After each kill Snakemake's own lock is removed with ``--unlock`` (as after any crash)
and the run restarts with ``--rerun-incomplete``.
The finished results must equal those of the uninterrupted run, no store may have
consumed an interrupted write, and every store must match its manifest.
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import numpy as np
import pytest
import snakemake_launcher
import xarray as xr
from workflow_helpers import REPO, TINY_CONFIG, with_warm_server, write_config

from neuroflow.artifacts import PARTIAL_MARKER, find_stores, open_dataset, read_provenance
from neuroflow.manifests import verify_store

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

#: SIGKILLs to deliver, each while a different store is being written.
N_KILLS = 10
#: Safety net for one attempt (a whole tiny run takes about a minute on 2 cores).
ATTEMPT_TIMEOUT_S = 1200


def _arguments(workdir: Path, *args: str) -> list[str]:
    """Snakemake's arguments for one attempt (or ``args``, e.g. ``--unlock``)."""
    return [
        "--cores",
        "2",
        "--rerun-incomplete",
        *args,
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
    ]


def _scan(results: Path) -> tuple[int, set[str]]:
    """Stores committed so far, and final names (relative to ``results``) of the writes
    in progress.

    Walks the folder tree without entering stores (the run renames and deletes folders
    while this looks; os.walk ignores what vanished).
    """
    committed, writing = 0, set()
    for parent, dirs, _ in os.walk(results):
        for name in dirs:
            if PARTIAL_MARKER in name:  # ".NAME.partial-XXXX" -> NAME
                final = name[1:].split(PARTIAL_MARKER)[0]
                writing.add(str((Path(parent) / final).relative_to(results)))
            elif name.endswith(".zarr"):
                committed += 1
        dirs[:] = [d for d in dirs if not (d.endswith(".zarr") or d.startswith("."))]
    return committed, writing


def _unlock(workdir: Path) -> None:
    """Remove Snakemake's own lock, left by the kill, as a user does after a crash.

    (neuroflow's lock on the results folder is released by the kernel.)
    """
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = snakemake_launcher.run(_arguments(workdir, "--unlock"), env, ATTEMPT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _run_until_a_new_write(workdir: Path, interrupted: set[str], after: int) -> str | None:
    """Start the workflow; SIGKILL it while a store not in ``interrupted`` is written,
    once at least ``after`` stores have been committed.

    Returns the store interrupted, or None when the run finished first.
    """
    # the run's jobs are forks of the test process's shared warm server: they die when
    # the killed Snakemake process's connection closes, as jobs of its own server do
    env = with_warm_server({**os.environ, "PYTHONHASHSEED": "0"}, ("--cores",))
    proc = snakemake_launcher.start(_arguments(workdir), env)
    deadline = time.monotonic() + ATTEMPT_TIMEOUT_S
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            committed, writing = _scan(workdir / "results")
            fresh = writing - interrupted
            if fresh and committed >= after:
                proc.kill()
                _unlock(workdir)
                return sorted(fresh)[0]
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"an uninterrupted attempt failed ({proc.returncode})"
    return None


def _final_stores(workdir: Path) -> dict[str, Path]:
    results = workdir / "results"
    return {str(p.relative_to(results)): p for p in find_stores(results)}


def test_sigkill_at_ten_points_then_resume_equals_an_uninterrupted_run(
    tiny_run: Path, tmp_path: Path
) -> None:
    workdir = tmp_path / "crash"
    workdir.mkdir()
    write_config(workdir / "config.yaml", TINY_CONFIG, "# tiny demo run\n")
    interrupted: set[str] = set()
    stages: set[str] = set()
    # spread the kills over the run: the tiny demo commits 28 stores
    thresholds = [0, 2, 5, 8, 11, 14, 17, 19, 21, 23]
    assert len(thresholds) == N_KILLS
    while len(interrupted) < N_KILLS:
        store = _run_until_a_new_write(workdir, interrupted, thresholds[len(interrupted)])
        if store is None:
            break
        interrupted.add(store)
        stages.add(store.split("/")[0])
    # resume to the end (no more kills)
    env = with_warm_server({**os.environ, "PYTHONHASHSEED": "0"}, ("--cores",))
    proc = snakemake_launcher.run(_arguments(workdir), env, ATTEMPT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"{len(interrupted)} SIGKILLs in stages {sorted(stages)}")
    assert len(interrupted) >= N_KILLS, interrupted
    assert len(stages) >= 3, stages

    crashed, reference = _final_stores(workdir), _final_stores(tiny_run)
    assert set(crashed) == set(reference)
    for name, path in crashed.items():
        # every store is whole, and none was built from an interrupted write
        assert verify_store(path, checksums=True) == [], name
        for item in read_provenance(path).get("inputs", []):
            assert PARTIAL_MARKER not in item["path"], (name, item)
            assert (workdir / item["path"]).exists(), (name, item)  # relative or absolute
        # the same numbers as the run that was never interrupted
        with open_dataset(path) as got, open_dataset(reference[name]) as want:
            xr.testing.assert_equal(got, want)
    summary = sorted((workdir / "results" / "summary").rglob("scores.tsv"))
    expected = sorted((tiny_run / "results" / "summary").rglob("scores.tsv"))
    assert [p.read_text() for p in summary] == [p.read_text() for p in expected]
    # every interrupted write was redone and committed under its final name
    assert np.all([(workdir / "results" / s).is_dir() for s in interrupted]), interrupted


def _shared_upstream_config(results: Path) -> dict:
    """The tiny fMRI chain into ``results``: the demo, cleaning and its QC (a store and a
    figure folder per run), one feature space and one encoding model.

    The EEG recordings, the text model and the analyses beside the encoding chain (RSA,
    decoding, geometry, plots) are left out: the two runs share their upstream stages
    all the same.
    """
    config = copy.deepcopy(TINY_CONFIG)
    config["results_dir"] = str(results)
    config["dataset"] = {"tasks": ["movie"]}
    config["features"]["extractors"] = [
        e for e in config["features"]["extractors"] if e["name"] == "image_statistics"
    ]
    config["encoding"]["models"] = {"visual": config["encoding"]["models"]["visual"]}
    config["evaluation"]["plots"]["enabled"] = False
    config["decoding"]["fmri"] = {"enabled": False}
    config["rsa"] = {"enabled": False}
    config["geometry"] = {"enabled": False}
    return config


def test_two_configs_at_once_with_nolock_lose_nothing(tmp_path: Path) -> None:
    """Two configs sharing their upstream stages, run at once into one results folder."""
    shared = tmp_path / "shared_results"
    base = _shared_upstream_config(shared)
    other = copy.deepcopy(base)
    other["encoding"]["alphas"] = {"num": 3}
    workdirs = []
    for name, config in (("a", base), ("b", other)):
        workdir = tmp_path / name
        workdir.mkdir()
        write_config(workdir / "config.yaml", config)
        workdirs.append(workdir)
    # both runs' jobs are forks of the test process's shared warm server, each a process
    # of its own that writes its stores as a job of a run's own server would
    env = with_warm_server({**os.environ, "PYTHONHASHSEED": "0"}, ("--cores",))
    procs = [snakemake_launcher.start(_arguments(w, "--nolock"), env) for w in workdirs]
    for proc in procs:
        proc.wait(ATTEMPT_TIMEOUT_S)
        done = proc.result()
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    # each config finds every one of its results, whole
    for workdir in workdirs:
        dry = snakemake_launcher.run(_arguments(workdir, "-n"), env, ATTEMPT_TIMEOUT_S)
        assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr
    stores = find_stores(shared)
    for store in stores:
        assert verify_store(store, checksums=True) == [], store
    assert not list(shared.rglob(f"*{PARTIAL_MARKER}*"))
    # both configs' encoding versions, next to one set of the shared upstream stores
    encodings = {p.parent.name for p in (shared / "encoding").rglob("*_encoding.zarr")}
    assert len(encodings) == 2 * len(base["encoding"]["models"]), encodings
    assert len({p.parents[1].name for p in (shared / "preprocess_fmri").rglob("*.zarr")}) == 1

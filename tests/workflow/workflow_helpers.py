"""Helpers that run the workflow on a tiny demo in a temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import snakemake_launcher
import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

#: Models of the default config's EfficientNet layer sweep (one per block).
DEFAULT_SWEEP_MODELS = frozenset(
    f"efficientnet__{block}"
    for block in ("blocks.2", "blocks.4", "blocks.7", "blocks.10", "blocks.14", "avg-pooling")
)

#: A small but complete configuration: every stage runs, in well under a minute.
TINY_CONFIG: dict = {
    "demo": {
        "n_subjects": 1,
        "image_size": 32,
        "fmri": {
            "n_train_runs": 2,
            "n_test_repeats": 2,
            "n_volumes": 60,
            "grid_shape": [12, 12, 10],
            # a clearer early-visual signal than the default 1.0, so that 120 training
            # volumes rank the never-shown pool as its planted drive does
            "snr": {"early_visual": 3.0},
        },
        # a stronger planted EEG signal than the default 0.5, so that 50 training trials
        # fit a visual model that ranks the never-shown pool as its planted drive does
        "eeg": {
            "n_channels": 32,
            "n_trials": 60,
            "n_test_images": 5,
            "n_repeats": 2,
            "snr": 4.0,
        },
        "pool": {"n_images": 48},
    },
    "features": {
        "extractors": [
            {"name": "image_statistics", "extractor": "image_statistics"},
            {"name": "minilm", "extractor": "sentence_transformer", "model": "all-MiniLM-L6-v2"},
        ]
    },
    "encoding": {
        "models": {
            "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
            "semantic": {"feature_spaces": ["minilm"], "model": "ridge"},
        },
        "alphas": {"start": 0.0, "stop": 4.0, "num": 5},
        "split": {"test_runs": ["3", "4"]},
    },
    "evaluation": {"permutation": {"n_permutations": 50}, "plots": {"enabled": True}},
    "decoding": {
        "decim": 4,
        "classification": {"n_permutations": 4, "generalization": False},
        "features": {"n_permutations": 20},
        "identification": {"n_permutations": 100},
        "contrastive": {"max_epochs": 40},
    },
    "predict": {"k": 4},
}


def config_leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf of a config as (key path, value); an empty mapping is a leaf."""
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from config_leaves(value, (*path, str(key)))
    else:
        yield path, node


def report_data(html: str) -> tuple[dict, dict]:
    """A Snakemake report's ``results`` (path -> entry) and ``categories`` (category -> ...)."""
    data = {}
    for line in html.splitlines():
        for name in ("results", "categories"):
            prefix = f"var {name} = {{"
            if line.strip().startswith(prefix):
                data[name] = json.loads(line.strip()[len(prefix) - 1 :].rstrip(";"))
    return data["results"], data["categories"]


def write_config(path: Path, config: dict, header: str = "") -> Path:
    """Write ``config`` as YAML, with an optional comment header."""
    path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    return path


#: This test process's shared warm job server (started by the first run that runs jobs).
_WARM_SERVERS: list = []


def with_warm_server(env: dict[str, str], args: tuple[str, ...]) -> dict[str, str]:
    """``env`` naming this test process's shared warm job server, for a run with jobs.

    Each run would otherwise start its own server and import the scientific stack
    again (~5 s of CPU); a run whose environment differs from the server's still does
    (:mod:`neuroflow.workflow.warm_jobs`), as every run does with
    ``NEUROFLOW_TEST_LAUNCHER=0``. Dry runs and the like start no job.
    """
    from neuroflow.workflow.warm_jobs import SHARED_ENV, SharedServer, enabled

    if env.get(snakemake_launcher.SWITCH, "1") == "0" or not enabled(env):
        return env
    if not {"--cores", "-c", "--jobs", "-j"} & set(args) or "-n" in args:
        return env
    if not _WARM_SERVERS:
        ignore = ("PYTEST_CURRENT_TEST", "NEUROFLOW_DEMO_CACHE")
        _WARM_SERVERS.append(SharedServer(env, ignore=ignore))
    return {**env, SHARED_ENV: _WARM_SERVERS[0].address}


def snakemake(
    workdir: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run snakemake on the repository's Snakefile inside ``workdir`` (``env``: added)."""
    env = {**os.environ, "PYTHONHASHSEED": "0", **(env or {})}
    # Targets and flags first: --configfile takes several values and would swallow them.
    argv = [
        *args,
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    proc = snakemake_launcher.run(argv, with_warm_server(env, args), 1200)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-6000:]}"
        )
    return proc


def planned_jobs(workdir: Path, *targets: str) -> dict[str, int]:
    """Rule name -> number of jobs a dry run schedules (empty when nothing to do)."""
    proc = snakemake(workdir, *targets, "-n", "--quiet", "rules")
    counts: dict[str, int] = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            counts[parts[0]] = int(parts[1])
    return counts


def trial_config(base: dict | None = None) -> dict:
    """``base`` (default :data:`TINY_CONFIG`) with single-trial betas and models on, fMRI only.

    The ``movie`` task filter leaves out the EEG recordings (and so the EEG, decoding and
    EEG RSA jobs); every movie shot is a trial, the test movie's shots the repeated ones.
    """
    import copy

    config = copy.deepcopy(TINY_CONFIG if base is None else base)
    config.setdefault("dataset", {})["tasks"] = ["movie"]
    config["single_trial"] = {"enabled": True}
    config["encoding"]["trial_split"] = {"test": "repeated", "cv": {"grouped_kfold": 4}}
    return config


#: What a finished run is made of, for :func:`run_snapshot`: results, job logs, config.
SNAPSHOT_PARTS = ("results", "logs", "config.yaml")


def run_snapshot(workdir: Path) -> dict[str, list[int]]:
    """Size and modification time (ns) of every file of a finished run.

    Parameters
    ----------
    workdir : Path
        The run's working folder; its :data:`SNAPSHOT_PARTS` are listed (Snakemake's own
        ``.snakemake`` folder is not, as dry runs and reports write there).

    Returns
    -------
    snapshot : dict of str to [int, int]
        ``[size, mtime_ns]`` by path relative to ``workdir``.
    """
    snapshot = {}
    for part in SNAPSHOT_PARTS:
        top = workdir / part
        for path in [top, *top.rglob("*")] if top.is_dir() else [top]:
            if path.is_file() and not path.is_symlink():
                stat = path.stat()
                snapshot[str(path.relative_to(workdir))] = [stat.st_size, stat.st_mtime_ns]
    return snapshot


def changed_files(before: dict[str, list[int]], after: dict[str, list[int]]) -> list[str]:
    """Paths added, removed or rewritten between two :func:`run_snapshot` results."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that every test process of this pytest session shares.

    Under pytest-xdist each worker's base temporary folder lies in one folder of the
    session; without workers it is the session's own base folder (never its parent,
    which other pytest sessions of the same user share).
    """
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    folder.mkdir(exist_ok=True)
    return folder


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """A run built once per pytest session, whichever test process asks first.

    The first process to take ``<name>.lock`` calls ``build(workdir)`` on an empty
    ``workdir``; the others wait on the lock and then reuse the finished folder. Users
    read it only (dry runs and reports are fine); a test that writes into a run takes
    a copy first (:func:`copy_run`). A failed build is recorded, so that the other
    processes fail at once with its message instead of building it again.

    Parameters
    ----------
    tmp_path_factory : pytest.TempPathFactory
        The session's factory (see :func:`shared_folder`).
    name : str
        Folder name of the run, unique in the session.
    build : callable
        Fills the given (absent) working folder; raises when the run fails.

    Returns
    -------
    workdir : Path
        The finished run.
    """
    root = shared_folder(tmp_path_factory)
    workdir, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with FileLock(root / f"{name}.lock"):
        if failed.exists():
            pytest.fail(
                f"the shared run {name!r} failed in another test process:\n{failed.read_text()}"
            )
        if not done.exists():
            if workdir.exists():  # left half-built by a process that was killed
                shutil.rmtree(workdir)
            try:
                build(workdir)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {exc}"[-10000:])
                raise
            done.write_text(json.dumps(run_snapshot(workdir)))
    return workdir


def assert_run_unchanged(tmp_path_factory: pytest.TempPathFactory, workdir: Path) -> None:
    """Fail when a file of a :func:`shared_run` was written after the run finished."""
    done = shared_folder(tmp_path_factory) / f"{workdir.name}.done"
    changed = changed_files(json.loads(done.read_text()), run_snapshot(workdir))
    assert not changed, (
        f"a test wrote into the shared run {workdir} (copy it with copy_run first): {changed[:20]}"
    )


def copy_run(workdir: Path, dest: Path) -> Path:
    """A private copy of a finished run (results, logs and Snakemake's metadata).

    Modification times are kept, so Snakemake finds nothing to do in the copy either.
    """
    shutil.copytree(workdir, dest, symlinks=True)
    return dest

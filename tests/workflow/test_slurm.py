"""The tiny demo through a real one-node SLURM cluster, against a local run.

Opt-in (``make test-slurm``, or ``NEUROFLOW_SLURM_TEST=1 pytest tests/workflow/test_slurm.py``):
it needs root and apt-get (``tests/workflow/slurm_cluster.sh`` installs Debian's
``slurm-wlm``, ``slurmdbd``, ``munge`` and ``mariadb-server`` and starts MariaDB, slurmdbd,
slurmctld and slurmd on this machine) and takes a few minutes. The cluster keeps job
accounting, so ``sacct`` must list every submitted job as COMPLETED. The cluster is torn
down in a ``finally``, whatever happens.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr
from workflow_helpers import REPO, TINY_CONFIG, snakemake, write_config

CLUSTER = Path(__file__).with_name("slurm_cluster.sh")
PROFILE = REPO / "workflow" / "profiles" / "slurm"
#: Rules that run on the submitting host (``localrule: True``), never through sbatch.
LOCAL_RULES = {
    "generate_demo",
    "summarize_scores",
    "all",
    # report thumbnails (rules/report.smk)
    "qc_eeg_thumbnails",
    "qc_fmri_thumbnails",
    "predict_thumbnails",
    "predict_eeg_thumbnails",
    "summary_thumbnails",
    "transform_sweeps_thumbnail",
    "geometry_thumbnail",
}
_SUBMITTED = re.compile(r"Job \S+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")
#: slurmctld sends a job's end to slurmdbd asynchronously: how long to wait for it.
SACCT_WAIT_S = 60


def _skip_reason() -> str | None:
    if not os.environ.get("NEUROFLOW_SLURM_TEST"):
        return (
            "set NEUROFLOW_SLURM_TEST=1 to run (installs slurm-wlm, slurmdbd, munge and "
            "mariadb-server with apt-get and starts a one-node SLURM cluster with accounting "
            "on this machine; a few minutes)"
        )
    if os.geteuid() != 0:
        return "the SLURM test needs root (it installs packages and starts daemons)"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "neither slurmctld nor apt-get is available"
    return None


_SKIP_REASON = _skip_reason()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.workflow,
    pytest.mark.skipif(_SKIP_REASON is not None, reason=_SKIP_REASON or ""),
]


def _cluster(action: str, timeout: int) -> None:
    subprocess.run(["bash", str(CLUSTER), action], check=True, timeout=timeout)


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[None]:
    """A running one-node SLURM cluster, stopped afterwards whatever happens."""
    _cluster("install", timeout=900)
    try:
        _cluster("up", timeout=120)
        yield
    finally:
        _cluster("down", timeout=120)


def _arrays(store: Path) -> dict[str, np.ndarray]:
    """Every array of a zarr store (nested groups included), by path."""
    group = zarr.open_group(store, mode="r")
    return {
        path: np.asarray(node[...])
        for path, node in group.members(max_depth=None)
        if isinstance(node, zarr.Array)
    }


def _stores(results: Path) -> list[Path]:
    """Relative paths of the complete zarr stores under ``results``."""
    return sorted(
        meta.parent.relative_to(results)
        for meta in results.rglob("zarr.json")
        if meta.parent.suffix == ".zarr" and ".partial-" not in str(meta)
    )


def _scontrol_state(job_id: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30
    ).stdout
    match = re.search(r"JobState=(\w+)", out)
    return match.group(1) if match else f"unknown ({out.strip()[:200]})"


def _sacct(job_ids: list[str]) -> tuple[dict[str, tuple[str, str]], str]:
    """Job id -> (job name, state) of the allocations ``sacct`` lists, and its raw output.

    Fails the test, with the states ``scontrol`` still knows, when ``sacct`` is missing or
    accounting does not answer.
    """
    cmd = ["sacct", "-n", "-X", "-P", "-o", "JobID,JobName,State", "-j", ",".join(job_ids)]
    if shutil.which("sacct") is None:
        proc = None
    else:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc is None or proc.returncode != 0:
        fallback = {job_id: _scontrol_state(job_id) for job_id in job_ids}
        why = "sacct not found" if proc is None else proc.stderr.strip()
        pytest.fail(f"sacct must list the jobs, got {why!r} instead; scontrol: {fallback}")
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return {row[0]: (row[1], row[2]) for row in rows if len(row) == 3}, proc.stdout


def _wait_sacct_completed(job_ids: list[str]) -> tuple[dict[str, tuple[str, str]], str]:
    """:func:`_sacct`, repeated until every job shows COMPLETED or ``SACCT_WAIT_S`` passed."""
    deadline = time.monotonic() + SACCT_WAIT_S
    while True:
        jobs, listing = _sacct(job_ids)
        done = all(jobs.get(job_id, ("", ""))[1] == "COMPLETED" for job_id in job_ids)
        if done or time.monotonic() > deadline:
            return jobs, listing
        time.sleep(1)


def test_tiny_demo_on_slurm_matches_local(
    slurm_cluster: None, tiny_run: Path, tmp_path: Path
) -> None:
    """Every non-local job runs through sbatch, sacct lists each one COMPLETED, and the
    stores equal a local run's."""
    workdir = tmp_path / "slurm_run"
    workdir.mkdir()
    write_config(workdir / "config.yaml", TINY_CONFIG, "# tiny demo run on SLURM\n")
    proc = snakemake(
        workdir,
        "--workflow-profile",
        str(PROFILE),
        # The test cluster keeps accounting: query job states with sacct, as on most
        # production clusters (the plugin's default where sacct exists).
        "--slurm-status-command",
        "sacct",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--slurm-keep-successful-logs",
        # The test node has few CPUs: cap the profile's thread requests (single jobs and
        # groups) so that every job fits on it.
        "--max-threads",
        str(os.cpu_count() or 1),
        "--cores",
        str(os.cpu_count() or 1),
    )
    log = proc.stdout + proc.stderr

    submitted = _SUBMITTED.findall(log)
    assert submitted, f"no job was submitted to SLURM:\n{log[-3000:]}"
    job_ids = [job_id for job_id, _ in submitted]
    jobs, listing = _wait_sacct_completed(job_ids)
    print(f"sacct -n -X -P -o JobID,JobName,State:\n{listing}")
    assert set(jobs) >= set(job_ids), f"sacct misses jobs {set(job_ids) - set(jobs)}:\n{listing}"
    states = {job_id: jobs[job_id][1] for job_id in job_ids}
    assert set(states.values()) == {"COMPLETED"}, listing
    # Every job of one snakemake run carries the run's id as its SLURM job name.
    assert len({jobs[job_id][0] for job_id in job_ids}) == 1, listing
    # One SLURM log folder per submitted rule or group; no remote rule ran locally.
    submitted_rules = {
        Path(p).relative_to(workdir / ".snakemake" / "slurm_logs").parts[0] for _, p in submitted
    }
    local_jobs = set(re.findall(r"^localrule (\w+):", log, flags=re.MULTILINE))
    assert local_jobs <= LOCAL_RULES, local_jobs
    assert {"rule_preprocess_fmri", "rule_fit_encoding"} <= submitted_rules, submitted_rules
    assert any(r.startswith("group_") for r in submitted_rules), submitted_rules

    local, remote = tiny_run / "results", workdir / "results"
    assert _stores(remote) == _stores(local)
    for rel in _stores(local):
        a, b = _arrays(local / rel), _arrays(remote / rel)
        assert a.keys() == b.keys(), rel
        for name in a:
            np.testing.assert_array_equal(b[name], a[name], err_msg=f"{rel}/{name}")
    for table in sorted(local.rglob("*.tsv")):
        rel = table.relative_to(local)
        pd.testing.assert_frame_equal(
            pd.read_csv(remote / rel, sep="\t"), pd.read_csv(table, sep="\t"), obj=str(rel)
        )

"""How long Snakemake takes to plan the workflow on a large BIDS dataset.

Builds a synthetic raw BIDS tree (subjects x sessions x runs of placeholder files:
indexing reads only names and JSON sidecars, no NIfTI is opened before jobs run),
then times ``snakemake -n`` (a full dry run: config validation, dataset index,
version ids, DAG of every job) in a child process and reads its peak memory.
Two dataset sizes run side by side; their time ratio against the ratio of job
counts shows whether planning scales linearly.

    python bench/bench_dag.py            # 50 and 200 subjects x 2 sessions x 4 runs
    python bench/bench_dag.py --small    # 10 and 40 subjects
    python bench/bench_dag.py --profile  # also cProfile the largest dry run (top 25)

Target: the 200-subject dry run (1,600 fMRI runs) in < 30 s and < 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 30.0
TARGET_MB = 1024.0


def make_bids(root: Path, n_subjects: int, n_sessions: int = 2, n_runs: int = 4) -> int:
    """Write a placeholder raw BIDS dataset.

    Parameters
    ----------
    root : Path
        Dataset folder (created).
    n_subjects, n_sessions, n_runs : int
        Subjects, sessions per subject and movie runs per session.

    Returns
    -------
    n_bold : int
        Number of BOLD runs written (``n_subjects * n_sessions * n_runs``).
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "dataset_description.json").write_text(
        json.dumps({"Name": "bench", "BIDSVersion": "1.9.0"})
    )
    (root / "task-movie_bold.json").write_text(json.dumps({"RepetitionTime": 1.5}))
    stimuli = root / "stimuli"
    stimuli.mkdir(exist_ok=True)
    (stimuli / "captions.tsv").write_text("stim_file\tcaption\nimg-001.png\ta cat\n")
    events = "onset\tduration\ttrial_type\tstim_file\n0.0\t3.0\tshot\timg-001.png\n"
    n_bold = 0
    for s in range(1, n_subjects + 1):
        for ses in range(1, n_sessions + 1):
            func = root / f"sub-{s:03d}" / f"ses-{ses}" / "func"
            func.mkdir(parents=True, exist_ok=True)
            for run in range(1, n_runs + 1):
                stem = f"sub-{s:03d}_ses-{ses}_task-movie_run-{run}"
                (func / f"{stem}_bold.nii.gz").write_bytes(b"")
                (func / f"{stem}_events.tsv").write_text(events)
                n_bold += 1
    return n_bold


def bench_config(bids_root: Path, results: Path) -> dict:
    """The default config (features, encoding, evaluation) on a raw BIDS dataset."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["results_dir"] = str(results)
    config["dataset"] = {**config["dataset"], "source": "bids", "bids_root": str(bids_root)}
    config["encoding"]["split"]["test_runs"] = ["4"]
    return config


def dry_run(workdir: Path, profile: Path | None = None) -> tuple[float, float, dict[str, int]]:
    """Time ``snakemake -n`` in a child process.

    Returns
    -------
    seconds : float
        Wall time of the dry run.
    peak_mb : float
        Peak resident memory of the child (MB).
    jobs : dict of str to int
        Jobs per rule.
    """
    cmd = [
        sys.executable,
        "-c",
        (
            "import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "sys.stdout.write(p.stdout + p.stderr)\n"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
            "print(f'@@peak_kb {peak} {p.returncode}')\n"
        ),
    ]
    cmd += [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += [
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
        "-n",
        "--quiet",
        "rules",
    ]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ}).stdout
    seconds = time.perf_counter() - start
    jobs: dict[str, int] = {}
    peak_kb, rc = 0, 1
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "@@peak_kb":
            peak_kb, rc = int(parts[1]), int(parts[2])
        elif len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            jobs[parts[0]] = int(parts[1])
    if rc != 0:
        raise RuntimeError(f"snakemake -n failed in {workdir}:\n{out[-4000:]}")
    return seconds, peak_kb / 1024, jobs


def measure(tmp: Path, n_subjects: int, profile: Path | None = None) -> dict:
    """Build a dataset of ``n_subjects`` and time its dry run."""
    work = tmp / f"n{n_subjects}"
    bids = work / "bids"
    n_bold = make_bids(bids, n_subjects)
    config = bench_config(bids, work / "results")
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    seconds, peak_mb, jobs = dry_run(work, profile)
    return {
        "subjects": n_subjects,
        "runs": n_bold,
        "jobs": sum(jobs.values()),
        "per_rule": jobs,
        "seconds": seconds,
        "peak_mb": peak_mb,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print timings, ratios and the target check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="10 and 40 subjects")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest run")
    args = parser.parse_args(argv)
    sizes = (10, 40) if args.small else (50, 200)
    with tempfile.TemporaryDirectory(prefix="bench_dag_") as tmp:
        rows = [measure(Path(tmp), n) for n in sizes]
        small, large = rows
        print(f"{'subjects':>8} {'runs':>6} {'jobs':>7} {'dry run (s)':>12} {'peak (MB)':>10}")
        for r in rows:
            print(
                f"{r['subjects']:>8} {r['runs']:>6} {r['jobs']:>7} "
                f"{r['seconds']:>12.2f} {r['peak_mb']:>10.0f}"
            )
        print("jobs per rule (largest):", json.dumps(large["per_rule"]))
        job_ratio = large["jobs"] / small["jobs"]
        time_ratio = large["seconds"] / small["seconds"]
        print(
            f"jobs ratio {job_ratio:.1f}x, time ratio {time_ratio:.1f}x "
            f"(linear planning: time ratio <= jobs ratio), "
            f"{1000 * large['seconds'] / large['jobs']:.2f} ms per job"
        )
        if not args.small:
            ok = large["seconds"] < TARGET_S and large["peak_mb"] < TARGET_MB
            print(
                f"target (< {TARGET_S:.0f} s, < {TARGET_MB:.0f} MB at {large['runs']} runs): "
                f"{'met' if ok else 'MISSED'}"
            )
        if args.profile:
            import pstats

            prof = Path(tmp) / "dag.prof"
            measure(Path(tmp) / "profiled", sizes[-1], profile=prof)
            pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

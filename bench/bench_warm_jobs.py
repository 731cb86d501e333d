"""Warm jobs against Snakemake's own way of running ``script:`` jobs, on a whole run.

Generates a small parcel time-series dataset (``make_algonauts_like`` of
``tests/dataset_shapes``: 1 subject x 4 runs x 40 volumes, 16-px shots), writes a
config with only its ``dataset`` block (every analysis that applies, as in
``tests/workflow/test_default_configs.py``), and runs the whole workflow twice through
``python -m snakemake --cores 2``, each into its own work folder:

* warm (the default): each Python ``script:`` job is a fork of one warm server process
  that already imported NumPy, pandas, xarray, zarr and neuroflow
  (``neuroflow.workflow.warm_jobs``);
* cold (``NEUROFLOW_WARM_JOBS=0``): each job a new interpreter, Snakemake's own way.

It prints the number of jobs, the wall time and the CPU time of each run and the ratios
cold/warm, then checks that both runs give the same numbers: every ``*.tsv`` under
``results/summary`` byte-identical and every zarr store under ``results`` equal with
:func:`xarray.testing.assert_identical` once attributes (provenance holds timestamps)
are dropped. It exits non-zero if any differ.

CPU time is that of the whole process tree: ``getrusage(RUSAGE_CHILDREN)`` around each
run counts Snakemake and every process waited for below it (shells, job interpreters,
the warm server, which Snakemake waits for when it exits), but not the jobs forked by
the warm server: it ignores ``SIGCHLD``, so the kernel reaps them and adds their CPU to
no parent. Their CPU is read from ``/proc`` every 20 ms while they run (a lower bound:
at most the last 20 ms of each job is missed) and added.

    .venv/bin/python bench/bench_warm_jobs.py               # one warm and one cold run
    .venv/bin/python bench/bench_warm_jobs.py --repeats 3   # interleaved, medians
    .venv/bin/python bench/bench_warm_jobs.py --keep        # keep the work folders

``--small`` runs the same dataset: it is already the smallest size the workflow tests
run this generator at (one subject, the generator's minimum). The first repeat runs
warm first (the cold run then finds the files it reads in the page cache), later
repeats alternate the order.

Target: warm at least 1.5x faster than cold in wall time. Takes ~2.5 minutes on the
idle 2-core machine (~4 minutes beside a test suite).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from dataset_shapes import make_algonauts_like  # noqa: E402

TARGET_RATIO = 1.5
#: Generator sizes: the smallest of ``tests/workflow/test_default_configs.py``.
SIZES = {"n_subjects": 1, "n_volumes": 40, "image_size": 16}
SERVER_MARK = b"warm_jobs import serve"
STEPS = re.compile(r"(\d+) of (\d+) steps \(100%\) done")
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _stat(pid: int) -> tuple[int, int, int] | None:
    """``(ppid, starttime, CPU ticks of it and its waited-for children)`` of a process."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    # fields[0] is field 3 of proc(5): ppid is 4, utime..cstime 14-17, starttime 22
    ticks = sum(int(x) for x in fields[11:15])
    return int(fields[1]), int(fields[19]), ticks


class ForkedJobSampler(threading.Thread):
    """CPU of the jobs that warm servers below one process fork, sampled from ``/proc``.

    Parameters
    ----------
    root : int
        The Snakemake process; only its descendants are looked at.
    interval : float
        Seconds between samples.
    """

    def __init__(self, root: int, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.tree: set[int] = {root}
        self.live: set[int] = {root}
        self.seen: set[int] = set()
        self.servers: set[int] = set()
        #: (pid, starttime) of each forked job -> its largest CPU ticks seen
        self.forks: dict[tuple[int, int], int] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.sample()
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def sample(self) -> None:
        """Find new descendants, tell servers and their forks, read the forks' CPU."""
        pids = sorted(int(n) for n in os.listdir("/proc") if n.isdigit())
        for pid in pids:
            if pid in self.seen:
                continue
            self.seen.add(pid)
            stat = _stat(pid)
            if stat is not None and stat[0] in self.tree:
                self.tree.add(pid)
                self.live.add(pid)
        for pid in sorted(self.live):
            stat = _stat(pid)
            if stat is None:
                self.live.discard(pid)
                continue
            ppid, start, ticks = stat
            if ppid in self.servers:
                key = (pid, start)
                self.forks[key] = max(self.forks.get(key, 0), ticks)
            # read again until the server's interpreter has been executed
            elif pid not in self.servers and SERVER_MARK in (_read(f"/proc/{pid}/cmdline") or b""):
                self.servers.add(pid)

    @property
    def cpu_s(self) -> float:
        """CPU seconds of the forked jobs seen."""
        return sum(self.forks.values()) * TICK_S


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_workflow(work: Path, config: dict, warm: bool) -> dict:
    """Run the whole workflow into ``work`` and time it.

    Parameters
    ----------
    work : Path
        Work folder (created); holds ``config.yaml``, ``results`` and ``snakemake.out``.
    config : dict
        The configuration.
    warm : bool
        Whether script jobs run warm (``NEUROFLOW_WARM_JOBS`` unset) or cold (``0``).

    Returns
    -------
    run : dict
        ``wall_s``, ``waited_cpu_s`` (the ``RUSAGE_CHILDREN`` delta), ``forked_cpu_s``,
        ``cpu_s`` (their sum), ``n_forked`` and ``jobs`` (from the last
        ``N of N steps (100%) done``).
    """
    work.mkdir(parents=True)
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("NEUROFLOW_WARM_JOBS", None)
    if not warm:
        env["NEUROFLOW_WARM_JOBS"] = "0"
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(work),
        "--configfile",
        str(work / "config.yaml"),
        "--cores",
        "2",
    ]
    log = work / "snakemake.out"
    with open(log, "w") as out:
        cpu0, t0 = _children_cpu_s(), time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        sampler = ForkedJobSampler(proc.pid)
        sampler.start()
        rc = proc.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
        waited = _children_cpu_s() - cpu0
    text = log.read_text()
    if rc != 0:
        sys.exit(f"snakemake failed ({rc}) in {work}:\n{text[-4000:]}")
    steps = STEPS.findall(text)
    return {
        "wall_s": wall,
        "waited_cpu_s": waited,
        "forked_cpu_s": sampler.cpu_s,
        "cpu_s": waited + sampler.cpu_s,
        "n_forked": len(sampler.forks),
        "jobs": int(steps[-1][1]) if steps else 0,
    }


def _stores(results: Path) -> list[Path]:
    """Zarr stores under ``results`` (not the groups inside them), relative paths."""
    found = sorted(p.relative_to(results) for p in results.rglob("*.zarr") if p.is_dir())
    return [p for p in found if not any(q.suffix == ".zarr" for q in p.parents)]


def compare_outputs(a: Path, b: Path) -> tuple[int, int, list[str]]:
    """Compare the results of two work folders.

    Returns
    -------
    n_tables, n_stores : int
        Summary tables and zarr stores compared.
    problems : list of str
        One line per difference (empty when the runs agree).
    """
    import xarray as xr

    from neuroflow.artifacts import open_dataset

    problems: list[str] = []
    tables = {}
    for side in (a, b):
        summary = side / "results" / "summary"
        tables[side] = sorted(p.relative_to(summary) for p in summary.rglob("*.tsv"))
    if tables[a] != tables[b]:
        problems.append(f"summary tables differ in names: {tables[a]} vs {tables[b]}")
    for rel in sorted(set(tables[a]) & set(tables[b])):
        pa, pb = (s / "results" / "summary" / rel for s in (a, b))
        if not filecmp.cmp(pa, pb, shallow=False):
            problems.append(f"results/summary/{rel}: bytes differ")
    stores = {side: _stores(side / "results") for side in (a, b)}
    if stores[a] != stores[b]:
        problems.append(f"zarr stores differ in names: {stores[a]} vs {stores[b]}")
    for rel in sorted(set(stores[a]) & set(stores[b])):
        try:
            da, db = (
                open_dataset(s / "results" / rel).load().drop_attrs(deep=True) for s in (a, b)
            )
            xr.testing.assert_identical(da, db)
        except Exception as exc:  # every failure is a difference to report
            first = str(exc).strip().splitlines()[:3]
            problems.append(f"results/{rel}: {type(exc).__name__}: {' '.join(first)}")
    n_tables = len(set(tables[a]) & set(tables[b]))
    return n_tables, len(set(stores[a]) & set(stores[b])), problems


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print timings, ratios, the output check and the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--small", action="store_true", help="the same dataset (already the smallest)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="interleaved warm/cold pairs")
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"`--repeats` must be at least 1, got {args.repeats} instead.")
    tmp = tempfile.mkdtemp(prefix="bench_warm_jobs_")
    try:
        return _bench(Path(tmp), args.repeats)
    finally:
        if args.keep:
            print(f"work folders kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _bench(tmp: Path, repeats: int) -> int:
    facts = make_algonauts_like(tmp / "dataset", seed=0, **SIZES)
    config = {"dataset": {"source": "timeseries", "bids_root": str(facts["root"])}}
    print(
        f"dataset: algonauts_like, {len(facts['subjects'])} subject x "
        f"{len(facts['runs'])} runs x {facts['n_volumes']} volumes, "
        f"{SIZES['image_size']}-px shots; dataset-only config; --cores 2; "
        f"{os.cpu_count()} CPUs"
    )
    runs: dict[str, list[dict]] = {"warm": [], "cold": []}
    problems: list[str] = []
    for r in range(repeats):
        order = ("warm", "cold") if r % 2 == 0 else ("cold", "warm")
        for mode in order:
            run = run_workflow(tmp / f"{mode}-{r + 1}", config, warm=mode == "warm")
            runs[mode].append(run)
            print(
                f"repeat {r + 1} {mode}: {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} s "
                f"CPU, {run['jobs']} jobs",
                flush=True,
            )
        n_tables, n_stores, found = compare_outputs(tmp / f"warm-{r + 1}", tmp / f"cold-{r + 1}")
        problems += [f"repeat {r + 1}: {p}" for p in found]
        print(
            f"repeat {r + 1} outputs: {n_tables} summary tables compared byte for byte, "
            f"{n_stores} zarr stores with assert_identical (attributes dropped): "
            f"{'all equal' if not found else f'{len(found)} DIFFER'}",
            flush=True,
        )

    def med(mode: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[mode])

    jobs = {run["jobs"] for mode in runs for run in runs[mode]}
    print(f"\njobs per run: {', '.join(map(str, sorted(jobs)))} (Snakemake's step count)")
    print(
        f"forked from the warm server (seen in /proc): "
        f"{', '.join(str(run['n_forked']) for run in runs['warm'])} per warm run, "
        f"{', '.join(str(run['n_forked']) for run in runs['cold'])} per cold run"
    )
    label = "median of " + str(repeats) if repeats > 1 else "1 run each"
    print(
        f"{'mode':<5} {'wall (s)':>9} {'CPU waited-for (s)':>19} "
        f"{'CPU forked jobs (s)':>20} {'CPU total (s)':>14}   ({label})"
    )
    for mode in ("warm", "cold"):
        print(
            f"{mode:<5} {med(mode, 'wall_s'):>9.1f} {med(mode, 'waited_cpu_s'):>19.1f} "
            f"{med(mode, 'forked_cpu_s'):>20.1f} {med(mode, 'cpu_s'):>14.1f}"
        )
    wall_ratio = med("cold", "wall_s") / med("warm", "wall_s")
    cpu_ratio = med("cold", "cpu_s") / med("warm", "cpu_s")
    print(f"cold/warm: wall {wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x")
    print(
        "CPU waited-for: getrusage(RUSAGE_CHILDREN) delta (Snakemake, shells, job "
        "interpreters, the warm server);\nCPU forked jobs: the warm server's forks, "
        "which no parent waits for, read from /proc every 20 ms (a lower bound)"
    )
    for line in problems:
        print("DIFFERENT:", line)
    ok = wall_ratio >= TARGET_RATIO
    print(
        f"target (warm >= {TARGET_RATIO}x faster in wall time): {'met' if ok else 'MISSED'}; "
        f"outputs {'equal' if not problems else 'DIFFER'}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Whole-brain scale: the fMRI workflow end to end on a 2 mm grid, with per-job figures.

Generates the embedded demo dataset at whole-brain size (by default 4 subjects x 10
runs x 300 volumes on an 80 x 96 x 78 grid of 2 mm voxels: 196,720 in-mask voxels
per subject), then runs the workflow through ``snakemake`` on it: fMRI cleaning,
three feature spaces (image statistics, MiniLM 384-d, a 1,024-d random-weight ViT),
one ridge model per feature space with per-voxel penalties (13 candidates,
leave-one-run-out), evaluation with 1,000 block permutations, FDR and max-statistic
FWER over all voxels, brain maps, and the summary. EEG encoding, decoding and RSA are
switched off (the demo's EEG recordings, 60 trials each, are still cleaned).

Every job logs its wall time and its peak resident memory (the kernel's high-water
mark, see ``neuroflow.workflow.runner.peak_rss_mib``); this script collects them per
rule and prints the total wall time, the largest job of each rule, and the SLURM
profile's first-attempt memory request beside it.

    python bench/bench_whole_brain.py                 # full size (~95 min on 2 cores)
    python bench/bench_whole_brain.py --small         # 2 x 4 runs x 120 volumes, 40 x 48 x 39
    python bench/bench_whole_brain.py --cores 8 --workdir /scratch/nf-bench --keep
    python bench/bench_whole_brain.py --report run.json   # print a saved --json record

The dataset generation (a job of the demo rule, about 45 min and 18 GB at full size) is
reported on its own line: it is not part of a user's run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

#: "<stage> <version>: <function>" (first line) and "done in ..." (last line) of a job log.
_START = re.compile(r"INFO neuroflow: (?P<stage>\S+) (?P<version>\S+): (?P<func>\S+)$")
_DONE = re.compile(r"done in (?P<wall>[\d.]+) s, peak resident memory (?P<mib>[\d.]+) MiB")


def bench_config(
    n_subjects: int,
    n_runs: int,
    n_volumes: int,
    grid: list[int],
    voxel_size: float,
    n_permutations: int,
) -> dict:
    """The workflow config of the benchmark (overrides of ``config/config.yaml``)."""
    if n_runs < 3:
        raise ValueError(f"n_runs must be >= 3 (2 test repeats + training), got {n_runs}.")
    vit = {
        "model_type": "vit",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "intermediate_size": 2048,
        "image_size": 96,
        "patch_size": 16,
    }
    return {
        "demo": {
            "n_subjects": n_subjects,
            "fmri": {
                "n_train_runs": n_runs - 2,
                "n_test_repeats": 2,
                "n_volumes": n_volumes,
                "grid_shape": grid,
                "voxel_size": voxel_size,
            },
            "eeg": {"n_trials": 60, "n_test_images": 5, "n_repeats": 2},
        },
        "features": {
            "extractors": [
                {"name": "image_statistics", "extractor": "image_statistics"},
                {
                    "name": "minilm",
                    "extractor": "sentence_transformer",
                    "model": "all-MiniLM-L6-v2",
                },
                {
                    "name": "vit1024",
                    "extractor": "hf_vision",
                    "weights": "random",
                    "model_config": vit,
                    "pooling": "mean",
                },
            ]
        },
        "encoding": {
            "models": {
                "visual": {"feature_spaces": ["image_statistics"], "model": "ridge"},
                "semantic": {"feature_spaces": ["minilm"], "model": "ridge"},
                "vit": {"feature_spaces": ["vit1024"], "model": "ridge"},
            },
        },
        "evaluation": {"permutation": {"n_permutations": n_permutations}},
        "eeg_encoding": {"enabled": False},
        "decoding": {"enabled": False},
        "rsa": {"enabled": False},
    }


def collect_jobs(logs: Path) -> list[dict]:
    """Wall time and peak memory of every finished job, from its log.

    Returns
    -------
    jobs : list of dict
        ``stage`` (e.g. ``encoding/visual``), ``log`` (path below ``logs``), ``wall_s``
        and ``peak_mib``.
    """
    jobs = []
    for path in sorted(logs.rglob("*.log")):
        stage, done = None, None
        for line in path.read_text(errors="replace").splitlines():
            if stage is None and (m := _START.search(line)):
                stage = m["stage"]
            if m := _DONE.search(line):
                done = m
        if stage and done:
            jobs.append(
                {
                    "stage": stage,
                    "log": str(path.relative_to(logs)),
                    "wall_s": float(done["wall"]),
                    "peak_mib": float(done["mib"]),
                }
            )
    return jobs


def slurm_requests() -> dict[str, str]:
    """Memory request expression of each rule in the SLURM profile (``mem_mb``)."""
    profile = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    out = {"default": str(profile["default-resources"]["mem_mb"])}
    for rule, res in (profile.get("set-resources") or {}).items():
        if "mem_mb" in res:
            out[rule] = str(res["mem_mb"])
    return out


def summarise(jobs: list[dict]) -> list[dict]:
    """Per stage kind: job count, total and largest wall time, largest peak memory."""
    by_kind: dict[str, list[dict]] = {}
    for job in jobs:
        # one row per extractor (each has its own rule), one per kind otherwise
        kind = job["stage"] if job["stage"].startswith("features/") else job["stage"].split("/")[0]
        by_kind.setdefault(kind, []).append(job)
    rows = []
    for kind, group in by_kind.items():
        rows.append(
            {
                "stage": kind,
                "jobs": len(group),
                "sum_wall_s": round(sum(j["wall_s"] for j in group), 1),
                "max_wall_s": round(max(j["wall_s"] for j in group), 1),
                "max_peak_mib": round(max(j["peak_mib"] for j in group)),
            }
        )
    return rows


def print_report(result: dict) -> None:
    """Print the figures of one run (the ``--json`` record)."""
    jobs = result["jobs"]
    generation = sum(j["wall_s"] for j in jobs if j["stage"].startswith("demo"))
    rows = summarise([j for j in jobs if not j["stage"].startswith("demo")])
    total, cores = result["total_s"], result["cores"]
    print(f"\nsize: {result['size']}, in-mask voxels per subject: {result['n_voxels']}")
    print(f"dataset generation (not part of a run): {generation:.0f} s")
    print(f"workflow wall time on {cores} cores without generation: {total - generation:.0f} s")
    requests = slurm_requests()
    head = f"{'stage':<26}{'jobs':>5}{'sum s':>9}{'max s':>8}{'peak MiB':>10}  SLURM mem_mb"
    print("\n" + head)
    for row in rows:
        rule = _rule(row["stage"])
        # extractors without an entry keep their rule's own request
        own = "6000 * attempt (the rule's)" if rule.startswith("extract_features_") else None
        own = "local rule" if rule == "summarize_scores" else own
        req = requests.get(rule, own or requests["default"])
        print(
            f"{row['stage']:<26}{row['jobs']:>5}{row['sum_wall_s']:>9.0f}"
            f"{row['max_wall_s']:>8.0f}{row['max_peak_mib']:>10}  {req}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a quick reduced size")
    parser.add_argument("--subjects", type=int, default=None)
    parser.add_argument("--runs", type=int, default=None, help="runs per subject (2 are test)")
    parser.add_argument("--volumes", type=int, default=None)
    parser.add_argument("--grid", type=int, nargs=3, default=None)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--report", type=Path, default=None, help="print a --json record, no run")
    args = parser.parse_args()
    if args.report is not None:
        print_report(json.loads(args.report.read_text()))
        return
    small = {"subjects": 2, "runs": 4, "volumes": 120, "grid": [40, 48, 39]}
    full = {"subjects": 4, "runs": 10, "volumes": 300, "grid": [80, 96, 78]}
    size = small if args.small else full
    for key in size:
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    cfg = bench_config(
        size["subjects"], size["runs"], size["volumes"], size["grid"], 2.0, args.permutations
    )

    if args.workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="nf-whole-brain-"))
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        str(args.cores),
        "--keep-going",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    print(f"size: {size}, permutations {args.permutations}, cores {args.cores}")
    print(f"work folder: {workdir}")
    start = time.perf_counter()
    with open(workdir / "snakemake.out", "w") as out:
        proc = subprocess.run(
            cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONHASHSEED": "0"}
        )
    total = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (workdir / "snakemake.out").read_text()[-4000:]
        sys.exit(f"snakemake failed ({proc.returncode}):\n{tail}")

    jobs = collect_jobs(workdir / "logs")
    n_voxels = None
    stores = sorted((workdir / "results").glob("preprocess_fmri/*/sub-*/*.zarr"))
    if stores:
        import xarray as xr

        with xr.open_zarr(stores[0]) as ds:
            n_voxels = int(ds.sizes.get("voxel", 0))
    result = {
        "size": size,
        "cores": args.cores,
        "n_voxels": n_voxels,
        "total_s": total,
        "jobs": jobs,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print_report(result)
    if args.workdir is None and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


#: Stage kind -> the rule whose SLURM request applies.
_RULES = {
    "preprocess_fmri": "preprocess_fmri",
    "preprocess_eeg": "preprocess_eeg",
    "align_features": "align_features",
    "encoding": "fit_encoding",
    "evaluation": "evaluate_encoding",
    "summary": "summarize_scores",
}


def _rule(stage: str) -> str:
    """The rule of a summary row's stage (``features/<name>``: ``extract_features_<name>``)."""
    if stage.startswith("features/"):
        return "extract_features_" + stage.split("/", 1)[1]
    return _RULES.get(stage, "")


if __name__ == "__main__":
    main()

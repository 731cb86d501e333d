"""Helpers that run the workflow on a tiny demo in a temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]

#: Models of the default config's EfficientNet layer sweep (one per block).
DEFAULT_SWEEP_MODELS = frozenset(
    f"efficientnet__{block}"
    for block in ("blocks_2", "blocks_4", "blocks_7", "blocks_10", "blocks_14", "avg_pooling")
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


def write_config(path: Path, config: dict, header: str = "") -> Path:
    """Write ``config`` as YAML, with an optional comment header."""
    path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run snakemake on the repository's Snakefile inside ``workdir``."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    # Targets and flags first: --configfile takes several values and would swallow them.
    cmd = [
        *SNAKEMAKE,
        *args,
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "config.yaml"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
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

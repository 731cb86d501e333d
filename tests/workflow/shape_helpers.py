"""Helpers of the workflow tests on generated dataset shapes (see ``dataset_shapes``)."""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from workflow_helpers import shared_folder, shared_run, snakemake, write_config

from neuroflow.artifacts import read_provenance


def run_shape(workdir: Path, config: dict, *args: str) -> Path:
    """Write ``config`` into ``workdir`` and run the whole workflow there on 2 cores."""
    workdir.mkdir(parents=True, exist_ok=True)
    write_config(workdir / "config.yaml", config)
    snakemake(workdir, "--cores", "2", *args)
    return workdir


def shared_shape_run(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    make: Callable[[Path], dict],
    config: Callable[[dict], dict],
) -> tuple[Path, dict]:
    """A generated dataset and the whole workflow run on it, built once per pytest session.

    The run is a :func:`workflow_helpers.shared_run` (tests read it only, or copy it):
    every test module and process that asks for ``name`` gets the same folder.

    Parameters
    ----------
    tmp_path_factory : pytest.TempPathFactory
        The session's factory.
    name : str
        Name of the run, unique in the session.
    make : callable
        Writes the dataset into the given folder and returns its facts.
    config : callable
        The run's configuration, from the facts.

    Returns
    -------
    run : Path
        The finished run's working folder.
    facts : dict
        What ``make`` returned.
    """
    root = shared_folder(tmp_path_factory)
    bids, facts_file = root / f"{name}-bids", root / f"{name}-facts.pkl"

    def build(workdir: Path) -> None:
        if bids.exists():  # left half-written by a process that was killed
            shutil.rmtree(bids)
        facts = make(bids)
        run_shape(workdir, config(facts))
        facts_file.write_bytes(pickle.dumps(facts))

    run = shared_run(tmp_path_factory, name, build)
    return run, pickle.loads(facts_file.read_bytes())


def summary_dir(workdir: Path) -> Path:
    """The (single) summary version folder of a run."""
    (folder,) = sorted((workdir / "results" / "summary").iterdir())
    return folder


def summary_table(workdir: Path) -> pd.DataFrame:
    """The run's ``scores.tsv`` (subjects as their labels, e.g. ``"01"``)."""
    return pd.read_csv(
        summary_dir(workdir) / "scores.tsv", sep="\t", na_values="n/a", dtype={"subject": str}
    )


def summary_notes(workdir: Path) -> list[str]:
    """The analyses the run left out, as the summary store's provenance keeps them."""
    return list(read_provenance(summary_dir(workdir) / "scores.zarr").get("notes") or [])


def open_stores(workdir: Path, stage: str, pattern: str = "*.zarr") -> dict[str, xr.Dataset]:
    """Stores of one stage by ``<version folder>/<name>``."""
    base = workdir / "results" / stage
    return {
        str(p.relative_to(base)): xr.open_zarr(p)
        for p in sorted(base.rglob(pattern))
        if (p / "zarr.json").exists()
    }


def store_mtimes(results: Path) -> dict[str, int]:
    """Modification time (ns) of every zarr store's metadata file under ``results``."""
    return {
        str(meta.parent.relative_to(results)): meta.stat().st_mtime_ns
        for meta in results.rglob("zarr.json")
        if meta.parent.suffix == ".zarr"
    }


def voxels_in(ds: xr.Dataset, mask: np.ndarray) -> np.ndarray:
    """Which targets of a store (coordinates ``i``, ``j``, ``k``) lie inside a boolean volume."""
    ijk = np.stack([ds[c].values for c in ("i", "j", "k")], axis=1)
    return np.asarray(mask)[ijk[:, 0], ijk[:, 1], ijk[:, 2]]

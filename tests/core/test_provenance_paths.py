"""The provenance chain resolves wherever the results folder is and whatever folder it is
inspected from."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import build_provenance, read_provenance, write_dataset
from neuroflow.cli import main


def _chain(rng: np.random.Generator, root: Path, *, absolute: bool) -> Path:
    """results/features/clip-f1/x.zarr <- results/encoding/m-e1/sub-01.zarr, run in ``root``."""
    feats = xr.Dataset({"features": (("stimulus", "feature"), rng.standard_normal((5, 3)))})
    upstream = Path("results") / "features" / "clip-f1" / "projection.zarr"
    prov = build_provenance(stage="features/clip", version="f1", config={})
    write_dataset(feats, root / upstream, provenance=prov)
    recorded = root / upstream if absolute else upstream
    enc = xr.Dataset({"y_pred": (("time", "voxel"), rng.standard_normal((7, 4)))})
    prov = build_provenance(stage="encoding/m", version="e1", config={}, inputs=[recorded])
    return write_dataset(
        enc, root / "results" / "encoding" / "m-e1" / "sub-01.zarr", provenance=prov
    )


@pytest.mark.parametrize("absolute", [False, True])
def test_inspect_walks_a_moved_results_folder_from_anywhere(
    rng: np.random.Generator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    absolute: bool,
) -> None:
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")  # the workflow records paths from its folder
    store = _chain(rng, tmp_path / "run", absolute=absolute)
    recorded = read_provenance(store)["inputs"][0]
    assert recorded["stage"] == "features/clip" and Path(recorded["path"]).is_absolute() is absolute
    shutil.move(tmp_path / "run" / "results", tmp_path / "elsewhere")
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    moved = tmp_path / "elsewhere" / "encoding" / "m-e1" / "sub-01.zarr"
    assert main(["inspect", str(moved)]) == 0
    out = capsys.readouterr().out
    assert "stage=encoding/m version=e1" in out
    assert "stage=features/clip version=f1" in out
    assert str(tmp_path / "elsewhere" / "features" / "clip-f1" / "projection.zarr") in out

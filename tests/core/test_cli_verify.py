"""`neuroflow inspect --verify`: stores checked against their manifests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import PARTIAL_MARKER, build_provenance, write_dataset
from neuroflow.cli import main
from neuroflow.manifests import MANIFEST_NAME


def _store(path: Path, rng: np.random.Generator) -> Path:
    """A 5 x 11 store in uneven 2 x 4 chunks."""
    ds = xr.Dataset({"bold": (("time", "voxel"), rng.standard_normal((5, 11)).astype("float32"))})
    return write_dataset(
        ds,
        path,
        provenance=build_provenance(stage="demo", version="abc", config={}),
        encoding={"bold": {"chunks": (2, 4)}},
    )


def _flip_byte(chunk: Path) -> None:
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))


def test_verify_intact_store(
    tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "a.zarr", rng)
    assert main(["inspect", "--verify", str(store)]) == 0
    n_files = sum(1 for p in store.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)
    assert capsys.readouterr().out.strip() == f"Verified: {n_files} files, 0.0 MB, all intact"


def test_verify_damaged_store(
    tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "a.zarr", rng)
    (store / "bold" / "c" / "1" / "2").unlink()
    _flip_byte(store / "bold" / "c" / "2" / "0")
    assert main(["inspect", "--verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert f"Store {store} is damaged (2 problems):" in out
    assert "  bold/c/1/2: missing" in out
    assert "  bold/c/2/0: checksum differs" in out
    # without --verify the size check alone sees the lost chunk, not the flipped byte
    assert main(["inspect", str(store)]) == 1
    out = capsys.readouterr().out
    assert "bold/c/1/2: missing" in out and "bold/c/2/0" not in out


def test_plain_inspect_reports_integrity(
    tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store(tmp_path / "a.zarr", rng)
    assert main(["inspect", str(store)]) == 0
    assert "names and sizes match the manifest" in capsys.readouterr().out
    (store / MANIFEST_NAME).unlink()
    assert main(["inspect", str(store)]) == 0
    assert "Integrity: no manifest" in capsys.readouterr().out
    assert main(["inspect", "--verify", str(store)]) == 0
    assert "has no manifest" in capsys.readouterr().out


def test_verify_folder(
    tmp_path: Path, rng: np.random.Generator, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    _store(results / "stage_a" / "v1" / "a.zarr", rng)
    damaged = _store(results / "stage_b" / "v2" / "b.zarr", rng)
    legacy = _store(results / "stage_b" / "v2" / "c.zarr", rng)
    (legacy / MANIFEST_NAME).unlink()
    partial = results / "stage_b" / "v2" / f".d.zarr{PARTIAL_MARKER}0123abcd"
    partial.mkdir()
    (partial / "zarr.json").write_text("{}")  # a write in progress is not checked
    assert main(["inspect", "--verify", str(results)]) == 0
    out = capsys.readouterr().out
    assert "Verified 3 stores under" in out
    assert "2 intact, 0 damaged, 1 without a manifest" in out

    _flip_byte(damaged / "bold" / "c" / "0" / "1")
    assert main(["inspect", "--verify", str(results)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"DAMAGED {damaged}: bold/c/0/1: checksum differs (same size, other bytes)"
    assert "1 intact, 1 damaged, 1 without a manifest" in lines[1]
    assert len(lines) == 2


def test_verify_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--verify", str(tmp_path / "missing.zarr")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "file.txt").write_text("x")
    assert main(["inspect", "--verify", str(tmp_path / "file.txt")]) == 2
    assert "is not a neuroflow artifact" in capsys.readouterr().err

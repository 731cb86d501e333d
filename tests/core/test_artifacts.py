"""Versioned, atomic zarr artifacts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import (
    PARTIAL_MARKER,
    atomic_directory,
    build_provenance,
    canonical_json,
    is_partial,
    open_dataset,
    read_provenance,
    version_id,
    write_dataset,
)


def _dataset(rng: np.random.Generator) -> xr.Dataset:
    data = rng.standard_normal((7, 9)).astype("float32")
    return xr.Dataset(
        {"bold": (("time", "voxel"), data, {"units": "a.u."})},
        coords={"time": ("time", np.arange(7) * 1.5, {"units": "s"}), "voxel": np.arange(9)},
    )


def test_version_id_stable_and_sensitive() -> None:
    a = version_id(stage="s", config={"x": 1, "y": [1, 2]}, inputs={"up": "abc"})
    b = version_id(stage="s", config={"y": [1, 2], "x": 1}, inputs={"up": "abc"})
    assert a == b and len(a) == 10
    assert a != version_id(stage="s", config={"x": 2, "y": [1, 2]}, inputs={"up": "abc"})
    assert a != version_id(stage="s", config={"x": 1, "y": [1, 2]}, inputs={"up": "abd"})
    assert a != version_id(
        stage="s", config={"x": 1, "y": [1, 2]}, inputs={"up": "abc"}, format_version=2
    )
    assert a != version_id(stage="t", config={"x": 1, "y": [1, 2]}, inputs={"up": "abc"})


def test_version_id_rejects_bad_format_version() -> None:
    with pytest.raises(ValueError, match="format_version must be a positive int, got 0"):
        version_id(stage="s", config={}, format_version=0)


def test_canonical_json_handles_numpy_and_paths() -> None:
    text = canonical_json({"b": np.float32(1.5), "a": Path("x/y"), "c": (1, 2)})
    assert text == '{"a":"x/y","b":1.5,"c":[1,2]}'


def test_write_and_read_roundtrip(tmp_path: Path, rng: np.random.Generator) -> None:
    ds = _dataset(rng)
    prov = build_provenance(stage="demo", version="abc", config={"k": 1})
    out = write_dataset(ds, tmp_path / "a.zarr", provenance=prov)
    back = open_dataset(out)
    np.testing.assert_array_equal(back["bold"].values, ds["bold"].values)
    assert back["bold"].dims == ("time", "voxel")
    assert back["time"].attrs["units"] == "s"
    record = read_provenance(out)
    assert record["stage"] == "demo" and record["config"] == {"k": 1}
    assert {"python", "numpy", "xarray", "zarr"} <= set(record["software"])
    # Plain xarray opens it too.
    assert xr.open_zarr(out)["bold"].shape == (7, 9)


def test_provenance_records_upstream_versions(tmp_path: Path, rng: np.random.Generator) -> None:
    up = write_dataset(
        _dataset(rng),
        tmp_path / "up.zarr",
        provenance=build_provenance(stage="up", version="v1", config={}),
    )
    prov = build_provenance(stage="down", version="v2", config={}, inputs=[up, tmp_path / "raw"])
    assert prov["inputs"][0] == {"path": str(up), "stage": "up", "version": "v1"}
    assert prov["inputs"][1] == {"path": str(tmp_path / "raw")}


def test_failed_write_leaves_previous_store_intact(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    target = tmp_path / "a.zarr"
    first = _dataset(rng)
    write_dataset(first, target, provenance={"stage": "x"})
    with pytest.raises(RuntimeError, match="boom"), atomic_directory(target) as tmp:
        (tmp / "zarr.json").write_text("{}")
        raise RuntimeError("boom")
    np.testing.assert_array_equal(open_dataset(target)["bold"].values, first["bold"].values)
    assert [p.name for p in tmp_path.iterdir()] == ["a.zarr"]


def test_exception_during_write_leaves_nothing(tmp_path: Path) -> None:
    bad = xr.Dataset({"x": ("a", np.array([object(), object()], dtype=object))})
    with pytest.raises(Exception):  # noqa: B017 - any serialisation error
        write_dataset(bad, tmp_path / "b.zarr", provenance={})
    assert list(tmp_path.iterdir()) == []


_SLOW_WRITER = """
import sys, time
from neuroflow.artifacts import atomic_directory
with atomic_directory(sys.argv[1]) as tmp:
    (tmp / "zarr.json").write_text("{}")
    time.sleep(60)
"""


def test_killed_write_leaves_no_complete_looking_store(tmp_path: Path) -> None:
    target = tmp_path / "killed.zarr"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)])
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not any(
            PARTIAL_MARKER in p.name for p in tmp_path.iterdir()
        ):
            time.sleep(0.05)
        assert any(PARTIAL_MARKER in p.name for p in tmp_path.iterdir()), "writer never started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert not target.exists()
    leftovers = list(tmp_path.iterdir())
    assert leftovers and all(is_partial(p) for p in leftovers)
    with pytest.raises(ValueError, match="incomplete write"):
        open_dataset(leftovers[0])


def test_write_dataset_rejects_non_dataset(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"ds must be an xarray\.Dataset, got ndarray"):
        write_dataset(np.zeros(3), tmp_path / "c.zarr", provenance={})

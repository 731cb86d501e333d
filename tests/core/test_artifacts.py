"""Versioned, atomic zarr artifacts."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import (
    PARTIAL_MARKER,
    atomic_directory,
    build_provenance,
    canonical_json,
    find_stores,
    is_partial,
    open_dataset,
    read_provenance,
    software_versions,
    version_id,
    write_dataset,
)
from neuroflow.manifests import (
    MANIFEST_NAME,
    DamagedStoreError,
    file_checksum,
    has_manifest,
    read_manifest,
    verify_store,
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


def test_software_versions_are_the_installed_ones_in_a_dict_of_its_own() -> None:
    import importlib.metadata
    import platform

    first = software_versions()
    assert first["python"] == platform.python_version()
    assert first["numpy"] == importlib.metadata.version("numpy") == np.__version__
    first["numpy"] = "0"
    assert software_versions()["numpy"] == np.__version__
    assert build_provenance(stage="s", version="v", config={})["software"] == software_versions()


def test_text_is_written_without_zarr_spec_warnings(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    ds = _dataset(rng).assign_coords(
        voxel=np.array([f"v{i}" for i in range(9)]),  # fixed-width unicode index
        roi=("voxel", np.array(["early_visual", "semantic", "n/a"] * 3)),
    )
    ds["label"] = ("time", np.array(["a", "bb", "ccc", "d", "e", "f", "g"]))
    ds.attrs["note"] = "kept"
    prov = build_provenance(stage="demo", version="abc", config={})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # zarr's unstable-dtype and consolidated notices fail
        out = write_dataset(ds, tmp_path / "text.zarr", provenance=prov)
        back = open_dataset(out)
        assert back["roi"].values.tolist() == ds["roi"].values.tolist()
        assert back["voxel"].values.tolist() == ds["voxel"].values.tolist()
        assert back["label"].values.tolist() == ds["label"].values.tolist()
    assert back.attrs["note"] == "kept"
    assert ds["roi"].dtype.kind == "U"  # the caller's dataset is left as it was


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


# --------------------------------------------------------------------------- manifests
def _chunked_store(path: Path, rng: np.random.Generator) -> Path:
    """A 7 x 9 store in uneven 3 x 4 chunks (9 chunk files for ``bold``)."""
    return write_dataset(
        _dataset(rng),
        path,
        provenance=build_provenance(stage="demo", version="abc", config={}),
        encoding={"bold": {"chunks": (3, 4)}},
    )


def _files_on_disk(store: Path) -> dict[str, int]:
    return {
        p.relative_to(store).as_posix(): p.stat().st_size for p in store.rglob("*") if p.is_file()
    }


def test_manifest_lists_every_file_with_size_and_checksum(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    manifest = read_manifest(store)
    assert manifest is not None and has_manifest(store)
    on_disk = _files_on_disk(store)
    assert on_disk.pop(MANIFEST_NAME) > 0  # the manifest does not list itself
    assert {rel: e["size"] for rel, e in manifest["files"].items()} == on_disk
    assert "zarr.json" in on_disk and "bold/c/2/2" in on_disk  # metadata and the ragged chunk
    for rel, entry in manifest["files"].items():
        assert entry["checksum"] == file_checksum(store / rel)
    assert verify_store(store, checksums=True) == []
    assert verify_store(store, checksums=False) == []


def test_lost_chunk_makes_open_dataset_raise(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    (store / "bold" / "c" / "1" / "2").unlink()
    # zarr alone reads the lost chunk as fill values without complaint
    assert np.isnan(xr.open_zarr(store)["bold"].values[3:6, 8:]).all()
    with pytest.raises(
        DamagedStoreError,
        match=r"a\.zarr is damaged: 1 file listed in its manifest is missing \(bold/c/1/2\)\. "
        r"Rerun the stage that wrote it, 'demo' \(delete the store, then run snakemake again\)",
    ):
        open_dataset(store)
    assert verify_store(store, checksums=False) == ["bold/c/1/2: missing"]


def test_many_lost_chunks_are_summarised(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    for name in ("0/0", "0/1", "1/1", "2/0"):
        (store / "bold" / "c" / name).unlink()
    with pytest.raises(
        DamagedStoreError,
        match=r"4 files listed in its manifest are missing \(bold/c/0/0, bold/c/0/1, "
        r"bold/c/1/1, \.\.\.\)",
    ):
        open_dataset(store)


def test_truncated_chunk_is_caught_by_size(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    chunk = store / "bold" / "c" / "0" / "1"
    size = chunk.stat().st_size
    chunk.write_bytes(chunk.read_bytes()[: size // 2])
    with pytest.raises(
        DamagedStoreError, match=r"1 file has another size than its manifest records \(bold/c/0/1\)"
    ):
        open_dataset(store)
    assert verify_store(store, checksums=False) == [
        f"bold/c/0/1: size differs ({size // 2} bytes, the manifest records {size})"
    ]


def test_flipped_byte_is_caught_by_checksum(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    chunk = store / "bold" / "c" / "2" / "1"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    assert verify_store(store, checksums=False) == []  # same size: the cheap check passes
    assert verify_store(store, checksums=True) == [
        "bold/c/2/1: checksum differs (same size, other bytes)"
    ]


def test_unlisted_file_is_reported_hidden_files_are_not(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    (store / ".DS_Store").write_bytes(b"\0" * 5)
    assert verify_store(store, checksums=True) == []
    (store / "bold" / "c" / "3").mkdir()
    (store / "bold" / "c" / "3" / "0").write_bytes(b"\1" * 11)
    assert verify_store(store, checksums=False) == ["bold/c/3/0: not listed in the manifest"]
    with pytest.raises(DamagedStoreError, match=r"1 file is not listed in its manifest"):
        open_dataset(store)


def test_unreadable_manifest_is_damage(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    (store / MANIFEST_NAME).write_text('{"files": ')
    with pytest.raises(DamagedStoreError, match=r"its manifest is unreadable \(.*valid JSON"):
        open_dataset(store)
    assert verify_store(store, checksums=True)[0].startswith(f"{MANIFEST_NAME}: unreadable")


def test_store_without_manifest_still_opens(tmp_path: Path, rng: np.random.Generator) -> None:
    store = _chunked_store(tmp_path / "a.zarr", rng)
    (store / MANIFEST_NAME).unlink()
    assert not has_manifest(store) and read_manifest(store) is None
    assert verify_store(store, checksums=True) == []
    assert open_dataset(store)["bold"].shape == (7, 9)


def test_verify_store_rejects_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No artifact at"):
        verify_store(tmp_path / "none.zarr", checksums=False)


def test_atomic_directory_writes_manifest_of_stores_only(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    # stores built chunk by chunk (feature extraction) get a manifest too
    with atomic_directory(tmp_path / "f.zarr") as tmp:
        _dataset(rng).to_zarr(tmp, mode="w", zarr_format=3)
    assert has_manifest(tmp_path / "f.zarr")
    assert verify_store(tmp_path / "f.zarr", checksums=True) == []
    with atomic_directory(tmp_path / "plots") as tmp:
        (tmp / "a.png").write_bytes(b"png")
    assert not has_manifest(tmp_path / "plots")


def test_find_stores_skips_partial_and_hidden_folders(
    tmp_path: Path, rng: np.random.Generator
) -> None:
    a = _chunked_store(tmp_path / "s1" / "v1" / "a.zarr", rng)
    b = _chunked_store(tmp_path / "s2" / "b.zarr", rng)
    partial = tmp_path / "s2" / f".c.zarr{PARTIAL_MARKER}0123abcd"
    partial.mkdir()
    (partial / "zarr.json").write_text("{}")
    assert find_stores(tmp_path) == [a, b]
    assert find_stores(a) == [a]


def test_a_jobs_warnings_are_kept_in_the_stores_it_writes(tmp_path):
    import logging
    import warnings

    from neuroflow.artifacts import build_provenance, write_dataset
    from neuroflow.stage_warnings import record_warnings, store_warnings

    rng = np.random.default_rng(3)
    ds = xr.Dataset({"x": (("time", "voxel"), rng.standard_normal((5, 3)))})
    prov = build_provenance(stage="demo", version="0123456789", config={})
    write_dataset(ds, tmp_path / "outside.zarr", provenance=prov)
    assert store_warnings(tmp_path / "outside.zarr")[0] == []
    with record_warnings():
        write_dataset(ds, tmp_path / "clean.zarr", provenance=prov)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("TR of sub-01 differs from the header", UserWarning, stacklevel=1)
        with record_warnings():  # a stage's own block inside the job's
            logging.getLogger("neuroflow.test").warning("top_k 5 dropped: 4 test items")
        write_dataset(ds, tmp_path / "after.zarr", provenance=prov)
        explicit = ds.assign_attrs(warnings=["set by the stage"])
        write_dataset(explicit, tmp_path / "explicit.zarr", provenance=prov)
    assert store_warnings(tmp_path / "clean.zarr")[0] == []
    assert store_warnings(tmp_path / "after.zarr")[0] == [
        "TR of sub-01 differs from the header",
        "top_k 5 dropped: 4 test items",
    ]
    assert store_warnings(tmp_path / "explicit.zarr")[0] == ["set by the stage"]


def test_a_store_written_again_in_a_job_keeps_the_intact_one(tmp_path):
    """In a workflow job, a second writer of one versioned store (a concurrent run)
    never replaces it; outside jobs a new write replaces the old store."""
    from neuroflow.artifacts import (
        build_provenance,
        keep_committed_stores,
        open_dataset,
        write_dataset,
    )

    rng = np.random.default_rng(5)
    first = xr.Dataset({"x": (("time", "voxel"), rng.standard_normal((6, 5)))})
    second = first + 1.0
    prov = build_provenance(stage="demo", version="0123456789", config={})
    path = tmp_path / "run.zarr"
    write_dataset(first, path, provenance=prov)
    with keep_committed_stores():
        write_dataset(second, path, provenance=prov)
        with open_dataset(path) as got:
            xr.testing.assert_equal(got.load(), first)
        assert [p.name for p in tmp_path.iterdir()] == ["run.zarr"]  # nothing left behind
        # a damaged store is replaced by the new write
        next(p for p in (path / "x" / "c").rglob("*") if p.is_file()).unlink()
        write_dataset(second, path, provenance=prov)
        with open_dataset(path) as got:
            xr.testing.assert_equal(got.load(), second)
    write_dataset(first, path, provenance=prov)  # outside a job: replaced
    with open_dataset(path) as got:
        xr.testing.assert_equal(got.load(), first)


def test_committed_folder_is_kept_inside_a_job(tmp_path: Path) -> None:
    """Inside a workflow job a finished folder at the final name is a concurrent copy."""
    from neuroflow.artifacts import atomic_directory, keep_committed_stores

    folder = tmp_path / "plots"
    with atomic_directory(folder) as tmp:
        (tmp / "a.png").write_bytes(b"first")
    with keep_committed_stores(), atomic_directory(folder) as tmp:
        (tmp / "a.png").write_bytes(b"second")
    assert (folder / "a.png").read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["plots"]  # no partial or old copy left
    with atomic_directory(folder) as tmp:  # outside a job: replaced as before
        (tmp / "a.png").write_bytes(b"third")
    assert (folder / "a.png").read_bytes() == b"third"

"""Text in stores reads back as ordinary numpy/pandas strings."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import (
    build_provenance,
    fixed_width_strings,
    open_dataset,
    python_strings,
    write_dataset,
)


def _store(rng: np.random.Generator, path: Path) -> Path:
    n = 7
    stimuli = [f"img-{i:03d}.png" for i in range(n)]
    ds = xr.Dataset(
        {
            "x": (("epoch", "channel"), rng.standard_normal((n, 3))),
            "label": (("epoch",), np.array(rng.choice(["face", "house"], n))),
            "note": ((), "déjà vu"),
        },
        coords={
            "epoch": np.arange(n),
            "channel": np.array(["Fz", "Cz", "Pz"], dtype=object),
            "stimulus": ("epoch", np.array(stimuli, dtype=object)),
            "condition": ("epoch", pd.array(rng.choice(["a", "bb"], n), dtype="string")),
        },
    )
    prov = build_provenance(stage="preprocess_eeg", version="s1", config={})
    with warnings.catch_warnings():
        # no format notice reaches a job's log
        warnings.simplefilter("error")
        return write_dataset(ds, path, provenance=prov)


def test_text_reads_back_as_str_arrays(rng: np.random.Generator, tmp_path: Path) -> None:
    store = _store(rng, tmp_path / "sub-01_epo.zarr")
    ds = open_dataset(store)
    for name in ("stimulus", "condition", "channel", "label", "note"):
        values = ds[name].values
        assert values.dtype.kind == "O", (name, values.dtype)
        assert all(type(v) is str for v in values.ravel()), name
        assert values.astype(str).ravel().tolist() == [str(v) for v in values.ravel()]
    assert ds["stimulus"].values.astype(str)[2] == "img-002.png"
    assert str(ds["note"].values) == "déjà vu"
    frame = ds[["label"]].to_dataframe()
    assert frame["stimulus"].str.startswith("img-").all()
    conditions = ds["condition"].values
    assert np.char.add(conditions, "|").tolist() == [f"{c}|" for c in conditions]
    # a longer label written into a read array is kept whole (no fixed width)
    labels = ds["label"].values.copy()
    labels[0] = "a much longer label"
    assert labels[0] == "a much longer label"
    assert ds["channel"].values.astype(str).tolist() == ["Fz", "Cz", "Pz"]


def test_python_strings_leaves_other_variables_alone(rng: np.random.Generator) -> None:
    native = np.array(["a", "bcd"], dtype=np.dtypes.StringDType())
    ds = xr.Dataset(
        {"v": (("k",), rng.standard_normal(2)), "s": (("k",), native)},
        coords={"k": [3, 5], "tag": ("k", native.copy())},
    )
    out = python_strings(ds)
    assert out["s"].dtype == object and out["tag"].dtype == object
    assert "tag" in out.coords and out["s"].values.tolist() == ["a", "bcd"]
    assert out["v"].identical(ds["v"]) and ds["s"].dtype.kind == "T"  # the input is kept
    plain = ds.drop_vars(["s", "tag"])
    assert python_strings(plain) is plain


def test_plain_xarray_reads_text_as_numpy_strings(rng: np.random.Generator, tmp_path: Path) -> None:
    store = _store(rng, tmp_path / "sub-01_epo.zarr")
    ds = xr.open_zarr(store)
    for name in ("stimulus", "condition", "channel", "label", "note"):
        assert ds[name].dtype.kind == "U", (name, ds[name].dtype)
    assert ds["stimulus"].values.astype(str).tolist() == [f"img-{i:03d}.png" for i in range(7)]
    assert str(ds["note"].values) == "déjà vu"
    assert pd.Index(ds["channel"].values).tolist() == ["Fz", "Cz", "Pz"]
    assert ds.sel(channel="Cz")["x"].shape == (7,)
    stored = json.loads((store / "stimulus" / "zarr.json").read_text())
    assert stored["data_type"]["name"] == "fixed_length_utf32"


def test_fixed_width_strings_converts_text_only(rng: np.random.Generator) -> None:
    native = np.array(["a", "bcd"], dtype=np.dtypes.StringDType())
    ds = xr.Dataset(
        {
            "v": (("k",), rng.standard_normal(2)),
            "s": (("k",), native),
            "mixed": (("k",), np.array(["a", None], dtype=object)),
            "empty": (("k", "j"), np.full((2, 0), "", dtype=object)),
        },
        coords={"k": [3, 5], "tag": ("k", np.array(["x", ""], dtype=object))},
    )
    out = fixed_width_strings(ds)
    assert out["s"].dtype == "<U3" and out["tag"].dtype == "<U1" and "tag" in out.coords
    assert out["empty"].dtype == "<U1" and out["empty"].shape == (2, 0)
    assert out["mixed"].dtype == object  # not text only: left as it is
    assert out["v"].identical(ds["v"]) and ds["s"].dtype.kind == "T"  # the input is kept
    plain = ds[["v"]].drop_vars("tag")
    assert fixed_width_strings(plain) is plain


def test_stores_of_earlier_versions_still_read_as_str(tmp_path: Path) -> None:
    """Stores written with variable-length strings (``StringDType`` when read)."""
    ds = xr.Dataset(coords={"stimulus": np.array(["a.png", "bb.png"], dtype=object)})
    ds.to_zarr(tmp_path / "old.zarr", zarr_format=3, consolidated=False)
    assert xr.open_zarr(tmp_path / "old.zarr", consolidated=False)["stimulus"].dtype.kind == "T"
    opened = open_dataset(tmp_path / "old.zarr", consolidated=False)
    assert opened["stimulus"].values.tolist() == ["a.png", "bb.png"]
    assert opened["stimulus"].dtype == object

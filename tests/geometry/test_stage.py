"""The geometry stage on feature stores written by the feature stage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.features.extract import extract_features
from neuroflow.features.registry import Extractor, register_extractor
from neuroflow.geometry import (
    eigenspectrum,
    geometry_of_features,
    geometry_table,
    participation_ratio,
    plot_geometry,
    read_class_labels,
    read_held_out,
    resolve_config,
    write_geometry,
)
from neuroflow.variables import undescribed

N_STIM = 41
IDS = [f"img/s{i:02d}.png" for i in range(N_STIM)]
CAPTIONS = {s: str(i) for i, s in enumerate(IDS)}
CLASSES = np.array(["animal", "tool", "face"])[np.arange(N_STIM) % 3]
PROV = {"stage": "geometry", "version": "0123456789"}


def _rows(layer: str) -> np.ndarray:
    """Deterministic rows per layer: the deeper, the further apart the classes."""
    rng = np.random.default_rng(11)
    base = rng.standard_normal((N_STIM, 13))
    gain = {"early": 0.0, "mid": 2.0, "late": 8.0, "low": 0.5, "high": 6.0}[layer]
    codes = np.unique(CLASSES, return_inverse=True)[1]
    base[:, :3] += gain * np.eye(3)[codes]
    return base


@register_extractor("test_geometry_three", modalities=("text",))
class ThreeLayers(Extractor):
    """Rows looked up by caption (the row number), three layers."""

    default_layers = ("early", "mid", "late")

    def layer_names(self):
        return list(self.default_layers)

    def extract(self, batch):
        rows = [int(text.split()[0]) for _, text in batch]
        return {name: _rows(name)[rows] for name in self.layer_names()}


@register_extractor("test_geometry_two", modalities=("text",))
class TwoLayers(ThreeLayers):
    """The same with two layers of other widths."""

    default_layers = ("low", "high")

    def extract(self, batch):
        rows = [int(text.split()[0]) for _, text in batch]
        return {name: _rows(name)[rows][:, :9] for name in self.layer_names()}


def _extract(tmp_path: Path, extractor: str, name: str) -> dict[str, Path]:
    return extract_features(
        stimuli_dir=tmp_path,
        stimulus_ids=IDS,
        captions=CAPTIONS,
        output=tmp_path / "features" / name,
        config={"extractor": extractor, "name": name, "batch_size": 8},
        provenance={"stage": "extract_features", "version": "feat"},
    )


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, Path]:
    """Five stores: space ``deep`` (early, mid, late) and ``shallow`` (low, high)."""
    out = {}
    for extractor, name in (("test_geometry_three", "deep"), ("test_geometry_two", "shallow")):
        for layer, path in _extract(tmp_path, extractor, name).items():
            out[f"{name}:{layer}"] = path
    return out


def _labels() -> pd.Series:
    return pd.Series(CLASSES, index=pd.Index(IDS, name="stimulus"))


def test_stage_without_labels(tmp_path, stores):
    ds = geometry_of_features(stores, labels=None, cfg=None, provenance=PROV)
    out = write_geometry(tmp_path / "geometry.zarr", ds, PROV)
    opened = xr.open_zarr(out)
    assert dict(opened.sizes) == {"feature_space": 2, "layer": 3, "rank": 13, "bound": 2}
    assert list(opened["feature_space"].values) == ["deep", "shallow"]
    assert opened["layer_name"].values.tolist() == [["early", "mid", "late"], ["low", "high", ""]]
    np.testing.assert_allclose(opened["layer_depth"].values[0], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(opened["layer_depth"].values[1, :2], [0.0, 1.0])
    assert np.isnan(opened["layer_depth"].values[1, 2])
    for name in ("participation_ratio", "power_law_alpha", "power_law_r2"):
        assert opened[name].dims == ("feature_space", "layer")
    assert opened["eigenspectrum"].dims == ("feature_space", "layer", "rank")
    assert not np.isnan(opened["eigenspectrum"].values).any()
    assert opened["n_eigenvalues"].values.tolist() == [[13, 13, 13], [9, 9, 0]]
    assert opened["n_features"].values.tolist() == [[13, 13, 13], [9, 9, 0]]
    assert opened["n_stimuli"].values.tolist() == [[N_STIM] * 3, [N_STIM, N_STIM, 0]]
    assert np.all(opened["eigenspectrum"].values[1, :2, 9:] == 0)
    assert "class" not in opened.dims
    assert undescribed(opened) == []
    for name in opened.data_vars:
        assert opened[name].attrs["units"], name
    assert opened.attrs[PROVENANCE_KEY]["stage"] == "geometry"
    # the metrics are those of the stored rows
    stored = open_dataset(stores["deep:mid"])["features"].values.astype(np.float64)
    expected = participation_ratio(eigenspectrum(stored))
    assert float(opened["participation_ratio"].sel(feature_space="deep", layer=1)) == (
        pytest.approx(expected, rel=1e-10)
    )
    np.testing.assert_allclose(opened["eigenspectrum"].values[0, 1], eigenspectrum(stored))


def test_stage_with_labels(tmp_path, stores):
    tsv = tmp_path / "labels.tsv"
    pd.DataFrame({"stim_file": IDS, "label": CLASSES}).to_csv(tsv, sep="\t", index=False)
    labels = read_class_labels(tsv)
    ds = geometry_of_features(stores, labels=labels, cfg={"n_folds": 3}, provenance=PROV)
    out = write_geometry(tmp_path / "geometry.zarr", ds, PROV)
    opened = xr.open_zarr(out)
    assert list(opened["class"].values) == ["animal", "face", "tool"]
    assert opened["manifold_dimension"].dims == ("feature_space", "layer", "class")
    assert opened["manifold_radius"].dims == ("feature_space", "layer", "class")
    assert opened["class_size"].values.tolist() == [14, 13, 14]
    assert undescribed(opened) == []
    fisher = opened["fisher_ratio"].values[0]
    assert fisher[0] < fisher[1] < fisher[2]  # classes drift apart with depth
    sep = opened["linear_separability"].values[0]
    assert sep[2] > 0.9 and sep[2] > sep[0]
    assert np.all(opened["manifold_radius"].values[0, 2] < opened["manifold_radius"].values[0, 0])
    assert np.isnan(opened["fisher_ratio"].values[1, 2])
    table = geometry_table(opened)
    assert set(table["feature_space"]) == {"deep", "shallow"}
    assert len(table) == 5 * 7
    assert not table["value"].isna().any()
    scores = pd.DataFrame(
        {
            "feature_space": ["deep"] * 3 + ["shallow"] * 2,
            "layer": ["early", "mid", "late", "low", "high"],
            "analysis": ["encoding r"] * 3 + ["RSA"] * 2,
            "score": [0.1, 0.2, 0.3, 0.05, 0.15],
        }
    )
    fig = plot_geometry(table, scores)
    assert len(fig.axes) == 6 + 2
    assert [ax.get_title() for ax in fig.axes][-2:] == ["encoding r", "RSA"]
    with pytest.raises(ValueError, match=r"scores must have columns .*\(missing \['score'\]\)"):
        plot_geometry(table, scores.drop(columns="score"))


def test_labels_select_the_stimulus_set(stores):
    labels = _labels().iloc[::2]
    ds = geometry_of_features(stores, labels=labels, cfg=None, provenance=PROV)
    assert ds["n_stimuli"].values[0].tolist() == [21, 21, 21]


def test_nan_features_rejected_naming_the_file(tmp_path):
    data = np.random.default_rng(3).standard_normal((17, 6)).astype(np.float32)
    data[4, 2] = np.nan
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), data)},
        coords={"stimulus": np.array(IDS[:17], dtype=object), "feature": np.arange(6)},
        attrs={"feature_set": "broken", "layer": "out"},
    )
    path = write_dataset(ds, tmp_path / "broken" / "out.zarr", provenance={})
    with pytest.raises(ValueError, match=r"broken/out\.zarr: features must be finite, got 1 NaN"):
        geometry_of_features({"broken:out": path}, labels=None, cfg=None, provenance=PROV)


def test_stores_are_the_feature_stage_layout(stores):
    group = zarr.open_group(str(stores["deep:late"]), mode="r")
    assert group["features"].shape == (N_STIM, 13)
    assert group.attrs["feature_set"] == "deep" and group.attrs["layer"] == "late"


def test_missing_labels_rejected(stores):
    labels = _labels()
    labels.iloc[0] = None
    with pytest.raises(ValueError, match="labels must not be missing, got 1"):
        geometry_of_features(stores, labels=labels, cfg=None, provenance=PROV)


def test_inputs_checked(stores, tmp_path):
    with pytest.raises(ValueError, match="at least one feature store, got none"):
        geometry_of_features({}, labels=None, cfg=None, provenance=PROV)
    with pytest.raises(ValueError, match=r"`geometry.fit_range` must be null .* got \[5, 2\]"):
        resolve_config({"fit_range": [5, 2]})
    with pytest.raises(ValueError, match=r"Unknown key 'geometry\.no_such_key'"):
        resolve_config({"no_such_key": 1})
    unknown = pd.Series(["a", "b"], index=["x.png", "y.png"])
    with pytest.raises(ValueError, match="no features for stimulus id"):
        geometry_of_features(stores, labels=unknown, cfg=None, provenance=PROV)
    bad = tmp_path / "bad.tsv"
    bad.write_text("stim_file\tcategory\nx.png\ta\n")
    with pytest.raises(ValueError, match="must have a column 'label'"):
        read_class_labels(bad)


def _store(tmp_path: Path, space: str, layer: str, X: np.ndarray, ids: list[str]) -> Path:
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), X.astype(np.float32))},
        coords={"stimulus": np.array(ids, dtype=object), "feature": np.arange(X.shape[1])},
        attrs={"feature_set": space, "layer": layer},
    )
    return write_dataset(ds, tmp_path / space / f"{layer}.zarr", provenance={})


def test_constant_class_is_left_out_of_the_store(tmp_path):
    from neuroflow.geometry import class_manifold_geometry

    rng = np.random.default_rng(8)
    classes = np.repeat(["a", "b", "c", "d"], [9, 14, 5, 11])
    ids = [f"x{i:02d}.png" for i in range(classes.size)]
    X = (
        rng.standard_normal((classes.size, 7))
        + 3.0 * np.eye(4, 7)[np.searchsorted(list("abcd"), classes)]
    )
    flat = X.copy()
    flat[classes == "c"] = 0.25  # every member of class c has the same features
    paths = {"s:plain": _store(tmp_path, "s", "plain", X, ids)}
    paths["s:flat"] = _store(tmp_path, "s", "flat", flat, ids)
    labels = pd.Series(classes, index=ids)
    ds = geometry_of_features(paths, labels=labels, cfg={"n_folds": 3}, provenance=PROV)
    out = xr.open_zarr(write_geometry(tmp_path / "geometry.zarr", ds, PROV))
    assert out["n_degenerate_classes"].values.tolist() == [[0, 1]]
    assert out["class_metrics_note"].values.tolist() == [
        ["", "left out 1 of 4 classes (zero within-class variance: 'c')"]
    ]
    assert "left out of the class metrics" in out.attrs["degenerate_classes"]
    dim = out["manifold_dimension"].values[0]
    assert (
        np.isfinite(dim[0]).all() and np.isnan(dim[1, 2]) and np.isfinite(dim[1, [0, 1, 3]]).all()
    )
    kept = classes != "c"
    stored = open_dataset(paths["s:flat"])["features"].values.astype(np.float64)
    ref = class_manifold_geometry(stored[kept], classes[kept], n_folds=3, seed=0)
    assert float(out["fisher_ratio"].values[0, 1]) == pytest.approx(ref.fisher_ratio, rel=1e-10)
    np.testing.assert_allclose(dim[1, [0, 1, 3]], ref.dimension, rtol=1e-10)
    table = geometry_table(out)
    assert not table["value"].isna().any()
    row = table[(table["layer"] == "flat") & (table["metric"] == "manifold_dimension")]
    assert row["value"].item() == pytest.approx(np.mean(ref.dimension), rel=1e-10)
    assert undescribed(out) == []


def test_ood_readout_per_layer(tmp_path):
    rng = np.random.default_rng(21)
    sizes_in, sizes_out = (26, 17, 33), (12, 15, 9)
    y_in = np.repeat(["cat", "cup", "car"], sizes_in)
    y_out = np.repeat(["cat", "cup", "car"], sizes_out)
    code_in = np.unique(y_in, return_inverse=True)[1]
    code_out = np.unique(y_out, return_inverse=True)[1]
    axes = 4.0 * np.eye(3, 11)
    train = axes[code_in] + rng.standard_normal((y_in.size, 11))
    shift = 1.5 + 1.5 * rng.standard_normal((y_out.size, 11))
    layers = {
        "transfers": np.concatenate([train, axes[code_out] + shift]),
        "wiped": np.concatenate([train, shift]),  # the shift erases the classes
    }
    ids = [f"photo/{i:02d}.png" for i in range(y_in.size)]
    ids += [f"sketch/{i:02d}.png" for i in range(y_out.size)]
    paths = {f"net:{k}": _store(tmp_path, "net", k, X, ids) for k, X in layers.items()}
    tsv = tmp_path / "labels.tsv"
    pd.DataFrame(
        {
            "stim_file": ids,
            "label": np.concatenate([y_in, y_out]),
            "set": ["photo"] * y_in.size + ["sketch"] * y_out.size,
        }
    ).to_csv(tsv, sep="\t", index=False)
    labels = read_class_labels(tsv)
    held_out = read_held_out(tsv, distribution_column="set", train_distribution="photo")
    assert held_out.sum() == y_out.size and held_out.index.tolist() == ids
    cfg = {"n_folds": 4, "ood_permutations": 500, "seed": 2}
    ds = geometry_of_features(paths, labels=labels, cfg=cfg, provenance=PROV, held_out=held_out)
    out = xr.open_zarr(write_geometry(tmp_path / "geometry.zarr", ds, PROV))
    acc, p = out["ood_accuracy"].values[0], out["ood_p_value"].values[0]
    print(f"OOD accuracy {acc}, p {p}, in-distribution {out['ood_in_accuracy'].values[0]}")
    np.testing.assert_allclose(out["ood_chance"].values[0], 1 / 3)
    assert acc[0] > 0.8 and p[0] < 0.05
    assert acc[1] < 0.6 and p[1] > 0.05
    assert (out["ood_in_accuracy"].values[0] > 0.9).all()
    assert out["ood_n_test"].values.tolist() == [[36, 36]]
    assert out.attrs["ood_permutations"] == 500 and out.attrs["ood_notes"] == []
    assert undescribed(out) == []
    table = geometry_table(out)
    ood = table[table["metric"] == "ood_accuracy"].set_index("layer")["value"]
    np.testing.assert_allclose(ood.loc[["transfers", "wiped"]], acc)
    assert {"participation_ratio", "ood_p_value", "ood_chance"} <= set(table["metric"])


def test_held_out_inputs_checked(tmp_path, stores):
    tsv = tmp_path / "labels.tsv"
    pd.DataFrame({"stim_file": IDS, "label": CLASSES, "set": "a"}).to_csv(
        tsv, sep="\t", index=False
    )
    with pytest.raises(
        ValueError, match=r"must have the column 'group' named by `geometry.distribution_column`"
    ):
        read_held_out(tsv, distribution_column="group", train_distribution="a")
    with pytest.raises(
        ValueError,
        match=r"`geometry.train_distribution` \('a'\) and at least one other value, got \['a'\]",
    ):
        read_held_out(tsv, distribution_column="set", train_distribution="a")
    all_in = pd.Series(False, index=IDS)
    with pytest.raises(
        ValueError, match="some labelled stimuli held out and some not, got 0 of 41"
    ):
        geometry_of_features(stores, labels=_labels(), cfg=None, provenance=PROV, held_out=all_in)
    with pytest.raises(
        ValueError, match=r"`geometry\.ood_permutations` must be a positive int, got 0"
    ):
        resolve_config({"ood_permutations": 0})

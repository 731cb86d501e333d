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

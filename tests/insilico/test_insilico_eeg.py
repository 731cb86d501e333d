"""In-silico EEG: a stored EEG encoding model applied to new stimuli, on synthetic stores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from figure_helpers import assert_png

from neuroflow.artifacts import build_provenance, open_dataset, write_dataset
from neuroflow.encoding.stored import encoder_dataset
from neuroflow.insilico.eeg import (
    GFP,
    channel_group_members,
    latency_window,
    predict_eeg_stimulus_set,
)
from neuroflow.insilico.stage import target_positions

CHANNELS = ["O1", "Oz", "O2", "Pz", "Cz", "Fz", "F3"]
LATENCIES = np.round(np.arange(-0.05, 0.3001, 0.01), 3)  # 36 latencies
WIDTHS = {"vis": 5, "txt": 3}


def _encoder(tmp_path, rng):
    n = sum(WIDTHS.values())
    n_ch, n_lat = len(CHANNELS), LATENCIES.size
    parts = {
        "coef": rng.standard_normal((n, n_ch, n_lat)),
        "design_mean": 0.1 * rng.standard_normal((1, n)),
        "feature_mean": rng.standard_normal((1, n)),
        "feature_scale": rng.uniform(0.5, 2.0, (1, n)),
        "target_mean": rng.standard_normal((n_ch, n_lat)),
    }
    ds = encoder_dataset(
        **parts,
        spaces=list(WIDTHS),
        n_features=list(WIDTHS.values()),
        delays={"method": "none"},
        variants=["none"],
        units="µV",
        target_dims=("channel", "latency"),
    )
    course = -((LATENCIES - 0.12) ** 2)  # the cross-validated score peaks at 120 ms
    ds = ds.assign(cv_course=("latency", course.astype(np.float32)))
    ds = ds.assign_coords(channel=np.array(CHANNELS, dtype=object), latency=LATENCIES)
    ds.attrs.update(delays={"method": "none"}, subject="03", model="visual")
    prov = build_provenance(stage="eeg_encoding", version="e1", config={})
    return write_dataset(ds, tmp_path / "enc.zarr", provenance=prov), parts


def _features(tmp_path, rng, n=17):
    ids = [f"s{i:02d}" for i in range(n)]
    X = {s: rng.standard_normal((n, w)) for s, w in WIDTHS.items()}
    stores = {}
    for space, rows in X.items():
        ds = xr.Dataset(
            {"features": (("stimulus", "feature"), rows.astype(np.float32))},
            coords={"stimulus": np.array(ids, dtype=object), "feature": np.arange(rows.shape[1])},
            attrs={"modality": "text", "row_unit": "stimulus"},
        )
        prov = build_provenance(stage="features", version="f1", config={})
        stores[space] = write_dataset(ds, tmp_path / f"{space}.zarr", provenance=prov)
    return ids, X, stores


def _expected_response(parts, X):
    """(stimulus, channel, latency): the fit's formula, written out."""
    Z = np.concatenate([X["vis"], X["txt"]], axis=1)
    Z = ((Z - parts["feature_mean"][0]) / parts["feature_scale"][0]).astype(np.float32)
    design = Z - parts["design_mean"][0].astype(np.float32)
    coef = parts["coef"].astype(np.float32)
    return np.einsum("sd,dcl->scl", design, coef) + parts["target_mean"].astype(np.float32)


def _run(tmp_path, rng, **kwargs):
    encoder_path, parts = _encoder(tmp_path, rng)
    ids, X, stores = _features(tmp_path, rng)
    out = tmp_path / "predict_eeg" / "visual-v1" / "sub-03_sentences.zarr"
    predict_eeg_stimulus_set(
        encoder_path=encoder_path,
        feature_stores=stores,
        output=out,
        provenance=build_provenance(stage="predict_eeg/visual", version="v1", config={}),
        captions={i: f"sentence {i}" for i in ids},
        k=3,
        **kwargs,
    )
    return out, ids, X, parts


def test_evoked_responses_follow_the_fit_and_the_regions_their_definitions(tmp_path, rng):
    groups = {"occipital": ["O1", "Oz", "O2", "Iz"], "frontal": ["Fz", "F3"]}
    out, ids, X, parts = _run(
        tmp_path, rng, channel_groups=groups, keep_response=True, channels=["Pz"], batch_size=4
    )
    ds = open_dataset(out)
    expected = _expected_response(parts, X)
    np.testing.assert_allclose(ds["response"].values, expected, rtol=1e-4, atol=1e-4)
    assert ds["response"].dims == ("stimulus", "channel", "latency")

    # default window: 25 ms either side of the cross-validated peak (120 ms)
    window = (LATENCIES >= 0.095) & (LATENCIES <= 0.145)
    np.testing.assert_array_equal(ds["in_window"].values, window)
    assert ds.attrs["latency_window"] == pytest.approx([0.1, 0.14])
    assert "cross-validated score" in ds.attrs["latency_window_source"]
    part = expected[:, :, window].astype(np.float64)
    occipital = part[:, :3].mean(axis=(1, 2))  # Iz is not a channel of the model
    frontal = part[:, 5:7].mean(axis=(1, 2))
    gfp = part.std(axis=1).mean(axis=1)
    assert list(ds["roi"].values) == ["occipital", "frontal", GFP]
    np.testing.assert_allclose(
        ds["roi_response"].values, np.stack([occipital, frontal, gfp], 1), rtol=1e-4, atol=1e-4
    )
    assert ds.attrs["channel_groups"] == {"occipital": ["O1", "Oz", "O2"], "frontal": ["Fz", "F3"]}
    np.testing.assert_allclose(
        ds["tracked_response"].sel(tracked="channel Pz").values,
        part[:, 3].mean(axis=1),
        rtol=1e-4,
        atol=1e-4,
    )
    np.testing.assert_allclose(
        ds["pool_mean_response"].values, expected.mean(axis=0), rtol=1e-4, atol=1e-4
    )
    assert ds["roi_std"].sel(roi=GFP) == pytest.approx(gfp.std(), rel=1e-4)

    # the table ranks each region, and the tracked channel, by its response
    table = pd.read_csv(out.with_name("sub-03_sentences_ranking.tsv"), sep="\t")
    assert list(dict.fromkeys(table["roi"])) == ["occipital", "frontal", GFP, "channel Pz"]
    top = table[(table["direction"] == "top") & (table["rank"] == 1)].set_index("roi")
    assert top.loc["occipital", "stimulus"] == ids[int(np.argmax(occipital))]
    assert top.loc[GFP, "stimulus"] == ids[int(np.argmax(gfp))]
    bottom = table[(table["direction"] == "bottom") & (table["rank"] == 1)].set_index("roi")
    assert bottom.loc["frontal", "stimulus"] == ids[int(np.argmin(frontal))]
    sheets = out.with_name("sub-03_sentences_contact_sheets")
    assert sorted(p.name for p in sheets.iterdir()) == ["frontal.png", "gfp.png", "occipital.png"]
    assert_png(sheets / "gfp.png")


def test_batches_and_an_explicit_window(tmp_path, rng):
    out_small, *_ = _run(tmp_path / "a", np.random.default_rng(4), batch_size=2)
    out_large, *_ = _run(
        tmp_path / "b", np.random.default_rng(4), batch_size=256, window=[0.0, 0.05]
    )
    small, large = open_dataset(out_small), open_dataset(out_large)
    assert "response" not in small  # kept on request only
    assert large.attrs["latency_window"] == pytest.approx([0.0, 0.05])
    assert large.attrs["latency_window_source"] == "predict.latency_window"
    window = (LATENCIES >= -1e-9) & (LATENCIES <= 0.05 + 1e-9)
    np.testing.assert_array_equal(large["in_window"].values, window)
    out_c, *_ = _run(tmp_path / "c", np.random.default_rng(4), batch_size=256)
    np.testing.assert_allclose(
        small["roi_response"].values, open_dataset(out_c)["roi_response"].values, rtol=1e-5
    )


def test_latency_window_definitions():
    lat = np.array([0.0, 0.004, 0.008, 0.012])
    assert latency_window(lat, None, peak=0.004, half_width=0.004).tolist() == [1, 1, 1, 0]
    # narrower than the sampling: the latency nearest the peak
    assert latency_window(lat, None, peak=0.0061, half_width=0.001).tolist() == [0, 0, 1, 0]
    assert latency_window(lat, [0.004, 0.008]).tolist() == [0, 1, 1, 0]
    with pytest.raises(ValueError, match=r"must overlap the model's latencies \[0.000, 0.012\]"):
        latency_window(lat, [0.1, 0.2])
    with pytest.raises(ValueError, match="must have tmin <= tmax"):
        latency_window(lat, [0.008, 0.004])
    with pytest.raises(ValueError, match="peak must be a finite latency"):
        latency_window(lat, None)


def test_channel_groups_and_targets_name_what_is_wrong(tmp_path, rng):
    assert channel_group_members(CHANNELS, {"mid": ["Cz", "X9", "Pz"]}) == {"mid": [4, 3]}
    with pytest.raises(ValueError, match=r"channel_groups.temporal must name channels of"):
        channel_group_members(CHANNELS, {"temporal": ["T7", "T8"]})
    with pytest.raises(ValueError, match="must not be named 'gfp'"):
        channel_group_members(CHANNELS, {"gfp": ["Oz"]})
    with pytest.raises(ValueError, match=r"targets.channels must name channels of .*\['T7'\]"):
        _run(tmp_path, rng, channels=["Oz", "T7"])
    assert not (tmp_path / "predict_eeg" / "visual-v1" / "sub-03_sentences.zarr").exists()


def test_voxel_targets_are_looked_up_by_id(tmp_path, rng):
    ds = xr.Dataset(coords={"voxel": np.arange(10, 20)})
    path = write_dataset(
        ds, tmp_path / "enc.zarr", provenance=build_provenance(stage="x", version="1", config={})
    )
    assert target_positions(path, "voxel", [12, 19]) == [2, 9]
    assert target_positions(path, "voxel", []) == []
    with pytest.raises(ValueError, match=r"targets.voxels must name voxels of .*got \[3\]"):
        target_positions(path, "voxel", [12, 3])
    with pytest.raises(ValueError, match=r"targets.channels needs a `channel` coordinate"):
        target_positions(path, "channel", ["Oz"])

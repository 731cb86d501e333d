"""EEG encoding: per time point ridge on epochs and temporal response functions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.encoding.eeg import fit_eeg_encoding, with_defaults
from neuroflow.encoding.eeg_design import fit_epochs_ridge
from neuroflow.encoding.trf import block_groups, fit_trf, lag_samples, lagged_impulse_design
from neuroflow.evaluation.metrics import pearson_r
from neuroflow.models import ridge_cv, run_splits
from neuroflow.trial_split import select_test_stimuli

SFREQ = 100.0
ALPHAS = {"start": -1.0, "stop": 4.0, "num": 6}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _feature_store(path: Path, ids: list[str], rng: np.random.Generator, n_feat: int) -> Path:
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), rng.standard_normal((len(ids), n_feat)))},
        coords={"stimulus": np.array(ids, dtype=object), "feature": np.arange(n_feat)},
    )
    return write_dataset(ds, path, provenance={})


def _epochs(tmp_path: Path, rng: np.random.Generator, *, peak: float = 0.1):
    """Epochs whose channels follow feature 0..2 with a Gaussian peaking at ``peak`` s."""
    n_train, n_test, n_rep, n_ch, n_feat = 90, 9, 3, 7, 8
    ids = [f"img-{i:03d}" for i in range(n_train + n_test)]
    feats = _feature_store(tmp_path / "feat.zarr", ids, rng, n_feat)
    F = xr.open_zarr(feats)["features"].values
    shown = ids[:n_train] + [s for s in ids[n_train:] for _ in range(n_rep)]
    rng.shuffle(shown)
    times = np.arange(-0.1, 0.5 + 1e-9, 1 / SFREQ)
    wave = np.exp(-((times - peak) ** 2) / (2 * 0.02**2))
    mixing = rng.standard_normal((3, n_ch))
    rows = np.array([ids.index(s) for s in shown])
    amp = F[rows, :3] @ mixing  # (epoch, channel)
    data = amp[:, :, None] * wave + 0.5 * rng.standard_normal((len(shown), n_ch, times.size))
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), (data * 1e-6).astype(np.float32))},
        coords={
            "stimulus": ("epoch", np.array(shown, dtype=object)),
            "channel": np.array([f"E{i}" for i in range(n_ch)], dtype=object),
            "time": times,
        },
        attrs={"sfreq": SFREQ, "entities": {"subject": "01"}},
    )
    return write_dataset(ds, tmp_path / "epo.zarr", provenance={}), feats, shown


def test_planted_latency_recovered(tmp_path, rng):
    epochs, feats, _ = _epochs(tmp_path, rng, peak=0.1)
    out = fit_eeg_encoding(
        epochs=epochs,
        features={"f": feats},
        output=tmp_path / "enc.zarr",
        config={"alphas": ALPHAS, "cv": {"grouped_kfold": 3}, "device": "cpu"},
        provenance={},
    )
    ds = xr.open_zarr(out)
    assert ds["y_pred"].dims == ("stimulus", "channel", "latency")
    assert ds["y_test"].dims == ("repeat", "stimulus", "channel", "latency")
    for name in ("best_alpha", "cv_score"):
        assert ds[name].dims == ("channel", "latency"), name
    assert ds["r_course"].dims == ds["cv_course"].dims == ("latency",)
    sizes = {"stimulus": 9, "repeat": 3, "channel": 7, "latency": 61}
    # the fitted model's dims (design columns, input features, one variant) and the
    # inference's (clusters, permutations, bootstrap resamplings, interval bounds)
    n_clusters = ds.sizes["cluster"]
    assert ds.sizes == {
        **sizes,
        "design": 8,
        "input": 8,
        "variant": 1,
        "cluster": n_clusters,
        "permutation": 200,
        "bootstrap": 1000,
        "bound": 2,
    }
    assert "target" not in ds.dims and "target" not in ds.coords
    assert set(ds.indexes) == {*sizes, "variant", "bound"}
    # 90 images shown once and 9 shown 3 times: the design's test set is held out
    assert ds.attrs["test_design"] == "held-out" and ds.attrs["n_outer_folds"] == 0
    assert n_clusters >= 1 and ds.attrs["peak_significant"]
    # the interval over resamplings of the 9 test images holds the planted latency
    lower, upper = ds["peak_latency_ci"].values
    assert lower <= 0.1 <= upper
    assert ds["latency"].attrs["units"] == "s"
    np.testing.assert_allclose(ds["latency"].values, np.arange(-0.1, 0.5 + 1e-9, 1 / SFREQ))
    assert list(ds["channel"].values) == [f"E{i}" for i in range(7)]
    assert ds["roi"].dims == ("channel",)
    np.testing.assert_array_equal(ds["roi"].values, ds["channel"].values)
    for name, var in ds.data_vars.items():
        assert "units" in var.attrs, name
    assert abs(float(ds["peak_latency"]) - 0.1) <= 0.015
    r = ds["r_course"].values
    assert r[np.argmin(np.abs(ds["latency"].values - 0.1))] > 0.8
    assert np.nanmax(r[ds["latency"].values > 0.3]) < 0.5
    # the maps are the test r per channel and latency: their channel mean is r_course
    y_mean = ds["y_test"].values.astype(np.float64).mean(0)
    y_pred = ds["y_pred"].values.astype(np.float64)
    r_map = pearson_r(y_mean.reshape(9, -1), y_pred.reshape(9, -1)).reshape(7, 61)
    assert r_map.shape == (7, 61)
    np.testing.assert_allclose(r_map.mean(0), r, rtol=1e-4, atol=1e-5)
    # the planted response is in the data, on the right channel and latency
    data = xr.open_zarr(epochs)["epochs"]
    first = str(ds["stimulus"].values[0])
    shown = data.isel(epoch=np.flatnonzero(data["stimulus"].values == first))
    observed = ds["y_test"].sel(stimulus=first).isel(channel=3, latency=20).values
    np.testing.assert_allclose(
        observed, shown.isel(channel=3, time=20).values * 1e6, rtol=1e-5, atol=1e-4
    )


def test_stored_model_predicts_the_test_stimuli(tmp_path, rng):
    from neuroflow.encoding.stored import predict_run
    from neuroflow.features.align import features_for_stimuli

    epochs, feats, _ = _epochs(tmp_path, rng, peak=0.2)
    out = fit_eeg_encoding(
        epochs=epochs,
        features={"f": feats},
        output=tmp_path / "enc.zarr",
        config={"alphas": ALPHAS, "cv": {"grouped_kfold": 3}, "device": "cpu"},
        provenance={},
    )
    ds = xr.open_zarr(out).load()
    assert ds["coef"].dims == ("design", "channel", "latency")
    assert ds["coef"].shape == (8, 7, 61)
    assert ds["target_mean"].dims == ("channel", "latency")
    rows = features_for_stimuli(feats, [str(s) for s in ds["stimulus"].values])
    pred = predict_run(ds, {"f": rows})
    assert pred.shape == ds["y_pred"].shape
    np.testing.assert_allclose(pred, ds["y_pred"].values, rtol=1e-5, atol=1e-4)


def test_flattened_solve_equals_loop(rng):
    n_ep, n_t, n_ch, n_feat = 40, 5, 3, 6
    X = rng.standard_normal((n_ep, n_feat)).astype(np.float32)
    Y = rng.standard_normal((n_ep, n_t, n_ch)) + (
        X @ rng.standard_normal((n_feat, n_t * n_ch))
    ).reshape(n_ep, n_t, n_ch)
    groups = np.repeat(np.arange(20), 2)
    alphas = np.logspace(-1, 3, 5)
    flat, y_mean = fit_epochs_ridge(
        X, Y, groups=groups, alphas=alphas, n_splits=4, device="cpu", dtype="float64"
    )
    splits = run_splits(groups, 4)
    for t in range(n_t):
        yt = Y[:, t, :] - Y[:, t, :].mean(0)
        one = ridge_cv(X, yt, alphas=alphas, splits=splits, device="cpu", dtype="float64")
        cols = slice(t * n_ch, (t + 1) * n_ch)
        np.testing.assert_allclose(flat.coef[:, cols], one.coef, rtol=1e-6, atol=1e-8)
        np.testing.assert_array_equal(flat.best_alpha[cols], one.best_alpha)
        np.testing.assert_allclose(y_mean[cols], Y[:, t, :].mean(0), rtol=1e-5)


def test_no_stimulus_straddles_folds(rng, monkeypatch):
    import neuroflow.encoding.eeg_design as eeg

    seen = {}

    def spy(X, Y, *, splits, **kwargs):
        seen["splits"] = splits
        return ridge_cv(X, Y, splits=splits, **kwargs)

    monkeypatch.setattr(eeg, "ridge_cv", spy)
    groups = rng.choice([f"s{i}" for i in range(17)], size=50)  # stimuli shown 1-7 times
    X = rng.standard_normal((50, 4)).astype(np.float32)
    Y = rng.standard_normal((50, 3, 2))
    eeg.fit_epochs_ridge(X, Y, groups=groups, alphas=np.ones(1), n_splits=4, device="cpu")
    assert len(seen["splits"]) == 4
    for train, val in seen["splits"]:
        assert not set(groups[train]) & set(groups[val])
        assert train.size + val.size == 50


def test_test_stimuli_never_in_training(tmp_path, rng):
    epochs, feats, shown = _epochs(tmp_path, rng)
    repeated = select_test_stimuli(shown, "repeated")
    assert len(repeated) == 9
    explicit = select_test_stimuli(shown, [repeated[0], repeated[1]])
    assert explicit == repeated[:2]
    with pytest.raises(ValueError, match="no epoch shows"):
        select_test_stimuli(shown, ["nope"])
    with pytest.raises(ValueError, match="must be 'auto', 'repeated' or a list"):
        select_test_stimuli(shown, "all")
    out = fit_eeg_encoding(
        epochs=epochs,
        features={"f": feats},
        output=tmp_path / "enc.zarr",
        config={"alphas": ALPHAS, "test": repeated[:4], "device": "cpu"},
        provenance={},
    )
    ds = xr.open_zarr(out)
    assert list(ds["stimulus"].values) == repeated[:4]
    assert ds.attrs["n_train_epochs"] == len(shown) - 4 * 3


def test_auto_test_stimuli_follow_the_design():
    # THINGS-like: 6 test images x 5, 40 training images once -> the test images
    things = [f"t{i}" for i in range(6) for _ in range(5)] + [f"x{i}" for i in range(40)]
    assert select_test_stimuli(things, "auto") == [f"t{i}" for i in range(6)]
    # ds000117-like: every image shown twice (immediate/delayed repeat), a few once ->
    # a fifth of the twice-shown images, never nearly all of them as `repeated` would
    faces = [f"f{i}" for i in range(70) for _ in range(2)] + [f"u{i}" for i in range(5)]
    auto = select_test_stimuli(faces, "auto")
    assert len(auto) == 15 and all(s.startswith("f") for s in auto)
    assert len(select_test_stimuli(faces, "repeated")) == 70
    assert auto == select_test_stimuli(faces, "auto")  # seeded
    # every stimulus once (a movie): a fifth of them, at least 4 and leaving 2 to train on
    assert len(select_test_stimuli([f"s{i}" for i in range(7)], "auto")) == 4
    assert len(select_test_stimuli([f"s{i}" for i in range(5)], "auto")) == 3  # 2 train


def test_config_errors(tmp_path, rng):
    epochs, feats, _ = _epochs(tmp_path, rng)
    with pytest.raises(
        ValueError, match=r"Unknown key 'eeg_encoding\.alpha'\. Did you mean 'alphas'\?"
    ):
        with_defaults({"alpha": 1})
    with pytest.raises(ValueError, match="`feature_spaces` names"):
        fit_eeg_encoding(
            epochs=epochs,
            features={"f": feats},
            output=tmp_path / "x.zarr",
            config={"feature_spaces": ["g"]},
            provenance={},
        )
    with pytest.raises(ValueError, match="keep none of the epoch"):
        fit_eeg_encoding(
            epochs=epochs,
            features={"f": feats},
            output=tmp_path / "x.zarr",
            config={"tmin": 2.0, "tmax": 3.0},
            provenance={},
        )
    assert not (tmp_path / "x.zarr").exists()


def test_lagged_design_matches_mne(rng):
    """The lag convention and solution agree with mne.decoding.ReceptiveField."""
    from mne.decoding import ReceptiveField
    from sklearn.linear_model import Ridge

    n_times, n_feat, n_ch = 700, 3, 2
    onsets = np.sort(rng.choice(np.arange(20, 680), size=40, replace=False))
    F = rng.standard_normal((40, n_feat))
    lags = lag_samples(-0.05, 0.1, SFREQ)
    X = lagged_impulse_design(onsets, F, n_times, lags)
    impulses = np.zeros((n_times, n_feat))
    impulses[onsets] = F
    Y = rng.standard_normal((n_times, n_ch))
    alpha = 3.0
    rf = ReceptiveField(-0.05, 0.1, SFREQ, estimator=Ridge(alpha, fit_intercept=False))
    rf.fit(impulses, Y)
    coef = np.linalg.solve(X.T @ X + alpha * np.eye(X.shape[1]), X.T @ Y)
    ours = coef.reshape(lags.size, n_feat, n_ch).transpose(2, 1, 0)  # (ch, feat, lag)
    np.testing.assert_allclose(ours, rf.coef_, rtol=1e-4, atol=1e-6)


def test_block_groups_are_contiguous():
    g = block_groups(23, 4)
    assert g.shape == (23,) and set(g) == {0, 1, 2, 3}
    assert np.all(np.diff(g) >= 0)
    with pytest.raises(ValueError, match="at most the number of samples"):
        block_groups(3, 4)


def test_trf_recovers_latency(tmp_path, rng):
    n_ch, n_feat, n_ev = 5, 4, 150
    ids = [f"s{i}" for i in range(n_ev)]
    feats = _feature_store(tmp_path / "f.zarr", ids, rng, n_feat)
    F = xr.open_zarr(feats)["features"].values
    onset_s = 1.0 + np.cumsum(rng.uniform(0.7, 0.9, n_ev))
    n_times = int((onset_s[-1] + 2.0) * SFREQ)
    t = np.arange(n_times) / SFREQ
    kernel_t = np.arange(0, 0.5, 1 / SFREQ)
    wave = np.exp(-((kernel_t - 0.25) ** 2) / (2 * 0.03**2))
    mixing = rng.standard_normal((n_feat, n_ch))
    data = 0.5 * rng.standard_normal((n_ch, n_times))
    for i, on in enumerate(np.round(onset_s * SFREQ).astype(int)):
        data[:, on : on + wave.size] += np.outer(F[i] @ mixing, wave)
    ds = xr.Dataset(
        {"eeg": (("channel", "time"), (data * 1e-6).astype(np.float32))},
        coords={
            "channel": np.array([f"E{i}" for i in range(n_ch)], dtype=object),
            "time": t,
            "event_onset": ("event", onset_s),
            "event_stimulus": ("event", np.array(ids, dtype=object)),
        },
        attrs={"sfreq": SFREQ},
    )
    raw = write_dataset(ds, tmp_path / "raw.zarr", provenance={})
    out = fit_trf(
        continuous=raw,
        features={"f": feats},
        output=tmp_path / "trf.zarr",
        config={"alphas": ALPHAS, "trf": {"tmin": -0.1, "tmax": 0.5, "n_blocks": 3}},
        provenance={},
    )
    res = xr.open_zarr(out)
    assert res["trf"].dims == ("lag", "feature", "channel")
    assert res["best_alpha"].dims == res["cv_score"].dims == ("channel",)
    assert res["trf_power"].dims == ("lag",) and "target" not in res.dims
    assert res["lag"].attrs["units"] == "s"
    assert res.sizes["lag"] == 61
    assert abs(float(res["peak_latency"]) - 0.25) <= 0.02
    assert float(res["cv_score"].mean()) > 0.3


def test_schema_and_draft_match_defaults():
    import yaml
    from jsonschema import Draft202012Validator

    from neuroflow.encoding.eeg import DEFAULT_CONFIG

    root = Path(__file__).resolve().parents[2]
    schema = yaml.safe_load((root / "workflow/schemas/eeg_encoding.schema.yaml").read_text())
    Draft202012Validator.check_schema(schema)
    defaults = {k: v["default"] for k, v in schema["properties"].items()}
    # The workflow sets name and feature spaces per model; `enabled` selects the stage and
    # `models` names the models (it reaches the stage as each model's feature spaces).
    per_model = {k: v for k, v in defaults.items() if k not in ("enabled", "models")}
    assert {**per_model, "name": None, "feature_spaces": []} == DEFAULT_CONFIG
    draft = yaml.safe_load((root / "config/config.yaml").read_text())
    assert draft["eeg_encoding"] == defaults
    with pytest.raises(Exception, match="Additional properties"):
        Draft202012Validator(schema).validate({"alpha": 1})

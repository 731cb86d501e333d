"""Single-trial encoding on held-out stimuli: recovery, leakage, banded ridge, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from neuroflow.artifacts import write_dataset
from neuroflow.encoding import fit_trial_encoding
from neuroflow.encoding.trials import (
    parse_trial_cv,
    presentation_index,
    select_trial_test_stimuli,
    split_note,
    stimulus_splits,
)
from neuroflow.evaluation import evaluate_model
from neuroflow.evaluation.metrics import pearson_r

PROV = {"stage": "test", "version": "0"}
N_TRAIN, N_TEST, N_VOXELS = 41, 9, 13
FEATURES = {"low": 7, "high": 5}
BASE_CONFIG = {
    "alphas": {"start": -2.0, "stop": 4.0, "num": 7},
    "device": "cpu",
    "trial_split": {"test": "repeated", "cv": {"grouped_kfold": 4}},
    "banded": {"n_iter": 12, "concentration": [0.1, 1.0], "random_state": 0},
}


def _ids(n: int, prefix: str) -> list[str]:
    return [f"{prefix}/img-{i:03d}.png" for i in range(n)]


def _feature_store(path: Path, ids: list[str], data: np.ndarray, layer: str) -> Path:
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), data.astype(np.float32))},
        coords={"stimulus": np.asarray(ids, dtype=object), "feature": np.arange(data.shape[1])},
        attrs={"layer": layer},
    )
    return write_dataset(ds, path, provenance=PROV)


def _world(
    rng: np.random.Generator, noise: float, bands: tuple[str, ...], train_repeats: int = 0
) -> dict:
    """Stimuli, features, planted weights and a trial sequence.

    Training stimuli are shown once, except the first ``train_repeats`` (twice); test
    stimuli three times.
    Voxels 0-5 respond to ``bands[0]`` only, the rest to every band.
    """
    train_ids, test_ids = _ids(N_TRAIN, "train"), _ids(N_TEST, "test")
    ids = train_ids + test_ids
    X = {
        b: rng.standard_normal((len(ids), FEATURES[b])) * (1 + np.arange(FEATURES[b]))
        for b in FEATURES
    }
    W = {b: rng.standard_normal((FEATURES[b], N_VOXELS)) for b in FEATURES}
    W["high"][:, :6] = 0.0
    signal = sum((X[b] / (1 + np.arange(FEATURES[b]))) @ W[b] for b in bands)
    order = train_ids + train_ids[:train_repeats] + test_ids * 3
    order = [order[i] for i in rng.permutation(len(order))]
    row = {s: i for i, s in enumerate(ids)}
    Y = np.stack([signal[row[s]] for s in order]) + noise * rng.standard_normal(
        (len(order), N_VOXELS)
    )
    return {"ids": ids, "test_ids": test_ids, "X": X, "trials": order, "Y": Y, "signal": signal}


def _betas_store(path: Path, stimuli: list[str], Y: np.ndarray, *, name: str = "betas") -> Path:
    n_trials, n_vox = Y.shape
    seen: dict[str, int] = {}
    repeat = []
    for s in stimuli:
        repeat.append(seen.get(s, 0))
        seen[s] = repeat[-1] + 1
    ds = xr.Dataset(
        {
            name: (("trial", "voxel"), Y.astype(np.float32), {"units": "z"}),
            "ncsnr": ("voxel", np.linspace(0.1, 1.0, n_vox).astype(np.float32)),
            "noise_ceiling": ("voxel", np.linspace(5, 50, n_vox).astype(np.float32)),
        },
        coords={
            "trial": np.arange(n_trials),
            "stimulus": ("trial", np.asarray(stimuli, dtype=object)),
            "trial_type": ("trial", np.asarray(["image"] * n_trials, dtype=object)),
            "onset": ("trial", np.arange(n_trials) * 4.0),
            "run": ("trial", np.asarray([str(1 + t % 3) for t in range(n_trials)], dtype=object)),
            "repeat": ("trial", np.asarray(repeat)),
            "voxel": np.arange(n_vox),
            "roi": ("voxel", np.asarray(["v1"] * 6 + ["ips"] * (n_vox - 6), dtype=object)),
            "i": ("voxel", np.arange(n_vox) % 4),
            "j": ("voxel", np.arange(n_vox) // 4),
            "k": ("voxel", np.zeros(n_vox, dtype=int)),
        },
        attrs={
            "entities": {"subject": "07"},
            "affine": np.diag([2.0, 2.0, 2.0, 1.0]).tolist(),
            "mask_shape": [4, 4, 1],
            "tr": 1.6,
        },
    )
    return write_dataset(ds, path, provenance=PROV)


def _inputs(tmp_path: Path, world: dict, bands: tuple[str, ...]) -> tuple[Path, dict[str, Path]]:
    betas = _betas_store(tmp_path / "betas.zarr", world["trials"], world["Y"])
    feats = {
        b: _feature_store(tmp_path / f"{b}.zarr", world["ids"], world["X"][b], f"layer-{b}")
        for b in bands
    }
    return betas, feats


def _fit(betas: Path, feats: dict[str, Path], out: Path, **config) -> xr.Dataset:
    cfg = {**BASE_CONFIG, "feature_spaces": list(feats), "name": "vis", **config}
    fit_trial_encoding(betas=betas, features=feats, output=out, config=cfg, provenance=PROV)
    return xr.open_zarr(out).load()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


def test_recovers_held_out_stimuli_and_evaluates(tmp_path: Path, rng) -> None:
    world = _world(rng, noise=0.05, bands=("low",))
    betas, feats = _inputs(tmp_path, world, ("low",))
    ds = _fit(betas, feats, tmp_path / "enc.zarr", model="ridge")

    assert ds["y_pred"].dims == ("stimulus", "voxel")
    assert ds["y_test"].dims == ("repeat", "stimulus", "voxel")
    assert ds["y_test"].shape == (3, N_TEST, N_VOXELS)
    assert ds["best_alpha"].dims == ("voxel",) and ds["cv_score"].dims == ("voxel",)
    assert sorted(ds["stimulus"].values.tolist()) == sorted(world["test_ids"])
    assert ds["roi"].values.tolist()[:7] == ["v1"] * 6 + ["ips"]
    np.testing.assert_array_equal(ds["i"].values, np.arange(N_VOXELS) % 4)
    assert ds.attrs["model"] == "vis_trials" and ds.attrs["design"] == "trials"
    assert ds.attrs["exchangeable_samples"] is True
    assert ds.attrs["layer"] == "layer-low" and ds.attrs["subject"] == "07"
    assert ds.attrs["n_train_trials"] == N_TRAIN and ds.attrs["n_test_repeats"] == 3
    assert ds.attrs["mask_shape"] == [4, 4, 1] and ds.attrs["tr"] == pytest.approx(1.6)
    assert "ncsnr" in ds and "noise_ceiling" in ds
    # held-out predictions match the planted responses and the observed repeats
    row = {s: i for i, s in enumerate(world["ids"])}
    truth = world["signal"][[row[s] for s in ds["stimulus"].values]]
    assert pearson_r(truth, ds["y_pred"].values).min() > 0.99
    assert pearson_r(ds["y_test"].values.mean(0), ds["y_pred"].values).min() > 0.9

    scores = evaluate_model(
        prediction=tmp_path / "enc.zarr",
        output=tmp_path / "scores.zarr",
        config={"permutation": {"n_permutations": 50}},
        provenance=PROV,
    )
    sc = xr.open_zarr(scores)
    assert sc["r"].dims == ("voxel",) and float(sc["r"].min()) > 0.9
    assert sc.attrs["permutation_block_samples"] == 1
    assert sc.attrs["model"] == "vis_trials" and set(sc["roi"].values) == {"v1", "ips"}


def test_test_stimuli_never_touch_the_fit(tmp_path: Path, rng) -> None:
    world = _world(rng, noise=0.5, bands=("low",))
    betas, feats = _inputs(tmp_path, world, ("low",))
    ref = _fit(betas, feats, tmp_path / "a.zarr")

    # other test responses: same penalties, scores and predictions
    is_test = np.isin(world["trials"], world["test_ids"])
    Y = world["Y"].copy()
    Y[is_test] = 100 * rng.standard_normal((is_test.sum(), N_VOXELS))
    betas_b = _betas_store(tmp_path / "b_betas.zarr", world["trials"], Y)
    other = _fit(betas_b, feats, tmp_path / "b.zarr")
    for name in ("best_alpha", "cv_score", "y_pred"):
        np.testing.assert_array_equal(other[name].values, ref[name].values, err_msg=name)
    assert not np.allclose(other["y_test"].values, ref["y_test"].values)

    # other test features: standardisation, penalties and scores unchanged
    X = world["X"]["low"].copy()
    X[N_TRAIN:] = 50 * rng.standard_normal((N_TEST, FEATURES["low"]))
    feats_c = {"low": _feature_store(tmp_path / "c.zarr", world["ids"], X, "layer-low")}
    shifted = _fit(betas, feats_c, tmp_path / "c_enc.zarr")
    for name in ("best_alpha", "cv_score"):
        np.testing.assert_array_equal(shifted[name].values, ref[name].values, err_msg=name)
    assert not np.allclose(shifted["y_pred"].values, ref["y_pred"].values)


def test_banded_ridge_two_spaces(tmp_path: Path, rng) -> None:
    world = _world(rng, noise=0.05, bands=("low", "high"))
    betas, feats = _inputs(tmp_path, world, ("low", "high"))
    ds = _fit(betas, feats, tmp_path / "enc.zarr", model="auto", name="joint")
    assert ds.attrs["solver"] == "banded_ridge" and ds.attrs["model"] == "joint_trials"
    assert ds.attrs["layer"] == "layer-low+layer-high"
    assert ds["best_alpha"].dims == ("space", "voxel")
    assert ds["variance_split"].dims == ("space", "voxel")
    assert ds["space"].values.tolist() == ["low", "high"]
    r = pearson_r(ds["y_test"].values.mean(0), ds["y_pred"].values)
    assert r.min() > 0.9
    split = ds["variance_split"].values
    # voxels 0-5 are driven by the low-level space alone
    assert np.all(split[0, :6] > 0.8) and np.all(np.abs(split[1, :6]) < 0.05)
    assert np.all(split[1, 6:] > 0.02)


def test_explicit_test_list_and_unequal_repeats(tmp_path: Path, rng) -> None:
    world = _world(rng, noise=0.05, bands=("low",), train_repeats=6)
    betas, feats = _inputs(tmp_path, world, ("low",))
    # one training stimulus shown twice and one test stimulus shown three times
    chosen = [world["ids"][0], world["test_ids"][2]]
    split = {"test": chosen, "cv": "leave-one-stimulus-out"}
    ds = _fit(betas, feats, tmp_path / "enc.zarr", trial_split=split)
    assert ds["stimulus"].values.tolist() == chosen
    assert ds.sizes["repeat"] == 2  # the least-shown test stimulus sets the count
    assert ds.attrs["n_folds"] == len(set(world["ids"])) - 2
    index = presentation_index(np.array(["a", "b", "a", "c", "b", "a"]), ["a", "b"])
    np.testing.assert_array_equal(index, [[0, 1], [2, 4]])


def test_folds_keep_repeats_together(rng) -> None:
    stimuli = np.array([f"s{i}" for i in rng.integers(0, 11, size=37)])
    splits = stimulus_splits(stimuli, 4)
    assert len(splits) == 4
    for train, val in splits:
        assert not set(stimuli[train]) & set(stimuli[val])
    assert parse_trial_cv("leave-one-stimulus-out") is None
    assert parse_trial_cv({"grouped_kfold": 3}) == 3
    assert select_trial_test_stimuli(["b", "a", "b", "c", "a", "d"], "repeated") == ["b", "a"]


def test_every_stimulus_repeated_holds_out_a_fifth(caplog) -> None:
    """A design that repeats every stimulus (as RSA studies do) still trains on most."""
    ids = [f"img{i:02d}" for i in range(23)]
    with caplog.at_level("WARNING"):
        test = select_trial_test_stimuli(ids * 2, "repeated", "sub-01 betas")
    assert len(test) == round(0.2 * 23) and set(test) <= set(ids)
    assert "sub-01 betas: 23 of 23 stimuli are shown more than once" in caplog.text
    # deterministic: the same seeded draw every time
    assert select_trial_test_stimuli(ids * 2, "repeated") == test
    # a few images shown more often than the others: those, as for EEG test images
    assert select_trial_test_stimuli(ids * 2 + ids[:7], "repeated") == ids[:7]


def test_auto_split_trains_on_most_stimuli_and_notes_a_lopsided_split(
    tmp_path: Path, rng, caplog
) -> None:
    # 13 stimuli shown once, 179 twice: `repeated` would train on 13 and test on 179
    ids = [f"img{i:03d}" for i in range(192)]
    trials = ids + ids[13:]
    test = select_trial_test_stimuli(trials, "auto", fraction=0.2, seed=3)
    assert len(test) == round(0.2 * 179) and set(test) <= set(ids[13:])
    assert select_trial_test_stimuli(trials, "auto", fraction=0.2, seed=3) == test
    assert select_trial_test_stimuli(trials, "auto", fraction=0.2, seed=4) != test
    assert split_note(192 - len(test), len(test), "auto") is None
    assert split_note(13, 179, "repeated") == (
        "trains on 13 stimuli and tests on 179 (trial_split.test: repeated); "
        "trial_split.test: auto holds out a fraction (trial_split.test_fraction) of the "
        "repeated stimuli instead"
    )
    with pytest.raises(ValueError, match=r"`trial_split\.test_fraction` must be a number in"):
        select_trial_test_stimuli(trials, "auto", fraction=1.5)
    with pytest.raises(ValueError, match=r"`trial_split\.test` must be 'auto', 'repeated'"):
        select_trial_test_stimuli(trials, "all")

    # the stage: 30 training stimuli shown twice, 9 test stimuli three times, 11 once
    world = _world(rng, noise=0.1, bands=("low",), train_repeats=30)
    betas, feats = _inputs(tmp_path, world, ("low",))
    with caplog.at_level("WARNING"):
        lopsided = _fit(betas, feats, tmp_path / "rep.zarr")
    assert lopsided.attrs["n_test_stimuli"] == 39 and lopsided.attrs["n_train_stimuli"] == 11
    assert lopsided.attrs["split_note"].startswith("trains on 11 stimuli and tests on 39")
    assert "trains on 11 stimuli and tests on 39" in caplog.text
    # the default (auto) holds out the stimuli shown most often, as THINGS' test images
    ds = _fit(betas, feats, tmp_path / "auto.zarr", trial_split={"cv": {"grouped_kfold": 4}})
    assert ds.attrs["test_selection"] == "auto" and ds.attrs["split_note"] == ""
    assert sorted(ds["stimulus"].values.tolist()) == world["test_ids"]
    assert ds.attrs["n_train_stimuli"] == N_TRAIN
    # onset and run of every test presentation, for the noise ceiling
    assert ds["test_onset"].dims == ds["test_run"].dims == ("repeat", "stimulus")
    trials = np.asarray(world["trials"])
    for k, stim in enumerate(ds["stimulus"].values):
        where = np.flatnonzero(trials == stim)
        np.testing.assert_array_equal(ds["test_onset"].values[:, k], where * 4.0)
        assert ds["test_run"].values[:, k].tolist() == [str(1 + t % 3) for t in where]
    # the evaluation pairs repeats by their onsets: same run and 4 s apart are too close
    enc = xr.open_zarr(tmp_path / "auto.zarr").load()
    enc["test_run"][:] = "1"
    enc["test_onset"][1] = enc["test_onset"][0] + 4.0
    enc["test_onset"][2] = enc["test_onset"][0] + 400.0
    write_dataset(enc.drop_encoding(), tmp_path / "close.zarr", provenance=PROV)
    config = {"permutation": {"n_permutations": 20}}
    sc = xr.open_zarr(
        evaluate_model(
            prediction=tmp_path / "close.zarr",
            output=tmp_path / "scores.zarr",
            config=config,
            provenance=PROV,
        )
    )
    assert sc.attrs["noise_ceiling_min_separation_s"] == 12.0
    # only the halving {2} | {0, 1} keeps repeats 0 and 1 (4 s apart) on one side
    assert sc.attrs["noise_ceiling_n_samples"] == 9
    assert "up to 9 per halving" in sc.attrs["noise_ceiling_notes"][0]
    assert sc["exceeds_ceiling"].dtype == bool
    assert {"noise_ceiling_r_low", "noise_ceiling_r_high"} <= set(sc.data_vars)


def test_errors(tmp_path: Path, rng) -> None:
    world = _world(rng, noise=0.1, bands=("low",))
    betas, feats = _inputs(tmp_path, world, ("low",))
    out = tmp_path / "out.zarr"

    wrong = _betas_store(tmp_path / "w.zarr", world["trials"], world["Y"], name="beta")
    with pytest.raises(ValueError, match=r"w\.zarr: variable `betas` is missing"):
        _fit(wrong, feats, out)

    once = list(dict.fromkeys(world["trials"]))
    rows = [world["trials"].index(s) for s in once]
    single = _betas_store(tmp_path / "once.zarr", once, world["Y"][rows])
    with pytest.raises(ValueError, match=r"once\.zarr: no stimulus is shown more than once"):
        _fit(single, feats, out)

    partial = {
        "low": _feature_store(tmp_path / "f.zarr", world["ids"][1:], world["X"]["low"][1:], "x")
    }
    with pytest.raises(ValueError, match=r"f\.zarr: no features for stimulus id\(s\)"):
        _fit(betas, partial, out)

    train_ids = world["ids"][:N_TRAIN]
    with pytest.raises(ValueError, match=r"at least 2 training stimuli are needed .*got 1"):
        _fit(betas, feats, out, trial_split={"test": [*train_ids[1:], *world["test_ids"]]})
    with pytest.raises(ValueError, match=r"names stimulus id\(s\) \['nope'\] that no trial"):
        _fit(betas, feats, out, trial_split={"test": ["nope"]})
    with pytest.raises(ValueError, match=r"`trial_split\.cv` must be 'leave-one-stimulus-out'"):
        _fit(betas, feats, out, trial_split={"cv": "leave-one-run-out"})
    with pytest.raises(ValueError, match=r"'encoding\.trial_split\.tests'\. Did you mean 'test'"):
        _fit(betas, feats, out, trial_split={"tests": "repeated"})
    with pytest.raises(ValueError, match=r"`feature_spaces` names \['high'\]"):
        _fit(betas, feats, out, feature_spaces=["high"])
    with pytest.raises(FileNotFoundError, match="No artifact at"):
        _fit(tmp_path / "missing.zarr", feats, out)
    assert not out.exists()


@pytest.mark.parametrize(("bands", "model"), [(("low",), "ridge"), (("low", "high"), "auto")])
def test_stored_model_predicts_the_test_stimuli(tmp_path: Path, rng, bands, model) -> None:
    """The fitted model in the store reproduces y_pred from the test stimuli's features."""
    from neuroflow.encoding.stored import predict_run
    from neuroflow.features.align import features_for_stimuli

    world = _world(rng, noise=0.05, bands=bands)
    betas, feats = _inputs(tmp_path, world, bands)
    ds = _fit(betas, feats, tmp_path / "enc.zarr", model=model)
    ids = [str(s) for s in ds["stimulus"].values]
    rows = {b: features_for_stimuli(feats[b], ids) for b in bands}
    np.testing.assert_allclose(predict_run(ds, rows), ds["y_pred"].values, rtol=1e-5, atol=1e-5)
    assert ds["coef"].dims == ("design", "voxel")
    assert list(dict.fromkeys(ds["design_space"].values)) == list(bands)
    assert ds.attrs["delays"] == {"method": "none"}

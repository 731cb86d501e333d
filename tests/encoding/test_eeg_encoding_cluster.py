"""EEG encoding finds what is there: cross-validated scores over every stimulus, a
cluster permutation test over channel adjacency x latency, and a bootstrap interval of
the peak latency.

The sessions are ds000117-shaped at the epochs level (the stage's input): two runs of
images, each shown twice (immediately or a few trials later), 64 channels with scalp
positions, spatially and temporally smooth noise, a 100 ms occipital response whose
amplitude follows six image features, and a 170 ms face effect over lateral
occipito-temporal sites that the features do not predict.
"""

from __future__ import annotations

from pathlib import Path

import mne
import numpy as np
import pytest
import xarray as xr
from scipy import stats
from scipy.ndimage import gaussian_filter1d

from neuroflow.artifacts import write_dataset
from neuroflow.encoding.eeg import fit_eeg_encoding
from neuroflow.encoding.eeg_design import (
    cross_validated_predictions,
    designated_test_stimuli,
    scoring_design,
    stimulus_folds,
)
from neuroflow.encoding.eeg_inference import (
    FoldRefit,
    bootstrap_peak_latency,
    channel_adjacency,
    cluster_forming_threshold,
    cluster_permutation_test,
    correlation_t,
    find_clusters,
    target_adjacency,
)
from neuroflow.evaluation.metrics import pearson_r

SFREQ = 200.0
N_FEATURES = 6
OCCIPITAL = ("O1", "Oz", "O2")
FACE_SITES = ("P7", "P8", "PO7", "PO8")
P1_LATENCY = 0.1
TOLERANCE = 0.015  # s
FAST = {"alphas": {"start": -1.0, "stop": 5.0, "num": 7}, "device": "cpu"}


def _montage(n_channels: int) -> tuple[list[str], np.ndarray]:
    """The first ``n_channels`` of the BioSemi 64 layout (the occipital sites always)."""
    montage = mne.channels.make_standard_montage("biosemi64")
    pos = montage.get_positions()["ch_pos"]
    names = [n for n in montage.ch_names if n not in (*OCCIPITAL, *FACE_SITES)]
    names = [*OCCIPITAL, *FACE_SITES, *names][:n_channels]
    return names, np.array([pos[n] for n in names])


def _smooth_noise(
    rng: np.random.Generator, positions: np.ndarray, shape: tuple[int, int, int], uv: float
) -> np.ndarray:
    """Noise of (epoch, channel, time) smooth over the scalp (3 cm) and in time (10 ms)."""
    white = rng.standard_normal(shape)
    dist = np.linalg.norm(positions[:, None] - positions[None], axis=-1)
    mixing = np.exp(-(dist**2) / (2 * 0.03**2))
    smooth = gaussian_filter1d(np.einsum("ij,ejt->eit", mixing, white), 0.01 * SFREQ, axis=-1)
    return uv * smooth / smooth.std()


def _ds000117_order(rng: np.random.Generator, images: list[str]) -> list[str]:
    """Each image twice: immediately again, or after 4-12 other trials (ds000117)."""
    trials: list[str] = []
    pending: list[tuple[int, str]] = []
    for image in (images[i] for i in rng.permutation(len(images))):
        while pending and pending[0][0] <= len(trials):
            trials.append(pending.pop(0)[1])
        trials.append(image)
        if rng.uniform() < 0.5:
            trials.append(image)
        else:
            pending.append((len(trials) + int(rng.integers(4, 13)), image))
            pending.sort()
    return trials + [image for _, image in pending]


def make_faces_session(
    root: Path,
    *,
    subject: str,
    seed: int,
    n_images: int = 100,
    n_channels: int = 64,
    tmin: float = -0.1,
    tmax: float = 0.4,
    p1_uv: float = 1.5,
    face_uv: float = 6.0,
    noise_uv: float = 5.0,
    positions: bool = True,
) -> dict:
    """Two runs' epochs stores of one subject and the image-statistics feature store.

    Parameters
    ----------
    root : Path
        Folder of the stores.
    subject, seed : str, int
        Subject label and the seed of everything random.
    n_images : int
        New images per run (each shown twice).
    n_channels : int
        Channels (at most 64).
    tmin, tmax : float
        Epoch window (s).
    p1_uv : float
        Occipital response at 100 ms per SD of its feature drive (0: no planted effect).
    face_uv : float
        Face negativity at 170 ms (faces: two images in three).
    noise_uv : float
        Noise RMS.
    positions : bool
        Store the channel positions (``ch_x/y/z``); else NaN.

    Returns
    -------
    facts : dict
        ``epochs`` (paths), ``features`` (path), ``channels``.
    """
    rng = np.random.default_rng(seed)
    names, pos = _montage(n_channels)
    times = np.round(np.arange(round(tmin * SFREQ), round(tmax * SFREQ) + 1) / SFREQ, 6)
    images = [f"meg/{'fus'[i % 3]}{i:03d}.bmp" for i in range(2 * n_images)]
    feats = rng.standard_normal((len(images), N_FEATURES))
    weights = rng.standard_normal(N_FEATURES)
    drive = feats @ weights / np.linalg.norm(weights)
    face = np.array([not name.startswith("meg/s") for name in images])
    occipital = np.exp(
        -(np.min(np.linalg.norm(pos[:, None] - pos[None, :3], axis=-1), axis=1) ** 2)
        / (2 * 0.03**2)
    )
    lateral = np.exp(
        -(np.min(np.linalg.norm(pos[:, None] - pos[None, 3:7], axis=-1), axis=1) ** 2)
        / (2 * 0.03**2)
    )
    p1 = np.exp(-((times - P1_LATENCY) ** 2) / (2 * 0.02**2))
    n170 = np.exp(-((times - 0.17) ** 2) / (2 * 0.025**2))
    paths = []
    for run in range(2):
        shown = _ds000117_order(rng, images[run * n_images : (run + 1) * n_images])
        idx = np.array([images.index(s) for s in shown])
        amp = 3.0 + p1_uv * drive[idx]
        signal = (amp[:, None, None] * occipital[None, :, None]) * p1[None, None]
        signal -= (face_uv * face[idx])[:, None, None] * lateral[None, :, None] * n170
        data = signal + _smooth_noise(rng, pos, (idx.size, n_channels, times.size), noise_uv)
        xyz = pos if positions else np.full_like(pos, np.nan)
        ds = xr.Dataset(
            {"epochs": (("epoch", "channel", "time"), (data * 1e-6).astype(np.float32))},
            coords={
                "stimulus": ("epoch", np.array(shown, dtype=object)),
                "channel": np.array(names, dtype=object),
                "ch_x": ("channel", xyz[:, 0], {"units": "m"}),
                "ch_y": ("channel", xyz[:, 1], {"units": "m"}),
                "ch_z": ("channel", xyz[:, 2], {"units": "m"}),
                "time": times,
            },
            attrs={"sfreq": SFREQ, "entities": {"subject": subject, "run": f"0{run + 1}"}},
        )
        paths.append(
            write_dataset(ds, root / f"sub-{subject}_run-0{run + 1}_epo.zarr", provenance={})
        )
    store = xr.Dataset(
        {"features": (("stimulus", "feature"), feats)},
        coords={"stimulus": np.array(images, dtype=object), "feature": np.arange(N_FEATURES)},
    )
    features = write_dataset(store, root / f"sub-{subject}_features.zarr", provenance={})
    return {"epochs": paths, "features": features, "channels": names, "times": times}


# ------------------------------------------------------------------ the planted effect
@pytest.mark.slow
@pytest.mark.parametrize("subject", ["01", "02"])
def test_planted_p1_is_significant_at_100_ms(tmp_path, subject):
    facts = make_faces_session(tmp_path, subject=subject, seed=int(subject))
    out = fit_eeg_encoding(
        epochs=facts["epochs"],
        features={"image_statistics": facts["features"]},
        output=tmp_path / "enc.zarr",
        config={**FAST, "inference": {"n_permutations": 100}},  # fewer for speed
        provenance={},
    )
    ds = xr.open_zarr(out).load()
    # every image once, by 5-fold cross-validation over images
    assert ds.attrs["test_design"] == "cross-validated"
    assert ds.attrs["n_outer_folds"] == 5
    assert ds.sizes["stimulus"] == 200 and ds.sizes["repeat"] == 2
    assert sorted(np.bincount(ds["fold"].values)) == [40] * 5
    assert ds.attrs["cluster_adjacency"] == "channel x latency"
    peak = float(ds["peak_latency"])
    assert abs(peak - P1_LATENCY) <= TOLERANCE, peak
    assert ds.attrs["peak_significant"] and float(ds["peak_p"]) <= 0.05
    # the interval over resampled images holds the planted latency; most resamplings
    # peak within the tolerance (the rest on the largest noise r elsewhere)
    lower, upper = ds["peak_latency_ci"].values
    assert lower <= P1_LATENCY <= upper, (lower, upper)
    boot = ds["peak_latency_bootstrap"].values
    assert np.mean(np.abs(boot - P1_LATENCY) <= TOLERANCE + 1e-6) >= 0.7
    # the significant cluster holds the occipital channels at 100 ms, not the frontal ones
    at_peak = ds["significant_cluster"].sel(latency=peak, method="nearest")
    assert at_peak.sel(channel=list(OCCIPITAL)).all()
    assert not at_peak.sel(channel=["Fp1", "Fpz", "Fp2"]).any()
    # no significant target before the stimulus
    assert not ds["significant_cluster"].sel(latency=slice(None, -0.02)).any()
    # the stored maps give the stored r course (the evaluation stage's r)
    r = pearson_r(
        ds["y_test"].values.astype(np.float64).mean(0).reshape(200, -1),
        ds["y_pred"].values.astype(np.float64).reshape(200, -1),
    ).reshape(ds.sizes["channel"], -1)
    np.testing.assert_allclose(np.nanmean(r, axis=0), ds["r_course"].values, atol=1e-5)
    # the cluster statistic is the t of that r over 200 images (the test refits in float64
    # and may choose another of two near-tied penalties on a rare target)
    close = np.isclose(ds["cluster_t"].values, correlation_t(r, 200), rtol=1e-4, atol=1e-4)
    assert close.mean() >= 0.999


# ------------------------------------------------------------------ the pieces
def _smooth_map(rng: np.random.Generator, n_lat: int, n_ch: int, pos: np.ndarray) -> np.ndarray:
    white = rng.standard_normal((n_lat, n_ch))
    dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    mixed = white @ np.exp(-(dist**2) / (2 * 0.04**2))
    return 2.5 * gaussian_filter1d(mixed, 1.5, axis=0) / gaussian_filter1d(mixed, 1.5, axis=0).std()


def test_clusters_match_mne():
    """Clusters and masses of a t map equal those MNE forms with the same adjacency."""
    rng = np.random.default_rng(3)
    names, pos = _montage(23)
    n_lat = 17
    stat = _smooth_map(rng, n_lat, len(names), pos)
    ch_adj = channel_adjacency(pos, names)
    info = mne.create_info(names, SFREQ, "eeg")
    montage = mne.channels.make_dig_montage(dict(zip(names, pos, strict=True)), coord_frame="head")
    info.set_montage(montage)
    mne_adj, mne_names = mne.channels.find_ch_adjacency(info, "eeg")
    assert list(mne_names) == names
    np.testing.assert_array_equal(ch_adj.toarray(), (mne_adj.toarray() + np.eye(len(names))) > 0)
    adjacency = target_adjacency(n_lat, ch_adj, len(names))
    threshold = 1.2
    labels, masses = find_clusters(stat, threshold, adjacency)
    _, clusters, _, _ = mne.stats.permutation_cluster_1samp_test(
        np.zeros((3, n_lat, len(names))),
        threshold=threshold,
        n_permutations=1,
        tail=1,
        stat_fun=lambda x: stat.ravel(),
        adjacency=mne.stats.combine_adjacency(n_lat, mne_adj),
        out_type="mask",
        verbose="error",
    )
    assert len(clusters) == masses.size >= 3
    theirs = sorted((float(stat[c].sum()), tuple(np.flatnonzero(c.ravel()))) for c in clusters)
    ours = sorted(
        (float(m), tuple(np.flatnonzero((labels == k + 1).ravel()))) for k, m in enumerate(masses)
    )
    for (m1, t1), (m2, t2) in zip(theirs, ours, strict=True):
        assert t1 == t2 and m1 == pytest.approx(m2)
    assert np.all(np.diff(masses) <= 0)  # labelled by decreasing mass
    # without positions, clusters never join two channels
    labels, _ = find_clusters(stat, threshold, target_adjacency(n_lat, None, len(names)))
    for k in range(1, labels.max() + 1):
        assert np.unique(np.nonzero(labels == k)[1]).size == 1
    assert channel_adjacency(None, names) is None
    assert channel_adjacency(np.full_like(pos, np.nan), names) is None


def test_threshold_and_t_follow_student():
    n = 37
    r = np.array([-0.5, 0.0, 0.3, 0.9])
    t = correlation_t(r, n)
    expected = [stats.pearsonr(*_pair(v, n)).statistic for v in r]
    np.testing.assert_allclose(r, expected, atol=1e-12)
    # the t of a correlation gives scipy's two-sided p-value
    p = 2 * stats.t.sf(np.abs(t), n - 2)
    np.testing.assert_allclose(p[r != 0], [stats.pearsonr(*_pair(v, n)).pvalue for v in r[r != 0]])
    crit = cluster_forming_threshold(0.01, n)
    assert stats.t.sf(crit, n - 2) == pytest.approx(0.01)
    with pytest.raises(ValueError, match=r"`cluster_threshold` must be in \(0, 1\), got 1.5"):
        cluster_forming_threshold(1.5, n)


def _pair(r: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two samples of size ``n`` whose Pearson correlation is exactly ``r``."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, n))
    a = (a - a.mean()) / np.linalg.norm(a - a.mean())
    b = b - b.mean() - (b @ a) * a
    b /= np.linalg.norm(b)
    return a, r * a + np.sqrt(1 - r**2) * b


def test_stimulus_folds_are_balanced_and_seeded():
    folds = stimulus_folds(23, 5, seed=4)
    assert sorted(np.bincount(folds)) == [4, 4, 5, 5, 5]
    np.testing.assert_array_equal(folds, stimulus_folds(23, 5, seed=4))
    assert not np.array_equal(folds, stimulus_folds(23, 5, seed=5))
    assert sorted(stimulus_folds(4, 5, seed=0)) == [0, 1, 2, 3]  # one stimulus per fold
    with pytest.raises(ValueError, match="need at least 3 stimuli, got 2"):
        stimulus_folds(2, 5, seed=0)
    with pytest.raises(ValueError, match="`outer_folds` must be an int >= 2, got 1"):
        stimulus_folds(20, 1, seed=0)


def _small_session(
    rng: np.random.Generator,
    n_images: int = 31,
    n_times: int = 4,
    n_ch: int = 3,
    n_features: int = 4,
):
    images = [f"img{i:02d}" for i in range(n_images)]
    shown = np.array(_ds000117_order(rng, images))
    scale, shift = np.resize([1, 2, 0.5, 3], n_features), np.resize([0, 1, -2, 5], n_features)
    feats = {s: rng.standard_normal(n_features) * scale + shift for s in images}
    X = np.array([feats[s] for s in shown])
    signal = X[:, :2] @ rng.standard_normal((2, n_times * n_ch))
    Y = (signal + 2 * rng.standard_normal(signal.shape)).reshape(-1, n_times, n_ch)
    return images, shown, X, Y.astype(np.float32)


def test_cross_validated_predictions_match_sklearn(monkeypatch):
    """Each fold's model is a ridge on that fold's training epochs only (standardised and
    centred there, penalty chosen there), and every image is predicted once."""
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler

    import neuroflow.encoding.eeg_design as eeg

    rng = np.random.default_rng(7)
    images, shown, X, Y = _small_session(rng)
    folds = stimulus_folds(len(images), 4, seed=0)
    seen = []
    original = eeg.fit_epochs_ridge

    def spy(X, Y, *, groups, **kwargs):
        seen.append(set(groups))
        return original(X, Y, groups=groups, **kwargs)

    monkeypatch.setattr(eeg, "fit_epochs_ridge", spy)
    pred, alphas = cross_validated_predictions(
        X, Y, stimuli=shown, ids=images, folds=folds, standardize=True,
        alphas=np.array([3.0]), n_splits=3, device="cpu", dtype="float64",
    )  # fmt: skip
    assert pred.shape == (len(images), 12) and alphas.shape == (4, 12)
    ids = np.array(images)
    assert len(seen) == 4  # one inner cross-validation per outer fold
    for k, groups in enumerate(seen):
        assert groups == set(ids[folds != k])  # the inner CV sees training images only
    intercept = Y.reshape(len(Y), -1).mean(0)
    for k in range(4):
        train = ~np.isin(shown, ids[folds == k])
        scaler = StandardScaler().fit(X[train])
        model = Ridge(alpha=3.0).fit(scaler.transform(X[train]), Y[train].reshape(-1, 12))
        rows = [int(np.flatnonzero(shown == s)[0]) for s in ids[folds == k]]
        expected = model.predict(scaler.transform(X[rows])) - Y[train].reshape(-1, 12).mean(0)
        np.testing.assert_allclose(pred[folds == k] - intercept, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n_features", [4, 24, 60])
def test_fold_refit_reproduces_the_fits(n_features):
    """The closed-form refit gives the folds' predictions and penalties, and moving the
    features gives what refitting on moved features gives (penalties chosen again), for
    a few features, for more than an inner fit's training stimuli (21 to 22), and for
    more than an outer fit's (32: the stimulus-space form)."""
    from neuroflow.encoding.eeg_design import fold_refit

    rng = np.random.default_rng(11)
    images, shown, X, Y = _small_session(rng, n_images=40, n_features=n_features)
    folds = stimulus_folds(len(images), 5, seed=1)
    cfg = {"alphas": {"start": -2.0, "stop": 4.0, "num": 7}, "cv": {"grouped_kfold": 3}}
    cfg |= {"scoring": "r2", "standardize": True}
    common = {"standardize": True, "n_splits": 3, "device": "cpu", "dtype": "float64"}
    grid = 10.0 ** np.linspace(-2, 4, 7)
    pred, alphas = cross_validated_predictions(
        X, Y, stimuli=shown, ids=images, folds=folds, alphas=grid, **common
    )
    refit = fold_refit(X, Y, shown, images, folds, alphas, cfg)
    assert refit.reselects
    centred = pred - Y.reshape(len(Y), -1).mean(0)
    np.testing.assert_allclose(refit.predict(), centred, rtol=1e-5, atol=1e-5)
    order = np.random.default_rng(0).permutation(len(images))
    moved = dict(zip(images, np.array([X[shown == s][0] for s in images])[order], strict=True))
    X_moved = np.array([moved[s] for s in shown])
    pred2, _ = cross_validated_predictions(
        X_moved, Y, stimuli=shown, ids=images, folds=folds, alphas=grid, **common
    )
    np.testing.assert_allclose(
        refit.predict(order), pred2 - Y.reshape(len(Y), -1).mean(0), rtol=1e-5, atol=1e-5
    )


def test_bootstrap_matches_resampled_pearson():
    rng = np.random.default_rng(5)
    n, n_lat, n_ch = 25, 9, 4
    latencies = np.linspace(-0.04, 0.28, n_lat)
    pred = rng.standard_normal((n, n_lat, n_ch))
    obs = pred * np.linspace(0, 1, n_lat)[None, :, None] + rng.standard_normal(pred.shape)
    peaks, interval = bootstrap_peak_latency(pred, obs, latencies, n_bootstraps=40, seed=9)
    draws = np.random.default_rng(9)
    for b in range(40):
        idx = draws.integers(0, n, n)
        r = pearson_r(obs[idx].reshape(n, -1), pred[idx].reshape(n, -1)).reshape(n_lat, n_ch)
        course = np.where(latencies >= 0, np.nanmax(r, axis=1), -np.inf)
        assert peaks[b] == pytest.approx(latencies[int(np.argmax(course))]), b
    np.testing.assert_allclose(interval, np.percentile(peaks, [2.5, 97.5]))
    empty, none = bootstrap_peak_latency(pred, obs, latencies, n_bootstraps=0)
    assert empty.size == 0 and np.isnan(none).all()


def test_design_holds_out_a_designated_test_set_else_cross_validates():
    # THINGS-EEG-like (the demo): 6 test images x 10 among 50 images shown once -> held out
    things = [f"t{i}" for i in range(6) for _ in range(10)] + [f"x{i}" for i in range(50)]
    assert designated_test_stimuli(things) == [f"t{i}" for i in range(6)]
    assert scoring_design(things, "auto") == ("held-out", [f"t{i}" for i in range(6)])
    assert scoring_design(things, "cross-validated") == ("cross-validated", [])
    # ds000117-like: every image twice, a few once -> every image scored by cross-validation
    faces = [f"f{i}" for i in range(70) for _ in range(2)] + [f"u{i}" for i in range(5)]
    assert designated_test_stimuli(faces) == []
    assert scoring_design(faces, "auto") == ("cross-validated", [])
    design, held = scoring_design(faces, "repeated")
    assert design == "held-out" and len(held) == 70
    assert scoring_design(faces, ["f3", "f1"]) == ("held-out", ["f3", "f1"])


@pytest.mark.slow
def test_null_family_wise_error_is_at_its_level():
    """On data without any planted effect, over many seeds, a significant cluster turns
    up about as often as the level (5 %): the refitting null keeps the max over channels
    x latencies in check. Sizes are small; 39 permutations make p <= 0.05 exact."""
    from neuroflow.encoding.eeg_design import fold_refit

    n_seeds, n_images, n_lat = 200, 30, 20
    names, pos = _montage(8)
    adjacency = target_adjacency(n_lat, channel_adjacency(pos, names), len(names))
    cfg = {"alphas": {"start": -1.0, "stop": 5.0, "num": 7}, "cv": {"grouped_kfold": 3}}
    cfg |= {"scoring": "r2", "standardize": True}
    grid = 10.0 ** np.linspace(-1, 5, 7)
    hits = 0
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        images = [f"i{i}" for i in range(n_images)]
        shown = np.array(_ds000117_order(rng, images))
        feats = dict(zip(images, rng.standard_normal((n_images, N_FEATURES)), strict=True))
        X = np.array([feats[s] for s in shown])
        Y = _smooth_noise(rng, pos, (shown.size, len(names), n_lat), 5.0)
        Y = Y.transpose(0, 2, 1).astype(np.float32)
        folds = stimulus_folds(n_images, 5, seed)
        pred, alphas = cross_validated_predictions(
            X, Y, stimuli=shown, ids=images, folds=folds, standardize=True, alphas=grid,
            n_splits=3, device="cpu",
        )  # fmt: skip
        observed = np.stack([Y[shown == s].mean(0) for s in images])
        test = cluster_permutation_test(
            pred.reshape(observed.shape),
            observed,
            adjacency,
            n_permutations=39,
            threshold=0.01,
            seed=seed,
            refit=fold_refit(X, Y, shown, images, folds, alphas, cfg),
        )
        hits += bool((test.p_values <= 0.05).any())
    # within sampling error of 5 %: 10 expected, 2.5th-97.5th percentiles 4 and 17
    assert stats.binomtest(hits, n_seeds, 0.05).pvalue > 0.01, hits


def test_settings_errors_and_fallbacks(tmp_path):
    facts = make_faces_session(
        tmp_path, subject="03", seed=3, n_images=15, n_channels=12, positions=False
    )
    common = {"epochs": facts["epochs"], "features": {"s": facts["features"]}, "provenance": {}}
    for inference, match in [
        ({"cluster_threshold": 1.5}, r"`inference.cluster_threshold` must be a number in \(0, 1\)"),
        ({"n_permutations": -1}, r"`inference.n_permutations` must be an int >= 0, got -1"),
        ({"adjacency": "sensors"}, r"`inference.adjacency` must be one of \['auto', 'time'\]"),
    ]:
        with pytest.raises(ValueError, match=match):
            fit_eeg_encoding(
                output=tmp_path / "x.zarr", config={**FAST, "inference": inference}, **common
            )
    with pytest.raises(ValueError, match=r"Unknown key 'eeg_encoding\.inference\.n_perm'"):
        fit_eeg_encoding(
            output=tmp_path / "x.zarr", config={**FAST, "inference": {"n_perm": 5}}, **common
        )
    assert not (tmp_path / "x.zarr").exists()
    # no channel positions: clusters along latency; no permutations: no p-values
    out = fit_eeg_encoding(
        output=tmp_path / "enc.zarr",
        config={**FAST, "inference": {"n_permutations": 0, "n_bootstraps": 20}},
        **common,
    )
    ds = xr.open_zarr(out)
    assert ds.attrs["cluster_adjacency"] == "latency"
    assert ds.attrs["peak_p"] is None and not ds.attrs["peak_significant"]
    assert ds.attrs["inference_inconclusive"] and ds.sizes["permutation"] == 0
    assert np.isnan(ds["cluster_p"].values).all() and not ds["significant_cluster"].any()
    assert ds.sizes["bootstrap"] == 20


def test_fold_refit_of_a_wide_layer_uses_the_kernel_form_with_the_same_predictions():
    """More features than training stimuli: the stimulus-space solve equals the
    feature-space one, with and without moved features."""
    rng = np.random.default_rng(23)
    n_stim, n_feat, n_targets = 13, 41, 7
    features = rng.standard_normal((n_stim, n_feat))
    counts = rng.integers(1, 4, n_stim).astype(float)
    sums = rng.standard_normal((n_stim, n_targets)) * counts[:, None]
    folds = np.arange(n_stim) % 3
    alphas = 10.0 ** rng.uniform(-1, 2, (3, n_targets))
    refit = FoldRefit(features, sums, counts, folds, alphas, standardize=True)
    order = rng.permutation(n_stim)
    for perm in (None, order):
        wide = refit.predict(perm)
        # the feature-space solution of every fold, written out
        feats = features if perm is None else features[perm]
        expected = np.empty_like(wide)
        for k in range(3):
            held, train = folds == k, folds != k
            c = counts[train]
            mean = c @ feats[train] / c.sum()
            scale = np.sqrt(c @ (feats[train] - mean) ** 2 / c.sum())
            z = (feats - mean) / scale
            gram = (z[train] * c[:, None]).T @ z[train]
            y = sums[train] - c[:, None] * (sums[train].sum(0) / c.sum())
            for t in range(n_targets):
                coef = np.linalg.solve(gram + alphas[k, t] * np.eye(n_feat), z[train].T @ y[:, t])
                expected[held, t] = z[held] @ coef
        np.testing.assert_allclose(wide, expected, rtol=1e-8, atol=1e-10)

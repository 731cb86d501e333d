"""Single-trial betas (LSA / LSS) from cleaned run stores, and their noise ceilings."""

from __future__ import annotations

import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from nilearn.glm.first_level import FirstLevelModel, make_first_level_design_matrix
from scipy.signal import lfilter

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.preprocessing.fmri.clean import clean_signals
from neuroflow.preprocessing.fmri.single_trial import (
    estimate_single_trials,
    estimator_matrix,
    event_regressors,
    resolve_config,
)

PROV = {"stage": "single_trial", "version": "test"}
EVENTS_DIR = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "data"
    / "bids-events"
    / "ds000117"
    / "sub-01"
    / "ses-mri"
    / "func"
)


def _strings(values):
    return np.array([str(v) for v in values], dtype=np.dtypes.StringDType())


def write_run_store(path, bold, *, tr, events, run="1", first=0, steps=None, n_acquired=None):
    """A run store as ``preprocess_fmri`` writes it (bold, time, voxel coords, events)."""
    n_times, n_voxels = bold.shape
    ijk = np.stack(np.unravel_index(np.arange(n_voxels), (n_voxels, 1, 1)), axis=1)
    events = events.reset_index(drop=True)
    ds = xr.Dataset(
        {
            "bold": (("time", "voxel"), bold.astype(np.float32), {"units": "a.u."}),
            "event_onset": ("event", events["onset"].to_numpy(float)),
            "event_duration": ("event", events["duration"].to_numpy(float)),
            "trial_type": ("event", _strings(events["trial_type"])),
            "stim_file": ("event", _strings(events["stim_file"])),
        },
        coords={
            "time": ("time", (first + np.arange(n_times)) * tr, {"units": "s"}),
            "voxel": ("voxel", np.arange(n_voxels)),
            "i": ("voxel", ijk[:, 0].astype(np.int32)),
            "j": ("voxel", ijk[:, 1].astype(np.int32)),
            "k": ("voxel", ijk[:, 2].astype(np.int32)),
            "x": ("voxel", 2.0 * ijk[:, 0], {"units": "mm"}),
            "y": ("voxel", 2.0 * ijk[:, 1], {"units": "mm"}),
            "z": ("voxel", 2.0 * ijk[:, 2], {"units": "mm"}),
            "roi": ("voxel", _strings(["v1" if v % 2 else "" for v in range(n_voxels)])),
        },
    )
    ds.attrs.update(
        {
            "tr": tr,
            "steps": steps or [],
            "n_volumes_acquired": n_acquired or first + n_times,
            "entities": {"subject": "01", "task": "faces", "run": run},
        }
    )
    return write_dataset(ds, path, provenance={"stage": "preprocess_fmri", "version": "t"})


def make_events(rng, n_trials, *, isi, start=4.0, jitter=1.0, n_stimuli=None, types=("a", "b")):
    """Trials every ``isi`` ± ``jitter`` s, cycling through trial types and stimuli."""
    gaps = isi + rng.uniform(-jitter, jitter, n_trials)
    onsets = start + np.r_[0.0, np.cumsum(gaps[:-1])]
    n_stimuli = n_stimuli or n_trials
    return pd.DataFrame(
        {
            "onset": np.round(onsets, 3),
            "duration": np.full(n_trials, 1.0),
            "trial_type": [types[t % len(types)] for t in range(n_trials)],
            "stim_file": [f"stim/{t % n_stimuli:03d}.png" for t in range(n_trials)],
        }
    )


def trial_design(events, n_times, tr, hrf_model="glover"):
    """Per-trial main regressors from nilearn's make_first_level_design_matrix."""
    ev = events.assign(trial_type=[f"t{t:03d}" for t in range(len(events))])
    dm = make_first_level_design_matrix(
        np.arange(n_times) * tr,
        ev[["onset", "duration", "trial_type"]],
        hrf_model=hrf_model,
        drift_model=None,
    )
    return dm[[f"t{t:03d}" for t in range(len(events))]].to_numpy()


def simulate(rng, events, betas, *, n_times, tr, noise):
    x = trial_design(events, n_times, tr)
    return x @ betas + noise * rng.standard_normal((n_times, betas.shape[1]))


def estimate(tmp_path, stores, **config):
    cfg = {"drift_model": "none", "zscore": False, **config}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        out = estimate_single_trials(
            runs=stores, output=tmp_path / "betas.zarr", config=cfg, provenance=PROV
        )
    return open_dataset(out).load()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*Generation of a mask has been requested:RuntimeWarning")
@pytest.mark.parametrize("hrf_model", ["glover", "spm + derivative"])
def test_lss_equals_nilearn_first_level_loop(tmp_path, rng, hrf_model):
    tr, n_times, shape = 2.0, 57, (3, 2, 1)
    events = make_events(rng, 7, isi=6.0)
    y = rng.standard_normal((n_times, 6)) + simulate(
        rng, events, rng.normal(1, 0.5, (7, 6)), n_times=n_times, tr=tr, noise=0.0
    )
    store = write_run_store(tmp_path / "run.zarr", y, tr=tr, events=events)
    ours = estimate(tmp_path, [store], method="lss", hrf_model=hrf_model)

    img = nib.Nifti1Image(y.T.reshape(*shape, n_times).astype(np.float64), np.eye(4))
    mask = nib.Nifti1Image(np.ones(shape, np.int8), np.eye(4))
    reference = np.empty((7, 6))
    for t in range(7):
        ev = events[["onset", "duration"]].assign(
            trial_type=np.where(np.arange(7) == t, "target", "other")
        )
        flm = FirstLevelModel(
            t_r=tr,
            hrf_model=hrf_model,
            drift_model=None,
            signal_scaling=False,
            mask_img=mask,
            noise_model="ols",
            minimize_memory=True,
        ).fit(img, events=ev)  # fmt: skip
        effect = flm.compute_contrast("target", output_type="effect_size")
        reference[t] = effect.get_fdata().reshape(-1)
    np.testing.assert_allclose(ours["betas"].values, reference, rtol=1e-4, atol=1e-5)


def test_lsa_equals_nilearn_design_least_squares(tmp_path, rng):
    tr, n_times = 1.5, 80
    events = make_events(rng, 9, isi=5.0)
    y = rng.standard_normal((n_times, 8))
    store = write_run_store(tmp_path / "run.zarr", y, tr=tr, events=events)
    ours = estimate(tmp_path, [store], method="lsa", hrf_model="glover + derivative")
    ev = events.assign(trial_type=[f"t{t:03d}" for t in range(9)])
    dm = make_first_level_design_matrix(
        np.arange(n_times) * tr,
        ev[["onset", "duration", "trial_type"]],
        hrf_model="glover + derivative",
        drift_model=None,
    )
    coef = np.linalg.lstsq(dm.to_numpy(), y, rcond=None)[0]
    main = [dm.columns.get_loc(f"t{t:03d}") for t in range(9)]
    np.testing.assert_allclose(ours["betas"].values, coef[main], rtol=1e-4, atol=1e-5)


def test_both_methods_recover_planted_betas_on_separated_trials(tmp_path, rng):
    tr, n_times, n_trials, n_voxels = 2.0, 131, 11, 300
    events = make_events(rng, n_trials, isi=22.0)
    truth = rng.normal(1.0, 0.6, (n_trials, n_voxels))
    clean = simulate(rng, events, truth, n_times=n_times, tr=tr, noise=0.0)
    noisy = clean + 0.5 * rng.standard_normal(clean.shape)
    stores = [
        write_run_store(tmp_path / "clean.zarr", clean, tr=tr, events=events),
        write_run_store(tmp_path / "noisy.zarr", noisy, tr=tr, events=events, run="2"),
    ]
    for method in ("lsa", "lss"):
        ds = estimate(tmp_path, stores, method=method)
        exact, est = ds["betas"].values[:n_trials], ds["betas"].values[n_trials:]
        # noiseless: LSA is exact; LSS nearly so, as trials barely overlap
        tol = 1e-4 if method == "lsa" else 0.02
        np.testing.assert_allclose(exact, truth, atol=tol)
        # noisy: unbiased (mean error over voxels is ~0 for every trial)
        bias = (est - truth).mean(axis=1)
        se = (est - truth).std(axis=1) / np.sqrt(n_voxels)
        assert np.all(np.abs(bias) < 4 * se + 1e-3), (method, bias)
        assert ds.attrs["method"] == method


def test_lss_beats_lsa_with_short_isis(tmp_path, rng):
    """Mumford et al. (2012): short ISIs make LSA betas noisy; LSS tracks the truth better."""
    tr, n_times, n_trials, n_voxels = 1.0, 160, 50, 200
    events = make_events(rng, n_trials, isi=2.5, jitter=0.5)
    truth = rng.normal(1.0, 0.5, (n_trials, n_voxels))
    y = simulate(rng, events, truth, n_times=n_times, tr=tr, noise=1.0)
    store = write_run_store(tmp_path / "run.zarr", y, tr=tr, events=events)

    def accuracy(method):
        est = estimate(tmp_path, [store], method=method)["betas"].values
        return np.mean([np.corrcoef(est[:, v], truth[:, v])[0, 1] for v in range(n_voxels)])

    lsa, lss = accuracy("lsa"), accuracy("lss")
    assert lss > lsa + 0.05, (lsa, lss)


def test_store_layout_and_repeats(tmp_path, rng):
    tr, n_times = 2.0, 70
    stores, tables = [], []
    for run in ("1", "2"):
        ev = make_events(rng, 9, isi=13.0, n_stimuli=5, types=("face", "house", "null"))
        ev.loc[ev["trial_type"] == "null", "stim_file"] = ""
        tables.append(ev)
        y = rng.standard_normal((n_times, 8))
        stores.append(write_run_store(tmp_path / f"run-{run}.zarr", y, tr=tr, events=ev, run=run))
    ds = estimate(tmp_path, stores, trial_types=["face", "house"], zscore=True)
    kept = pd.concat([t[t["trial_type"] != "null"] for t in tables], ignore_index=True)
    assert ds["betas"].dims == ("trial", "voxel")
    assert ds["betas"].dtype == np.float32
    assert ds.sizes == {"trial": len(kept), "voxel": 8}
    assert list(ds["stimulus"].values) == list(kept["stim_file"])
    assert list(ds["trial_type"].values) == list(kept["trial_type"])
    np.testing.assert_allclose(ds["onset"].values, kept["onset"])
    assert ds["onset"].attrs["units"] == "s"
    assert list(ds["run"].values) == ["task-faces_run-1"] * 6 + ["task-faces_run-2"] * 6
    # z-scored within each run
    for run in np.unique(ds["run"].values):
        b = ds["betas"].values[ds["run"].values == run]
        np.testing.assert_allclose(b.mean(axis=0), 0, atol=1e-5)
        np.testing.assert_allclose(b.std(axis=0, ddof=1), 1, atol=1e-5)
    counts = kept["stim_file"].value_counts()
    assert ds.attrs["n_repeated_stimuli"] == int((counts >= 2).sum())
    assert ds.attrs["noise_ceiling_n"] == int(counts.mode().max())
    expected_repeat = kept.groupby("stim_file").cumcount().to_numpy()
    np.testing.assert_array_equal(ds["repeat"].values, expected_repeat)
    for name in ("i", "j", "k", "x", "roi"):
        assert name in ds.coords
    assert list(ds["roi"].values) == ["v1" if v % 2 else "" for v in range(8)]
    assert ds["ncsnr"].dims == ("voxel",)
    assert ds["noise_ceiling"].attrs["units"] == "%"
    nc = ds["noise_ceiling"].values
    assert np.all((nc >= 0) & (nc <= 100))
    assert ds.attrs["n_trials"] == len(kept)
    assert ds.attrs["hrf_model"] == "glover"
    assert ds.attrs["drifts"][0]["n_excluded_events"] == 3


def test_auto_drifts_mirror_the_upstream_cleaning(tmp_path, rng):
    """Betas from cleaned data with mirrored drifts equal a fit of the raw data with drifts."""
    tr, n_acquired, first, n_voxels = 2.0, 97, 3, 6
    events = make_events(rng, 8, isi=10.0, start=12.0)
    raw = simulate(
        rng, events, rng.normal(2, 1, (8, n_voxels)), n_times=n_acquired, tr=tr, noise=1.0
    )
    t = np.arange(n_acquired) * tr
    raw += 4 * (t / t[-1])[:, None] + 3 * np.cos(np.pi * t / t[-1])[:, None]
    raw = raw[first:]
    cleaned = clean_signals(raw, t_r=tr, detrend_order=1, high_pass=0.01, standardize=False)
    steps = [
        {"name": "drop_volumes", "n": first},
        {"name": "detrend", "order": 1},
        {"name": "temporal_filter", "filter": "cosine", "high_pass_hz": 0.01},
    ]
    store = write_run_store(
        tmp_path / "run.zarr", cleaned, tr=tr, events=events, first=first, steps=steps
    )
    auto = estimate(tmp_path, [store], method="lsa", drift_model="auto")
    none = estimate(tmp_path, [store], method="lsa", drift_model="none")

    # the design's clock starts at the first kept volume (nilearn's grid is not shift-invariant)
    dm = make_first_level_design_matrix(
        np.arange(n_acquired - first) * tr,
        events.assign(trial_type=[f"t{i}" for i in range(8)], onset=events["onset"] - first * tr)[
            ["onset", "duration", "trial_type"]
        ],
        hrf_model="glover",
        drift_model="cosine",
        high_pass=0.01,
    )
    dm["linear"] = np.linspace(-1, 1, len(dm))
    coef = np.linalg.lstsq(dm.to_numpy(), raw, rcond=None)[0]
    reference = coef[[dm.columns.get_loc(f"t{i}") for i in range(8)]]
    np.testing.assert_allclose(auto["betas"].values, reference, rtol=1e-3, atol=1e-3)
    assert not np.allclose(none["betas"].values, reference, atol=1e-2)
    assert auto.attrs["drifts"][0]["high_pass_hz"] == 0.01


def test_estimator_matrix_single_trial_lss_is_lsa(rng):
    trials = event_regressors(np.array([5.0]), np.array([1.0]), frame_times=np.arange(40) * 2.0)
    nuisance = np.ones((40, 1))
    np.testing.assert_allclose(
        estimator_matrix(trials, nuisance, method="lss"),
        estimator_matrix(trials, nuisance, method="lsa"),
        atol=1e-10,
    )
    with pytest.raises(ValueError, match="`method` must be 'lss' or 'lsa'"):
        estimator_matrix(trials, nuisance, method="ols")


def test_errors(tmp_path, rng):
    tr, n_times = 2.0, 40
    y = rng.standard_normal((n_times, 7))
    ok = make_events(rng, 5, isi=8.0)
    store = write_run_store(tmp_path / "ok.zarr", y, tr=tr, events=ok)
    with pytest.raises(ValueError, match=r"`trial_types` has \['house'\] which no run has"):
        estimate(tmp_path, [store], trial_types=["a", "house"])
    late = ok.copy()
    late.loc[3, "onset"] = 95.0
    bad = write_run_store(tmp_path / "late.zarr", y, tr=tr, events=late)
    with pytest.raises(ValueError, match=r"late.zarr: event_onset 95 s of event 3 .* outside"):
        estimate(tmp_path, [bad])
    empty = write_run_store(tmp_path / "empty.zarr", y, tr=tr, events=ok.iloc[:0])
    with pytest.raises(ValueError, match="No trials to estimate"):
        estimate(tmp_path, [empty])
    dense = ok.iloc[:3].assign(onset=[1.0, 4.0, 7.0])
    short = write_run_store(tmp_path / "short.zarr", y[:6], tr=tr, events=dense)
    with pytest.raises(ValueError, match=r"LSA design of 3 trials .* more columns than the 6"):
        estimate(tmp_path, [short], method="lsa", hrf_model="spm + derivative + dispersion")
    with pytest.raises(ValueError, match="no event field 'event_condition'"):
        estimate(tmp_path, [store], trial_type_column="condition")
    with pytest.raises(ValueError, match="`runs` must be a non-empty list"):
        estimate(tmp_path, [])
    with pytest.raises(ValueError, match="`method` must be 'lss' or 'lsa', got 'glm'"):
        resolve_config({"method": "glm"})
    with pytest.raises(ValueError, match=r"Unknown key 'single_trial\.alpha'"):
        resolve_config({"alpha": 1})
    with pytest.raises(ValueError, match="`hrf_model` must be one of"):
        resolve_config({"hrf_model": "fir"})


@pytest.mark.skipif(
    not EVENTS_DIR.is_dir(), reason=f"real ds000117 event tables not found at {EVENTS_DIR}"
)
def test_real_event_tables_through_preprocessing(tmp_path, rng):
    """ds000117 events: n/a cells, extra columns, stim_file paths, immediate/delayed repeats."""
    from neuroflow.preprocessing.fmri import preprocess_fmri_run

    tr, n_volumes, shape = 2.0, 208, (3, 2, 2)
    files = sorted(EVENTS_DIR.glob("*_events.tsv"))
    assert len(files) == 4
    tables, stores = [], []
    stimulus_response = {}
    for f in files:
        table = pd.read_csv(f, sep="\t", na_values=["n/a"], keep_default_na=False)
        tables.append(table)
        trials = table[table["stim_type"].notna()].reset_index(drop=True)
        names = trials["stim_file"].to_list()
        for name in names:
            stimulus_response.setdefault(name, rng.normal(0, 1, int(np.prod(shape))))
        truth = np.stack([stimulus_response[n] for n in names])
        y = simulate(rng, trials, truth, n_times=n_volumes, tr=tr, noise=0.3)
        img = nib.Nifti1Image((100 + y.T.reshape(*shape, n_volumes)).astype(np.float32), np.eye(4))
        img.header["pixdim"][4] = tr
        bold = tmp_path / f.name.replace("_events.tsv", "_bold.nii.gz")
        nib.save(img, bold)
        out = tmp_path / "clean" / f.name.replace("_events.tsv", "_bold.zarr")
        stores.append(
            preprocess_fmri_run(
                bold=bold,
                events=f,
                output=out,
                config={"mask": {"source": "none"}, "drop_volumes": 0, "standardize": False},
                provenance=PROV,
            )
        )
    ds = estimate(
        tmp_path,
        stores,
        trial_type_column="stim_type",
        trial_types=["FAMOUS", "UNFAMILIAR", "SCRAMBLED"],
        drift_model="auto",
        zscore=True,
    )
    trials = pd.concat(
        [t[t["stim_type"].notna()].assign(run=i) for i, t in enumerate(tables)],
        ignore_index=True,
    )
    assert ds.attrs["n_trials"] == len(trials) == 371
    assert list(ds["stimulus"].values) == list(trials["stim_file"])
    assert list(ds["trial_type"].values) == list(trials["stim_type"])
    np.testing.assert_allclose(ds["onset"].values, trials["onset"])
    assert set(ds["run"].values) == {f"ses-mri_task-facerecognition_run-0{r}" for r in range(1, 5)}
    # every face shown twice (immediately or after a delay) within its run, 13 once
    counts = trials["stim_file"].value_counts()
    assert ds.attrs["n_repeated_stimuli"] == int((counts == 2).sum()) == 179
    assert ds.attrs["noise_ceiling_n"] == 2
    repeats = trials.groupby("stim_file").cumcount().to_numpy()
    np.testing.assert_array_equal(ds["repeat"].values, repeats)
    second = trials[repeats == 1]
    first = trials[repeats == 0].set_index("stim_file").loc[second["stim_file"]]
    lag = second["onset"].to_numpy() - first["onset"].to_numpy()
    assert (lag < 4).any() and (lag > 15).any()  # immediate and delayed repeats
    # the excluded n/a events (20 s blocks, Circle.bmp) are modelled as nuisance
    assert [d["n_excluded_events"] for d in ds.attrs["drifts"]] == [6, 6, 6, 6]
    # planted responses: a clear ncsnr from the delayed repeats alone (immediate repeats,
    # under 20 s apart, are not compared: their estimates share noise)
    assert np.all(ds["ncsnr"].values > 0.5)


def test_schema_draft_and_defaults_agree():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    from neuroflow.preprocessing.fmri.single_trial import DEFAULT_CONFIG

    root = Path(__file__).resolve().parents[3]
    schema = yaml.safe_load((root / "workflow/schemas/single_trial.schema.yaml").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    for key, sub in schema["properties"].items():
        assert "description" in sub and "default" in sub, key
    assert {k: sub["default"] for k, sub in schema["properties"].items()} == DEFAULT_CONFIG
    draft = yaml.safe_load((root / "config" / "config.yaml").read_text())["single_trial"]
    jsonschema.Draft202012Validator(schema).validate(draft)
    assert draft == DEFAULT_CONFIG
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        jsonschema.Draft202012Validator(schema).validate({**draft, "alpha": 1})
    with pytest.raises(jsonschema.ValidationError, match="'ols' is not one of"):
        jsonschema.Draft202012Validator(schema).validate({**draft, "method": "ols"})


@pytest.mark.filterwarnings("ignore:.*Generation of a mask has been requested:RuntimeWarning")
def test_immediate_repeats_do_not_inflate_the_noise_ceiling(tmp_path, rng):
    """Pure noise, every image shown twice 3 s apart, and once more in a later run: the
    nearby repeats' estimates share noise (they correlate), so comparing them would give
    large ceilings in voxels without signal; only far-apart repeats are compared."""
    tr, n_times, n_voxels = 1.0, 230, 301
    stores = []
    for run in ("1", "2"):
        rows = []
        for k in range(24):
            stim = f"stim/{k:03d}.png"
            onset = 6.0 + 9.0 * k
            rows += [(onset, stim), (onset + 3.0, stim)] if run == "1" else [(onset, stim)]
        ev = pd.DataFrame(rows, columns=["onset", "stim_file"])
        ev = ev.assign(duration=1.0, trial_type="img")
        noise = lfilter([1.0], [1.0, -0.4], rng.standard_normal((n_times, n_voxels)), axis=0)
        stores.append(write_run_store(tmp_path / f"r{run}.zarr", noise, tr=tr, events=ev, run=run))
    near = estimate(tmp_path, stores, method="lss", zscore=True, ncsnr_min_separation_s=0.0)
    far = estimate(tmp_path, stores, method="lss", zscore=True)
    # the estimates of back-to-back repeats share noise
    b = near["betas"].values
    run1 = near["run"].values == near["run"].values[0]
    first, second = b[run1][0::2], b[run1][1::2]
    corr = np.mean([np.corrcoef(first[:, v], second[:, v])[0, 1] for v in range(n_voxels)])
    assert abs(corr) > 0.15, corr
    assert np.nanmedian(near["noise_ceiling"].values) > 15.0
    # compared across runs only, pure noise has a ceiling near 0
    assert np.nanmedian(far["noise_ceiling"].values) < 8.0, np.nanmedian(far["noise_ceiling"])
    with pytest.raises(ValueError, match=r"`ncsnr_min_separation_s` must be a number"):
        estimate(tmp_path, stores, ncsnr_min_separation_s=-1)


def test_noise_variance_pairs_equal_the_pooled_variance(rng):
    from neuroflow.preprocessing.fmri.ncsnr import noise_variance

    betas = rng.standard_normal((11, 4))
    stimuli = np.array([*"aabbbcccc", "", "d"])
    onsets = np.arange(11) * 4.0
    pooled = noise_variance(betas, stimuli)
    groups = [betas[stimuli == s] for s in "abc"]
    expected = sum(((g - g.mean(0)) ** 2).sum(0) for g in groups) / (1 + 2 + 3)
    np.testing.assert_allclose(pooled, expected)
    np.testing.assert_allclose(noise_variance(betas, stimuli, onsets=onsets), expected)
    # pairs closer than 8 s dropped: a (4 s apart) goes, b and c keep their far pairs
    sep = noise_variance(betas, stimuli, onsets=onsets, min_separation=8.0)
    b, c = betas[2:5], betas[5:9]
    vb = ((b[0] - b[2]) ** 2) / 2
    vc = np.mean([(c[i] - c[j]) ** 2 / 2 for i, j in ((0, 3), (0, 2), (1, 3))], axis=0)
    np.testing.assert_allclose(sep, (2 * vb + 3 * vc) / 5)
    # different runs are always far enough apart
    runs = np.array(["1", "2"] * 5 + ["1"])
    cross = noise_variance(betas, stimuli, onsets=np.zeros(11), runs=runs, min_separation=9.0)

    def half_sq(pairs):
        return np.mean([(betas[i] - betas[j]) ** 2 / 2 for i, j in pairs], axis=0)

    va = half_sq([(0, 1)])
    vb = half_sq([(2, 3), (3, 4)])
    vc = half_sq([(5, 6), (5, 8), (6, 7), (7, 8)])
    np.testing.assert_allclose(cross, (1 * va + 2 * vb + 3 * vc) / 6)
    assert np.isnan(noise_variance(betas, stimuli, onsets=np.zeros(11), min_separation=1.0)).all()
    with pytest.raises(ValueError, match=r"`onsets` must be given with a positive"):
        noise_variance(betas, stimuli, min_separation=2.0)


@pytest.mark.parametrize("seed", range(4))
def test_lss_close_repeats_give_pure_noise_a_split_half_ceiling_near_zero(seed):
    """LSS estimates of repeats 3 s apart correlate in pure noise (r ~ 0.2), which a
    split-half ceiling reads as reliability; pairing only repeats at least 12 s apart
    (the evaluation's ``noise_ceiling.min_separation_s``) removes that bias."""
    from neuroflow.evaluation.noise_ceiling import estimate_noise_ceiling, split_half

    rng = np.random.default_rng(seed)
    tr, n_times, n_voxels, n_close, n_far = 1.0, 430, 700, 24, 24
    close = [t for k in range(n_close) for t in (4.0 + 9.0 * k, 7.0 + 9.0 * k)]
    far = [4.5 + 9.0 * k for k in range(n_far)]  # interleaved, shown again 210 s later
    onsets = np.array(close + far + [f + 210.0 for f in far])
    order = np.argsort(onsets)
    stimuli = np.array(
        [k for k in range(n_close) for _ in (0, 1)] + [n_close + k for k in range(n_far)] * 2
    )[order]
    onsets = onsets[order] + rng.uniform(-0.5, 0.5, onsets.size)
    raw = event_regressors(
        onsets, np.ones(onsets.size), frame_times=np.arange(n_times) * tr, hrf_model="glover"
    )
    estimator = estimator_matrix(raw, np.ones((n_times, 1)), method="lss")
    betas = estimator @ rng.standard_normal((n_times, n_voxels))
    index = np.stack([np.flatnonzero(stimuli == s) for s in range(n_close + n_far)], axis=1)
    y_test, test_onsets = betas[index], onsets[index]  # (2, n_stimuli, n_voxels), (2, n_stimuli)

    naive = split_half(y_test)
    assert naive.r_half.mean() > 0.08, naive.r_half.mean()
    separated = split_half(y_test, onsets=test_onsets, min_separation=12.0)
    assert separated.n_samples == n_far
    r = separated.r_half
    assert abs(r.mean()) < 3 * r.std() / np.sqrt(r.size), r.mean()
    ceiling = estimate_noise_ceiling(y_test, onsets=test_onsets, min_separation=12.0)
    assert np.mean(ceiling.low > 0) < 0.06


def test_estimation_logs_its_progress(tmp_path, rng, caplog, monkeypatch):
    import logging
    import re

    from neuroflow.preprocessing.fmri import single_trial

    monkeypatch.setattr(single_trial, "_BLOCK_VOXELS", 2)  # many blocks of a small run
    tr, n_times = 2.0, 43
    stores = []
    for run in ("1", "2"):
        events = make_events(rng, 5, isi=7.0)
        y = rng.standard_normal((n_times, 11))
        path = tmp_path / f"run-{run}.zarr"
        stores.append(write_run_store(path, y, tr=tr, events=events, run=run))
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        estimate(tmp_path, stores, method="lss")
    lines = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    # 2 runs x 11 voxels, 2 at a time: a line per 10 %, with the rate and the time left
    assert len(lines) == 10, lines
    assert all(re.search(r"^single-trial betas: \d+% \(\d+/22 voxels", s) for s in lines)
    assert all(re.search(r"\), [\d,.]+/s, ", line) for line in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]

"""The ``rsa_eeg`` stage: bootstrap intervals, channel groups and model-time RSA."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import xarray as xr
import yaml

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.evaluation.report import _rsa_figures
from neuroflow.evaluation.rsa_summary import rsa_eeg_rows
from neuroflow.rsa import eeg as rsa_eeg_module
from neuroflow.rsa import rsa_eeg
from neuroflow.rsa.inference import bootstrap_evaluations, bootstrap_rsa, draw_bootstrap_samples
from neuroflow.rsa.options import resolve_config
from neuroflow.variables import undescribed

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "rsa.schema.yaml"

N_STIM, N_REP, N_T = 23, 2, 27
TIMES = np.linspace(-0.12, 0.4, N_T)
LATENCY = 0.2
INFORMATIVE = ["I1", "I2", "I3", "I4", "I5"]
NOISE = ["N1", "N2", "N3", "N4"]
CHANNELS = [*INFORMATIVE, *NOISE, "X1"]
IDS = [f"img-{k:02d}" for k in range(N_STIM)]


def _features(tmp_path, name, values, ids=IDS, coords=None, attrs=None):
    ds = xr.Dataset(
        {"features": (("stimulus", "feature"), values.astype(np.float32))},
        coords={"stimulus": np.array(ids, dtype=object), **(coords or {})},
        attrs={"feature_set": name, **(attrs or {})},
    )
    return write_dataset(ds, tmp_path / f"{name}.zarr", provenance={})


def _epochs(tmp_path, subject, signal, rng, channels=CHANNELS, ids=IDS):
    """Epochs of ``N_REP`` presentations of each stimulus: ``signal`` plus noise.

    ``signal`` has shape (n_stimuli, n_informative, n_times) and drives the informative
    channels; the others carry noise only.
    """
    stim = np.tile(np.arange(len(ids)), N_REP)
    data = rng.standard_normal((stim.size, len(channels), N_T))
    rows = [channels.index(c) for c in INFORMATIVE if c in channels]
    data[:, rows] += signal[stim][:, : len(rows)]
    ds = xr.Dataset(
        {"epochs": (("epoch", "channel", "time"), data.astype(np.float32))},
        coords={
            "stimulus": ("epoch", np.array(ids, dtype=object)[stim]),
            "channel": np.array(channels, dtype=object),
            "time": TIMES,
        },
        attrs={"entities": {"subject": subject}},
    )
    return write_dataset(ds, tmp_path / f"sub-{subject}_epo.zarr", provenance={})


def _bump(times, latency, width=0.03):
    return np.exp(-0.5 * ((times - latency) / width) ** 2)


@pytest.fixture
def planted(tmp_path, rng):
    """3 subjects whose informative channels carry the "signal" layer's geometry at 0.2 s."""
    feats = rng.standard_normal((N_STIM, 6))
    topo = rng.standard_normal((6, len(INFORMATIVE)))
    signal = 1.5 * (feats @ topo)[:, :, None] * _bump(TIMES, LATENCY)
    epochs = [_epochs(tmp_path, s, signal, rng) for s in ("01", "02", "03")]
    features = {
        "signal": _features(tmp_path, "signal", feats),
        "unrelated": _features(tmp_path, "unrelated", rng.standard_normal((N_STIM, 6))),
    }
    return epochs, features


def _run(tmp_path, epochs, features, name="rsa", **config):
    config = {"comparisons": ["spearman"], "decim": 1, **config}
    return open_dataset(
        rsa_eeg(
            epochs=epochs,
            features=features,
            output=tmp_path / f"{name}.zarr",
            config=config,
            provenance={},
        )
    )


def test_bootstrap_evaluations_equal_bootstrap_rsa_per_set(rng):
    """Weighted mid-ranks give exactly bootstrap_rsa's samples, ties included."""
    n_stim, n_sub, n_sets = 13, 3, 4
    n_pairs = n_stim * (n_stim - 1) // 2
    models = rng.random((3, n_pairs))
    models[0] = np.round(models[0], 1)  # a model with tied dissimilarities
    data = rng.random((n_sets, n_sub, n_pairs))
    data[1, 2] = np.round(data[1, 2], 1)
    for method in ("spearman", "corr"):
        for over in ("stimuli", "subjects", "both"):
            subjects, stimuli = draw_bootstrap_samples(
                np.random.default_rng(5), n_sub, n_stim, 60, over
            )
            ours = bootstrap_evaluations(models, data, subjects, stimuli, method=method)
            for k in range(n_sets):
                ref = bootstrap_rsa(
                    models, data[k], method=method, over=over, n_bootstraps=60, seed=5
                ).samples
                np.testing.assert_allclose(ours[:, k], ref, atol=1e-12, err_msg=(method, over))
    with pytest.raises(ValueError, match=r"`data_rdms` must have shape \(n_sets, n_subjects"):
        bootstrap_evaluations(models, data[0], subjects, stimuli)


def test_bootstrap_interval_excludes_zero_only_after_onset(tmp_path, planted):
    epochs, features = planted
    boot = {"n_bootstraps": 300, "eeg_times": "all"}
    ds = _run(tmp_path, epochs, features, bootstrap=boot)
    assert ds.attrs["bootstrap_over"] == "both" and ds.attrs["bootstrap_times"] == "all"
    assert ds.attrs["n_bootstraps"] == 300 and ds.attrs["ci_level"] == 0.95
    ci = ds["model_similarity_ci"]
    assert ci.dims == ("bound", "channel_group", "layer", "time")
    sig = ci.sel(channel_group="all", layer="signal")
    at = sig.sel(time=LATENCY, method="nearest")
    assert float(at.sel(bound="lower")) > 0.1, at.values
    before = sig.sel(time=TIMES[TIMES < 0])
    assert (before.sel(bound="lower") < 0).all() and (before.sel(bound="upper") > 0).all()
    mean = ds["cross_temporal_mean"].sel(channel_group="all", comparison="spearman")
    assert (ci.sel(channel_group="all", bound="lower") <= mean + 1e-12).all()
    assert abs(float(ds["peak_time"].sel(channel_group="all", layer="signal")) - LATENCY) < 0.03
    peak_ci = ds["peak_similarity_ci"].sel(channel_group="all", layer="signal")
    t_peak = ds["peak_time"].sel(channel_group="all", layer="signal")
    np.testing.assert_allclose(peak_ci, sig.sel(time=t_peak))
    p = ds["layer_comparison_p"].sel(channel_group="all", layer_a="signal", layer_b="unrelated")
    assert float(p) < 0.05
    # the interval at one time point is bootstrap_rsa's on that time point's RDMs
    t = int(np.argmin(np.abs(TIMES - LATENCY)))
    ref = bootstrap_rsa(
        ds["model_rdm"].values,
        ds["brain_rdm"].sel(channel_group="all").isel(time=t).values,
        over="both",
        n_bootstraps=300,
        seed=0,
    )
    np.testing.assert_allclose(ci.sel(channel_group="all").isel(time=t), ref.ci, atol=1e-9)
    np.testing.assert_allclose(
        ds["model_similarity_se"].sel(channel_group="all").isel(time=t), ref.se, atol=1e-9
    )
    assert undescribed(ds) == []
    (figure,) = _rsa_figures(ds, "rsa_eeg", tmp_path / "plots")
    assert figure.name == "rsa_eeg_cross_temporal.png" and figure.exists()


def test_peaks_only_above_the_budget(tmp_path, planted, monkeypatch):
    epochs, features = planted
    n_pairs = N_STIM * (N_STIM - 1) // 2
    # room for the peaks (2 peak times x 3 subjects + 2 layers) of 50 samples, not all times
    monkeypatch.setattr(rsa_eeg_module, "EEG_BOOTSTRAP_BUDGET", 50 * 8 * n_pairs)
    ds = _run(tmp_path, epochs, features, bootstrap={"n_bootstraps": 50})
    assert ds.attrs["bootstrap_times"] == "peaks" and "peak time only" in ds.attrs["bootstrap_note"]
    assert "model_similarity_ci" not in ds
    assert (
        float(ds["peak_similarity_ci"].sel(bound="lower", layer="signal", channel_group="all")) > 0
    )
    # not even the peaks fit: `over: auto` falls back to resampling subjects
    monkeypatch.setattr(rsa_eeg_module, "EEG_BOOTSTRAP_BUDGET", 10)
    ds = _run(tmp_path, epochs, features, "rsa_subjects", bootstrap={"n_bootstraps": 50})
    assert (
        ds.attrs["bootstrap_over"] == "subjects" and "not resampled" in ds.attrs["bootstrap_note"]
    )
    assert ds["model_similarity_ci"].sizes["time"] == N_T
    # an explicit choice is kept whatever it costs
    ds = _run(
        tmp_path, epochs, features, "rsa_both", bootstrap={"n_bootstraps": 50, "over": "both"}
    )
    assert ds.attrs["bootstrap_over"] == "both" and ds.attrs["bootstrap_times"] == "peaks"
    none = _run(tmp_path, epochs, features, "rsa_none", bootstrap={"over": "none"})
    assert none.attrs["bootstrap_over"] == "none" and "peak_similarity_ci" not in none
    assert "peak_time" in none


def test_informative_channel_group_beats_noise_group(tmp_path, planted):
    epochs, features = planted
    groups = {"informative": INFORMATIVE, "noise": NOISE}
    ds = _run(tmp_path, epochs, features, channel_groups=groups, bootstrap={"over": "none"})
    assert list(ds["channel_group"].values) == ["all", "informative", "noise"]
    assert ds.attrs["channel_groups"] == groups
    assert ds["cross_temporal"].dims == ("subject", "channel_group", "comparison", "layer", "time")
    assert ds["brain_rdm"].dims == ("subject", "channel_group", "time", "pair")
    assert ds["noise_ceiling"].dims == ("channel_group", "comparison", "bound", "time")
    at = ds["cross_temporal_mean"].sel(comparison="spearman", layer="signal")
    at = at.sel(time=LATENCY, method="nearest")
    assert float(at.sel(channel_group="informative")) > 0.3
    assert abs(float(at.sel(channel_group="noise"))) < 0.2
    ceiling = ds["noise_ceiling"].sel(comparison="spearman", bound="upper")
    ceiling = ceiling.sel(time=LATENCY, method="nearest")
    assert float(ceiling.sel(channel_group="informative")) > float(
        ceiling.sel(channel_group="noise")
    )
    rows = rsa_eeg_rows(ds)
    assert set(rows["roi"]) == {"eeg", "informative", "noise"}
    peaks = rows[(rows["statistic"] == "value") & (rows["metric"] == "spearman_peak")]
    assert len(peaks) == 3 * 3 * 2  # subject x channel group x layer


def test_bad_channel_groups_are_named(tmp_path, planted, rng):
    epochs, features = planted
    with pytest.raises(ValueError, match=r"`rsa\.channel_groups\.occ` must name channels of the "):
        _run(tmp_path, epochs, features, channel_groups={"occ": ["I1", "Oz"]})
    with pytest.raises(ValueError, match=r"names must be letters.*got 'all' instead"):
        resolve_config({"channel_groups": {"all": ["I1", "I2"]}})
    with pytest.raises(ValueError, match=r"`rsa\.channel_groups\.g` must be a list of at least 2"):
        resolve_config({"channel_groups": {"g": ["I1"]}})
    with pytest.raises(TypeError, match=r"`rsa\.channel_groups` must be a mapping"):
        resolve_config({"channel_groups": ["I1", "I2"]})
    # a channel one recording lacks (dropped as bad there) names that store
    signal = np.zeros((N_STIM, len(INFORMATIVE), N_T))
    lacking = [c for c in CHANNELS if c != "I4"]
    (tmp_path / "other").mkdir()
    odd = _epochs(tmp_path / "other", "04", signal, rng, channels=lacking)
    with pytest.raises(ValueError, match=re.escape(f"{odd}: channel 'I4' of `rsa.channel_groups")):
        _run(tmp_path, [*epochs, odd], features, channel_groups={"informative": INFORMATIVE})


def test_schema_checks_channel_groups():
    schema = yaml.safe_load(SCHEMA.read_text())
    jsonschema.validate({"channel_groups": {"occipital": ["O1", "Oz", "O2"]}}, schema)
    for bad, match in (
        ({"all": ["O1", "O2"]}, "should not be valid"),
        ({"occipital": ["O1"]}, "is too short"),
        ({"occipital": ["O1", 2]}, "is not of type 'string'"),
        ({"occipital": ["O1", "O1"]}, "non-unique"),
        ({"left occipital": ["O1", "O2"]}, "does not match"),
    ):
        with pytest.raises(jsonschema.ValidationError, match=match):
            jsonschema.validate({"channel_groups": bad}, schema)
    with pytest.raises(jsonschema.ValidationError, match="is not one of"):
        jsonschema.validate({"bootstrap": {"eeg_times": "some"}}, schema)
    with pytest.raises(ValueError, match=r"`rsa\.bootstrap\.eeg_times` must be 'auto', 'all'"):
        resolve_config({"bootstrap": {"eeg_times": "some"}})


def _frame_store(tmp_path, name, clips, frame_times, values):
    """A frame-level feature store: one row per (clip, frame time)."""
    ids, sources, times = [], [], []
    for clip in clips:
        for t in frame_times:
            ids.append(f"{clip}#t={t:.3f}")
            sources.append(clip)
            times.append(t)
    coords = {
        "source_stimulus": ("stimulus", np.array(sources, dtype=object)),
        "frame_time": ("stimulus", np.array(times), {"units": "s"}),
    }
    return _features(tmp_path, name, values, ids, coords, {"row_unit": "frame"})


def test_model_time_rsa_recovers_the_planted_lag(tmp_path, rng):
    """EEG at brain time m + 0.1 s carries the clip's frame features at model time m."""
    clips = [f"clips/c{k:02d}.npy" for k in range(N_STIM)]
    model_times = np.array([0.0, 0.05, 0.1, 0.15, 0.2])
    frames = rng.standard_normal((len(model_times), N_STIM, 8))  # independent frames
    topo = rng.standard_normal((8, len(INFORMATIVE)))
    signal = sum(
        2.0 * (frames[m] @ topo)[:, :, None] * _bump(TIMES, mt + 0.1, 0.012)
        for m, mt in enumerate(model_times)
    )
    epochs = [_epochs(tmp_path, s, signal, rng, ids=clips) for s in ("01", "02")]
    values = np.transpose(frames, (1, 0, 2)).reshape(-1, 8)  # clip-major rows
    features = {
        "video": _frame_store(tmp_path, "video", clips, model_times, values),
        "static": _features(tmp_path, "static", rng.standard_normal((N_STIM, 4)), clips),
    }
    ds = _run(tmp_path, epochs, features, bootstrap={"over": "none"})
    assert ds.attrs["model_time"] == "computed"
    assert list(ds["frame_layer"].values) == ["video"]
    np.testing.assert_allclose(ds["model_time"].values, model_times)
    sim = ds["model_time_similarity"]
    assert sim.dims == ("subject", "channel_group", "frame_layer", "model_time", "time")
    assert sim.shape == (2, 1, 1, len(model_times), N_T)
    fit = ds.sel(channel_group="all", frame_layer="video")
    np.testing.assert_allclose(fit["model_time_best_brain_time"], model_times + 0.1, atol=0.021)
    assert abs(float(fit["model_time_slope"]) - 1.0) < 0.15
    assert abs(float(fit["model_time_lag"]) - 0.1) < 0.02
    peak = float(fit["model_time_peak_brain_time"]) - float(fit["model_time_peak_model_time"])
    assert abs(peak - 0.1) < 0.021 and float(fit["model_time_peak_similarity"]) > 0.3
    rows = rsa_eeg_rows(ds)
    mt = rows[rows["metric"].str.startswith("spearman_model_time")]
    assert set(mt["metric"]) == {
        "spearman_model_time_peak",
        "spearman_model_time_peak_model_time",
        "spearman_model_time_peak_brain_time",
        "spearman_model_time_slope",
        "spearman_model_time_lag",
    }
    assert (mt["subject"] == "group").all() and (mt["extractor"] == "video").all()
    assert undescribed(ds) == []
    figures = _rsa_figures(ds, "rsa_eeg", tmp_path / "plots")
    assert [f.name for f in figures] == ["rsa_eeg_cross_temporal.png", "rsa_eeg_model_time.png"]
    # the stimulus-level stores alone: nothing to do, and no error
    static = _run(
        tmp_path, epochs, {"static": features["static"]}, "rsa_static", bootstrap={"over": "none"}
    )
    assert static.attrs["model_time"] == "skipped: no frame-level feature store"
    assert "model_time_similarity" not in static
    off = _run(
        tmp_path,
        epochs,
        features,
        "rsa_off",
        model_time={"enabled": False},
        bootstrap={"over": "none"},
    )
    assert "model_time_similarity" not in off


def test_summary_rows_carry_the_peak_interval(tmp_path, planted):
    epochs, features = planted
    ds = _run(tmp_path, epochs, features, bootstrap={"n_bootstraps": 100, "eeg_times": "all"})
    rows = rsa_eeg_rows(ds)
    group = rows[(rows["subject"] == "group") & (rows["extractor"] == "signal")]
    by_stat = {(r.metric, r.statistic): r.value for r in group.itertuples()}
    ci = ds["peak_similarity_ci"].sel(channel_group="all", layer="signal")
    assert by_stat[("spearman_peak", "bootstrap_ci_lower")] == pytest.approx(float(ci[0]))
    assert by_stat[("spearman_peak", "bootstrap_ci_upper")] == pytest.approx(float(ci[1]))
    assert by_stat[("spearman_peak", "mean")] == pytest.approx(
        float(ds["peak_similarity"].sel(channel_group="all", layer="signal"))
    )
    assert by_stat[("spearman_peak_latency", "mean")] == pytest.approx(
        float(ds["peak_time"].sel(channel_group="all", layer="signal"))
    )
    assert ("spearman_peak", "bootstrap_se") in by_stat
    assert (group["n_subjects"] == 3).all()


def test_rsa_eeg_logs_its_progress(tmp_path, planted, caplog):
    import logging

    epochs, features = planted
    with caplog.at_level(logging.INFO, logger="neuroflow.progress"):
        _run(tmp_path, epochs, features, bootstrap={"over": "none"})
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "neuroflow.progress" and r.getMessage().startswith("EEG RSA time courses")
    ]
    # 3 subjects x 27 time points, 8 at a time: every 10 % is reported, with rate and time left
    assert len(lines) == 10, lines
    assert all(re.search(r"% \(\d+/81 time points\), [\d,.]+/s, ", line) for line in lines)
    assert all(" left (" in line for line in lines[:-1]) and ", done (" in lines[-1]

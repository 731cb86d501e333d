"""Cross-temporal RSA between a model's time (frames) and the brain's (EEG samples), and
the inference on its peak: max-statistic permutation p-value and bootstrap intervals."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml
from scipy.spatial.distance import pdist, squareform

from neuroflow.rsa.analysis import cross_temporal_rsa, model_time_rsa
from neuroflow.rsa.compare import compare_rdms
from neuroflow.rsa.inference import bootstrap_evaluations
from neuroflow.rsa.model_time import (
    FrameModels,
    FrameResampling,
    frame_resampled_similarity,
    frame_resampling,
    max_statistic_p,
    model_time_outputs,
    time_resolved_similarity,
)
from neuroflow.rsa.options import resolve_config
from neuroflow.rsa.rdm import correlation_rdm

SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "rsa.schema.yaml"

LAG = 0.12  # s: the brain expresses model time t at t + LAG


def _planted(seed: int = 0, n_stimuli: int = 15):
    """A layer whose geometry changes over 10 frames, seen by the brain LAG s later."""
    rng = np.random.default_rng(seed)
    model_times = np.arange(10) * 0.05
    states = rng.standard_normal((model_times.size, n_stimuli, 6))
    brain_times = np.arange(0.0, 0.8, 0.01)
    brain = []
    for b in brain_times:
        frame = int(np.floor((b - LAG) / 0.05 + 1e-9))
        signal = states[frame] if 0 <= frame < model_times.size else 0.0
        brain.append(pdist(signal + 0.6 * rng.standard_normal((n_stimuli, 6))))
    layers = np.stack(
        [
            [pdist(s) for s in states],
            [pdist(rng.standard_normal((n_stimuli, 6))) for _ in model_times],
        ]
    )
    return layers, np.stack(brain), model_times, brain_times


def test_the_planted_lag_is_the_correspondence() -> None:
    layers, brain, model_times, brain_times = _planted()
    result = model_time_rsa(layers, brain, model_times, brain_times)
    assert result.similarity.shape == (2, 10, 80)
    # every frame is best matched LAG (to LAG + one frame) later
    delay = brain_times[result.best_brain_time[0]] - model_times
    assert np.all((delay >= LAG - 1e-9) & (delay < LAG + 0.05)), delay
    assert result.slope[0] == pytest.approx(1.0, abs=0.1)
    assert LAG - 0.01 < result.lag[0] < LAG + 0.05
    # the layer without the geometry matches nothing as well: best match per frame
    best = result.similarity.max(axis=2).mean(axis=1)
    assert best[0] > 0.6 and best[0] - best[1] > 0.3, best
    m, b = result.peak[0]
    assert result.similarity[0, m, b] == result.similarity[0].max()


def test_each_frame_is_the_cross_temporal_rsa_of_that_frame(rng: np.random.Generator) -> None:
    layers = rng.random((3, 4, 21))
    brain = rng.random((9, 21))
    result = model_time_rsa(layers, brain, np.arange(4) * 0.1, np.arange(9) * 0.02, method="corr")
    for layer in range(3):
        np.testing.assert_allclose(
            result.similarity[layer], cross_temporal_rsa(layers[layer], brain, method="corr")
        )
    one = model_time_rsa(layers[:, :1], brain, [0.0], np.arange(9) * 0.02)
    assert np.isnan(one.lag).all() and np.isnan(one.slope).all()


def test_bad_shapes_name_what_was_expected(rng: np.random.Generator) -> None:
    with pytest.raises(ValueError, match=r"must share n_pairs, got \(2, 3, 10\) and \(5, 6\)"):
        model_time_rsa(rng.random((2, 3, 10)), rng.random((5, 6)), np.arange(3), np.arange(5))
    with pytest.raises(ValueError, match=r"`model_times` must have shape \(3,\)"):
        model_time_rsa(rng.random((2, 3, 10)), rng.random((5, 10)), np.arange(4), np.arange(5))


# --- inference on the model time x brain time peak -------------------------------------

BRAIN_TIMES = np.round(np.arange(-0.1, 0.42, 0.02), 3)  # 26 times, 5 of them before the onset
MODEL_TIMES = np.array([0.0, 0.05, 0.1, 0.15])
SMALL = {"n_permutations": 99, "n_bootstraps": 40, "bootstrap_over": "auto", "seed": 0}


def _frames(states: np.ndarray, times_b: np.ndarray) -> FrameModels:
    """Two frame-level layers: ``a`` (all model times) and ``b`` (its last 3 only)."""
    rdms_a = correlation_rdm(states)
    rdms_b = correlation_rdm(states[1:] ** 2 + 0.1 * states[1:])
    rows = np.concatenate(
        [np.stack([np.zeros(4), np.arange(4)], 1), np.stack([np.ones(3), 1 + np.arange(3)], 1)]
    ).astype(int)
    return FrameModels(
        layers=["a", "b"], times=times_b, rdms=np.concatenate([rdms_a, rdms_b]), rows=rows
    )


def _infer(patterns: list[np.ndarray], frames: FrameModels, seed: int = 0):
    """The stage's model-time inference on stimulus-averaged epochs of several subjects."""
    resampling = frame_resampling(patterns[0].shape[0], len(patterns), {**SMALL, "seed": seed})
    sims, nulls, boots = [], [], []
    for subject in patterns:
        _, frame_sim = time_resolved_similarity(subject, frames.rdms[:1], ["spearman"], frames)
        null, boot = frame_resampled_similarity(subject, frames, "spearman", resampling)
        sims.append(frame_sim[None])
        nulls.append(null)
        boots.append(boot)
    null = np.mean(nulls, axis=0)[:, None]
    boot = None if boots[0] is None else np.mean(boots, axis=0)[:, None]
    data, attrs = model_time_outputs(
        np.stack(sims), frames, BRAIN_TIMES, null=null, boot=boot, resampling=resampling
    )
    return {k: v[1] for k, v in data.items()}, attrs


def _noise(rng: np.random.Generator, n_stim: int, n_sub: int) -> list[np.ndarray]:
    return [rng.standard_normal((n_stim, 5, BRAIN_TIMES.size)) for _ in range(n_sub)]


def test_null_maps_are_the_comparisons_of_relabelled_model_rdms(rng) -> None:
    n_stim = 9
    frames = _frames(rng.standard_normal((4, n_stim, 3)), MODEL_TIMES)
    patterns = _noise(rng, n_stim, 1)[0]
    plan = frame_resampling(n_stim, 1, SMALL)
    plan = FrameResampling(
        permutations=np.stack([np.arange(n_stim), plan.permutations[0]]),
        over="stimuli",
        stimuli=plan.stimuli[:3],
        subjects=None,
    )
    _, observed = time_resolved_similarity(patterns, frames.rdms[:1], ["spearman"], frames)
    brain = correlation_rdm(np.moveaxis(patterns, 2, 0))
    for method in ("spearman", "corr", "tau-a"):
        null, boot = frame_resampled_similarity(patterns, frames, method, plan)
        assert null.shape == (2, 7, BRAIN_TIMES.size) and boot.shape == (3, 7, BRAIN_TIMES.size)
        order = plan.permutations[1]
        relabelled = np.stack(
            [squareform(squareform(r)[np.ix_(order, order)], checks=False) for r in frames.rdms]
        )
        np.testing.assert_allclose(null[1], compare_rdms(relabelled, brain, method=method))
        if method == "spearman":
            np.testing.assert_allclose(null[0], observed)  # the identity changes nothing
        expected = bootstrap_evaluations(
            frames.rdms, brain[:, None], np.zeros((3, 1), int), plan.stimuli, method=method
        )
        np.testing.assert_allclose(boot, np.moveaxis(expected, 1, 2))


def test_null_data_reject_at_the_nominal_rate() -> None:
    """No relation planted: the peak's p <= 0.05 in about 5% of 200 data sets."""
    n_sets, hits = 200, np.zeros(2)
    for seed in range(n_sets):
        rng = np.random.default_rng(seed)
        frames = _frames(rng.standard_normal((4, 10, 3)), MODEL_TIMES)
        data, attrs = _infer(_noise(rng, 10, 2), frames, seed=seed)
        hits += data["model_time_peak_p"][0] <= 0.05
        # an inconclusive peak reports no time line
        gone = data["model_time_inconclusive"][0]
        assert np.isnan(data["model_time_lag"][0][gone]).all()
        assert np.isnan(data["model_time_slope_ci"][:, 0][:, gone]).all()
    assert attrs["model_time_n_permutations"] == 99
    # binomial(200, 0.05): mean 10, SD 3.1; 3 SD either side
    se = np.sqrt(0.05 * 0.95 / n_sets)
    rate = hits / n_sets
    assert (np.abs(rate - 0.05) <= 3 * se).all(), rate
    print(f"rejection rate of layers a and b: {rate}")


def _planted_patterns(rng, n_stim: int, n_sub: int, lag: float):
    """EEG whose RDM at brain time m + lag is the model RDM at model time m."""
    states = rng.standard_normal((MODEL_TIMES.size, n_stim, 6))
    topo = rng.standard_normal((6, 5))
    bump = np.exp(
        -0.5 * ((BRAIN_TIMES[None] - (MODEL_TIMES[:, None] + lag)) / 0.008) ** 2
    )  # (model time, brain time)
    signal = np.einsum("msc,mt->sct", states @ topo, bump)
    patterns = [signal + 0.4 * rng.standard_normal(signal.shape) for _ in range(n_sub)]
    return states, patterns


@pytest.mark.parametrize(("n_sub", "over"), [(2, "stimuli"), (4, "subjects")])
def test_a_planted_relation_is_detected_with_its_lag_in_the_interval(n_sub, over) -> None:
    rng = np.random.default_rng(3)
    lag = 0.12
    states, patterns = _planted_patterns(rng, 14, n_sub, lag)
    data, attrs = _infer(patterns, _frames(states, MODEL_TIMES))
    assert attrs["model_time_bootstrap_over"] == over
    assert attrs["model_time_n_bootstraps"] == SMALL["n_bootstraps"]
    assert data["model_time_peak_p"][0, 0] == pytest.approx(1 / 100)  # beats every permutation
    assert not data["model_time_inconclusive"][0, 0]
    low, high = data["model_time_lag_ci"][:, 0, 0]
    assert low - 1e-9 <= lag <= high + 1e-9, (low, high)
    assert data["model_time_lag"][0, 0] == pytest.approx(lag, abs=0.011)
    # brain times every 20 ms cannot hold every frame's time + lag exactly
    assert data["model_time_slope"][0, 0] == pytest.approx(1.0, abs=0.1)
    for name in ("peak_similarity", "peak_model_time", "peak_brain_time", "slope"):
        low, high = data[f"model_time_{name}_ci"][:, 0, 0]
        assert low - 1e-9 <= data[f"model_time_{name}"][0, 0] <= high + 1e-9, name


def test_a_baseline_peak_is_never_reported(rng) -> None:
    """The strongest match sits at -0.06 s (before the onset): the peak is searched after."""
    states, patterns = _planted_patterns(rng, 12, 2, lag=-0.06 - MODEL_TIMES[0])
    frames = _frames(states, MODEL_TIMES)
    data, _ = _infer(patterns, frames)
    assert (data["model_time_peak_brain_time"] >= 0).all()
    assert (
        data["model_time_best_brain_time"][np.isfinite(data["model_time_best_brain_time"])] >= 0
    ).all()
    result = model_time_rsa(
        frames.rdms[None, :4],
        correlation_rdm(np.moveaxis(patterns[0], 2, 0)),
        MODEL_TIMES,
        BRAIN_TIMES,
    )
    assert BRAIN_TIMES[result.peak[0, 1]] >= 0
    with pytest.raises(ValueError, match=r"`brain_times` must include a time at or after"):
        model_time_rsa(
            frames.rdms[None, :4], np.ones((2, frames.rdms.shape[1])), MODEL_TIMES, [-0.2, -0.1]
        )


def test_max_statistic_p_and_config_checks() -> None:
    assert max_statistic_p(0.5, np.array([0.1, 0.6, np.nan, 0.5])) == pytest.approx(3 / 4)
    assert np.isnan(max_statistic_p(np.nan, np.array([0.1])))
    with pytest.raises(ValueError, match=r"`rsa.model_time.n_permutations` must be at least 19"):
        resolve_config({"model_time": {"n_permutations": 10}})
    with pytest.raises(ValueError, match=r"`rsa.model_time.bootstrap_over` must be one of"):
        resolve_config({"model_time": {"bootstrap_over": "both"}})
    cfg = resolve_config({})["model_time"]
    assert (cfg["n_permutations"], cfg["n_bootstraps"], cfg["seed"]) == (200, 200, 0)
    schema = yaml.safe_load(SCHEMA.read_text())
    jsonschema.validate({"model_time": {"n_permutations": 99, "seed": 3}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"model_time": {"n_permutation": 99}}, schema)


def test_the_figure_draws_every_channel_group(tmp_path, rng, monkeypatch) -> None:
    from neuroflow.evaluation import analysis_plotting

    drawn = []
    monkeypatch.setattr(analysis_plotting, "_save", lambda fig, path: drawn.append(fig) or path)
    sim = rng.standard_normal((3, 2, MODEL_TIMES.size, BRAIN_TIMES.size))
    lag = np.array([[0.1, np.nan], [np.nan, np.nan], [0.12, 0.2]])  # NaN: inconclusive
    analysis_plotting.plot_model_time(
        sim,
        MODEL_TIMES,
        BRAIN_TIMES,
        ["a", "b"],
        tmp_path / "model_time.png",
        lag=lag,
        slope=np.ones((3, 2)),
        groups=["all", "occipital", "parietal"],
        p_values=np.where(np.isnan(lag), 0.5, 0.01),
        peaks=np.zeros((3, 2, 2)),
    )
    (fig,) = drawn
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6
    titles = [ax.get_title() for ax in panels]
    assert titles[2].startswith("a (occipital)") and titles[5].startswith("b (parietal)")
    assert sum("inconclusive" in t for t in titles) == 3
    # the time line only over the maps with a significant peak
    lines = [sum(line.get_linestyle() == "--" for line in ax.get_lines()) for ax in panels]
    assert lines == [1, 0, 0, 0, 1, 1]

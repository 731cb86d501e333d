"""Cross-temporal RSA between a model's time (frames) and the brain's (EEG samples)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from neuroflow.rsa.analysis import cross_temporal_rsa, model_time_rsa

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

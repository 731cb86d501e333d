"""Tests of the demo's noise ceilings after cleaning."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.demo.ceiling import cleaned_ceilings, cleaning_models

TR = 2.0
N_VOLUMES = 97


def _ar1(rng: np.random.Generator, n_times: int, n_cols: int, phi: float) -> np.ndarray:
    """Stationary unit-variance AR(1) noise, shape (n_times, n_cols)."""
    out = np.empty((n_times, n_cols))
    out[0] = rng.standard_normal(n_cols)
    for t in range(1, n_times):
        out[t] = phi * out[t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal(n_cols)
    return out


def _models(n_repeats: int, config: dict | None = None):
    return cleaning_models(tr=TR, n_volumes=N_VOLUMES, confounds=[None] * n_repeats, config=config)


def test_expected_ceiling_matches_simulation():
    """Expected single and mean ceilings agree with many drawn repeats."""
    rng = np.random.default_rng(0)
    n_vox, n_rep, phi, sd = 7, 3, 0.4, 1.3
    t = np.arange(N_VOLUMES) * TR
    signal = np.column_stack([np.sin(2 * np.pi * t / p) for p in (9, 17, 23, 31, 41, 60, 300)])
    signal *= np.linspace(0.5, 2.0, n_vox)
    models = _models(n_rep)
    drift = np.outer(np.linspace(-1, 1, N_VOLUMES), np.ones(n_vox))  # removed by detrending
    zeros = [drift] * n_rep
    draws = [
        cleaned_ceilings(
            signal=signal,
            noise=[sd * _ar1(rng, N_VOLUMES, n_vox, phi) for _ in range(n_rep)],
            nuisance=zeros,
            models=models,
            noise_sd=sd,
            ar_coef=phi,
        )
        for _ in range(300)
    ]
    expected = draws[0]
    realized = np.mean([d["ceiling_realized"] for d in draws], axis=0)
    np.testing.assert_allclose(realized, expected["ceiling_single"], atol=0.02)
    assert np.all(expected["ceiling_mean"] > expected["ceiling_single"])
    # the 300-s component is mostly removed by the 0.01 Hz high-pass
    assert expected["ceiling_single"][-1] < 0.5 * expected["ceiling_single"][-2]


def test_signal_in_nuisance_span_has_zero_ceiling():
    """A signal the cleaning removes entirely cannot be predicted after cleaning."""
    rng = np.random.default_rng(1)
    slow = np.cos(2 * np.pi * (np.arange(N_VOLUMES) + 0.5) / N_VOLUMES)[:, None] * [1.0, 3.0]
    out = cleaned_ceilings(
        signal=slow,
        noise=[rng.standard_normal((N_VOLUMES, 2))],
        nuisance=[np.zeros((N_VOLUMES, 2))],
        models=_models(1),
        noise_sd=1.0,
        ar_coef=0.0,
    )
    np.testing.assert_allclose(out["ceiling_mean"], 0.0, atol=1e-6)
    np.testing.assert_allclose(out["ceiling_realized"], 0.0, atol=1e-6)


def test_nuisance_left_by_cleaning_lowers_ceiling():
    """Nuisance outside the cleaning span counts as noise; inside it, it does not."""
    rng = np.random.default_rng(2)
    signal = rng.standard_normal((N_VOLUMES, 3))
    noise = [0.5 * rng.standard_normal((N_VOLUMES, 3))]
    fast = np.tile(np.cos(np.pi * np.arange(N_VOLUMES) / 3)[:, None], (1, 3))
    kwargs = {"signal": signal, "noise": noise, "models": _models(1), "noise_sd": 0.5}
    clean = cleaned_ceilings(nuisance=[np.zeros_like(signal)], ar_coef=0.0, **kwargs)
    linear = np.tile(np.linspace(0, 5, N_VOLUMES)[:, None], (1, 3))
    same = cleaned_ceilings(nuisance=[linear], ar_coef=0.0, **kwargs)
    worse = cleaned_ceilings(nuisance=[2 * fast], ar_coef=0.0, **kwargs)
    np.testing.assert_allclose(same["ceiling_single"], clean["ceiling_single"], atol=1e-10)
    assert np.all(worse["ceiling_single"] < clean["ceiling_single"] - 0.2)


def test_cleaning_follows_config():
    """A config without high-pass keeps slow signal that the default removes."""
    slow = np.cos(2 * np.pi * (np.arange(N_VOLUMES) + 0.5) / N_VOLUMES)[:, None]
    kept = _models(1, {"high_pass": {"filter": "none"}})[0](slow)
    removed = _models(1)[0](slow)
    assert np.abs(kept).max() > 0.5 and np.abs(removed).max() < 1e-8


def test_repeat_count_mismatch_raises():
    z = np.zeros((N_VOLUMES, 2))
    with pytest.raises(ValueError, match="one entry per repeat"):
        cleaned_ceilings(
            signal=z, noise=[z, z], nuisance=[z], models=_models(2), noise_sd=1.0, ar_coef=0.0
        )

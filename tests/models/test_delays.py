"""FIR delays and HRF convolution, per run."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.models import apply_delays, fir_delays, hrf_convolve
from neuroflow.models.delays import delay_variants, variant_delays


def test_fir_shifts_and_zero_pads(rng):
    X = rng.standard_normal((9, 7))
    out = fir_delays(X, [0, 1, 3, -2])
    assert out.shape == (9, 28)
    np.testing.assert_array_equal(out[:, :7], X)
    np.testing.assert_array_equal(out[1:, 7:14], X[:-1])
    np.testing.assert_array_equal(out[0, 7:14], 0)
    np.testing.assert_array_equal(out[3:, 14:21], X[:-3])
    np.testing.assert_array_equal(out[:3, 14:21], 0)
    np.testing.assert_array_equal(out[:-2, 21:], X[2:])
    np.testing.assert_array_equal(out[-2:, 21:], 0)


def test_fir_per_run_never_crosses_boundaries(rng):
    runs = [rng.standard_normal((n, 3)) + 10 for n in (7, 8, 9)]
    delayed = np.concatenate([fir_delays(r, [1, 2]) for r in runs])
    starts = np.cumsum([0, 7, 8])
    for s in starts:
        np.testing.assert_array_equal(delayed[s, :], 0)  # first sample of each run
        np.testing.assert_array_equal(delayed[s + 1, 3:], 0)
    assert np.all(delayed[starts[1] + 1, :3] == runs[1][0])


def test_fir_lag_longer_than_run(rng):
    out = fir_delays(rng.standard_normal((3, 2)), [5])
    np.testing.assert_array_equal(out, 0)


def test_hrf_convolve_impulse_matches_nilearn():
    from nilearn.glm.first_level import glover_hrf

    X = np.zeros((30, 2))
    X[4, 0] = 1.0
    X[0, 1] = 2.0
    out = hrf_convolve(X, 2.0)
    kernel = glover_hrf(2.0, oversampling=1, time_length=32.0)
    kernel /= kernel.sum()
    np.testing.assert_array_equal(out[:4, 0], 0)  # causal
    np.testing.assert_allclose(out[4 : 4 + len(kernel), 0], kernel[: 30 - 4], atol=1e-12)
    np.testing.assert_allclose(out[: len(kernel), 1], 2 * kernel, atol=1e-12)
    assert 2 <= int(np.argmax(out[:, 0])) - 4 <= 3  # peak ~5 s after onset at TR 2 s


def test_apply_delays_and_errors(rng):
    X = rng.standard_normal((8, 3))
    assert apply_delays(X, {"method": "fir", "lags": [1, 2]}, 2.0).shape == (8, 6)
    assert apply_delays(X, {"method": "hrf", "hrf_model": "spm"}, 2.0).shape == (8, 3)
    np.testing.assert_array_equal(apply_delays(X, {"method": "none"}, 2.0), X)
    with pytest.raises(ValueError, match=r"`delays\.method` must be"):
        apply_delays(X, {"method": "gamma"}, 2.0)
    with pytest.raises(ValueError, match="`lags` must not repeat"):
        fir_delays(X, [1, 1])
    with pytest.raises(ValueError, match="`tr` must be a positive float"):
        hrf_convolve(X, 0.0)
    with pytest.raises(ValueError, match="`X` must be 2-D"):
        fir_delays(X[:, 0], [1])


@pytest.mark.parametrize(
    ("model", "peak"), [("spm peak 4 s", 4.0), ("spm peak 6 s", 6.0), ("spm peak 7 s", 7.0)]
)
def test_shifted_spm_models_peak_where_named(model, peak):
    tr = 0.25
    impulse = np.zeros((160, 1))
    impulse[0] = 1.0
    spm = np.argmax(hrf_convolve(impulse, tr, hrf_model="spm")[:, 0]) * tr
    moved = np.argmax(hrf_convolve(impulse, tr, hrf_model=model)[:, 0]) * tr
    assert moved - spm == pytest.approx(peak - 5.0, abs=tr)
    assert abs(moved - peak) <= 0.5


def test_delay_variants():
    spec = {"method": "hrf", "lags": [1], "hrf_model": ["spm", "spm peak 6 s"]}
    assert delay_variants(spec) == [
        {"method": "hrf", "lags": [1], "hrf_model": "spm"},
        {"method": "hrf", "lags": [1], "hrf_model": "spm peak 6 s"},
    ]
    assert variant_delays(spec, 1)["hrf_model"] == "spm peak 6 s"
    assert delay_variants({"method": "hrf", "hrf_model": ["glover"]}) == [
        {"method": "hrf", "hrf_model": "glover"}
    ]
    fir = {"method": "fir", "lags": [1, 2], "hrf_model": ["spm", "glover"]}
    assert delay_variants(fir) == [fir] and variant_delays(fir, 0) == fir
    with pytest.raises(ValueError, match=r"must list distinct models of .*got \['spm', 'spm'\]"):
        delay_variants({"method": "hrf", "hrf_model": ["spm", "spm"]})
    with pytest.raises(ValueError, match=r"got \['spm', 'spm peak 9 s'\] instead"):
        delay_variants({"method": "hrf", "hrf_model": ["spm", "spm peak 9 s"]})
    with pytest.raises(ValueError, match=r"at least one HRF model, got \[\]"):
        delay_variants({"method": "hrf", "hrf_model": []})
    with pytest.raises(ValueError, match="`hrf_model` must be one of"):
        apply_delays(np.ones((5, 1)), {"method": "hrf", "hrf_model": ["spm"]}, 2.0)

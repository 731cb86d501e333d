"""The event-related alignment convolves all events at once, as nilearn does one by one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from neuroflow.features.config import SHIFTED_HRF_MODELS
from neuroflow.features.resampling import MIN_ONSET, boxcar_bounds, fine_grid, hrf_weights
from neuroflow.preprocessing.fmri.single_trial import HRF_MODELS, event_regressors


def _per_event(frame_times, onsets, durations, hrf_model, oversampling):
    """Each event's nilearn regressor on its own (``compute_regressor`` once per event)."""
    base, shift = SHIFTED_HRF_MODELS.get(hrf_model, (hrf_model, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nilearn's warning about onsets before its grid
        regressors = event_regressors(
            onsets + shift,
            np.nan_to_num(durations, nan=0.0),
            frame_times=frame_times,
            hrf_model=base,
            oversampling=oversampling,
        )
    weights = np.moveaxis(regressors, (0, 1, 2), (2, 1, 0))
    return weights[0] if weights.shape[0] == 1 else weights


def _uneven_events(rng, n_times, tr):
    """Events of varying durations off the grid, incl. impulses, a NaN duration, events
    that run past the end, start at or after it, and start before the fine grid."""
    n = 29
    onsets = rng.uniform(-5.0, n_times * tr, n)
    durations = rng.choice([0.0, 0.013, 0.7, 1.9, 6.5, 35.0], n) * rng.uniform(0.8, 1.2, n)
    durations[1] = np.nan
    onsets[2], durations[2] = n_times * tr - 0.3, 4.0  # runs past the last volume
    onsets[3], durations[3] = n_times * tr + 1.0, 1.0  # starts after the grid's end
    onsets[4], durations[4] = n_times * tr - tr / 3, 0.0  # an impulse in the last TR
    onsets[5], durations[5] = -3.0, 50.0  # starts before the first volume
    return onsets, durations


@pytest.mark.parametrize(
    ("tr", "n_times", "oversampling", "slice_time_ref", "tr_reference"),
    [
        (2.0, 57, 50, 0.0, "start"),
        (1.3, 83, 16, 0.5, "start"),
        (0.8, 131, 3, 0.0, "center"),
        (2.5, 38, 1, 1.0, "center"),
    ],
)
def test_hrf_weights_equal_nilearn_per_event(
    tr, n_times, oversampling, slice_time_ref, tr_reference
):
    rng = np.random.default_rng(int(tr * 10) + n_times)
    times = np.arange(n_times) * tr + 0.25  # a clock that does not start at 0
    onsets, durations = _uneven_events(rng, n_times, tr)
    frame_times = times - (tr / 2 if tr_reference == "center" else 0.0) + slice_time_ref * tr
    for model in [*HRF_MODELS, *SHIFTED_HRF_MODELS]:
        new = hrf_weights(
            times,
            tr,
            onsets,
            durations,
            hrf_model=model,
            oversampling=oversampling,
            slice_time_ref=slice_time_ref,
            tr_reference=tr_reference,
        )
        old = _per_event(frame_times, onsets, durations, model, oversampling)
        assert new.shape == old.shape
        if "derivative" in model:
            # a derivative kernel sums to ~0, so a long event's response is rounding
            # residue (~1e-15) that no summation order reproduces relatively
            np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-12 * np.abs(old).max())
        else:
            np.testing.assert_allclose(new, old, rtol=1e-6, atol=0)
        canonical = new if new.ndim == 2 else new[0]
        assert np.all(canonical[:, 3] == 0.0)  # after the grid's end: no response
        assert np.abs(canonical[:, [0, 2, 4, 5]]).max() > 0


def test_fine_grid_and_boxcar_bounds_place_events_on_nilearn_samples():
    frame_times = np.arange(10) * 2.0
    grid = fine_grid(frame_times, 4)
    assert grid[0] == pytest.approx(MIN_ONSET)
    np.testing.assert_allclose(np.diff(grid), 0.5)
    assert grid[-1] == pytest.approx(20.0)
    first, stop = boxcar_bounds(
        grid, np.array([0.1, 3.0, 3.0, 19.9, 25.0]), np.array([0.0, 1.0, 0.2, 5.0, 1.0])
    )
    zero = int(np.searchsorted(grid, 0.0))
    # an impulse covers one sample; 1 s covers 2 samples of 0.5 s; a sliver still one
    np.testing.assert_array_equal(stop - first, [1, 2, 1, 0, 0])
    assert first[0] == zero + 1 and first[1] == zero + 6
    assert first[4] == stop[4] == grid.size - 1  # past the end: both at the last sample


def test_hrf_weights_warn_about_events_before_the_grid():
    times = np.arange(40) * 2.0
    with pytest.warns(UserWarning, match=r"1 event\(s\) start more than 24 s before the first"):
        w = hrf_weights(times, 2.0, np.array([-30.0, 10.0]), np.array([1.0, 1.0]))
    old = _per_event(times, np.array([-30.0, 10.0]), np.array([1.0, 1.0]), "glover", 50)
    np.testing.assert_allclose(w, old, rtol=1e-6, atol=0)


def test_hrf_weights_refuse_a_single_volume():
    with pytest.raises(ValueError, match=r"`times` must hold at least 2 volumes .* got 1 instead"):
        hrf_weights(np.array([0.0]), 2.0, np.array([1.0]), np.array([1.0]))

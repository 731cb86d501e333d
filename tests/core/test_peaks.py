"""EEG peak latencies are searched at or after the stimulus onset: a baseline peak (here
at -0.05 s) is never reported, whichever analysis finds it."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from neuroflow.decoding.stage import _latencies
from neuroflow.encoding.eeg import peak_latency
from neuroflow.evaluation.eeg_summary import eeg_encoding_rows
from neuroflow.evaluation.rsa_summary import rsa_eeg_rows
from neuroflow.peaks import peak_index
from neuroflow.peaks import peak_latency as post_stimulus_latency
from neuroflow.rsa.eeg import eeg_bootstrap

TIMES = np.round(np.arange(-0.1, 0.31, 0.025), 3)  # 17 times, 4 before the onset
BASELINE, LATER = -0.05, 0.2


def _courses(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Courses with their largest value at -0.05 s and a smaller peak at 0.2 s."""
    courses = 0.05 * rng.standard_normal((*shape, TIMES.size))
    courses[..., np.isclose(TIMES, BASELINE)] = 1.0
    courses[..., np.isclose(TIMES, LATER)] = 0.5
    return courses


def test_peak_index_skips_the_baseline(rng) -> None:
    courses = _courses(rng, (3, 2))
    courses[1, 1, TIMES >= 0] = np.nan  # nothing after the onset
    index = peak_index(courses, TIMES)
    assert index.shape == (3, 2)
    assert (TIMES[index[index >= 0]] == LATER).all() and index[1, 1] == -1
    # a sampled zero that rounding put just below 0 still counts as the onset
    assert int(peak_index(np.array([0.0, 1.0, 0.2]), np.array([-0.1, -1e-12, 0.1]))) == 1
    assert post_stimulus_latency(courses[0, 0], TIMES) == LATER
    assert np.isnan(post_stimulus_latency(courses[1, 1], TIMES))
    with pytest.raises(ValueError, match=r"`times` must have shape \(17,\)"):
        peak_index(courses, TIMES[:-1])


def test_encoding_and_decoding_peaks_are_after_the_onset(rng) -> None:
    course = _courses(rng, ())
    assert peak_latency(course, TIMES) == LATER  # EEG encoding course and TRF power
    score = _courses(rng, (2, 3))
    peak, _ = _latencies(TIMES, score, np.ones(score.shape), 0.05)
    np.testing.assert_array_equal(peak, LATER)


def test_eeg_encoding_summary_rows_report_no_baseline_peak(rng) -> None:
    stores = []
    for subject in ("01", "02"):
        r_course = _courses(rng, ())
        stores.append(
            xr.Dataset(
                {
                    "r": (("channel", "latency"), np.tile(r_course, (2, 1))),
                    "r_normalized": (("channel", "latency"), np.tile(r_course, (2, 1))),
                    "significant": (("channel", "latency"), np.zeros((2, TIMES.size), bool)),
                    "noise_ceiling_r": (("channel", "latency"), np.ones((2, TIMES.size))),
                    "r_course": (("latency",), r_course),
                },
                coords={
                    "channel": np.array(["Cz", "Pz"], dtype=object),
                    "latency": ("latency", TIMES, {"units": "s"}),
                    "roi": ("channel", np.array(["Cz", "Pz"], dtype=object)),
                },
                attrs={"subject": subject, "model": "m", "feature_spaces": ["cnn:b1"]},
            )
        )
    rows = eeg_encoding_rows(stores)
    latency = rows[rows["metric"] == "peak_latency"]
    assert len(latency) == 3  # two subjects and the group
    assert (latency["value"] == LATER).all()
    assert (rows.loc[rows["metric"] == "peak_r", "value"] == 0.5).all()


def test_rsa_eeg_peaks_and_rows_report_no_baseline_peak(rng) -> None:
    sim = _courses(rng, (3, 1, 2))  # subject, channel group, layer
    data, _ = eeg_bootstrap(
        [],
        [],
        None,
        sim,
        TIMES,
        method="spearman",
        config={"over": "none", "n_bootstraps": 10, "level": 0.95, "eeg_times": "all"},
        shared=True,
    )
    np.testing.assert_array_equal(data["peak_time"][1], LATER)
    ds = xr.Dataset(
        {
            "cross_temporal": (
                ("subject", "channel_group", "comparison", "layer", "time"),
                sim[:, :, None],
            ),
            "peak_time": data["peak_time"],
            "peak_similarity": data["peak_similarity"],
        },
        coords={
            "subject": np.array(["01", "02", "03"], dtype=object),
            "channel_group": np.array(["all"], dtype=object),
            "comparison": np.array(["spearman"], dtype=object),
            "layer": np.array(["cnn:a", "cnn:b"], dtype=object),
            "time": TIMES,
        },
    )
    rows = rsa_eeg_rows(ds)
    latency = rows[rows["metric"] == "spearman_peak_latency"]
    assert len(latency) == 3 * 2 + 2  # per subject and layer, and the group's
    assert (latency["value"] == LATER).all()

"""Time-resolved decoding of the two event types of a real EEGLAB recording."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from neuroflow.decoding.temporal import (
    cluster_permutation_test,
    time_resolved_null,
    time_resolved_scores,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
SET_FILE = DATA / "eeg" / "eeglab" / "test_raw.set"


@pytest.mark.slow
@pytest.mark.skipif(not SET_FILE.exists(), reason=f"real EEGLAB file not found at {SET_FILE}")
def test_eeglab_square_vs_rt_time_resolved():
    mne = pytest.importorskip("mne")
    raw = mne.io.read_raw_eeglab(SET_FILE, preload=True, verbose="error")
    raw.filter(1.0, 30.0, verbose="error")
    events, event_id = mne.events_from_annotations(raw, verbose="error")
    assert set(event_id) == {"square", "rt"}
    epochs = mne.Epochs(
        raw,
        events,
        event_id=event_id,
        tmin=-0.1,
        tmax=0.4,
        baseline=(None, 0),
        decim=4,
        preload=True,
        verbose="error",
    )
    X = epochs.get_data(copy=False)
    y = epochs.events[:, 2]
    counts = {name: int((y == code).sum()) for name, code in event_id.items()}
    assert counts == {"square": 80, "rt": 74}
    # contiguous folds in recording order: neighbouring trials stay on one side
    groups = np.arange(len(y)) // 8
    scores = time_resolved_scores(X, y, groups, n_splits=5).mean(axis=0)
    null = time_resolved_null(X, y, groups, n_permutations=6, n_splits=5, seed=0)
    assert scores.shape == (X.shape[2],) and null.shape == (6, X.shape[2])
    assert np.all((null >= 0) & (null <= 1)) and np.all((scores >= 0) & (scores <= 1))
    result = cluster_permutation_test(scores, null)
    assert result.p_values.size == 0 or result.p_values.min() >= 1 / 7
    print(
        "square vs rt balanced accuracy: max",
        scores.max().round(3),
        "| null mean",
        null.mean().round(3),
        "null 95th pct",
        np.quantile(null, 0.95).round(3),
        "| cluster p",
        np.round(result.p_values, 3).tolist(),
    )

"""Targets outside every ROI: one explicit label, read like the blank of older stores."""

from __future__ import annotations

import numpy as np

from neuroflow.evaluation.summary import roi_summary
from neuroflow.rois import UNLABELLED, is_labelled, labelled_rois


def test_labelled_rois_leave_out_unlabelled_targets() -> None:
    labels = np.array(["V1", UNLABELLED, "FFA", "", "V1"], dtype=object)
    assert labelled_rois(labels) == ["FFA", "V1"]
    assert [is_labelled(v) for v in labels] == [True, False, True, False, True]
    assert labelled_rois([]) == []


def test_roi_summary_counts_unlabelled_targets_only_in_all(rng: np.random.Generator) -> None:
    roi = np.array(["a"] * 4 + [UNLABELLED] * 3 + ["b"] * 2)
    r = rng.uniform(0.1, 0.5, roi.size)
    table = roi_summary(
        r=r,
        r_normalized=r,
        significant=np.ones(roi.size, bool),
        noise_ceiling_r=np.full(roi.size, 0.8),
        roi=roi,
        topk_percent=50.0,
    )
    assert table["roi"].tolist() == ["a", "b", "all"]
    assert table.set_index("roi").loc["all", "n_targets"] == roi.size
    np.testing.assert_allclose(table.set_index("roi").loc["all", "mean_r"], r.mean())

"""Which cluster p-values mark the decoding time courses of the report."""

from __future__ import annotations

import numpy as np
import xarray as xr

from neuroflow.evaluation.report import _plotted_cluster_p


def _store(n_subjects: int, group: bool) -> xr.Dataset:
    rng = np.random.default_rng(5)
    p = rng.uniform(0.0, 1.0, (n_subjects, 7))
    p[0, 2:4] = 0.01  # one subject's cluster
    ds = xr.Dataset({"class_cluster_p": (("subject", "time"), p)})
    if group:
        g = np.full(7, 0.6)
        g[5] = np.nan  # an inconclusive point
        ds["group_class_cluster_p"] = ("time", g)
    return ds


def test_group_test_marks_the_subject_mean():
    p = _plotted_cluster_p(_store(3, group=True), "class_cluster_p")
    np.testing.assert_array_equal(p < 0.05, np.zeros(7, bool))


def test_one_subject_marks_its_own_clusters():
    p = _plotted_cluster_p(_store(1, group=False), "class_cluster_p")
    assert p.shape == (7,)
    np.testing.assert_array_equal(np.flatnonzero(p < 0.05), [2, 3])


def test_several_subjects_without_a_group_test_mark_nothing():
    # the smallest p over subjects would mark subject 0's cluster on the mean course
    assert _plotted_cluster_p(_store(3, group=False), "class_cluster_p") is None
    assert _plotted_cluster_p(xr.Dataset(), "class_cluster_p") is None


def test_feature_spaces_keep_their_axis():
    ds = xr.Dataset(
        {"feature_cluster_p": (("subject", "feature_space", "time"), np.full((1, 2, 4), 0.01))}
    )
    assert _plotted_cluster_p(ds, "feature_cluster_p").shape == (2, 4)

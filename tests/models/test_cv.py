"""Run-wise cross-validation splits."""

from __future__ import annotations

import numpy as np
import pytest

from neuroflow.models import check_splits, parse_cv, run_splits


@pytest.mark.parametrize("n_splits", [None, 2, 3])
def test_folds_never_mix_runs(rng, n_splits):
    sizes = [7, 8, 9, 8, 7]
    groups = np.concatenate([np.full(s, f"run-{i}") for i, s in enumerate(sizes)])
    groups = groups[rng.permutation(len(groups))]  # runs need not be contiguous
    splits = run_splits(groups, n_splits)
    assert len(splits) == (len(sizes) if n_splits is None else n_splits)
    seen = []
    for train, val in splits:
        assert set(groups[train]).isdisjoint(groups[val])
        assert len(train) + len(val) == len(groups)
        seen.extend(val.tolist())
    assert sorted(seen) == list(range(len(groups)))  # every sample validated exactly once


def test_check_splits_rejects_mixed_runs():
    groups = np.repeat([0, 1, 2], [7, 8, 9])
    bad = [(np.arange(0, 10), np.arange(10, 24))]  # run 1 on both sides
    with pytest.raises(ValueError, match="mixes runs"):
        check_splits(bad, groups)


def test_parse_cv():
    assert parse_cv("leave-one-run-out") is None
    assert parse_cv({"grouped_kfold": 4}) == 4
    with pytest.raises(ValueError, match=r"`cv\.grouped_kfold` must be an int >= 2"):
        parse_cv({"grouped_kfold": 1})
    with pytest.raises(ValueError, match="`cv` must be 'leave-one-run-out'"):
        parse_cv("kfold")


def test_run_splits_errors():
    with pytest.raises(ValueError, match="at least 2 training runs"):
        run_splits(np.zeros(9))
    with pytest.raises(ValueError, match="at least 2 training stimuli, got 1"):
        run_splits(np.zeros(9), 5, unit="stimulus")


def test_run_splits_more_folds_than_groups_is_one_fold_per_group(caplog):
    groups = np.repeat([0, 1, 2], [3, 4, 2])
    with caplog.at_level("WARNING", logger="neuroflow.models.cv"):
        splits = run_splits(groups, 5)
    assert "there are 3 training runs: using 3 folds" in caplog.text
    assert [sorted(set(groups[val])) for _, val in splits] == [[0], [1], [2]] or len(splits) == 3
    assert sorted(int(groups[val][0]) for _, val in splits) == [0, 1, 2]

"""Plan-time checks of a transformer encoder's options against the runs it gets."""

from __future__ import annotations

import pytest

from neuroflow.config.transformer_options import check_window, resolve_options, validation_note


def test_window_longer_than_every_run_is_refused():
    lengths = {"sub-01_task-movie_run-1": 60, "sub-01_task-movie_run-2": 73, "sub-02_run-1": 41}
    with pytest.raises(
        ValueError,
        match=r"`encoding.models.tribe.transformer.window_trs` must be at most the length of "
        r"the longest run, 73 volumes \(sub-01_task-movie_run-2\), got 1000 instead",
    ):
        check_window("tribe", resolve_options({"window_trs": 1000}), lengths)
    with pytest.raises(ValueError, match=r"got 74 instead"):
        check_window("tribe", resolve_options({"window_trs": 74}), lengths)
    # a window that fits the longest run only is allowed: it is no silent misuse
    check_window("tribe", resolve_options({"window_trs": 73}), lengths)
    check_window("tribe", resolve_options(None), {})


def test_validation_note_when_validation_runs_leave_no_validation_run():
    options = resolve_options({"validation_runs": 2, "epochs": 17})
    assert validation_note("tribe", options, {"01": 3, "02": 5}) is None
    note = validation_note("tribe", options, {"01": 2, "02": 1})
    assert note == (
        "encoding/tribe: no validation run: `encoding.models.tribe.transformer."
        "validation_runs` is 2 but every subject has at most 2 training run(s) (a subject "
        "needs more than 2), so the model trains all 17 epochs without early stopping and "
        "is not refitted, and its validation scores are NaN."
    )
    zero = validation_note(
        "tribe", resolve_options({"validation_runs": 0, "refit": False}), {"01": 4}
    )
    assert zero is not None and "validation_runs` is 0, so the model trains all 60 epochs" in zero
    assert "refitted" not in zero
    some = validation_note("tribe", options, {"01": 3, "02": 2, "03": 1})
    assert some is not None
    assert "leaves sub-02 (2), sub-03 (1) without a validation run" in some
    assert "sub-01" not in some

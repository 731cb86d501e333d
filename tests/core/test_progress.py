"""Progress lines of long steps: in the job log, and on the terminal inside a job."""

from __future__ import annotations

import io
import logging

import pytest

from neuroflow.progress import Progress, format_progress, job_label


def test_format_progress_names_count_rate_and_time_left() -> None:
    line = format_progress("extraction", 250, 1000, "images", elapsed=5.0)
    assert line == "extraction: 25% (250/1,000 images), 50.0/s, 15 s left (5 s so far)"
    assert format_progress("x", 7, 7, "targets", elapsed=200.0).endswith("done (3 min 20 s so far)")
    assert "? left" in format_progress("x", 0, 5, "targets", elapsed=1.0)


def test_job_gets_log_lines_every_step_and_terminal_lines_every_quarter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = io.StringIO()
    with (
        caplog.at_level(logging.INFO, logger="neuroflow.progress"),
        job_label("features/clip sub-01"),
        Progress(37, "extraction", "images", stream=stream) as p,
    ):
        for _ in range(37):
            p.update()
    logged = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    # every 10 % once, the end once (37 items: no bucket is hit twice or skipped)
    assert len(logged) == 10
    assert logged[0].startswith("extraction: 11% (4/37 images)")
    assert logged[-1].startswith("extraction: 100% (37/37 images)") and "done" in logged[-1]
    printed = stream.getvalue().splitlines()
    assert len(printed) == 4
    assert all(line.startswith("[features/clip sub-01] extraction: ") for line in printed)


def test_big_steps_report_once_and_outside_a_job_nothing_is_printed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = io.StringIO()  # not a terminal: no bar either
    with (
        caplog.at_level(logging.INFO, logger="neuroflow.progress"),
        Progress(1000, "null", "targets", stream=stream) as p,
    ):
        p.update(550)
        p.update(1000)  # clipped to the total
    logged = [r.getMessage() for r in caplog.records if r.name == "neuroflow.progress"]
    assert [line.split(":")[1].split("%")[0].strip() for line in logged] == ["55", "100"]
    assert p.done == 1000
    assert stream.getvalue() == ""
    with Progress(0, "nothing") as empty:
        empty.update(3)
    assert empty.done == 0


def test_progress_rejects_bad_steps() -> None:
    with pytest.raises(ValueError, match="`log_percent` must be in"):
        Progress(5, "x", log_percent=0)

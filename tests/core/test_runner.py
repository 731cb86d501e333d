"""The job runner: log lines every job writes, including its peak memory."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from neuroflow.workflow.runner import peak_rss_mib, run_job


def _job(tmp_path, stage="encoding/visual"):
    params = SimpleNamespace(stage=stage, version="0123456789", cfg={"a": 1})
    return SimpleNamespace(params=params, log=[str(tmp_path / "job.log")], input=[])


def test_run_job_logs_wall_time_and_peak_memory(tmp_path):
    seen = {}

    def func(*, value, config, provenance):
        seen.update(value=value, config=config, stage=provenance["stage"])
        return 7

    assert run_job(_job(tmp_path), func, value=3) == 7
    assert seen == {"value": 3, "config": {"a": 1}, "stage": "encoding/visual"}
    lines = (tmp_path / "job.log").read_text().splitlines()
    assert re.search(r"INFO neuroflow: encoding/visual 0123456789: .*func$", lines[0])
    done = re.search(r"done in ([\d.]+) s, peak resident memory (\d+) MiB$", lines[-1])
    assert done is not None, lines[-1]
    assert 10 < float(done[2]) < 1e6


def test_failed_job_logs_the_error(tmp_path):
    def func(*, config, provenance):
        raise ValueError("`x` must be positive, got -1 instead.")

    with pytest.raises(ValueError, match="must be positive"):
        run_job(_job(tmp_path), func)
    text = (tmp_path / "job.log").read_text()
    assert "Job failed." in text and "must be positive" in text
    assert "done in" not in text


@pytest.mark.skipif(
    sys.platform == "win32", reason="peak memory is not measured on Windows (no resource module)"
)
def test_peak_rss_counts_a_short_lived_allocation():
    # in a fresh process: this one's high-water mark is already set by earlier tests;
    # the fresh one must not report this (large) parent's resident size either
    ballast = np.ones(60 * 2**20 // 8)  # 60 MiB more in the parent, touched
    code = (
        "import numpy as np\n"
        "from neuroflow.workflow.runner import peak_rss_mib\n"
        "before = peak_rss_mib()\n"
        "a = np.ones(40 * 2**20 // 8 * 8)\n"  # 320 MiB, touched, then freed
        "del a\n"
        "print(before, peak_rss_mib())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    before, after = map(float, out.stdout.split())
    assert after - before > 250, (before, after)
    assert peak_rss_mib() > ballast.nbytes / 2**20

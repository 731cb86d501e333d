"""Extraction gives the same bits whatever the thread count of the job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

from neuroflow.features.baselines import ImageStatistics
from neuroflow.features.extract import extract_features
from neuroflow.features.threads import fixed_threads

PROBE = Path(__file__).with_name("thread_probe.py")
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def _probe(tmp_path: Path, stimuli: Path, n_threads: int) -> dict[str, np.ndarray]:
    out = tmp_path / f"threads-{n_threads}.npz"
    env = {**os.environ, **dict.fromkeys(_THREAD_VARS, str(n_threads))}
    done = subprocess.run(
        [sys.executable, str(PROBE), str(out), str(n_threads), str(stimuli)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
def test_features_are_bit_identical_for_1_and_3_threads(image_stimuli, tmp_path):
    folder, _ = image_stimuli
    one = _probe(tmp_path, folder, 1)
    three = _probe(tmp_path, folder, 3)
    assert set(one) == set(three)
    # A sum of millions of float32 terms, which torch splits by thread, is in the set,
    # so that the comparison would fail if extraction used the job's thread count.
    assert {"sum/output", "vit/depth-1", "vit_pca/depth-1", "stats/output"} <= set(one)
    for name in one:
        assert np.array_equal(one[name], three[name]), name


def test_fixed_threads_pins_and_restores():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with fixed_threads():
            assert torch.get_num_threads() == 1
            assert _blas_threads() <= {1}
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError, match="boom"), fixed_threads(1):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="`n_threads` must be a positive int"):
            fixed_threads(bad).__enter__()


def test_extract_features_runs_extractors_on_one_thread(image_stimuli, tmp_path, monkeypatch):
    folder, ids = image_stimuli
    seen: list[tuple[int, set[int]]] = []
    compute = ImageStatistics.compute

    def spy(self, batch):
        seen.append((torch.get_num_threads(), _blas_threads()))
        return compute(self, batch)

    monkeypatch.setattr(ImageStatistics, "compute", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        extract_features(
            stimuli_dir=folder,
            stimulus_ids=ids,
            output=tmp_path / "out",
            config={"name": "stats", "extractor": "image_statistics", "batch_size": 3},
            provenance={},
        )
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert len(seen) == 3
    assert all(n == 1 and blas <= {1} for n, blas in seen)

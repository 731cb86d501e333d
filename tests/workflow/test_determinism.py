"""Results do not depend on ``--cores`` or on how jobs start: the tiny demo's features
rerun with one core are bit-identical to those of the two-core session run, and its fMRI
and EEG encoders (one thread each by default) rerun with three threads each, each job a
new interpreter (``NEUROFLOW_WARM_JOBS=0``) instead of a fork of the warm server, are
bit-identical to the session's. Both are computed again in a copy of the session run,
from its inputs.

Feature extraction runs on one thread whatever a job is given; the ridge solvers run
every BLAS kernel single-threaded and spread folds and target chunks over the job's
threads, so no floating-point sum depends on the thread count.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from workflow_helpers import snakemake

from neuroflow.artifacts import open_dataset

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def test_one_core_gives_the_results_of_two(tiny_run, tiny_copy):
    results = tiny_run / "results"
    features = sorted(p.relative_to(tiny_run) for p in (results / "features").rglob("*.zarr"))
    encoders = sorted(
        p.relative_to(tiny_run)
        for stage in ("encoding", "eeg_encoding")
        for p in (results / stage).rglob("*_encoding.zarr")
    )
    assert features and encoders
    assert {p.parts[1] for p in encoders} == {"encoding", "eeg_encoding"}
    # In a copy of the session run the encoders, then the features are computed again
    # from the session run's inputs: the encoders with three threads each, in new
    # interpreters, then the features on one core (the encoders, downstream of them, are
    # not asked for again).
    for rel in encoders:
        shutil.rmtree(tiny_copy / rel)
    threads = ("fit_encoding=3", "fit_eeg_encoding=3")
    cold = {"NEUROFLOW_WARM_JOBS": "0"}
    snakemake(tiny_copy, *map(str, encoders), "--cores", "3", "--set-threads", *threads, env=cold)
    for rel in features:
        shutil.rmtree(tiny_copy / rel)
    snakemake(tiny_copy, "--cores", "1", *map(str, features))
    one_core = three_threads = tiny_copy
    for rel in features:
        with open_dataset(tiny_run / rel) as two, open_dataset(one_core / rel) as one:
            assert np.array_equal(two["features"].values, one["features"].values), rel
    for rel in encoders:
        with open_dataset(tiny_run / rel) as two, open_dataset(three_threads / rel) as one:
            alphas = [v for v in two.data_vars if "alpha" in v]
            assert alphas, list(two.data_vars)
            for name in alphas:
                assert np.array_equal(two[name].values, one[name].values), (rel, name)
            for name in two.data_vars:
                if two[name].dtype.kind == "f":
                    np.testing.assert_array_equal(
                        one[name].values, two[name].values, err_msg=f"{rel} {name}"
                    )

"""The solvers give the same bits whatever the number of threads of the job.

Multi-threaded MKL and OpenBLAS kernels (the eigendecomposition at any size, thin
matrix products, torch's reductions) change their last bits with the thread count;
the solvers run every kernel on one thread and spread independent tasks over the
threads instead. The problems below are large enough for the threaded kernels to
split their work (more than a hundred features or training samples, more targets
than one task takes), with uneven runs and target counts.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from neuroflow.models import banded_ridge_cv, matmul, ridge_cv, ridge_fit, run_splits
from neuroflow.models import ridge as ridge_module
from neuroflow.models._workers import CPU_CHUNK, Workers, workers

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ALPHAS = np.logspace(-1, 5, 9)


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    """torch, OpenMP and BLAS threads set to ``n`` (as a job with ``threads: n``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(before)


def _problem(
    seed: int, run_lengths: list[int], n_features: int, n_targets: int
) -> tuple[np.ndarray, np.ndarray, list]:
    """Centred float32 features and responses, with leave-one-run-out splits."""
    rng = np.random.default_rng(seed)
    n = sum(run_lengths)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    # responses built without BLAS, so that they are the same bits in every process
    W = rng.standard_normal((8, n_targets))
    Y = (X[:, :8].astype(np.float64)[:, :, None] * W[None]).sum(1)
    Y += rng.standard_normal((n, n_targets)) * rng.uniform(0.5, 4.0, n_targets)
    X -= X.mean(0)
    Y = (Y - Y.mean(0)).astype(np.float32)
    groups = np.repeat(np.arange(len(run_lengths)), run_lengths)
    return X, Y, run_splits(groups)


def _ridge_primal() -> dict[str, np.ndarray]:
    X, Y, splits = _problem(0, [41, 29, 37, 33, 35], 131, 2 * CPU_CHUNK + 101)
    res = ridge_cv(X, Y, alphas=ALPHAS, splits=splits, device="cpu")
    X_test = X[:23] * 0.5
    return {
        "coef": res.coef,
        "best_alpha": res.best_alpha,
        "cv_score": res.cv_score,
        "predict": res.predict(X_test),
        "ridge_fit": ridge_fit(X, Y, res.best_alpha, device="cpu"),
    }


def _ridge_kernel_pearson() -> dict[str, np.ndarray]:
    X, Y, splits = _problem(1, [38, 27, 31, 30, 26], 317, CPU_CHUNK + 57)
    res = ridge_cv(
        X, Y, alphas=ALPHAS, splits=splits, scoring="pearson", target_batch_size=150, device="cpu"
    )
    assert res.form == "kernel"
    return {
        "coef": res.coef,
        "best_alpha": res.best_alpha,
        "cv_score": res.cv_score,
        "predict": res.predict(X[:19]),
    }


def _ridge_float64() -> dict[str, np.ndarray]:
    X, Y, splits = _problem(2, [44, 39, 47, 40], 113, 97)
    res = ridge_cv(X, Y, alphas=ALPHAS, splits=splits, dtype="float64", device="cpu")
    return {"coef": res.coef, "best_alpha": res.best_alpha, "cv_score": res.cv_score}


def _banded(form: str) -> Callable[[], dict[str, np.ndarray]]:
    def run() -> dict[str, np.ndarray]:
        X, Y, splits = _problem(3, [37, 31, 42, 35], 143, CPU_CHUNK + 35)
        Xs = [X[:, :80], X[:, 80:]]
        res = banded_ridge_cv(
            Xs, Y, alphas=ALPHAS, splits=splits, n_iter=4, form=form, device="cpu"
        )
        return {
            "coef": res.coef,
            "best_gamma": res.best_gamma,
            "best_alpha": res.best_alpha,
            "cv_score": res.cv_score,
            "predict_split": res.predict_split([x[:17] for x in Xs]),
        }

    return run


SOLVERS = {
    "ridge-primal-r2": _ridge_primal,
    "ridge-kernel-pearson": _ridge_kernel_pearson,
    "ridge-float64": _ridge_float64,
    "banded-primal": _banded("primal"),
    "banded-kernel": _banded("kernel"),
}


@pytest.mark.parametrize("name", SOLVERS)
def test_solvers_are_bit_identical_for_1_2_and_3_threads(name):
    results = {}
    for n in (1, 2, 3):
        with _threads(n):
            results[n] = SOLVERS[name]()
    for n in (2, 3):
        assert results[n].keys() == results[1].keys()
        for key, value in results[1].items():
            assert np.array_equal(results[n][key], value), (name, n, key)


# The solver as a Snakemake job runs it: thread counts from the environment at start.
_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from neuroflow.models import ridge_cv, run_splits
    rng = np.random.default_rng(5)
    X = rng.standard_normal((211, 157)).astype(np.float32)
    Y = rng.standard_normal((211, 300)).astype(np.float32)
    Y[:, :150] += 3 * X[:, :1]
    X -= X.mean(0)
    Y -= Y.mean(0)
    splits = run_splits(np.repeat(np.arange(5), [45, 40, 43, 41, 42]))
    res = ridge_cv(X, Y, alphas=np.logspace(-1, 5, 9), splits=splits, device="cpu")
    np.savez(sys.argv[1], coef=res.coef, best_alpha=res.best_alpha,
             cv_score=res.cv_score, predict=res.predict(X[:31]))
    """
)


@pytest.mark.slow
def test_job_thread_count_from_the_environment_does_not_change_the_bits(tmp_path):
    outputs = {}
    for n in (1, 2):
        out = tmp_path / f"threads-{n}.npz"
        env = {**os.environ, **dict.fromkeys(_THREAD_VARS, str(n))}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        with np.load(out) as data:
            outputs[n] = {k: data[k] for k in data.files}
    for key, value in outputs[1].items():
        assert np.array_equal(outputs[2][key], value), key


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_is_numpy_product_with_fixed_bits(dtype):
    rng = np.random.default_rng(6)
    A = rng.standard_normal((97, 301)).astype(dtype)
    B = rng.standard_normal((301, 2 * CPU_CHUNK + 13)).astype(dtype)
    results = {}
    for n in (1, 2, 3):
        with _threads(n):
            results[n] = matmul(A, B)
    assert results[1].dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(results[1], A @ B, rtol=tol, atol=tol)
    for n in (2, 3):
        assert np.array_equal(results[n], results[1]), n


def test_matmul_types_and_errors():
    A = np.arange(6).reshape(2, 3)
    assert matmul(A, np.ones((3, 4), dtype=np.float32)).dtype == np.float64
    assert matmul(A.astype(np.float32), np.ones((3, 4), dtype=np.float32)).dtype == np.float32
    assert matmul(np.ones((2, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 2
    assert matmul(np.ones((0, 3)), np.ones((3, 2))).shape == (0, 2)
    with pytest.raises(ValueError, match="matching inner dimensions"):
        matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="must be real"):
        matmul(np.ones((2, 2), dtype=complex), np.ones((2, 2)))


def test_workers_pin_one_thread_and_restore_the_count():
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        with workers(torch.device("cpu")) as pool:
            assert pool.n_workers == 3
            assert torch.get_num_threads() == 1
            assert pool.map(lambda _: torch.get_num_threads(), range(6)) == [1] * 6
            assert pool.chunks(2 * CPU_CHUNK + 1, 10_000) == [
                slice(0, CPU_CHUNK),
                slice(CPU_CHUNK, 2 * CPU_CHUNK),
                slice(2 * CPU_CHUNK, 2 * CPU_CHUNK + 1),
            ]
            assert pool.chunks(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
        assert torch.get_num_threads() == 3
        with pytest.raises(RuntimeError, match="boom"), workers(torch.device("cpu")):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 3
        X, Y, splits = _problem(7, [20, 22, 21], 9, 5)
        ridge_cv(X, Y, alphas=ALPHAS, splits=splits, device="cpu")
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_gpu_schedule_gives_the_cpu_results(monkeypatch):
    """One task at a time, one chunk per target batch (as on a GPU): same fit."""
    cpu = _ridge_primal()

    @contextlib.contextmanager
    def sequential(device: torch.device) -> Iterator[Workers]:
        yield Workers(None, 1, None)

    monkeypatch.setattr(ridge_module, "workers", sequential)
    gpu = _ridge_primal()
    np.testing.assert_array_equal(gpu["best_alpha"], cpu["best_alpha"])
    # float32 solves whose target chunks differ in size: BLAS picks other kernels and
    # summation orders (measured: up to 1.5e-5 apart on coefficients of order one)
    for key in ("coef", "cv_score", "predict", "ridge_fit"):
        np.testing.assert_allclose(gpu[key], cpu[key], rtol=1e-4, atol=5e-5, err_msg=key)

"""Parallel work whose results do not depend on the number of threads.

Multi-threaded BLAS and LAPACK kernels split their work by thread, and some splits
change the order of floating-point sums, so results change in their last bits with
the thread count a job gets (Snakemake's ``threads``, ``OMP_NUM_THREADS``): MKL's
``syevd`` behind :func:`torch.linalg.eigh` at any size, its matrix product when one
operand is thin (a few rows against a long inner dimension), torch's reductions to
fewer values than threads, and OpenBLAS's products behind numpy's ``@`` for most
shapes. A single-threaded kernel always sums in the same order.

So the solvers run every kernel on one thread and get their parallelism from
independent tasks run side by side instead: folds, band weightings, and chunks of
targets (columns) of a width that does not depend on the thread count. Every value
is then computed by the same single-threaded kernels on the same operands, whatever
the number of threads, and the results are bit-identical for any thread count (on a
given machine and library build). GPU kernels do not depend on the host's threads:
there, tasks run one after the other and a chunk holds a whole target batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import lazy_loader
import numpy as np

torch = lazy_loader.load("torch")

__all__ = ["CPU_CHUNK", "Workers", "matmul", "workers"]

#: Targets (columns) per task on the CPU. A constant, not a function of the thread
#: count, so that every target is computed with the same neighbours in its chunk.
#: Wide enough for efficient single-threaded matrix products, narrow enough to give
#: every thread work on a few thousand targets.
CPU_CHUNK = 256

_T = TypeVar("_T")
_R = TypeVar("_R")


class Workers:
    """Runs independent tasks, each on one thread.

    Attributes
    ----------
    n_workers : int
        Tasks run at once.
    chunk : int | None
        Columns per task on the CPU; ``None`` on a GPU (one chunk per target batch).
    """

    def __init__(self, executor: ThreadPoolExecutor | None, n_workers: int, chunk: int | None):
        self._executor = executor
        self.n_workers = n_workers
        self.chunk = chunk

    def map(self, fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        """``[fn(item) for item in items]``, run side by side, in the order of ``items``."""
        if self._executor is None:
            return [fn(item) for item in items]
        return list(self._executor.map(fn, items))

    def chunks(self, n_columns: int, batch_size: int) -> list[slice]:
        """Consecutive column ranges covering ``range(n_columns)``.

        Parameters
        ----------
        n_columns : int
            Columns (targets) to cover.
        batch_size : int
            Most columns at once; on the CPU the width is also at most
            :data:`CPU_CHUNK`.

        Returns
        -------
        chunks : list of slice
            Ranges of equal width (the last may be narrower); the width depends on
            ``batch_size`` and the device, never on the number of threads.
        """
        width = batch_size if self.chunk is None else min(batch_size, self.chunk)
        return [slice(a, min(a + width, n_columns)) for a in range(0, n_columns, width)]


def _one_thread() -> None:
    # torch.set_num_threads also sets the calling thread's OpenMP and MKL thread
    # counts, which a new thread would otherwise take from the environment.
    torch.set_num_threads(1)


@contextlib.contextmanager
def workers(device: torch.device) -> Iterator[Workers]:
    """Run the block's kernels on one thread, with tasks spread over the job's threads.

    On the CPU, the number of workers is torch's thread count on entry (the job's
    threads); inside the block, the calling thread and every worker run their kernels
    on one thread. torch's thread count is restored on exit, whatever happens inside.

    Parameters
    ----------
    device : torch.device
        Where the block computes.

    Yields
    ------
    workers : Workers
        Runs the block's tasks.
    """
    if device.type != "cpu":
        yield Workers(None, 1, None)
        return
    n_workers = torch.get_num_threads()
    torch.set_num_threads(1)
    executor = ThreadPoolExecutor(n_workers, initializer=_one_thread) if n_workers > 1 else None
    try:
        yield Workers(executor, n_workers, CPU_CHUNK)
    finally:
        if executor is not None:
            # after an error, the tasks not yet started are dropped
            executor.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(n_workers)


def matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Matrix product with the same bits for any number of threads.

    numpy's ``A @ B`` goes to a multi-threaded BLAS whose last bits depend on the
    thread count. Here, chunks of columns of ``B`` are multiplied on one thread each
    (on the CPU, with torch), side by side on torch's threads.

    Parameters
    ----------
    A : ndarray, shape (n, k)
        Left operand.
    B : ndarray, shape (k, m)
        Right operand.

    Returns
    -------
    AB : ndarray, shape (n, m)
        In numpy's result type of ``A`` and ``B`` (float64 for integers).
    """
    A, B = np.asarray(A), np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(
            f"`A` and `B` must be 2-D with matching inner dimensions, got shapes {A.shape} "
            f"and {B.shape} instead."
        )
    dtype = np.result_type(A, B, np.float32)
    if dtype.kind == "c":
        raise ValueError(f"`A` and `B` must be real, got dtype {dtype} instead.")
    if dtype not in (np.float32, np.float64):
        dtype = np.dtype(np.float64)
    out = np.empty((A.shape[0], B.shape[1]), dtype=dtype)
    if out.size == 0:
        return out
    with torch.no_grad(), workers(torch.device("cpu")) as pool:
        # torch.tensor copies: its own aligned buffer, safe to share between threads
        At = torch.tensor(A.astype(dtype, copy=False))

        @torch.no_grad()
        def product(cols: slice) -> None:
            Bc = torch.tensor(np.ascontiguousarray(B[:, cols], dtype=dtype))
            out[:, cols] = (At @ Bc).numpy()

        pool.map(product, pool.chunks(B.shape[1], B.shape[1]))
    return out

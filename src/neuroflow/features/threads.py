"""One fixed thread count for feature extraction, whatever the job was given.

Multi-threaded CPU kernels split some reductions by thread (torch's sums and, on
some CPUs, its matrix products; the LAPACK calls behind PCA), so float32 results
change in their last bits with the number of threads a job gets (Snakemake's
``threads``, ``OMP_NUM_THREADS``). Feature stores are not versioned by thread
count, and such last-bit differences are enough to flip a penalty chosen by
cross-validation downstream, so extraction runs inside :func:`fixed_threads`:
the same bits for any thread count, on a given machine and library build.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from threadpoolctl import threadpool_limits

__all__ = ["EXTRACTION_THREADS", "fixed_threads"]

#: Intra-op threads of torch, OpenMP and BLAS during extraction.
EXTRACTION_THREADS = 1


@contextlib.contextmanager
def fixed_threads(n_threads: int = EXTRACTION_THREADS) -> Iterator[None]:
    """Run the block with a fixed number of torch, OpenMP and BLAS threads.

    The previous settings are restored on exit, whatever happens inside. GPU
    kernels are unaffected; only work on the CPU is pinned.

    Parameters
    ----------
    n_threads : int
        Threads of torch's intra-op pool and of every OpenMP and BLAS library
        loaded in the process.

    Yields
    ------
    None
    """
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise ValueError(f"`n_threads` must be a positive int, got {n_threads!r} instead.")
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        with threadpool_limits(limits=n_threads):
            yield
    finally:
        torch.set_num_threads(previous)

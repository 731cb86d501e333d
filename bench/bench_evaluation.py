"""Benchmark the evaluation stage's permutation nulls against direct computations.

Prints the time of the vectorised nulls (block cross-products, FFT circular
shifts) and of the direct per-permutation re-indexing on the same data and
permutations, with their ratio. Use ``--small`` for a quick run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import pearsonr

from neuroflow.evaluation.metrics import pearson_r, zscore_time
from neuroflow.evaluation.permutation import block_permutations, permutation_null, valid_shifts


def _time(func, repeat: int = 1) -> float:
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best


def _direct_block(zt, zp, orders, block):
    n_blocks = orders.shape[1]
    tail = np.arange(n_blocks * block, zt.shape[0])
    base = np.arange(block)
    out = np.empty((orders.shape[0], zt.shape[1]))
    for i, order in enumerate(orders):
        idx = np.concatenate([(order[:, None] * block + base).ravel(), tail])
        out[i] = (zt * zp[idx]).mean(axis=0)
    return out


def _direct_circular(zt, zp, shifts):
    return np.stack([(zt * np.roll(zp, -s, axis=0)).mean(axis=0) for s in shifts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true", help="quick run on small data")
    args = parser.parse_args()
    n_times, n_targets, n_perm, block = (
        (200, 2000, 200, 10) if args.small else (300, 20000, 1000, 10)
    )
    rng = np.random.default_rng(0)
    y_true = rng.standard_normal((n_times, n_targets))
    y_pred = 0.3 * y_true + rng.standard_normal((n_times, n_targets))
    zt, zp = zscore_time(y_true), zscore_time(y_pred)
    print(f"data: {n_times} time points x {n_targets} targets, {n_perm} permutations")

    t_ours = _time(lambda: pearson_r(y_true, y_pred), 3)
    t_ref = _time(lambda: pearsonr(y_true, y_pred, axis=0), 3)
    print(
        f"pearson_r            {t_ours:8.3f} s  scipy.stats.pearsonr {t_ref:8.3f} s  "
        f"ratio {t_ref / t_ours:6.1f}x"
    )

    kw = {"n_permutations": n_perm, "block_length": block, "seed": 0}
    t_ours = _time(lambda: permutation_null(y_true, y_pred, method="block", **kw))
    orders = block_permutations(n_times, block, n_perm, np.random.default_rng(0))
    t_ref = _time(lambda: _direct_block(zt, zp, orders, block))
    _, null = permutation_null(y_true, y_pred, method="block", **kw)
    assert np.allclose(null[:5], _direct_block(zt, zp, orders[:5], block))
    print(
        f"block null           {t_ours:8.3f} s  direct re-indexing   {t_ref:8.3f} s  "
        f"ratio {t_ref / t_ours:6.1f}x"
    )

    shifts = valid_shifts(n_times, block)
    t_ours = _time(lambda: permutation_null(y_true, y_pred, method="circular_shift", **kw))
    t_ref = _time(lambda: _direct_circular(zt, zp, shifts))
    print(
        f"circular null ({shifts.size:4d}) {t_ours:8.3f} s  np.roll loop         {t_ref:8.3f} s  "
        f"ratio {t_ref / t_ours:6.1f}x"
    )


if __name__ == "__main__":
    main()

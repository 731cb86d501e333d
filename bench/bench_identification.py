"""Identification of test items: one correlation/rank matrix against a per-item loop.

python bench/bench_identification.py          # 1,000 items x 256 features, 1,000 nulls
python bench/bench_identification.py --small  # 200 items
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from neuroflow.decoding.identification import identification_metrics, identification_null


def loop_ranks(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Rank of the correct stimulus, one item at a time (the reference)."""
    ranks = np.empty(len(pred))
    for i in range(len(pred)):
        r = np.array([np.corrcoef(pred[i], t)[0, 1] for t in true])
        ranks[i] = 1 + (r > r[i]).sum() + 0.5 * ((r == r[i]).sum() - 1)
    return ranks


def loop_null(pred: np.ndarray, true: np.ndarray, n_perm: int, seed: int) -> np.ndarray:
    """Mean rank under label shuffles, one permutation and item at a time."""
    corr = np.array([[np.corrcoef(p, t)[0, 1] for t in true] for p in pred])
    perms = np.random.default_rng(seed).permuted(np.tile(np.arange(len(pred)), (n_perm, 1)), axis=1)
    out = np.empty(n_perm)
    for k in range(n_perm):
        ranks = [
            1
            + (corr[i] > corr[i, perms[k, i]]).sum()
            + 0.5 * ((corr[i] == corr[i, perms[k, i]]).sum() - 1)
            for i in range(len(pred))
        ]
        out[k] = np.mean(ranks)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    n, f, n_perm = (200, 256, 200) if args.small else (1_000, 256, 1_000)
    rng = np.random.default_rng(0)
    true = rng.standard_normal((n, f))
    pred = true + 2.0 * rng.standard_normal((n, f))

    t0 = time.perf_counter()
    metrics = identification_metrics(pred, true)
    t_vec = time.perf_counter() - t0
    t0 = time.perf_counter()
    ranks = loop_ranks(pred, true)
    t_loop = time.perf_counter() - t0
    assert abs(ranks.mean() - metrics["mean_rank"]) < 1e-9
    print(f"{n} items x {f} features")
    print(
        f"  metrics  loop {t_loop:8.3f} s  vectorised {t_vec:8.4f} s  ratio {t_loop / t_vec:8.1f}x"
    )

    t0 = time.perf_counter()
    null = identification_null(pred, true, n_permutations=n_perm, seed=1)
    t_vec_null = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref_null = loop_null(pred, true, n_perm, seed=1)
    t_loop_null = time.perf_counter() - t0
    assert np.allclose(null["mean_rank"], ref_null)
    print(
        f"  null x{n_perm}  loop {t_loop_null:8.3f} s  vectorised {t_vec_null:8.4f} s  "
        f"ratio {t_loop_null / t_vec_null:8.1f}x"
    )


if __name__ == "__main__":
    main()

"""Concept decoding's label-shuffled null: vectorised AUC / average precision against
scikit-learn's ``roc_auc_score`` and ``average_precision_score`` called per shuffle.

    python bench/bench_concepts.py            # 1,000 stimuli, 80 concepts, 1,000 shuffles
    python bench/bench_concepts.py --small    # 200 stimuli, 20 concepts, 200 shuffles
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from neuroflow.decoding.concepts import average_precision_columns, roc_auc_columns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    n_stim, n_concepts, n_perm = (200, 20, 200) if args.small else (1000, 80, 1000)
    rng = np.random.default_rng(0)
    labels = rng.random((n_stim, n_concepts)) < 0.2
    scores = labels * 0.5 + rng.standard_normal((n_stim, n_concepts))
    perms = np.stack([labels[rng.permutation(n_stim)] for _ in range(n_perm)])

    t0 = time.perf_counter()
    ours_auc = roc_auc_columns(scores, perms)
    ours_ap = average_precision_columns(scores, perms)
    t_ours = time.perf_counter() - t0

    t0 = time.perf_counter()
    ref_auc = np.empty((n_perm, n_concepts))
    ref_ap = np.empty((n_perm, n_concepts))
    for i in range(n_perm):
        for j in range(n_concepts):
            ref_auc[i, j] = roc_auc_score(perms[i, :, j], scores[:, j])
            ref_ap[i, j] = average_precision_score(perms[i, :, j], scores[:, j])
    t_ref = time.perf_counter() - t0
    diff = max(np.abs(ours_auc - ref_auc).max(), np.abs(ours_ap - ref_ap).max())
    print(f"{n_stim} stimuli, {n_concepts} concepts, {n_perm} label shuffles")
    print(
        f"  null AUC+AP  scikit-learn {t_ref:8.3f} s  neuroflow {t_ours:8.3f} s  "
        f"ratio {t_ref / t_ours:7.1f}x  max|diff| {diff:.1e}"
    )


if __name__ == "__main__":
    main()

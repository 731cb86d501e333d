"""Participation ratio: neuroflow's SVD path against numpy's and scikit-learn's.

``participation_ratio(eigenspectrum(X))`` against two references on the same data in the
same run: ``numpy.linalg.eigvalsh(np.cov(X.T))`` and
``sklearn.decomposition.PCA(svd_solver="full").explained_variance_``, each followed by
the same participation ratio, with the largest relative difference of the eigenvalues.

    python bench/bench_geometry.py            # 10,000 x 768 and 2,000 x 4,096
    python bench/bench_geometry.py --small    # 2,000 x 256 and 300 x 1,024
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.decomposition import PCA

from neuroflow.geometry import eigenspectrum, participation_ratio


def _best(fn, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _numpy_eigenvalues(X: np.ndarray) -> np.ndarray:
    return np.sort(np.linalg.eigvalsh(np.cov(X.T)))[::-1]


def _sklearn_eigenvalues(X: np.ndarray) -> np.ndarray:
    return PCA(svd_solver="full").fit(X).explained_variance_


def _run(n_stim: int, n_feat: int, repeats: int, rng: np.random.Generator) -> float:
    """Time the paths on one matrix; returns the largest difference of the eigenvalues."""
    X = rng.standard_normal((n_stim, n_feat)) * np.linspace(0.1, 3.0, n_feat)
    our, ref_np, ref_sk = eigenspectrum(X), _numpy_eigenvalues(X), _sklearn_eigenvalues(X)
    t_our, pr = _best(lambda: participation_ratio(eigenspectrum(X)), repeats)
    t_gram, _ = _best(lambda: participation_ratio(eigenspectrum(X, method="gram")), repeats)
    t_np, pr_np = _best(
        lambda: participation_ratio(np.clip(_numpy_eigenvalues(X), 0, None)), repeats
    )
    t_sk, pr_sk = _best(lambda: participation_ratio(_sklearn_eigenvalues(X)), repeats)
    k = our.size  # min(n - 1, d): the non-zero eigenvalues
    top = max(float(our[0]), 1e-300)
    diff = max(
        float(np.max(np.abs(our - ref_np[:k]))) / top,
        float(np.max(np.abs(our - ref_sk[:k]))) / top,
    )
    print(f"{n_stim} stimuli x {n_feat} features (best of {repeats}), PR {pr:.3f}")
    print(
        f"  numpy eigvalsh(cov) {t_np:8.3f} s  neuroflow {t_our:8.3f} s  "
        f"ratio {t_np / t_our:6.2f}x  PR {pr_np:.3f}"
    )
    print(
        f"  sklearn PCA(full)   {t_sk:8.3f} s  neuroflow {t_our:8.3f} s  "
        f"ratio {t_sk / t_our:6.2f}x  PR {pr_sk:.3f}"
    )
    print(
        f"  numpy eigvalsh(cov) {t_np:8.3f} s  neuroflow {t_gram:8.3f} s  "
        f"ratio {t_np / t_gram:6.2f}x  (method='gram')"
    )
    print(f"  max|diff| / largest eigenvalue {diff:.2e}")
    return diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    sizes = [(2_000, 256), (300, 1_024)] if args.small else [(10_000, 768), (2_000, 4_096)]
    rng = np.random.default_rng(0)
    worst = max(_run(n, d, args.repeats, rng) for n, d in sizes)
    if worst > 1e-8:
        raise SystemExit(f"eigenvalues differ from the references by more than 1e-8: {worst}")


if __name__ == "__main__":
    main()

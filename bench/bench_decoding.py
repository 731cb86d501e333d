"""Time-resolved EEG decoding: the stage's batched solvers against MNE / scikit-learn.

Two of the decoding stage's inner loops are written here instead of calling MNE once
per time point, because its permutation nulls refit them hundreds of times:

- shrinkage LDA at every time point (``neuroflow.decoding.lda.sliding_lda_scores``)
  against ``mne.decoding.SlidingEstimator`` and ``GeneralizingEstimator`` around
  ``StandardScaler + LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")``,
  scored by balanced accuracy with the same folds (scores must be equal);
- ridge from channels to continuous targets with a leave-one-out penalty per time point
  and target (``neuroflow.decoding.temporal._ridge_fold``) against scikit-learn's
  ``RidgeCV`` (efficient leave-one-out) fitted per time point and target (predictions
  must be equal).

python bench/bench_decoding.py          # 1,200 epochs x 32 channels x 125 times
python bench/bench_decoding.py --small  # 300 epochs x 32 channels x 40 times
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def bench_lda(X: np.ndarray, y: np.ndarray, splits, generalize: bool) -> None:
    from mne.decoding import GeneralizingEstimator, SlidingEstimator, cross_val_multiscore

    from neuroflow.decoding.classification import make_classifier
    from neuroflow.decoding.lda import sliding_lda_scores

    cls = GeneralizingEstimator if generalize else SlidingEstimator
    est = cls(make_classifier("lda"), scoring="balanced_accuracy", n_jobs=1, verbose=False)
    ref, t_ref = _timed(cross_val_multiscore, est, X, y, cv=splits, verbose=False)
    ours, t_ours = _timed(sliding_lda_scores, X, y, splits, generalize=generalize)
    diff = float(np.abs(ours - ref).max())
    name = "GeneralizingEstimator" if generalize else "SlidingEstimator"
    print(
        f"LDA, {name:22s}: MNE {t_ref:7.2f} s, neuroflow {t_ours:6.2f} s -> "
        f"{t_ref / t_ours:5.1f}x, max |score diff| {diff:.1e}"
    )
    assert diff < 1e-9


def bench_ridge(X: np.ndarray, Y: np.ndarray, alphas: np.ndarray, n_ref_times: int) -> None:
    from sklearn.linear_model import RidgeCV

    from neuroflow.decoding.temporal import _ridge_fold

    n_test = X.shape[0] // 5
    Xt = np.moveaxis(X, 2, 0)
    Xtr, Xte = Xt[:, n_test:], Xt[:, :n_test]
    Ytr = Y[n_test:] - Y[n_test:].mean(0)
    ours, t_ours = _timed(_ridge_fold, Xtr, Ytr, Xte, alphas)
    t0 = time.perf_counter()
    ref = np.empty((n_ref_times, n_test, Y.shape[1]))
    for t in range(n_ref_times):
        for j in range(Y.shape[1]):
            model = RidgeCV(alphas=alphas, fit_intercept=False).fit(Xtr[t], Ytr[:, j])
            ref[t, :, j] = model.predict(Xte[t])
    t_ref = (time.perf_counter() - t0) * Xt.shape[0] / n_ref_times
    diff = float(np.abs(ours[:n_ref_times] - ref).max())
    print(
        f"ridge per time point x {Y.shape[1]} targets ({len(alphas)} alphas, LOO): "
        f"sklearn RidgeCV {t_ref:7.2f} s (measured on {n_ref_times} of {Xt.shape[0]} time "
        f"points, scaled linearly), neuroflow {t_ours:6.2f} s -> {t_ref / t_ours:5.1f}x, "
        f"max |prediction diff| {diff:.1e}"
    )
    assert diff < 1e-8


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run on a small problem")
    args = parser.parse_args(argv)
    n, c, t = (300, 32, 40) if args.small else (1200, 32, 125)
    n_targets = 5 * 21  # 5 feature components, observed + 20 shuffles in one solve
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, c, t))
    y = rng.integers(0, 2, n)
    X[y == 1, :4, t // 3 :] += 0.3
    order = rng.permutation(n)
    splits = [(np.setdiff1d(order, f), f) for f in np.array_split(order, 5)]
    print(f"problem: {n} epochs x {c} channels x {t} time points, 5 folds")
    bench_lda(X, y, splits, generalize=False)
    bench_lda(X, y, splits, generalize=True)
    Y = rng.standard_normal((n, n_targets))
    bench_ridge(X, Y, np.logspace(-1, 4, 6), n_ref_times=4 if args.small else 3)


if __name__ == "__main__":
    main()

"""Leave-one-subject-out time-resolved decoding: neuroflow's batched shrinkage LDA
against MNE's ``SlidingEstimator`` with the same scikit-learn pipeline and folds, and
the cost of Euclidean alignment.

    python bench/bench_cross_subject.py            # 8 subjects x 200 epochs, 64 ch, 100 times
    python bench/bench_cross_subject.py --small    # 4 subjects x 60 epochs, 32 ch, 40 times
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from mne.decoding import SlidingEstimator, cross_val_multiscore
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from neuroflow.decoding.cross_subject import (
    cross_subject_scores,
    euclidean_alignment,
    leave_one_subject_out,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    n_sub, n_ep, n_ch, n_t = (4, 60, 32, 40) if args.small else (8, 200, 64, 100)
    rng = np.random.default_rng(0)
    pattern = rng.standard_normal(n_ch)
    epochs, labels = {}, {}
    for s in range(n_sub):
        y = np.arange(n_ep) % 2
        x = rng.standard_normal((n_ep, n_ch, n_t))
        x[y == 1, :, n_t // 3 : n_t // 2] += 0.3 * pattern[:, None]
        mixing = np.eye(n_ch) + 0.3 * rng.standard_normal((n_ch, n_ch))
        epochs[f"{s:02d}"] = np.einsum("cd,edt->ect", mixing, x)
        labels[f"{s:02d}"] = y

    t0 = time.perf_counter()
    ours = cross_subject_scores(epochs, labels, classifier="sliding", align=True)
    t_ours = time.perf_counter() - t0

    t0 = time.perf_counter()
    X = np.concatenate([euclidean_alignment(epochs[s])[0] for s in sorted(epochs)])
    t_align = time.perf_counter() - t0
    y = np.concatenate([labels[s] for s in sorted(epochs)])
    groups = np.repeat(sorted(epochs), n_ep)
    t0 = time.perf_counter()
    pipe = make_pipeline(
        StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
    )
    ref = cross_val_multiscore(
        SlidingEstimator(pipe, scoring="balanced_accuracy", verbose=False),
        X,
        y,
        cv=leave_one_subject_out(groups),
        verbose=False,
    )
    t_ref = time.perf_counter() - t0
    diff = np.abs(np.stack([ours[s] for s in sorted(ours)]) - ref).max()
    print(f"{n_sub} subjects x {n_ep} epochs, {n_ch} channels, {n_t} times, aligned")
    print(
        f"  LOSO sliding LDA  MNE {t_ref:8.3f} s  neuroflow {t_ours:8.3f} s  "
        f"ratio {t_ref / t_ours:6.1f}x  max|diff| {diff:.1e}  (alignment {t_align:.3f} s)"
    )


if __name__ == "__main__":
    main()

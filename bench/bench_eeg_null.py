"""Benchmark the EEG encoding cluster null: cost of one permutation, by layer width.

Every permutation of the cross-validated EEG encoding null refits each outer fold's
ridge with the features moved between stimuli and, to keep the null exact, chooses each
target's penalty again by the fold's inner cross-validation. This bench times one
permutation at the size of a ds000117-like session (150 images shown twice, 64
channels x 100 latencies, 13 penalties, 5 outer x 5 inner folds) for layers of 6 to
1,280 features, three ways, in the same run:

- ``kept``: :class:`neuroflow.encoding.eeg_inference.FoldRefit` keeping the observed
  penalties (not exact: the observed fit's penalties were tuned to the observed pairing);
- ``reselect``: the same class choosing the penalties again in closed form (the default);
- ``refit``: the reference, :func:`neuroflow.encoding.eeg_design.cross_validated_predictions`
  run on the moved features (the ridge of the stage itself, inner CV included).

It checks that ``reselect`` and ``refit`` give the same predictions and prints the time
ratios reselect / refit (target < 1) and reselect / kept, with the minutes 1,000
permutations take.

``--fwer N`` measures what the exact null buys: over ``N`` seeds of null data (60 images
shown twice, 8 occipital channels x 8 latencies of noise smooth over the scalp and in
time, 39 permutations, so that p <= 0.05 has probability 0.05 exactly), the fraction of
seeds with a significant cluster, kept and reselected penalties side by side, for layers
of 6 to 512 features, with the binomial p-value against 5 %.

Usage: ``python bench/bench_eeg_null.py [--small] [--repeats N] [--fwer N]``.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

from neuroflow.encoding.eeg_design import cross_validated_predictions, fold_refit, stimulus_folds
from neuroflow.encoding.eeg_inference import cluster_permutation_test, target_adjacency

CFG = {
    "alphas": {"start": 0.0, "stop": 6.0, "num": 13},
    "cv": {"grouped_kfold": 5},
    "scoring": "r2",
    "standardize": True,
}


def session(rng: np.random.Generator, n_images: int, n_features: int, targets: tuple[int, int]):
    """Images shown twice in a shuffled order, features of a low-rank layer, and epochs
    that a few of its directions drive."""
    images = [f"im{i:03d}" for i in range(n_images)]
    shown = np.array(images * 2)[rng.permutation(2 * n_images)]
    latent = rng.standard_normal((n_images, 8))
    feats = latent @ rng.standard_normal((8, n_features)) + rng.standard_normal(
        (n_images, n_features)
    )
    index = {s: i for i, s in enumerate(images)}
    X = feats[[index[s] for s in shown]]
    signal = latent[[index[s] for s in shown], :2] @ rng.standard_normal((2, np.prod(targets)))
    Y = signal + 3 * rng.standard_normal(signal.shape)
    return images, shown, X, Y.reshape(-1, *targets).astype(np.float32)


def best_of(repeats: int, func) -> tuple[float, object]:
    """Shortest wall time of ``repeats`` calls, and the last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - start)
    return min(times), out


def null_hit(seed: int, n_features: int, keep: bool) -> bool:
    """Whether one seed of null data gives a significant cluster (p <= 0.05)."""
    import mne
    from scipy.ndimage import gaussian_filter1d

    from neuroflow.encoding.eeg_inference import channel_adjacency

    n_images, n_lat = 60, 8
    montage = mne.channels.make_standard_montage("biosemi64")
    names = ["O1", "Oz", "O2", "PO7", "PO3", "POz", "PO4", "PO8"]
    positions = np.array([montage.get_positions()["ch_pos"][n] for n in names])
    rng = np.random.default_rng(seed)
    images = [f"im{i:02d}" for i in range(n_images)]
    shown = np.array(images * 2)[rng.permutation(2 * n_images)]
    feats = dict(zip(images, rng.standard_normal((n_images, n_features)), strict=True))
    X = np.array([feats[s] for s in shown])
    # noise smooth over the scalp (3 cm) and in time (2.5 samples)
    dist = np.linalg.norm(positions[:, None] - positions[None], axis=-1)
    mixing = np.exp(-(dist**2) / (2 * 0.03**2))
    white = rng.standard_normal((shown.size, n_lat, len(names)))
    Y = gaussian_filter1d(white @ mixing.T, 2.5, axis=1)
    adjacency = target_adjacency(n_lat, channel_adjacency(positions, names), len(names))
    folds = stimulus_folds(n_images, 5, seed)
    cfg = CFG | {"alphas": {"start": -1.0, "stop": 5.0, "num": 7}, "cv": {"grouped_kfold": 3}}
    grid = 10.0 ** np.linspace(-1, 5, 7)
    pred, alphas = cross_validated_predictions(
        X, Y, stimuli=shown, ids=images, folds=folds, standardize=True, alphas=grid,
        n_splits=3, device="cpu",
    )  # fmt: skip
    refit = fold_refit(
        X, Y, shown, images, folds, alphas, cfg | {"scoring": "pearson"} if keep else cfg
    )
    observed = np.stack([Y[shown == s].mean(0) for s in images])
    test = cluster_permutation_test(
        pred.reshape(observed.shape), observed, adjacency, n_permutations=39, threshold=0.01,
        seed=seed, refit=refit,
    )  # fmt: skip
    return bool((test.p_values <= 0.05).any())


def fwer(n_seeds: int) -> None:
    """Print the family-wise error of the null by layer width, kept vs reselected."""
    from scipy import stats

    print(f"family-wise error over {n_seeds} seeds of null data (level 0.05)")
    print(" ".join(f"{h:>14}" for h in ("features", "penalties", "rate", "binomial p", "s")))
    for width in (6, 64, 512):
        for keep in (True, False):
            start = time.perf_counter()
            hits = sum(null_hit(seed, width, keep) for seed in range(n_seeds))
            p = stats.binomtest(hits, n_seeds, 0.05).pvalue
            cells = (width, "kept" if keep else "reselected", f"{hits / n_seeds:.3f}", f"{p:.2g}")
            print(" ".join(f"{c:>14}" for c in (*cells, f"{time.perf_counter() - start:.0f}")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="64 images, 16 x 25 targets")
    parser.add_argument("--repeats", type=int, default=2, help="timed calls of each")
    parser.add_argument("--fwer", type=int, default=0, help="seeds of the error measurement")
    args = parser.parse_args()
    if args.fwer:
        fwer(args.fwer)
        return
    n_images, targets = (64, (25, 16)) if args.small else (150, (100, 64))
    widths = (6, 24, 64, 256, 1280)
    grid = 10.0 ** np.linspace(0, 6, 13)
    print(f"{n_images} images x 2, {targets[1]} channels x {targets[0]} latencies, 13 penalties")
    header = ("features", "kept s", "reselect s", "refit s", "reselect/refit", "reselect/kept")
    print(" ".join(f"{h:>14}" for h in (*header, "max |diff|", "1000 perms")))
    for width in widths:
        rng = np.random.default_rng(width)
        images, shown, X, Y = session(rng, n_images, width, targets)
        folds = stimulus_folds(n_images, 5, seed=0)
        common = {"stimuli": shown, "ids": images, "folds": folds, "standardize": True}
        common |= {"alphas": grid, "n_splits": 5, "device": "cpu", "dtype": "float64"}
        _, alphas = cross_validated_predictions(X, Y, **common)
        refit = fold_refit(X, Y, shown, images, folds, alphas, CFG)
        kept = fold_refit(X, Y, shown, images, folds, alphas, CFG | {"scoring": "pearson"})
        order = rng.permutation(n_images)
        moved = dict(zip(images, np.array([X[shown == s][0] for s in images])[order], strict=True))
        X_moved = np.array([moved[s] for s in shown])
        t_kept, _ = best_of(args.repeats, partial(kept.predict, order))
        t_new, ours = best_of(args.repeats, partial(refit.predict, order))
        t_ref, (theirs, _) = best_of(
            args.repeats, partial(cross_validated_predictions, X_moved, Y, **common)
        )
        diff = np.abs(ours - (theirs - Y.reshape(len(Y), -1).mean(0))).max()
        cells = (width, f"{t_kept:.3f}", f"{t_new:.3f}", f"{t_ref:.3f}", f"{t_new / t_ref:.2f}")
        cells += (f"{t_new / t_kept:.1f}", f"{diff:.1e}", f"{1000 * t_new / 60:.1f} min")
        print(" ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()

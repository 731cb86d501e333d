"""Significance at whole-brain scale, measured on generated data.

Prints, for the evaluation stage's permutation inference
(:func:`neuroflow.evaluation.significance.permutation_inference`, the defaults of
``evaluation.permutation``: 1,000 block permutations, AR(2) prewhitening, Gaussian tail):

1. **FDR at scale**: 200,000 targets of which 1 % follow a planted drive (r about 0.4
   over 200 time points), over ``--fdr-seeds`` seeds: Benjamini-Hochberg at q = 0.05,
   the mean false discovery proportion and the share of signal targets found, against
   the exact permutation p-values alone (which cannot go below 1/1001).
2. **Family-wise error** of the max-statistic correction with no signal, over
   ``--fwer-seeds`` seeds: the share of seeds with any target at p_fwer <= 0.05.
3. **Tail accuracy**: the approximated p-values against a 100,000-permutation reference,
   where the reference resolves them and 1,000 permutations do not.
4. **Calibration** on pure noise (AR(0.85) observations and predictions): the share of
   p-values <= 0.05, 0.01 and 0.001, with and without prewhitening.

Run: ``python bench/bench_significance.py`` (about an hour on 2 cores at full size;
``--quick`` for a 5-minute version).
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy.signal import lfilter

from neuroflow.evaluation.permutation import fdr_correction, permutation_null
from neuroflow.evaluation.significance import exact_pvalues, permutation_inference, tail_pvalues


def _ar(rng: np.random.Generator, n_times: int, n_targets: int, coef: float) -> np.ndarray:
    return lfilter([1.0], [1.0, -coef], rng.standard_normal((n_times, n_targets)), axis=0)


def _planted(rng, n_times, n_targets, n_signal, strength, coef=0.6):
    drive = _ar(rng, n_times, 1, coef)
    y = _ar(rng, n_times, n_targets, coef)
    y[:, :n_signal] += strength * drive
    pred = drive + 0.5 * _ar(rng, n_times, n_targets, coef)
    return y, pred


def fdr_at_scale(n_targets: int, n_seeds: int) -> None:
    n_signal = n_targets // 100
    fdp, power, exact_found, r_signal = [], [], [], []
    start = time.perf_counter()
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        y, pred = _planted(rng, 200, n_targets, n_signal, 0.5)
        out = permutation_inference(y, pred, block_length=10, seed=seed, prewhiten=2)
        _, sig = fdr_correction(out.p, alpha=0.05)
        fdp.append(sig[n_signal:].sum() / max(1, sig.sum()))
        power.append(sig[:n_signal].mean())
        exact_found.append(int(fdr_correction(out.p_exact, alpha=0.05)[1].sum()))
        r_signal.append(float(np.nanmean(out.r[:n_signal])))
    took = time.perf_counter() - start
    print(
        f"FDR, {n_targets:,} targets, 1 % signal (mean r {np.mean(r_signal):.2f}), {n_seeds} "
        f"seeds: mean false discovery proportion {np.mean(fdp):.4f} (SE "
        f"{np.std(fdp) / np.sqrt(n_seeds):.4f}; BH bound 0.05 x 0.99 = 0.0495), signal found "
        f"{np.mean(power):.3f}; exact p alone: {np.mean(exact_found):.1f} discoveries; "
        f"{took / n_seeds:.1f} s per seed"
    )


def fwer_no_signal(n_targets: int, n_seeds: int) -> None:
    hits = 0
    for seed in range(n_seeds):
        rng = np.random.default_rng(10_000 + seed)
        y, pred = _ar(rng, 200, n_targets, 0.6), _ar(rng, 200, n_targets, 0.6)
        out = permutation_inference(
            y, pred, block_length=10, seed=seed, prewhiten=2, fwer_groups=np.zeros(n_targets)
        )
        hits += bool((out.p_fwer <= 0.05).any())
    se = np.sqrt(0.05 * 0.95 / n_seeds)
    print(
        f"FWER (max statistic), {n_targets:,} targets, no signal, {n_seeds} seeds: "
        f"{hits / n_seeds:.3f} of seeds with any p_fwer <= 0.05 (nominal 0.05, binomial SE "
        f"{se:.3f})"
    )


def tail_accuracy(n_datasets: int) -> None:
    ratios: dict[str, list[np.ndarray]] = {"gaussian": [], "gpd": []}
    for seed in range(n_datasets):
        rng = np.random.default_rng(20_000 + seed)
        y, pred = _planted(rng, 233, 61, 61, np.linspace(0.0, 0.4, 61))
        r, ref = permutation_null(y, pred, n_permutations=100_000, block_length=10, seed=1)
        p_ref, c_ref = exact_pvalues(r, ref)
        _, null = permutation_null(y, pred, n_permutations=1000, block_length=10, seed=2)
        _, count = exact_pvalues(r, null)
        both = (c_ref >= 10) & (count < 10)
        for tail, values in ratios.items():
            p, _ = tail_pvalues(r, null, tail=tail)
            values.append(np.log10(p[both] / p_ref[both]))
    for tail, values in ratios.items():
        v = np.concatenate(values)
        print(
            f"tail {tail}: {v.size} targets resolved by 100,000 permutations but not by 1,000: "
            f"log10(p / p_reference) median {np.median(v):+.2f}, 10-90 % "
            f"[{np.quantile(v, 0.1):+.2f}, {np.quantile(v, 0.9):+.2f}], range "
            f"[{v.min():+.2f}, {v.max():+.2f}]"
        )


def calibration(n_targets: int, n_seeds: int) -> None:
    for order in (0, 2):
        counts = {0.05: 0, 0.01: 0, 0.001: 0}
        for seed in range(n_seeds):
            rng = np.random.default_rng(30_000 + seed)
            y, pred = _ar(rng, 200, n_targets, 0.85), _ar(rng, 200, n_targets, 0.85)
            out = permutation_inference(y, pred, block_length=10, seed=seed, prewhiten=order)
            for alpha in counts:
                counts[alpha] += int((out.p <= alpha).sum())
        n = n_targets * n_seeds
        rates = ", ".join(f"p <= {a}: {c / n / a:.2f} x nominal" for a, c in counts.items())
        print(f"calibration, pure AR(0.85) noise, prewhiten {order}, {n:,} p-values: {rates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=200_000)
    parser.add_argument("--fdr-seeds", type=int, default=50)
    parser.add_argument("--fwer-seeds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="20,000 targets, 5 / 50 seeds")
    args = parser.parse_args()
    if args.quick:
        args.targets, args.fdr_seeds, args.fwer_seeds = 20_000, 5, 50
    start = time.perf_counter()
    fdr_at_scale(args.targets, args.fdr_seeds)
    fwer_no_signal(5_000, args.fwer_seeds)
    tail_accuracy(3)
    calibration(3_000, 10)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"total {time.perf_counter() - start:.0f} s, peak memory {peak:.0f} MB")


if __name__ == "__main__":
    main()

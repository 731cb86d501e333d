"""RDMs and model comparison: neuroflow's vectorised code against rsatoolbox's calls.

One correlation-distance RDM over ``n_stimuli`` patterns of ``n_voxels`` voxels, then
its Spearman correlation and Kendall tau-a with ``n_models`` model RDMs; both paths on
the same data in the same run, with the largest absolute difference. Tau-a compares the
same RDM on both paths (each path's own RDM differs by float rounding, which reorders
near-equal distances), so its difference is rounding of the final division only; its
compiled counter is warmed up (numba's cache) before the timing. Last, the noise
ceilings of an EEG RSA: ``n_sets`` RDMs of 40 stimuli (time points x channel groups),
each measured on 4 repeats, by rsatoolbox's ``boot_noise_ceiling`` set by set and by
``noise_ceilings`` for all sets at once.

    python bench/bench_rsa.py            # 1,000 stimuli x 50,000 voxels, 20 models
    python bench/bench_rsa.py --small    # 200 x 5,000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rsatoolbox.data import Dataset
from rsatoolbox.inference import boot_noise_ceiling
from rsatoolbox.rdm import RDMs, calc_rdm, compare

from neuroflow.rsa.compare import compare_rdms, noise_ceilings
from neuroflow.rsa.rdm import correlation_rdm


def _best(fn, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    n_stim, n_vox = (200, 5_000) if args.small else (1_000, 50_000)
    n_models = 20
    rng = np.random.default_rng(0)
    data = rng.standard_normal((n_stim, n_vox)).astype(np.float32)
    models = rng.random((n_models, n_stim * (n_stim - 1) // 2))

    t_ref_rdm, ref_rdm = _best(
        lambda: calc_rdm(Dataset(data), method="correlation").get_vectors()[0], args.repeats
    )
    t_our_rdm, our_rdm = _best(lambda: correlation_rdm(data), args.repeats)
    t_ref_cmp, ref_cmp = _best(
        lambda: compare(RDMs(models), RDMs(ref_rdm[None]), method="spearman")[:, 0], args.repeats
    )
    t_our_cmp, our_cmp = _best(
        lambda: compare_rdms(models, our_rdm[None], method="spearman")[:, 0], args.repeats
    )
    t_ref_tau, ref_tau = _best(
        lambda: compare(RDMs(models), RDMs(ref_rdm[None]), method="tau-a")[:, 0], args.repeats
    )
    compare_rdms(models[:, :10], ref_rdm[None, :10], method="tau-a")  # load the compiled code
    t_our_tau, our_tau = _best(
        lambda: compare_rdms(models, ref_rdm[None], method="tau-a")[:, 0], args.repeats
    )
    rdm_diff = float(np.abs(our_rdm - ref_rdm).max())
    cmp_diff = float(np.abs(our_cmp - ref_cmp).max())
    tau_diff = float(np.abs(our_tau - ref_tau).max())
    print(f"{n_stim} stimuli x {n_vox} voxels, {n_models} model RDMs (best of {args.repeats})")
    print(
        f"  RDM         rsatoolbox {t_ref_rdm:8.3f} s  neuroflow {t_our_rdm:8.3f} s  "
        f"ratio {t_ref_rdm / t_our_rdm:6.2f}x  max|diff| {rdm_diff:.2e}"
    )
    print(
        f"  Spearman    rsatoolbox {t_ref_cmp:8.3f} s  neuroflow {t_our_cmp:8.3f} s  "
        f"ratio {t_ref_cmp / t_our_cmp:6.2f}x  max|diff| {cmp_diff:.2e}"
    )
    print(
        f"  tau-a       rsatoolbox {t_ref_tau:8.3f} s  neuroflow {t_our_tau:8.3f} s  "
        f"ratio {t_ref_tau / t_our_tau:6.2f}x  max|diff| {tau_diff:.2e}"
    )
    total_ref = t_ref_rdm + t_ref_cmp + t_ref_tau
    total_our = t_our_rdm + t_our_cmp + t_our_tau
    print(
        f"  total       rsatoolbox {total_ref:8.3f} s  neuroflow {total_our:8.3f} s  "
        f"ratio {total_ref / total_our:6.2f}x"
    )
    ceil_diff = _ceilings(rng, 40 if args.small else 200, args.repeats)
    if max(rdm_diff, cmp_diff, tau_diff, ceil_diff) > 1e-6:
        raise SystemExit(
            "values differ from rsatoolbox by more than 1e-6: "
            f"{rdm_diff}, {cmp_diff}, {tau_diff}, {ceil_diff}"
        )


def _ceilings(rng: np.random.Generator, n_sets: int, repeats: int) -> float:
    """Time the noise ceilings of ``n_sets`` RDM sets both ways; the largest difference."""
    n_pairs = 40 * 39 // 2
    rdms = rng.random((n_sets, n_pairs)) + rng.standard_normal((4, n_sets, n_pairs))
    diff = 0.0
    for method in ("spearman", "tau-a"):
        noise_ceilings(rdms[:, :1], method=method)  # load the compiled code
        t_ref, ref = _best(
            lambda m=method: np.array(
                [boot_noise_ceiling(RDMs(rdms[:, k]), method=m) for k in range(n_sets)]
            ),
            repeats,
        )
        t_our, our = _best(lambda m=method: noise_ceilings(rdms, method=m), repeats)
        diff = max(diff, float(np.abs(our - ref).max()))
        print(
            f"  ceilings {method:<9s} rsatoolbox {t_ref:8.3f} s  neuroflow {t_our:8.3f} s  "
            f"ratio {t_ref / t_our:6.2f}x  max|diff| {np.abs(our - ref).max():.2e}  "
            f"({n_sets} sets x 4 RDMs)"
        )
    return diff


if __name__ == "__main__":
    main()

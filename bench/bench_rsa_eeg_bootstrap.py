"""Time-resolved EEG RSA bootstrap: one set of samples for every time point at once.

``n_models`` model RDMs against ``n_subjects`` subjects' EEG RDMs at ``n_times`` time
points over ``n_stimuli`` stimuli, resampling stimuli and subjects together (Spearman).
neuroflow's ``bootstrap_evaluations`` draws the indices once and scores every time point
from each RDM sorted once (weighted ranks); the reference is rsatoolbox's
``eval_bootstrap`` called at each time point, as a user would without it. rsatoolbox
draws its own samples from NumPy's global generator, so the distributions are compared
by their means and interval limits (equal up to sampling error); sample-by-sample
equality with the per-time-point path on shared indices is checked in the test suite.

    python bench/bench_rsa_eeg_bootstrap.py           # 60 stimuli, 4 subjects, 8 models,
                                                      # 24 time points, 500 draws
    python bench/bench_rsa_eeg_bootstrap.py --small   # 30, 3, 4, 8 time points, 200 draws
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import numpy as np
from rsatoolbox.inference import eval_bootstrap
from rsatoolbox.model import ModelFixed
from rsatoolbox.rdm import RDMs
from scipy.spatial.distance import pdist

from neuroflow.rsa.inference import bootstrap_evaluations, draw_bootstrap_samples


def _world(rng, n_stim, n_subj, n_models, n_times):
    """Model RDMs and per-time EEG RDMs whose shared geometry waxes and wanes."""
    truth = rng.standard_normal((n_stim, 6))
    gain = np.sin(np.linspace(0, np.pi, n_times))
    data = np.stack(
        [
            np.stack([pdist(g * truth + rng.standard_normal(truth.shape)) for _ in range(n_subj)])
            for g in gain
        ]
    )  # (time, subject, pair)
    models = np.stack(
        [pdist(truth + s * rng.standard_normal(truth.shape)) for s in np.linspace(0, 3, n_models)]
    )
    return models, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    n_stim, n_subj, n_models, n_times, n_boot = (
        (30, 3, 4, 8, 200) if args.small else (60, 4, 8, 24, 500)
    )
    models, data = _world(np.random.default_rng(0), n_stim, n_subj, n_models, n_times)

    t0 = time.perf_counter()
    subjects, stimuli = draw_bootstrap_samples(
        np.random.default_rng(0), n_subj, n_stim, n_boot, "both"
    )
    ours = bootstrap_evaluations(models, data, subjects, stimuli, method="spearman")
    t_ours = time.perf_counter() - t0

    fixed = [ModelFixed(f"m{i}", RDMs(m[None])) for i, m in enumerate(models)]
    np.random.seed(0)  # noqa: NPY002 (rsatoolbox samples from the global generator)
    ref_means, ref_ci = [], []
    t0 = time.perf_counter()
    for k in range(n_times):
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            ref = eval_bootstrap(
                fixed, RDMs(data[k]), method="spearman", N=n_boot, boot_noise_ceil=False
            )
        ref_means.append(ref.get_means())
        ref_ci.append(np.array(ref.get_ci(0.95, test_type="bootstrap")))
    t_ref = time.perf_counter() - t0
    ours_ci = np.nanpercentile(ours, [2.5, 97.5], axis=0)  # (bound, time, model)
    ref_ci = np.stack(ref_ci, axis=1)  # (bound, time, model)
    print(
        f"{n_stim} stimuli, {n_subj} subjects, {n_models} models, {n_times} time points, "
        f"{n_boot} samples (stimuli and subjects resampled, Spearman)"
    )
    print(
        f"  bootstrap  rsatoolbox per time point {t_ref:8.3f} s  neuroflow all at once "
        f"{t_ours:8.3f} s  ratio {t_ref / t_ours:6.2f}x"
    )
    print(
        "  max|diff| of bootstrap means "
        f"{np.abs(np.nanmean(ours, 0) - np.stack(ref_means)).max():.3f}, of 95% limits "
        f"{np.abs(ours_ci - ref_ci).max():.3f} (sampling error)"
    )


if __name__ == "__main__":
    main()

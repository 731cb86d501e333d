"""Bootstrap RSA inference: neuroflow's vectorised samples against rsatoolbox's.

``n_models`` model RDMs against ``n_subjects`` subjects' RDMs over ``n_stimuli``
stimuli, resampling stimuli and subjects together (rsatoolbox's ``eval_bootstrap``,
Spearman). rsatoolbox draws its own samples from NumPy's global generator, so the two
distributions are compared by their means and interval limits (equal up to sampling
error); sample-by-sample equality on shared indices is checked in the test suite.

    python bench/bench_rsa_bootstrap.py            # 92 stimuli, 8 subjects, 10 models, 1000 draws
    python bench/bench_rsa_bootstrap.py --small    # 40 stimuli, 5 subjects, 5 models, 200 draws
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

from neuroflow.rsa.inference import bootstrap_rsa


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", action="store_true")
    args = parser.parse_args()
    n_stim, n_subj, n_models, n_boot = (40, 5, 5, 200) if args.small else (92, 8, 10, 1000)
    rng = np.random.default_rng(0)
    truth = rng.standard_normal((n_stim, 6))
    data = np.stack([pdist(truth + rng.standard_normal(truth.shape)) for _ in range(n_subj)])
    models = np.stack(
        [pdist(truth + s * rng.standard_normal(truth.shape)) for s in np.linspace(0, 3, n_models)]
    )

    t0 = time.perf_counter()
    ours = bootstrap_rsa(models, data, over="both", n_bootstraps=n_boot, seed=0)
    t_ours = time.perf_counter() - t0

    fixed = [ModelFixed(f"m{i}", RDMs(m[None])) for i, m in enumerate(models)]
    np.random.seed(0)  # noqa: NPY002 (rsatoolbox samples from the global generator)
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
        ref = eval_bootstrap(fixed, RDMs(data), method="spearman", N=n_boot, boot_noise_ceil=False)
    t_ref = time.perf_counter() - t0
    ref_ci = np.array(ref.get_ci(0.95, test_type="bootstrap"))
    print(
        f"{n_stim} stimuli, {n_subj} subjects, {n_models} models, {n_boot} samples "
        "(stimuli and subjects resampled, Spearman)"
    )
    print(
        f"  bootstrap  rsatoolbox {t_ref:8.3f} s  neuroflow {t_ours:8.3f} s  "
        f"ratio {t_ref / t_ours:6.2f}x"
    )
    print(
        "  max|diff| of bootstrap means "
        f"{np.abs(np.nanmean(ours.samples, 0) - ref.get_means()).max():.3f}, "
        f"of 95% limits {np.abs(ours.ci - ref_ci).max():.3f} (sampling error)"
    )


if __name__ == "__main__":
    main()

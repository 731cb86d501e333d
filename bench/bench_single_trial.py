"""Benchmark vectorised LSS single-trial betas against a loop of nilearn first-level fits.

Same data, same run: the stage's estimator (per-event regressors with nilearn's
``compute_regressor``, one batched pseudo-inverse per run, one product
``E @ Y``) vs ``nilearn.glm.first_level.FirstLevelModel`` fitted once per
trial (target trial + all other trials, OLS, no drift), the reference
implementation of Mumford et al.'s LSS. Prints both times, their ratio and the
largest absolute difference of the betas. The nilearn loop is timed on a
subset of trials and extrapolated linearly (each fit costs the same).

Usage: ``python bench/bench_single_trial.py [--small]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import nibabel as nib
import numpy as np
import pandas as pd

T_R = 1.5


def make_data(n_times: int, n_voxels: int, n_trials: int, seed: int = 0):
    """Random (n_times, n_voxels) data and a jittered event table."""
    rng = np.random.default_rng(seed)
    onsets = 4.0 + np.sort(rng.uniform(0, (n_times - 12) * T_R, n_trials))
    events = pd.DataFrame({"onset": onsets, "duration": np.full(n_trials, 1.0)})
    y = rng.standard_normal((n_times, n_voxels)).astype(np.float32)
    return y, events


def ours(y: np.ndarray, events: pd.DataFrame) -> np.ndarray:
    from neuroflow.preprocessing.fmri.single_trial import estimator_matrix, event_regressors

    trials = event_regressors(
        events["onset"].to_numpy(),
        events["duration"].to_numpy(),
        frame_times=np.arange(y.shape[0]) * T_R,
    )
    estimator = estimator_matrix(trials, np.ones((y.shape[0], 1)), method="lss")
    return estimator @ y.astype(np.float64)


def nilearn_loop(y: np.ndarray, events: pd.DataFrame, trials: list[int]) -> np.ndarray:
    from nilearn.glm.first_level import FirstLevelModel

    n_times, n_voxels = y.shape
    img = nib.Nifti1Image(y.T.reshape(n_voxels, 1, 1, n_times), np.eye(4))
    mask = nib.Nifti1Image(np.ones((n_voxels, 1, 1), np.int8), np.eye(4))
    out = np.empty((len(trials), n_voxels))
    for row, t in enumerate(trials):
        labels = np.where(np.arange(len(events)) == t, "target", "other")
        flm = FirstLevelModel(
            t_r=T_R,
            hrf_model="glover",
            drift_model=None,
            signal_scaling=False,
            mask_img=mask,
            noise_model="ols",
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            flm.fit(img, events=events.assign(trial_type=labels))
            effect = flm.compute_contrast("target", output_type="effect_size")
        out[row] = effect.get_fdata().reshape(-1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="quick run")
    args = parser.parse_args()
    sizes = [(200, 2_000, 60, 6)] if args.small else [(300, 20_000, 150, 8)]
    # warm up: imports and first calls are not timed
    ours(*make_data(20, 3, 2))
    nilearn_loop(*make_data(20, 3, 2), [0])
    for n_times, n_voxels, n_trials, n_ref in sizes:
        y, events = make_data(n_times, n_voxels, n_trials)
        start = time.perf_counter()
        betas = ours(y, events)
        t_ours = time.perf_counter() - start
        subset = list(range(0, n_trials, max(1, n_trials // n_ref)))[:n_ref]
        start = time.perf_counter()
        reference = nilearn_loop(y, events, subset)
        t_ref = (time.perf_counter() - start) / len(subset) * n_trials
        diff = float(np.abs(betas[subset] - reference).max())
        print(
            f"LSS {n_times} volumes x {n_voxels} voxels x {n_trials} trials: "
            f"ours {t_ours:.2f} s, nilearn FirstLevelModel loop {t_ref:.1f} s "
            f"(extrapolated from {len(subset)} fits), ratio {t_ref / t_ours:.0f}x, "
            f"max |diff| {diff:.1e}"
        )


if __name__ == "__main__":
    main()

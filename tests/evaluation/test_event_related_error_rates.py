"""Error rates of the default significance maps on event-related studies, over seeds.

Each seed simulates one subject (:mod:`evaluation_event_related`): planted responses in
two ROIs, AR(1) noise, drifts and stimulus-locked head motion leaking most strongly at
the brain's edge, cleaned of drifts and motion as the workflow cleans runs, and four
ridge models predicting two held-out runs. The tests run the evaluation's defaults
(:data:`~neuroflow.evaluation.stage.DEFAULT_CONFIG`): permutation null, AR
prewhitening, the held-out runs' nuisance basis, Benjamini-Hochberg and the
max-statistic FWER.

Sampling-error bounds (one-sided, 99 %):

- a false discovery proportion lies in [0, 1], so no variable of mean 0.05 has a
  variance above the Bernoulli's ``0.05 * 0.95``: the mean FDP of ``n`` seeds must stay
  below ``0.05 + 2.33 * sqrt(0.05 * 0.95 / n)``, and below ``0.05 + 2.33 * sd / sqrt(n)``
  with the seeds' own SD;
- a family-wise error is a Bernoulli event: the number of seeds with any false positive
  must stay at or below the 99th percentile of Binomial(n, 0.05).
"""

from __future__ import annotations

import numpy as np
import pytest
from evaluation_event_related import MODELS, EventRelatedStudy, simulate_event_related
from scipy.stats import binom

from neuroflow.evaluation.permutation import fdr_correction
from neuroflow.evaluation.significance import PermutationInference, permutation_inference
from neuroflow.evaluation.stage import DEFAULT_CONFIG, block_length_samples

Z99 = 2.326


def _infer(
    study: EventRelatedStudy,
    model: str,
    seed: int,
    *,
    use_nuisance: bool = True,
    n_permutations: int | None = None,
) -> PermutationInference:
    """The evaluation stage's default inference of one model's held-out prediction."""
    perm = DEFAULT_CONFIG["permutation"]
    extra = {"nuisance": study.nuisance, "segments": study.segments} if use_nuisance else {}
    return permutation_inference(
        study.y_test,
        study.y_pred[model],
        n_permutations=n_permutations or perm["n_permutations"],
        method=perm["method"],
        block_length=block_length_samples(perm, study.tr, study.y_test.shape[0]),
        seed=seed,
        alternative=perm["alternative"],
        tail=perm["tail"],
        prewhiten=perm["prewhiten"],
        fwer_groups=np.zeros(study.y_test.shape[1], dtype=int),
        **extra,
    )


def _fdp(significant: np.ndarray, planted: np.ndarray) -> float:
    return float((significant & ~planted).sum() / max(1, significant.sum()))


@pytest.mark.slow
def test_bh_false_discovery_proportion_of_every_model_over_24_seeds():
    """Mean FDP <= 0.05 within sampling error for every model (planted voxels are 14 %
    of the brain, so a calibrated BH gives about 0.043); the full model finds most
    planted voxels. Without the nuisance basis the visual model's null is too narrow
    and its mean FDP leaves the bound."""
    n_seeds = 24
    fdr = DEFAULT_CONFIG["fdr"]
    fdp = {m: [] for m in MODELS}
    power = []
    fdp_plain = []
    for seed in range(n_seeds):
        study = simulate_event_related(seed)
        for model in MODELS:
            out = _infer(study, model, seed)
            _, sig = fdr_correction(out.p, alpha=fdr["alpha"], method=fdr["method"])
            fdp[model].append(_fdp(sig, study.planted))
            if model == "full":
                power.append(sig[study.planted].mean())
        plain = _infer(study, "visual", seed, use_nuisance=False)
        fdp_plain.append(_fdp(fdr_correction(plain.p, alpha=fdr["alpha"])[1], study.planted))
    worst_case = 0.05 + Z99 * np.sqrt(0.05 * 0.95 / n_seeds)
    for model, values in fdp.items():
        mean = float(np.mean(values))
        assert mean <= worst_case, (model, mean, worst_case)
        own = 0.05 + Z99 * np.std(values, ddof=1) / np.sqrt(n_seeds)
        assert mean <= own, (model, mean, own)
    assert np.mean(power) >= 0.8, power
    plain = float(np.mean(fdp_plain))
    assert plain > 0.05 + Z99 * np.std(fdp_plain, ddof=1) / np.sqrt(n_seeds), plain


@pytest.mark.slow
def test_max_statistic_family_wise_error_on_null_studies_over_60_seeds():
    """Nothing planted (motion and drifts still cleaned out): the seeds with any voxel at
    p_fwer <= 0.05 stay within the 99th percentile of Binomial(60, 0.05), for a model
    of stimulus timing and one of unrelated features; FDR finds nothing as often."""
    n_seeds = 60
    alpha = DEFAULT_CONFIG["fwer"]["alpha"]
    bound = int(binom.ppf(0.99, n_seeds, 0.05))
    hits = {"full": 0, "unrelated": 0}
    hits_fdr = {"full": 0, "unrelated": 0}
    for seed in range(n_seeds):
        study = simulate_event_related(seed, snr=0.0, grid_shape=(7, 8, 7))
        assert not study.planted.any()
        for model in hits:
            out = _infer(study, model, seed, n_permutations=500)
            hits[model] += bool((out.p_fwer <= alpha).any())
            hits_fdr[model] += bool(fdr_correction(out.p, alpha=alpha)[1].any())
    for model in hits:
        assert hits[model] <= bound, (model, hits, bound)
        assert hits_fdr[model] <= bound, (model, hits_fdr, bound)
    assert sum(hits.values()) >= 1, hits  # a test that rejects at all

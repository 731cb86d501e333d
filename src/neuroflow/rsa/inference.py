"""Bootstrap inference on model-RDM comparisons, over stimuli and/or subjects.

Model evaluations vary with the stimuli that happened to be shown and with the
subjects that happened to be measured; resampling either (or both) with replacement
gives their sampling distribution (Schütt et al., 2023, *eLife*; rsatoolbox's
``eval_bootstrap``, ``eval_bootstrap_pattern`` and ``eval_bootstrap_rdm``). This module
draws the samples from a seeded generator and evaluates them with the vectorised
comparisons of :mod:`neuroflow.rsa.compare`, with rsatoolbox's conventions:

- a stimulus sample keeps its duplicates; the dissimilarity of a stimulus with its own
  copy is undefined and dropped from every RDM of that sample, as rsatoolbox's
  ``RDMs.subsample_pattern`` does;
- a sample with fewer than 3 distinct stimuli is left out (NaN);
- percentile confidence intervals are taken from the samples framed by -inf and +inf
  (``Result.get_ci(..., test_type="bootstrap")``), and pairwise model comparisons are
  two-sided bootstrap p-values with rsatoolbox's ``1/n`` correction
  (``bootstrap_pair_tests``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compare import COMPARISONS, compare_rdms
from .rdm import n_conditions

__all__ = [
    "BOOTSTRAP_FACTORS",
    "BootstrapResult",
    "bootstrap_confidence_interval",
    "bootstrap_pair_pvalues",
    "bootstrap_rsa",
    "draw_bootstrap_samples",
    "resampled_pairs",
]

#: What a bootstrap resamples: the stimuli, the subjects (RDMs), or both at once.
BOOTSTRAP_FACTORS = ("stimuli", "subjects", "both")


@dataclass(frozen=True)
class BootstrapResult:
    """Model evaluations with their bootstrap distribution.

    Attributes
    ----------
    evaluations : ndarray of float64, shape (n_models,)
        Mean comparison of each model with the subjects' RDMs, on all the data.
    samples : ndarray of float64, shape (n_bootstraps, n_models)
        The same per bootstrap sample (NaN rows: samples with < 3 distinct stimuli).
    ci : ndarray of float64, shape (2, n_models)
        Lower and upper percentile confidence limits.
    pair_pvalues : ndarray of float64, shape (n_models, n_models)
        Two-sided bootstrap p-value of each pairwise difference (1 on the diagonal).
    se : ndarray of float64, shape (n_models,)
        Standard deviation of the bootstrap samples.
    """

    evaluations: np.ndarray
    samples: np.ndarray
    ci: np.ndarray
    pair_pvalues: np.ndarray
    se: np.ndarray


def draw_bootstrap_samples(
    rng: np.random.Generator, n_subjects: int, n_stimuli: int, n_bootstraps: int, over: str
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the subjects and stimuli of each bootstrap sample.

    Parameters
    ----------
    rng : numpy.random.Generator
        Seeded generator.
    n_subjects, n_stimuli : int
        Sizes of the data.
    n_bootstraps : int
        Number of samples.
    over : {"stimuli", "subjects", "both"}
        The factor(s) resampled with replacement; the other is kept whole.

    Returns
    -------
    subjects : ndarray of int, shape (n_bootstraps, n_subjects)
        Sorted subject indices of each sample.
    stimuli : ndarray of int, shape (n_bootstraps, n_stimuli)
        Sorted stimulus indices of each sample.
    """
    if over not in BOOTSTRAP_FACTORS:
        raise ValueError(
            f"`over` must be one of {', '.join(BOOTSTRAP_FACTORS)}, got {over!r} instead."
        )
    if n_bootstraps < 1:
        raise ValueError(f"`n_bootstraps` must be at least 1, got {n_bootstraps} instead.")
    subjects = np.broadcast_to(np.arange(n_subjects), (n_bootstraps, n_subjects))
    stimuli = np.broadcast_to(np.arange(n_stimuli), (n_bootstraps, n_stimuli))
    if over in ("subjects", "both"):
        subjects = np.sort(rng.integers(0, n_subjects, size=(n_bootstraps, n_subjects)), axis=1)
    if over in ("stimuli", "both"):
        stimuli = np.sort(rng.integers(0, n_stimuli, size=(n_bootstraps, n_stimuli)), axis=1)
    return np.array(subjects), np.array(stimuli)


def resampled_pairs(stimuli: np.ndarray, n_stimuli: int) -> np.ndarray:
    """Condensed-RDM positions of the pairs of a resampled stimulus set.

    Parameters
    ----------
    stimuli : array-like of int, shape (n_sampled,)
        Sampled stimulus indices (duplicates allowed).
    n_stimuli : int
        Number of stimuli of the condensed RDMs.

    Returns
    -------
    positions : ndarray of int, shape (n_kept_pairs,)
        Position in the condensed vector of each pair ``(p < q)`` of the sample whose
        two stimuli differ (a stimulus paired with its own copy is dropped).
    """
    stimuli = np.asarray(stimuli, dtype=np.int64)
    p, q = np.triu_indices(stimuli.size, k=1)
    a, b = stimuli[p], stimuli[q]
    keep = a != b
    i, j = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    # position of (i, j), i < j, in scipy's condensed order
    return n_stimuli * i - i * (i + 1) // 2 + (j - i - 1)


def bootstrap_confidence_interval(samples: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Percentile interval of bootstrap samples, framed by -inf and +inf (rsatoolbox).

    Parameters
    ----------
    samples : array-like, shape (n_bootstraps, n_models)
        Bootstrap samples (rows with NaN are left out).
    level : float
        Coverage, in (0, 1).

    Returns
    -------
    ci : ndarray of float64, shape (2, n_models)
        Lower and upper limits; infinite or NaN (as rsatoolbox's) where the samples
        are too few for ``level`` (fewer than about ``2 / (1 - level)``).
    """
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1), got {level!r} instead.")
    samples = np.asarray(samples, dtype=np.float64)
    samples = samples[~np.isnan(samples).any(axis=1)]
    framed = np.concatenate([np.full((1, samples.shape[1]), -np.inf), samples])
    framed = np.concatenate([framed, np.full((1, samples.shape[1]), np.inf)])
    cut = (1 - level) / 2
    with np.errstate(invalid="ignore"):  # a limit between a sample and the infinite frame
        return np.stack([np.quantile(framed, cut, axis=0), np.quantile(framed, 1 - cut, axis=0)])


def bootstrap_pair_pvalues(samples: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p-values of every pairwise difference between models.

    Twice the smaller proportion of samples in which the difference has either sign
    (ties left out), shrunk as ``(n - 1) / n * p + 1 / n`` so that no p-value is 0:
    rsatoolbox's ``bootstrap_pair_tests``.

    Parameters
    ----------
    samples : array-like, shape (n_bootstraps, n_models)
        Bootstrap samples (rows with NaN are kept in ``n``, as rsatoolbox does when
        it is given them; :func:`bootstrap_rsa` passes only complete rows).

    Returns
    -------
    p : ndarray of float64, shape (n_models, n_models)
        Symmetric, 1 on the diagonal.
    """
    from rsatoolbox.util.inference_util import bootstrap_pair_tests

    return bootstrap_pair_tests(np.asarray(samples, dtype=np.float64))


def _evaluate(models: np.ndarray, data: np.ndarray, method: str) -> np.ndarray:
    """Mean over the data RDMs of each model's comparison: shape (n_models,)."""
    return compare_rdms(models, data, method=method).mean(axis=1)


def bootstrap_rsa(
    model_rdms: np.ndarray,
    data_rdms: np.ndarray,
    *,
    method: str = "spearman",
    over: str = "both",
    n_bootstraps: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> BootstrapResult:
    """Evaluate models against subjects' RDMs with a bootstrap over stimuli/subjects.

    Parameters
    ----------
    model_rdms : array-like, shape (n_models, n_pairs)
        Condensed model RDMs (one per model or layer).
    data_rdms : array-like, shape (n_subjects, n_pairs)
        Condensed brain RDMs, one per subject, over the same stimuli.
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        RDM comparison (:func:`~neuroflow.rsa.compare.compare_rdms`).
    over : {"stimuli", "subjects", "both"}
        What is resampled. Resampling subjects needs at least 2 of them.
    n_bootstraps : int
        Number of bootstrap samples.
    level : float
        Confidence level of the percentile intervals.
    seed : int
        Seed of the sampling.

    Returns
    -------
    result : BootstrapResult
    """
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    models = np.atleast_2d(np.asarray(model_rdms, dtype=np.float64))
    data = np.atleast_2d(np.asarray(data_rdms, dtype=np.float64))
    if models.shape[1] != data.shape[1]:
        raise ValueError(
            "`model_rdms` and `data_rdms` must have the same number of pairs, got "
            f"{models.shape[1]} and {data.shape[1]} instead."
        )
    if over in ("subjects", "both") and data.shape[0] < 2:
        raise ValueError(
            f"`data_rdms` must hold at least 2 subjects to resample subjects (over={over!r}), "
            f"got {data.shape[0]} instead."
        )
    n_stimuli = n_conditions(models.shape[1])
    subjects, stimuli = draw_bootstrap_samples(
        np.random.default_rng(seed), data.shape[0], n_stimuli, n_bootstraps, over
    )
    if over == "subjects":
        # every stimulus is kept: each subject's comparisons are computed once and the
        # samples only average them over the drawn subjects (the same numbers, no re-ranking)
        per_subject = compare_rdms(models, data, method=method)  # (model, subject)
        samples = per_subject[:, subjects].mean(axis=2).T
    else:
        samples = np.full((n_bootstraps, models.shape[0]), np.nan)
        for b in range(n_bootstraps):
            if np.unique(stimuli[b]).size < 3:
                continue
            pairs = resampled_pairs(stimuli[b], n_stimuli)
            samples[b] = _evaluate(models[:, pairs], data[subjects[b]][:, pairs], method)
    complete = samples[~np.isnan(samples).any(axis=1)]
    return BootstrapResult(
        evaluations=_evaluate(models, data, method),
        samples=samples,
        ci=bootstrap_confidence_interval(complete, level),
        pair_pvalues=bootstrap_pair_pvalues(complete),
        se=complete.std(axis=0, ddof=1) if len(complete) > 1 else np.full(models.shape[0], np.nan),
    )

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
from .rdm import condensed_index, n_conditions

__all__ = [
    "BOOTSTRAP_FACTORS",
    "BootstrapResult",
    "bootstrap_confidence_interval",
    "bootstrap_evaluations",
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
        # each RDM sorted once, each sample's pairs weighted (equal to re-ranking the
        # resampled vectors; about 4x faster at 500 stimuli)
        samples = bootstrap_evaluations(models, data[None], subjects, stimuli, method=method)
        samples = samples[:, 0]
    complete = samples[~np.isnan(samples).any(axis=1)]
    return BootstrapResult(
        evaluations=_evaluate(models, data, method),
        samples=samples,
        ci=bootstrap_confidence_interval(complete, level),
        pair_pvalues=bootstrap_pair_pvalues(complete),
        se=complete.std(axis=0, ddof=1) if len(complete) > 1 else np.full(models.shape[0], np.nan),
    )


#: Memory (bytes) for the sorted RDMs and work arrays of one block of
#: :func:`bootstrap_evaluations`; larger inputs are processed in blocks of RDM sets.
BLOCK_BYTES = 256 * 2**20


#: Pairs from which :class:`_SortedRows` ranks one RDM at a time (fewer: all at once).
_ROW_LOOP_PAIRS = 20_000


class _SortedRows:
    """Condensed RDMs sorted once, for weighted mid-ranks under stimulus resampling.

    A bootstrap sample that draws stimulus ``k`` ``c_k`` times holds each pair ``(a, b)``
    ``c_a c_b`` times (pairs of a stimulus with its own copy are dropped). Ranking that
    resampled vector with ties averaged gives every original pair the weighted mid-rank
    ``(sum of the weights of smaller values) + (weight of its tie group + 1) / 2``, which
    one cumulative sum over the presorted pairs gives.

    Parameters
    ----------
    rdms : ndarray, shape (n_rows, n_pairs)
        Condensed RDMs without NaN.
    """

    def __init__(self, rdms: np.ndarray) -> None:
        n_rows, n_pairs = rdms.shape
        self.order = np.argsort(rdms, axis=1, kind="stable")
        self.inverse = np.empty_like(self.order)
        positions = np.broadcast_to(np.arange(n_pairs), rdms.shape)
        np.put_along_axis(self.inverse, self.order, positions, axis=1)
        values = np.take_along_axis(rdms, self.order, axis=1)
        new = np.ones(rdms.shape, dtype=bool)
        new[:, 1:] = values[:, 1:] != values[:, :-1]
        self.first = self.last = None
        if not new.all():
            # first and last sorted position of each value's tie group
            self.first = np.maximum.accumulate(np.where(new, positions, 0), axis=1)
            ends = np.ones(rdms.shape, dtype=bool)
            ends[:, :-1] = new[:, 1:]
            last = np.where(ends, positions, n_pairs - 1)[:, ::-1]
            self.last = np.ascontiguousarray(np.minimum.accumulate(last, axis=1)[:, ::-1])
        # rows ranked together: about _ROW_LOOP_PAIRS values (one row when it is longer)
        self.step = max(1, _ROW_LOOP_PAIRS // n_pairs)
        offsets = (np.arange(n_rows) % self.step * n_pairs)[:, None]
        self.inverse_flat = self.inverse + offsets
        if self.first is not None:
            self.first += offsets
            self.last += offsets

    def centred_ranks(self, weights: np.ndarray, mean: float, out: np.ndarray) -> None:
        """Centred weighted mid-ranks of every row, in the original pair order.

        Parameters
        ----------
        weights : ndarray of int64, shape (n_pairs,)
            Multiplicity of each pair in the sample.
        mean : float
            Mean rank of the resampled vector, ``(sum(weights) + 1) / 2``.
        out : ndarray of float64, shape (n_rows, n_pairs)
            Filled with the ranks minus ``mean``.
        """
        for start in range(0, out.shape[0], self.step):
            rows = slice(start, start + self.step)
            ws = np.take(weights, self.order[rows])
            cw = np.cumsum(ws, axis=1)
            if self.first is None:
                ranks = cw - 0.5 * ws
            else:
                ranks = 0.5 * (np.take(cw - ws, self.first[rows]) + np.take(cw, self.last[rows]))
            ranks += 0.5 - mean
            np.take(ranks, self.inverse_flat[rows], out=out[rows])


def _weighted_pearson(x: np.ndarray, wy: np.ndarray, vx: np.ndarray, vy: np.ndarray) -> np.ndarray:
    """Correlations from the weighted covariances ``wy @ x.T`` and variances; NaN at 0."""
    cov = wy @ x.T
    den = np.sqrt(np.outer(vy, vx))
    return np.divide(cov, den, out=np.full(cov.shape, np.nan), where=den > 0)


def _block_samples_fast(
    models: np.ndarray,
    rows: np.ndarray,
    stimuli: np.ndarray,
    n_stimuli: int,
    method: str,
) -> np.ndarray:
    """Each row's comparison with each model per stimulus sample, (n_boot, n_rows, n_models).

    ``method`` is ``"spearman"`` (weighted mid-ranks) or ``"corr"`` (weighted Pearson);
    equal to ranking or correlating the resampled vectors as :func:`bootstrap_rsa` does.
    """
    i, j = condensed_index(n_stimuli)
    n_boot = stimuli.shape[0]
    out = np.full((n_boot, rows.shape[0], models.shape[0]), np.nan)
    if method == "spearman":
        sorted_models, sorted_rows = _SortedRows(models), _SortedRows(rows)
        x, y = np.empty(models.shape), np.empty(rows.shape)
    for b in range(n_boot):
        counts = np.bincount(stimuli[b], minlength=n_stimuli)
        if np.count_nonzero(counts) < 3:
            continue
        weights = counts[i] * counts[j]
        w = weights.astype(np.float64)
        total = float(w.sum())
        if method == "spearman":
            mean = (total + 1.0) / 2.0
            sorted_models.centred_ranks(weights, mean, x)
            sorted_rows.centred_ranks(weights, mean, y)
            xc, yc = x, y
        else:
            xc = models - (models @ w / total)[:, None]
            yc = rows - (rows @ w / total)[:, None]
        wy = yc * w
        vx = np.einsum("mp,p,mp->m", xc, w, xc)
        vy = np.einsum("rp,rp->r", wy, yc)
        out[b] = _weighted_pearson(xc, wy, vx, vy)
    return out


def bootstrap_evaluations(
    model_rdms: np.ndarray,
    data_rdms: np.ndarray,
    subjects: np.ndarray,
    stimuli: np.ndarray,
    *,
    method: str = "spearman",
) -> np.ndarray:
    """Bootstrap samples of the subject-mean model evaluation for many sets of RDMs at once.

    The same resampling indices are applied to every set (e.g. the brain RDMs at each
    EEG time point), so each sample is :func:`bootstrap_rsa`'s for the same indices. For
    ``spearman`` and ``corr`` every RDM is sorted once and each sample gives its pairs
    weights (a pair of stimuli drawn ``c_a`` and ``c_b`` times counts ``c_a c_b``
    times): weighted mid-ranks and weighted correlations equal ranking and correlating
    the resampled vectors, at the cost of one cumulative sum per RDM and sample instead
    of one sort. ``tau-a`` and ``cosine_cov``, and RDMs with NaN, resample the vectors
    and call :func:`~neuroflow.rsa.compare.compare_rdms` per sample and set (slow).

    Parameters
    ----------
    model_rdms : array-like, shape (n_models, n_pairs)
        Condensed model RDMs.
    data_rdms : array-like, shape (n_sets, n_subjects, n_pairs)
        Condensed brain RDMs of every subject, per set (time point, channel group).
    subjects : array-like of int, shape (n_bootstraps, n_subjects)
        Subjects of each sample (:func:`draw_bootstrap_samples`).
    stimuli : array-like of int, shape (n_bootstraps, n_stimuli)
        Stimuli of each sample (:func:`draw_bootstrap_samples`).
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        RDM comparison.

    Returns
    -------
    samples : ndarray of float64, shape (n_bootstraps, n_sets, n_models)
        Mean over the sample's subjects (with their multiplicity) of each model's
        comparison; NaN for samples with fewer than 3 distinct stimuli.
    """
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    models = np.atleast_2d(np.asarray(model_rdms, dtype=np.float64))
    data = np.asarray(data_rdms, dtype=np.float64)
    subjects = np.asarray(subjects, dtype=np.intp)
    stimuli = np.asarray(stimuli, dtype=np.intp)
    if data.ndim != 3 or data.shape[2] != models.shape[1]:
        raise ValueError(
            "`data_rdms` must have shape (n_sets, n_subjects, n_pairs) with the n_pairs of "
            f"`model_rdms` {models.shape}, got {data.shape} instead."
        )
    n_sets, n_sub, n_pairs = data.shape
    n_stimuli = n_conditions(n_pairs)
    if (
        subjects.ndim != 2
        or subjects.shape[1] != n_sub
        or stimuli.shape
        != (
            subjects.shape[0],
            n_stimuli,
        )
    ):
        raise ValueError(
            f"`subjects` and `stimuli` must have shapes (n_bootstraps, {n_sub}) and "
            f"(n_bootstraps, {n_stimuli}), got {subjects.shape} and {stimuli.shape} instead."
        )
    n_boot = subjects.shape[0]
    # multiplicity of each subject in each sample, as weights of the subject mean
    sub_weights = np.stack([np.bincount(s, minlength=n_sub) for s in subjects]) / n_sub
    samples = np.full((n_boot, n_sets, models.shape[0]), np.nan)
    if (stimuli == np.arange(n_stimuli)).all():
        # every stimulus kept: one comparison per subject, averaged per sample
        for k in range(n_sets):
            per_subject = compare_rdms(models, data[k], method=method)  # (model, subject)
            samples[:, k] = sub_weights @ per_subject.T
        return samples
    finite = np.isfinite(models).all() and np.isfinite(data).all()
    if method in ("spearman", "corr") and finite:
        per_set = n_sub * n_pairs * 8 * (6 if method == "spearman" else 3)
        step = max(1, BLOCK_BYTES // per_set)
        for start in range(0, n_sets, step):
            block = data[start : start + step]
            rows = block.reshape(-1, n_pairs)
            sims = _block_samples_fast(models, rows, stimuli, n_stimuli, method)
            sims = sims.reshape(n_boot, block.shape[0], n_sub, -1)
            samples[:, start : start + step] = np.einsum("bksm,bs->bkm", sims, sub_weights)
        return samples
    for b in range(n_boot):
        if np.unique(stimuli[b]).size < 3:
            continue
        pairs = resampled_pairs(stimuli[b], n_stimuli)
        for k in range(n_sets):
            samples[b, k] = _evaluate(models[:, pairs], data[k][subjects[b]][:, pairs], method)
    return samples

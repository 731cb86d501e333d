"""Does a model predict a subject's RDM as well as the other subjects do?

The subject-as-model baseline takes, for each subject and ROI, the pooled RDM of all
the other subjects as the "model" of that subject; averaged over subjects it is the
lower noise ceiling (Nili et al., 2014), and the pooling is rsatoolbox's (ranks averaged
for rank comparisons, standardised RDMs for correlations), so that the two agree. A
computational model is then compared with it subject by subject: the paired
differences ``model - baseline`` say whether the model falls short of, matches or
exceeds what one group of brains predicts of another.

"Matches" is an equivalence claim and needs its own test: two one-sided tests (TOST,
Schuirmann, 1987) of the mean paired difference against ``-margin`` and ``+margin``;
the model is declared equivalent when both reject (``p = max`` of the two). By default
the margin of each ROI is the between-subject SD of the baseline, the spread of one
subject predicting the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .compare import COMPARISONS, compare_rdms, rsatoolbox_rdms

__all__ = ["SubjectBaseline", "baseline_equivalence", "subject_model_equivalence", "tost_paired"]


@dataclass(frozen=True)
class SubjectBaseline:
    """Models against the subject-as-model baseline, per ROI.

    Attributes
    ----------
    subject_scores : ndarray of float64, shape (n_subjects, n_rois)
        Similarity of each subject's RDM with the pooled RDM of the other subjects.
    model_scores : ndarray of float64, shape (n_models, n_subjects, n_rois)
        Similarity of each model's RDM with each subject's RDM.
    difference : ndarray of float64, shape (n_models, n_rois)
        Mean over subjects of ``model_scores - subject_scores``.
    margin : ndarray of float64, shape (n_rois,)
        Equivalence margin used.
    p_equivalent : ndarray of float64, shape (n_models, n_rois)
        TOST p-value (small: within the margin of the baseline).
    p_different : ndarray of float64, shape (n_models, n_rois)
        Two-sided paired t-test p-value of a non-zero difference.
    equivalent : ndarray of bool, shape (n_models, n_rois)
        ``p_equivalent < alpha``.
    """

    subject_scores: np.ndarray
    model_scores: np.ndarray
    difference: np.ndarray
    margin: np.ndarray
    p_equivalent: np.ndarray
    p_different: np.ndarray
    equivalent: np.ndarray


def tost_paired(
    differences: np.ndarray, margin: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two one-sided t-tests of paired differences against ``[-margin, +margin]``.

    Parameters
    ----------
    differences : array-like, shape (n_pairs, ...)
        Paired differences (first axis: subjects).
    margin : float or array-like broadcastable to ``differences.shape[1:]``
        Equivalence margin (> 0).

    Returns
    -------
    p_equivalent : ndarray of float64, shape ``differences.shape[1:]``
        The larger of the two one-sided p-values.
    p_different : ndarray of float64, shape ``differences.shape[1:]``
        Two-sided one-sample t-test of a zero mean difference.
    """
    from scipy.stats import ttest_1samp

    d = np.asarray(differences, dtype=np.float64)
    margin = np.asarray(margin, dtype=np.float64)
    if d.shape[0] < 2:
        raise ValueError(f"`differences` must hold at least 2 pairs, got {d.shape[0]} instead.")
    if np.any(~(margin > 0)):
        raise ValueError(f"`margin` must be positive, got {margin} instead.")
    above = ttest_1samp(d + margin, 0.0, axis=0, alternative="greater").pvalue
    below = ttest_1samp(d - margin, 0.0, axis=0, alternative="less").pvalue
    return np.maximum(above, below), ttest_1samp(d, 0.0, axis=0).pvalue


def subject_model_equivalence(
    roi_rdms: np.ndarray,
    model_rdms: np.ndarray,
    *,
    method: str = "spearman",
    margin: float | Sequence[float] | None = None,
    alpha: float = 0.05,
) -> SubjectBaseline:
    """Compare models with the subject-as-model baseline in every ROI.

    Parameters
    ----------
    roi_rdms : array-like, shape (n_subjects, n_rois, n_pairs)
        Condensed brain RDMs, at least 3 subjects.
    model_rdms : array-like, shape (n_models, n_pairs)
        Condensed model RDMs (e.g. each model's best layer).
    method : {"spearman", "corr", "tau-a", "cosine_cov"}
        RDM comparison.
    margin : float, sequence of float (one per ROI), or None
        Equivalence margin; None: the between-subject SD (``ddof=1``) of the baseline
        in each ROI.
    alpha : float
        Level of the equivalence decision.

    Returns
    -------
    result : SubjectBaseline
    """
    if method not in COMPARISONS:
        raise ValueError(
            f"`method` must be one of {', '.join(COMPARISONS)}, got {method!r} instead."
        )
    rdms = np.asarray(roi_rdms, dtype=np.float64)
    models = np.atleast_2d(np.asarray(model_rdms, dtype=np.float64))
    if rdms.ndim != 3 or models.ndim != 2 or rdms.shape[2] != models.shape[1]:
        raise ValueError(
            "`roi_rdms` (n_subjects, n_rois, n_pairs) and `model_rdms` (n_models, n_pairs) "
            f"must share n_pairs, got {rdms.shape} and {models.shape} instead."
        )
    n_sub, n_roi = rdms.shape[:2]
    if n_sub < 3:
        raise ValueError(
            f"`roi_rdms` must hold at least 3 subjects for a subject baseline, got {n_sub} instead."
        )
    from rsatoolbox.util.inference_util import pool_rdm

    subject_scores = np.empty((n_sub, n_roi))
    model_scores = np.empty((models.shape[0], n_sub, n_roi))
    for s in range(n_sub):
        others = np.delete(rdms, s, axis=0)
        for r in range(n_roi):
            pooled = pool_rdm(rsatoolbox_rdms(others[:, r]), method=method).get_vectors()
            subject_scores[s, r] = compare_rdms(pooled, rdms[s, r], method=method)[0, 0]
        model_scores[:, s, :] = compare_rdms(models, rdms[s], method=method)
    return baseline_equivalence(model_scores, subject_scores, margin, alpha)


def baseline_equivalence(
    model_scores: np.ndarray,
    subject_scores: np.ndarray,
    margin: float | Sequence[float] | None,
    alpha: float,
) -> SubjectBaseline:
    """Paired equivalence of models' scores with the subject-as-model baseline.

    Parameters
    ----------
    model_scores : ndarray, shape (n_models, n_subjects, n_rois)
        Score of each model for each subject and region.
    subject_scores : ndarray, shape (n_subjects, n_rois)
        Baseline score of each subject and region.
    margin : float, sequence of float (one per ROI), or None
        Equivalence margin (> 0); None: the between-subject SD (``ddof=1``) of the
        baseline in each region.
    alpha : float
        Level of the equivalence decision.

    Returns
    -------
    result : SubjectBaseline
    """
    n_roi = subject_scores.shape[1]
    if margin is None:
        margins = subject_scores.std(axis=0, ddof=1)
    else:
        try:
            margins = np.broadcast_to(np.asarray(margin, dtype=np.float64), (n_roi,)).copy()
        except ValueError:
            raise ValueError(
                f"`margin` must be a float or one value per ROI ({n_roi}), got {margin!r} instead."
            ) from None
    diff = model_scores - subject_scores[None]
    p_eq, p_diff = tost_paired(np.moveaxis(diff, 1, 0), margins)
    return SubjectBaseline(
        subject_scores=subject_scores,
        model_scores=model_scores,
        difference=diff.mean(axis=1),
        margin=margins,
        p_equivalent=p_eq,
        p_different=p_diff,
        equivalent=p_eq < alpha,
    )

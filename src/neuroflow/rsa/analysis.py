"""Cross-temporal RSA and ROI × ROI alignment patterns.

Cross-temporal RSA compares every model layer's RDM with the brain RDM at every EEG
time point, giving a (layer, time) map whose peaks show when each layer's geometry is
expressed. ROI × ROI alignment patterns compare brain regions with one another (the
similarity of their RDMs); a model reproduces the pattern when the layers that best
match each region relate to one another as the regions do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compare import compare_rdms

__all__ = [
    "AlignmentResult",
    "alignment_patterns",
    "cross_temporal_rsa",
    "roi_alignment",
    "upper_triangle",
]


def cross_temporal_rsa(
    layer_rdms: np.ndarray, brain_rdms: np.ndarray, *, method: str = "spearman"
) -> np.ndarray:
    """Similarity of every layer RDM with the brain RDM at every time point.

    Parameters
    ----------
    layer_rdms : array-like, shape (n_layers, n_pairs)
        Condensed model RDMs.
    brain_rdms : array-like, shape (n_times, n_pairs)
        Condensed brain RDMs per time point.
    method : str
        See :func:`~neuroflow.rsa.compare.compare_rdms`.

    Returns
    -------
    sim : ndarray of float64, shape (n_layers, n_times)
    """
    return compare_rdms(layer_rdms, brain_rdms, method=method)


def roi_alignment(roi_rdms: np.ndarray, *, method: str = "spearman") -> np.ndarray:
    """Similarity between the RDMs of every pair of regions.

    Parameters
    ----------
    roi_rdms : array-like, shape (n_rois, n_pairs)
        Condensed RDMs per ROI.
    method : str
        See :func:`~neuroflow.rsa.compare.compare_rdms`.

    Returns
    -------
    pattern : ndarray of float64, shape (n_rois, n_rois)
        Symmetric, ones on the diagonal for correlation-type methods.
    """
    return compare_rdms(roi_rdms, roi_rdms, method=method)


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """Entries above the diagonal of the last two axes, shape (..., n (n - 1) / 2)."""
    matrix = np.asarray(matrix)
    i, j = np.triu_indices(matrix.shape[-1], k=1)
    return matrix[..., i, j]


@dataclass
class AlignmentResult:
    """ROI × ROI alignment of brains and a model.

    Attributes
    ----------
    brain : ndarray, shape (n_subjects, n_rois, n_rois)
        Per-subject brain alignment patterns.
    brain_mean, brain_sd : ndarray, shape (n_rois, n_rois)
        Mean and between-subject SD (``ddof=1``; NaN for one subject).
    roi_layer : ndarray, shape (n_rois, n_layers)
        Group-mean similarity of each ROI's RDM with each layer's RDM.
    best_layer : ndarray of int, shape (n_rois,)
        Layer that best matches each ROI.
    model : ndarray, shape (n_rois, n_rois)
        Similarity between the best layers of every pair of ROIs.
    agreement : float
        Spearman correlation between the upper triangles of ``brain_mean`` and ``model``
        (NaN with fewer than 3 ROIs).
    subject_agreement : ndarray, shape (n_subjects,)
        The same for each subject's pattern.
    between_subject : float
        Mean Spearman correlation between the upper triangles of every pair of subjects
        (NaN for one subject or fewer than 3 ROIs).
    """

    brain: np.ndarray
    brain_mean: np.ndarray
    brain_sd: np.ndarray
    roi_layer: np.ndarray
    best_layer: np.ndarray
    model: np.ndarray
    agreement: float
    subject_agreement: np.ndarray
    between_subject: float


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.shape[-1] < 3:
        return np.full((a.shape[0], b.shape[0]), np.nan)
    return compare_rdms(a, b, method="spearman")


def alignment_patterns(
    roi_rdms: np.ndarray, layer_rdms: np.ndarray, *, method: str = "spearman"
) -> AlignmentResult:
    """ROI × ROI alignment patterns of subjects and of one model's layers.

    Parameters
    ----------
    roi_rdms : array-like, shape (n_subjects, n_rois, n_pairs)
        Condensed brain RDMs.
    layer_rdms : array-like, shape (n_layers, n_pairs)
        Condensed RDMs of the model's layers.
    method : str
        RDM comparison (see :func:`~neuroflow.rsa.compare.compare_rdms`).

    Returns
    -------
    result : AlignmentResult
    """
    roi_rdms = np.asarray(roi_rdms, dtype=np.float64)
    layer_rdms = np.asarray(layer_rdms, dtype=np.float64)
    if roi_rdms.ndim != 3 or layer_rdms.ndim != 2 or roi_rdms.shape[2] != layer_rdms.shape[1]:
        raise ValueError(
            "`roi_rdms` (n_subjects, n_rois, n_pairs) and `layer_rdms` (n_layers, n_pairs) "
            f"must share n_pairs, got {roi_rdms.shape} and {layer_rdms.shape} instead."
        )
    brain = np.stack([roi_alignment(s, method=method) for s in roi_rdms])
    n_sub = brain.shape[0]
    brain_mean = brain.mean(axis=0)
    brain_sd = brain.std(axis=0, ddof=1) if n_sub > 1 else np.full(brain_mean.shape, np.nan)
    roi_layer = np.mean([compare_rdms(s, layer_rdms, method=method) for s in roi_rdms], axis=0)
    best = np.nanargmax(roi_layer, axis=1)
    layers = compare_rdms(layer_rdms, layer_rdms, method=method)
    model = layers[np.ix_(best, best)]
    ut_model = upper_triangle(model)[None]
    ut_subjects = upper_triangle(brain)
    agreement = float(_spearman_rows(upper_triangle(brain_mean)[None], ut_model)[0, 0])
    subject_agreement = _spearman_rows(ut_subjects, ut_model)[:, 0]
    if n_sub > 1:
        pair = _spearman_rows(ut_subjects, ut_subjects)
        between = float(np.nanmean(upper_triangle(pair)))
    else:
        between = float("nan")
    return AlignmentResult(
        brain=brain,
        brain_mean=brain_mean,
        brain_sd=brain_sd,
        roi_layer=roi_layer,
        best_layer=best,
        model=model,
        agreement=agreement,
        subject_agreement=subject_agreement,
        between_subject=between,
    )

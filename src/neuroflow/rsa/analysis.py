"""Cross-temporal RSA and ROI × ROI alignment patterns.

Cross-temporal RSA compares every model layer's RDM with the brain RDM at every EEG
time point, giving a (layer, time) map whose peaks show when each layer's geometry is
expressed; for video or audio, frame-level model RDMs (model time) against EEG RDMs
(brain time) give a (layer, model time, brain time) map and the model-to-brain time
correspondence (:func:`model_time_rsa`). ROI × ROI alignment patterns compare brain
regions with one another (the similarity of their RDMs); a model reproduces the pattern
when the layers that best match each region relate to one another as the regions do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuroflow.peaks import post_stimulus

from .compare import compare_rdms

__all__ = [
    "AlignmentResult",
    "ModelTimeResult",
    "alignment_patterns",
    "cross_temporal_rsa",
    "model_time_peaks",
    "model_time_rsa",
    "pattern_agreement",
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
        ``1 - mean |brain_mean - model|`` over the ROI pairs (upper triangles): 1 when
        the model reproduces the brain pattern exactly, lower the further apart they
        are. Unlike a correlation between the two patterns it is defined when either
        pattern is constant, e.g. when a model has a single layer (its pattern is then
        all ones: it claims every region shares one geometry, and the agreement is the
        mean similarity of the brain's regions), and with only two ROIs.
    subject_agreement : ndarray, shape (n_subjects,)
        The same for each subject's pattern.
    between_subject : float
        The same statistic between the patterns of every pair of subjects, averaged
        (NaN for one subject).
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


def pattern_agreement(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``1 - mean |a_i - b_j|`` between every row of ``a`` and every row of ``b``.

    Parameters
    ----------
    a : array-like, shape (n_a, n_pairs)
        Upper triangles of alignment patterns.
    b : array-like, shape (n_b, n_pairs)
        Upper triangles of alignment patterns.

    Returns
    -------
    agreement : ndarray of float64, shape (n_a, n_b)
        NaN where no pair is finite in both rows.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or a.shape[1] < 1:
        raise ValueError(
            "`a` and `b` must have shape (n, n_pairs >= 1) with the same n_pairs, "
            f"got {a.shape} and {b.shape} instead."
        )
    diff = np.abs(a[:, None, :] - b[None, :, :])
    ok = np.isfinite(diff)
    n = ok.sum(axis=-1)
    total = np.where(ok, diff, 0.0).sum(axis=-1)
    return 1.0 - np.divide(total, n, out=np.full(n.shape, np.nan), where=n > 0)


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
    if ut_model.shape[-1] == 0:
        raise ValueError(f"`roi_rdms` must hold at least 2 ROIs, got {roi_rdms.shape[1]} instead.")
    agreement = float(pattern_agreement(upper_triangle(brain_mean)[None], ut_model)[0, 0])
    subject_agreement = pattern_agreement(ut_subjects, ut_model)[:, 0]
    if n_sub > 1:
        pair = pattern_agreement(ut_subjects, ut_subjects)
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


@dataclass(frozen=True)
class ModelTimeResult:
    """Cross-temporal RSA between model time and brain time.

    Attributes
    ----------
    similarity : ndarray, shape (n_layers, n_model_times, n_brain_times)
        Similarity of each layer's RDM at each model time with the brain RDM at each
        brain time.
    peak : ndarray of int, shape (n_layers, 2)
        (model time, brain time) indices of each layer's maximum over the brain times
        at or after the stimulus onset (``>= 0``; :mod:`neuroflow.peaks`).
    best_brain_time : ndarray of int, shape (n_layers, n_model_times)
        For each model time, the brain time (``>= 0``) that matches it best.
    lag, slope : ndarray, shape (n_layers,)
        Least-squares line ``brain_time = lag + slope * model_time`` through the best
        brain times (in the units of the time axes given): the model-to-brain time
        correspondence; NaN with fewer than 2 model times.
    """

    similarity: np.ndarray
    peak: np.ndarray
    best_brain_time: np.ndarray
    lag: np.ndarray
    slope: np.ndarray


def model_time_rsa(
    layer_rdms: np.ndarray,
    brain_rdms: np.ndarray,
    model_times: np.ndarray,
    brain_times: np.ndarray,
    *,
    method: str = "spearman",
) -> ModelTimeResult:
    """Compare frame-level model RDMs (model time) with EEG RDMs (brain time).

    For video or audio stimuli a model's representation unfolds in its own time (frames,
    audio windows); every (model time, brain time) pair of RDMs is compared, per layer.

    Parameters
    ----------
    layer_rdms : array-like, shape (n_layers, n_model_times, n_pairs)
        Condensed model RDMs over the stimuli at each model time.
    brain_rdms : array-like, shape (n_brain_times, n_pairs)
        Condensed brain RDMs over the same stimuli at each brain time.
    model_times : array-like, shape (n_model_times,)
        Model time of each model RDM (s from stimulus onset).
    brain_times : array-like, shape (n_brain_times,)
        Brain time of each brain RDM (s from stimulus onset).
    method : str
        See :func:`~neuroflow.rsa.compare.compare_rdms`.

    Returns
    -------
    result : ModelTimeResult
    """
    layers = np.asarray(layer_rdms, dtype=np.float64)
    brain = np.asarray(brain_rdms, dtype=np.float64)
    model_times = np.asarray(model_times, dtype=np.float64)
    brain_times = np.asarray(brain_times, dtype=np.float64)
    if layers.ndim != 3 or brain.ndim != 2 or layers.shape[2] != brain.shape[1]:
        raise ValueError(
            "`layer_rdms` (n_layers, n_model_times, n_pairs) and `brain_rdms` (n_brain_times, "
            f"n_pairs) must share n_pairs, got {layers.shape} and {brain.shape} instead."
        )
    if model_times.shape != (layers.shape[1],) or brain_times.shape != (brain.shape[0],):
        raise ValueError(
            f"`model_times` must have shape ({layers.shape[1]},) and `brain_times` "
            f"({brain.shape[0]},), got {model_times.shape} and {brain_times.shape} instead."
        )
    sim = np.stack([compare_rdms(layer, brain, method=method) for layer in layers])
    return model_time_peaks(sim, model_times, brain_times)


def model_time_peaks(
    similarity: np.ndarray, model_times: np.ndarray, brain_times: np.ndarray
) -> ModelTimeResult:
    """Peaks and model-to-brain time line of model time × brain time similarity maps.

    Parameters
    ----------
    similarity : array-like, shape (n_layers, n_model_times, n_brain_times)
        Similarity of each layer's RDM at each model time with the brain RDM at each
        brain time (e.g. the mean over subjects of :func:`model_time_rsa`'s maps).
    model_times : array-like, shape (n_model_times,)
        Model time of each row (s from stimulus onset).
    brain_times : array-like, shape (n_brain_times,)
        Brain time of each column (s from stimulus onset); the columns before the onset
        (the EEG baseline) are never a peak nor a best brain time.

    Returns
    -------
    result : ModelTimeResult
        With ``similarity`` as given.
    """
    sim = np.asarray(similarity, dtype=np.float64)
    model_times = np.asarray(model_times, dtype=np.float64)
    brain_times = np.asarray(brain_times, dtype=np.float64)
    if sim.ndim != 3 or model_times.shape != sim.shape[1:2] or brain_times.shape != sim.shape[2:]:
        raise ValueError(
            "`similarity` (n_layers, n_model_times, n_brain_times), `model_times` "
            "(n_model_times,) and `brain_times` (n_brain_times,) must agree, got "
            f"{sim.shape}, {model_times.shape} and {brain_times.shape} instead."
        )
    after = post_stimulus(brain_times)
    if not after.any():
        raise ValueError(
            "`brain_times` must include a time at or after the stimulus onset (0 s), got "
            f"{brain_times.min():.3g} to {brain_times.max():.3g} s instead."
        )
    # an undefined similarity, or one of the baseline, is never the best
    ranked = np.where(after, np.nan_to_num(sim, nan=-np.inf), -np.inf)
    flat = ranked.reshape(sim.shape[0], -1)
    peak = np.stack(np.unravel_index(flat.argmax(axis=1), sim.shape[1:]), axis=1)
    best = ranked.argmax(axis=2)
    lag = np.full(sim.shape[0], np.nan)
    slope = np.full(sim.shape[0], np.nan)
    if model_times.size >= 2:
        design = np.stack([np.ones_like(model_times), model_times], axis=1)
        coef = np.linalg.lstsq(design, brain_times[best].T, rcond=None)[0]
        lag, slope = coef[0], coef[1]
    return ModelTimeResult(similarity=sim, peak=peak, best_brain_time=best, lag=lag, slope=slope)

"""Representational dissimilarity matrices (RDMs) as condensed vectors.

An RDM over ``n`` conditions is stored as its upper triangle in row-major order (the
order of :func:`scipy.spatial.distance.squareform` and rsatoolbox), ``n (n - 1) / 2``
values. Correlation-distance RDMs are computed here with one matrix product over any
leading axes (time points, ROIs); crossnobis RDMs, which need a noise model and
cross-validation over runs, use rsatoolbox.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "condensed_index",
    "correlation_rdm",
    "crossnobis_rdm",
    "n_conditions",
    "square_rdm",
]


def n_conditions(n_pairs: int) -> int:
    """Number of conditions of a condensed RDM with ``n_pairs`` entries."""
    n = round((1 + np.sqrt(1 + 8 * n_pairs)) / 2)
    if n * (n - 1) // 2 != n_pairs:
        raise ValueError(f"`n_pairs` must be n (n - 1) / 2 for an int n, got {n_pairs} instead.")
    return n


def condensed_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the condensed upper triangle, each shape (n (n - 1) / 2,)."""
    return np.triu_indices(n, k=1)


def square_rdm(vectors: np.ndarray) -> np.ndarray:
    """Square form of condensed RDMs.

    Parameters
    ----------
    vectors : array-like, shape (..., n_pairs)
        Condensed RDMs.

    Returns
    -------
    rdms : ndarray, shape (..., n_conditions, n_conditions)
        Symmetric with a zero diagonal.
    """
    vectors = np.asarray(vectors)
    n = n_conditions(vectors.shape[-1])
    out = np.zeros((*vectors.shape[:-1], n, n), dtype=np.result_type(vectors, np.float64))
    i, j = condensed_index(n)
    out[..., i, j] = vectors
    out[..., j, i] = vectors
    return out


def correlation_rdm(patterns: np.ndarray) -> np.ndarray:
    """Correlation-distance RDMs, ``1 - r`` between condition patterns.

    Parameters
    ----------
    patterns : array-like, shape (..., n_conditions, n_channels)
        One pattern per condition (voxels, channels or model units); leading axes
        (time points, ROIs, layers) give one RDM each.

    Returns
    -------
    rdms : ndarray of float64, shape (..., n_conditions * (n_conditions - 1) / 2)
        Condensed RDMs, equal to ``rsatoolbox.rdm.calc_rdm(..., method="correlation")``
        (computed in float64: one centring pass, one matrix product). Pairs involving
        a constant pattern are NaN.
    """
    patterns = np.asarray(patterns)
    if patterns.ndim < 2 or patterns.shape[-2] < 2:
        raise ValueError(
            "`patterns` must have shape (..., n_conditions >= 2, n_channels), "
            f"got {patterns.shape} instead."
        )
    x = patterns.astype(np.float64)  # a fresh copy, centred in place
    x -= x.mean(axis=-1, keepdims=True)
    gram = x @ np.swapaxes(x, -1, -2)
    norm = np.sqrt(np.diagonal(gram, axis1=-2, axis2=-1))
    i, j = condensed_index(x.shape[-2])
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - gram[..., i, j] / (norm[..., i] * norm[..., j])


def crossnobis_rdm(
    patterns: np.ndarray,
    conditions: Sequence[object] | np.ndarray,
    partitions: Sequence[object] | np.ndarray,
    *,
    shrinkage: str = "shrinkage_diag",
) -> tuple[np.ndarray, np.ndarray]:
    """Cross-validated Mahalanobis (crossnobis) RDM with rsatoolbox.

    The noise precision is estimated from the residuals of each observation around its
    condition mean within its partition (run or session), shrunk toward the diagonal.

    Parameters
    ----------
    patterns : array-like, shape (n_observations, n_channels)
        One row per condition × partition (or per trial).
    conditions : array-like, shape (n_observations,)
        Condition (stimulus) of each row; every condition needs rows in at least two
        partitions.
    partitions : array-like, shape (n_observations,)
        Cross-validation unit (run, session, repeat) of each row.
    shrinkage : {"shrinkage_diag", "shrinkage_eye", "diag", "full"}
        rsatoolbox's noise-covariance estimator.

    Returns
    -------
    rdm : ndarray of float64, shape (n_conditions * (n_conditions - 1) / 2,)
        Condensed crossnobis RDM (unbiased; can be negative).
    ids : ndarray, shape (n_conditions,)
        Conditions in RDM order (sorted).
    """
    from rsatoolbox.data import Dataset
    from rsatoolbox.data.noise import prec_from_residuals
    from rsatoolbox.rdm import calc_rdm

    patterns = np.asarray(patterns, dtype=np.float64)
    conditions = np.asarray(conditions).astype(str)
    partitions = np.asarray(partitions).astype(str)
    n = patterns.shape[0]
    if patterns.ndim != 2 or conditions.shape != (n,) or partitions.shape != (n,):
        raise ValueError(
            "`patterns` (n_observations, n_channels), `conditions` and `partitions` "
            f"(n_observations,) must agree, got {patterns.shape}, {conditions.shape} and "
            f"{partitions.shape} instead."
        )
    ids = np.unique(conditions)
    for c in ids:
        if np.unique(partitions[conditions == c]).size < 2:
            raise ValueError(
                f"crossnobis needs every condition in at least 2 partitions, got condition "
                f"{c!r} in {np.unique(partitions[conditions == c]).tolist()} only."
            )
    # one cell per (partition, condition) pair, from the two labels' integer codes
    _, part_code = np.unique(partitions, return_inverse=True)
    _, cond_code = np.unique(conditions, return_inverse=True)
    pairs = np.stack([part_code.ravel(), cond_code.ravel()], axis=1)
    _, cell = np.unique(pairs, axis=0, return_inverse=True)
    cell = cell.ravel()
    cell_mean = np.zeros((cell.max() + 1, patterns.shape[1]))
    np.add.at(cell_mean, cell, patterns)
    cell_mean /= np.bincount(cell)[:, None]
    residuals = patterns - cell_mean[cell]
    dof = max(n - (cell.max() + 1), 1)
    if dof <= 1:
        # one row per condition × partition: residuals around the across-partition mean
        _, ci = np.unique(conditions, return_inverse=True)
        cm = np.zeros((ids.size, patterns.shape[1]))
        np.add.at(cm, ci, patterns)
        cm /= np.bincount(ci)[:, None]
        residuals = patterns - cm[ci]
        dof = max(n - ids.size, 1)
    noise = prec_from_residuals(residuals, dof=dof, method=shrinkage)
    ds = Dataset(patterns, obs_descriptors={"conds": conditions, "runs": partitions})
    rdm = calc_rdm(ds, method="crossnobis", descriptor="conds", cv_descriptor="runs", noise=noise)
    order = np.asarray(rdm.pattern_descriptors["conds"]).astype(str)
    vec = rdm.get_vectors()[0]
    if not np.array_equal(order, ids):
        pos = {c: i for i, c in enumerate(order)}
        idx = [pos[c] for c in ids]
        i, j = condensed_index(ids.size)
        vec = square_rdm(vec)[np.ix_(idx, idx)][i, j]
    return vec.astype(np.float64), ids

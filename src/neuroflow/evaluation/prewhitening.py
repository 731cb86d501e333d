"""Time courses made fit for a re-alignment permutation test: AR prewhitening and the
widening of the null that a cleaning's projection calls for.

- :func:`ar_prewhiten` filters each target's observation and prediction with a
  Yule-Walker AR model of the observation, whose autocovariances are first corrected
  for the nuisance basis the cleaning projected out (:func:`projected_lag_matrix`, as
  fmristat does; Worsley et al., 2002);
- :func:`whitened_basis` is that nuisance basis (with the constant) on the rows
  whitening keeps;
- :func:`null_widening` is the factor by which re-aligning a cleaned prediction
  narrows its null, to widen the null correlations by.

:func:`neuroflow.evaluation.significance.permutation_inference` uses them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from neuroflow.evaluation.permutation import valid_shifts

__all__ = ["ar_prewhiten", "null_widening", "projected_lag_matrix", "whitened_basis"]


def _shift(z: np.ndarray, lag: int, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """``S_lag z`` within segments: row ``t`` holds ``z[t + lag]`` (0 past a segment's end)."""
    out = np.zeros_like(z)
    for start, stop in bounds:
        if stop - start > lag:
            out[start : stop - lag] = z[start + lag : stop]
    return out


def _shift_back(z: np.ndarray, lag: int, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    """``S_lagᵀ z`` within segments: row ``t`` holds ``z[t - lag]``."""
    out = np.zeros_like(z)
    for start, stop in bounds:
        if stop - start > lag:
            out[start + lag : stop] = z[start : stop - lag]
    return out


def _bounds(segments: Sequence[int], n_times: int) -> list[tuple[int, int]]:
    lengths = [int(v) for v in segments]
    if any(v < 1 for v in lengths) or sum(lengths) != n_times:
        raise ValueError(
            f"`segments` must be positive lengths that sum to n_times ({n_times}), got "
            f"{lengths} instead."
        )
    edges = np.cumsum([0, *lengths])
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


def projected_lag_matrix(
    basis: np.ndarray, order: int, segments: Sequence[int] | None = None
) -> np.ndarray:
    """How projecting out a basis biases the lagged sums of products of a time series.

    With ``M = I - Q Qᵀ`` and a stationary series of autocovariances ``γ_j`` (0 beyond
    lag ``order``), the lag-``l`` sum of products of ``M y`` has expectation
    ``sum_j C[l, j] γ_j`` with ``C[l, j] = tr(M S_l M T_j)`` (``S_l``: lag-``l`` shift,
    ``T_j = S_j + S_jᵀ``, ``T_0 = I``, all within segments). Solving ``C γ = a`` for the
    observed sums ``a`` corrects the autocorrelation estimates of cleaned series, as
    fmristat does (Worsley et al., 2002): the projection otherwise makes them too small
    (or negative), and whitening with them leaves the null too narrow.

    Parameters
    ----------
    basis : ndarray, shape (n_times, n_nuisance)
        Orthonormal columns projected out of the series.
    order : int
        Largest lag.
    segments : sequence of int | None
        Lengths of the runs the series concatenates (lags never cross them); ``None``:
        one run.

    Returns
    -------
    C : ndarray, shape (order + 1, order + 1)
    """
    q = np.asarray(basis, dtype=np.float64)
    n_times = q.shape[0]
    bounds = _bounds(segments if segments is not None else [n_times], n_times)
    lengths = [b - a for a, b in bounds]

    def sym(z: np.ndarray, j: int) -> np.ndarray:
        return z if j == 0 else _shift(z, j, bounds) + _shift_back(z, j, bounds)

    c = np.zeros((order + 1, order + 1))
    for lag in range(order + 1):
        s_q = _shift(q, lag, bounds)  # S_l Q
        st_q = _shift_back(q, lag, bounds)  # S_lᵀ Q
        qsq = q.T @ s_q  # Qᵀ S_l Q
        for j in range(order + 1):
            t_q = sym(q, j)  # T_j Q
            trace_ab = sum(max(0, n - lag) for n in lengths) if j == lag else 0.0
            # tr(P S_l T_j) = tr(Qᵀ S_l T_j Q); tr(S_l P T_j) = tr(Qᵀ T_j S_l Q)
            c[lag, j] = (
                trace_ab
                - float(np.sum(st_q * t_q))
                - float(np.sum(q * sym(s_q, j)))
                + float(np.sum(qsq * (q.T @ t_q).T))
            )
    return c


def ar_prewhiten(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    order: int,
    *,
    nuisance: np.ndarray | None = None,
    segments: Sequence[int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Filter both time courses with an AR model of each observed time course.

    A Yule–Walker AR(``order``) model is fitted to every target's observed time
    course (mean removed, biased autocovariances, so the model is stable) and its
    whitening filter ``e_t = y_t - sum_l a_l y_(t-l)`` is applied to the observation
    and to the prediction of that target. Under the null (prediction unrelated to the
    data) the whitened observation is close to white noise, so re-aligning blocks of it
    no longer breaks the autocovariance that crosses block boundaries: the permutation
    null keeps its nominal error rate even when both time courses are smooth (as
    HRF-convolved predictions and BOLD noise are).

    Parameters
    ----------
    y_true, y_pred : ndarray, shape (n_times, n_targets)
        Observations and predictions.
    order : int
        AR order (0 returns the inputs, centred).
    nuisance : ndarray, shape (n_times, n_nuisance) | None
        Orthonormal basis the cleaning projected out of the observations: the
        autocovariances are corrected for it (:func:`projected_lag_matrix`) before the
        AR model is solved. ``None``: no correction.
    segments : sequence of int | None
        Lengths of the runs the time courses concatenate: lags are taken, and the
        filter applied, within each (its first ``order`` samples are dropped).
        ``None``: one run.

    Returns
    -------
    y_true_w, y_pred_w : ndarray of float64, shape (n_times - order * n_segments, n_targets)
    """
    if isinstance(order, bool) or not isinstance(order, int | np.integer) or order < 0:
        raise ValueError(f"`order` must be a non-negative int, got {order!r} instead.")
    yc = np.asarray(y_true, dtype=np.float64)
    pc = np.asarray(y_pred, dtype=np.float64)
    yc = yc - yc.mean(axis=0)
    pc = pc - pc.mean(axis=0)
    n_times = yc.shape[0]
    if order == 0:
        return yc, pc
    if n_times < order + 4:
        raise ValueError(
            f"`order` must leave at least 4 time points, got {order} for {n_times} instead."
        )
    bounds = _bounds(segments if segments is not None else [n_times], n_times)
    if min(b - a for a, b in bounds) < order + 2:
        raise ValueError(
            f"`order` must leave at least 2 samples in every segment, got {order} for "
            f"segments of {[b - a for a, b in bounds]} samples instead."
        )
    # lagged sums of products within each run (views: no copy of the whole matrix)
    acov = np.zeros((order + 1, yc.shape[1]))
    for lag in range(order + 1):
        for start, stop in bounds:
            acov[lag] += np.einsum("tv,tv->v", yc[start : stop - lag], yc[start + lag : stop])
    if nuisance is not None:
        c = projected_lag_matrix(nuisance, order, segments)
        corrected = np.linalg.solve(c, acov)
        # keep the correction where it gives a positive variance and a stable model
        good = (corrected[0] > 0) & np.all(np.abs(corrected[1:]) < corrected[0], axis=0)
        acov = np.where(good, corrected, acov)
    lags = np.abs(np.subtract.outer(np.arange(order), np.arange(order)))
    toeplitz = np.moveaxis(acov[lags], -1, 0)  # (n_targets, order, order)
    ok = acov[0] > 0
    coefs = np.zeros((yc.shape[1], order))
    if ok.any():
        coefs[ok] = np.linalg.solve(toeplitz[ok], acov[1:, ok].T[..., None])[..., 0]
    # e_t = y_t - sum_l a_l y_(t-l) within each run, its first `order` samples dropped
    n_out = n_times - order * len(bounds)
    yw = np.empty((n_out, yc.shape[1]))
    pw = np.empty((n_out, pc.shape[1]))
    row = 0
    for start, stop in bounds:
        rows = slice(row, row + stop - start - order)
        yw[rows] = yc[start + order : stop]
        pw[rows] = pc[start + order : stop]
        for lag in range(1, order + 1):
            yw[rows] -= coefs[:, lag - 1] * yc[start + order - lag : stop - lag]
            pw[rows] -= coefs[:, lag - 1] * pc[start + order - lag : stop - lag]
        row = rows.stop
    return yw, pw


def _check_nuisance_rank(n_times: int, nuisance_rank: int) -> None:
    """Refuse a nuisance basis that leaves fewer than 3 time points of freedom."""
    if nuisance_rank > n_times - 3:
        raise ValueError(
            f"`nuisance` must leave at least 3 of the {n_times} (whitened) time points, "
            f"got {nuisance_rank} columns instead."
        )


def whitened_basis(
    nuisance: np.ndarray, order: int, segments: Sequence[int] | None = None
) -> np.ndarray:
    """Orthonormal basis of the nuisance and the constant on the rows whitening keeps.

    Parameters
    ----------
    nuisance : ndarray, shape (n_times, n_nuisance)
        Basis the cleaning projected out of the time courses.
    order : int
        AR order of :func:`ar_prewhiten` (0: no whitening, every row kept).
    segments : sequence of int | None
        Lengths of the runs (the first ``order`` samples of each are dropped).

    Returns
    -------
    basis : ndarray of float64, shape (n_times - order * n_segments, rank)
        Orthonormal columns spanning the constant and the kept rows of ``nuisance``.
    """
    nuisance = np.asarray(nuisance, dtype=np.float64)
    n_times = nuisance.shape[0]
    keep = np.ones(n_times, dtype=bool)
    for start, _ in _bounds(segments if segments is not None else [n_times], n_times):
        keep[start : start + order] = False
    rows = np.column_stack([np.ones(int(keep.sum())), nuisance[keep]])
    u, s, _ = np.linalg.svd(rows, full_matrices=False)
    return u[:, s > 1e-8 * s[0]]


def _expected_block_projection(p: np.ndarray, basis: np.ndarray, block_length: int) -> np.ndarray:
    """``E_π |Qᵀ p_π|²`` over uniformly random orders of the complete blocks.

    Block ``b`` of ``p_π`` is block ``π(b)`` of ``p``; a trailing incomplete block stays.
    With ``P_c`` the blocks of ``p``, ``S = sum_c P_c``, ``A = sum_b Q_b Q_bᵀ`` and
    ``T = (sum_b Q_b)(sum_b Q_b)ᵀ``: the diagonal pairs give ``sum_c P_cᵀ A P_c / B``, the
    others ``(Sᵀ (T - A) S - sum_c P_cᵀ (T - A) P_c) / (B (B - 1))``.
    """
    n_times, n_targets = p.shape
    n_blocks = n_times // block_length
    used = n_blocks * block_length
    blocks = p[:used].reshape(n_blocks, block_length, n_targets)
    q_blocks = basis[:used].reshape(n_blocks, block_length, -1)
    a = np.einsum("blk,bmk->lm", q_blocks, q_blocks)
    q_sum = q_blocks.sum(axis=0)
    off = q_sum @ q_sum.T - a
    total = blocks.sum(axis=0)
    diag_a = np.einsum("clv,lm,cmv->v", blocks, a, blocks, optimize=True)
    diag_off = np.einsum("clv,lm,cmv->v", blocks, off, blocks, optimize=True)
    cross = np.einsum("lv,lm,mv->v", total, off, total, optimize=True)
    second = diag_a / n_blocks + (cross - diag_off) / (n_blocks * (n_blocks - 1))
    fixed = basis[used:].T @ p[used:]  # (rank, n_targets)
    mean = q_sum.T @ total / n_blocks
    return second + 2.0 * (fixed * mean).sum(axis=0) + (fixed * fixed).sum(axis=0)


def _expected_shift_projection(p: np.ndarray, basis: np.ndarray, min_shift: int) -> np.ndarray:
    """``E_s |Qᵀ roll(p, s)|²`` over the admissible circular shifts, via FFT."""
    n_times = p.shape[0]
    shifts = valid_shifts(n_times, min_shift)
    spec_p = np.fft.rfft(p, axis=0)  # (n_freq, n_targets)
    spec_q = np.conj(np.fft.rfft(basis, axis=0))  # (n_freq, rank)
    total = np.zeros(p.shape[1])
    for j in range(basis.shape[1]):
        lagged = np.fft.irfft(spec_q[:, j, None] * spec_p, n=n_times, axis=0)[shifts]
        total += (lagged**2).mean(axis=0)
    return total


def null_widening(
    y_pred: np.ndarray,
    basis: np.ndarray,
    *,
    method: str = "block",
    block_length: int = 10,
) -> np.ndarray:
    """Factor on each target's null correlations for a projected-out nuisance basis.

    Cleaned observations vary only outside the basis ``Q`` (``M = I - Q Qᵀ``): under the
    null their correlation with a prediction ``p`` has variance ``|M p|² / (|p|² (n -
    k))``, with a re-aligned prediction ``p_π`` the variance ``|M p_π|² / (|p|² (n -
    k))``. Re-aligning moves a cleaned prediction back into the basis, the more so the
    smoother it is (drifts and motion are slow, as HRF-convolved predictions are), so
    the null is too narrow by ``sqrt(|M p|² / E_π |M p_π|²)``: the factor returned,
    the expectation taken exactly over the re-alignments of ``method``. For white
    predictions in the complement it is ``sqrt((n - 1) / (n - k))``.

    Parameters
    ----------
    y_pred : ndarray, shape (n_times, n_targets)
        Predictions, as tested.
    basis : ndarray, shape (n_times, rank)
        Orthonormal basis projected out of the observations, the constant included
        (:func:`whitened_basis`).
    method : ``"block"`` | ``"circular_shift"``
        Re-alignment of :func:`~neuroflow.evaluation.permutation.permutation_null`.
    block_length : int
        Its block length or smallest shift, in samples.

    Returns
    -------
    widen : ndarray of float64, shape (n_targets,)
        Usually above 1 (below 1 where re-aligning takes a prediction out of the
        basis, as for an uncleaned one); 1 where the prediction is constant or lies in
        the basis.
    """
    p = np.asarray(y_pred, dtype=np.float64)
    p = p - p.mean(axis=0)
    norm = (p * p).sum(axis=0)
    observed = norm - ((basis.T @ p) ** 2).sum(axis=0)
    if method == "block":
        expected = norm - _expected_block_projection(p, basis, block_length)
    else:
        expected = norm - _expected_shift_projection(p, basis, block_length)
    ok = (observed > 1e-12 * norm) & (expected > 1e-12 * norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, np.sqrt(observed / np.where(ok, expected, 1.0)), 1.0)

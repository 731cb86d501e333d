"""Temporal cleaning of (time, voxel) fMRI signals as one orthogonal projection.

Detrending, cosine high-pass filtering and confound regression are all linear
regressions on the time axis. Rather than applying them one after the other
(nilearn's :func:`nilearn.signal.clean` detrends voxel by voxel, then projects
confounds through a time × time matrix), :func:`clean_signals` stacks every
nuisance regressor into one design ``X = [polynomials, cosines, confounds]``,
takes an orthonormal basis ``Q`` of its column space (pivoted QR) and computes
``Y - Q (Qᵀ Y)`` in voxel blocks, in place, with two thin matrix products.

Equivalence with nilearn
------------------------
With ``detrend_order=1``, ``high_pass`` set and ``filter="cosine"`` the result
equals ``nilearn.signal.clean(Y, detrend=True, filter="cosine", high_pass=...,
t_r=..., confounds=C, standardize="zscore_sample")``:

* nilearn appends the DCT-II drifts of
  :func:`nilearn.signal.create_cosine_drift` (without its constant) to the
  confounds, removes the mean and linear trend of signals *and* confounds,
  then projects the signals on the orthogonal complement of the (z-scored)
  confounds. Since detrending the confounds only moves them within
  ``span{1, t, C, cosines}``, the residual is the projection of ``Y`` on the
  orthogonal complement of that span, which is what ``Q`` spans here. The
  confounds are therefore "filtered the same way" as the signals, as
  orthogonality with the temporal filters requires (Lindquist et al., 2018).
* z-scoring uses ``ddof=1`` and leaves constant series (std below float64
  eps) at zero, as nilearn's ``"zscore_sample"``.
* nilearn skips its own cosines when a confound correlates above 0.9 with one
  of them; both give the same span in that case only approximately, so the
  results may then differ slightly.

Differences, by design:

* ``detrend_order`` may exceed 1 (Legendre polynomials of time); nilearn only
  removes a linear trend.
* With censored volumes (``sample_mask``) the polynomials are evaluated at the
  real acquisition times of the kept volumes; nilearn detrends against the
  index of the kept samples, as if the gaps were not there, which misfits a
  drift that is linear in time. The cosine drifts are computed on the full run
  and then censored in both. (Scrubbing by spike regressors, the default of
  the stage, keeps every volume and matches nilearn exactly.)
* The Butterworth path (``filter="butterworth"``) detrends by projection, then
  calls :func:`nilearn.signal.butterworth` on signals and confounds alike, then
  projects out the filtered confounds and the constant: nilearn's order of
  operations, and equal to its result (the filter is not a projection, so this
  path cannot be folded into the single projection).
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from nilearn.signal import butterworth, create_cosine_drift

__all__ = [
    "clean_signals",
    "cleaning_basis",
    "cosine_drifts",
    "orthonormal_basis",
    "polynomial_drifts",
    "project_out",
    "zscore",
]

#: Voxels per block in the in-place products (bounded temporaries).
BLOCK_VOXELS = 8192


def polynomial_drifts(frame_times: np.ndarray, order: int) -> np.ndarray:
    """Legendre polynomials of time up to ``order`` (constant included).

    Parameters
    ----------
    frame_times : ndarray, shape (n_times,)
        Acquisition times in seconds.
    order : int
        Highest polynomial degree (0 = constant only).

    Returns
    -------
    drifts : ndarray, shape (n_times, order + 1)
        Column ``d`` is the Legendre polynomial of degree ``d`` on the run's
        time span mapped to [-1, 1].
    """
    if not isinstance(order, int | np.integer) or order < 0:
        raise ValueError(f"`order` must be a non-negative int, got {order!r} instead.")
    t = np.asarray(frame_times, dtype=np.float64)
    span = t[-1] - t[0] if t.size > 1 else 1.0
    x = 2.0 * (t - t[0]) / (span if span > 0 else 1.0) - 1.0
    return np.polynomial.legendre.legvander(x, int(order))


def cosine_drifts(frame_times: np.ndarray, high_pass: float) -> np.ndarray:
    """DCT-II drift regressors of a cosine high-pass filter (no constant).

    Parameters
    ----------
    frame_times : ndarray, shape (n_times,)
        Evenly spaced acquisition times in seconds.
    high_pass : float
        Cutoff frequency in Hz; cosines of lower frequency are returned.

    Returns
    -------
    drifts : ndarray, shape (n_times, n_cosines)
        The regressors of :func:`nilearn.signal.create_cosine_drift`.
    """
    if not high_pass > 0:
        raise ValueError(f"`high_pass` must be a positive float, got {high_pass!r} instead.")
    return create_cosine_drift(float(high_pass), np.asarray(frame_times, float))[:, :-1]


def orthonormal_basis(regressors: np.ndarray, *, rtol: float = 1e-10) -> np.ndarray:
    """Orthonormal basis of the column space of ``regressors``.

    Parameters
    ----------
    regressors : ndarray, shape (n_times, n_regressors)
        Nuisance design; columns may be collinear or constant.
    rtol : float
        Directions whose singular value falls below ``rtol`` times the largest
        are dropped as linearly dependent.

    Returns
    -------
    q : ndarray, shape (n_times, rank)
        Orthonormal columns (float64) spanning the same space.
    """
    x = np.asarray(regressors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"`regressors` must be 2-D, got shape {x.shape} instead.")
    if x.shape[1] == 0:
        return np.zeros((x.shape[0], 0))
    if not np.isfinite(x).all():
        raise ValueError("`regressors` must be finite, got NaN or infinite values instead.")
    norms = np.linalg.norm(x, axis=0)
    keep = norms > 0
    x = x[:, keep] / norms[keep]
    # numpy's LAPACK, the same BLAS as the projections that follow: mixing it with
    # scipy's own OpenBLAS makes two thread pools spin against each other.
    u, sing, _ = np.linalg.svd(x, full_matrices=False)
    if sing.size == 0:
        return u[:, :0]
    return np.ascontiguousarray(u[:, sing > rtol * sing[0]])


def project_out(signals: np.ndarray, basis: np.ndarray, *, block: int = BLOCK_VOXELS) -> None:
    """Remove the span of ``basis`` from every column of ``signals``, in place.

    Parameters
    ----------
    signals : ndarray, shape (n_times, n_voxels)
        Float array, modified in place: ``signals -= basis @ (basis.T @ signals)``.
    basis : ndarray, shape (n_times, rank)
        Orthonormal columns.
    block : int
        Voxels per block, bounding the temporary arrays.
    """
    if basis.shape[1] == 0:
        return
    q = basis.astype(signals.dtype, copy=False)
    qt = np.ascontiguousarray(q.T)
    for start in range(0, signals.shape[1], block):
        part = signals[:, start : start + block]
        part -= q @ (qt @ part)


def zscore(signals: np.ndarray, *, ddof: int = 1, block: int = BLOCK_VOXELS) -> None:
    """Z-score every column of ``signals`` in place.

    Parameters
    ----------
    signals : ndarray, shape (n_times, n_voxels)
        Float array, modified in place.
    ddof : int
        Delta degrees of freedom of the standard deviation (1, as nilearn's
        ``"zscore_sample"``). Columns with a standard deviation below float64
        eps are centred but not scaled.
    block : int
        Voxels per block.
    """
    n = signals.shape[0]
    if n - ddof <= 0:
        raise ValueError(f"z-scoring needs more than {ddof} time points, got {n} instead.")
    eps = np.finfo(np.float64).eps
    for start in range(0, signals.shape[1], block):
        part = signals[:, start : start + block]
        part -= part.mean(axis=0, dtype=np.float64).astype(part.dtype)
        std = np.sqrt(np.einsum("ij,ij->j", part, part, dtype=np.float64) / (n - ddof))
        std[std < eps] = 1.0
        part /= std.astype(part.dtype)


def _center(signals: np.ndarray, *, block: int = BLOCK_VOXELS) -> None:
    """Subtract each column's mean in place.

    Only used before a projection whose basis holds the constant, to shrink a
    large baseline (raw BOLD ~1e3) before float32 products; the projection
    removes whatever rounding leaves, so float32 means suffice.
    """
    for start in range(0, signals.shape[1], block):
        part = signals[:, start : start + block]
        part -= part.mean(axis=0)


def _clean_blocks(
    signals: np.ndarray,
    basis: np.ndarray,
    *,
    out: np.ndarray | None = None,
    center: bool,
    standardize: bool,
    block: int = 512,
) -> None:
    """Centre, project out ``basis`` and z-score ``signals`` (time × voxel) in place.

    The voxels are processed in blocks small enough to stay in the CPU cache:
    each block is read once, centred, projected (``Y - Q (Qᵀ Y)``), z-scored
    and written back, so the data cross main memory twice in all instead of
    once per step. Works on C- and F-ordered arrays. With ``out``, the result
    goes there and ``signals`` is left untouched.
    """
    out = signals if out is None else out
    if not (signals.flags.c_contiguous or signals.flags.f_contiguous):
        raise ValueError("`signals` must be contiguous in memory.")
    n = signals.shape[0]
    q = np.ascontiguousarray(basis, dtype=signals.dtype)
    qt = np.ascontiguousarray(q.T)
    eps = np.finfo(np.float64).eps
    for start in range(0, signals.shape[1], block):
        part = signals[:, start : start + block]
        # (time, voxels) working copy, contiguous and cache-sized
        yb = np.array(part, order="C")
        if center:
            yb -= yb.mean(axis=0)
        if q.shape[1]:
            yb -= q @ (qt @ yb)
        if standardize:
            if not center:
                yb -= yb.mean(axis=0)
            std = np.sqrt(np.einsum("ij,ij->j", yb, yb) / (n - 1))
            std[std < eps] = 1.0
            yb /= std
        target = out[:, start : start + block]
        if not np.shares_memory(yb, target):
            target[...] = yb


def _check_confounds(confounds: np.ndarray | None, n_times: int) -> np.ndarray:
    """Confounds as a float64 (n_times, n_confounds) array."""
    if confounds is None:
        return np.zeros((n_times, 0))
    c = np.asarray(confounds, dtype=np.float64)
    if c.ndim == 1:
        c = c[:, np.newaxis]
    if c.ndim != 2 or c.shape[0] != n_times:
        raise ValueError(
            f"`confounds` must have shape ({n_times}, n_confounds), got {c.shape} instead."
        )
    if not np.isfinite(c).all():
        raise ValueError("`confounds` must be finite, got NaN or infinite values instead.")
    return c


def _nuisance_parts(
    n_times: int,
    *,
    t_r: float,
    detrend_order: int | None,
    filter: str | None,
    high_pass: float | None,
    confounds: np.ndarray | None,
    sample_mask: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Checked inputs of the cleaning: kept volumes and the regressors on them.

    Returns
    -------
    keep : ndarray of bool, shape (n_times,)
    trend : ndarray, shape (n_kept, n_polynomials)
        Polynomial drifts on the kept acquisition times (none when ``detrend_order``
        is ``None``).
    drifts : ndarray, shape (n_kept, n_cosines)
        Cosine high-pass regressors (none unless ``filter`` is ``"cosine"``).
    confounds : ndarray, shape (n_kept, n_confounds)
    """
    if not t_r > 0:
        raise ValueError(f"`t_r` must be a positive float, got {t_r!r} instead.")
    if filter not in ("cosine", "butterworth", None):
        raise ValueError(
            f"`filter` must be 'cosine', 'butterworth' or None, got {filter!r} instead."
        )
    conf = _check_confounds(confounds, n_times)
    frame_times = np.arange(n_times) * float(t_r)
    keep = np.ones(n_times, bool) if sample_mask is None else np.asarray(sample_mask, bool)
    if keep.shape != (n_times,):
        raise ValueError(
            f"`sample_mask` must be a boolean array of shape ({n_times},), "
            f"got {keep.shape} instead."
        )
    if keep.sum() < 2:
        raise ValueError(f"At least 2 volumes must be kept, got {int(keep.sum())} instead.")
    drifts = np.zeros((n_times, 0))
    if filter == "cosine" and high_pass is not None:
        drifts = cosine_drifts(frame_times, high_pass)
        if drifts.shape[1] == 0:
            warnings.warn(
                f"No cosine regressor below high_pass={high_pass} Hz for a run of "
                f"{n_times} volumes; the run is not high-pass filtered.",
                stacklevel=3,
            )
    times = frame_times[keep]
    trend = (
        polynomial_drifts(times, detrend_order)
        if detrend_order is not None
        else np.zeros((times.size, 0))
    )
    return keep, trend, drifts[keep], conf[keep]


def cleaning_basis(
    n_times: int,
    *,
    t_r: float,
    detrend_order: int | None = 1,
    filter: Literal["cosine", "butterworth"] | None = "cosine",
    high_pass: float | None = None,
    low_pass: float | None = None,
    confounds: np.ndarray | None = None,
    sample_mask: np.ndarray | None = None,
    standardize: bool = True,
) -> np.ndarray | None:
    """Orthonormal basis of everything :func:`clean_signals` removes from a run.

    On the projection path (cosine high-pass or none) the cleaning is linear:
    ``cleaned = zscore(Y[keep] - Q Qᵀ Y[keep])``. Applying the same projection to a
    model's predictions (or to its design) filters them exactly like the data.

    Parameters
    ----------
    n_times : int
        Volumes of the run before censoring.
    t_r, detrend_order, filter, high_pass, low_pass, confounds, sample_mask, standardize
        As for :func:`clean_signals`.

    Returns
    -------
    basis : ndarray, shape (n_kept, n_regressors) | None
        Orthonormal columns (float64), the constant included whenever the mean is
        removed; ``None`` when the cleaning is not one orthogonal projection (the
        Butterworth path, or z-scoring without detrending after confound regression).
    """
    if filter == "butterworth" and (high_pass is not None or low_pass is not None):
        return None
    if detrend_order is None and standardize and confounds is not None:
        # z-scoring then removes the mean after the projection: not one projection
        return None
    with warnings.catch_warnings():
        # clean_signals already warns about a run too short for its high-pass
        warnings.simplefilter("ignore", UserWarning)
        _, trend, drifts, conf = _nuisance_parts(
            n_times,
            t_r=t_r,
            detrend_order=detrend_order,
            filter=filter,
            high_pass=high_pass,
            confounds=confounds,
            sample_mask=sample_mask,
        )
    constant = np.ones((trend.shape[0], 1 if detrend_order is not None or standardize else 0))
    return orthonormal_basis(np.hstack([constant, trend, drifts, conf]))


def clean_signals(
    signals: np.ndarray,
    *,
    t_r: float,
    detrend_order: int | None = 1,
    filter: Literal["cosine", "butterworth"] | None = "cosine",
    high_pass: float | None = None,
    low_pass: float | None = None,
    confounds: np.ndarray | None = None,
    sample_mask: np.ndarray | None = None,
    standardize: bool = True,
    copy: bool = True,
) -> np.ndarray:
    """Detrend, high-pass filter, regress confounds and z-score signals.

    Parameters
    ----------
    signals : ndarray, shape (n_times, n_voxels)
        Time series; float32 input stays float32.
    t_r : float
        Repetition time in seconds.
    detrend_order : int | None
        Degree of the polynomial trend removed (1 = mean and linear trend);
        ``None`` removes nothing (not even the mean) before z-scoring.
    filter : {"cosine", "butterworth"} | None
        High-pass implementation: DCT drift regressors projected out with the
        confounds, or a Butterworth filter (also low-pass) via nilearn.
    high_pass, low_pass : float | None
        Cutoff frequencies in Hz (``low_pass`` for Butterworth only).
    confounds : ndarray, shape (n_times, n_confounds) | None
        Nuisance regressors on the same time points as ``signals``.
    sample_mask : ndarray of bool, shape (n_times,) | None
        Volumes to keep (censoring); the others are removed from the output.
    standardize : bool
        Z-score each column (``ddof=1``).
    copy : bool
        If ``False`` and no volume is censored, ``signals`` is modified in place.

    Returns
    -------
    cleaned : ndarray, shape (n_kept, n_voxels)
        Cleaned signals (``n_kept`` = ``sample_mask.sum()`` or ``n_times``).
    """
    y = np.asarray(signals)
    if y.ndim != 2:
        raise ValueError(f"`signals` must be 2-D (time, voxel), got shape {y.shape} instead.")
    # `owned`: y is our own array and may be modified in place. The copy the
    # caller asked for is made as late as possible (the cosine path writes its
    # result straight into a new array instead of copying first).
    owned = y.dtype.kind != "f" or not copy
    if y.dtype.kind != "f":
        y = y.astype(np.float64)
    n_times = y.shape[0]
    keep, trend, drifts, conf = _nuisance_parts(
        n_times,
        t_r=t_r,
        detrend_order=detrend_order,
        filter=filter,
        high_pass=high_pass,
        confounds=confounds,
        sample_mask=sample_mask,
    )
    if not keep.all():
        y = y[keep]
        owned = True
    if not (y.flags.c_contiguous or y.flags.f_contiguous):
        y = np.array(y, order="F" if y.strides[0] < y.strides[1] else "C")
        owned = True

    if filter == "butterworth" and (high_pass is not None or low_pass is not None):
        if not owned:
            y = y.copy(order="K")
        if detrend_order is not None:
            _center(y)
        if not keep.all():
            raise ValueError(
                "Censoring is not supported with the Butterworth filter; use 'cosine'."
            )
        q_trend = orthonormal_basis(trend)
        project_out(y, q_trend)
        fs = 1.0 / float(t_r)
        y[...] = butterworth(
            y, sampling_rate=fs, low_pass=low_pass, high_pass=high_pass, copy=False
        )
        if conf.shape[1]:
            conf = conf - q_trend @ (q_trend.T @ conf)
            conf = butterworth(conf, sampling_rate=fs, low_pass=low_pass, high_pass=high_pass)
            # the constant stays in the basis: filtered confounds are not centred
            project_out(y, orthonormal_basis(np.hstack([trend[:, :1], conf])))
    else:
        if standardize and y.shape[0] < 2:
            raise ValueError(f"z-scoring needs more than 1 time point, got {y.shape[0]} instead.")
        design = np.hstack([trend, drifts, conf])
        out = y if owned else np.empty_like(y, order="K")
        _clean_blocks(
            y,
            orthonormal_basis(design),
            out=out,
            center=detrend_order is not None,
            standardize=standardize,
        )
        return out
    if standardize:
        zscore(y)
    return y

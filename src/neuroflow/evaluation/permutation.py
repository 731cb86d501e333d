"""Permutation tests of prediction accuracy that respect autocorrelation.

The statistic is the Pearson r between prediction and observation of every
target. The null distribution is built by re-aligning the *prediction* in time,
with the same re-alignment for all targets (which keeps the spatial correlation
of the data in the null):

- ``"block"``: the time axis is cut into blocks of ``block_length`` samples and
  the block order is shuffled; a trailing incomplete block stays in place.
- ``"circular_shift"``: the prediction is rolled by a random shift of at least
  ``block_length`` samples from either end.

Both are computed without a Python loop over targets or permutations. Block
permutations reduce to one matrix product between a block-selection matrix and
the block-by-block cross-products of the data; circular shifts get the
correlation at every shift at once from an FFT cross-correlation.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control

from neuroflow.evaluation.metrics import check_time_target, zscore_time
from neuroflow.progress import Progress

__all__ = [
    "ALTERNATIVES",
    "PERMUTATION_METHODS",
    "block_permutations",
    "circular_correlations",
    "fdr_correction",
    "permutation_null",
    "permutation_pvalues",
    "permutation_test",
    "valid_shifts",
]

#: Accepted values of ``method``.
PERMUTATION_METHODS = ("block", "circular_shift")
#: Accepted values of ``alternative``.
ALTERNATIVES = ("greater", "two-sided")
#: Elements per intermediate array (float64), about 128 MB.
_MAX_ELEMENTS = 2**24


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"`{name}` must be a positive int, got {value!r} instead.")
    return int(value)


def block_permutations(
    n_times: int, block_length: int, n_permutations: int, rng: np.random.Generator
) -> np.ndarray:
    """Random orders of the complete blocks of a time axis.

    Parameters
    ----------
    n_times : int
        Number of samples.
    block_length : int
        Samples per block.
    n_permutations : int
        Number of orders to draw.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    orders : ndarray of int, shape (n_permutations, n_blocks)
        ``orders[i, b]`` is the block of the prediction aligned with block ``b``
        of the observation, ``n_blocks = n_times // block_length``.
    """
    n_blocks = n_times // block_length
    if n_blocks < 2:
        raise ValueError(
            f"`block_length` must leave at least 2 blocks in {n_times} time points, "
            f"got {block_length} instead."
        )
    return rng.permuted(np.tile(np.arange(n_blocks), (n_permutations, 1)), axis=1)


def _block_null(
    zt: np.ndarray, zp: np.ndarray, orders: np.ndarray, block_length: int
) -> np.ndarray:
    """Correlations under block orders, shape (n_permutations, n_targets).

    With ``cross[b, c, v]`` the product of observation block ``b`` and
    prediction block ``c``, a block order ``o`` gives ``sum_b cross[b, o[b], v]``:
    a 0/1 selection matrix of shape (n_permutations, n_blocks²) times ``cross``
    flattened to (n_blocks², n_targets), i.e. one matrix product per chunk of
    targets.
    """
    n_times, n_targets = zt.shape
    n_perm, n_blocks = orders.shape
    used = n_blocks * block_length
    rest = (zt[used:] * zp[used:]).sum(axis=0)
    select = np.zeros((n_perm, n_blocks * n_blocks))
    np.put_along_axis(select, np.arange(n_blocks) * n_blocks + orders, 1.0, axis=1)
    null = np.empty((n_perm, n_targets))
    chunk = max(1, _MAX_ELEMENTS // max(n_blocks * n_blocks, n_perm, block_length * n_blocks))
    with Progress(n_targets, f"block permutation null ({n_perm} orders)", "targets") as progress:
        for start in range(0, n_targets, chunk):
            sl = slice(start, start + chunk)
            bt = zt[:used, sl].reshape(n_blocks, block_length, -1)
            bp = zp[:used, sl].reshape(n_blocks, block_length, -1)
            cross = np.einsum("blv,clv->bcv", bt, bp).reshape(n_blocks * n_blocks, -1)
            null[:, sl] = select @ cross + rest[sl]
            progress.update(null[:, sl].shape[1])
    return null / n_times


def valid_shifts(n_times: int, min_shift: int) -> np.ndarray:
    """Circular shifts at least ``min_shift`` samples away from alignment.

    Parameters
    ----------
    n_times : int
        Number of samples.
    min_shift : int
        Smallest shift allowed, in samples, from either end.

    Returns
    -------
    shifts : ndarray of int, shape (n_shifts,)
        ``min_shift, ..., n_times - min_shift``.
    """
    shifts = np.arange(min_shift, n_times - min_shift + 1)
    if shifts.size == 0:
        raise ValueError(
            f"`block_length` must be at most {n_times // 2} for {n_times} time points, "
            f"got {min_shift} instead."
        )
    return shifts


def circular_correlations(zt: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """Correlation at every circular shift of the prediction, via FFT.

    Parameters
    ----------
    zt, zp : ndarray, shape (n_times, n_targets)
        Observation and prediction, z-scored over time (see
        :func:`~neuroflow.evaluation.metrics.zscore_time`).

    Returns
    -------
    r : ndarray of float64, shape (n_times, n_targets)
        ``r[s, v] = mean_t zt[t, v] * zp[(t + s) % n_times, v]``.
    """
    n_times = zt.shape[0]
    spec = np.conj(np.fft.rfft(zt, axis=0)) * np.fft.rfft(zp, axis=0)
    return np.fft.irfft(spec, n=n_times, axis=0) / n_times


def permutation_null(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    n_permutations: int = 1000,
    method: str = "block",
    block_length: int = 10,
    seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Observed correlations and their permutation null distribution.

    Parameters
    ----------
    y_true : array-like, shape (n_times, n_targets)
        Observed responses.
    y_pred : array-like, shape (n_times, n_targets)
        Predictions.
    n_permutations : int
        Number of re-alignments. For ``"circular_shift"``, when it is at least the
        number of admissible shifts, every admissible shift is used once
        (an exact test) and fewer null values are returned.
    method : ``"block"`` | ``"circular_shift"``
        How the prediction is re-aligned in time.
    block_length : int
        Block length (``"block"``) or smallest shift (``"circular_shift"``), in
        samples; choose it longer than the autocorrelation of the data.
    seed : int | None
        Seed of the random re-alignments.

    Returns
    -------
    r : ndarray of float64, shape (n_targets,)
        Observed correlation per target (NaN for constant time courses).
    null : ndarray of float64, shape (n_null, n_targets)
        Correlations under re-alignment (0 for constant time courses).
    """
    if method not in PERMUTATION_METHODS:
        raise ValueError(
            f"`method` must be one of {', '.join(PERMUTATION_METHODS)}, got {method!r} instead."
        )
    n_permutations = _check_positive_int("n_permutations", n_permutations)
    block_length = _check_positive_int("block_length", block_length)
    y_true = check_time_target("y_true", y_true, min_times=4)
    y_pred = check_time_target("y_pred", y_pred, min_times=4)
    if y_true.ndim != 2 or y_true.shape != y_pred.shape:
        raise ValueError(
            "`y_true` and `y_pred` must both have shape (n_times, n_targets), "
            f"got {y_true.shape} and {y_pred.shape} instead."
        )
    zt, zp = zscore_time(y_true), zscore_time(y_pred)
    constant = ~(zt.any(axis=0) & zp.any(axis=0))
    r = np.where(constant, np.nan, (zt * zp).mean(axis=0))
    rng = np.random.default_rng(seed)
    n_times = zt.shape[0]
    if method == "block":
        orders = block_permutations(n_times, block_length, n_permutations, rng)
        null = _block_null(zt, zp, orders, block_length)
    else:
        shifts = valid_shifts(n_times, block_length)
        if n_permutations < shifts.size:
            shifts = np.sort(rng.choice(shifts, size=n_permutations, replace=False))
        null = np.empty((shifts.size, zt.shape[1]))
        chunk = max(1, _MAX_ELEMENTS // (2 * n_times))
        what = f"circular-shift null ({shifts.size} shifts)"
        with Progress(zt.shape[1], what, "targets") as progress:
            for start in range(0, zt.shape[1], chunk):
                sl = slice(start, start + chunk)
                null[:, sl] = circular_correlations(zt[:, sl], zp[:, sl])[shifts]
                progress.update(null[:, sl].shape[1])
    return np.clip(r, -1.0, 1.0), null


def permutation_pvalues(
    observed: np.ndarray, null: np.ndarray, *, alternative: str = "greater"
) -> np.ndarray:
    """Permutation p-values with the +1 correction.

    ``p = (1 + #{null >= observed}) / (1 + n_null)`` (absolute values for
    ``"two-sided"``), so that ``p`` is never 0 and the test is exact.

    Parameters
    ----------
    observed : array-like, shape (n_targets,)
        Observed statistic.
    null : array-like, shape (n_null, n_targets)
        Null statistics.
    alternative : ``"greater"`` | ``"two-sided"``
        Direction of the test.

    Returns
    -------
    p : ndarray of float64, shape (n_targets,)
        In ``[1 / (n_null + 1), 1]``; NaN where ``observed`` is NaN.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(
            f"`alternative` must be one of {', '.join(ALTERNATIVES)}, got {alternative!r} instead."
        )
    observed = np.asarray(observed, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    if null.ndim != observed.ndim + 1 or null.shape[1:] != observed.shape:
        raise ValueError(
            f"`null` must have shape (n_null, *{observed.shape}), got {null.shape} instead."
        )
    if alternative == "two-sided":
        observed, null = np.abs(observed), np.abs(null)
    # a relative tolerance keeps the identity re-alignment from missing itself by rounding
    tol = 1e-12 * np.maximum(1.0, np.abs(observed))
    count = (null >= observed - tol).sum(axis=0)
    p = (1.0 + count) / (1.0 + null.shape[0])
    return np.where(np.isnan(observed), np.nan, p)


def permutation_test(
    y_true: np.ndarray,
    y_pred: np.ndarray,
    *,
    n_permutations: int = 1000,
    method: str = "block",
    block_length: int = 10,
    seed: int | None = 0,
    alternative: str = "greater",
) -> tuple[np.ndarray, np.ndarray]:
    """Test whether predictions correlate with observations beyond chance.

    Parameters
    ----------
    y_true : array-like, shape (n_times, n_targets)
        Observed responses.
    y_pred : array-like, shape (n_times, n_targets)
        Predictions.
    n_permutations : int
        Number of re-alignments (see :func:`permutation_null`).
    method : ``"block"`` | ``"circular_shift"``
        How the prediction is re-aligned in time.
    block_length : int
        Block length or smallest shift, in samples.
    seed : int | None
        Seed of the random re-alignments.
    alternative : ``"greater"`` | ``"two-sided"``
        Direction of the test.

    Returns
    -------
    r : ndarray of float64, shape (n_targets,)
        Observed Pearson correlation.
    p : ndarray of float64, shape (n_targets,)
        Permutation p-values (+1 corrected).
    """
    r, null = permutation_null(
        y_true,
        y_pred,
        n_permutations=n_permutations,
        method=method,
        block_length=block_length,
        seed=seed,
    )
    return r, permutation_pvalues(r, null, alternative=alternative)


def fdr_correction(
    p_values: np.ndarray, *, alpha: float = 0.05, method: str = "bh"
) -> tuple[np.ndarray, np.ndarray]:
    """False discovery rate adjustment over all finite p-values.

    Parameters
    ----------
    p_values : array-like, shape (n_targets,)
        Uncorrected p-values; NaN entries are left out of the family.
    alpha : float
        FDR level, in ``(0, 1)``.
    method : ``"bh"`` | ``"by"``
        Benjamini–Hochberg (independent or positively dependent tests) or
        Benjamini–Yekutieli (any dependence), via
        :func:`scipy.stats.false_discovery_control`.

    Returns
    -------
    p_adjusted : ndarray of float64, shape (n_targets,)
        Adjusted p-values, NaN where the input is NaN.
    significant : ndarray of bool, shape (n_targets,)
        ``p_adjusted <= alpha``.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, float | int) or not 0 < alpha < 1:
        raise ValueError(f"`alpha` must be a float in (0, 1), got {alpha!r} instead.")
    if method not in ("bh", "by"):
        raise ValueError(f"`method` must be one of bh, by, got {method!r} instead.")
    p_values = np.asarray(p_values, dtype=np.float64)
    finite = np.isfinite(p_values)
    adjusted = np.full(p_values.shape, np.nan)
    if finite.any():
        adjusted[finite] = false_discovery_control(p_values[finite], method=method)
    significant = np.zeros(p_values.shape, dtype=bool)
    significant[finite] = adjusted[finite] <= alpha
    return adjusted, significant

"""Ridge regression with one regularisation per target, chosen by run-wise CV.

Arrays in, arrays out: the solver knows nothing of voxels, channels or time lags, so
the same code serves fMRI voxels and EEG channels × latencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import lazy_loader
import numpy as np

from . import _engine
from ._device import resolve_device, resolve_dtype
from ._workers import matmul, workers
from .cv import Split, check_splits

torch = lazy_loader.load("torch")

__all__ = ["RidgeCVResult", "check_alphas", "choose_form", "ridge_cv", "ridge_fit"]


@dataclass
class RidgeCVResult:
    """Outcome of :func:`ridge_cv`.

    Attributes
    ----------
    coef : ndarray, shape (n_features, n_targets)
        Weights refit on all samples with each target's best alpha.
    best_alpha : ndarray, shape (n_targets,)
        Chosen alpha per target.
    cv_score : ndarray, shape (n_targets,)
        Validation score at the chosen alpha, averaged over folds.
    alphas : ndarray, shape (n_alphas,)
        The alphas searched.
    form : {"primal", "kernel"}
        Which Gram matrix was decomposed.
    device : str
        Where the computation ran.
    """

    coef: np.ndarray
    best_alpha: np.ndarray
    cv_score: np.ndarray
    alphas: np.ndarray
    form: str
    device: str

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predict responses.

        Parameters
        ----------
        X : ndarray, shape (n_samples, n_features)
            Features, preprocessed like the training features.

        Returns
        -------
        Y_pred : ndarray, shape (n_samples, n_targets)
            In the dtype of ``coef``; the same bits for any number of threads.
        """
        return matmul(np.asarray(X, dtype=self.coef.dtype), self.coef)


def check_alphas(alphas: Sequence[float] | np.ndarray) -> np.ndarray:
    """Validate candidate penalties: a non-empty 1-D array of positive finite floats."""
    arr = np.asarray(alphas, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(
            f"`alphas` must be a non-empty 1-D array of positive floats, got {alphas!r} instead."
        )
    return arr


def choose_form(n_samples: int, n_features: int, form: str = "auto") -> str:
    """Pick the Gram matrix to decompose: kernel form when features outnumber samples.

    Parameters
    ----------
    n_samples, n_features : int
        Shape of the design matrix.
    form : {"auto", "primal", "kernel"}
        Forced choice, or ``"auto"``.

    Returns
    -------
    form : {"primal", "kernel"}
    """
    if form not in ("auto", "primal", "kernel"):
        raise ValueError(f"`form` must be 'auto', 'primal' or 'kernel', got {form!r} instead.")
    if form != "auto":
        return form
    return "kernel" if n_features > n_samples else "primal"


def _check_xy(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    X, Y = np.asarray(X), np.asarray(Y)
    if X.ndim != 2:
        raise ValueError(f"`X` must be 2-D (n_samples, n_features), got shape {X.shape} instead.")
    if Y.ndim != 2:
        raise ValueError(f"`Y` must be 2-D (n_samples, n_targets), got shape {Y.shape} instead.")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"`X` and `Y` must have the same number of samples, got {X.shape[0]} and "
            f"{Y.shape[0]} instead."
        )
    return X, Y


def _check_common(
    scoring: str, batch_size: int, splits: Sequence[Split], n_samples: int
) -> list[Split]:
    if scoring not in _engine.SCORINGS:
        raise ValueError(f"`scoring` must be one of {_engine.SCORINGS}, got {scoring!r} instead.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"`target_batch_size` must be a positive int, got {batch_size!r} instead.")
    splits = [(np.asarray(tr, dtype=np.int64), np.asarray(va, dtype=np.int64)) for tr, va in splits]
    if not splits:
        raise ValueError("`splits` must hold at least one (train, validation) pair.")
    # Indices only; run purity is checked where the groups are known (run_splits).
    check_splits(splits, np.arange(n_samples))
    return splits


def ridge_cv(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    alphas: Sequence[float] | np.ndarray,
    splits: Sequence[Split],
    scoring: str = "r2",
    target_batch_size: int = 10_000,
    form: str = "auto",
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> RidgeCVResult:
    """Ridge regression with one alpha per target chosen by cross-validation.

    Minimises ``||X b - y||^2 + alpha ||b||^2`` for every target (column of ``Y``) with
    the alpha whose validation score, averaged over ``splits``, is highest, then refits on
    all samples. Scores within :data:`~neuroflow.models.selection.SCORE_TOLERANCE` of the
    best are ties, which go to the largest alpha
    (:func:`~neuroflow.models.selection.select_penalty`), so that round-off (BLAS build)
    cannot flip the choice. On the CPU, the results are bit-identical for any number of
    torch threads: kernels run on one thread each, side by side on independent folds and
    chunks of targets. No intercept is fitted: centre ``X`` and ``Y`` first.

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
        Features.
    Y : ndarray, shape (n_samples, n_targets)
        Responses.
    alphas : array-like, shape (n_alphas,)
        Positive penalties to try.
    splits : sequence of (ndarray, ndarray)
        Training and validation indices per fold, e.g. from
        :func:`neuroflow.models.cv.run_splits` (whole runs per validation fold).
    scoring : {"r2", "pearson"}
        Validation score: coefficient of determination (``1 - SSE / SS_tot`` on the
        validation fold, 0 where the fold has no variance) or Pearson correlation.
    target_batch_size : int
        Targets processed at once (bounds memory to a few ``n_samples × batch`` arrays);
        on the CPU, each thread takes at most
        :data:`~neuroflow.models._workers.CPU_CHUNK` at a time.
    form : {"auto", "primal", "kernel"}
        Decompose ``X.T X`` (primal) or ``X X.T`` (kernel; ``auto`` when
        ``n_features > n_samples``).
    device : str | torch.device | None
        ``"auto"``, ``"cpu"``, ``"cuda"``; ``None`` uses the current
        :func:`~neuroflow.models.compute_context`.
    dtype : {"float32", "float64"} | None
        Working precision; ``None`` uses the current context (float32 by default).

    Returns
    -------
    result : RidgeCVResult
        Weights, chosen alphas and cross-validation scores.
    """
    X, Y = _check_xy(X, Y)
    alphas = check_alphas(alphas)
    splits = _check_common(scoring, target_batch_size, splits, X.shape[0])
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    train_sizes = min(len(tr) for tr, _ in splits)
    form = choose_form(train_sizes, X.shape[1], form)
    gammas = np.ones((1, 1))
    with torch.no_grad(), workers(dev) as pool:
        design = _engine.make_design(
            X, [slice(0, X.shape[1])], device=dev, dtype=dt, form=form, pool=pool
        )
        _, ia, score = _engine.search(
            design,
            Y,
            gammas=gammas,
            alphas=alphas,
            splits=splits,
            scoring=scoring,
            batch_size=target_batch_size,
            pool=pool,
        )
        ig = np.zeros_like(ia)
        # The design's Gram matrices cover all samples, so the refit reuses them.
        coef = _engine.refit(
            design,
            Y,
            gammas=gammas,
            alphas=alphas,
            best_gamma=ig,
            best_alpha=ia,
            batch_size=target_batch_size,
            pool=pool,
        )
    return RidgeCVResult(
        coef=coef,
        best_alpha=alphas[ia],
        cv_score=score,
        alphas=alphas,
        form=form,
        device=str(dev),
    )


def ridge_fit(
    X: np.ndarray,
    Y: np.ndarray,
    alpha: float | np.ndarray,
    *,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> np.ndarray:
    """Ridge weights for given penalties (one shared, or one per target).

    Parameters
    ----------
    X : ndarray, shape (n_samples, n_features)
        Features (centred).
    Y : ndarray, shape (n_samples, n_targets)
        Responses (centred).
    alpha : float | ndarray, shape (n_targets,)
        Positive penalties.
    device, dtype
        See :func:`ridge_cv`.

    Returns
    -------
    coef : ndarray, shape (n_features, n_targets)
    """
    X, Y = _check_xy(X, Y)
    alpha_arr = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (Y.shape[1],))
    alphas, inverse = np.unique(alpha_arr, return_inverse=True)
    check_alphas(alphas)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    form = choose_form(*X.shape)
    with torch.no_grad(), workers(dev) as pool:
        design = _engine.make_design(
            X, [slice(0, X.shape[1])], device=dev, dtype=dt, form=form, pool=pool
        )
        return _engine.refit(
            design,
            Y,
            gammas=np.ones((1, 1)),
            alphas=alphas,
            best_gamma=np.zeros(Y.shape[1], dtype=np.int64),
            best_alpha=inverse.astype(np.int64),
            batch_size=max(Y.shape[1], 1),
            pool=pool,
        )

"""Banded ridge: one penalty per feature space per target, by random search.

Follows himalaya's random-search scheme (``MultipleKernelRidgeCV(solver="random_search")``):
band weightings ``gamma`` are drawn on the simplex from a Dirichlet distribution (the
first one uniform), every weighting is combined with every alpha of a grid, and each
target keeps the pair with the best fold-averaged validation score (near ties, within
:data:`~neuroflow.models.selection.SCORE_TOLERANCE`, go to the earliest weighting and,
within it, to the largest alpha; see :func:`neuroflow.models._engine.search`). Band ``k`` of a
target is then penalised by ``alpha / gamma_k``. The per-band Gram matrices are computed
once; each weighting only rescales them before its eigendecompositions.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import lazy_loader
import numpy as np

from . import _engine
from ._device import resolve_device, resolve_dtype
from ._workers import matmul, workers
from .cv import Split
from .ridge import _check_common, _check_xy, check_alphas, choose_form

torch = lazy_loader.load("torch")

__all__ = ["BandedRidgeCVResult", "banded_ridge_cv", "dirichlet_gammas", "r2_split"]


@dataclass
class BandedRidgeCVResult:
    """Outcome of :func:`banded_ridge_cv`.

    Attributes
    ----------
    coef : ndarray, shape (n_features, n_targets)
        Weights on the concatenated, unscaled features of all bands.
    slices : list of slice
        Rows of ``coef`` (columns of the design) of each band.
    best_alpha : ndarray, shape (n_bands, n_targets)
        Effective penalty of each band, ``alpha / gamma_k`` (``inf`` for a zero weight).
    best_gamma : ndarray, shape (n_bands, n_targets)
        Chosen band weighting (rows sum to one over bands).
    ridge_alpha : ndarray, shape (n_targets,)
        Chosen alpha of the grid.
    cv_score : ndarray, shape (n_targets,)
        Validation score of the chosen pair, averaged over folds.
    form : {"primal", "kernel"}
        Which Gram matrices were decomposed.
    device : str
        Where the computation ran.
    """

    coef: np.ndarray
    slices: list[slice]
    best_alpha: np.ndarray
    best_gamma: np.ndarray
    ridge_alpha: np.ndarray
    cv_score: np.ndarray
    form: str
    device: str

    @property
    def deltas(self) -> np.ndarray:
        """himalaya's log band weights ``log(gamma / alpha)``, shape (n_bands, n_targets)."""
        with np.errstate(divide="ignore"):
            return -np.log(self.best_alpha)

    def predict_split(self, Xs: Sequence[np.ndarray]) -> np.ndarray:
        """Per-band predictions, shape (n_bands, n_samples, n_targets).

        The same bits for any number of threads (see :func:`neuroflow.models.matmul`).
        """
        return np.stack(
            [
                matmul(np.asarray(X, dtype=self.coef.dtype), self.coef[sl])
                for X, sl in zip(Xs, self.slices, strict=True)
            ]
        )

    def predict(self, Xs: Sequence[np.ndarray]) -> np.ndarray:
        """Joint prediction, shape (n_samples, n_targets)."""
        return self.predict_split(Xs).sum(0)


def dirichlet_gammas(
    n_iter: int, n_bands: int, concentration: Sequence[float] = (0.1, 1.0), random_state: int = 0
) -> np.ndarray:
    """Band weightings on the simplex, as himalaya's random search draws them.

    Parameters
    ----------
    n_iter : int
        Number of weightings.
    n_bands : int
        Number of feature spaces.
    concentration : sequence of float
        Dirichlet concentrations, cycled through.
    random_state : int
        Seed.

    Returns
    -------
    gammas : ndarray, shape (n_iter, n_bands)
        The first row is uniform (``1 / n_bands``).
    """
    from himalaya.kernel_ridge import generate_dirichlet_samples

    if not isinstance(n_iter, int) or n_iter < 1:
        raise ValueError(f"`n_iter` must be a positive int, got {n_iter!r} instead.")
    gammas = np.array(
        generate_dirichlet_samples(
            n_iter, n_bands, concentration=list(concentration), random_state=random_state
        ),
        dtype=np.float64,
    )
    gammas[0] = 1.0 / n_bands
    return gammas


def banded_ridge_cv(
    Xs: Sequence[np.ndarray],
    Y: np.ndarray,
    *,
    alphas: Sequence[float] | np.ndarray,
    splits: Sequence[Split],
    gammas: np.ndarray | None = None,
    n_iter: int = 100,
    concentration: Sequence[float] = (0.1, 1.0),
    random_state: int = 0,
    scoring: str = "r2",
    target_batch_size: int = 10_000,
    form: str = "auto",
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
) -> BandedRidgeCVResult:
    """Banded ridge regression with per-target band penalties chosen by cross-validation.

    Minimises ``||sum_k X_k b_k - y||^2 + sum_k (alpha / gamma_k) ||b_k||^2`` per target,
    searching ``gamma`` over band weightings and ``alpha`` over a grid. No intercept is
    fitted: centre the features and responses first. On the CPU, the results are
    bit-identical for any number of torch threads (see :func:`neuroflow.models.ridge_cv`).

    Parameters
    ----------
    Xs : sequence of ndarray, shapes (n_samples, n_features_k)
        Features of each band (feature space).
    Y : ndarray, shape (n_samples, n_targets)
        Responses.
    alphas : array-like, shape (n_alphas,)
        Positive penalties tried with every weighting.
    splits : sequence of (ndarray, ndarray)
        Training and validation indices per fold (whole runs per validation fold).
    gammas : ndarray, shape (n_gammas, n_bands) | None
        Weightings to try; ``None`` draws ``n_iter`` with :func:`dirichlet_gammas`.
    n_iter, concentration, random_state
        Passed to :func:`dirichlet_gammas` when ``gammas`` is ``None``.
    scoring : {"r2", "pearson"}
        Validation score.
    target_batch_size : int
        Targets processed at once.
    form : {"auto", "primal", "kernel"}
        Decompose the weighted ``X.T X`` or the weighted kernel ``sum_k gamma_k X_k X_k.T``.
    device, dtype
        See :func:`neuroflow.models.ridge_cv`.

    Returns
    -------
    result : BandedRidgeCVResult
        Weights, chosen penalties and cross-validation scores.
    """
    if len(Xs) < 1:
        raise ValueError("`Xs` must hold at least one feature space.")
    X = np.concatenate([np.asarray(x) for x in Xs], axis=1) if len(Xs) > 1 else np.asarray(Xs[0])
    X, Y = _check_xy(X, Y)
    sizes = [np.asarray(x).shape[1] for x in Xs]
    if any(np.asarray(x).shape[0] != Y.shape[0] for x in Xs):
        raise ValueError("Every array of `Xs` must have as many samples as `Y`.")
    edges = np.concatenate([[0], np.cumsum(sizes)])
    slices = [slice(int(a), int(b)) for a, b in itertools.pairwise(edges)]
    alphas = check_alphas(alphas)
    splits = _check_common(scoring, target_batch_size, splits, X.shape[0])
    if gammas is None:
        gammas = dirichlet_gammas(n_iter, len(Xs), concentration, random_state)
    gammas = np.asarray(gammas, dtype=np.float64)
    if gammas.ndim != 2 or gammas.shape[1] != len(Xs) or np.any(gammas < 0):
        raise ValueError(
            f"`gammas` must be non-negative with shape (n_gammas, {len(Xs)}), got "
            f"shape {gammas.shape} instead."
        )
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    form = choose_form(min(len(tr) for tr, _ in splits), X.shape[1], form)
    with torch.no_grad(), workers(dev) as pool:
        design = _engine.make_design(X, slices, device=dev, dtype=dt, form=form, pool=pool)
        ig, ia, score = _engine.search(
            design,
            Y,
            gammas=gammas,
            alphas=alphas,
            splits=splits,
            scoring=scoring,
            batch_size=target_batch_size,
            pool=pool,
        )
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
    best_gamma = gammas[ig].T
    with np.errstate(divide="ignore"):
        best_alpha = alphas[ia][None, :] / best_gamma
    return BandedRidgeCVResult(
        coef=coef,
        slices=slices,
        best_alpha=best_alpha,
        best_gamma=best_gamma,
        ridge_alpha=alphas[ia],
        cv_score=score,
        form=form,
        device=str(dev),
    )


def r2_split(Y: np.ndarray, Y_pred_split: np.ndarray) -> np.ndarray:
    """Share of R² of each band (product-measure split).

    ``R2_k = sum_t (2 y * yhat_k - yhat_k * sum_j yhat_j) / sum_t y^2``, which sums over
    bands to the R² of the joint prediction (himalaya's ``r2_score_split``). Responses and
    predictions are centred on their own means first.

    Parameters
    ----------
    Y : ndarray, shape (n_samples, n_targets)
        Observed responses.
    Y_pred_split : ndarray, shape (n_bands, n_samples, n_targets)
        Per-band predictions.

    Returns
    -------
    r2 : ndarray, shape (n_bands, n_targets)
        Per-band R², 0 where ``Y`` has no variance.
    """
    Y = np.asarray(Y, dtype=np.float64)
    P = np.asarray(Y_pred_split, dtype=np.float64)
    if P.ndim != 3 or P.shape[1:] != Y.shape:
        raise ValueError(
            f"`Y_pred_split` must have shape (n_bands, {Y.shape[0]}, {Y.shape[1]}), got "
            f"{P.shape} instead."
        )
    Y = Y - Y.mean(0)
    P = P - P.mean(1, keepdims=True)
    total = P.sum(0)
    sst = (Y**2).sum(0)
    num = (2 * Y[None] * P - P * total[None]).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = num / sst
    return np.where(sst > 0, r2, 0.0)

"""Shared cross-validation engine of the ridge and banded-ridge solvers.

Ridge with per-target regularisation is banded ridge with a single band and a single
band weighting, so both public solvers call the same two functions:

* :func:`search` scores every (band weighting, alpha) pair by cross-validation and keeps,
  for every target, the pair with the best score averaged over folds (scores within
  :data:`~neuroflow.models.selection.SCORE_TOLERANCE` of the best are ties: the earliest
  band weighting wins, and within it the largest alpha);
* :func:`refit` fits the chosen pairs on all the data, grouped by band weighting and alpha.

For a band weighting ``gamma``, the scaled design is ``Z = X * sqrt(gamma)`` (per band).
Per fold, the smaller Gram matrix of the training part is eigendecomposed once:
``Z_tr.T @ Z_tr = V diag(lam) V.T`` (primal form) or ``Z_tr @ Z_tr.T = U diag(lam) U.T``
(kernel form, used when features outnumber samples). With ``A = Z_val V`` and the
responses rotated once, ``B = V.T Z_tr.T Y_tr`` (or ``U.T Y_tr``), the validation
prediction for any alpha is ``A @ (B / (lam + alpha))``, which is scored on the spot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .cv import Split
from .selection import near_best, select_penalty

SCORINGS = ("r2", "pearson")


@dataclass
class Design:
    """Features on the compute device, with per-band Gram matrices precomputed once.

    Attributes
    ----------
    X : Tensor, shape (n_samples, n_features)
        Concatenated features of all bands.
    slices : list of slice
        Columns of each band in ``X``.
    form : {"primal", "kernel"}
        Which Gram matrix is decomposed.
    gram : Tensor, shape (n_features, n_features) | None
        ``X.T @ X`` (primal form).
    kernels : Tensor, shape (n_bands, n_samples, n_samples) | None
        ``X_k @ X_k.T`` per band (kernel form).
    """

    X: torch.Tensor
    slices: list[slice]
    form: str
    gram: torch.Tensor | None = None
    kernels: torch.Tensor | None = None

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    def scale(self, gamma: np.ndarray) -> torch.Tensor:
        """Per-feature scale ``sqrt(gamma_band)``, shape (n_features,)."""
        s = torch.empty(self.n_features, dtype=self.X.dtype, device=self.X.device)
        for k, sl in enumerate(self.slices):
            s[sl] = float(np.sqrt(gamma[k]))
        return s

    def kernel(self, gamma: np.ndarray) -> torch.Tensor:
        """Weighted kernel ``sum_k gamma_k X_k X_k.T``, shape (n_samples, n_samples)."""
        assert self.kernels is not None
        g = torch.as_tensor(np.asarray(gamma), dtype=self.X.dtype, device=self.X.device)
        return torch.tensordot(g, self.kernels, dims=1)


def make_design(
    X: np.ndarray, slices: Sequence[slice], *, device: torch.device, dtype: torch.dtype, form: str
) -> Design:
    """Move features to the device and precompute the Gram matrices of ``form``."""
    Xt = torch.as_tensor(np.ascontiguousarray(X)).to(device=device, dtype=dtype)
    slices = list(slices)
    if form == "primal":
        return Design(Xt, slices, form, gram=Xt.T @ Xt)
    kernels = torch.stack([Xt[:, sl] @ Xt[:, sl].T for sl in slices])
    return Design(Xt, slices, form, kernels=kernels)


def _eigh(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigendecomposition of a symmetric PSD matrix; round-off negatives set to 0."""
    lam, V = torch.linalg.eigh((M + M.T) / 2)
    return lam.clamp_(min=0), V


@dataclass
class _Fold:
    train: torch.Tensor
    val: torch.Tensor
    lam: torch.Tensor  # (r,)
    basis: torch.Tensor  # V (p, r) primal, U (n_train, r) kernel
    A: torch.Tensor  # (n_val, r)


def _numerical_rank(lam: torch.Tensor) -> torch.Tensor:
    """Eigenvalues above round-off, as a boolean mask, shape (r,).

    A direction whose eigenvalue is at round-off level carries no training variance:
    its rotated responses are round-off too, so dropping it changes no prediction beyond
    round-off, and makes every later product cheaper when the design is rank deficient
    (e.g. features of few distinct stimuli, convolved in time).
    """
    if lam.numel() == 0:
        return torch.ones_like(lam, dtype=torch.bool)
    tol = lam.max() * lam.numel() * torch.finfo(lam.dtype).eps
    return lam > tol


def _decompose_folds(design: Design, gamma: np.ndarray, splits: Sequence[Split]) -> list[_Fold]:
    device = design.X.device
    folds = []
    s = design.scale(gamma) if design.form == "primal" else None
    K = design.kernel(gamma) if design.form == "kernel" else None
    for train, val in splits:
        tr = torch.as_tensor(train, device=device)
        va = torch.as_tensor(val, device=device)
        if design.form == "primal":
            Xtr = design.X[tr] * s
            Xva = design.X[va] * s
            lam, V = _eigh(Xtr.T @ Xtr)
            keep = _numerical_rank(lam)
            lam, V = lam[keep], V[:, keep]
            folds.append(_Fold(tr, va, lam, V, Xva @ V))
        else:
            lam, U = _eigh(K[tr][:, tr])
            keep = _numerical_rank(lam)
            lam, U = lam[keep], U[:, keep]
            folds.append(_Fold(tr, va, lam, U, K[va][:, tr] @ U))
    return folds


def _rotate(design: Design, fold: _Fold, Yb: torch.Tensor, SC: torch.Tensor | None) -> torch.Tensor:
    """Responses of the fold's training part in the eigenbasis, shape (r, n_targets)."""
    if design.form == "primal":
        # Z_tr.T Y_tr = s * (X.T Y) - Z_val.T Y_val, so B = V.T (s * C) - A.T Y_val.
        return fold.basis.T @ SC - fold.A.T @ Yb[fold.val]
    return fold.basis.T @ Yb[fold.train]


def _score(
    Yv: torch.Tensor, pred: torch.Tensor, scoring: str, ss_tot: torch.Tensor
) -> torch.Tensor:
    """Score of ``pred`` against ``Yv`` per column; ``pred`` is overwritten."""
    if scoring == "r2":
        pred.sub_(Yv)
        sse = pred.square_().sum(0)
        r2 = 1 - sse / ss_tot
        return torch.where(ss_tot > 0, r2, torch.zeros_like(r2))
    pred.sub_(pred.mean(0))
    cov = (pred * Yv).sum(0)  # Yv is centred by the caller for pearson
    norm = torch.sqrt(pred.square_().sum(0) * ss_tot)
    r = cov / norm
    return torch.where(norm > 0, r, torch.zeros_like(r))


def search(
    design: Design,
    Y: np.ndarray,
    *,
    gammas: np.ndarray,
    alphas: np.ndarray,
    splits: Sequence[Split],
    scoring: str,
    batch_size: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-target best (band weighting, alpha) by cross-validation.

    Within a band weighting, the alpha is the largest whose fold-averaged score ties
    with that weighting's best (:func:`~neuroflow.models.selection.select_penalty`);
    across weightings, the earliest whose best score ties with the overall best
    (:func:`~neuroflow.models.selection.near_best`). Without near ties, this is the
    argmax over all pairs.

    Parameters
    ----------
    design : Design
        Features of the cross-validation data.
    Y : ndarray, shape (n_samples, n_targets)
        Responses, centred.
    gammas : ndarray, shape (n_gammas, n_bands)
        Band weightings to try.
    alphas : ndarray, shape (n_alphas,)
        Ridge penalties to try for every weighting.
    splits : sequence of (ndarray, ndarray)
        Training and validation indices of every fold.
    scoring : {"r2", "pearson"}
        Validation score, averaged over folds.
    batch_size : int
        Targets processed at once.

    Returns
    -------
    best_gamma : ndarray of int, shape (n_targets,)
        Index into ``gammas``.
    best_alpha : ndarray of int, shape (n_targets,)
        Index into ``alphas``.
    best_score : ndarray of float64, shape (n_targets,)
        Fold-averaged validation score of the chosen pair.
    """
    device, dtype = design.X.device, design.X.dtype
    n_targets = Y.shape[1]
    # Per weighting: its best score, its chosen alpha and that alpha's score.
    top = np.full((len(gammas), n_targets), -np.inf)
    alpha_of = np.zeros((len(gammas), n_targets), dtype=np.int32)
    score_of = np.full((len(gammas), n_targets), -np.inf)
    alphas_t = torch.as_tensor(alphas, dtype=dtype, device=device)
    for g, gamma in enumerate(gammas):
        folds = _decompose_folds(design, gamma, splits)
        s = design.scale(gamma)[:, None] if design.form == "primal" else None
        for start in range(0, n_targets, batch_size):
            cols = slice(start, min(start + batch_size, n_targets))
            Yb = torch.as_tensor(np.ascontiguousarray(Y[:, cols])).to(device=device, dtype=dtype)
            SC = s * (design.X.T @ Yb) if design.form == "primal" else None
            total = torch.zeros(len(alphas), Yb.shape[1], dtype=torch.float64, device=device)
            for fold in folds:
                B = _rotate(design, fold, Yb, SC)
                Yv = Yb[fold.val]
                if scoring == "pearson":
                    Yv = Yv - Yv.mean(0)
                    ss_tot = Yv.square().sum(0)
                else:
                    ss_tot = (Yv - Yv.mean(0)).square_().sum(0)
                for a in range(len(alphas)):
                    w = 1.0 / (fold.lam + alphas_t[a])
                    pred = fold.A @ (w[:, None] * B)
                    total[a] += _score(Yv, pred, scoring, ss_tot)
                del B, Yv
            mean = (total / len(folds)).cpu().numpy()
            arg = select_penalty(mean, alphas)
            top[g, cols] = np.where(np.isnan(mean), -np.inf, mean).max(0)
            alpha_of[g, cols] = arg
            score_of[g, cols] = mean[arg, np.arange(mean.shape[1])]
        del folds
    best_gamma = near_best(top).argmax(0).astype(np.int64)
    targets = np.arange(n_targets)
    best_alpha = alpha_of[best_gamma, targets].astype(np.int64)
    return best_gamma, best_alpha, score_of[best_gamma, targets]


def refit(
    design: Design,
    Y: np.ndarray,
    *,
    gammas: np.ndarray,
    alphas: np.ndarray,
    best_gamma: np.ndarray,
    best_alpha: np.ndarray,
    batch_size: int,
) -> np.ndarray:
    """Fit every target on all samples with its chosen (band weighting, alpha).

    Parameters
    ----------
    design : Design
        Features of all the fitting data.
    Y : ndarray, shape (n_samples, n_targets)
        Responses, centred.
    gammas : ndarray, shape (n_gammas, n_bands)
        Band weightings.
    alphas : ndarray, shape (n_alphas,)
        Ridge penalties.
    best_gamma, best_alpha : ndarray of int, shape (n_targets,)
        Chosen indices per target.
    batch_size : int
        Targets processed at once.

    Returns
    -------
    coef : ndarray, shape (n_features, n_targets)
        Weights on the unscaled features, in the dtype of the design.
    """
    X = design.X
    device, dtype = X.device, X.dtype
    n_targets = Y.shape[1]
    coef = np.zeros((design.n_features, n_targets), dtype=_numpy_dtype(dtype))
    for g in np.unique(best_gamma):
        gamma = gammas[g]
        s = design.scale(gamma)
        if design.form == "primal":
            lam, basis = _eigh(s[:, None] * design.gram * s[None, :])
        else:
            lam, basis = _eigh(design.kernel(gamma))
        targets = np.flatnonzero(best_gamma == g)
        for start in range(0, len(targets), batch_size):
            idx = targets[start : start + batch_size]
            Yb = torch.as_tensor(Y[:, idx]).to(device=device, dtype=dtype)
            B = basis.T @ (s[:, None] * (X.T @ Yb)) if design.form == "primal" else basis.T @ Yb
            out = torch.empty(design.n_features, len(idx), dtype=dtype, device=device)
            chosen = best_alpha[idx]
            for a in np.unique(chosen):
                sel = torch.as_tensor(np.flatnonzero(chosen == a), device=device)
                w = 1.0 / (lam + float(alphas[a]))
                sol = basis @ (w[:, None] * B[:, sel])
                if design.form == "primal":
                    out[:, sel] = s[:, None] * sol
                else:
                    out[:, sel] = s[:, None].square() * (X.T @ sol)
            coef[:, idx] = out.cpu().numpy()
    return coef


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return np.dtype("float64") if dtype == torch.float64 else np.dtype("float32")

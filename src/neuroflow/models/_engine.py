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

On the CPU every kernel runs on one thread, and the work is spread over the job's threads
as independent tasks (folds, band weightings, fixed-width chunks of targets; see
:mod:`neuroflow.models._workers`), so that results are bit-identical for any number of
threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import lazy_loader
import numpy as np

from neuroflow.progress import Progress

from ._workers import Workers
from .cv import Split
from .selection import near_best, select_penalty

torch = lazy_loader.load("torch")

SCORINGS = ("r2", "pearson")

#: Most elements of the validation predictions of one task scored at once (alphas are
#: grouped to fit): 1 MB in float32, which keeps the elementwise scoring in cache.
_GROUP_ELEMENTS = 2**18

#: Columns per task of a Gram matrix: narrow, so that even a few hundred features give
#: every thread a share of the ``n_samples × n_features²`` products.
_GRAM_CHUNK = 64


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
    X: np.ndarray,
    slices: Sequence[slice],
    *,
    device: torch.device,
    dtype: torch.dtype,
    form: str,
    pool: Workers,
) -> Design:
    """Move features to the device and precompute the Gram matrices of ``form``."""
    # A copy in torch's own aligned buffer: MKL's kernels may round differently on data
    # of another alignment.
    Xt = torch.tensor(np.asarray(X), dtype=dtype, device=device)
    slices = list(slices)
    if form == "primal":
        return Design(Xt, slices, form, gram=_gram(Xt, pool))
    kernels = torch.stack([_gram(Xt[:, sl].T, pool) for sl in slices])
    return Design(Xt, slices, form, kernels=kernels)


def _gram(M: torch.Tensor, pool: Workers) -> torch.Tensor:
    """``M.T @ M``, shape (m, m), by chunks of columns computed side by side."""

    @torch.no_grad()
    def columns(cols: slice) -> torch.Tensor:
        return M.T @ M[:, cols]

    m = M.shape[1]
    if m == 0 or pool.chunk is None:  # no columns, or a GPU: one product
        return M.T @ M
    return torch.cat(pool.map(columns, pool.chunks(m, _GRAM_CHUNK)), dim=1)


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


def _decompose_folds(
    design: Design, gamma: np.ndarray, splits: Sequence[Split], pool: Workers
) -> list[_Fold]:
    """Eigendecomposition of every fold's training Gram matrix, and its ``A``."""
    device = design.X.device
    index = [
        (torch.as_tensor(tr, device=device), torch.as_tensor(va, device=device))
        for tr, va in splits
    ]

    @torch.no_grad()
    def reduced(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lam, basis = _eigh(M)
        keep = _numerical_rank(lam)
        return lam[keep], basis[:, keep]

    if design.form == "kernel":
        K = design.kernel(gamma)

        @torch.no_grad()
        def decompose(split: tuple[torch.Tensor, torch.Tensor]) -> _Fold:
            tr, va = split
            lam, U = reduced(K[tr][:, tr])
            return _Fold(tr, va, lam, U, K[va][:, tr] @ U)

        # the folds' kernels are gathers of K: decomposed side by side
        return pool.map(decompose, index)

    s = design.scale(gamma)
    grams: list[torch.Tensor | None] = []
    for tr, _ in index:
        # One fold's training features at a time (the largest copy), with their Gram
        # matrix spread over the threads.
        Xtr = design.X[tr] * s
        grams.append(_gram(Xtr, pool))
        del Xtr

    @torch.no_grad()
    def fold(i: int) -> _Fold:
        tr, va = index[i]
        gram, grams[i] = grams[i], None  # freed as soon as decomposed
        lam, V = reduced(gram)
        del gram
        return _Fold(tr, va, lam, V, (design.X[va] * s) @ V)

    # the decompositions of the folds run side by side, each on one thread
    return pool.map(fold, range(len(index)))


def _load(Y: np.ndarray, cols: slice | np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """Columns of ``Y`` on the device and in the dtype of ``like``, in a fresh buffer."""
    return torch.tensor(np.ascontiguousarray(Y[:, cols]), dtype=like.dtype, device=like.device)


def _score(
    Yv: torch.Tensor, pred: torch.Tensor, scoring: str, ss_tot: torch.Tensor
) -> torch.Tensor:
    """Score of ``pred`` against ``Yv`` per column; ``pred`` is overwritten.

    ``pred`` has shape (n_val, ..., n_targets) and ``Yv`` broadcasts against it; the
    score has the shape of ``pred`` without its first axis.
    """
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
    pool: Workers,
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
        Targets processed at once (at most :data:`~neuroflow.models._workers.CPU_CHUNK`
        per task on the CPU).
    pool : Workers
        Runs the folds and chunks of targets.

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
    chunks = pool.chunks(n_targets, batch_size)
    # Per weighting: its best score, its chosen alpha and that alpha's score.
    top = np.full((len(gammas), n_targets), -np.inf)
    alpha_of = np.zeros((len(gammas), n_targets), dtype=np.int32)
    score_of = np.full((len(gammas), n_targets), -np.inf)
    alphas_t = torch.as_tensor(alphas, dtype=dtype, device=device)
    # (a single weighting, as plain ridge has, is one step: nothing to report)
    progress = Progress(
        len(gammas) if len(gammas) > 1 else 0, "banded ridge search", "band weightings"
    )
    for g, gamma in enumerate(gammas):
        folds = _decompose_folds(design, gamma, splits, pool)
        # shrinkage of every alpha per fold, shape (n_alphas, r)
        shrink = [1.0 / (fold.lam[None, :] + alphas_t[:, None]) for fold in folds]
        s = design.scale(gamma)[:, None] if design.form == "primal" else None

        @torch.no_grad()
        def fold_mean(
            cols: slice,
            folds: list[_Fold] = folds,
            shrink: list[torch.Tensor] = shrink,
            s: torch.Tensor | None = s,
        ) -> np.ndarray:
            """Fold-averaged score of every alpha, shape (n_alphas, n_cols)."""
            Yb = _load(Y, cols, design.X)
            SC = s * (design.X.T @ Yb) if design.form == "primal" else None
            total = torch.zeros(len(alphas), Yb.shape[1], dtype=torch.float64, device=device)
            for fold, W in zip(folds, shrink, strict=True):
                Yv = Yb.index_select(0, fold.val)
                if design.form == "primal":
                    # Z_tr.T Y_tr = s * (X.T Y) - Z_val.T Y_val, so B = V.T (s C) - A.T Y_val
                    B = fold.basis.T @ SC - fold.A.T @ Yv
                else:
                    B = fold.basis.T @ Yb.index_select(0, fold.train)
                if scoring == "pearson":
                    Yv = Yv - Yv.mean(0)
                    ss_tot = Yv.square().sum(0)
                else:
                    ss_tot = (Yv - Yv.mean(0)).square_().sum(0)
                r, n_val, n_cols = B.shape[0], Yv.shape[0], B.shape[1]
                # a few alphas at once: one product for all, in bounded memory
                step = max(1, _GROUP_ELEMENTS // max(r * n_cols, n_val * n_cols, 1))
                for a in range(0, len(alphas), step):
                    grp = slice(a, min(a + step, len(alphas)))
                    WB = W[grp].T[:, :, None] * B[:, None, :]  # (r, n_group, n_cols)
                    pred = (fold.A @ WB.reshape(r, -1)).reshape(n_val, -1, n_cols)
                    total[grp] += _score(Yv[:, None, :], pred, scoring, ss_tot)
            return (total / len(folds)).cpu().numpy()

        parts = pool.map(fold_mean, chunks)
        del folds, shrink
        mean = np.concatenate(parts, axis=1) if parts else np.zeros((len(alphas), 0))
        arg = select_penalty(mean, alphas)
        top[g] = np.where(np.isnan(mean), -np.inf, mean).max(0, initial=-np.inf)
        alpha_of[g] = arg
        score_of[g] = mean[arg, np.arange(n_targets)]
        progress.update()
    progress.close()
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
    pool: Workers,
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
        Targets processed at once (at most :data:`~neuroflow.models._workers.CPU_CHUNK`
        per task on the CPU).
    pool : Workers
        Runs the weightings and chunks of targets.

    Returns
    -------
    coef : ndarray, shape (n_features, n_targets)
        Weights on the unscaled features, in the dtype of the design.
    """
    X = design.X
    coef = np.zeros((design.n_features, Y.shape[1]), dtype=_numpy_dtype(X.dtype))
    alphas_t = torch.as_tensor(alphas, dtype=X.dtype, device=X.device)

    @torch.no_grad()
    def decompose(g: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s = design.scale(gammas[g])
        if design.form == "primal":
            lam, basis = _eigh(s[:, None] * design.gram * s[None, :])
        else:
            lam, basis = _eigh(design.kernel(gammas[g]))
        return s, lam, basis

    used = np.unique(best_gamma)
    # weightings are decomposed side by side, a few at a time to bound memory
    for start in range(0, len(used), pool.n_workers):
        group = used[start : start + pool.n_workers]
        for g, (s, lam, basis) in zip(group, pool.map(decompose, group), strict=True):
            targets = np.flatnonzero(best_gamma == g)

            @torch.no_grad()
            def fit(cols: slice, targets=targets, s=s, lam=lam, basis=basis) -> None:
                idx = targets[cols]
                Yb = _load(Y, idx, X)
                # rotated responses, shape (r, n_cols), shrunk by each target's alpha
                B = basis.T @ (s[:, None] * (X.T @ Yb) if design.form == "primal" else Yb)
                a = torch.as_tensor(best_alpha[idx], device=X.device)
                sol = basis @ (B / (lam[:, None] + alphas_t[a][None, :]))
                if design.form == "primal":
                    out = s[:, None] * sol
                else:
                    out = s[:, None].square() * (X.T @ sol)
                coef[:, idx] = out.cpu().numpy()

            pool.map(fit, pool.chunks(len(targets), batch_size))
    return coef


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return np.dtype("float64") if dtype == torch.float64 else np.dtype("float32")

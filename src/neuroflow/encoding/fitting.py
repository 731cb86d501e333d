"""Fitting one encoding model: the design of each run, ridge or banded ridge, predictions.

The features of every space are standardised on the training runs, delayed (or
convolved with an HRF, or with each HRF of a library, one fit per HRF and per target the
one that cross-validates best on the training runs) and optionally filtered like the
BOLD; penalties are chosen by cross-validation over the training runs; each held-out
stimulus sequence is predicted once per repeat. :mod:`neuroflow.encoding.stage` reads
the configuration and writes the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuroflow.encoding.runs import _cv_groups, _Run
from neuroflow.encoding.stored import filter_like_data
from neuroflow.models import banded_ridge_cv, parse_cv, ridge_cv, run_splits
from neuroflow.models.delays import apply_delays

__all__ = ["choose_solver", "make_alphas", "solver_options"]

logger = logging.getLogger(__name__)


def make_alphas(spec: Mapping[str, Any]) -> np.ndarray:
    """Candidate penalties ``10 ** linspace(start, stop, num)``.

    Parameters
    ----------
    spec : dict
        ``{"start": float, "stop": float, "num": int}`` (base-10 exponents).

    Returns
    -------
    alphas : ndarray, shape (num,)
    """
    num = spec.get("num")
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise ValueError(f"`alphas.num` must be a positive int, got {num!r} instead.")
    start, stop = float(spec["start"]), float(spec["stop"])
    if stop < start:
        raise ValueError(f"`alphas.stop` must be >= `alphas.start`, got {stop} < {start} instead.")
    return np.logspace(start, stop, num)


def choose_solver(cfg: Mapping[str, Any], spaces: Sequence[str]) -> str:
    """``"ridge"`` or ``"banded_ridge"`` from ``cfg["model"]`` (``"auto"``: banded when
    there are several feature spaces)."""
    model = cfg["model"]
    if model not in ("auto", "ridge", "banded_ridge"):
        hint = (
            " (a transformer is fitted by fit_transformer_encoding)"
            if model == "transformer"
            else ""
        )
        raise ValueError(
            f"`model` must be 'auto', 'ridge' or 'banded_ridge', got {model!r} instead{hint}."
        )
    if model == "auto":
        return "banded_ridge" if len(spaces) > 1 else "ridge"
    return model


def solver_options(cfg: Mapping[str, Any], splits: Sequence[Any], device: Any) -> dict[str, Any]:
    """Keyword arguments shared by ``ridge_cv`` and ``banded_ridge_cv`` from a section."""
    return {
        "alphas": make_alphas(cfg["alphas"]),
        "splits": splits,
        "scoring": cfg["scoring"],
        "target_batch_size": int(cfg["target_batch_size"]),
        "device": device,
        "dtype": cfg["dtype"],
    }


def _standardizer(
    train: Sequence[_Run], spaces: Sequence[str], enabled: bool, event_penalty: float = 1.0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Mean and scale of each space's columns over the training runs.

    The scale is the standard deviation (1 without ``enabled``), divided by
    ``sqrt(1 / event_penalty)`` for the event-regressor columns (``_Run.events``): ridge
    then penalises their weights ``event_penalty`` times as much as the features', so the
    response to every event is not shrunk with the feature weights.
    """
    stats = {}
    for s in spaces:
        X = np.concatenate([r.features[s] for r in train])
        mean = X.mean(0)
        std = X.std(0) if enabled else np.ones_like(mean)
        scale = np.where(std > 0, std, 1.0)
        events = train[0].events.get(s) if train else None
        if events is not None and events.any():
            scale = np.where(events, scale * np.sqrt(event_penalty), scale)
        stats[s] = (mean, scale)
    return stats


def _design(
    run: _Run,
    spaces: Sequence[str],
    stats: Mapping[str, tuple[np.ndarray, np.ndarray]],
    delays: Mapping[str, Any],
    tr: float,
    filter_design: bool = False,
) -> list[np.ndarray]:
    """Standardised, delayed (and optionally nuisance-filtered) features, one array per space."""
    out = []
    basis = run.nuisance if filter_design else None
    for s in spaces:
        mean, std = stats[s]
        X = apply_delays((run.features[s] - mean) / std, dict(delays), tr)
        out.append(filter_like_data(X, basis).astype(np.float32))
    return out


@dataclass
class _Fit:
    """What one fit leaves for the output store; arrays have a last axis of targets."""

    cv_score: np.ndarray  # (n_targets,)
    best_alpha: np.ndarray  # (n_targets,) or (n_spaces, n_targets)
    y_pred: np.ndarray  # (n_test_times, n_targets)
    parts: list[np.ndarray] | None  # per test sequence (n_spaces, n_times, n_targets)
    n_train: int
    coef: np.ndarray  # (n_design, n_targets), on the centred design
    design_mean: np.ndarray  # (n_design,), training mean of the design, per variant
    target_mean: np.ndarray  # (n_targets,)
    feature_stats: dict[str, tuple[np.ndarray, np.ndarray]]  # space -> (mean, scale)


def _fit_and_predict(
    train: Sequence[_Run],
    test: Sequence[_Run],
    groups_test: Sequence[Sequence[int]],
    spaces: Sequence[str],
    cfg: Mapping[str, Any],
    tr: float,
    model: str,
    device: Any,
) -> _Fit:
    """Fit on ``train`` (penalties by cross-validation) and predict each test sequence."""
    stats = _standardizer(train, spaces, bool(cfg["standardize"]), float(cfg["event_penalty"]))
    delays = cfg["delays"]
    filtered = bool(cfg["filter_design"])
    Xs_train = [
        np.concatenate(b)
        for b in zip(*(_design(r, spaces, stats, delays, tr, filtered) for r in train), strict=True)
    ]
    Y_train = np.concatenate([r.bold for r in train])
    y_mean = Y_train.mean(0)
    Y_train = Y_train - y_mean
    x_means = [X.mean(0) for X in Xs_train]
    Xs_train = [X - m for X, m in zip(Xs_train, x_means, strict=True)]
    splits = run_splits(_cv_groups(train), parse_cv(cfg["cv"]))
    common = solver_options(cfg, splits, device)
    if model == "ridge":
        result = ridge_cv(np.concatenate(Xs_train, axis=1), Y_train, **common)
    else:
        band = cfg["banded"]
        result = banded_ridge_cv(
            Xs_train,
            Y_train,
            n_iter=int(band["n_iter"]),
            concentration=band["concentration"],
            random_state=int(band["random_state"]),
            **common,
        )
    n_train = Y_train.shape[0]
    del Xs_train, Y_train
    preds, all_parts = [], []
    for grp in groups_test:
        # one prediction per repeat, each filtered like that repeat's BOLD; their mean
        # is compared with the mean of the repeats
        designs = [
            [
                X - m
                for X, m in zip(
                    _design(test[i], spaces, stats, delays, tr, filtered), x_means, strict=True
                )
            ]
            for i in grp
        ]
        if model == "ridge":
            pred = np.mean([result.predict(np.concatenate(Xs, 1)) for Xs in designs], axis=0)
        else:
            parts = np.mean([result.predict_split(Xs) for Xs in designs], axis=0)
            all_parts.append(parts)
            pred = parts.sum(0)
        preds.append((pred + y_mean).astype(np.float32))
    return _Fit(
        cv_score=np.asarray(result.cv_score),
        best_alpha=np.asarray(result.best_alpha),
        y_pred=np.concatenate(preds, axis=0),
        parts=all_parts if model != "ridge" else None,
        n_train=n_train,
        coef=np.asarray(result.coef, dtype=np.float32),
        design_mean=np.concatenate(x_means).astype(np.float32),
        target_mean=np.asarray(y_mean, dtype=np.float32),
        feature_stats=stats,
    )


def _choose_per_target(fits: Sequence[_Fit]) -> tuple[_Fit, np.ndarray]:
    """Per target, the fit with the best cross-validated score.

    Returns
    -------
    fit : _Fit
        The chosen fit's values for every target (``fits[0]`` when there is one).
    choice : ndarray of int, shape (n_targets,)
        Index into ``fits`` per target.
    """
    scores = np.stack([np.nan_to_num(f.cv_score, nan=-np.inf) for f in fits])
    choice = np.argmax(scores, axis=0)
    if len(fits) == 1:
        return fits[0], choice

    def pick(arrays: Sequence[np.ndarray]) -> np.ndarray:
        stacked = np.stack(arrays)  # (n_fits, ..., n_targets)
        index = choice.reshape((1,) + (1,) * (stacked.ndim - 2) + choice.shape)
        return np.take_along_axis(stacked, index, axis=0)[0]

    parts = None
    if fits[0].parts is not None:
        parts = [pick([f.parts[g] for f in fits]) for g in range(len(fits[0].parts))]
    fit = _Fit(
        cv_score=pick([f.cv_score for f in fits]),
        best_alpha=pick([f.best_alpha for f in fits]),
        y_pred=pick([f.y_pred for f in fits]),
        parts=parts,
        n_train=fits[0].n_train,
        coef=pick([f.coef for f in fits]),
        design_mean=fits[0].design_mean,
        target_mean=fits[0].target_mean,
        feature_stats=fits[0].feature_stats,
    )
    return fit, choice


def _banded_library_fit(
    fit_variant: Callable[..., _Fit], n_variants: int
) -> tuple[_Fit, np.ndarray, list[_Fit]]:
    """Banded ridge with an HRF library: the HRF chosen per target by ridge, one banded fit each.

    A banded fit's random search costs about as much per target as one fit per HRF would,
    so fitting every HRF with banded ridge multiplies the model's fitting time by the
    library's size. The HRF is a property of the target's response, not of the band
    weighting: each target's is chosen by the cross-validated score of ridge on the same
    design (one fit per HRF, each a fraction of a banded fit), and banded ridge is fitted
    once per HRF on the targets that chose it.

    Parameters
    ----------
    fit_variant : callable
        ``fit_variant(v, solver, targets=None)`` fits HRF model ``v`` with ``solver``
        (``"ridge"`` or ``"banded_ridge"``) on the targets selected by the boolean mask
        ``targets`` (all when ``None``).
    n_variants : int
        Models in the library.

    Returns
    -------
    fit : _Fit
        Each target's values from the banded fit of its HRF.
    choice : ndarray of int, shape (n_targets,)
        Each target's HRF model.
    screens : list of _Fit
        The ridge fit of every model (their feature and design statistics are the banded
        fits'; they do not depend on the solver).
    """
    screens = [fit_variant(v, "ridge") for v in range(n_variants)]
    _, choice = _choose_per_target(screens)
    fit: _Fit | None = None
    for v in range(n_variants):
        targets = choice == v
        if not targets.any():
            continue
        part = fit_variant(v, "banded_ridge", targets)
        if fit is None:
            fit = _empty_fit(part, choice.size)
        _scatter(fit, part, targets)
    assert fit is not None  # every target chose a model
    return fit, choice, screens


def _empty_fit(like: _Fit, n_targets: int) -> _Fit:
    """A :class:`_Fit` shaped as ``like`` for ``n_targets`` targets, its target values NaN."""

    def empty(a: np.ndarray) -> np.ndarray:
        return np.full((*a.shape[:-1], n_targets), np.nan, dtype=a.dtype)

    return _Fit(
        cv_score=empty(like.cv_score),
        best_alpha=empty(like.best_alpha),
        y_pred=empty(like.y_pred),
        parts=[empty(p) for p in like.parts] if like.parts is not None else None,
        n_train=like.n_train,
        coef=empty(like.coef),
        design_mean=like.design_mean,
        target_mean=empty(like.target_mean),
        feature_stats=like.feature_stats,
    )


def _scatter(fit: _Fit, part: _Fit, targets: np.ndarray) -> None:
    """Write ``part``'s values (fitted on the ``targets`` mask) into ``fit`` in place."""
    for name in ("cv_score", "best_alpha", "y_pred", "coef", "target_mean"):
        getattr(fit, name)[..., targets] = getattr(part, name)
    if fit.parts is not None and part.parts is not None:
        for whole, piece in zip(fit.parts, part.parts, strict=True):
            whole[..., targets] = piece

"""Which stimuli an EEG encoding model scores, how they are folded, and its predictions.

The design of one recording's scoring (:func:`scoring_design`): test images the design
sets apart (:func:`designated_test_stimuli`), or every image predicted once across
outer folds of images (:func:`stimulus_folds`, repeats in one fold), with penalties
chosen by an inner cross-validation on the training folds only
(:func:`cross_validated_predictions`). :func:`fold_refit` keeps what the permutation
null needs to refit those folds with the features moved between images.
:mod:`neuroflow.encoding.eeg` reads the configuration and writes the store.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from neuroflow.encoding.eeg_inference import FoldRefit
from neuroflow.encoding.fitting import make_alphas
from neuroflow.models import RidgeCVResult, parse_cv, ridge_cv, run_splits
from neuroflow.trial_split import select_test_stimuli

__all__ = [
    "CROSS_VALIDATED",
    "HELD_OUT",
    "cross_validated_predictions",
    "designated_test_stimuli",
    "fit_epochs_ridge",
    "fold_refit",
    "scoring_design",
    "stimulus_folds",
]

logger = logging.getLogger(__name__)


#: Permutations of cross-validated fits choose their penalties again (exact null, any
#: number of features) up to this many inner folds; beyond, each fold keeps its observed
#: penalties (``bench/bench_eeg_null.py`` times a permutation by layer width).
RESELECT_MAX_FOLDS = 10

#: ``test_design`` of a store whose scored stimuli were held out of the fit.
HELD_OUT = "held-out"


#: ``test`` value (and ``test_design``): every stimulus predicted once across outer folds.
CROSS_VALIDATED = "cross-validated"


def _check_int(value: Any, name: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"`{name}` must be an int >= {low}, got {value!r} instead.")
    return value


# --------------------------------------------------------------------------- helpers
def _standardize(
    X: np.ndarray, train: np.ndarray, enabled: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centre (and scale) columns with training-row statistics."""
    mean = X[train].mean(0)
    std = X[train].std(0) if enabled else np.ones(X.shape[1])
    std = np.where(std > 0, std, 1.0)
    return (X - mean) / std, mean, std


def fit_epochs_ridge(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    groups: np.ndarray,
    alphas: np.ndarray,
    n_splits: int | None,
    scoring: str = "r2",
    target_batch_size: int = 10000,
    device: Any = None,
    dtype: str | None = None,
) -> tuple[RidgeCVResult, np.ndarray]:
    """Per channel and time point ridge, solved in one call on flattened targets.

    Parameters
    ----------
    X : ndarray, shape (n_epochs, n_features)
        Centred features of each training epoch.
    Y : ndarray, shape (n_epochs, n_times, n_channels)
        Training epochs (any units); centred here.
    groups : ndarray, shape (n_epochs,)
        Stimulus id of each epoch; folds never split a stimulus.
    alphas : ndarray, shape (n_alphas,)
        Candidate penalties.
    n_splits : int | None
        Grouped k-fold, or ``None`` for leave-one-stimulus-out.
    scoring, target_batch_size, device, dtype
        See :func:`neuroflow.models.ridge_cv`.

    Returns
    -------
    result : RidgeCVResult
        Fit on targets ordered (time, channel): ``coef`` has shape
        (n_features, n_times * n_channels).
    y_mean : ndarray, shape (n_times * n_channels,)
        Training mean of every target.
    """
    Y = np.asarray(Y)
    if Y.ndim != 3:
        raise ValueError(
            f"`Y` must have shape (n_epochs, n_times, n_channels), got {Y.shape} instead."
        )
    flat = Y.reshape(Y.shape[0], -1).astype(np.float32)
    y_mean = flat.mean(0)
    splits = run_splits(np.asarray(groups), n_splits, unit="stimulus")
    result = ridge_cv(
        X,
        flat - y_mean,
        alphas=alphas,
        splits=splits,
        scoring=scoring,
        target_batch_size=target_batch_size,
        device=device,
        dtype=dtype,
    )
    return result, y_mean


def _test_repeats(stimuli: np.ndarray, test_ids: Sequence[str]) -> np.ndarray:
    """Epoch indices of each scored stimulus's presentations, shape (n_repeats, n_test)."""
    where = [np.flatnonzero(stimuli == s) for s in test_ids]
    counts = [len(w) for w in where]
    n_rep = min(counts)
    if len(set(counts)) > 1:
        logger.warning(
            "Scored stimuli are shown %s to %s times; keeping the first %s presentations of each.",
            n_rep,
            max(counts),
            n_rep,
        )
    return np.stack([w[:n_rep] for w in where], axis=1)


def designated_test_stimuli(stimuli: Sequence[str]) -> list[str]:
    """The stimuli a design sets apart for testing, in order of first presentation.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_epochs,)
        Stimulus id of every epoch.

    Returns
    -------
    test_ids : list of str
        The most-presented stimuli when they are shown more often than the others and
        are at most half of all (THINGS-EEG's test images, shown 10 times among training
        images shown once); empty otherwise (every stimulus shown equally often, or
        immediate and delayed repeats of most images as in ds000117).
    """
    ids = [str(s) for s in stimuli]
    counts = Counter(ids)
    if not counts:
        return []
    order = list(dict.fromkeys(ids))
    top = max(counts.values())
    most = [s for s in order if counts[s] == top]
    if top > min(counts.values()) and len(most) <= len(order) / 2:
        return most
    return []


def scoring_design(stimuli: Sequence[str], test: str | Sequence[str]) -> tuple[str, list[str]]:
    """How a subject's model is scored: on held-out test stimuli or by cross-validation.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_epochs,)
        Stimulus id of every epoch.
    test : "auto" | "cross-validated" | "repeated" | sequence of str
        ``"auto"``: the design's test stimuli (:func:`designated_test_stimuli`) when it
        has some, else cross-validation; ``"cross-validated"``: every stimulus predicted
        once by models fitted on the other folds; ``"repeated"`` (every stimulus shown
        more than once) or explicit ids: held out.

    Returns
    -------
    design : {"held-out", "cross-validated"}
    test_ids : list of str
        The held-out stimuli (empty for cross-validation).
    """
    if isinstance(test, str) and test in ("auto", CROSS_VALIDATED):
        held = designated_test_stimuli(stimuli) if test == "auto" else []
        return (HELD_OUT, held) if held else (CROSS_VALIDATED, [])
    return HELD_OUT, select_test_stimuli(stimuli, test)


def stimulus_folds(n_stimuli: int, n_folds: int, seed: int) -> np.ndarray:
    """Seeded outer fold of every stimulus, fold sizes differing by at most one.

    Parameters
    ----------
    n_stimuli : int
        Stimuli to split (at least 3).
    n_folds : int
        Folds (at least 2); more than ``n_stimuli`` gives one stimulus per fold.
    seed : int
        Seed of the assignment.

    Returns
    -------
    folds : ndarray of int64, shape (n_stimuli,)
        Fold of every stimulus, ``0 .. min(n_folds, n_stimuli) - 1``.
    """
    _check_int(n_folds, "outer_folds", 2)
    if n_stimuli < 3:
        raise ValueError(
            f"Cross-validated predictions need at least 3 stimuli, got {n_stimuli} instead."
        )
    k = min(n_folds, n_stimuli)
    if k < n_folds:
        logger.warning(
            "`outer_folds` is %d but there are %d stimuli: using %d folds (one per stimulus).",
            n_folds,
            n_stimuli,
            k,
        )
    folds = np.empty(n_stimuli, dtype=np.int64)
    folds[np.random.default_rng(seed).permutation(n_stimuli)] = np.arange(n_stimuli) % k
    return folds


def cross_validated_predictions(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    stimuli: np.ndarray,
    ids: Sequence[str],
    folds: np.ndarray,
    standardize: bool,
    alphas: np.ndarray,
    n_splits: int | None,
    scoring: str = "r2",
    target_batch_size: int = 10000,
    device: Any = None,
    dtype: str | None = None,
) -> np.ndarray:
    """Predict every stimulus once, from a model fitted on the other folds' epochs.

    Each outer fold's model sees only the epochs of the other folds' stimuli: feature
    standardisation, centring and the inner cross-validation of the penalties
    (:func:`fit_epochs_ridge`, grouped by stimulus) use those epochs alone. The
    predictions of all folds share one intercept, the mean response over all epochs:
    with each fold's own training mean, a fold whose held-out stimuli respond more
    would get lower predictions, and r over all stimuli would be negative (about -0.1
    with 5 folds) wherever the features predict nothing. A constant common to all
    predictions changes no r.

    Parameters
    ----------
    X : ndarray, shape (n_epochs, n_features)
        Raw features of the stimulus of every epoch.
    Y : ndarray, shape (n_epochs, n_times, n_channels)
        Epochs.
    stimuli : ndarray of str, shape (n_epochs,)
        Stimulus id of every epoch.
    ids : sequence of str, shape (n_stimuli,)
        The stimuli to predict (each shown on at least one epoch).
    folds : ndarray of int, shape (n_stimuli,)
        Outer fold of each of them (:func:`stimulus_folds`).
    standardize : bool
        Scale the features to unit SD (they are always centred).
    alphas, n_splits, scoring, target_batch_size, device, dtype
        See :func:`fit_epochs_ridge`.

    Returns
    -------
    y_pred : ndarray of float32, shape (n_stimuli, n_times * n_channels)
        Predictions, targets ordered (time, channel).
    alphas : ndarray, shape (n_folds, n_times * n_channels)
        The penalty each fold's model chose for each target, folds in increasing order.
    """
    ids = np.asarray([str(s) for s in ids])
    folds = np.asarray(folds)
    if folds.shape != ids.shape:
        raise ValueError(f"`folds` must have shape {ids.shape}, got {folds.shape} instead.")
    first = {}
    for i, s in enumerate(np.asarray(stimuli)):
        first.setdefault(str(s), i)
    missing = [s for s in ids if s not in first]
    if missing:
        raise ValueError(f"`ids` names stimuli no epoch shows: {missing[:5]}.")
    rows = np.array([first[s] for s in ids])
    y_pred = np.empty((ids.size, int(np.prod(Y.shape[1:]))), dtype=np.float32)
    chosen = []
    for k in np.unique(folds):
        held = folds == k
        train = np.flatnonzero(~np.isin(stimuli, ids[held]))
        if np.unique(stimuli[train]).size < 2:
            raise ValueError(
                f"Outer fold {k} leaves {np.unique(stimuli[train]).size} training stimuli; "
                "at least 2 are needed (use fewer `outer_folds`)."
            )
        Xs, _, _ = _standardize(X, train, standardize)
        Xs = (Xs - Xs[train].mean(0)).astype(np.float32)
        result, _ = fit_epochs_ridge(
            Xs[train],
            Y[train],
            groups=stimuli[train],
            alphas=alphas,
            n_splits=n_splits,
            scoring=scoring,
            target_batch_size=target_batch_size,
            device=device,
            dtype=dtype,
        )
        y_pred[held] = result.predict(Xs[rows[held]])
        chosen.append(result.best_alpha)
    # One intercept for every fold: each fold's training mean is lower where its held-out
    # stimuli's mean is higher, which would make r over all stimuli negative on targets
    # the features do not predict (a common constant changes no r).
    intercept = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1).mean(0)
    return y_pred + intercept.astype(np.float32), np.stack(chosen)


def fold_refit(
    X: np.ndarray,
    data: np.ndarray,
    stimuli: np.ndarray,
    scored: Sequence[str],
    folds: np.ndarray,
    alphas: np.ndarray,
    cfg: Mapping[str, Any],
) -> FoldRefit:
    """The cross-validated fits of :func:`cross_validated_predictions`, for permutations.

    Parameters
    ----------
    X : ndarray, shape (n_epochs, n_features)
        Raw features of every epoch's stimulus.
    data : ndarray, shape (n_epochs, n_latencies, n_channels)
        Epochs.
    stimuli : ndarray of str, shape (n_epochs,)
        Stimulus of every epoch.
    scored : sequence of str, shape (n_stimuli,)
        Every stimulus, in the order of ``folds``.
    folds : ndarray of int, shape (n_stimuli,)
        Outer fold of each.
    alphas : ndarray, shape (n_folds, n_targets)
        Each fold's penalties.
    cfg : dict
        The section (``standardize``).

    Returns
    -------
    refit : FoldRefit
    """
    import scipy.sparse

    index = {s: i for i, s in enumerate(scored)}
    which = np.array([index[str(s)] for s in stimuli])
    n_epochs = which.size
    indicator = scipy.sparse.csr_array(
        (np.ones(n_epochs), (which, np.arange(n_epochs))), shape=(len(scored), n_epochs)
    )
    sums = indicator @ np.asarray(data, dtype=np.float64).reshape(n_epochs, -1)
    first = np.array([np.flatnonzero(which == i)[0] for i in range(len(scored))])
    grid = make_alphas(cfg["alphas"])
    n_splits = parse_cv(cfg["cv"])
    inner = []
    for k in np.unique(folds):
        train = np.flatnonzero(folds[which] != k)  # epochs
        # the splits cross_validated_predictions' inner cross-validation used
        splits = run_splits(np.asarray(stimuli)[train], n_splits, unit="stimulus")
        inner.append([np.unique(which[train][val]) for _, val in splits])
    reselect = cfg["scoring"] == "r2" and max(len(v) for v in inner) <= RESELECT_MAX_FOLDS
    squares = indicator @ (np.asarray(data, dtype=np.float64).reshape(n_epochs, -1) ** 2)
    return FoldRefit(
        X[first],
        sums,
        np.bincount(which, minlength=len(scored)),
        folds,
        alphas,
        bool(cfg["standardize"]),
        alpha_grid=grid if reselect else None,
        inner=inner if reselect else None,
        squares=squares if reselect else None,
    )

"""Multi-label concept decoding: which concepts a stimulus shows, read from the brain.

An annotation table gives each stimulus any number of concept labels (``dog``,
``outdoor``, ``face``...). One linear decoder per concept (one-vs-rest) is trained on the
brain patterns of the training stimuli (standardised with the training stimuli's mean
and SD) and scores the held-out ones; every stimulus is held out once across the folds.
The default decoder is a ridge classifier (:class:`sklearn.linear_model.RidgeClassifier`:
least squares to ``+-1`` targets) whose penalty is chosen per fold and concept by exact
leave-one-out error on the training stimuli (as :class:`sklearn.linear_model.RidgeCV`
with ``alpha_per_target``); standardised L2 logistic regression is the alternative. The
decision values are standardised within each test fold (the folds' models differ in
intercept and scale, mostly through their training sets' concept prevalence, which
would otherwise bias pooled scores below chance), then each concept is scored by the
area under the ROC curve and the average precision of its held-out values, and the
decoder as a whole by their mean (mean average precision, mAP).

The null relabels the stimuli (whole label rows, so concept co-occurrence is kept) and
reruns the whole cross-validation on the relabelled training folds, penalty choice
included, so that the observed scores and the null's come from the same procedure:
scoring fixed decision values against relabelled test folds ignores that each fold's
model was trained on the other folds' labels, which makes the folds' scores vary
together on autocorrelated noise, and such a null is too narrow. Stimuli shown close in
time share slow noise (autocorrelated BOLD, drift, overlapping responses) and a movie's
consecutive shots share their concepts, so free shuffles (which break both) give a null
that noise beats far more often than ``alpha``. Labels therefore move only within each
test fold's blocks of stimuli shown in the same runs, by a rotation or reflection of the
block's presentation order (as
:func:`~neuroflow.decoding.identification.order_permutations`), which keeps every
neighbourhood and each block's share of each concept (and so every fold's training
prevalence); ``p = (1 + #{null >= observed}) / (1 + n_permutations)``. For the ridge
decoder each fold's held-out values and leave-one-out residuals are fixed linear maps
of the training labels (one SVD per fold), so a relabelling costs a few matrix
products; the logistic decoder is refitted for every relabelling, which costs
``n_permutations x folds x concepts`` fits. Calibration on simulated movie runs:
``tests/decoding/test_decoding_calibration.py`` and
``bench/bench_decoding_calibration.py``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "CONCEPT_DECODERS",
    "DEFAULT_ALPHAS",
    "ConceptDecoding",
    "average_precision_columns",
    "concept_matrix",
    "decode_concepts",
    "read_concept_annotations",
    "roc_auc_columns",
    "run_sets",
]

#: Columns of an annotation table: the stimulus, and one concept per row (or several,
#: separated by ``;``, in a ``concepts`` column).
STIMULUS_COLUMNS = ("stim_file", "stimulus", "stim_id")
#: Label shuffles scored at once (each holds a few (n_stimuli, n_concepts) float arrays).
_PERMUTATION_BATCH = 64


@dataclass(frozen=True)
class ConceptDecoding:
    """Per-concept scores of a multi-label decoder and their relabelled null.

    Attributes
    ----------
    concepts : ndarray of str, shape (n_concepts,)
        Concept names.
    decision : ndarray of float64, shape (n_stimuli, n_concepts)
        Held-out decision value of every stimulus for every concept (the model's own,
        before the standardisation within folds that the scores use).
    auc, average_precision : ndarray of float64, shape (n_concepts,)
        Held-out ROC AUC and average precision (NaN for a concept without both
        positive and negative stimuli).
    auc_p, average_precision_p : ndarray of float64, shape (n_concepts,)
        Permutation p-values of each.
    mean_average_precision, mean_auc : float
        Means over the scored concepts.
    map_p, mean_auc_p : float
        Permutation p-values of the mAP and of the mean AUC.
    chance_average_precision : ndarray of float64, shape (n_concepts,)
        Prevalence of each concept: the average precision of an uninformed decoder.
    alpha : ndarray of float64, shape (n_folds, n_concepts) | None
        Ridge penalty chosen in every fold for every concept (NaN for the logistic
        decoder).
    decoder : str
        ``"ridge"`` or ``"logistic"``.
    null_map, null_mean_auc : ndarray of float64, shape (n_permutations,)
        mAP and mean AUC of every relabelling, cross-validated anew (empty without a
        test).
    """

    concepts: np.ndarray
    decision: np.ndarray
    auc: np.ndarray
    average_precision: np.ndarray
    auc_p: np.ndarray
    average_precision_p: np.ndarray
    mean_average_precision: float
    mean_auc: float
    map_p: float
    chance_average_precision: np.ndarray
    mean_auc_p: float = float("nan")
    alpha: np.ndarray | None = None
    decoder: str = "ridge"
    null_map: np.ndarray | None = None
    null_mean_auc: np.ndarray | None = None


def read_concept_annotations(path: str | os.PathLike) -> pd.DataFrame:
    """Read a stimulus -> concepts table (TSV) into long form.

    Parameters
    ----------
    path : path-like
        TSV with a stimulus column (one of ``stim_file``, ``stimulus``, ``stim_id``)
        and either a ``concept`` column (one row per stimulus and concept) or a
        ``concepts`` column (``;``-separated). ``n/a`` and empty cells are no concept.

    Returns
    -------
    table : pandas.DataFrame
        Columns ``stimulus`` and ``concept``, one row per pair, duplicates dropped.
    """
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    stim = next((c for c in STIMULUS_COLUMNS if c in table.columns), None)
    if stim is None:
        raise ValueError(
            f"{path}: the annotation table must have a stimulus column (one of "
            f"{', '.join(STIMULUS_COLUMNS)}), got columns {list(table.columns)} instead."
        )
    if "concept" in table.columns:
        pairs = table[[stim, "concept"]].rename(columns={stim: "stimulus"})
    elif "concepts" in table.columns:
        split = table["concepts"].str.split(";")
        pairs = pd.DataFrame({"stimulus": table[stim], "concept": split}).explode("concept")
    else:
        raise ValueError(
            f"{path}: the annotation table must have a `concept` or a `concepts` column, "
            f"got columns {list(table.columns)} instead."
        )
    pairs = pairs.assign(concept=pairs["concept"].str.strip())
    pairs = pairs[~pairs["concept"].isin(["", "n/a"])]
    return pairs.drop_duplicates().reset_index(drop=True)


def concept_matrix(
    stimuli: Sequence[str], annotations: pd.DataFrame, *, min_count: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-hot labels of the given stimuli.

    Parameters
    ----------
    stimuli : sequence of str, length n_stimuli
        The stimuli decoded, in order.
    annotations : pandas.DataFrame
        Long table from :func:`read_concept_annotations`.
    min_count : int
        Concepts with fewer positive (or fewer negative) stimuli are left out.

    Returns
    -------
    labels : ndarray of bool, shape (n_stimuli, n_concepts)
    concepts : ndarray of str, shape (n_concepts,)
        Sorted concept names.
    """
    stimuli = [str(s) for s in stimuli]
    known = annotations[annotations["stimulus"].isin(stimuli)]
    if known.empty:
        raise ValueError(
            "None of the decoded stimuli is in the annotation table: got stimuli like "
            f"{stimuli[:3]} and annotated ones like "
            f"{annotations['stimulus'].head(3).tolist()} instead."
        )
    concepts = np.array(sorted(known["concept"].unique()))
    row = {s: i for i, s in enumerate(stimuli)}
    col = {c: j for j, c in enumerate(concepts)}
    labels = np.zeros((len(stimuli), concepts.size), dtype=bool)
    labels[known["stimulus"].map(row).to_numpy(), known["concept"].map(col).to_numpy()] = True
    counts = labels.sum(axis=0)
    keep = (counts >= min_count) & (len(stimuli) - counts >= min_count)
    return labels[:, keep], concepts[keep]


def roc_auc_columns(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC of every column (Mann-Whitney U from average ranks; ties count half).

    Parameters
    ----------
    scores : array-like, shape (n_samples, n_columns)
        Decision values.
    labels : array-like of bool, shape (..., n_samples, n_columns)
        Labels; leading dimensions (e.g. permutations) are broadcast.

    Returns
    -------
    auc : ndarray of float64, shape (..., n_columns)
        NaN where a column has no positive or no negative sample.
    """
    from scipy.stats import rankdata

    ranks = rankdata(np.asarray(scores, dtype=np.float64), axis=0)
    labels = np.asarray(labels, dtype=bool)
    n_pos = labels.sum(axis=-2)
    n_neg = labels.shape[-2] - n_pos
    rank_sum = (ranks * labels).sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), auc, np.nan)


def average_precision_columns(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Average precision of every column, as :func:`sklearn.metrics.average_precision_score`.

    Parameters
    ----------
    scores : array-like, shape (n_samples, n_columns)
        Decision values.
    labels : array-like of bool, shape (..., n_samples, n_columns)
        Labels; leading dimensions (e.g. permutations) are broadcast.

    Returns
    -------
    ap : ndarray of float64, shape (..., n_columns)
        ``sum_k (R_k - R_{k-1}) P_k`` over the distinct thresholds (tied scores form one
        threshold); NaN where a column has no positive sample.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    n = scores.shape[0]
    order = np.argsort(-scores, axis=0, kind="stable")
    ordered = np.take_along_axis(scores, order, axis=0)
    lab = np.take_along_axis(labels, np.broadcast_to(order, labels.shape), axis=-2)
    tp = np.cumsum(lab.astype(np.float64), axis=-2)  # cast first: ~10x faster than dtype=
    # tied scores form one threshold: it sits at the last position of each run of ties
    last = np.ones(ordered.shape, dtype=bool)
    last[:-1] = ordered[1:] != ordered[:-1]
    first = np.ones(ordered.shape, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    positions = np.arange(n)[:, None]
    run_start = np.maximum.accumulate(np.where(first, positions, 0), axis=0)
    before = np.concatenate([np.zeros_like(tp[..., :1, :]), tp[..., :-1, :]], axis=-2)
    tp_before_run = np.take_along_axis(before, np.broadcast_to(run_start, tp.shape), axis=-2)
    n_pos = tp[..., -1, :]
    precision = tp / (positions + 1)
    gained = np.where(last, tp - tp_before_run, 0.0)  # positives the threshold adds
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = (gained * precision).sum(axis=-2) / n_pos
    return np.where(n_pos > 0, ap, np.nan)


#: Concept decoders: ridge classifier (closed form, penalty by leave-one-out error) or
#: standardised L2 logistic regression.
CONCEPT_DECODERS = ("ridge", "logistic")
#: Default candidate penalties of the ridge decoder (features standardised).
DEFAULT_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)


def _standardise_fold(X: np.ndarray, train: np.ndarray, test: np.ndarray) -> tuple:
    """Training and test patterns z-scored with the training mean and SD (a constant
    feature keeps SD 1, as :class:`~sklearn.preprocessing.StandardScaler`)."""
    mean = X[train].mean(axis=0)
    sd = X[train].std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (X[train] - mean) / sd, (X[test] - mean) / sd


@dataclass(frozen=True)
class _RidgeFold:
    """One fold's SVD of the standardised training patterns.

    ``U`` (n_train, rank), ``s`` (rank,), ``test_v`` (n_test, rank): the test patterns
    in the right singular basis; ``train`` and ``test`` the fold's indices.
    """

    train: np.ndarray
    test: np.ndarray
    U: np.ndarray
    s: np.ndarray
    test_v: np.ndarray


def _ridge_folds(
    X: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]]
) -> list[_RidgeFold]:
    """The label-independent part of every fold's ridge fits."""
    folds = []
    for train, test in splits:
        train, test = np.asarray(train), np.asarray(test)
        xtr, xte = _standardise_fold(X, train, test)
        U, s, Vt = np.linalg.svd(xtr, full_matrices=False)
        folds.append(_RidgeFold(train, test, U, s, xte @ Vt.T))
    return folds


def _ridge_fold_decisions(
    fold: _RidgeFold, Y: np.ndarray, alphas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out decision values of ridge fits to every label column of one fold.

    Parameters
    ----------
    fold : _RidgeFold
        The fold's SVD.
    Y : ndarray of float64, shape (n_train, n_columns)
        ``+-1`` training targets (columns: concepts, or concepts of every relabelling).
    alphas : ndarray of float64, shape (n_alphas,)
        Candidate penalties.

    Returns
    -------
    decision : ndarray of float64, shape (n_test, n_columns)
        Intercept plus the test patterns times the weights fitted with each column's
        penalty (:class:`sklearn.linear_model.RidgeClassifier`'s decision function).
    chosen : ndarray of float64, shape (n_columns,)
        The penalty of each column: the smallest leave-one-out squared error (the
        intercept unpenalised, as :class:`sklearn.linear_model.RidgeCV` computes it),
        ties going to the larger penalty.
    """
    from neuroflow.models.selection import select_penalty

    U, s = fold.U, fold.s
    n = U.shape[0]
    mean = Y.mean(axis=0)
    UtY = U.T @ (Y - mean)  # (rank, n_columns)
    s2 = s**2
    errors = np.empty((alphas.size, Y.shape[1]))
    for i, a in enumerate(alphas):
        shrink = s2 / (s2 + a)
        leverage = 1.0 / n + (U**2) @ shrink  # the intercept's 1/n included
        residual = (Y - mean) - U @ (shrink[:, None] * UtY)
        errors[i] = ((residual / (1.0 - leverage)[:, None]) ** 2).mean(axis=0)
    pick = select_penalty(-errors, alphas)
    decision = np.empty((fold.test.size, Y.shape[1]))
    for i in np.unique(pick):
        cols = pick == i
        coef = (s / (s2 + alphas[i]))[:, None] * UtY[:, cols]
        decision[:, cols] = mean[cols] + fold.test_v @ coef
    return decision, alphas[pick]


def _ridge_decisions(
    folds: Sequence[_RidgeFold], labels: np.ndarray, alphas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out ridge decision values of every column and the penalties chosen.

    ``labels`` (n_stimuli, n_columns) bool → decision (n_stimuli, n_columns) and
    penalties (n_folds, n_columns).
    """
    Y = np.where(labels, 1.0, -1.0)
    decision = np.full(labels.shape, np.nan)
    chosen = np.empty((len(folds), labels.shape[1]))
    for f, fold in enumerate(folds):
        decision[fold.test], chosen[f] = _ridge_fold_decisions(fold, Y[fold.train], alphas)
    return decision, chosen


def _logistic_decisions(
    X: np.ndarray, labels: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]], C: float
) -> np.ndarray:
    """Held-out decision values of standardised logistic regressions, (n_stimuli, n_columns)."""
    from sklearn.linear_model import LogisticRegression

    decision = np.full(labels.shape, np.nan)
    for train, test in splits:
        xtr, xte = _standardise_fold(X, np.asarray(train), np.asarray(test))
        for j in range(labels.shape[1]):
            y = labels[train, j]
            if y.all() or not y.any():  # nothing to learn from this fold: uninformed
                decision[test, j] = 0.0
                continue
            model = LogisticRegression(C=C, max_iter=1000).fit(xtr, y)
            decision[test, j] = model.decision_function(xte)
    return decision


def _standardise_within_folds(
    decision: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """Z-score each concept's decision values within each test fold."""
    out = np.array(decision, dtype=np.float64)
    for _, test in splits:
        values = out[test]
        sd = values.std(axis=0)
        out[test] = (values - values.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    return out


def _relabellings(
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    n: int,
    n_permutations: int,
    seed: int,
    order: Sequence[int] | np.ndarray | None,
    blocks: Sequence[str] | np.ndarray | None,
) -> np.ndarray:
    """Row indices of every null relabelling, shape (n_permutations, n).

    Labels move only within each block of each test fold (so that every fold keeps its
    share of each concept, in training and in test, and a block's offset keeps its
    labels), by a uniformly drawn rotation or reflection of the block's presentation
    order, or freely without ``order``; blocks are relabelled independently.
    """
    rng = np.random.default_rng(seed)
    position = np.arange(n)
    if order is not None:
        order = np.asarray(order)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(
                f"`order` must hold each stimulus index 0 .. {n - 1} once, got "
                f"{order.tolist()!r} instead."
            )
        position[order] = np.arange(n)
    if blocks is not None:
        blocks = np.asarray(blocks, dtype=str)
        if blocks.shape != (n,):
            raise ValueError(
                f"`blocks` must have one label per stimulus ({n}), got shape "
                f"{blocks.shape} instead."
            )
    perms = np.tile(np.arange(n), (n_permutations, 1))
    for _, test in splits:
        test = np.asarray(test)
        keys = np.zeros(test.size, dtype=int) if blocks is None else blocks[test]
        parts = [test[keys == b] for b in np.unique(keys)]
        for block in parts:
            items = block[np.argsort(position[block], kind="stable")]
            m = items.size
            if order is None:
                pick = rng.permuted(np.tile(np.arange(m), (n_permutations, 1)), axis=1)
            else:
                k = rng.integers(m, size=(n_permutations, 1))
                j = np.arange(m)[None, :]
                flip = rng.random((n_permutations, 1)) < 0.5
                pick = np.where(flip, (k - j) % m, (j + k) % m)
            perms[:, items] = items[pick]
    return perms


def run_sets(
    stimuli: Sequence[str] | np.ndarray,
    partitions: Sequence[str] | np.ndarray,
    ids: Sequence[str] | np.ndarray,
) -> np.ndarray:
    """The set of runs each stimulus was shown in, as one label.

    Parameters
    ----------
    stimuli, partitions : sequence of str, shape (n_presentations,)
        Stimulus and run of every presentation.
    ids : sequence of str, shape (n_stimuli,)
        The stimuli to label.

    Returns
    -------
    labels : ndarray of str, shape (n_stimuli,)
        ``"+"``-joined sorted runs; stimuli shown in the same runs share a label.
    """
    runs_of: dict[str, set[str]] = {}
    for s, part in zip(stimuli, partitions, strict=True):
        runs_of.setdefault(str(s), set()).add(str(part))
    return np.array(["+".join(sorted(runs_of[str(s)])) for s in ids], dtype=str)


def _check_decoder(decoder: str, C: float, alphas: Sequence[float]) -> np.ndarray:
    """The candidate penalties as an array, after checking the decoder's settings."""
    if decoder not in CONCEPT_DECODERS:
        raise ValueError(
            f"`decoder` must be one of {', '.join(CONCEPT_DECODERS)}, got {decoder!r} instead."
        )
    if not C > 0:
        raise ValueError(f"`C` must be positive, got {C!r} instead.")
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or alphas.size == 0 or not (alphas > 0).all():
        raise ValueError(
            f"`alphas` must be positive penalties, got {np.asarray(alphas).tolist()!r} instead."
        )
    return alphas


def _scores_of(
    columns: np.ndarray,
    X: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    folds: Sequence[_RidgeFold] | None,
    alphas: np.ndarray,
    C: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cross-validate every label column: decision, penalties, AUC and AP.

    ``columns`` (n_stimuli, n_columns) bool → decision (n_stimuli, n_columns),
    penalties (n_folds, n_columns) (NaN for the logistic decoder), AUC and average
    precision (n_columns,) of the decision standardised within test folds.
    """
    if folds is not None:
        decision, chosen = _ridge_decisions(folds, columns, alphas)
    else:
        decision = _logistic_decisions(X, columns, splits, C)
        chosen = np.full((len(splits), columns.shape[1]), np.nan)
    scored = _standardise_within_folds(decision, splits)
    return (
        decision,
        chosen,
        roc_auc_columns(scored, columns),
        average_precision_columns(scored, columns),
    )


def decode_concepts(
    X: np.ndarray,
    labels: np.ndarray,
    concepts: Sequence[str],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    decoder: str = "ridge",
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    C: float = 1.0,
    n_permutations: int = 1000,
    seed: int = 0,
    order: Sequence[int] | np.ndarray | None = None,
    blocks: Sequence[str] | np.ndarray | None = None,
) -> ConceptDecoding:
    """Decode every concept from brain patterns, held out by ``splits``.

    Parameters
    ----------
    X : array-like, shape (n_stimuli, n_features)
        One brain pattern per stimulus (e.g. an ROI's betas averaged over repeats).
    labels : array-like of bool, shape (n_stimuli, n_concepts)
        Multi-hot concept labels (:func:`concept_matrix`).
    concepts : sequence of str, length n_concepts
        Concept names.
    splits : sequence of (train, test) index arrays
        Folds that hold every stimulus out exactly once.
    decoder : {"ridge", "logistic"}
        Ridge classifier with the penalty chosen per fold and concept among ``alphas``
        by leave-one-out error, or L2 logistic regression with ``C``; both on patterns
        standardised with the training stimuli's mean and SD.
    alphas : sequence of float
        Candidate penalties of the ridge decoder.
    C : float
        Inverse L2 penalty of the logistic decoder.
    n_permutations : int
        Relabellings of the stimuli within the test folds for the null, each
        cross-validated anew (0: no test, p-values NaN).
    seed : int
        Seed of the relabellings.
    order : sequence of int, shape (n_stimuli,) | None
        The stimuli (row indices) in presentation order, e.g. by first presentation:
        the null rotates or reflects each test fold's label rows along it, calibrated
        when stimuli shown close in time have alike patterns and alike concepts.
        ``None`` shuffles rows freely within each test fold, valid only for
        exchangeable stimuli (e.g. shown in random order).
    blocks : sequence of str, shape (n_stimuli,) | None
        Blocks of stimuli that share slow offsets (e.g. :func:`run_sets`: the stimuli
        shown in the same runs). Labels then move only within a block's part of each
        test fold, so that a block's offset and its share of each concept stay paired
        as observed. ``None``: each test fold is one block.

    Returns
    -------
    result : ConceptDecoding
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(labels, dtype=bool)
    if X.ndim != 2 or labels.ndim != 2 or labels.shape[0] != X.shape[0]:
        raise ValueError(
            "`X` (n_stimuli, n_features) and `labels` (n_stimuli, n_concepts) must agree, "
            f"got {X.shape} and {labels.shape} instead."
        )
    if not np.isfinite(X).all():
        raise ValueError("`X` must be finite, got NaN or infinite values.")
    if len(concepts) != labels.shape[1]:
        raise ValueError(
            f"`concepts` must name the {labels.shape[1]} label columns, "
            f"got {len(concepts)} names instead."
        )
    held_out = np.concatenate([np.asarray(test) for _, test in splits])
    if np.sort(held_out).tolist() != list(range(X.shape[0])):
        raise ValueError("`splits` must hold every stimulus out exactly once.")
    alphas = _check_decoder(decoder, C, alphas)
    folds = _ridge_folds(X, splits) if decoder == "ridge" else None
    decision, chosen, auc, ap = _scores_of(labels, X, splits, folds, alphas, C)
    n, k = labels.shape
    if n_permutations > 0:
        orders = _relabellings(splits, n, n_permutations, seed, order, blocks)
        n_null = len(orders)
        null_auc, null_ap = [], []
        for start in range(0, n_null, _PERMUTATION_BATCH):  # memory flat in n_perm
            batch = orders[start : start + _PERMUTATION_BATCH]
            # one column per (relabelling, concept), cross-validated together
            columns = labels[batch].transpose(1, 0, 2).reshape(n, -1)
            _, _, b_auc, b_ap = _scores_of(columns, X, splits, folds, alphas, C)
            null_auc.append(b_auc.reshape(len(batch), k))
            null_ap.append(b_ap.reshape(len(batch), k))
        null_auc, null_ap = np.concatenate(null_auc), np.concatenate(null_ap)
        with np.errstate(invalid="ignore"):
            auc_p = (1 + (null_auc >= auc - 1e-12).sum(axis=0)) / (1 + n_null)
            ap_p = (1 + (null_ap >= ap - 1e-12).sum(axis=0)) / (1 + n_null)
            map_null = np.nanmean(null_ap, axis=1)
            mean_auc_null = np.nanmean(null_auc, axis=1)
        map_p = float((1 + (map_null >= np.nanmean(ap) - 1e-12).sum()) / (1 + n_null))
        mean_auc_p = float((1 + (mean_auc_null >= np.nanmean(auc) - 1e-12).sum()) / (1 + n_null))
    else:
        auc_p = ap_p = np.full(k, np.nan)
        map_p = mean_auc_p = float("nan")
        map_null = mean_auc_null = np.zeros(0)
    return ConceptDecoding(
        concepts=np.asarray(concepts, dtype=object).astype(str),
        decision=decision,
        auc=auc,
        average_precision=ap,
        auc_p=np.where(np.isnan(auc), np.nan, auc_p),
        average_precision_p=np.where(np.isnan(ap), np.nan, ap_p),
        mean_average_precision=float(np.nanmean(ap)),
        mean_auc=float(np.nanmean(auc)),
        map_p=map_p,
        chance_average_precision=labels.mean(axis=0),
        mean_auc_p=mean_auc_p,
        alpha=chosen,
        decoder=decoder,
        null_map=map_null,
        null_mean_auc=mean_auc_null,
    )

"""Multi-label concept decoding: which concepts a stimulus shows, read from the brain.

An annotation table gives each stimulus any number of concept labels (``dog``,
``outdoor``, ``face``...). One linear classifier per concept (one-vs-rest: standardised
L2 logistic regression) is trained on the brain patterns of the training stimuli and
scores the held-out ones; every stimulus is held out once across the folds. The
decision values are standardised within each test fold (the folds' models differ in
intercept and scale, mostly through their training sets' concept prevalence, which
would otherwise bias pooled scores below chance), then each concept is scored by the
area under the ROC curve and the average precision of its held-out values, and the
decoder as a whole by their mean (mean average precision, mAP).

The null keeps the decision values and shuffles which stimulus's label set they are
compared with (whole rows, so concept co-occurrence is kept). Held-out decision values
never saw their own labels, so under "the brain carries no concept information" every
pairing is equally likely; ``p = (1 + #{null >= observed}) / (1 + n_permutations)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = [
    "ConceptDecoding",
    "average_precision_columns",
    "concept_matrix",
    "decode_concepts",
    "read_concept_annotations",
    "roc_auc_columns",
]

#: Columns of an annotation table: the stimulus, and one concept per row (or several,
#: separated by ``;``, in a ``concepts`` column).
STIMULUS_COLUMNS = ("stim_file", "stimulus", "stim_id")
#: Label shuffles scored at once (each holds a few (n_stimuli, n_concepts) float arrays).
_PERMUTATION_BATCH = 64


@dataclass(frozen=True)
class ConceptDecoding:
    """Per-concept scores of a multi-label decoder and their label-shuffled null.

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


def _fold_decisions(
    X: np.ndarray, labels: np.ndarray, splits: Sequence[tuple[np.ndarray, np.ndarray]], C: float
) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    decision = np.full(labels.shape, np.nan)
    for train, test in splits:
        scaler = StandardScaler().fit(X[train])
        xtr, xte = scaler.transform(X[train]), scaler.transform(X[test])
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


def decode_concepts(
    X: np.ndarray,
    labels: np.ndarray,
    concepts: Sequence[str],
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    C: float = 1.0,
    n_permutations: int = 1000,
    seed: int = 0,
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
    C : float
        Inverse L2 penalty of the logistic regressions.
    n_permutations : int
        Row shuffles of the labels for the null (0: no test, p-values NaN).
    seed : int
        Seed of the shuffles.

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
    decision = _fold_decisions(X, labels, splits, C)
    scored = _standardise_within_folds(decision, splits)
    auc = roc_auc_columns(scored, labels)
    ap = average_precision_columns(scored, labels)
    if n_permutations > 0:
        rng = np.random.default_rng(seed)
        orders = [rng.permutation(len(labels)) for _ in range(n_permutations)]
        null_auc, null_ap = [], []
        for start in range(0, n_permutations, _PERMUTATION_BATCH):  # memory flat in n_perm
            perms = np.stack([labels[o] for o in orders[start : start + _PERMUTATION_BATCH]])
            null_auc.append(roc_auc_columns(scored, perms))
            null_ap.append(average_precision_columns(scored, perms))
        null_auc, null_ap = np.concatenate(null_auc), np.concatenate(null_ap)
        with np.errstate(invalid="ignore"):
            auc_p = (1 + (null_auc >= auc).sum(axis=0)) / (1 + n_permutations)
            ap_p = (1 + (null_ap >= ap).sum(axis=0)) / (1 + n_permutations)
            map_null = np.nanmean(null_ap, axis=1)
            mean_auc_null = np.nanmean(null_auc, axis=1)
        map_p = float((1 + (map_null >= np.nanmean(ap)).sum()) / (1 + n_permutations))
        mean_auc_p = float((1 + (mean_auc_null >= np.nanmean(auc)).sum()) / (1 + n_permutations))
    else:
        auc_p = ap_p = np.full(labels.shape[1], np.nan)
        map_p = mean_auc_p = float("nan")
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
    )

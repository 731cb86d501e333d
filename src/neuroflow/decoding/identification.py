"""Identification of test stimuli from decoded features, vectorised over items.

A decoder predicts a feature vector for every test item; each prediction is compared
with the true features of every test stimulus by Pearson correlation (one
``(n_items, n_items)`` matrix), and the rank of the correct stimulus among all
candidates gives top-k accuracy and mean rank. The permutation null reassigns the
stimulus labels of the test set: prediction ``i`` is scored against the features of
stimulus ``perm[i]``, read from the same rank matrix, so no model is refitted and no
Python loop runs over items or permutations.

Free shuffles are valid only when the test items are exchangeable. Patterns of stimuli
shown close in time share slow noise (autocorrelated BOLD, drift, overlapping
responses), and the features of a movie's consecutive shots (or the concepts of its
scenes) are alike: a shuffle breaks both dependences at once, its null is too narrow,
and noise then beats it in far more than ``alpha`` of the tests. Given the items'
order of presentation, :func:`order_permutations` instead rotates and reflects the
label sequence along it, which keeps every neighbourhood intact; the rotations and
reflections form a group, so the test stays exact for exchangeable items too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import rankdata

__all__ = [
    "correlation_matrix",
    "identification_metrics",
    "identification_null",
    "identification_ranks",
    "order_permutations",
    "presentation_order",
    "rank_matrix",
]


def _check_pair(pred: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred, dtype=np.float64)
    true = np.asarray(true, dtype=np.float64)
    if pred.ndim != 2 or true.ndim != 2 or pred.shape != true.shape:
        raise ValueError(
            "`pred` and `true` must both have shape (n_items, n_features), "
            f"got {pred.shape} and {true.shape} instead."
        )
    if pred.shape[0] < 2:
        raise ValueError(
            f"Identification needs at least 2 test items, got {pred.shape[0]} instead."
        )
    return pred, true


def _zrows(a: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    norm = np.sqrt((a**2).sum(axis=1, keepdims=True))
    return np.divide(a, norm, out=np.zeros_like(a), where=norm > 0)


def correlation_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation between every row of ``a`` and every row of ``b``.

    Parameters
    ----------
    a : array-like, shape (n_a, n_features)
        E.g. predicted features, one row per test item.
    b : array-like, shape (n_b, n_features)
        E.g. true features, one row per candidate stimulus.

    Returns
    -------
    r : ndarray of float64, shape (n_a, n_b)
        ``r[i, j]`` is the correlation of ``a[i]`` and ``b[j]`` over features; 0 where a
        row is constant.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(
            "`a` and `b` must be 2-D with the same number of features, "
            f"got {a.shape} and {b.shape} instead."
        )
    return np.clip(_zrows(a) @ _zrows(b).T, -1.0, 1.0)


def rank_matrix(similarity: np.ndarray) -> np.ndarray:
    """Rank of every candidate within each row, 1 = most similar, ties averaged.

    Parameters
    ----------
    similarity : array-like, shape (n_items, n_candidates)
        Higher is more similar.

    Returns
    -------
    ranks : ndarray of float64, shape (n_items, n_candidates)
        ``1 + #{k: s[i, k] > s[i, j]} + (#{k != j: s[i, k] == s[i, j]}) / 2``.
    """
    return rankdata(-np.asarray(similarity, dtype=np.float64), method="average", axis=1)


def identification_ranks(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """Rank of the correct stimulus for each test item.

    Parameters
    ----------
    pred : array-like, shape (n_items, n_features)
        Predicted features; row ``i`` belongs to the stimulus of ``true[i]``.
    true : array-like, shape (n_items, n_features)
        True features of the test stimuli (the candidate set).

    Returns
    -------
    ranks : ndarray of float64, shape (n_items,)
        1 when the correct stimulus is the best match; ties count half.
    """
    pred, true = _check_pair(pred, true)
    return np.diagonal(rank_matrix(correlation_matrix(pred, true))).copy()


def _metrics_from_ranks(ranks: np.ndarray, top_k: Sequence[int]) -> dict[str, np.ndarray]:
    out = {f"top{k}": (ranks <= k).mean(axis=-1) for k in top_k}
    out["mean_rank"] = ranks.mean(axis=-1)
    return out


def _check_top_k(top_k: Sequence[int], n_items: int) -> list[int]:
    ks = [int(k) for k in top_k]
    if not ks or any(k < 1 for k in ks):
        raise ValueError(f"`top_k` must hold positive ints, got {list(top_k)!r} instead.")
    return [min(k, n_items) for k in ks]


def identification_metrics(
    pred: np.ndarray, true: np.ndarray, *, top_k: Sequence[int] = (1, 5)
) -> dict[str, float]:
    """Top-k accuracy and mean rank of identifying each test stimulus among all.

    Parameters
    ----------
    pred : array-like, shape (n_items, n_features)
        Predicted features, one row per test stimulus (average repeats first with
        :func:`average_by_stimulus`).
    true : array-like, shape (n_items, n_features)
        True features in the same order.
    top_k : sequence of int
        Accuracies to report; ``k`` larger than ``n_items`` is clipped.

    Returns
    -------
    metrics : dict of str to float
        ``top{k}`` (fraction of items whose correct stimulus ranks within ``k``),
        ``mean_rank``, their chance levels ``chance_top{k} = k / n_items`` and
        ``chance_mean_rank = (n_items + 1) / 2``, and ``n_items``.
    """
    pred, true = _check_pair(pred, true)
    n = pred.shape[0]
    ks = _check_top_k(top_k, n)
    ranks = identification_ranks(pred, true)
    out = {key: float(v) for key, v in _metrics_from_ranks(ranks, ks).items()}
    out.update({f"chance_top{k}": k / n for k in ks})
    out["chance_mean_rank"] = (n + 1) / 2
    out["n_items"] = float(n)
    return out


def presentation_order(stimuli: Sequence[str] | np.ndarray) -> np.ndarray:
    """The distinct stimuli in the order of their first presentation.

    Parameters
    ----------
    stimuli : sequence of str, shape (n_presentations,)
        Stimulus of every presentation, in the order they were shown (runs in order,
        events by onset).

    Returns
    -------
    order : ndarray of int, shape (n_stimuli,)
        Indices into the sorted distinct ids (those of :func:`average_by_stimulus`),
        earliest first presentation first.
    """
    stimuli = np.asarray([str(v) for v in np.asarray(stimuli).ravel()], dtype=str)
    _, first = np.unique(stimuli, return_index=True)
    return np.argsort(first, kind="stable")


def _check_n_permutations(n_permutations: int) -> int:
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int | np.integer):
        raise ValueError(
            f"`n_permutations` must be a positive int, got {n_permutations!r} instead."
        )
    if n_permutations < 1:
        raise ValueError(
            f"`n_permutations` must be a positive int, got {n_permutations!r} instead."
        )
    return int(n_permutations)


def order_permutations(
    order: Sequence[int] | np.ndarray, n_permutations: int, *, seed: int | None = 0
) -> np.ndarray:
    """Relabellings that rotate or reflect the items' sequence in time.

    With the items in presentation order ``order[0], order[1], ...``, rotation ``k``
    gives the item at position ``j`` the label of the item at position ``(j + k) mod
    n`` and reflection ``k`` that of position ``(k - j) mod n``. Items shown next to each
    other keep neighbouring labels, so dependence between neighbours (shared slow noise,
    alike features of consecutive shots) is the same under every relabelling as in the
    observed pairing. The ``2 n`` rotations and reflections form a group: a test over
    them is exact for exchangeable items and, for items whose dependence does not change
    along the sequence, for dependent ones.

    Parameters
    ----------
    order : sequence of int, shape (n_items,)
        The item indices ``0 .. n_items - 1`` in presentation order (e.g. sorted by each
        item's first presentation).
    n_permutations : int
        The most relabellings returned. When the group has more than
        ``n_permutations + 1`` elements, a seeded sample of them without replacement.
    seed : int | None
        Seed of that sample.

    Returns
    -------
    perms : ndarray of int, shape (n_relabellings, n_items)
        ``perms[p, i]`` is the item whose label item ``i`` takes under relabelling
        ``p``; every distinct non-identity relabelling at most once, so
        ``n_relabellings = min(n_permutations, 2 n_items - 1)`` for 3+ items (1 for 2).
    """
    n_permutations = _check_n_permutations(n_permutations)
    order = np.asarray(order)
    n = order.size
    if order.ndim != 1 or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(
            f"`order` must hold each index 0 .. {n - 1} once, got {order.tolist()!r} instead."
        )
    j = np.arange(n)
    shifts = (j[None, :] + j[:, None]) % n  # row k: rotation k
    reflections = (j[:, None] - j[None, :]) % n  # row k: reflection k
    positions = np.unique(np.concatenate([shifts[1:], reflections]), axis=0)
    positions = positions[(positions != j).any(axis=1)]  # the identity is the observed one
    if positions.shape[0] > n_permutations:
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(positions.shape[0], n_permutations, replace=False))
        positions = positions[pick]
    perms = np.empty_like(positions)
    perms[:, order] = order[positions]
    return perms


def identification_null(
    pred: np.ndarray,
    true: np.ndarray,
    *,
    n_permutations: int = 1000,
    top_k: Sequence[int] = (1, 5),
    seed: int | None = 0,
    order: Sequence[int] | np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Null distribution of the identification metrics under relabelled test items.

    Each relabelling assigns prediction ``i`` to stimulus ``perm[i]``; the candidate
    set is unchanged, so the rank of the assigned stimulus is read from the rank
    matrix computed once.

    Parameters
    ----------
    pred, true : array-like, shape (n_items, n_features)
        As in :func:`identification_metrics`.
    n_permutations : int
        Number of relabellings (at most; see ``order``).
    top_k : sequence of int
        Accuracies to report.
    seed : int | None
        Seed of the relabellings.
    order : sequence of int, shape (n_items,) | None
        The items in presentation order: the null then rotates and reflects the labels
        along it (:func:`order_permutations`; at most ``2 n_items - 1`` relabellings),
        which stays calibrated when items shown close in time have alike patterns and
        alike features. ``None`` shuffles freely, valid only for exchangeable items
        (e.g. shown in random order).

    Returns
    -------
    null : dict of str to ndarray, shape (n_relabellings,)
        ``top{k}`` and ``mean_rank`` under each relabelling.
    """
    n_permutations = _check_n_permutations(n_permutations)
    pred, true = _check_pair(pred, true)
    n = pred.shape[0]
    ks = _check_top_k(top_k, n)
    ranks = rank_matrix(correlation_matrix(pred, true))
    if order is None:
        rng = np.random.default_rng(seed)
        perms = rng.permuted(np.tile(np.arange(n), (n_permutations, 1)), axis=1)
    else:
        if len(order) != n:
            raise ValueError(
                f"`order` must have one entry per test item ({n}), got {len(order)} instead."
            )
        perms = order_permutations(order, n_permutations, seed=seed)
    null_ranks = ranks[np.arange(n)[None, :], perms]
    return _metrics_from_ranks(null_ranks, ks)

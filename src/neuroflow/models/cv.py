"""Cross-validation splits that respect run boundaries.

Time points within a run are autocorrelated, so a validation fold always holds whole
runs: leave-one-run-out, or grouped k-fold with runs as groups. Random splits of time
points are deliberately not offered.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Split", "check_splits", "parse_cv", "run_splits"]

logger = logging.getLogger(__name__)

#: One cross-validation fold: (train indices, validation indices).
Split = tuple[np.ndarray, np.ndarray]


def parse_cv(cv: Any) -> int | None:
    """Read the ``cv`` configuration value.

    Parameters
    ----------
    cv : str | dict
        ``"leave-one-run-out"`` or ``{"grouped_kfold": k}`` with ``k >= 2``.

    Returns
    -------
    n_splits : int | None
        ``None`` for leave-one-run-out, else the number of grouped folds.
    """
    if cv == "leave-one-run-out":
        return None
    if isinstance(cv, dict) and set(cv) == {"grouped_kfold"}:
        k = cv["grouped_kfold"]
        if isinstance(k, int) and not isinstance(k, bool) and k >= 2:
            return k
        raise ValueError(f"`cv.grouped_kfold` must be an int >= 2, got {k!r} instead.")
    raise ValueError(
        f"`cv` must be 'leave-one-run-out' or {{'grouped_kfold': k}}, got {cv!r} instead."
    )


def run_splits(
    groups: Sequence[Any] | np.ndarray, n_splits: int | None = None, *, unit: str = "run"
) -> list[Split]:
    """Cross-validation folds whose validation sets are whole groups (runs, stimuli).

    Parameters
    ----------
    groups : array-like, shape (n_samples,)
        Group (run, stimulus) of every sample.
    n_splits : int | None
        ``None`` for leave-one-group-out, else the number of folds of
        :class:`sklearn.model_selection.GroupKFold`. A ``k`` larger than the number
        of groups gives one fold per group (with a logged warning): ``grouped_kfold: 5``
        on a dataset with 3 training runs is leave-one-run-out, not an error.
    unit : str
        What a group is (``"run"``, ``"stimulus"``...), for messages.

    Returns
    -------
    splits : list of (ndarray, ndarray)
        Sorted integer indices of training and validation samples for each fold.
    """
    groups = np.asarray(groups)
    if groups.ndim != 1:
        raise ValueError(f"`groups` must be 1-D, got shape {groups.shape} instead.")
    n_groups = len(np.unique(groups))
    plural = "stimuli" if unit == "stimulus" else f"{unit}s"
    if n_groups < 2:
        raise ValueError(
            f"Cross-validation needs at least 2 training {plural}, got {n_groups} instead."
        )
    # scikit-learn takes ~1 s to import: only the jobs that split import it
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    if n_splits is None:
        splitter = LeaveOneGroupOut()
    else:
        if n_splits > n_groups:
            logger.warning(
                "`grouped_kfold` is %d but there are %d training %s: using %d folds (one per %s).",
                n_splits,
                n_groups,
                plural,
                n_groups,
                unit,
            )
            n_splits = n_groups
        splitter = GroupKFold(n_splits=n_splits)
    dummy = np.zeros((len(groups), 1))
    splits = [
        (np.sort(train).astype(np.int64), np.sort(val).astype(np.int64))
        for train, val in splitter.split(dummy, groups=groups)
    ]
    check_splits(splits, groups)
    return splits


def check_splits(splits: Sequence[Split], groups: Sequence[Any] | np.ndarray) -> None:
    """Check that no run contributes samples to both sides of any fold.

    Parameters
    ----------
    splits : sequence of (ndarray, ndarray)
        Training and validation indices per fold.
    groups : array-like, shape (n_samples,)
        Run label of every sample.

    Raises
    ------
    ValueError
        If a fold is empty, indices are out of range, or a run is split across sides.
    """
    groups = np.asarray(groups)
    for i, (train, val) in enumerate(splits):
        train, val = np.asarray(train), np.asarray(val)
        if train.size == 0 or val.size == 0:
            raise ValueError(f"Fold {i} has an empty training or validation set.")
        if max(train.max(), val.max()) >= len(groups) or min(train.min(), val.min()) < 0:
            raise ValueError(f"Fold {i} has indices outside [0, {len(groups)}).")
        shared = np.intersect1d(groups[train], groups[val])
        if shared.size:
            raise ValueError(
                f"Fold {i} mixes runs between training and validation: {shared.tolist()}."
            )

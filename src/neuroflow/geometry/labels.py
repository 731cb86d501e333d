"""The class labels and held-out distribution the geometry stage reads from a labels table.

:func:`read_class_labels` maps stimuli to class labels and :func:`read_held_out` marks
the stimuli of a held-out (shifted) distribution, from the TSV that ``geometry.labels``
names; :func:`check_labels` and :func:`check_held_out` check them against each feature
store, for :mod:`neuroflow.geometry.stage`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.artifacts import open_dataset

__all__ = ["check_held_out", "check_labels", "labels_for", "read_class_labels", "read_held_out"]


def read_class_labels(
    path: str | os.PathLike, *, stimulus_column: str = "stim_file", label_column: str = "label"
) -> pd.Series:
    """Class label of each stimulus from a TSV file.

    Parameters
    ----------
    path : path-like
        Tab-separated table with a header.
    stimulus_column : str
        Column of stimulus ids (the ``stimulus`` coordinate of the feature stores).
    label_column : str
        Column of class labels.

    Returns
    -------
    labels : pandas.Series
        Labels (str) indexed by stimulus id, in file order.
    """
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    for column in (stimulus_column, label_column):
        if column not in table.columns:
            raise ValueError(
                f"{path} must have a column {column!r}, got columns {list(table.columns)} instead."
            )
    empty = int((table[label_column].str.strip() == "").sum())
    if empty:
        raise ValueError(f"{path}: column {label_column!r} must have no empty cells, got {empty}.")
    dup = table[stimulus_column][table[stimulus_column].duplicated()].tolist()
    if dup:
        raise ValueError(f"{path}: stimulus ids must be unique, got repeats {dup[:5]} instead.")
    return pd.Series(
        table[label_column].to_numpy(), index=pd.Index(table[stimulus_column], name="stimulus")
    )


def read_held_out(
    path: str | os.PathLike,
    *,
    stimulus_column: str = "stim_file",
    distribution_column: str,
    train_distribution: str,
) -> pd.Series:
    """Which stimuli of a labels TSV form the held-out distribution.

    Parameters
    ----------
    path : path-like
        Tab-separated table with a header (the class labels table).
    stimulus_column : str
        Column of stimulus ids.
    distribution_column : str
        Column naming each stimulus's distribution (stimulus set).
    train_distribution : str
        The value of ``distribution_column`` of the in-distribution (training)
        stimuli; every other value is held out.

    Returns
    -------
    held_out : pandas.Series of bool
        Indexed by stimulus id, in file order: True for the held-out stimuli.
    """
    table = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    for column, key in (
        (stimulus_column, "stimulus_column"),
        (distribution_column, "distribution_column"),
    ):
        if column not in table.columns:
            raise ValueError(
                f"{path} must have the column {column!r} named by `geometry.{key}`, got "
                f"columns {list(table.columns)} instead."
            )
    values = table[distribution_column].str.strip()
    found = sorted(set(values))
    if train_distribution not in found or len(found) < 2:
        raise ValueError(
            f"{path}: column {distribution_column!r} must hold `geometry.train_distribution` "
            f"({train_distribution!r}) and at least one other value, got {found[:10]} instead."
        )
    return pd.Series(
        (values != train_distribution).to_numpy(),
        index=pd.Index(table[stimulus_column], name="stimulus"),
    )


def check_labels(labels: Any) -> pd.Series | None:
    """``labels`` as a Series of str indexed by str stimulus ids, or None."""
    if labels is None:
        return None
    if not isinstance(labels, pd.Series):
        raise TypeError(
            f"labels must be a pandas.Series indexed by stimulus id, got "
            f"{type(labels).__name__} instead."
        )
    if labels.index.has_duplicates:
        dup = labels.index[labels.index.duplicated()].tolist()
        raise ValueError(f"labels must have unique stimulus ids, got repeats {dup[:5]} instead.")
    missing = int(labels.isna().sum())
    if missing:
        raise ValueError(f"labels must not be missing, got {missing} missing values instead.")
    return pd.Series(labels.astype(str).to_numpy(), index=labels.index.astype(str))


def check_held_out(held_out: Any, labels: pd.Series | None) -> np.ndarray | None:
    """``held_out`` as a boolean array in the order of ``labels``, or None."""
    if held_out is None:
        return None
    if labels is None:
        raise ValueError("held_out needs class labels, got labels=None instead.")
    if not isinstance(held_out, pd.Series) or held_out.dtype != bool:
        raise TypeError(
            "held_out must be a boolean pandas.Series indexed by stimulus id, got "
            f"{type(held_out).__name__} instead."
        )
    held_out = pd.Series(held_out.to_numpy(), index=held_out.index.astype(str))
    missing = labels.index.difference(held_out.index)
    if len(missing):
        raise ValueError(
            f"held_out must mark every labelled stimulus, got {len(missing)} without a "
            f"mark (e.g. {list(missing[:3])}) instead."
        )
    mask = held_out.loc[labels.index].to_numpy()
    if mask.all() or not mask.any():
        raise ValueError(
            "held_out must mark some labelled stimuli held out and some not, got "
            f"{int(mask.sum())} of {mask.size} held out instead."
        )
    return mask


def labels_for(
    labels_path: str | os.PathLike | None,
    feature_stores: Mapping[str, str | os.PathLike],
    cfg: Mapping[str, Any],
) -> tuple[pd.Series | None, int]:
    """The class labels of the stimuli the feature stores hold, and how many were dropped."""
    if labels_path is None:
        return None, 0
    labels = read_class_labels(
        labels_path, stimulus_column=cfg["stimulus_column"], label_column=cfg["label_column"]
    )
    first = open_dataset(next(iter(feature_stores.values())))
    ids = {str(s) for s in first["stimulus"].values}
    if "source_stimulus" in first.coords:
        ids |= {str(s) for s in first["source_stimulus"].values}
    kept = labels[labels.index.isin(sorted(ids))]
    if kept.nunique() < 2:
        raise ValueError(
            f"{labels_path} must label stimuli of the feature stores with at least two "
            f"classes, got {kept.nunique()} class(es) over {len(kept)} of its "
            f"{len(labels)} stimuli instead (ids as in column {cfg['stimulus_column']!r})."
        )
    return kept, len(labels) - len(kept)

"""Identification of held-out stimuli from fMRI patterns, per region and feature space.

A decoder maps each region's patterns to a feature space on the training stimuli;
each test pattern's prediction is ranked against the test stimuli's features
(:func:`identify_stimuli`: rank accuracy, top-1 and top-5), tested against the same
ranking with the test stimuli's labels permuted (:func:`permutation_p`); with several
sessions, the stimuli of each session are identified by decoders trained on the others
(:func:`session_splits`). :func:`neuroflow.decoding.fmri.decode_fmri` stores the
results.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.analysis_inputs import (
    average_by_stimulus,
    stimulus_features,
)
from neuroflow.artifacts import open_dataset
from neuroflow.io.events import is_missing
from neuroflow.progress import Progress

from .features import fit_feature_decoder, zscore_features
from .identification import (
    identification_metrics,
    identification_null,
)
from .options import (
    held_out_mask,
    identification_unavailable,
    metric_names,
)

__all__ = ["identify_stimuli", "permutation_p", "presentation_sessions", "session_splits"]

logger = logging.getLogger(__name__)


def identify_stimuli(
    betas: np.ndarray,
    stimuli: np.ndarray,
    features: np.ndarray,
    test: np.ndarray,
    *,
    alphas: Sequence[float],
    top_k: Sequence[int],
    n_splits: int,
    n_permutations: int,
    standardize: bool,
    seed: int,
    contrastive: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Decode features from trials and identify the held-out stimuli among themselves.

    Parameters
    ----------
    betas : ndarray, shape (n_trials, n_voxels)
        Single-trial responses.
    stimuli : ndarray of str, shape (n_trials,)
        Stimulus of each trial.
    features : ndarray, shape (n_trials, n_features)
        Features of each trial's stimulus.
    test : ndarray of bool, shape (n_trials,)
        Held-out trials (every trial of a test stimulus).
    alphas, top_k, n_splits, n_permutations, standardize, seed
        See :data:`neuroflow.decoding.stage.DEFAULT_CONFIG` (``identification``).
    contrastive : dict | None
        The ``decoding.contrastive`` settings (``hidden``, ``max_epochs``, ``patience``,
        ``lr``, ``weight_decay``, ``val_fraction``, ``device``) to train a contrastive
        decoder next to the ridge one; ``None`` for ridge only.

    Returns
    -------
    result : dict
        ``decoders`` (``["ridge"]`` or ``["ridge", "contrastive"]``); ``metrics``
        (n_decoders, n_metrics) and ``chance`` (n_metrics), one value per
        :func:`~neuroflow.decoding.options.metric_names` entry (top-k with k at or
        above the number of test stimuli is NaN); ``null`` (n_decoders,
        n_permutations, n_metrics), NaN past the ``2 n_test - 1`` relabellings a short
        test sequence has, and ``p`` (n_decoders, n_metrics); ``n_test`` (test
        stimuli).
    """
    keys = metric_names(list(top_k))
    train = ~test
    test_ids, _ = average_by_stimulus(np.zeros((int(test.sum()), 1)), stimuli[test])
    _, unique_train = np.unique(stimuli[train], return_index=True)
    F_train, F_test = features[train], features[test]
    first_test = np.array([np.flatnonzero(stimuli[test] == s)[0] for s in test_ids])
    F_test_items = F_test[first_test]
    if standardize:
        ref = F_train[unique_train]
        F_train, F_test_items = zscore_features(F_train, ref), zscore_features(F_test_items, ref)
    decoder = fit_feature_decoder(
        betas[train], F_train, groups=stimuli[train], alphas=alphas, n_splits=n_splits
    )
    preds = {"ridge": average_by_stimulus(decoder.predict(betas[test]), stimuli[test])[1]}
    if contrastive is not None:
        from .contrastive import contrastive_options, fit_contrastive

        options = contrastive_options(contrastive)
        con = fit_contrastive(betas[train], F_train, stimuli[train], seed=seed, **options)
        preds["contrastive"] = average_by_stimulus(con.transform(betas[test]), stimuli[test])[1]
    ks = [int(k) for k in top_k if int(k) < len(test_ids)] or [1]
    nan = float("nan")
    metrics = np.full((len(preds), len(keys)), nan)
    null = np.full((len(preds), n_permutations, len(keys)), nan)
    chance = np.full(len(keys), nan)
    for d, pred in enumerate(preds.values()):
        m = identification_metrics(pred, F_test_items, top_k=ks)
        metrics[d] = [m.get(k, nan) for k in keys]
        chance = np.array([m.get(f"chance_{k}", nan) for k in keys])
        if n_permutations:
            nl = identification_null(
                pred, F_test_items, n_permutations=n_permutations, top_k=ks, seed=seed,
                order=np.argsort(first_test, kind="stable"),
            )  # fmt: skip
            n_null = len(nl["mean_rank"])
            null[d, :n_null] = np.stack([nl.get(k, np.full(n_null, nan)) for k in keys], axis=1)
    return {
        "decoders": list(preds),
        "metrics": metrics,
        "chance": chance,
        "null": null,
        "p": permutation_p(metrics, null, keys),
        "n_test": len(test_ids),
    }


def permutation_p(metrics: np.ndarray, null: np.ndarray, keys: Sequence[str]) -> np.ndarray:
    """Permutation p-values of identification metrics (lower is better for the mean rank).

    Parameters
    ----------
    metrics : ndarray, shape (n_decoders, n_metrics)
        Observed values.
    null : ndarray, shape (n_decoders, n_permutations, n_metrics)
        Values under label shuffles.
    keys : list of str, length n_metrics
        Metric names (:func:`neuroflow.decoding.options.metric_names`).

    Returns
    -------
    p : ndarray, shape (n_decoders, n_metrics)
        ``(1 + #null at least as good) / (1 + n_null)`` over the finite null values
        (``n_null`` may be less than ``n_permutations``: a short test sequence has fewer
        relabellings); NaN where the metric is.
    """
    with np.errstate(invalid="ignore"):
        better = np.where(
            np.array(keys) == "mean_rank",
            null <= metrics[:, None] + 1e-12,
            null >= metrics[:, None] - 1e-12,
        )
    p = (1.0 + better.sum(axis=1)) / (1.0 + np.isfinite(null).sum(axis=1))
    p[~np.isfinite(metrics)] = np.nan
    return p


#: The session entity inside a single-trial store's ``run`` labels (``ses-<x>_...``).
_SESSION_IN_RUN = re.compile(r"(?:^|_)ses-([^_]+)")


def presentation_sessions(paths: Sequence[str | os.PathLike], partitions: np.ndarray) -> np.ndarray:
    """Session label of every presentation that :func:`fmri_patterns` returned.

    Parameters
    ----------
    paths : list of path-like
        The subject's stores, as given to :func:`fmri_patterns`.
    partitions : ndarray of str, shape (n_presentations,)
        Its partitions: a run store's index among ``paths``, or ``repeat-<n>`` for the
        trials of a single-trial store.

    Returns
    -------
    sessions : ndarray of str, shape (n_presentations,)
        A run store's ``entities.session``; a trial's session from the store's ``run``
        labels (``ses-<x>_task-..._run-<y>``, ``ses-<x>_run-<y>``); ``""`` where the
        data name none.
    """
    paths = [Path(p) for p in paths]
    partitions = np.asarray(partitions, dtype=str)
    if partitions.size and partitions[0].startswith("repeat-"):
        (path,) = paths
        ds = open_dataset(path)
        keep = np.array([not is_missing(v) for v in ds["stimulus"].values], dtype=bool)
        if "run" not in ds.coords:
            return np.full(int(keep.sum()), "")
        found = [_SESSION_IN_RUN.search(str(r)) for r in ds["run"].values[keep]]
        return np.array([m.group(1) if m else "" for m in found], dtype=str)
    labels = [
        str((open_dataset(p).attrs.get("entities") or {}).get("session") or "") for p in paths
    ]
    return np.array([labels[int(k)] for k in partitions], dtype=str)


def _identification(
    data, stim, own, regions, features, cfg, subject, others=()
) -> tuple[dict[tuple[int, int], dict[str, Any]], int]:
    """Identification results of one subject, keyed by (region index, space index).

    ``others`` (leave-one-subject-out) holds the other subjects' (patterns, stimuli) in
    the same targets: the decoders then train on their presentations of every stimulus
    but this subject's test stimuli, and are tested on this subject's presentations.
    """
    test = held_out_mask(stim, None, None)
    if others:
        test_ids = np.unique(stim[test])
        pool = [(x[~np.isin(st, test_ids)], st[~np.isin(st, test_ids)]) for x, st in others]
        data = np.concatenate([*(x for x, _ in pool), data[test]])
        stim = np.concatenate([*(st for _, st in pool), stim[test]])
        test = np.r_[np.zeros(sum(len(st) for _, st in pool), bool), np.ones(test.sum(), bool)]
    return _identify_regions(data, stim, test, own, regions, features, cfg, f"sub-{subject}")


def _identify_regions(
    data, stim, test, own, regions, features, cfg, label
) -> tuple[dict[tuple[int, int], dict[str, Any]], int]:
    """:func:`identify_stimuli` in every region the unit has and every feature space."""
    ic = cfg["identification"]
    n_test = int(np.unique(stim[test]).size)
    why = identification_unavailable(stim, test)
    if why is not None:
        logger.info("%s: identification skipped, %s.", label, why)
        return {}, n_test
    feats = {n: stimulus_features(p, stim) for n, p in features.items()}
    contrastive = cfg["contrastive"] if cfg["contrastive"]["enabled"] else None
    out = {}
    cells = sum(region in own for region in regions) * len(features)
    progress = Progress(cells, f"{label}: stimulus identification", "region x feature space")
    for b, region in enumerate(regions):
        if region not in own:
            continue
        for c, name in enumerate(features):
            out[b, c] = identify_stimuli(
                data[:, own[region]],
                stim,
                feats[name],
                test,
                alphas=ic["alphas"],
                top_k=ic["top_k"],
                n_splits=cfg["n_splits"],
                n_permutations=ic["n_permutations"],
                standardize=ic["standardize"],
                seed=int(cfg["seed"]),
                contrastive=contrastive,
            )
            progress.update()
    progress.close()
    return out, n_test


def session_splits(
    stimuli: np.ndarray, sessions: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Train and test presentations of every held-out session of one subject.

    The test stimuli are chosen once among all the subject's presentations, as within
    subjects (:func:`neuroflow.trial_split.select_test_stimuli` ``"auto"``). Held-out
    session ``s`` tests its presentations of test stimuli; the decoders train on the
    other sessions' presentations of the other stimuli, so that neither the session nor
    the stimulus of a test pattern is ever seen in training.

    Parameters
    ----------
    stimuli : ndarray of str, shape (n_presentations,)
        Stimulus of every presentation.
    sessions : ndarray of str, shape (n_presentations,)
        Session label of every presentation.

    Returns
    -------
    splits : dict of str to (train, test)
        Session label (sorted) to boolean masks of shape (n_presentations,); empty when
        the subject has fewer than 2 sessions.
    """
    from neuroflow.trial_split import select_test_stimuli

    stimuli, sessions = np.asarray(stimuli, dtype=str), np.asarray(sessions, dtype=str)
    if stimuli.shape != sessions.shape:
        raise ValueError(
            f"`sessions` must have one label per presentation ({stimuli.shape[0]}), got "
            f"{sessions.shape[0]} instead."
        )
    labels = sorted(set(sessions.tolist()))
    if len(labels) < 2:
        return {}
    is_test = np.isin(stimuli, select_test_stimuli(stimuli, "auto"))
    return {s: (~is_test & (sessions != s), is_test & (sessions == s)) for s in labels}


def _identification_by_session(
    data, stim, sessions, own, regions, features, cfg, subject
) -> tuple[dict[tuple[int, int], dict[str, Any]], int, dict[str, tuple[dict, int]]]:
    """Leave-one-session-out identification of one subject.

    Returns the results averaged over the held-out sessions, keyed by (region index,
    space index): metrics and null (per permutation) are the sessions' means, p-values
    from that mean null; the total test stimuli; and every session's own results.
    """
    splits = session_splits(stim, sessions)
    if not splits:
        logger.info(
            "sub-%s: leave-one-session-out identification skipped, a single session.", subject
        )
        return {}, 0, {}
    per = {}
    for ses, (train, test) in splits.items():
        pick = train | test
        per[ses] = _identify_regions(
            data[pick], stim[pick], test[pick], own, regions, features, cfg,
            f"sub-{subject} ses-{ses}",
        )  # fmt: skip
    keys = metric_names(cfg["identification"]["top_k"])
    mean = {}
    for cell in sorted({k for res, _ in per.values() for k in res}):
        runs = [res[cell] for res, _ in per.values() if cell in res]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a top-k no session defines
            metrics = np.nanmean([r["metrics"] for r in runs], axis=0)
            null = np.nanmean([r["null"] for r in runs], axis=0)
            chance = np.nanmean([r["chance"] for r in runs], axis=0)
        mean[cell] = {
            **runs[0],
            "metrics": metrics,
            "null": null,
            "chance": chance,
            "p": permutation_p(metrics, null, keys),
        }
    return mean, sum(n for res, n in per.values() if res), per


def _identification_vars(ident, n_test, subjects, regions, names, decoders, keys, ic):
    """Store variables of the identification results."""
    shape = (len(subjects), len(regions), len(names))
    metrics = np.full((*shape, len(decoders), len(keys)), np.nan)
    p_values = np.full_like(metrics, np.nan)
    chance = np.full((*shape, len(keys)), np.nan)
    null = np.full((*shape, len(decoders), ic["n_permutations"], len(keys)), np.nan)
    for a, s in enumerate(subjects):
        for (b, c), res in ident.get(s, {}).items():
            metrics[a, b, c], p_values[a, b, c] = res["metrics"], res["p"]
            chance[a, b, c], null[a, b, c] = res["chance"], res["null"]
    dims = ("subject", "roi", "feature_space", "decoder", "metric")
    return {
        "identification": (dims, metrics),
        "identification_p": (dims, p_values),
        "identification_chance": (("subject", "roi", "feature_space", "metric"), chance),
        "identification_null": (
            ("subject", "roi", "feature_space", "decoder", "id_permutation", "metric"),
            null,
        ),
        "n_test_stimuli": (("subject",), np.array([n_test.get(s, 0) for s in subjects])),
    }


def _session_vars(per_session, subjects, regions, names, decoders, keys):
    """Store variables of every held-out session's identification results."""
    labels = sorted({ses for per in per_session.values() for ses in per})
    shape = (len(subjects), len(labels), len(regions), len(names))
    metrics = np.full((*shape, len(decoders), len(keys)), np.nan)
    p_values = np.full_like(metrics, np.nan)
    n_test = np.zeros(shape[:2], dtype=np.int64)
    for a, s in enumerate(subjects):
        for ses, (res, n) in per_session.get(s, {}).items():
            e = labels.index(ses)
            n_test[a, e] = n
            for (b, c), r in res.items():
                metrics[a, e, b, c], p_values[a, e, b, c] = r["metrics"], r["p"]
    dims = ("subject", "session", "roi", "feature_space", "decoder", "metric")
    return {
        "identification_session": (dims, metrics),
        "identification_session_p": (dims, p_values),
        "n_test_stimuli_session": (("subject", "session"), n_test),
    }, labels

"""The ``decode_fmri`` stage: identification of held-out stimuli from single-trial betas.

For every subject's single-trial store (betas estimated by ``estimate_single_trials`` or
imported with ``dataset.source: betas``) and every ROI (and all voxels together):

1. the test stimuli are chosen among the stimuli the subject saw, as EEG encoding
   chooses them (``test: auto``: the most-presented ones when they are at most half of
   all, like NSD's shared images; else a seeded fifth); every trial of a test stimulus
   is held out;
2. a ridge decoder (penalty per feature dimension, chosen by cross-validation grouped by
   stimulus so that repeats never straddle folds) maps the training trials' betas to
   their stimuli's features, z-scored with the training stimuli's statistics;
3. the test trials are decoded and averaged per stimulus, and each is identified among
   all test stimuli by correlation (top-k accuracy, mean rank), with a null from
   shuffling the test labels — the retrieval step of brain-to-image decoding.

The decoder, metrics and null are those of the EEG identification
(:mod:`neuroflow.decoding.identification`), so the two modalities are scored alike.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.io.events import is_missing
from neuroflow.rois import labelled_rois
from neuroflow.variables import describe_variables

from .features import fit_feature_decoder, zscore_features
from .identification import average_by_stimulus, identification_metrics, identification_null
from .inputs import feature_info, stimulus_features
from .stage import _metric_names, _obj, resolve_config

__all__ = ["FORMAT_VERSION", "decode_fmri", "identify_stimuli"]

logger = logging.getLogger(__name__)

FORMAT_VERSION = 2

#: Label of the "every voxel" region.
ALL_VOXELS = "all"


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

    Returns
    -------
    result : dict
        ``metrics`` and ``chance`` (one value per :func:`_metric_names` entry; top-k with
        k at or above the number of test stimuli is NaN), ``null`` (n_permutations,
        n_metrics) and ``p`` (n_metrics), ``n_test`` (test stimuli).
    """
    keys = _metric_names(list(top_k))
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
    pred = average_by_stimulus(decoder.predict(betas[test]), stimuli[test])[1]
    ks = [int(k) for k in top_k if int(k) < len(test_ids)] or [1]
    m = identification_metrics(pred, F_test_items, top_k=ks)
    nan = float("nan")
    metrics = np.array([m.get(k, nan) for k in keys])
    chance = np.array([m.get(f"chance_{k}", nan) for k in keys])
    null = np.full((n_permutations, len(keys)), nan)
    if n_permutations:
        nl = identification_null(
            pred, F_test_items, n_permutations=n_permutations, top_k=ks, seed=seed
        )
        null = np.stack([nl.get(k, np.full(n_permutations, nan)) for k in keys], axis=1)
    with np.errstate(invalid="ignore"):
        better = np.where(
            np.array(keys) == "mean_rank", null <= metrics + 1e-12, null >= metrics - 1e-12
        )
    p = (1.0 + better.sum(axis=0)) / (1.0 + n_permutations)
    p[~np.isfinite(metrics)] = nan
    return {"metrics": metrics, "chance": chance, "null": null, "p": p, "n_test": len(test_ids)}


def _regions(ds: xr.Dataset) -> dict[str, np.ndarray]:
    """Voxel indices of every ROI of a store, and of all voxels."""
    roi = np.array([str(v) for v in ds["roi"].values]) if "roi" in ds.coords else None
    out = {}
    if roi is not None:
        for name in labelled_rois(roi):
            out[name] = np.flatnonzero(roi == name)
    out[ALL_VOXELS] = np.arange(ds.sizes["voxel"])
    return out


def decode_fmri(
    *,
    betas: Sequence[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Stage entry point: identification of held-out stimuli from single-trial betas.

    Parameters
    ----------
    betas : list of path-like
        One single-trial store per subject: ``betas`` (trial, voxel) with coordinates
        ``stimulus`` (trial) and ``roi`` (voxel), attribute ``entities.subject``.
    features : dict of str to path-like
        Feature-space name to feature store (frame- or word-level stores give each
        stimulus the mean of its rows).
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section (its ``seed``, ``n_splits`` and ``identification``).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        Store with ``identification`` and ``identification_p`` (subject, roi,
        feature_space, metric), ``identification_chance`` (subject, roi, feature_space,
        metric), ``identification_null`` (subject, roi, feature_space, id_permutation,
        metric) and ``n_test_stimuli`` (subject); ROI ``"all"`` holds every voxel.
        Regions a subject lacks are NaN for that subject.
    """
    cfg = resolve_config(config)
    ic = cfg["identification"]
    if not features:
        raise ValueError("`features` must name at least one feature store, got none.")
    if not betas:
        raise ValueError("`betas` must list at least one single-trial store, got none.")
    stores = [(Path(p), open_dataset(p)) for p in betas]
    subjects = [str((ds.attrs.get("entities") or {}).get("subject", p.stem)) for p, ds in stores]
    regions = sorted({r for _, ds in stores for r in _regions(ds)} - {ALL_VOXELS})
    regions.append(ALL_VOXELS)
    keys = _metric_names(ic["top_k"])
    names = list(features)
    shape = (len(stores), len(regions), len(names))
    metrics = np.full((*shape, len(keys)), np.nan)
    chance, p_values = np.full_like(metrics, np.nan), np.full_like(metrics, np.nan)
    null = np.full((*shape, ic["n_permutations"], len(keys)), np.nan)
    n_test = np.zeros(len(stores), dtype=np.int64)
    from neuroflow.encoding.eeg import select_test_stimuli

    for a, (path, ds) in enumerate(stores):
        for field in ("betas", "stimulus"):
            if field not in ds.variables:
                raise ValueError(f"{path}: missing field `{field}` of a single-trial store.")
        stim = np.array([str(s) for s in ds["stimulus"].values])
        keep = np.array([not is_missing(s) for s in stim])
        stim = stim[keep]
        data = np.asarray(ds["betas"].values, dtype=np.float64)[keep]
        if not np.isfinite(data).all():
            raise ValueError(f"{path}: field `betas` holds non-finite values.")
        test = np.isin(stim, select_test_stimuli(stim, "auto"))
        n_test[a] = np.unique(stim[test]).size
        if n_test[a] < 2 or np.unique(stim[~test]).size < 2:
            logger.info(
                "sub-%s: identification skipped, %d test and %d training stimuli.",
                subjects[a],
                n_test[a],
                np.unique(stim[~test]).size,
            )
            continue
        feats = {n: stimulus_features(p, stim) for n, p in features.items()}
        own = _regions(ds)
        for b, region in enumerate(regions):
            if region not in own:
                continue
            for c, name in enumerate(names):
                res = identify_stimuli(
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
                )
                metrics[a, b, c], chance[a, b, c] = res["metrics"], res["chance"]
                p_values[a, b, c], null[a, b, c] = res["p"], res["null"]
    if not n_test.any() or np.isnan(metrics).all():
        raise ValueError(
            f"{stores[0][0]}: no subject has 2+ held-out and 2+ training stimuli to identify."
        )
    dims = ("subject", "roi", "feature_space", "metric")
    out = xr.Dataset(
        {
            "identification": (dims, metrics),
            "identification_p": (dims, p_values),
            "identification_chance": (dims, chance),
            "identification_null": (
                ("subject", "roi", "feature_space", "id_permutation", "metric"),
                null,
            ),
            "n_test_stimuli": (("subject",), n_test),
        },
        coords={
            "subject": _obj(subjects),
            "roi": _obj(regions),
            "feature_space": _obj(names),
            "metric": _obj(keys),
        },
        attrs={
            "stage": "decode_fmri",
            "decoder": "ridge",
            "test_stimuli": "auto (the most-presented stimuli, else a seeded fifth)",
            "feature_models": {n: feature_info(p) for n, p in features.items()},
        },
    )
    return write_dataset(describe_variables(out), output, provenance=provenance)

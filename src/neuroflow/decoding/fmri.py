"""The ``decode_fmri`` stage: identification of held-out stimuli and concept decoding.

Every presentation of a stimulus gives one brain pattern: its single-trial betas
(estimated by ``estimate_single_trials`` or imported with ``dataset.source: betas``;
``decoding.fmri.patterns: trials``) or, for block and movie designs, the mean
preprocessed BOLD over the event's window shifted by the haemodynamic lag
(``patterns: events``). For every subject and every ROI (and all voxels together):

Identification (per feature space)
    1. the test stimuli are chosen among the stimuli the subject saw, as EEG encoding
       chooses them (``test: auto``: the most-presented ones when they are at most half
       of all, like NSD's shared images or a repeated test movie; else a seeded fifth);
       every presentation of a test stimulus is held out;
    2. a ridge decoder (penalty per feature dimension, chosen by cross-validation
       grouped by stimulus so that repeats never straddle folds) and, with
       ``decoding.contrastive.enabled``, a contrastive (InfoNCE) decoder map the
       training patterns to their stimuli's features, z-scored with the training
       stimuli's statistics;
    3. the test patterns are decoded and averaged per stimulus, and each is identified
       among all test stimuli by correlation (top-k accuracy, mean rank), with a null
       from rotating and reflecting the test labels along the stimuli's order of
       presentation (neighbours in time keep their shared slow noise and alike
       features, which free shuffles break): the retrieval step of brain-to-image
       decoding.

Across subjects or sessions (``decoding.fmri.cv``)
    ``leave-one-subject-out`` trains each subject's decoders on the other subjects'
    presentations, on the targets all subjects share; ``leave-one-session-out`` holds
    out each session of a subject in turn (its presentations of the test stimuli),
    decoded by decoders of the subject's other sessions' presentations of the other
    stimuli (:func:`session_splits`), and averages the sessions' scores and nulls.

Concept decoding (with an annotation table)
    Each stimulus's pattern (repeats averaged) is decoded into its concept labels by
    one-vs-rest ridge classifiers (``decoder: logistic``: logistic regressions), held
    out by folds grouped by run (stimuli shown in the same runs stay together, so slow
    signal shared within a run cannot carry labels across folds; seeded stimulus folds
    for trials), and scored by per-concept ROC AUC and average precision, their means,
    and a null that rotates and reflects the label sequence along the stimuli's order
    of presentation and cross-validates the decoders anew on every relabelling
    (:mod:`neuroflow.decoding.concepts`).

The decoders and metrics are those of the EEG identification
(:mod:`neuroflow.decoding.identification`), so the two modalities are scored alike.

The identification of held-out stimuli is computed by
:mod:`neuroflow.decoding.fmri_identification`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.analysis_inputs import (
    average_by_stimulus,
    feature_info,
    stimulus_patterns,
)
from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.decoding.fmri_identification import (
    _identification,
    _identification_by_session,
    _identification_vars,
    _session_vars,
    presentation_sessions,
)
from neuroflow.io.events import is_missing
from neuroflow.progress import Progress
from neuroflow.rois import labelled_rois
from neuroflow.variables import describe_variables

from .concepts import concept_matrix, decode_concepts, read_concept_annotations, run_sets
from .identification import (
    presentation_order,
)
from .options import (
    concepts_unavailable,
    metric_names,
    resolve_config,
)
from .stage import _obj

__all__ = [
    "FORMAT_VERSION",
    "concept_folds",
    "decode_fmri",
    "fmri_patterns",
]


logger = logging.getLogger(__name__)


FORMAT_VERSION = 4


#: Label of the "every voxel" region.
ALL_VOXELS = "all"


def _regions(
    ds_or_roi: xr.Dataset | np.ndarray, *, whole_only: bool = False
) -> dict[str, np.ndarray]:
    """Voxel indices of every labelled ROI (unless ``whole_only``), and of all voxels."""
    if isinstance(ds_or_roi, xr.Dataset):
        ds = ds_or_roi
        roi = np.array([str(v) for v in ds["roi"].values]) if "roi" in ds.coords else None
        n_voxels = ds.sizes["voxel"]
    else:
        roi, n_voxels = np.asarray(ds_or_roi, dtype=str), len(ds_or_roi)
    out = {}
    if roi is not None and not whole_only:
        for name in labelled_rois(roi):
            out[name] = np.flatnonzero(roi == name)
    out[ALL_VOXELS] = np.arange(n_voxels)
    return out


def fmri_patterns(
    paths: Sequence[str | os.PathLike],
    *,
    hrf_lag: float,
    stimulus_events: Mapping[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One brain pattern per stimulus presentation of one subject.

    Parameters
    ----------
    paths : list of path-like
        The subject's ``preprocess_fmri`` run stores (one pattern per stimulus event:
        its mean BOLD over the event window shifted by ``hrf_lag``) or its single-trial
        store (one pattern per trial).
    hrf_lag : float
        Haemodynamic lag (s) of event windows.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events that are not stimuli are left out.

    Returns
    -------
    patterns : ndarray of float64, shape (n_presentations, n_voxels)
    stimuli : ndarray of str, shape (n_presentations,)
    partitions : ndarray of str, shape (n_presentations,)
        The run of each event (its index among ``paths``), or ``repeat-<n>`` for the
        n-th trial of a stimulus in a single-trial store.
    roi : ndarray of str, shape (n_voxels,)
        ROI label of each voxel.
    """
    paths = [Path(p) for p in paths]
    for p in paths:
        ds = open_dataset(p)
        if "betas" in ds.variables and "stimulus" not in ds.variables:
            raise ValueError(f"{p}: missing field `stimulus` of a single-trial store.")
        if "roi" not in ds.variables:
            raise ValueError(f"{p}: missing field `roi` (voxel labels) of a brain store.")
    data, stim, parts, roi = stimulus_patterns(paths, hrf_lag, stimulus_events)
    if not np.isfinite(data).all():
        field = "betas" if "betas" in open_dataset(paths[0]).variables else "bold"
        raise ValueError(
            f"{paths[0]}: field `{field}` must be finite, got NaN or infinite values instead."
        )
    return data, stim, parts, np.asarray(roi, dtype=str)


def concept_folds(
    stimuli: np.ndarray, partitions: np.ndarray, ids: np.ndarray, *, n_splits: int, seed: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], str]:
    """Folds of the per-stimulus patterns for concept decoding.

    Parameters
    ----------
    stimuli, partitions : ndarray of str, shape (n_presentations,)
        Stimulus and run (or ``repeat-<n>``) of every presentation.
    ids : ndarray of str, shape (n_stimuli,)
        The decoded stimuli, in the order of the patterns.
    n_splits : int
        Folds wanted (clipped to the number of groups).
    seed : int
        Seed of the stimulus folds.

    Returns
    -------
    splits : list of (train, test) index arrays into ``ids``
    grouping : str
        ``"run"`` (stimuli shown in the same set of runs stay in one fold) or
        ``"stimulus"`` (seeded folds of stimuli: trials, or a single run).
    """
    from sklearn.model_selection import GroupKFold, KFold

    groups = run_sets(stimuli, partitions, ids)
    by_run = not any(str(p).startswith("repeat-") for p in partitions)
    if by_run and np.unique(groups).size >= 2:
        k = min(int(n_splits), int(np.unique(groups).size))
        return list(GroupKFold(n_splits=k).split(ids, groups=groups)), "run"
    k = min(int(n_splits), len(ids))
    return list(KFold(n_splits=k, shuffle=True, random_state=seed).split(ids)), "stimulus"


def _subject_of(path: Path, attrs: Mapping[str, Any]) -> str:
    """``entities.subject`` of a brain store (its attributes), else its folder's name."""
    name = (attrs.get("entities") or {}).get("subject")
    return str(name) if name else path.parent.name.removeprefix("sub-")


def _concepts(data, stim, parts, own, regions, annotations, cfg, subject):
    """Concept decoding of one subject: {region index: ConceptDecoding}, grouping."""
    cc = cfg["fmri"]["concepts"]
    ids, _ = average_by_stimulus(data[:, :1], stim)
    why = concepts_unavailable(ids, annotations, min_count=cc["min_count"])
    if why is not None:
        log = logger.warning if "annotation table" in why else logger.info
        log("sub-%s: concept decoding skipped, %s.", subject, why)
        return {}, ""
    labels, names = concept_matrix(ids, annotations, min_count=cc["min_count"])
    splits, grouping = concept_folds(
        stim, parts, ids, n_splits=cfg["n_splits"], seed=int(cfg["seed"])
    )
    out = {}
    n_regions = sum(region in own for region in regions)
    progress = Progress(n_regions, f"sub-{subject}: concept decoding", "regions")
    for b, region in enumerate(regions):
        if region not in own:
            continue
        _, X = average_by_stimulus(data[:, own[region]], stim)
        out[b] = decode_concepts(
            X,
            labels,
            names,
            splits,
            decoder=cc["decoder"],
            alphas=cc["alphas"],
            C=cc["C"],
            n_permutations=cc["n_permutations"],
            seed=int(cfg["seed"]),
            order=presentation_order(stim),
            blocks=run_sets(stim, parts, ids) if grouping == "run" else None,
        )
        progress.update()
    progress.close()
    return out, grouping


def _stimulus_mask(stim: np.ndarray) -> np.ndarray:
    """The presentations with a stimulus id."""
    return np.array([not is_missing(v) for v in stim], dtype=bool)


def _kept(loaded: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Patterns, stimuli and partitions of the presentations with a stimulus id."""
    data, stim, parts, _ = loaded
    keep = _stimulus_mask(stim)
    return data[keep], stim[keep], parts[keep]


def _target_keys(path: Path, ds: xr.Dataset, parcels: bool) -> list[object]:
    """What makes a target the same in every subject: its parcel, else its position."""
    if parcels:
        return [str(v) for v in ds["roi"].values]
    if not all(c in ds.coords for c in ("x", "y", "z")):
        raise ValueError(
            f"{path}: `decoding.fmri.cv: leave-one-subject-out` needs the voxels' world "
            "coordinates (fields `x`, `y`, `z`) to match voxels across subjects, got none."
        )
    xyz = np.round(np.stack([ds[c].values for c in ("x", "y", "z")], axis=1), 2)
    return [tuple(v) for v in xyz.tolist()]


def _shared_space(
    by_sub: Mapping[str, list[Path]], loaded: Mapping[str, tuple], parcels: Mapping[str, bool]
) -> tuple[dict[str, tuple], int]:
    """Every subject's patterns on the targets all subjects share, z-scored per subject.

    Targets are matched by parcel (parcel time series) or by world position (voxels on a
    common template grid). Each subject's patterns are z-scored per target over its
    presentations (no labels involved), so that offsets and scales that differ between
    subjects do not separate them.
    """
    if len(loaded) < 2:
        raise ValueError(
            "`decoding.fmri.cv: leave-one-subject-out` needs 2+ subjects, got "
            f"{len(loaded)} instead."
        )
    keys = {}
    for s, paths in by_sub.items():
        keys[s] = _target_keys(paths[0], open_dataset(paths[0]), parcels[s])
    common = set.intersection(*(set(k) for k in keys.values()))
    order = [k for k in keys[next(iter(keys))] if k in common]
    if len(order) < 2:
        raise ValueError(
            f"{by_sub[next(iter(by_sub))][0]}: `decoding.fmri.cv: leave-one-subject-out` "
            "needs targets shared by every subject (parcels, or voxels of a common template "
            f"grid), got {len(order)} shared instead."
        )
    out = {}
    for s, (data, stim, parts, roi) in loaded.items():
        where = {k: i for i, k in enumerate(keys[s])}
        index = np.array([where[k] for k in order])
        x = data[:, index]
        sd = x.std(axis=0)
        x = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        out[s] = (x, stim, parts, np.asarray(roi)[index])
    return out, len(order)


def decode_fmri(
    *,
    brain: Sequence[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    patterns: str = "trials",
    concepts: str | os.PathLike | None = None,
    stimulus_events: Mapping[str, Any] | None = None,
) -> Path:
    """Stage entry point: identification and concept decoding from fMRI patterns.

    Parameters
    ----------
    brain : list of path-like
        Single-trial stores (one per subject: ``betas`` (trial, voxel) with coordinates
        ``stimulus`` (trial) and ``roi`` (voxel)) or ``preprocess_fmri`` run stores
        (``bold``, events with ``stim_file``), each with ``entities.subject``.
    features : dict of str to path-like
        Feature-space name to feature store (frame- or word-level stores give each
        stimulus the mean of its rows); empty for concept decoding only.
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section (its ``seed``, ``n_splits``, ``identification``,
        ``contrastive`` and ``fmri``).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    patterns : str
        ``"trials"`` or ``"events"``: what the brain stores hold (for the record; the
        stores' fields decide how they are read).
    concepts : path-like | None
        Concept annotation TSV (:func:`neuroflow.decoding.concepts.read_concept_annotations`);
        ``None`` skips concept decoding.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events that are not stimuli are left out.

    Returns
    -------
    output : Path
        Store with, for identification, ``identification`` and ``identification_p``
        (subject, roi, feature_space, decoder, metric), ``identification_chance``
        (subject, roi, feature_space, metric), ``identification_null`` (subject, roi,
        feature_space, decoder, id_permutation, metric) and ``n_test_stimuli``
        (subject); for concept decoding, ``concept_auc``, ``concept_auc_p``,
        ``concept_average_precision`` and ``concept_average_precision_p`` (subject,
        roi, concept), ``concept_prevalence`` (subject, concept), ``concept_mean_auc``,
        ``concept_mean_auc_p``, ``concept_map`` and ``concept_map_p`` (subject, roi),
        ``concept_map_chance`` (subject). ROI ``"all"`` holds every voxel; regions,
        concepts or analyses a subject lacks are NaN for that subject. With
        ``cv: leave-one-session-out`` the subject's identification variables are the
        means over its held-out sessions (p-values from the mean null), and
        ``identification_session`` and ``identification_session_p`` (subject, session,
        roi, feature_space, decoder, metric) and ``n_test_stimuli_session`` (subject,
        session) keep every session's own; attribute ``held_out_unit = "session"``.
    """
    cfg = resolve_config(config)
    ic, fc = cfg["identification"], cfg["fmri"]
    identify = bool(features) and bool(ic["enabled"])
    if concepts is not None and not fc["concepts"]["enabled"]:
        concepts = None
    if not identify and concepts is None:
        raise ValueError(
            "`features` must name at least one feature store (or `concepts` an annotation "
            "table), got none."
        )
    if not brain:
        raise ValueError("`brain` must list at least one single-trial or run store, got none.")
    if patterns not in ("trials", "events"):
        raise ValueError(f"`patterns` must be 'trials' or 'events', got {patterns!r} instead.")
    annotations = read_concept_annotations(concepts) if concepts is not None else None
    by_sub: dict[str, list[Path]] = {}
    attrs: dict[Path, Mapping[str, Any]] = {}
    for p in map(Path, brain):
        attrs[p] = open_dataset(p).attrs
        by_sub.setdefault(_subject_of(p, attrs[p]), []).append(p)
    subjects = sorted(by_sub)
    loaded = {
        s: fmri_patterns(by_sub[s], hrf_lag=fc["hrf_lag"], stimulus_events=stimulus_events)
        for s in subjects
    }
    across = fc["cv"] == "leave-one-subject-out" and identify
    by_session = fc["cv"] == "leave-one-session-out" and identify
    sessions = (
        {s: presentation_sessions(by_sub[s], loaded[s][2]) for s in subjects} if by_session else {}
    )
    parcels = {s: attrs[by_sub[s][0]].get("target_kind") == "parcel" for s in subjects}
    if across:
        loaded, n_shared = _shared_space(by_sub, loaded, parcels)
    # parcel time series: every parcel is its own label, so only all parcels together
    owns = {s: _regions(loaded[s][3], whole_only=parcels[s]) for s in subjects}
    regions = [*sorted({r for own in owns.values() for r in own} - {ALL_VOXELS}), ALL_VOXELS]
    keys = metric_names(ic["top_k"])
    names = list(features) if identify else []
    decoders = ["ridge", "contrastive"] if cfg["contrastive"]["enabled"] else ["ridge"]
    ident, concept_res, n_test, grouping, per_session = {}, {}, {}, {}, {}
    for s in subjects:
        data, stim, parts = _kept(loaded[s])
        if by_session:
            ses = sessions[s][_stimulus_mask(loaded[s][1])]
            ident[s], n_test[s], per_session[s] = _identification_by_session(
                data, stim, ses, owns[s], regions, features, cfg, s
            )
        elif identify:
            others = [_kept(loaded[u])[:2] for u in subjects if u != s] if across else ()
            ident[s], n_test[s] = _identification(
                data, stim, owns[s], regions, features, cfg, s, others
            )
        if annotations is not None:
            concept_res[s], grouping[s] = _concepts(
                data, stim, parts, owns[s], regions, annotations, cfg, s
            )
    if by_session and not any(per_session.values()):
        raise ValueError(
            f"{by_sub[subjects[0]][0]}: `decoding.fmri.cv: leave-one-session-out` needs a "
            "subject with 2+ sessions (entity `ses`), got "
            f"{ {s: sorted(set(sessions[s].tolist()) - {''}) for s in subjects} } instead."
        )
    if not any(ident.values()) and not any(concept_res.values()):
        raise ValueError(
            f"{by_sub[subjects[0]][0]}: no subject has 2+ held-out and 2+ training stimuli "
            "to identify, nor concepts with enough labelled stimuli to decode."
        )
    coords: dict[str, Any] = {"subject": _obj(subjects), "roi": _obj(regions)}
    data_vars: dict[str, Any] = {}
    attrs: dict[str, Any] = {
        "stage": "decode_fmri",
        "patterns": patterns,
        "hrf_lag": float(fc["hrf_lag"]) if patterns == "events" else None,
        "test_stimuli": "auto (the most-presented stimuli, else a seeded fifth)",
        "cv": fc["cv"] if identify else None,
        "shared_targets": n_shared if across else None,
        "feature_models": {n: feature_info(p) for n, p in features.items()},
    }
    if any(ident.values()):
        data_vars.update(
            _identification_vars(ident, n_test, subjects, regions, names, decoders, keys, ic)
        )
        coords.update(
            {"feature_space": _obj(names), "decoder": _obj(decoders), "metric": _obj(keys)}
        )
        attrs["decoders"] = decoders
    if by_session and any(ident.values()):
        session_vars, session_names = _session_vars(
            per_session, subjects, regions, names, decoders, keys
        )
        data_vars.update(session_vars)
        coords["session"] = _obj(session_names)
        attrs["held_out_unit"] = "session"
    if any(concept_res.values()):
        cvars, concept_names = _concept_vars(concept_res, subjects, regions)
        data_vars.update(cvars)
        coords["concept"] = _obj(concept_names)
        attrs.update(
            {
                "concept_annotations": str(concepts),
                "concept_folds": {s: grouping[s] for s in subjects if grouping.get(s)},
                "concept_min_count": int(fc["concepts"]["min_count"]),
                "concept_decoder": str(fc["concepts"]["decoder"]),
            }
        )
    out = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    return write_dataset(describe_variables(out), output, provenance=provenance)


def _concept_vars(concept_res, subjects, regions):
    """Store variables of the concept decoding results, over the union of concepts."""
    names = sorted(
        {str(c) for res in concept_res.values() for r in res.values() for c in r.concepts}
    )
    col = {c: j for j, c in enumerate(names)}
    shape = (len(subjects), len(regions), len(names))
    per = {k: np.full(shape, np.nan) for k in ("auc", "auc_p", "ap", "ap_p")}
    prevalence = np.full((len(subjects), len(names)), np.nan)
    means = {k: np.full(shape[:2], np.nan) for k in ("auc", "auc_p", "map", "map_p")}
    map_chance = np.full(len(subjects), np.nan)
    for a, s in enumerate(subjects):
        for b, res in concept_res.get(s, {}).items():
            j = [col[str(c)] for c in res.concepts]
            per["auc"][a, b, j], per["auc_p"][a, b, j] = res.auc, res.auc_p
            per["ap"][a, b, j] = res.average_precision
            per["ap_p"][a, b, j] = res.average_precision_p
            prevalence[a, j] = res.chance_average_precision
            map_chance[a] = float(np.mean(res.chance_average_precision))
            means["auc"][a, b], means["auc_p"][a, b] = res.mean_auc, res.mean_auc_p
            means["map"][a, b], means["map_p"][a, b] = res.mean_average_precision, res.map_p
    dims = ("subject", "roi", "concept")
    return {
        "concept_auc": (dims, per["auc"]),
        "concept_auc_p": (dims, per["auc_p"]),
        "concept_average_precision": (dims, per["ap"]),
        "concept_average_precision_p": (dims, per["ap_p"]),
        "concept_prevalence": (("subject", "concept"), prevalence),
        "concept_mean_auc": (("subject", "roi"), means["auc"]),
        "concept_mean_auc_p": (("subject", "roi"), means["auc_p"]),
        "concept_map": (("subject", "roi"), means["map"]),
        "concept_map_p": (("subject", "roi"), means["map_p"]),
        "concept_map_chance": (("subject",), map_chance),
    }, names

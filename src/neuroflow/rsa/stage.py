"""The ``rsa_eeg`` and ``rsa_fmri`` stages: RDMs, model comparison, noise ceilings.

EEG: for every subject, each stimulus's epochs are averaged over its presentations; a
correlation-distance RDM over channels is computed at every time point and compared
with every model layer's RDM (cross-temporal RSA). RSA needs no train/test split, so by
default (``eeg_stimuli: all``) every distinct image shown to every subject enters the
RDMs: with hundreds of images the time course is far less noisy than over a few dozen
repeated ones, and the model RDMs' geometry is sampled widely enough to tell feature
spaces apart. These large RDMs are compared in chunks of time points and not stored.
The stored ``brain_rdm`` is over the repeated stimuli (``min_repeats`` or more
presentations), whose single repeats give the within-subject noise ceilings; with 2+
subjects the leave-one-subject-out ceiling uses those RDMs too. Every EEG RDM is also
computed over each channel group of ``rsa.channel_groups``; the time courses get
bootstrap intervals and layer comparisons, and frame-level (video, audio) features a
model time × brain time map (:mod:`neuroflow.rsa.model_time`).

fMRI: every event's response is the mean BOLD over the volumes from ``onset + lag`` to
``onset + duration + lag``; stimuli presented in at least two runs form the RDM
(crossnobis with runs as partitions, or correlation distance of the run-averaged
patterns), per ROI. RDMs are compared with each layer, noise ceilings are computed
across subjects, and ROI × ROI alignment patterns are compared with each model's;
the same patterns are built from linear predictivity too (cross-ROI ridge and each
layer's encoding scores, ``lp_*`` variables, :mod:`neuroflow.rsa.predictivity_patterns`).
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
    load_subject_epochs,
    repeat_ranks,
    stimulus_features,
    stimulus_patterns,
)
from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.progress import Progress
from neuroflow.rois import labelled_rois
from neuroflow.variables import describe_variables

from .analysis import alignment_patterns
from .compare import compare_rdms, noise_ceilings
from .eeg import bootstrap_factor, eeg_bootstrap, resolve_channel_groups
from .equivalence import subject_model_equivalence
from .inference import bootstrap_rsa
from .model_time import (
    frame_models,
    frame_resampled_similarity,
    frame_resampling,
    model_time_outputs,
    time_resolved_similarity,
)
from .options import resolve_config
from .predictivity_patterns import predictivity_alignment
from .rdm import condensed_index, correlation_rdm, crossnobis_rdm

__all__ = ["FORMAT_VERSION", "rsa_eeg", "rsa_fmri"]

FORMAT_VERSION = 8

logger = logging.getLogger(__name__)


def _obj(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """Strings as an object array of ``str``."""
    return np.asarray([str(v) for v in values], dtype=object)


def _model_rdms(features: Mapping[str, str | os.PathLike], stimuli: Sequence[str]) -> np.ndarray:
    """Correlation RDM of every layer over ``stimuli``, shape (n_layers, n_pairs)."""
    return np.stack([correlation_rdm(stimulus_features(p, stimuli)) for p in features.values()])


def _pair_coords(ids: np.ndarray) -> dict[str, Any]:
    i, j = condensed_index(ids.size)
    return {"stimulus_a": ("pair", _obj(ids[i])), "stimulus_b": ("pair", _obj(ids[j]))}


def _ceilings(rdms: np.ndarray, methods: Sequence[str]) -> np.ndarray:
    """Noise ceilings (method, bound, ...) of RDMs shaped (n_measurements, ..., n_pairs)."""
    lead = rdms.shape[1:-1]
    flat = rdms.reshape(rdms.shape[0], -1, rdms.shape[-1])
    out = np.full((len(methods), 2, flat.shape[1]), np.nan)
    if rdms.shape[0] >= 2:
        for m, method in enumerate(methods):
            out[m] = noise_ceilings(flat, method=method).T
    return out.reshape(len(methods), 2, *lead)


def _group_channels(
    channels: np.ndarray, groups: Mapping[str, Sequence[str] | None]
) -> list[np.ndarray]:
    """Indices into ``channels`` of every channel group (None: all of them)."""
    where = {str(c): i for i, c in enumerate(channels)}
    return [
        np.arange(len(channels)) if chans is None else np.array([where[c] for c in chans])
        for chans in groups.values()
    ]


def _group_rdms(patterns: np.ndarray, channels: Sequence[np.ndarray]) -> np.ndarray:
    """RDMs (n_groups, n_times, n_pairs) of (n_stimuli, n_channels, n_times) patterns."""
    return np.stack([correlation_rdm(np.moveaxis(patterns[:, idx], 2, 0)) for idx in channels])


def rsa_eeg(
    *,
    epochs: list[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Stage entry point: time-resolved and cross-temporal RSA of EEG epochs.

    Parameters
    ----------
    epochs : list of path-like
        Epochs stores (``entities.subject`` attribute tells the subject).
    features : dict of str to path-like
        Layer name to feature store; each is one model layer.
    output : path-like
        Output zarr store.
    config : dict
        The ``rsa`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        Store with dimension ``channel_group`` (``"all"``, then the groups of
        ``rsa.channel_groups``; attribute ``channel_groups``) on every EEG variable:
        ``brain_rdm`` (subject, channel_group, time, pair) over the repeated stimuli
        (condensed; ``stimulus_a``/``stimulus_b`` on ``pair``), ``model_rdm`` (layer,
        pair) over the same stimuli, ``cross_temporal`` (subject, channel_group,
        comparison, layer, time) over the ``eeg_stimuli`` set (``n_rsa_stimuli`` of
        them; attribute ``rsa_stimuli``; when subjects share fewer than 3 stimuli,
        each subject's own stimuli, and ``n_rsa_stimuli`` has dim subject),
        ``noise_ceiling_subject`` (subject, channel_group, comparison, bound, time)
        from single repeats, and with 2+ subjects ``noise_ceiling`` (channel_group,
        comparison, bound, time) and ``cross_temporal_mean`` (channel_group,
        comparison, layer, time). For the first of ``rsa.comparisons``: ``peak_time``
        and ``peak_similarity`` (channel_group, layer) of the subject-mean course, and
        the bootstrap of :func:`neuroflow.rsa.eeg.eeg_bootstrap` (``peak_similarity_ci``
        (bound, channel_group, layer), ``peak_similarity_se``, ``layer_comparison_p``
        (channel_group, layer_a, layer_b), and at every time point
        ``model_similarity_ci`` (bound, channel_group, layer, time) and
        ``model_similarity_se``; attributes ``bootstrap_over``, ``bootstrap_times``,
        ``n_bootstraps``, ``ci_level``, ``inference_comparison``). With frame-level
        feature stores of the stimuli (``rsa.model_time.enabled``; every subject
        shown the same stimuli), the model time x brain time RSA of
        :func:`neuroflow.rsa.model_time.model_time_outputs` (dims ``frame_layer``,
        ``model_time`` (s) and ``permutation``) with the peak's permutation p-value,
        bootstrap intervals and ``model_time_inconclusive`` (``rsa.model_time``;
        attributes ``model_time_n_permutations``, ``model_time_n_bootstraps``,
        ``model_time_bootstrap_over``, ``model_time_alpha``, ``model_time_ci_level``);
        attribute ``model_time`` tells whether it ran. Every peak is searched over the
        times ``>= 0``.
    """
    cfg = resolve_config(config)
    if not features:
        raise ValueError("`features` must name at least one feature store, got none.")
    subjects = load_subject_epochs(epochs)
    groups = resolve_channel_groups(cfg["channel_groups"], epochs)
    sets = []
    for sub in subjects:
        ids, counts = np.unique(sub.stimulus, return_counts=True)
        sets.append(set(ids[counts >= cfg["min_repeats"]]))
    common = np.array(sorted(set.intersection(*sets)))
    shown = np.array(sorted(set.intersection(*(set(s.stimulus) for s in subjects))))
    if cfg["eeg_stimuli"] == "all" and shown.size < 3:
        # subjects saw different images (ds000117 draws them per subject): each subject's
        # RSA runs over its own images; only the ceilings need shared, repeated ones
        sub_sets = [np.unique(s.stimulus) for s in subjects]
        logger.info(
            "Subjects share %d stimuli; cross-temporal RSA runs over each subject's own "
            "stimuli (%s).",
            shown.size,
            ", ".join(
                f"sub-{s.subject}: {len(ids)}" for s, ids in zip(subjects, sub_sets, strict=True)
            ),
        )
    else:
        sub_sets = [shown if cfg["eeg_stimuli"] == "all" else common] * len(subjects)
    for sub, ids in zip(subjects, sub_sets, strict=True):
        if ids.size < 3:
            which = "shown to" if cfg["eeg_stimuli"] == "all" else "repeated in"
            raise ValueError(
                f"{sub.sources[0]}: RSA needs at least 3 stimuli {which} sub-{sub.subject} "
                f"(field `stimulus`), got {ids.size}."
            )
    repeated = common.size >= 3
    if not repeated:
        logger.info(
            "Noise ceilings and stored brain RDMs skipped: %d stimuli are presented %d+ times "
            "in every subject (3 are needed).",
            common.size,
            cfg["min_repeats"],
        )
    methods = list(cfg["comparisons"])
    models = _model_rdms(features, common) if repeated else None
    shared = all(ids is sub_sets[0] for ids in sub_sets)
    models_shared = _model_rdms(features, sub_sets[0]) if shared else None
    frames, model_time = None, "disabled (rsa.model_time.enabled)"
    if cfg["model_time"]["enabled"]:
        frames = frame_models(features, sub_sets[0]) if shared else None
        model_time = (
            "computed"
            if frames is not None
            else "skipped: no frame-level feature store"
            if shared
            else "skipped: subjects saw different stimuli"
        )
    resampling = None
    if frames is not None:
        resampling = frame_resampling(sub_sets[0].size, len(subjects), cfg["model_time"])
        # subject means of the null and bootstrap maps, summed subject by subject
        shape = (len(groups), frames.rdms.shape[0], subjects[0].times[:: cfg["decim"]].size)
        frame_null = np.zeros((len(resampling.permutations), *shape))
        frame_boot = np.zeros(
            (0 if resampling.stimuli is None else len(resampling.stimuli), *shape)
        )
    keep_patterns = cfg["bootstrap"]["over"] != "none"
    brain, ceil_sub, cross, frame_sims, patterns_all, channels_all = [], [], [], [], [], []
    # every subject's time points, once per channel group
    n_points = sum(len(groups) * sub.times[:: cfg["decim"]].size for sub in subjects)
    progress = Progress(n_points, "EEG RSA time courses", "time points")
    for sub, rsa_set in zip(subjects, sub_sets, strict=True):
        models_rsa = models_shared if shared else _model_rdms(features, rsa_set)
        channels = _group_channels(sub.channels, groups)
        in_set = np.isin(sub.stimulus, rsa_set)
        patterns = sub.data[in_set][:, :, :: cfg["decim"]]
        if cfg["eeg_stimuli"] != "all":
            patterns = patterns.astype(np.float64)
        _, mean = average_by_stimulus(patterns, sub.stimulus[in_set])
        sims = [
            time_resolved_similarity(mean[:, idx], models_rsa, methods, frames, progress=progress)
            for idx in channels
        ]
        cross.append(np.stack([sim for sim, _ in sims]))
        if frames is not None:
            frame_sims.append(np.stack([f for _, f in sims]))
            for g, idx in enumerate(channels):
                null, boot = frame_resampled_similarity(
                    mean[:, idx], frames, methods[0], resampling
                )
                frame_null[:, g] += null / len(subjects)
                if boot is not None:
                    frame_boot[:, g] += boot / len(subjects)
        if keep_patterns:
            patterns_all.append(mean)
            channels_all.append(channels)
        if not repeated:
            continue
        keep = np.isin(sub.stimulus, common)
        data = sub.data[keep][:, :, :: cfg["decim"]].astype(np.float64)
        stim = sub.stimulus[keep]
        brain.append(_group_rdms(average_by_stimulus(data, stim)[1], channels))
        rep = repeat_ranks(stim)
        n_rep = int(min(np.bincount(rep)[np.bincount(rep) >= common.size].size, 50))
        reps = [
            _group_rdms(average_by_stimulus(data[rep == r], stim[rep == r])[1], channels)
            for r in range(n_rep)
            if np.unique(stim[rep == r]).size == common.size
        ]
        ceil_sub.append(
            np.stack([_ceilings(np.stack(reps)[:, g], methods) for g in range(len(groups))])
            if len(reps) >= 2
            else None
        )
    progress.close()
    times = subjects[0].times[:: cfg["decim"]]
    n_t = times.size
    nan_ceil = np.full((len(groups), len(methods), 2, n_t), np.nan)
    cross = np.stack(cross)  # (subject, channel_group, comparison, layer, time)
    coords = {
        "subject": _obj([s.subject for s in subjects]),
        "channel_group": _obj(list(groups)),
        "time": ("time", times, {"units": "s"}),
        "layer": _obj(list(features)),
        "comparison": _obj(methods),
        "bound": _obj(["lower", "upper"]),
    }
    data_vars: dict[str, Any] = {
        "cross_temporal": (("subject", "channel_group", "comparison", "layer", "time"), cross),
        "n_rsa_stimuli": (
            ((), np.int64(sub_sets[0].size))
            if shared
            else (("subject",), np.array([ids.size for ids in sub_sets], dtype=np.int64))
        ),
    }
    if repeated:
        coords.update(_pair_coords(common))
        data_vars["brain_rdm"] = (("subject", "channel_group", "time", "pair"), np.stack(brain))
        data_vars["model_rdm"] = (("layer", "pair"), models)
        data_vars["noise_ceiling_subject"] = (
            ("subject", "channel_group", "comparison", "bound", "time"),
            np.stack([c if c is not None else nan_ceil for c in ceil_sub]),
        )
    if len(subjects) >= 2:
        if repeated:
            data_vars["noise_ceiling"] = (
                ("channel_group", "comparison", "bound", "time"),
                np.stack([_ceilings(np.stack(brain)[:, g], methods) for g in range(len(groups))]),
            )
        data_vars["cross_temporal_mean"] = (
            ("channel_group", "comparison", "layer", "time"),
            cross.mean(axis=0),
        )
    inference, inference_attrs = eeg_bootstrap(
        patterns_all,
        channels_all,
        models_shared,
        cross[:, :, 0],
        times,
        method=methods[0],
        config={**cfg["bootstrap"], "over": cfg["bootstrap"]["over"] if keep_patterns else "none"},
        shared=shared,
    )
    data_vars.update(inference)
    if "layer_comparison_p" in data_vars:
        coords.update({"layer_a": _obj(list(features)), "layer_b": _obj(list(features))})
    model_time_attrs: dict[str, Any] = {}
    if frame_sims:
        model_time_vars, model_time_attrs = model_time_outputs(
            np.stack(frame_sims),
            frames,
            times,
            null=frame_null,
            boot=frame_boot if resampling.stimuli is not None else None,
            resampling=resampling,
            alpha=cfg["model_time"]["alpha"],
            level=cfg["bootstrap"]["level"],
        )
        data_vars.update(model_time_vars)
        if "model_time_null_max" in model_time_vars:
            coords["permutation"] = np.arange(len(resampling.permutations))
        coords["frame_layer"] = _obj(frames.layers)
        coords["model_time"] = ("model_time", frames.times, {"units": "s"})
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(
        {
            "stage": "rsa_eeg",
            "rdm_method": "correlation",
            "rsa_stimuli": cfg["eeg_stimuli"],
            "feature_models": {n: feature_info(p) for n, p in features.items()},
            "noise_ceiling": "computed" if repeated else "skipped: too few repeated stimuli",
            "channel_groups": {k: v for k, v in groups.items() if v is not None},
            "model_time": model_time,
            **inference_attrs,
            **model_time_attrs,
        }
    )
    return write_dataset(describe_variables(ds), output, provenance=provenance)


def _fmri_inference(
    roi_rdms: np.ndarray, models: np.ndarray, method: str, cfg: Mapping[str, Any]
) -> dict[str, Any]:
    """Bootstrap intervals and the subject-as-model comparison of every layer and ROI.

    Parameters
    ----------
    roi_rdms : ndarray, shape (n_subjects, n_rois, n_pairs)
        Brain RDMs.
    models : ndarray, shape (n_layers, n_pairs)
        Layer RDMs.
    method : str
        The comparison (the first of ``rsa.comparisons``).
    cfg : dict
        The resolved ``rsa`` section.

    Returns
    -------
    inference : dict
        ``data_vars`` (the variables to store) and the attributes that describe them.
    """
    n_sub, n_roi = roi_rdms.shape[:2]
    boot = cfg["bootstrap"]
    over = bootstrap_factor(boot, n_sub)
    out: dict[str, Any] = {"data_vars": {}, "bootstrap_over": over, "inference_comparison": method}
    if over != "none":
        results = [
            bootstrap_rsa(
                models,
                roi_rdms[:, r],
                method=method,
                over=over,
                n_bootstraps=boot["n_bootstraps"],
                level=boot["level"],
            )
            for r in range(n_roi)
        ]
        out["data_vars"].update(
            {
                "model_similarity_ci": (
                    ("bound", "layer", "roi"),
                    np.stack([r.ci for r in results], axis=-1),
                ),
                "model_similarity_se": (("layer", "roi"), np.stack([r.se for r in results], -1)),
                "layer_comparison_p": (
                    ("roi", "layer_a", "layer_b"),
                    np.stack([r.pair_pvalues for r in results]),
                ),
            }
        )
        out.update({"n_bootstraps": int(boot["n_bootstraps"]), "ci_level": float(boot["level"])})
    if n_sub >= 3:
        eq = subject_model_equivalence(
            roi_rdms, models, method=method, margin=cfg["equivalence_margin"]
        )
        out["data_vars"].update(
            {
                "subject_baseline": (("subject", "roi"), eq.subject_scores),
                "baseline_difference": (("layer", "roi"), eq.difference),
                "baseline_equivalence_p": (("layer", "roi"), eq.p_equivalent),
                "baseline_difference_p": (("layer", "roi"), eq.p_different),
                "equivalence_margin": (("roi",), eq.margin),
            }
        )
    return out


#: Dimensions of the ``lp_*`` variables of the ``rsa_fmri`` store (described in
#: :data:`neuroflow.variables.DESCRIPTIONS`).
LP_DIMS: dict[str, tuple[str, ...]] = {
    "lp_model_score": ("subject", "layer", "roi"),
    "lp_model_profile": ("model", "roi"),
    "lp_model_pattern": ("model", "roi_a", "roi_b"),
    "lp_brain_pattern": ("subject", "roi_a", "roi_b"),
    "lp_brain_pattern_mean": ("roi_a", "roi_b"),
    "lp_criterion": ("model", "subject", "roi"),
    "lp_criterion_mean": ("model", "roi"),
    "lp_criterion_ci": ("bound", "model", "roi"),
    "lp_subject_baseline": ("subject", "roi"),
    "lp_baseline_difference": ("layer", "roi"),
    "lp_baseline_equivalence_p": ("layer", "roi"),
    "lp_baseline_difference_p": ("layer", "roi"),
    "lp_equivalence_margin": ("roi",),
}


def _varying(x: np.ndarray) -> np.ndarray:
    """Columns of ``x`` (n_stimuli, n_voxels) that vary over stimuli."""
    return x[:, np.ptp(x, axis=0) > 0]


def _predictivity_outputs(
    stim_rois: list[list[np.ndarray]],
    features: Mapping[str, str | os.PathLike],
    stimuli: np.ndarray,
    layer_models: list[str],
    cfg: Mapping[str, Any],
    level: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``lp_*`` variables: linear-predictivity alignment patterns of every ROI.

    Parameters
    ----------
    stim_rois : list (n_subjects) of list (n_rois) of ndarray
        Stimulus-mean responses, each of shape (n_stimuli, n_voxels_roi), the stimuli of
        the RDMs in order.
    features : dict of str to path-like
        Layer name to feature store (n_layers of them).
    stimuli : ndarray of str, shape (n_stimuli,)
        The stimuli of ``stim_rois``' rows.
    layer_models : list of str, length n_layers
        The model (feature set) of each layer.
    cfg : dict
        The resolved ``rsa.predictivity_patterns`` section.
    level : float
        Coverage of the bootstrap interval of the relational criterion.

    Returns
    -------
    data_vars : dict
        ``lp_*`` variables (see :data:`LP_DIMS` and
        :func:`~neuroflow.rsa.predictivity_patterns.predictivity_alignment`); the
        subject baseline and its TOST only with 3+ subjects.
    attrs : dict
        ``predictivity_patterns`` (computed, or why not) and the settings used.
    """
    if not cfg["enabled"]:
        return {}, {"predictivity_patterns": "disabled (rsa.predictivity_patterns.enabled)"}
    if len(stim_rois[0]) < 2:
        return {}, {"predictivity_patterns": "skipped: fewer than 2 ROIs"}
    rois = [[_varying(x) for x in sub] for sub in stim_rois]
    if any(x.shape[1] == 0 for sub in rois for x in sub):
        return {}, {"predictivity_patterns": "skipped: an ROI has no voxel varying over stimuli"}
    n_stim = rois[0][0].shape[0]
    splits = None if cfg["cv"] is None else min(int(cfg["cv"]), n_stim)
    alphas = np.asarray(cfg["alphas"], dtype=np.float64)
    values = predictivity_alignment(
        rois,
        [stimulus_features(p, stimuli) for p in features.values()],
        layer_models,
        symmetric=bool(cfg["symmetric"]),
        n_splits=splits,
        alphas=alphas,
        n_boot=int(cfg["n_boot"]),
        seed=int(cfg["seed"]),
        level=level,
        margin=cfg["equivalence_margin"],
        alpha=float(cfg["alpha"]),
    )
    data_vars = {name: (LP_DIMS[name], value) for name, value in values.items()}
    attrs = {
        "predictivity_patterns": "computed",
        "lp_symmetric": bool(cfg["symmetric"]),
        "lp_cv": "leave-one-stimulus-out" if splits is None else f"{splits}-fold over stimuli",
        "lp_alphas": [float(a) for a in alphas],
        "lp_n_boot": int(cfg["n_boot"]),
        "lp_seed": int(cfg["seed"]),
        "lp_ci_level": float(level),
        "lp_alpha": float(cfg["alpha"]),
    }
    return data_vars, attrs


def rsa_fmri(
    *,
    runs: list[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None = None,
) -> Path:
    """Stage entry point: ROI RDMs, model comparison and ROI × ROI alignment for fMRI.

    Parameters
    ----------
    runs : list of path-like
        ``preprocess_fmri`` run stores of one or more subjects (``entities.subject``),
        or single-trial stores (one per subject; trials of a stimulus in different
        ``run`` partitions are its repeats).
    features : dict of str to path-like
        Layer name to feature store; layers of one feature set (one extractor entry,
        store attribute ``feature_set``) form one model of the alignment analysis, so
        two entries of one network (pretrained and random weights, two seeds, two
        transforms) stay two models.
    output : path-like
        Output zarr store.
    config : dict
        The ``rsa`` section.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    stimulus_events : dict | None
        ``dataset.stimulus_events``: events that are not stimuli are left out.

    Returns
    -------
    output : Path
        Store with ``roi_rdm`` (subject, roi, pair), ``model_rdm`` (layer, pair),
        ``model_similarity`` (subject, comparison, layer, roi), ``noise_ceiling``
        (comparison, bound, roi; 2+ subjects), ``roi_alignment`` (subject, roi_a,
        roi_b), ``model_alignment`` (model, roi_a, roi_b), ``alignment_agreement``
        (model), ``alignment_subject_agreement`` (model, subject),
        ``alignment_between_subject`` and ``roi_alignment_sd`` (roi_a, roi_b); with
        ``rsa.bootstrap``, ``model_similarity_ci`` (bound, layer, roi),
        ``model_similarity_se`` (layer, roi) and ``layer_comparison_p`` (roi, layer_a,
        layer_b); with 3+ subjects, ``subject_baseline`` (subject, roi),
        ``baseline_difference``, ``baseline_equivalence_p`` and
        ``baseline_difference_p`` (layer, roi) and ``equivalence_margin`` (roi), all
        for the first of ``rsa.comparisons``. With ``rsa.predictivity_patterns``, the
        same study from linear predictivity on the stimulus-mean responses of the
        ROIs (voxels constant over the stimuli left out): the ``lp_*`` variables of
        :func:`~neuroflow.rsa.predictivity_patterns.predictivity_alignment` (dims in
        :data:`LP_DIMS`; attribute ``predictivity_patterns`` says whether they were
        computed, ``lp_*`` attributes the settings).
    """
    cfg = resolve_config(config)
    if not features:
        raise ValueError("`features` must name at least one feature store, got none.")
    by_sub: dict[str, list[Path]] = {}
    for p in map(Path, runs):
        ent = open_dataset(p).attrs.get("entities") or {}
        by_sub.setdefault(str(ent.get("subject", p.parent.name)), []).append(p)
    subs = sorted(by_sub)
    loaded = {s: stimulus_patterns(by_sub[s], cfg["hrf_lag"], stimulus_events) for s in subs}
    sets = []
    for s in subs:
        _, stim, run, _ = loaded[s]
        keys = np.unique(np.stack([stim, run]), axis=1)
        ids, counts = np.unique(keys[0], return_counts=True)
        sets.append(set(ids[counts >= cfg["min_repeats"]]))
    common = np.array(sorted(set.intersection(*sets)))
    if common.size < 3:
        raise ValueError(
            f"{by_sub[subs[0]][0]}: RSA needs at least 3 stimuli (field `stim_file`) shown in "
            f"{cfg['min_repeats']}+ runs of every subject, got {common.size}."
        )
    rois = labelled_rois(set.intersection(*(set(loaded[s][3]) for s in subs)))
    if not rois:
        raise ValueError(f"{by_sub[subs[0]][0]}: no ROI labels (field `roi`).")
    methods = list(cfg["comparisons"])
    models = _model_rdms(features, common)
    roi_rdms = np.zeros((len(subs), len(rois), models.shape[1]))
    stim_rois: list[list[np.ndarray]] = []
    for a, s in enumerate(subs):
        pats, stim, run, roi = loaded[s]
        keep = np.isin(stim, common)
        if all(str(r).startswith("repeat-") for r in run):
            # trials: keep the repeats every common stimulus has (complete partitions)
            n_rep = min(int((stim == c).sum()) for c in common)
            keep &= np.array([int(str(r)[7:]) < n_rep for r in run])
        for b, name in enumerate(rois):
            x = pats[keep][:, roi == name]
            if cfg["fmri_rdm"] == "crossnobis":
                roi_rdms[a, b] = crossnobis_rdm(
                    x, stim[keep], run[keep], shrinkage=cfg["noise_shrinkage"]
                )[0]
            else:
                roi_rdms[a, b] = correlation_rdm(average_by_stimulus(x, stim[keep])[1])
        if cfg["predictivity_patterns"]["enabled"]:
            stim_rois.append(
                [average_by_stimulus(pats[keep][:, roi == n], stim[keep])[1] for n in rois]
            )
    sim = np.stack(
        [np.stack([compare_rdms(models, r, method=m) for m in methods]) for r in roi_rdms]
    )
    model_names = [feature_info(p)["feature_space"] for p in features.values()]
    uniq_models = list(dict.fromkeys(model_names))
    align = [
        alignment_patterns(
            roi_rdms, models[[i for i, n in enumerate(model_names) if n == m]], method=methods[0]
        )
        for m in uniq_models
    ]
    coords = {
        "subject": _obj(subs),
        "roi": _obj(rois),
        "roi_a": _obj(rois),
        "roi_b": _obj(rois),
        "layer": _obj(list(features)),
        "model": _obj(uniq_models),
        "comparison": _obj(methods),
        "bound": _obj(["lower", "upper"]),
        **_pair_coords(common),
    }
    data_vars: dict[str, Any] = {
        "roi_rdm": (("subject", "roi", "pair"), roi_rdms),
        "model_rdm": (("layer", "pair"), models),
        "model_similarity": (("subject", "comparison", "layer", "roi"), sim),
        "roi_alignment": (("subject", "roi_a", "roi_b"), align[0].brain),
        "roi_alignment_sd": (("roi_a", "roi_b"), align[0].brain_sd),
        "model_alignment": (("model", "roi_a", "roi_b"), np.stack([r.model for r in align])),
        "alignment_agreement": (("model",), np.array([r.agreement for r in align])),
        "alignment_subject_agreement": (
            ("model", "subject"),
            np.stack([r.subject_agreement for r in align]),
        ),
        "alignment_between_subject": ((), align[0].between_subject),
    }
    if len(subs) >= 2:
        data_vars["noise_ceiling"] = (
            ("comparison", "bound", "roi"),
            _ceilings(roi_rdms, methods),
        )
    inference = _fmri_inference(roi_rdms, models, methods[0], cfg)
    data_vars.update(inference.pop("data_vars"))
    coords.update({"layer_a": _obj(list(features)), "layer_b": _obj(list(features))})
    lp_vars, lp_attrs = _predictivity_outputs(
        stim_rois,
        features,
        common,
        model_names,
        cfg["predictivity_patterns"],
        float(cfg["bootstrap"]["level"]),
    )
    data_vars.update(lp_vars)
    ds = xr.Dataset(data_vars, coords=coords)
    ds.attrs.update(
        {
            "stage": "rsa_fmri",
            "rdm_method": cfg["fmri_rdm"],
            "alignment_comparison": methods[0],
            "feature_models": {n: feature_info(p) for n, p in features.items()},
            **inference,
            **lp_attrs,
        }
    )
    return write_dataset(describe_variables(ds), output, provenance=provenance)

"""Model time x brain time RSA of the ``rsa_eeg`` stage.

A frame-level feature store (video frames or audio windows, store attribute
``row_unit`` ``"frame"`` with coordinates ``source_stimulus`` and ``frame_time``) gives
one model RDM per time within the clip (model time); every one is compared with the EEG
RDM at every brain time (:func:`~.analysis.model_time_rsa`). Its peak (over brain times
``>= 0``) is tested against the maxima of the maps whose model RDMs had their stimulus
labels permuted (:func:`frame_resampled_similarity`; the max statistic over the whole
map, so the peak is tested as the maximum it is), and the peak, its times, lag and slope
get bootstrap intervals (stimuli or subjects); the model-to-brain time line is reported
only for a significant peak (:func:`model_time_outputs`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuroflow.artifacts import open_dataset
from neuroflow.peaks import post_stimulus
from neuroflow.progress import Progress

from .analysis import cross_temporal_rsa, model_time_peaks
from .compare import compare_rdms, rank_rows
from .eeg import _RDM_BLOCK_BYTES
from .inference import (
    bootstrap_confidence_interval,
    bootstrap_evaluations,
    draw_bootstrap_samples,
)
from .rdm import condensed_index, correlation_rdm

__all__ = [
    "MODEL_TIME_BOOTSTRAP_FACTORS",
    "FrameModels",
    "FrameResampling",
    "frame_models",
    "frame_resampled_similarity",
    "frame_resampling",
    "max_statistic_p",
    "model_time_outputs",
    "time_resolved_similarity",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrameModels:
    """Frame-level model RDMs over a stimulus set, one per layer and model time.

    Attributes
    ----------
    layers : list of str
        The frame-level layers (feature stores whose rows are frames or windows).
    times : ndarray, shape (n_model_times,)
        Model times (s from the stimulus onset), the union over the layers.
    rdms : ndarray, shape (n_rows, n_pairs)
        Condensed correlation-distance RDM of each (layer, model time) row.
    rows : ndarray of int, shape (n_rows, 2)
        Index into ``layers`` and into ``times`` of each row of ``rdms``.
    """

    layers: list[str]
    times: np.ndarray
    rdms: np.ndarray
    rows: np.ndarray


def frame_models(
    features: Mapping[str, str | os.PathLike], stimuli: Sequence[str] | np.ndarray
) -> FrameModels | None:
    """Model RDMs at every model time of the frame-level feature stores.

    Parameters
    ----------
    features : dict of str to path-like
        Layer name to feature store; stores whose ``row_unit`` is ``"frame"`` (with
        coordinates ``source_stimulus`` and ``frame_time``) are used, the others ignored.
    stimuli : sequence of str, shape (n_stimuli,)
        The stimuli (``source_stimulus`` values) of the RDMs.

    Returns
    -------
    models : FrameModels | None
        None when no store is frame-level. A layer's model times are the frame times
        (rounded to ms) every stimulus has; times whose RDM is undefined (a constant
        feature row, e.g. a black frame) are left out with a logged line.
    """
    stimuli = np.asarray([str(s) for s in stimuli])
    layers, layer_times, blocks = [], [], []
    for name, path in features.items():
        ds = open_dataset(path)
        if ds.attrs.get("row_unit") != "frame" or not {
            "source_stimulus",
            "frame_time",
        } <= set(ds.coords):
            continue
        source = np.asarray([str(s) for s in ds["source_stimulus"].values])
        frame_time = np.round(ds["frame_time"].values.astype(np.float64), 3)
        keep = np.isin(source, stimuli)
        pairs = zip(source, frame_time, strict=True)
        index = {(s, t): k for k, (s, t) in enumerate(pairs) if keep[k]}
        per_stimulus = [set(frame_time[keep & (source == s)]) for s in stimuli]
        common = np.array(sorted(set.intersection(*per_stimulus))) if per_stimulus else []
        if len(common) == 0:
            logger.info(
                "%s: model-time RSA left out: no frame time is shared by all %d stimuli.",
                path,
                stimuli.size,
            )
            continue
        values = ds["features"].values
        patterns = np.stack(
            [values[[index[(s, t)] for s in stimuli]].astype(np.float64) for t in common]
        )
        rdms = correlation_rdm(patterns)
        ok = np.isfinite(rdms).all(axis=1)
        if not ok.all():
            logger.info(
                "%s: model times %s left out of model-time RSA: a stimulus's features are "
                "constant there (undefined correlation distance).",
                path,
                common[~ok].tolist(),
            )
        if not ok.any():
            continue
        layers.append(name)
        layer_times.append(common[ok])
        blocks.append(rdms[ok])
    if not layers:
        return None
    times = np.unique(np.concatenate(layer_times))
    rows = np.concatenate(
        [
            np.stack([np.full(t.size, k), np.searchsorted(times, t)], axis=1)
            for k, t in enumerate(layer_times)
        ]
    )
    return FrameModels(layers=layers, times=times, rdms=np.concatenate(blocks), rows=rows)


def time_resolved_similarity(
    patterns: np.ndarray,
    models: np.ndarray,
    methods: Sequence[str],
    frames: FrameModels | None = None,
    chunk: int = 8,
    progress: Progress | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """RSA time courses without holding every time point's RDM at once.

    Parameters
    ----------
    patterns : ndarray, shape (n_stimuli, n_channels, n_times)
        Stimulus-averaged epochs.
    models : ndarray, shape (n_layers, n_pairs)
        Model RDMs over the same stimuli.
    methods : sequence of str
        Comparison methods.
    frames : FrameModels | None
        Frame-level model RDMs over the same stimuli, compared with the first method.
    chunk : int
        Time points per RDM batch.
    progress : Progress | None
        Counts the time points as they are done.

    Returns
    -------
    sim : ndarray, shape (n_methods, n_layers, n_times)
    frame_sim : ndarray, shape (n_frame_rows, n_times) | None
        Similarity of each row of ``frames.rdms`` at each brain time.
    """
    n_t = patterns.shape[2]
    out = np.zeros((len(methods), models.shape[0], n_t))
    frame_out = None if frames is None else np.zeros((frames.rdms.shape[0], n_t))
    # Spearman is Pearson of ranks: the models are ranked once, not at every chunk
    # (without NaN no pair is dropped, so the ranks are those compare_rdms would take)
    models = np.asarray(models, dtype=np.float64)
    model_ranks = rank_rows(models) if models.ndim == 2 and not np.isnan(models).any() else None
    for start in range(0, n_t, chunk):
        stop = min(start + chunk, n_t)
        rdm = correlation_rdm(np.moveaxis(patterns[:, :, start:stop], 2, 0))
        for m, method in enumerate(methods):
            if method == "spearman" and model_ranks is not None and not np.isnan(rdm).any():
                sim = compare_rdms(model_ranks, rank_rows(rdm), method="corr")
            else:
                sim = cross_temporal_rsa(models, rdm, method=method)
            out[m, :, start:stop] = sim
        if frame_out is not None:
            frame_out[:, start:stop] = compare_rdms(frames.rdms, rdm, method=methods[0])
        if progress is not None:
            progress.update(stop - start)
    return out, frame_out


#: What ``rsa.model_time.bootstrap_over`` may name (``auto``: subjects with 3 or more).
MODEL_TIME_BOOTSTRAP_FACTORS = ("auto", "stimuli", "subjects")


#: Long name and units of the model-time inference variables (set by the stage itself).
_MODEL_TIME_VARIABLES = {
    "model_time_peak_p": (
        "max-statistic permutation p-value of the model time x brain time peak (stimulus "
        "labels of the model RDMs permuted; the maximum over the layer's whole map)",
        "p-value",
    ),
    "model_time_inconclusive": (
        "whether the peak is not significant at rsa.model_time.alpha: the model-to-brain "
        "time line (lag, slope) is then not reported",
        "boolean",
    ),
    "model_time_null_max": (
        "maximum of the subject-mean model time x brain time map under each permutation",
        "similarity (the `comparison` measure)",
    ),
}


#: The fitted quantities of a map with a bootstrap interval, and their units.
_MODEL_TIME_FIT = {
    "peak_similarity": ("peak similarity", "similarity (the `comparison` measure)"),
    "peak_model_time": ("model time of the peak", "s"),
    "peak_brain_time": ("brain time of the peak", "s"),
    "lag": ("lag of the model-to-brain time line", "s"),
    "slope": ("slope of the model-to-brain time line", "s/s"),
}


@dataclass(frozen=True)
class FrameResampling:
    """Resampling plan of the model-time inference, the same for every subject and group.

    Attributes
    ----------
    permutations : ndarray of int, shape (n_permutations, n_stimuli)
        Each null sample relabels the stimuli of every frame-level model RDM (all layers
        and model times alike, so the map keeps its structure over model time).
    over : str
        What the bootstrap resamples: ``"stimuli"`` or ``"subjects"``.
    stimuli : ndarray of int, shape (n_bootstraps, n_stimuli) | None
        The stimuli of each bootstrap sample (``over == "stimuli"``).
    subjects : ndarray of int, shape (n_bootstraps, n_subjects) | None
        The subjects of each bootstrap sample (``over == "subjects"``).
    """

    permutations: np.ndarray
    over: str
    stimuli: np.ndarray | None
    subjects: np.ndarray | None


def frame_resampling(n_stimuli: int, n_subjects: int, config: Mapping[str, Any]) -> FrameResampling:
    """Draw the permutations and bootstrap samples of the model-time inference.

    Parameters
    ----------
    n_stimuli : int
        Stimuli of the RDMs.
    n_subjects : int
        Subjects.
    config : dict
        ``rsa.model_time``: ``n_permutations``, ``n_bootstraps``, ``bootstrap_over``
        (``auto``: subjects with 3 or more, else stimuli; subjects need 2 or more) and
        ``seed``.

    Returns
    -------
    resampling : FrameResampling
    """
    over = config["bootstrap_over"]
    if over not in MODEL_TIME_BOOTSTRAP_FACTORS:
        raise ValueError(
            "`rsa.model_time.bootstrap_over` must be one of "
            f"{', '.join(MODEL_TIME_BOOTSTRAP_FACTORS)}, got {over!r} instead."
        )
    if over == "auto":
        over = "subjects" if n_subjects >= 3 else "stimuli"
    elif over == "subjects" and n_subjects < 2:
        logger.info("Model-time bootstrap over subjects needs 2+ subjects: stimuli instead.")
        over = "stimuli"
    rng = np.random.default_rng(int(config["seed"]))
    permutations = np.stack([rng.permutation(n_stimuli) for _ in range(config["n_permutations"])])
    subjects, stimuli = draw_bootstrap_samples(
        rng, n_subjects, n_stimuli, int(config["n_bootstraps"]), over
    )
    return FrameResampling(
        permutations=permutations,
        over=over,
        stimuli=stimuli if over == "stimuli" else None,
        subjects=subjects if over == "subjects" else None,
    )


def _standardised(rdms: np.ndarray, method: str) -> np.ndarray:
    """Rows ranked (``spearman``), centred and scaled to unit norm: their products are r."""
    x = rank_rows(rdms) if method == "spearman" else np.asarray(rdms, dtype=np.float64)
    x = x - x.mean(axis=1, keepdims=True)
    norm = np.sqrt((x**2).sum(axis=1, keepdims=True))
    return np.divide(x, norm, out=np.full_like(x, np.nan), where=norm > 0)


def _relabelled_pairs(order: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Condensed position of pair ``(order[i], order[j])`` for every pair ``(i, j)``."""
    a, b = order[i], order[j]
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return order.size * lo - lo * (lo + 1) // 2 + (hi - lo - 1)


def frame_resampled_similarity(
    patterns: np.ndarray, frames: FrameModels, method: str, resampling: FrameResampling
) -> tuple[np.ndarray, np.ndarray | None]:
    """One subject's model time x brain time maps under each permutation and bootstrap.

    A permutation relabels the stimuli of the frame-level model RDMs; ranks and means
    do not change under a relabelling, so for ``spearman`` and ``corr`` each null map
    is one product of the standardised model rows (columns reordered) with the
    standardised EEG RDMs. Other comparisons call
    :func:`~neuroflow.rsa.compare.compare_rdms` per permutation (slow). A stimulus
    bootstrap uses :func:`~neuroflow.rsa.inference.bootstrap_evaluations`.

    Parameters
    ----------
    patterns : ndarray, shape (n_stimuli, n_channels, n_times)
        Stimulus-averaged epochs (the channels of one group).
    frames : FrameModels
        Frame-level model RDMs over the same stimuli.
    method : str
        The comparison (the first of ``rsa.comparisons``).
    resampling : FrameResampling
        Permutations and, when stimuli are resampled, bootstrap samples.

    Returns
    -------
    null : ndarray, shape (n_permutations, n_frame_rows, n_times)
        Similarity of each permuted model RDM with the EEG RDM at each time.
    boot : ndarray, shape (n_bootstraps, n_frame_rows, n_times) | None
        Similarity in each stimulus bootstrap sample (None when subjects are resampled).
    """
    n_stim, _, n_t = patterns.shape
    n_rows, n_pairs = frames.rdms.shape
    i, j = condensed_index(n_stim)
    fast = method in ("spearman", "corr") and np.isfinite(frames.rdms).all()
    models = _standardised(frames.rdms, method) if fast else frames.rdms
    null = np.empty((len(resampling.permutations), n_rows, n_t))
    boot = None
    if resampling.stimuli is not None:
        boot = np.empty((len(resampling.stimuli), n_rows, n_t))
        one = np.zeros((len(resampling.stimuli), 1), dtype=int)
    chunk = int(max(1, min(n_t, _RDM_BLOCK_BYTES // (8 * n_pairs * 3))))
    for start in range(0, n_t, chunk):
        stop = min(start + chunk, n_t)
        rdm = correlation_rdm(np.moveaxis(patterns[:, :, start:stop], 2, 0))
        brain = _standardised(rdm, method) if fast and np.isfinite(rdm).all() else None
        for p, order in enumerate(resampling.permutations):
            pairs = _relabelled_pairs(order, i, j)
            if brain is not None:
                null[p, :, start:stop] = models[:, pairs] @ brain.T
            else:
                null[p, :, start:stop] = compare_rdms(frames.rdms[:, pairs], rdm, method=method)
        if boot is not None:
            samples = bootstrap_evaluations(
                frames.rdms, rdm[:, None], one, resampling.stimuli, method=method
            )
            boot[:, :, start:stop] = np.moveaxis(samples, 1, 2)
    return null, boot


def _layer_maps(rows: np.ndarray, frames: FrameModels) -> np.ndarray:
    """(..., n_frame_rows, n_times) -> (..., n_layers, n_model_times, n_times), NaN-filled."""
    lead, n_t = rows.shape[:-2], rows.shape[-1]
    full = np.full((*lead, len(frames.layers), frames.times.size, n_t), np.nan)
    full[..., frames.rows[:, 0], frames.rows[:, 1], :] = rows
    return full


def _fit_maps(
    maps: np.ndarray, model_times: np.ndarray, brain_times: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Peak, its times, lag and slope of each map (n_maps, n_model_times, n_times).

    Returns the five quantities of :data:`_MODEL_TIME_FIT` (n_maps,) and the best brain
    time of each model time (n_maps, n_model_times); NaN for maps without a finite value.
    """
    fit = model_time_peaks(maps, model_times, brain_times)
    ok = np.isfinite(maps).any(axis=(1, 2))
    mt, bt = fit.peak[:, 0], fit.peak[:, 1]
    values = {
        "peak_similarity": maps[np.arange(len(maps)), mt, bt],
        "peak_model_time": model_times[mt],
        "peak_brain_time": brain_times[bt],
        "lag": np.broadcast_to(fit.lag, ok.shape),
        "slope": np.broadcast_to(fit.slope, ok.shape),
    }
    out = {k: np.where(ok, v, np.nan) for k, v in values.items()}
    return out, np.where(ok[:, None], brain_times[fit.best_brain_time], np.nan)


def max_statistic_p(observed: float, null_max: np.ndarray) -> float:
    """Permutation p-value of a map's maximum against the maxima of the null maps.

    Parameters
    ----------
    observed : float
        The maximum of the observed map.
    null_max : ndarray, shape (n_permutations,)
        The maximum of each null map over the same cells (NaN ones left out).

    Returns
    -------
    p : float
        ``(1 + #{null >= observed}) / (1 + n)``: never 0, and exact (valid at every
        level) when the stimuli are exchangeable under the null; NaN without a finite
        ``observed`` or null.
    """
    null_max = np.asarray(null_max, dtype=np.float64)
    null_max = null_max[np.isfinite(null_max)]
    if not np.isfinite(observed) or null_max.size == 0:
        return float("nan")
    return float((1 + np.count_nonzero(null_max >= observed - 1e-12)) / (1 + null_max.size))


def model_time_outputs(
    frame_sim: np.ndarray,
    frames: FrameModels,
    brain_times: np.ndarray,
    *,
    null: np.ndarray | None = None,
    boot: np.ndarray | None = None,
    resampling: FrameResampling | None = None,
    alpha: float = 0.05,
    level: float = 0.95,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model time × brain time maps, their peaks, time lines and inference, as store variables.

    Parameters
    ----------
    frame_sim : ndarray, shape (n_subjects, n_groups, n_frame_rows, n_times)
        Similarity of each frame-level model RDM with the EEG RDMs (first comparison).
    frames : FrameModels
        The rows' layers and model times.
    brain_times : ndarray, shape (n_times,)
    null : ndarray, shape (n_permutations, n_groups, n_frame_rows, n_times) | None
        Subject-mean maps under each permutation of :func:`frame_resampled_similarity`.
    boot : ndarray, shape (n_bootstraps, n_groups, n_frame_rows, n_times) | None
        Subject-mean maps of each stimulus bootstrap sample (subject bootstraps are
        drawn here from ``frame_sim`` and ``resampling.subjects``).
    resampling : FrameResampling | None
        The plan behind ``null`` and ``boot``; None: no inference.
    alpha : float
        Level of the peak's max-statistic test.
    level : float
        Coverage of the bootstrap percentile intervals.

    Returns
    -------
    data_vars : dict
        ``model_time_similarity`` (subject, channel_group, frame_layer, model_time,
        time; NaN where a layer lacks a model time) and, from the map's mean over
        subjects, ``model_time_peak_similarity``, ``model_time_peak_model_time``,
        ``model_time_peak_brain_time``, ``model_time_lag`` and ``model_time_slope``
        (channel_group, frame_layer) and ``model_time_best_brain_time``
        (channel_group, frame_layer, model_time); peaks are searched over the brain
        times ``>= 0``. With ``resampling``: ``model_time_peak_p`` (the peak against
        the maximum of each permuted map over the same cells), ``model_time_null_max``
        (permutation, channel_group, frame_layer), ``model_time_inconclusive`` (peak p
        above ``alpha``: lag, slope and their intervals are then NaN: no time line is
        reported) and ``model_time_<quantity>_ci`` (bound, channel_group, frame_layer)
        for the five fitted quantities.
    attrs : dict
        ``model_time_n_permutations``, ``model_time_n_bootstraps``,
        ``model_time_bootstrap_over``, ``model_time_alpha`` and ``model_time_ci_level``
        with ``resampling``, else empty.
    """
    n_groups = frame_sim.shape[1]
    n_layers, n_mt = len(frames.layers), frames.times.size
    full = _layer_maps(frame_sim, frames)
    mean = full.mean(axis=0)
    scalars = {k: np.full((n_groups, n_layers), np.nan) for k in _MODEL_TIME_FIT}
    best = np.full((n_groups, n_layers, n_mt), np.nan)
    if resampling is not None and resampling.subjects is not None:
        weights = np.stack(
            [np.bincount(s, minlength=frame_sim.shape[0]) for s in resampling.subjects]
        )
        boot = np.einsum("bs,sgrt->bgrt", weights / frame_sim.shape[0], frame_sim)
    null_full = None if null is None else _layer_maps(null, frames)
    boot_full = None if boot is None else _layer_maps(boot, frames)
    after = post_stimulus(brain_times)
    n_perm = 0 if null is None else null.shape[0]
    p = np.full((n_groups, n_layers), np.nan)
    null_max = np.full((n_perm, n_groups, n_layers), np.nan)
    ci = {k: np.full((2, n_groups, n_layers), np.nan) for k in _MODEL_TIME_FIT}
    for g in range(n_groups):
        for k in range(n_layers):
            rows = np.flatnonzero(np.isfinite(mean[g, k]).any(axis=1))
            if rows.size == 0:
                continue
            values, best_bt = _fit_maps(mean[g, k][rows][None], frames.times[rows], brain_times)
            for name, v in values.items():
                scalars[name][g, k] = v[0]
            best[g, k, rows] = best_bt[0]
            if null_full is not None:
                cells = null_full[:, g, k][:, rows][:, :, after]
                finite = np.isfinite(cells).any(axis=(1, 2))
                null_max[finite, g, k] = np.nanmax(cells[finite], axis=(1, 2))
                p[g, k] = max_statistic_p(scalars["peak_similarity"][g, k], null_max[:, g, k])
            if boot_full is not None:
                samples, _ = _fit_maps(boot_full[:, g, k][:, rows], frames.times[rows], brain_times)
                stacked = np.stack([samples[name] for name in _MODEL_TIME_FIT], axis=1)
                limits = bootstrap_confidence_interval(stacked, level)
                for q, name in enumerate(_MODEL_TIME_FIT):
                    ci[name][:, g, k] = limits[:, q]
    dims = ("channel_group", "frame_layer")
    out: dict[str, Any] = {
        "model_time_similarity": (
            ("subject", "channel_group", "frame_layer", "model_time", "time"),
            full,
        ),
        "model_time_best_brain_time": ((*dims, "model_time"), best),
    }
    attrs: dict[str, Any] = {}
    if resampling is not None:
        inconclusive = ~(p <= alpha)
        for name in ("lag", "slope"):
            scalars[name][inconclusive] = np.nan
            ci[name][:, inconclusive] = np.nan
        out["model_time_peak_p"] = (dims, p, _attrs("model_time_peak_p"))
        out["model_time_inconclusive"] = (dims, inconclusive, _attrs("model_time_inconclusive"))
        out["model_time_null_max"] = (
            ("permutation", *dims),
            null_max,
            _attrs("model_time_null_max"),
        )
        for name, (what, units) in _MODEL_TIME_FIT.items():
            long_name = f"bootstrap percentile interval of the model time x brain time {what}"
            out[f"model_time_{name}_ci"] = (
                ("bound", *dims),
                ci[name],
                {"long_name": f"{long_name} (over {resampling.over})", "units": units},
            )
        attrs = {
            "model_time_n_permutations": n_perm,
            "model_time_n_bootstraps": 0 if boot is None else int(boot.shape[0]),
            "model_time_bootstrap_over": resampling.over,
            "model_time_alpha": float(alpha),
            "model_time_ci_level": float(level),
        }
    out.update({f"model_time_{k}": (dims, v) for k, v in scalars.items()})
    return out, attrs


def _attrs(name: str) -> dict[str, str]:
    """``long_name`` and ``units`` of a model-time inference variable."""
    long_name, units = _MODEL_TIME_VARIABLES[name]
    return {"long_name": long_name, "units": units}

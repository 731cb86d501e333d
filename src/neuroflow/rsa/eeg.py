"""Pieces of the ``rsa_eeg`` stage: channel groups and bootstrap inference.

- **Channel groups** (``rsa.channel_groups``): EEG RDMs over subsets of the channels
  (e.g. occipital sites) beside the whole montage (group ``"all"``).
- **Bootstrap inference** on the time courses: the subject-mean similarity of each layer
  (first of ``rsa.comparisons``) resampled over stimuli and/or subjects
  (:func:`~.inference.bootstrap_evaluations`: the indices are drawn once and applied to
  every time point), giving percentile intervals and standard errors per time point and
  pairwise layer p-values at each layer's peak time. Resampling stimuli ranks every
  brain RDM anew per sample, so its cost grows with samples × subjects × time points ×
  stimulus pairs; ``rsa.bootstrap.eeg_times`` chooses the time points (see
  :func:`eeg_bootstrap`).

Model time × brain time RSA is in :mod:`neuroflow.rsa.model_time`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.artifacts import open_dataset
from neuroflow.peaks import peak_index
from neuroflow.progress import Progress

from .inference import (
    bootstrap_confidence_interval,
    bootstrap_evaluations,
    bootstrap_pair_pvalues,
    draw_bootstrap_samples,
)
from .rdm import correlation_rdm

__all__ = [
    "ALL_CHANNELS",
    "EEG_BOOTSTRAP_BUDGET",
    "check_channel_groups",
    "eeg_bootstrap",
    "resolve_channel_groups",
]


logger = logging.getLogger(__name__)


#: Name of the channel group of every channel.
ALL_CHANNELS = "all"


#: Work (bootstrap samples × brain RDMs × stimulus pairs) up to which
#: ``rsa.bootstrap.eeg_times: auto`` resamples stimuli at every time point, then at each
#: layer's peak only; above it even at the peaks, ``over: auto`` resamples subjects only.
#: About 4-10 ns per unit on one core (20-40 s at the budget).
EEG_BOOTSTRAP_BUDGET = 4e9


_GROUP_NAME = re.compile(r"^[A-Za-z0-9_]+$")


#: Memory (bytes) of the brain RDMs computed at once for the bootstrap.
_RDM_BLOCK_BYTES = 128 * 2**20


def check_channel_groups(groups: Any) -> dict[str, list[str]]:
    """Check the form of ``rsa.channel_groups``.

    Parameters
    ----------
    groups : dict of str to list of str
        Group name -> channel names.

    Returns
    -------
    groups : dict of str to list of str
    """
    if not isinstance(groups, Mapping):
        raise TypeError(
            f"`rsa.channel_groups` must be a mapping of group names to channel lists, got "
            f"{type(groups).__name__} instead."
        )
    out = {}
    for name, channels in groups.items():
        if not isinstance(name, str) or not _GROUP_NAME.match(name) or name == ALL_CHANNELS:
            raise ValueError(
                "`rsa.channel_groups` names must be letters, digits and underscores other "
                f"than {ALL_CHANNELS!r} (the group of every channel), got {name!r} instead."
            )
        if (
            isinstance(channels, str)
            or not isinstance(channels, Sequence)
            or not all(isinstance(c, str) and c for c in channels)
            or len(set(channels)) != len(channels)
            or len(channels) < 2
        ):
            raise ValueError(
                f"`rsa.channel_groups.{name}` must be a list of at least 2 distinct channel "
                f"names, got {channels!r} instead."
            )
        out[name] = list(channels)
    return out


def resolve_channel_groups(
    groups: Mapping[str, Sequence[str]], epochs: Sequence[str | os.PathLike]
) -> dict[str, list[str] | None]:
    """The channel groups of the EEG RDMs, checked against every recording.

    Parameters
    ----------
    groups : dict of str to list of str
        ``rsa.channel_groups``.
    epochs : list of path-like
        Epochs stores (field ``channel``).

    Returns
    -------
    groups : dict of str to (list of str | None)
        ``"all"`` (None: every channel of the subject) first, then ``groups``.

    Raises
    ------
    ValueError
        When a group names a channel that no recording has, or one that some recording
        lacks (naming that store).
    """
    groups = check_channel_groups(groups)
    out: dict[str, list[str] | None] = {ALL_CHANNELS: None}
    if not groups:
        return out
    stores = [
        (Path(p), {str(c) for c in open_dataset(p)["channel"].values}) for p in map(Path, epochs)
    ]
    every = set().union(*(chans for _, chans in stores))
    for name, channels in groups.items():
        for channel in channels:
            if channel not in every:
                known = sorted(every)
                raise ValueError(
                    f"`rsa.channel_groups.{name}` must name channels of the recordings, got "
                    f"{channel!r}, which none of the {len(stores)} epochs stores has (field "
                    f"`channel`: {', '.join(known[:8])}{', ...' if len(known) > 8 else ''})."
                )
            for path, chans in stores:
                if channel not in chans:
                    raise ValueError(
                        f"{path}: channel {channel!r} of `rsa.channel_groups.{name}` is "
                        "missing from this epochs store (field `channel`) but present in "
                        "others; a group's channels must be in every recording (drop it from "
                        "the group, or interpolate it instead of dropping it)."
                    )
        out[name] = channels
    return out


def bootstrap_factor(cfg: Mapping[str, Any], n_sub: int, shared: bool = True) -> str:
    """What ``rsa.bootstrap.over`` resamples, after ``auto`` and what the data allow.

    Parameters
    ----------
    cfg : dict
        The ``rsa.bootstrap`` section.
    n_sub : int
        Subjects.
    shared : bool
        Whether every subject saw the same stimuli (else they cannot be resampled).

    Returns
    -------
    over : str
        ``"stimuli"``, ``"subjects"``, ``"both"`` or ``"none"``.
    """
    over = cfg["over"]
    if over == "auto":
        over = "both" if n_sub >= 2 else "stimuli"
    if over in ("subjects", "both") and n_sub < 2:
        logger.info("RSA bootstrap over %s needs 2+ subjects: stimuli only.", over)
        over = "stimuli"
    if over in ("stimuli", "both") and not shared:
        logger.info(
            "RSA bootstrap: subjects saw different stimuli, so stimuli cannot be resampled "
            "together; %s.",
            "subjects only" if n_sub >= 2 else "no bootstrap",
        )
        over = "subjects" if n_sub >= 2 else "none"
    return over


def _brain_rdms(
    patterns: Sequence[np.ndarray],
    channels: Sequence[Sequence[np.ndarray]],
    sets: Sequence[tuple[int, int]],
) -> np.ndarray:
    """EEG RDMs of every subject at each (channel group, time) set: (n_sets, n_sub, n_pairs)."""
    n_stim = patterns[0].shape[0]
    out = np.empty((len(sets), len(patterns), n_stim * (n_stim - 1) // 2))
    index = np.asarray(sets, dtype=int).reshape(-1, 2)
    for g in np.unique(index[:, 0]):
        rows = np.flatnonzero(index[:, 0] == g)
        t = index[rows, 1]
        for s, (pattern, idx) in enumerate(zip(patterns, channels, strict=True)):
            out[rows, s] = correlation_rdm(np.moveaxis(pattern[:, idx[g]][:, :, t], 2, 0))
    return out


def eeg_bootstrap(
    patterns: Sequence[np.ndarray],
    channels: Sequence[Sequence[np.ndarray]],
    models: np.ndarray | None,
    similarity: np.ndarray,
    times: np.ndarray,
    *,
    method: str,
    config: Mapping[str, Any],
    shared: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Peaks and bootstrap inference of the EEG RSA time courses (one comparison).

    Parameters
    ----------
    patterns : list of ndarray, shape (n_stimuli, n_channels, n_times)
        Each subject's stimulus-averaged epochs over the RSA stimuli.
    channels : list of list of ndarray of int
        Per subject, the channel indices of each channel group.
    models : ndarray, shape (n_layers, n_pairs) | None
        Model RDMs over the RSA stimuli, when every subject has the same ones.
    similarity : ndarray, shape (n_subjects, n_groups, n_layers, n_times)
        Each subject's RSA time courses (``method``).
    times : ndarray, shape (n_times,)
        Brain times (s).
    method : str
        The comparison (the first of ``rsa.comparisons``).
    config : dict
        ``rsa.bootstrap``: ``over``, ``n_bootstraps``, ``level`` and ``eeg_times``
        (``all``: every time point; ``peaks``: each layer's peak time only; ``auto``:
        every time point while the work of resampling stimuli stays under
        :data:`EEG_BOOTSTRAP_BUDGET`, else the peaks; beyond it even there, ``over:
        auto`` resamples the subjects only, or skips the bootstrap with one subject).
    shared : bool
        Whether every subject has the same stimuli (stimuli can be resampled).

    Returns
    -------
    data_vars : dict
        ``peak_time`` and ``peak_similarity`` (channel_group, layer): the maximum of
        the subject-mean course; with a bootstrap, ``peak_similarity_ci`` (bound,
        channel_group, layer), ``peak_similarity_se`` and ``layer_comparison_p``
        (channel_group, layer_a, layer_b: each layer at its own peak time), and when
        every time point is resampled ``model_similarity_ci`` (bound, channel_group,
        layer, time) and ``model_similarity_se`` (channel_group, layer, time).
    attrs : dict
        ``bootstrap_over``, ``bootstrap_times``, ``n_bootstraps``, ``ci_level``,
        ``inference_comparison`` and, when the budget changed the plan,
        ``bootstrap_note``.
    """
    n_sub, n_groups, n_layers, n_t = similarity.shape
    mean = similarity.mean(axis=0)  # as cross_temporal_mean: NaN where a subject's is
    peak = peak_index(mean, times)  # (group, layer); at or after the onset
    found = peak >= 0
    safe = np.where(found, peak, 0)
    data_vars: dict[str, Any] = {
        "peak_time": (("channel_group", "layer"), np.where(found, times[safe], np.nan)),
        "peak_similarity": (
            ("channel_group", "layer"),
            np.where(found, np.take_along_axis(mean, safe[..., None], axis=-1)[..., 0], np.nan),
        ),
    }
    attrs: dict[str, Any] = {"inference_comparison": method}
    over = bootstrap_factor(config, n_sub, shared and models is not None)
    n_boot, level = int(config["n_bootstraps"]), float(config["level"])
    peak_sets = sorted({(int(g), int(peak[g, k])) for g, k in zip(*np.nonzero(found), strict=True)})
    mode = "all"
    if over in ("stimuli", "both"):
        rows_all, rows_peaks = n_sub * n_groups * n_t, n_sub * len(peak_sets)
        mode, over, note = _plan_times(
            config, over, n_boot, rows_all, rows_peaks, n_layers, models.shape[1]
        )
        if note:
            logger.info("RSA EEG bootstrap: %s.", note)
            attrs["bootstrap_note"] = note
    attrs["bootstrap_over"] = over
    if over == "none":
        return data_vars, attrs
    attrs.update({"bootstrap_times": mode, "n_bootstraps": n_boot, "ci_level": level})
    n_stim = patterns[0].shape[0]
    subjects, stimuli = draw_bootstrap_samples(
        np.random.default_rng(0), n_sub, n_stim, n_boot, over
    )
    if mode == "all":
        ci = np.full((2, n_groups, n_layers, n_t), np.nan)
        se = np.full((n_groups, n_layers, n_t), np.nan)
    peak_samples = np.full((n_boot, n_groups, n_layers), np.nan)
    blocks = _sample_blocks(
        patterns, channels, models, similarity, subjects, stimuli, method, over, mode, peak_sets
    )
    n_sets = len(peak_sets) if mode == "peaks" and over != "subjects" else n_groups * n_t
    progress = Progress(n_sets, f"EEG RSA bootstrap ({n_boot} samples)", "channel group x time")
    for sets, samples in blocks:
        progress.update(len(sets))
        for k, (g, t) in enumerate(sets):
            for layer in np.flatnonzero(peak[g] == t):
                peak_samples[:, g, layer] = samples[:, k, layer]
            if mode == "all":
                complete = samples[:, k][~np.isnan(samples[:, k]).any(axis=1)]
                ci[:, g, :, t] = bootstrap_confidence_interval(complete, level)
                if len(complete) > 1:
                    se[g, :, t] = complete.std(axis=0, ddof=1)
    progress.close()
    if mode == "all":
        data_vars["model_similarity_ci"] = (("bound", "channel_group", "layer", "time"), ci)
        data_vars["model_similarity_se"] = (("channel_group", "layer", "time"), se)
    peak_ci = np.full((2, n_groups, n_layers), np.nan)
    peak_se = np.full((n_groups, n_layers), np.nan)
    pair_p = np.full((n_groups, n_layers, n_layers), np.nan)
    for g in range(n_groups):
        cols = np.flatnonzero(found[g])
        s = peak_samples[:, g][:, cols]
        complete = s[~np.isnan(s).any(axis=1)]
        if len(complete) == 0:
            continue
        peak_ci[:, g, cols] = bootstrap_confidence_interval(complete, level)
        if len(complete) > 1:
            peak_se[g, cols] = complete.std(axis=0, ddof=1)
        pair_p[g][np.ix_(cols, cols)] = bootstrap_pair_pvalues(complete)
    data_vars.update(
        {
            "peak_similarity_ci": (("bound", "channel_group", "layer"), peak_ci),
            "peak_similarity_se": (("channel_group", "layer"), peak_se),
            "layer_comparison_p": (("channel_group", "layer_a", "layer_b"), pair_p),
        }
    )
    return data_vars, attrs


def _plan_times(
    config: Mapping[str, Any],
    over: str,
    n_boot: int,
    rows_all: int,
    rows_peaks: int,
    n_layers: int,
    n_pairs: int,
) -> tuple[str, str, str]:
    """Time points (``all`` or ``peaks``), factor and note of a stimulus bootstrap."""
    mode = config["eeg_times"]
    if mode != "auto":
        return mode, over, ""
    cost_all = n_boot * (rows_all + n_layers) * n_pairs
    if cost_all <= EEG_BOOTSTRAP_BUDGET:
        return "all", over, ""
    cost_peaks = n_boot * (rows_peaks + n_layers) * n_pairs
    if cost_peaks <= EEG_BOOTSTRAP_BUDGET or config["over"] != "auto":
        note = (
            f"stimuli resampled at each layer's peak time only: every time point would rank "
            f"{cost_all:.1e} stimulus pairs, over the budget of {EEG_BOOTSTRAP_BUDGET:.0e} "
            "(rsa.bootstrap.eeg_times: all resamples them anyway)"
        )
        return "peaks", over, note
    fallback = "subjects" if over == "both" else "none"
    note = (
        f"stimuli not resampled: even at the peak times {cost_peaks:.1e} stimulus pairs "
        f"would be ranked, over the budget of {EEG_BOOTSTRAP_BUDGET:.0e}; "
        f"{'subjects only' if fallback == 'subjects' else 'no bootstrap'} (rsa.bootstrap.over: "
        f"{over} resamples them at the peaks anyway)"
    )
    return "all", fallback, note


def _sample_blocks(
    patterns: Sequence[np.ndarray],
    channels: Sequence[Sequence[np.ndarray]],
    models: np.ndarray | None,
    similarity: np.ndarray,
    subjects: np.ndarray,
    stimuli: np.ndarray,
    method: str,
    over: str,
    mode: str,
    peak_sets: Sequence[tuple[int, int]],
) -> Iterator[tuple[list[tuple[int, int]], np.ndarray]]:
    """Bootstrap samples, block by block of (channel group, time) sets.

    Yields
    ------
    sets : list of (int, int)
        The (channel group, time) index of each set of the block.
    samples : ndarray, shape (n_bootstraps, n_sets, n_layers)
    """
    n_sub, n_groups, n_layers, n_t = similarity.shape
    if over == "subjects":
        weights = np.stack([np.bincount(s, minlength=n_sub) for s in subjects]) / n_sub
        samples = np.einsum("bs,sglt->bgtl", weights, similarity)
        sets = [(g, t) for g in range(n_groups) for t in range(n_t)]
        yield sets, samples.reshape(len(subjects), n_groups * n_t, n_layers)
        return
    if mode == "peaks":
        sets = list(peak_sets)
        if sets:
            data = _brain_rdms(patterns, channels, sets)
            yield sets, bootstrap_evaluations(models, data, subjects, stimuli, method=method)
        return
    sets = [(g, t) for t in range(n_t) for g in range(n_groups)]
    step = max(1, _RDM_BLOCK_BYTES // (n_sub * models.shape[1] * 8))
    for start in range(0, len(sets), step):
        block = sets[start : start + step]
        data = _brain_rdms(patterns, channels, block)
        yield block, bootstrap_evaluations(models, data, subjects, stimuli, method=method)

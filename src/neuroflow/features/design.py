"""Tell an event-related fMRI design from a movie or a blocked design by its events.

The alignment of features to the TR grid depends on the design. A movie or a story
presents stimuli back to back: averaging the events within each TR and letting the
encoder add the hemodynamic delay works. An event-related design (ds000117, NSD) presents
short, separated events with rest between them, and a blocked design blocks of short
events between rests: each event's boxcar must be convolved with the HRF at its own onset
and for its own duration, as a GLM builds its regressors, and each feature space needs
the response to any event (see ``config/presets/event_related.yaml``), or the rest/on
pattern of the features stands in for that response (:data:`PER_EVENT_KINDS`).
:func:`classify_run` tells one run's design from its stimulus events;
:func:`classify_design` pools the runs; and :func:`resolve_alignment` turns
``features.alignment.method: auto`` (and the ``auto`` values of ``hrf_model`` and
``event_regressor``) into the settings that suit the design.

A run is **event-related** when all of these hold (thresholds below, in TRs so that
they follow the sampling):

- its stimulus events are short: median duration at most :data:`SHORT_EVENT_TRS` TRs;
- they are separated: median gap from one event's end to the next one's onset at least
  :data:`MIN_GAP_TRS` TRs (fast image streams within blocks have gaps of a fraction of
  a TR, a movie none);
- they are sparse: they cover at most :data:`MAX_COVERAGE` of the time from the first
  onset to the last event's end (a movie or a story covers all of it).

Otherwise it is **continuous** when its events cover more than :data:`MAX_COVERAGE` of
that time (movies, stories), else **blocked**. Fewer than :data:`MIN_EVENTS` events
tell nothing (**unknown**). Gaps of at least :data:`REST_GAP_S` s are counted as rest
(reported; rest rows are not stimulus events).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "AUTO_ALIGNMENT",
    "EVENT_RELATED_ALIGNMENT",
    "EVENT_RELATED_HRF_LIBRARY",
    "MAX_COVERAGE",
    "MIN_EVENTS",
    "MIN_GAP_TRS",
    "PER_EVENT_KINDS",
    "REST_GAP_S",
    "SHORT_EVENT_TRS",
    "DesignTiming",
    "classify_design",
    "classify_run",
    "resolve_alignment",
]

#: Longest median event duration of an event-related run, in TRs.
SHORT_EVENT_TRS = 2.0
#: Shortest median gap between consecutive events of an event-related run, in TRs.
MIN_GAP_TRS = 0.5
#: Largest share of a run's stimulus time that event-related events cover.
MAX_COVERAGE = 0.8
#: Fewest stimulus events from which a run's design is told.
MIN_EVENTS = 4
#: Shortest gap between events (s) counted as rest.
REST_GAP_S = 10.0
#: The ``auto`` values of the workflow's ``features.alignment`` defaults, which the plan
#: resolves per dataset (the package's own defaults, for direct calls that know no
#: design, are the values they resolve to for a movie).
AUTO_ALIGNMENT: dict[str, Any] = {"method": "auto", "hrf_model": "auto", "event_regressor": "auto"}
#: The HRF library of event-related designs: SPM's canonical HRF peaking at 4, 5, 6 and
#: 7 s (:data:`neuroflow.features.config.SHIFTED_HRF_MODELS`), the range of human
#: responses; the encoder keeps, per voxel, the one that cross-validates best on the
#: training runs.
EVENT_RELATED_HRF_LIBRARY = ["spm peak 4 s", "spm", "spm peak 6 s", "spm peak 7 s"]
#: What ``method: auto`` resolves to for an event-related design (the settings of
#: ``config/presets/event_related.yaml``).
EVENT_RELATED_ALIGNMENT: dict[str, Any] = {
    "method": "hrf",
    "hrf_model": EVENT_RELATED_HRF_LIBRARY,
    "event_regressor": True,
}
#: What the ``auto`` values resolve to for any other design (the alignment of movies).
CONTINUOUS_ALIGNMENT: dict[str, Any] = {
    "method": "average",
    "hrf_model": "glover",
    "event_regressor": False,
}
KINDS = ("event_related", "continuous", "blocked", "unknown")
#: Designs whose ``method: auto`` resolves to :data:`EVENT_RELATED_ALIGNMENT`: events with
#: rest between them (alone or in blocks). Averaging such events within TRs leaves no column
#: for the response to any event, so a feature's on/off pattern stands in for it and a
#: modulation around the feature's mean is lost (on generated blocked designs, 0.24 of
#: the oracle for a parametric modulator, against 0.99 with each event convolved).
PER_EVENT_KINDS = ("event_related", "blocked")


@dataclass(frozen=True)
class DesignTiming:
    """The timing facts of one run's stimulus events and the design they make.

    Attributes
    ----------
    kind : str
        ``"event_related"``, ``"continuous"``, ``"blocked"`` or ``"unknown"``.
    n_events : int
        Stimulus events with an onset.
    median_duration : float
        Median event duration (s; a missing duration counts as 0).
    median_gap : float
        Median time from one event's end to the next one's onset (s; 0 when they
        overlap).
    coverage : float
        Share of the time from the first onset to the last end covered by events.
    n_rest_gaps : int
        Gaps of at least :data:`REST_GAP_S` s.
    tr : float
        Repetition time (s).
    """

    kind: str
    n_events: int
    median_duration: float
    median_gap: float
    coverage: float
    n_rest_gaps: int
    tr: float

    def describe(self) -> str:
        """One line: the kind and the facts that decided it."""
        if self.kind == "unknown":
            return f"unknown ({self.n_events} stimulus events, fewer than {MIN_EVENTS})"
        return (
            f"{self.kind.replace('_', '-')} ({self.n_events} events, median duration "
            f"{self.median_duration:.2g} s and gap {self.median_gap:.2g} s at TR "
            f"{self.tr:g} s, {self.coverage:.0%} of the time covered, "
            f"{self.n_rest_gaps} rest gap(s))"
        )


def _union_length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total length of the union of intervals sorted by start."""
    total, current_start, current_end = 0.0, None, None
    for s, e in zip(starts, ends, strict=True):
        if current_end is None or s > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = s, e
        else:
            current_end = max(current_end, e)
    if current_end is not None:
        total += current_end - current_start
    return float(total)


def classify_run(onsets: np.ndarray, durations: np.ndarray, tr: float) -> DesignTiming:
    """The design of one run from its stimulus events.

    Parameters
    ----------
    onsets : ndarray, shape (n_events,)
        Onsets (s) of the run's stimulus events, in any order; NaN onsets are ignored.
    durations : ndarray, shape (n_events,)
        Their durations (s); NaN or negative durations count as 0 (impulses).
    tr : float
        Repetition time (s).

    Returns
    -------
    timing : DesignTiming
        The facts and the kind (see the module docstring for the thresholds).
    """
    tr = float(tr)
    if not np.isfinite(tr) or tr <= 0:
        raise ValueError(f"`tr` must be a positive number of seconds, got {tr!r} instead.")
    onsets = np.asarray(onsets, dtype=float).ravel()
    durations = np.asarray(durations, dtype=float).ravel()
    if onsets.shape != durations.shape:
        raise ValueError(
            f"`onsets` and `durations` must have the same length, got {onsets.size} and "
            f"{durations.size} instead."
        )
    keep = np.isfinite(onsets)
    onsets = onsets[keep]
    durations = np.clip(np.nan_to_num(durations[keep], nan=0.0), 0.0, None)
    order = np.argsort(onsets, kind="stable")
    onsets, durations = onsets[order], durations[order]
    ends = onsets + durations
    n = int(onsets.size)
    if n < MIN_EVENTS:
        return DesignTiming("unknown", n, np.nan, np.nan, np.nan, 0, tr)
    # gap after each event: to the next onset, from the latest end so far
    gaps = np.clip(onsets[1:] - np.maximum.accumulate(ends)[:-1], 0.0, None)
    span = float(np.max(ends) - onsets[0])
    coverage = _union_length(onsets, ends) / span if span > 0 else 1.0
    median_duration = float(np.median(durations))
    median_gap = float(np.median(gaps))
    short = median_duration <= SHORT_EVENT_TRS * tr
    separated = median_gap >= MIN_GAP_TRS * tr
    sparse = coverage <= MAX_COVERAGE
    if short and separated and sparse:
        kind = "event_related"
    elif not sparse:
        kind = "continuous"
    else:
        kind = "blocked"
    return DesignTiming(
        kind,
        n,
        median_duration,
        median_gap,
        float(coverage),
        int(np.sum(gaps >= REST_GAP_S)),
        tr,
    )


def classify_design(runs: Mapping[str, DesignTiming]) -> tuple[str, list[str]]:
    """The design of a dataset from the designs of its runs.

    Parameters
    ----------
    runs : dict of str to DesignTiming
        Run key -> the run's timing (:func:`classify_run`).

    Returns
    -------
    kind : str
        The kind every run that tells one has (runs of kind ``"unknown"`` do not vote;
        ``"unknown"`` when none tells, or when there are no runs).
    conflicts : list of str
        Empty when the runs agree; else one ``"<kind>: <run keys>"`` entry per kind
        found, for an error message.
    """
    by_kind: dict[str, list[str]] = {}
    for key, timing in runs.items():
        if timing.kind != "unknown":
            by_kind.setdefault(timing.kind, []).append(key)
    if not by_kind:
        return "unknown", []
    if len(by_kind) == 1:
        return next(iter(by_kind)), []
    conflicts = []
    for kind in KINDS:
        if kind in by_kind:
            keys = by_kind[kind]
            shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            conflicts.append(f"{kind.replace('_', '-')}: {shown}")
    return "mixed", conflicts


def resolve_alignment(
    alignment: Mapping[str, Any], delays: Mapping[str, Any], kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``features.alignment`` and ``encoding.delays`` with their ``auto`` values resolved.

    Parameters
    ----------
    alignment : dict
        The ``features.alignment`` section. ``method: auto`` becomes ``hrf`` for an
        event-related or a blocked design (:data:`PER_EVENT_KINDS`) and ``average``
        otherwise; ``hrf_model: auto`` becomes the
        HRF library :data:`EVENT_RELATED_HRF_LIBRARY` when ``method: auto`` became
        ``hrf``, else ``glover``; ``event_regressor: auto`` becomes true when ``method:
        auto`` became ``hrf``, else false. Other values are kept.
    delays : dict
        The ``encoding.delays`` section. When ``method: auto`` became ``hrf``, its
        ``method: hrf`` becomes ``none`` (the aligned features are already convolved
        with the HRF); ``fir`` and ``none`` are kept.
    kind : str
        The dataset's design (:func:`classify_design`): ``"event_related"``,
        ``"continuous"``, ``"blocked"`` or ``"unknown"``.

    Returns
    -------
    alignment, delays : dict
        Copies with every ``auto`` value resolved; for a movie, a story or an unknown
        design, exactly what the sections held before ``auto`` existed.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r} instead.")
    event_related = alignment.get("method") == "auto" and kind in PER_EVENT_KINDS
    chosen = EVENT_RELATED_ALIGNMENT if event_related else CONTINUOUS_ALIGNMENT
    out = dict(alignment)
    for key, value in chosen.items():
        if out.get(key, "auto") == "auto":
            out[key] = list(value) if isinstance(value, list) else value
    new_delays = dict(delays)
    if event_related and new_delays.get("method") == "hrf":
        new_delays["method"] = "none"
    return out, new_delays

"""Which decoding analyses apply to a dataset, with a note for each one left out.

fMRI decoding needs single-trial patterns (or runs whose events name the stimuli) of at
least :data:`MIN_DECODED_STIMULI` stimuli, and feature spaces for its identification
parts; EEG decoding needs epochs with at least two classes of the decoded label (or
feature spaces to decode); resting recordings and recordings whose markers hold no
event have no epochs; cross-subject decoding needs classes shared by 2+ subjects (or
sessions). :func:`neuroflow.workflow.applicability.decide_scope` asks these for the
plan's scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from neuroflow.io.records import EegRecording

if TYPE_CHECKING:
    from neuroflow.workflow.plan import WorkflowPlan


__all__ = ["MIN_DECODED_STIMULI", "markers_hold_no_event"]


def _decoding_cross_subject(
    plan: WorkflowPlan, notes: list[str], resting: Sequence[str] = ()
) -> bool:
    """Whether EEG decoding across subjects (or sessions) runs; a note when it cannot.

    Leave-one-subject-out needs 2+ EEG subjects, leave-one-session-out a subject with 2+
    sessions, counted over the recordings with events (the job reads no epochs of the
    ``resting`` ones). The tangent-space classifier needs ``pyriemann`` (the ``riemann``
    extra): a configuration error before any job runs when it is not installed.
    """
    import importlib.util

    from neuroflow.extras import install_hint

    cfg = plan.config["decoding"].get("cross_subject") or {}
    if not cfg.get("enabled", True):
        return False
    recordings = [r for r in plan.eeg_recordings if r.key not in resting]
    subjects = sorted({r.subject for r in recordings})
    if cfg.get("cv", "leave-one-subject-out") == "leave-one-session-out":
        sessions: dict[str, set[str | None]] = {}
        for rec in recordings:
            sessions.setdefault(rec.subject, set()).add(rec.session)
        if not any(len(s) >= 2 for s in sessions.values()):
            notes.append(
                "decoding_cross_subject: skipped, leave-one-session-out "
                "(`decoding.cross_subject.cv`) needs a subject with 2+ EEG sessions, and no "
                "subject has more than one"
            )
            return False
    elif len(subjects) < 2:
        notes.append(
            "decoding_cross_subject: skipped, leave-one-subject-out needs 2+ EEG subjects, "
            f"got sub-{', sub-'.join(subjects)} with events (set `decoding.cross_subject.cv` "
            "to leave-one-session-out to decode across sessions)"
        )
        return False
    if "tangent_space" in cfg.get("classifiers", ()) and not importlib.util.find_spec("pyriemann"):
        raise ValueError(
            "`decoding.cross_subject.classifiers` names tangent_space, which needs pyriemann, "
            f"not installed. {install_hint('pyriemann')} Or remove tangent_space from the list."
        )
    return True


#: Fewest distinct stimuli in a subject's fMRI events that fMRI decoding needs.
MIN_DECODED_STIMULI = 4


def _decoding_fmri(plan: WorkflowPlan, single: bool, spaces: bool, notes: list[str]) -> bool:
    """Whether ``decode_fmri`` runs: patterns to decode and something to decode them for.

    Identification needs a feature space; concept decoding an annotation table. An
    annotation table given by path must exist.
    """
    cfg = plan.config["decoding"]
    fc = cfg.get("fmri") or {}
    if not (cfg.get("enabled", True) and fc.get("enabled", True)):
        return False
    patterns = fc.get("patterns", "auto")
    if patterns == "auto":
        patterns = "trials" if single else "events"
    if patterns == "trials" and not single:
        notes.append(
            "decoding_fmri: skipped, `decoding.fmri.patterns` is 'trials' but no "
            "single-trial betas are estimated (single_trial.enabled) or imported"
        )
        return False
    if patterns == "events" and not plan.is_demo:
        per_subject: dict[str, set[str]] = {}
        for run in plan.fmri_runs:
            per_subject.setdefault(run.subject, set()).update(
                plan.design.run_stimuli.get(run.key, ())
            )
        most = max((len(v) for v in per_subject.values()), default=0)
        if most < MIN_DECODED_STIMULI:
            if plan.fmri_runs:
                notes.append(
                    f"decoding_fmri: skipped, it needs {MIN_DECODED_STIMULI}+ distinct "
                    f"stimuli in a subject's fMRI events (2 held out, 2 to train on), got "
                    f"{most}"
                )
            return False
    identify = spaces and bool(cfg["identification"].get("enabled", True))
    if not plan.is_demo:
        reason = _fmri_decoding_unavailable(plan, patterns, identify)
        if reason is not None:
            notes.append(f"decoding_fmri: skipped, {reason}")
            return False
    subjects = (
        {b.subject for b in plan.betas_sessions}
        if plan.source == "betas"
        else {r.subject for r in plan.fmri_runs}
    )
    if identify and fc.get("cv") == "leave-one-subject-out" and len(subjects) < 2:
        raise ValueError(
            "`decoding.fmri.cv` must be 'within-subject' when fMRI has fewer than 2 subjects, "
            f"got 'leave-one-subject-out' with {len(subjects)} instead."
        )
    if identify and fc.get("cv") == "leave-one-session-out":
        records = plan.betas_sessions if plan.source == "betas" else plan.fmri_runs
        sessions: dict[str, set[str | None]] = {}
        for rec in records:
            sessions.setdefault(rec.subject, set()).add(rec.session)
        if records and not any(len(v) >= 2 for v in sessions.values()):
            raise ValueError(
                "`decoding.fmri.cv` must not be 'leave-one-session-out' when no fMRI "
                "subject has 2+ sessions (entity `ses`), got sessions "
                f"{ {k: sorted(str(x) for x in v if x) for k, v in sorted(sessions.items())} } "
                "instead."
            )
    given = (fc.get("concepts") or {}).get("annotations", "auto")
    table = plan.concept_annotations
    if table is not None and given != "auto" and not table.is_file():
        raise FileNotFoundError(
            "`decoding.fmri.concepts.annotations` must name an existing TSV, got "
            f"{str(given)!r} ({table}) instead."
        )
    return bool(identify or table is not None)


def _fmri_presentations(plan: WorkflowPlan, patterns: str) -> dict[str, list[str] | None]:
    """Stimulus of every presentation ``decode_fmri`` will read, per subject.

    Event patterns: the stimulus events of the subject's runs; single trials: those
    events (estimated betas) or the rows of its trials tables (imported betas). None
    for a subject whose presentations the events tables do not tell (trials filtered
    by ``single_trial.trial_types``; imported betas with ``dataset.stimulus_events``
    rules, which the import does not apply).
    """
    from neuroflow.io.events import check_stimulus_events

    design = plan.design
    out: dict[str, list[str] | None] = {}
    if plan.source == "betas":
        rules = check_stimulus_events(plan.stimulus_events)
        known = not (rules["select"] or rules["exclude"])
        for session in plan.betas_sessions:
            stims = out.setdefault(session.subject, [] if known else None)
            if stims is not None:
                stims.extend(design.trial_stimuli.get(session.key, ()))
        return out
    known = patterns == "events" or not plan.config["single_trial"].get("trial_types")
    for run in plan.fmri_runs:
        stims = out.setdefault(run.subject, [] if known else None)
        if stims is not None:
            stims.extend(design.run_stimuli.get(run.key, ()))
    return out


def _fmri_decoding_unavailable(plan: WorkflowPlan, patterns: str, identify: bool) -> str | None:
    """Why ``decode_fmri`` would find nothing to decode (None when some subject has).

    The job's own checks (:func:`neuroflow.decoding.options.fmri_identification_unavailable`
    and :func:`neuroflow.decoding.options.concepts_unavailable`) run on the presentations
    the events tables describe; subjects they do not describe are taken to apply.
    """
    import numpy as np

    from neuroflow.decoding.concepts import read_concept_annotations
    from neuroflow.decoding.options import (
        concepts_unavailable,
        fmri_identification_unavailable,
        resolve_config,
    )

    table = plan.concept_annotations
    if (not identify and table is None) or (table is not None and not table.is_file()):
        return None  # nothing asked of the stage, or a table the caller checks
    annotations = read_concept_annotations(table) if table is not None else None
    cfg = resolve_config(plan.decoding_fmri_config())
    min_count = int(cfg["fmri"]["concepts"]["min_count"])
    reasons: list[str] = []
    for subject, stims in sorted(_fmri_presentations(plan, patterns).items()):
        if stims is None:
            return None
        why = []
        if identify:
            ident = fmri_identification_unavailable(stims)
            if ident is None:
                return None
            why.append(f"identification: {ident}")
        if annotations is not None:
            concepts = concepts_unavailable(
                np.unique(np.asarray(stims, dtype=str)), annotations, min_count=min_count
            )
            if concepts is None:
                return None
            why.append(f"concepts: {concepts}")
        reasons.append(f"sub-{subject} ({'; '.join(why) or 'nothing to decode'})")
    what = "stimuli to identify" if identify else ""
    if annotations is not None:
        what += (" nor " if what else "") + "concepts with enough labelled stimuli"
    return f"no subject has {what} in its fMRI events: {', '.join(reasons)}"


def _eeg_epoch_labels(plan: WorkflowPlan) -> dict[str, tuple[list[str], list[str]] | None]:
    """Condition and stimulus of the epochs of each EEG recording, by key.

    As ``preprocess_eeg`` cuts them from the recording's ``_events.tsv``
    (:func:`neuroflow.workflow.stimulus_checks.eeg_epoch_labels`), or none at all for a
    BrainVision recording without one whose marker file holds no event
    (:func:`markers_hold_no_event`); None where the files do not tell (events from
    annotations or a stim channel, an epochs file).
    """
    from neuroflow.workflow.stimulus_checks import eeg_epoch_labels

    prep = plan.config["preprocess_eeg"]
    out: dict[str, tuple[list[str], list[str]] | None] = {}
    for rec in plan.eeg_recordings:
        table = plan.design.eeg_tables.get(rec.key)
        if rec.events is None and not rec.epoched and markers_hold_no_event(rec, prep):
            out[rec.key] = ([], [])
            continue
        if rec.epoched or table is None or prep["event_source"] not in ("auto", "events_tsv"):
            out[rec.key] = None
            continue
        out[rec.key] = eeg_epoch_labels(
            table, prep, plan.stimulus_events, where=rec.events or rec.key
        )
    return out


def markers_hold_no_event(rec: EegRecording, prep: Mapping[str, Any]) -> bool:
    """Whether ``preprocess_eeg`` finds no event in a recording without ``_events.tsv``.

    Only BrainVision recordings are told at plan time: their markers are read from the
    header and marker files (no samples), and the job's own
    :func:`neuroflow.preprocessing.eeg.events.find_events` looks for events in them. A
    recording whose events could come from a stim channel (``preprocess_eeg.stim_channel``
    set, or a ``TRIG``/``STIM`` channel in ``_channels.tsv``), another format, or files
    that do not read (the job names the problem) give False: the job decides.

    Parameters
    ----------
    rec : EegRecording
        A continuous recording.
    prep : dict
        The ``preprocess_eeg`` section (``event_source``, ``event_column``,
        ``stim_column``, ``stim_channel``).

    Returns
    -------
    no_event : bool
        True when the job would cut no epoch from the recording.
    """
    if (
        rec.events is not None
        or rec.eeg.suffix.lower() != ".vhdr"
        or prep["event_source"] not in ("auto", "annotations")
        or prep.get("stim_channel") is not None
    ):
        return False
    import mne

    from neuroflow.preprocessing.eeg.events import find_events
    from neuroflow.preprocessing.eeg.sidecars import read_channels_tsv

    try:
        if rec.channels is not None:
            types = read_channels_tsv(rec.channels).get("mne_type")
            if types is not None and (types == "stim").any():
                return False
        raw = mne.io.read_raw_brainvision(rec.eeg, preload=False, verbose="error")
    except (OSError, ValueError, RuntimeError):
        return False  # the job reads the files and names the problem
    if "stim" in raw.get_channel_types():
        return False
    events, _ = find_events(
        raw,
        events_tsv=None,
        source=prep["event_source"],
        event_column=prep["event_column"],
        stim_column=prep["stim_column"],
        stim_channel=None,
    )
    return events.empty


def _resting_recordings(
    plan: WorkflowPlan, labels: Mapping[str, tuple[list[str], list[str]] | None], notes: list[str]
) -> list[str]:
    """Keys of the continuous EEG recordings whose events tables list no epoch.

    They are preprocessed and checked (QC) like the others, and left out of the
    analyses of epochs (decoding), with a note each.
    """
    out = []
    for rec in plan.continuous_recordings:
        found = labels.get(rec.key)
        if found is not None and not found[0]:
            out.append(rec.key)
            where = (
                f"its events table ({rec.events}) lists"
                if rec.events is not None
                else f"it has no events table and the markers of {rec.eeg} hold"
            )
            notes.append(
                f"decoding: {rec.key} left out, {where} no event to cut epochs around (a "
                "resting-state recording); it is still preprocessed and checked"
            )
    return out


def _subject_labels(
    plan: WorkflowPlan,
    labels: Mapping[str, tuple[list[str], list[str]] | None],
    resting: Sequence[str],
) -> dict[str, tuple[list[str], list[str]] | None]:
    """Condition and stimulus of every epoch of each EEG subject (None: not told)."""
    out: dict[str, tuple[list[str], list[str]] | None] = {}
    for subject in plan.eeg_subjects:
        conditions: list[str] = []
        stimuli: list[str] = []
        for rec in plan.recordings_of(subject):
            if rec.key in resting:
                continue
            found = labels.get(rec.key)
            if found is None:
                out[subject] = None
                break
            conditions += found[0]
            stimuli += found[1]
        else:
            out[subject] = (conditions, stimuli)
    return out


def _decoding_eeg(
    plan: WorkflowPlan,
    per_subject: Mapping[str, tuple[list[str], list[str]] | None],
    has_features: bool,
    notes: list[str],
) -> list[str]:
    """Subjects whose EEG decoding has an analysis that applies (a note for the others).

    Each subject's epochs, as the events tables describe them, are checked by the job's
    own :func:`neuroflow.decoding.options.applicable_parts`; subjects they do not describe
    are kept (their job decides).
    """
    from neuroflow.decoding.options import applicable_parts

    cfg = plan.decoding_config()
    kept, left = [], {}
    for subject, found in per_subject.items():
        if found is None:
            kept.append(subject)
            continue
        if not found[1]:
            left[subject] = "its recordings list no event"
            continue
        parts = applicable_parts({subject: found}, has_features=has_features, config=cfg)
        if any(why is None for why in parts.values()):
            kept.append(subject)
        else:
            left[subject] = "; ".join(f"{k}: {why}" for k, why in parts.items() if why != "off")
    if kept:
        notes += [
            f"decoding: sub-{s} left out, no decoding analysis applies ({why})"
            for s, why in left.items()
        ]
        return kept
    known = {s: f for s, f in per_subject.items() if f is not None and f[1]}
    if known:
        parts = applicable_parts(known, has_features=has_features, config=cfg)
        why = "; ".join(f"{k}: {w}" for k, w in parts.items() if w != "off")
    else:
        why = "no recording lists an event to cut epochs around"
    notes.append(f"decoding: skipped, no decoding analysis applies ({why})")
    return []


def _cross_subject_classes(
    plan: WorkflowPlan,
    labels: Mapping[str, tuple[list[str], list[str]] | None],
    resting: Sequence[str],
) -> str | None:
    """Why cross-subject decoding has too few units or shared classes (None when it has
    enough, or when the events tables do not tell).

    The units are the subjects (leave-one-subject-out) or the sessions of the subjects
    with 2+ sessions (leave-one-session-out), as the job forms them; their classes are
    checked by the job's own :func:`neuroflow.decoding.options.shared_classes`.
    """
    from neuroflow.decoding.options import resolve_cross_subject_config, shared_classes

    cs = resolve_cross_subject_config(plan.cross_subject_config())["cross_subject"]
    by_session = cs["cv"] == "leave-one-session-out"
    units: dict[tuple[str, str], list[str]] = {}
    for rec in plan.eeg_recordings:
        if rec.key in resting:
            continue
        found = labels.get(rec.key)
        if found is None:
            return None
        unit = (rec.subject, str(rec.session) if by_session else "")
        units.setdefault(unit, []).extend(found[0] if cs["target"] == "condition" else found[1])
    if by_session:
        sessions: dict[str, int] = {}
        for subject, _ in units:
            sessions[subject] = sessions.get(subject, 0) + 1
        units = {u: v for u, v in units.items() if sessions[u[0]] >= 2}
    elif len(units) < 2:
        return f"leave-one-subject-out needs 2+ EEG subjects with events, got {len(units)}"
    if not units:
        return "leave-one-session-out needs a subject with 2+ EEG sessions with events"
    classes, _ = shared_classes(list(units.values()))
    if len(classes) >= 2:
        return None
    return (
        f"`decoding.cross_subject.target` ({cs['target']!r}) gives {len(classes)} class(es) "
        f"that every held-out unit has ({', '.join(classes) or 'none'}), and decoding needs 2"
    )

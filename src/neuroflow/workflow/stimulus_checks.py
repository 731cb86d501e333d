"""Checks of the stimuli that jobs will be given, made when the workflow is planned.

Some mistakes would otherwise surface only in a job, minutes or hours into a run, or not
at all. :func:`check_stimulus_files` refuses them, naming the ``stim_file``, the events
table and row that first name it, and the extractor's entry:

- a ``stim_file`` that leaves the dataset's ``stimuli/`` folder (absolute, with a ``..``
  component, or naming a link to a file outside the dataset), when an extractor reads
  stimulus files: stimuli are read from inside the dataset only;
- a ``stim_file`` of another modality among an extractor's stimuli (a ``.txt`` among
  images), which would stop its features job: an error, or, with
  ``features.unavailable: skip``, the extractor is left out with a note;
- a ``stim_file`` whose extension neuroflow does not read (``notes.docx``), handed to
  a feature extractor that infers its stimuli's modality from their extensions
  (``modality: auto``);
- ``decoding.identification.top_k`` values at or above a subject's number of test
  stimuli (top-k accuracy among k or fewer candidates is 1 whatever the decoder):
  :func:`identification_notes` refuses a list with no smaller value and notes the
  values that are left undefined otherwise.

The test stimuli are counted from the events tables as the decoding jobs choose them:

- EEG (``decode_eeg``): the stimuli of the epochs whose condition is
  ``decoding.identification.test_condition``, else those ``test: auto`` chooses
  (:func:`neuroflow.trial_split.select_test_stimuli`). Each epoch's condition and
  stimulus come from its recording's ``_events.tsv`` as ``preprocess_eeg`` reads them
  (``event_column``, ``stim_column``, ``conditions``, ``dataset.stimulus_events``).
  Recordings whose events come from elsewhere (annotations, a stim channel, epochs
  files) cannot be counted here; their subjects are left to the job, which warns.
  Epochs rejected for artefacts may leave a job fewer test stimuli than counted here.
- fMRI (``decode_fmri``): the stimuli ``test: auto`` chooses among a subject's single
  trials (the stimulus events of its runs, or the rows of its imported trials tables),
  when those are known here (no ``single_trial.trial_types`` filter; for imported betas,
  no ``dataset.stimulus_events`` rules, which the import does not apply).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from neuroflow.io.events import check_stimulus_events, is_missing, stimulus_mask
from neuroflow.trial_split import select_test_stimuli

if TYPE_CHECKING:
    from neuroflow.workflow.plan import WorkflowPlan

__all__ = [
    "EVENT_NAME_FALLBACKS",
    "HeldOutStimuli",
    "check_stimulus_files",
    "eeg_epoch_labels",
    "eeg_test_stimuli",
    "fmri_test_stimuli",
    "identification_notes",
    "stimulus_modality",
]

#: Columns ``preprocess_eeg`` names events by when ``event_column`` is absent, in order
#: (as :func:`neuroflow.preprocessing.eeg.sidecars.read_events_tsv` reads them).
EVENT_NAME_FALLBACKS = ("value", "trial_type")
#: Stimulus files listed in one message.
_LISTED = 5


# --------------------------------------------------------------------------- extensions
def _reads_extensions(entry: Mapping[str, Any], plan: WorkflowPlan) -> bool:
    """Whether a features job infers this entry's modality from stimulus extensions."""
    from neuroflow.features.config import fill_entry
    from neuroflow.features.registry import get_extractor

    filled = fill_entry(entry)
    if filled["extractor"] == "events" or filled["text_source"] == "transcript":
        return False
    if filled["modality"] != "auto":
        return False
    info = get_extractor(filled["extractor"])
    # a text extractor reads captions when there is a captions table
    return not (info.modalities == ("text",) and plan.design.captions is not None)


def _where(rows: Mapping[str, tuple[Path, int]], stim: str) -> str:
    table, row = rows[stim]
    return f"stim_file in {table}, row {row}"


def _others(rows: Mapping[str, tuple[Path, int]], found: Sequence[str], what: str) -> str:
    """`` Other <what>: 'a' (stim_file in t, row r), ... and n more.`` (empty for one)."""
    if len(found) < 2:
        return ""
    listed = ", ".join(f"{s!r} ({_where(rows, s)})" for s in found[1 : 1 + _LISTED])
    more = f" and {len(found) - 1 - _LISTED} more" if len(found) - 1 > _LISTED else ""
    return f" Other {what}: {listed}{more}."


def _reads_files(entry: Mapping[str, Any]) -> bool:
    """Whether an extractor entry reads stimulus files (every one but ``events``)."""
    from neuroflow.features.config import fill_entry

    return fill_entry(entry)["extractor"] != "events"


def check_stimulus_paths(plan: WorkflowPlan) -> None:
    """Refuse ``stim_file`` values that lead outside the dataset's ``stimuli/`` folder.

    Parameters
    ----------
    plan : WorkflowPlan
        The plan (its design facts are read; the stimuli folder is walked for links,
        nothing is opened).

    Raises
    ------
    ValueError
        When a ``stim_file`` of a stimulus row is absolute, has a ``..`` component, or
        names a file (or lies under a folder) that is a link to something outside the
        dataset; the message names the value, the events table and row that first name
        it, and the fix.
    """
    from neuroflow.stimuli.files import linked_outside, stim_file_escape

    rows = plan.design.stim_file_rows
    if not rows:  # the demo, or no stimulus rows
        return
    bad = {stim: why for stim in rows if (why := stim_file_escape(stim)) is not None}
    if not bad and plan.design.stimuli_dir is not None:
        for stim, target in linked_outside(list(rows), plan.stimuli_dir).items():
            bad[stim] = f"a link to {target}, outside the dataset"
    if not bad:
        return
    first, *_ = bad
    raise ValueError(
        f"`stim_file` must name a file inside the dataset's stimuli folder "
        f"{plan.stimuli_dir}, got {first!r} ({bad[first]}; {_where(rows, first)}) instead."
        f"{_others(rows, list(bad), 'such stim_files')} Write each stim_file relative to "
        "the stimuli folder (e.g. 'faces/f01.png') and keep the files there: stimuli are "
        "read from inside the dataset only."
    )


def stimulus_modality(stimulus_ids: Sequence[str], accepted: Sequence[str]) -> str | None:
    """The modality an extractor reads a set of stimulus files in.

    Parameters
    ----------
    stimulus_ids : sequence of str
        ``stim_file`` values.
    accepted : sequence of str
        The modalities the extractor reads.

    Returns
    -------
    modality : str | None
        Among the modalities of the files' extensions, the one the extractor reads
        with the most files (ties: image, video, audio, text); failing that, the one
        with the most files; None when no extension belongs to a modality. Files of
        other modalities are the odd ones out (see :func:`check_stimulus_files`).
    """
    from neuroflow.stimuli.files import MODALITY_EXTENSIONS, file_modality

    counts = Counter(m for stim in stimulus_ids if (m := file_modality(stim)) is not None)
    if not counts:
        return None
    order = list(MODALITY_EXTENSIONS)
    return min(counts, key=lambda m: (m not in accepted, -counts[m], order.index(m)))


def _entry_modality(entry: Mapping[str, Any], plan: WorkflowPlan) -> str | None:
    """The modality a features job reads this entry's stimulus files in (None: no files)."""
    from neuroflow.features.config import fill_entry
    from neuroflow.features.registry import get_extractor

    filled = fill_entry(entry)
    if filled["extractor"] == "events" or filled["text_source"] == "transcript":
        return None
    info = get_extractor(filled["extractor"])
    if filled["modality"] != "auto":
        return str(filled["modality"])
    if info.modalities == ("text",):
        return "text"
    return stimulus_modality(list(plan.design.stim_file_rows), info.modalities)


def _odd_ones_out(modality: str, stims: Sequence[str], auto: bool) -> list[str]:
    """Stimulus files of another modality than the one an extractor reads them in."""
    from neuroflow.stimuli.files import file_modality

    def fits(found: str | None) -> bool:
        # a video's sound is read from its WAV soundtrack when `modality: audio` is set
        return (
            found is None
            or found == modality
            or (not auto and modality == "audio" and found == "video")
        )

    return [s for s in stims if not fits(file_modality(s))]


def _check_modalities(plan: WorkflowPlan, extractors: Sequence[str], notes: list[str]) -> list[str]:
    """Extractors whose stimulus files all have their modality (see check_stimulus_files)."""
    from neuroflow.features.config import fill_entry
    from neuroflow.stimuli.files import file_modality

    rows = plan.design.stim_file_rows
    skip = plan.config["features"].get("unavailable") == "skip"
    kept = list(extractors)
    for i, entry in enumerate(plan.config["features"]["extractors"]):
        name = entry["name"]
        modality = _entry_modality(entry, plan) if name in extractors else None
        if modality is None or modality == "text":
            continue  # text extractors read captions (or .txt files): any stim_file
        auto = fill_entry(entry)["modality"] == "auto"
        odd = _odd_ones_out(modality, list(rows), auto)
        if not odd:
            continue
        first = odd[0]
        kind = file_modality(first)
        files = f"{modality} files" + (
            " (or videos with a WAV soundtrack)" if not auto and modality == "audio" else ""
        )
        if skip:
            more = f" and {len(odd) - 1} more" if len(odd) > 1 else ""
            notes.append(
                f"features/{name}: skipped, its stimuli must all be {files}, got stim_file "
                f"{first!r} (a {kind} file; {_where(rows, first)}){more} "
                "(`features.unavailable: skip`)"
            )
            kept.remove(name)
            continue
        raise ValueError(
            f"The stimuli of `features.extractors[{i}]` ({name!r}) must all be {files}, got "
            f"stim_file {first!r} (a {kind} file; {_where(rows, first)}) instead."
            f"{_others(rows, odd, f'stim_files that are not {files}')} Remove or correct "
            f"the row, extract the {kind} stimuli with an entry of their own (`modality: "
            f"{kind}`), or set `features.unavailable: skip` to leave {name!r} (and the "
            "models using it) out of the run."
        )
    return kept


def check_stimulus_files(
    plan: WorkflowPlan, extractors: Sequence[str], notes: list[str]
) -> list[str]:
    """Refuse stimulus files a features job would read wrongly or not at all.

    Parameters
    ----------
    plan : WorkflowPlan
        The plan (its design facts are read).
    extractors : sequence of str
        Names of the extractors that run.
    notes : list of str
        The plan's notes; one line is added for each extractor left out.

    Returns
    -------
    extractors : list of str
        The extractors that still run: those whose stimuli include a file of another
        modality are left out, with a note, under ``features.unavailable: skip``.

    Raises
    ------
    ValueError
        When an extractor reads stimulus files (any but ``events``) and a ``stim_file``
        leaves the stimuli folder (:func:`check_stimulus_paths`); when an extractor
        would be given a ``stim_file`` of another modality than its stimuli's (a
        ``.txt`` among images) and ``features.unavailable`` is not ``skip``; when an
        extractor that infers its stimuli's modality from their extensions
        (``modality: auto``, not a text extractor reading captions) would be given a
        ``stim_file`` with an extension no modality reads. Each message names the file,
        the table and row that first name it, the extractor's entry and the fix.
    """
    from neuroflow.stimuli.files import MODALITY_EXTENSIONS, supported_extensions

    entries = plan.config["features"]["extractors"]
    if any(_reads_files(e) for e in entries if e["name"] in extractors):
        check_stimulus_paths(plan)
    extractors = _check_modalities(plan, extractors, notes)
    readable = {ext for exts in MODALITY_EXTENSIONS.values() for ext in exts}
    rows = plan.design.stim_file_rows
    bad = [s for s in rows if Path(s).suffix.lower() not in readable]
    if not bad:
        return extractors
    named = [
        f"`features.extractors[{i}]` ({entry['name']!r})"
        for i, entry in enumerate(entries)
        if entry["name"] in extractors and _reads_extensions(entry, plan)
    ]
    if not named:
        return extractors
    first = bad[0]
    ext = Path(first).suffix.lower()
    others = _others(rows, bad, "files with such extensions")
    verb = "infers the modality of its" if len(named) == 1 else "infer the modality of their"
    raise ValueError(
        f"Stimulus file {first!r} ({_where(rows, first)}) must have an extension neuroflow "
        f"reads, got {ext or 'no extension'!r} instead: {' and '.join(named)} {verb} "
        "stimuli from their extensions (`modality: auto`). Supported: "
        f"{supported_extensions()}.{others} Convert the file, or set `modality` in the "
        "extractor's entry."
    )


# --------------------------------------------------------------------------- test stimuli
@dataclass(frozen=True)
class HeldOutStimuli:
    """How many test and training stimuli one subject's identification has.

    Attributes
    ----------
    n_test, n_train : int
        Distinct test and training stimuli.
    how : str
        How the test stimuli were chosen, for messages (e.g. ``"condition 'test'"``).
    """

    n_test: int
    n_train: int
    how: str


def _texts(column: pd.Series) -> list[str | None]:
    """Cells as stripped text, ``None`` where missing (``n/a``, empty).

    Each distinct cell is read once (an events table repeats a few names over
    hundreds of rows, and every plan reads every recording's table).
    """
    codes, cells = pd.factorize(column.astype(str).to_numpy())
    texts = [str(v).strip() for v in cells]
    unique = [None if is_missing(t) else t for t in texts]
    return [unique[c] for c in codes]


def eeg_epoch_labels(
    table: pd.DataFrame,
    config: Mapping[str, Any],
    stimulus_events: Mapping[str, Any] | None,
    *,
    where: str | Path = "the events table",
) -> tuple[list[str], list[str]] | None:
    """Condition and stimulus of each epoch ``preprocess_eeg`` cuts from an events table.

    Parameters
    ----------
    table : DataFrame
        A continuous recording's ``_events.tsv``, every column as text.
    config : dict
        The ``preprocess_eeg`` section (``event_column``, ``stim_column``,
        ``conditions``).
    stimulus_events : dict | None
        ``dataset.stimulus_events``.
    where : str | Path
        The table's file, for messages.

    Returns
    -------
    labels : (list of str, list of str) | None
        Condition and stimulus of every epoch before artefact rejection, in table
        order; ``None`` when the table has no ``onset`` column (the job refuses it).
    """
    if "onset" not in table.columns:
        return None
    n = len(table)
    keep = np.array([v is not None for v in _texts(table["onset"])], dtype=bool)
    event_column = config.get("event_column") or "trial_type"
    name_column = next(
        (c for c in (event_column, *EVENT_NAME_FALLBACKS) if c in table.columns), None
    )
    names = _texts(table[name_column]) if name_column else ["stimulus"] * n
    keep &= np.array([v is not None for v in names], dtype=bool)
    rules = check_stimulus_events(stimulus_events)
    if rules["select"] or rules["exclude"]:
        keep &= stimulus_mask(table, rules, id_column=None, where=where)
    conditions = config.get("conditions")
    if conditions is None:
        mapping = None
    elif isinstance(conditions, Mapping):
        mapping = {str(k): str(v) for k, v in conditions.items()}
    else:
        mapping = {str(c): str(c) for c in conditions}
    stim_column = config.get("stim_column")
    stims = _texts(table[stim_column]) if stim_column and stim_column in table.columns else None
    condition: list[str] = []
    stimulus: list[str] = []
    for i in np.flatnonzero(keep):
        name = str(names[i])
        if mapping is not None and name not in mapping:
            continue
        condition.append(mapping[name] if mapping is not None else name)
        stim = stims[i] if stims is not None else None
        stimulus.append(stim if stim is not None else name)
    return condition, stimulus


def _choose(
    stimulus: np.ndarray, condition: np.ndarray | None, test_condition: Any
) -> HeldOutStimuli:
    """Test and training stimuli as the decoding jobs choose them."""
    if condition is not None and test_condition is not None:
        chosen = condition == test_condition
        if chosen.any():
            test = np.unique(stimulus[chosen])
            n_train = np.setdiff1d(np.unique(stimulus), test).size
            return HeldOutStimuli(int(test.size), int(n_train), f"condition {test_condition!r}")
    test = np.unique(np.asarray(select_test_stimuli(stimulus, "auto"), dtype=str))
    n_train = np.setdiff1d(np.unique(stimulus), test).size
    how = "chosen as `eeg_encoding.test: auto` chooses them"
    if condition is not None and test_condition is None:
        how += ", `test_condition` being null"
    elif condition is not None:
        how += f": no epoch has condition {test_condition!r}"
    return HeldOutStimuli(int(test.size), int(n_train), how)


def eeg_test_stimuli(
    plan: WorkflowPlan, labels: Mapping[str, tuple[list[str], list[str]] | None] | None = None
) -> dict[str, HeldOutStimuli]:
    """Test stimuli of each subject's EEG identification, where the plan can count them.

    Parameters
    ----------
    plan : WorkflowPlan
        The plan (its recordings and design facts are read).
    labels : dict of str to (list of str, list of str) | None
        The :func:`eeg_epoch_labels` of recordings (by key) that the caller has read
        already; the others are read here.

    Returns
    -------
    counts : dict of str to HeldOutStimuli
        Subject -> its counts; subjects with a recording whose epochs the events tables
        do not tell (events from annotations or a stim channel, an epochs file, no
        events table) are left out.
    """
    prep = plan.config["preprocess_eeg"]
    test_condition = plan.config["decoding"]["identification"].get("test_condition")
    out: dict[str, HeldOutStimuli] = {}
    known = labels or {}
    for subject in sorted({r.subject for r in plan.eeg_recordings}):
        condition: list[str] = []
        stimulus: list[str] = []
        for rec in plan.recordings_of(subject):
            table = plan.design.eeg_tables.get(rec.key)
            if rec.epoched or table is None or prep["event_source"] not in ("auto", "events_tsv"):
                break
            found = (
                known[rec.key]
                if rec.key in known
                else eeg_epoch_labels(
                    table, prep, plan.stimulus_events, where=rec.events or rec.key
                )
            )
            if found is None:
                break
            condition += found[0]
            stimulus += found[1]
        else:
            if stimulus:
                out[subject] = _choose(
                    np.asarray(stimulus, dtype=str),
                    np.asarray(condition, dtype=str),
                    test_condition,
                )
    return out


def fmri_test_stimuli(plan: WorkflowPlan) -> dict[str, HeldOutStimuli]:
    """Test stimuli of each subject's fMRI identification, where the plan can count them.

    Parameters
    ----------
    plan : WorkflowPlan
        The plan (its recordings and design facts are read).

    Returns
    -------
    counts : dict of str to HeldOutStimuli
        Subject -> its counts (``test: auto`` over its single trials); empty when the
        trials are filtered in a way the plan does not reproduce
        (``single_trial.trial_types``, or ``dataset.stimulus_events`` rules with
        imported betas).
    """
    design = plan.design
    per_subject: dict[str, list[str]] = {}
    if plan.source == "betas":
        rules = check_stimulus_events(plan.stimulus_events)
        if rules["select"] or rules["exclude"]:
            return {}
        for session in plan.betas_sessions:
            trials = design.trial_stimuli.get(session.key, ())
            per_subject.setdefault(session.subject, []).extend(trials)
    else:
        if plan.config["single_trial"].get("trial_types"):
            return {}
        for subject in sorted({r.subject for r in plan.fmri_runs}):
            for run in plan.runs_of(subject):
                per_subject.setdefault(subject, []).extend(design.run_stimuli.get(run.key, ()))
    return {
        subject: _choose(np.asarray(stims, dtype=str), None, None)
        for subject, stims in sorted(per_subject.items())
        if stims
    }


def identification_notes(
    plan: WorkflowPlan,
    *,
    eeg: bool,
    fmri: bool,
    eeg_labels: Mapping[str, tuple[list[str], list[str]] | None] | None = None,
) -> list[str]:
    """Check ``decoding.identification.top_k`` against every subject's test stimuli.

    Parameters
    ----------
    plan : WorkflowPlan
        The plan.
    eeg, fmri : bool
        Whether EEG identification (``decode_eeg``, with feature spaces) and fMRI
        identification (``decode_fmri``) run.
    eeg_labels : dict of str to (list of str, list of str) | None
        Epoch labels of the EEG recordings the caller has read (:func:`eeg_test_stimuli`).

    Returns
    -------
    notes : list of str
        One line per subject for which some values are at or above its number of test
        stimuli (their top-k accuracy is left undefined, NaN).

    Raises
    ------
    ValueError
        When every value is at or above a subject's number of test stimuli.
    """
    ident = plan.config["decoding"]["identification"]
    if not ident.get("enabled", True) or not plan.config["decoding"].get("enabled", True):
        return []
    top_k = [int(k) for k in ident["top_k"]]
    partial: dict[tuple[str, tuple[int, ...], int, str, str], list[str]] = {}
    groups = (
        ("decoding", "EEG", (lambda p: eeg_test_stimuli(p, eeg_labels)) if eeg else None),
        ("decoding_fmri", "single-trial", fmri_test_stimuli if fmri else None),
    )
    for stage, kind, count in groups:
        if count is None:
            continue
        for subject, found in count(plan).items():
            # a subject with fewer than 2 test or training stimuli is not identified
            if found.n_test < 2 or found.n_train < 2:
                continue
            large = tuple(k for k in top_k if k >= found.n_test)
            if len(large) == len(top_k):
                raise ValueError(
                    "`decoding.identification.top_k` must hold at least one value smaller "
                    f"than the number of test stimuli, got {top_k} but sub-{subject} has "
                    f"{found.n_test} {kind} test stimuli ({found.how}) instead. Add a value "
                    f"below {found.n_test} (top-k accuracy among k or fewer candidates is 1 "
                    "whatever the decoder)."
                )
            if large:
                partial.setdefault((stage, large, found.n_test, kind, found.how), []).append(
                    f"sub-{subject}"
                )
    notes = []
    for (stage, large, n_test, kind, how), subjects in partial.items():
        who = (
            f"{subjects[0]}, which has"
            if len(subjects) == 1
            else f"{', '.join(subjects[:-1])} and {subjects[-1]}, which have"
        )
        each = "" if len(subjects) == 1 else " each"
        notes.append(
            f"{stage}: top-k accuracy for `decoding.identification.top_k` value(s) "
            f"{list(large)} left undefined (NaN) for {who} {n_test} {kind} test stimuli"
            f"{each} ({how}); k must be smaller than the number of test stimuli"
        )
    return notes

"""What a dataset's events tables say, read once when the workflow is planned.

The plan needs a few facts about the stimuli before any job runs: which stimulus ids
the recordings show (do image, text or event-based extractors have anything to work
on?), which fMRI runs repeat a stimulus sequence (held-out test runs, RSA over
repeated stimuli) and where the stimulus files and captions are. For a real dataset
they come from the events tables (small TSVs, read once per invocation); for the demo,
from its generator's plan, before the demo exists.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuroflow.io.events import is_missing, read_events_table, stimulus_mask
from neuroflow.io.records import BetasSession, EegRecording, FmriRun, natural_key

__all__ = [
    "DesignFacts",
    "auto_test_runs",
    "demo_design",
    "read_design",
    "resolve_test_runs",
    "table_identity",
]

#: Contiguous blocks that stand in for runs in the penalty's cross-validation when a
#: subject has one training run.
N_BLOCKS_ONE_RUN = 5

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DesignFacts:
    """Stimuli of the selected recordings.

    Attributes
    ----------
    run_stimuli : dict of str to tuple of str
        fMRI run key -> stimulus ids of its stimulus events, in table order.
    eeg_stimuli : dict of str to tuple of str
        EEG recording key -> stimulus ids (``stim_file``-like column) of its events.
    trial_stimuli : dict of str to tuple of str
        Betas session key -> stimulus id of every trial.
    event_tables : tuple of Path
        Every events (or trials) table read.
    columns : frozenset of str
        Columns that any events table has (for transcript and event extractors).
    stimuli_dir : Path | None
        The dataset's ``stimuli/`` folder, when it exists.
    captions : Path | None
        The captions table, when it exists.
    """

    run_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    eeg_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    trial_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    event_tables: tuple[Path, ...] = ()
    columns: frozenset[str] = frozenset()
    stimuli_dir: Path | None = None
    captions: Path | None = None

    @property
    def stimulus_ids(self) -> list[str]:
        """Every stimulus id, in order of first appearance (fMRI, EEG, then betas)."""
        seen: dict[str, None] = {}
        for group in (self.run_stimuli, self.eeg_stimuli, self.trial_stimuli):
            for ids in group.values():
                for stim in ids:
                    seen.setdefault(stim, None)
        return list(seen)


def _ids(table: Any, mask: Any, column: str) -> tuple[str, ...]:
    if column not in table.columns:
        return ()
    return tuple(str(v).strip() for v, keep in zip(table[column], mask, strict=True) if keep)


def read_design(
    *,
    fmri_runs: Sequence[FmriRun],
    eeg_recordings: Sequence[EegRecording],
    betas: Sequence[BetasSession],
    stimulus_events: Mapping[str, Any] | None,
    eeg_stim_column: str | None,
    stimuli_dir: Path,
    captions: Path | None,
) -> DesignFacts:
    """Read the events tables of the selected recordings.

    Parameters
    ----------
    fmri_runs, eeg_recordings, betas : sequences of records
        The selected recordings.
    stimulus_events : dict | None
        ``dataset.stimulus_events`` (which rows are stimuli).
    eeg_stim_column : str | None
        ``preprocess_eeg.stim_column``.
    stimuli_dir : Path
        The dataset's ``stimuli/`` folder (may not exist).
    captions : Path | None
        The captions table (may not exist).

    Returns
    -------
    facts : DesignFacts
    """
    tables: list[Path] = []
    columns: set[str] = set()
    cache: dict[Path, Any] = {}

    def load(path: Path) -> Any:
        if path not in cache:
            cache[path] = read_events_table(path)
            tables.append(path)
            columns.update(cache[path].columns)
        return cache[path]

    runs: dict[str, tuple[str, ...]] = {}
    for run in fmri_runs:
        if run.events is None or not Path(run.events).is_file():
            runs[run.key] = ()
            continue
        table = load(Path(run.events))
        mask = stimulus_mask(table, stimulus_events, id_column="stim_file", where=run.events)
        runs[run.key] = _ids(table, mask, "stim_file")
    eeg: dict[str, tuple[str, ...]] = {}
    for rec in eeg_recordings:
        if rec.events is None or not Path(rec.events).is_file():
            eeg[rec.key] = ()
            continue
        table = load(Path(rec.events))
        mask = stimulus_mask(table, stimulus_events, id_column=None, where=rec.events)
        column = eeg_stim_column or "stim_file"
        if column in table.columns:
            mask = mask & [not is_missing(v) for v in table[column]]
        eeg[rec.key] = _ids(table, mask, column)
    trials: dict[str, tuple[str, ...]] = {}
    for session in betas:
        table = load(Path(session.trials))
        mask = stimulus_mask(table, stimulus_events, id_column="stim_file", where=session.trials)
        trials[session.key] = _ids(table, mask, "stim_file")
    return DesignFacts(
        run_stimuli=runs,
        eeg_stimuli=eeg,
        trial_stimuli=trials,
        event_tables=tuple(tables),
        columns=frozenset(columns),
        stimuli_dir=stimuli_dir if stimuli_dir.is_dir() else None,
        captions=captions if captions is not None and captions.is_file() else None,
    )


def demo_design(config: Mapping[str, Any], root: Path, fmri_keys: Mapping[str, str]) -> DesignFacts:
    """The demo's stimuli, from its generator's plan (nothing is read).

    Parameters
    ----------
    config : dict
        The ``demo`` section.
    root : Path
        Where the demo is (or will be) written.
    fmri_keys : dict of str to str
        fMRI run key -> run label, for the selected runs.

    Returns
    -------
    facts : DesignFacts
    """
    from neuroflow.demo import demo_layout
    from neuroflow.demo._config import resolve_config
    from neuroflow.demo.layout import run_movies
    from neuroflow.demo.stimuli import plan_eeg_images, plan_movies

    cfg = resolve_config(config)
    train, test = plan_movies(cfg)
    movies = {m.name: m for m in [*train, *([test] if test else [])]}
    by_label = {run: movies[name] for run, name, _ in run_movies(cfg)}
    runs = {
        key: tuple(s.stim_file for s in by_label[label].shots) for key, label in fmri_keys.items()
    }
    images, order = plan_eeg_images(cfg)
    layout = demo_layout(config, root)
    eeg = {rec.key: tuple(images[i].stim_file for i in order) for rec in layout.eeg_recordings}
    return DesignFacts(
        run_stimuli=runs,
        eeg_stimuli=eeg,
        columns=frozenset({"onset", "duration", "trial_type", "stim_file"}),
        stimuli_dir=layout.stimuli_dir,
        captions=layout.captions,
    )


def table_identity(paths: Sequence[Path], root: Path | None) -> list[str]:
    """Path (relative to ``root``) and SHA-256 of each table, for version ids."""
    out = []
    for path in paths:
        path = Path(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else "-"
        try:
            name = str(path.resolve().relative_to(root.resolve())) if root else str(path)
        except ValueError:
            name = str(path)
        out.append(f"{name}:{digest}")
    return sorted(out)


def resolve_test_runs(
    runs: Sequence[FmriRun],
    setting: str | Sequence[Any],
    run_stimuli: Mapping[str, tuple[str, ...]],
) -> list[str]:
    """Held-out test runs of one subject.

    Parameters
    ----------
    runs : sequence of FmriRun
        The subject's runs.
    setting : "auto" | list of str
        ``encoding.split.test_runs``: run labels (``"4"`` matches ``run-04``;
        ``"ses-2_run-1"`` names a session's run; a full entity key works too), or
        ``"auto"``: the runs that repeat a stimulus sequence shown in another run
        (a repeated test movie), else the last run.
    run_stimuli : dict of str to tuple of str
        Stimulus ids of each run.

    Returns
    -------
    keys : list of str
        Keys of the test runs, in key order; empty when the setting names none of
        the subject's runs.
    """
    from neuroflow.io.records import run_matches

    runs = sorted(runs, key=lambda r: natural_key(r.key))
    if setting != "auto":
        return [r.key for r in runs if run_matches(r, list(setting))]
    return auto_test_runs([r.key for r in runs], run_stimuli)


def auto_test_runs(keys: Sequence[str], sequences: Mapping[str, Sequence[str]]) -> list[str]:
    """Held-out runs chosen by ``test_runs: auto``.

    Parameters
    ----------
    keys : sequence of str
        One subject's run keys.
    sequences : dict of str to sequence of str
        Stimulus ids of each run's stimulus events, in order.

    Returns
    -------
    keys : list of str
        The runs whose stimulus sequence another run repeats (a test movie shown
        twice), when that leaves a training run; else the last run (by key, numbers
        compared by value: ``run-10`` comes after ``run-9``); empty with fewer than 2
        runs.
    """
    keys = sorted(keys, key=natural_key)
    if len(keys) < 2:
        return []
    groups: dict[tuple[str, ...], list[str]] = {}
    for key in keys:
        sequence = tuple(sequences.get(key) or ())
        if sequence:
            groups.setdefault(sequence, []).append(key)
    repeated = [key for group in groups.values() if len(group) >= 2 for key in group]
    if repeated and len(keys) - len(repeated) >= 1:
        return sorted(repeated, key=natural_key)
    return [keys[-1]]

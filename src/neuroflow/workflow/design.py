"""What a dataset's events tables say, read once when the workflow is planned.

The plan needs a few facts about the stimuli before any job runs: which stimulus ids
the recordings show (do image, text or event-based extractors have anything to work
on?), which fMRI runs repeat a stimulus sequence (held-out test runs, RSA over
repeated stimuli), which stimuli a decoding job will hold out for testing
(:func:`neuroflow.trial_split.select_test_stimuli`) and where the stimulus files and
captions are. For a real dataset they come from the events tables (small TSVs, read
once per invocation); for the demo, from its generator's plan, before the demo exists.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.io.events import is_missing, read_events_table, stimulus_mask
from neuroflow.io.records import BetasSession, EegRecording, FmriRun, natural_key
from neuroflow.trial_split import auto_test_runs

__all__ = [
    "DesignFacts",
    "demo_design",
    "read_design",
    "resolve_test_runs",
    "table_identity",
]

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
    stim_file_rows : dict of str to (Path, int)
        Every ``stim_file`` of a stimulus row (the ids a features job reads) -> the
        table and the 1-based data row that first name it; empty for the demo, whose
        files the generator names.
    eeg_tables : dict of str to DataFrame
        EEG recording key -> its events table, every column as text (as
        :func:`neuroflow.io.events.read_events_table` reads it), for the conditions and
        stimuli the recording's epochs will have; for the demo, the columns its
        generator writes (``onset`` holds the presentation's index, as the onsets are
        drawn when the demo is written).
    """

    run_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    eeg_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    trial_stimuli: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    event_tables: tuple[Path, ...] = ()
    columns: frozenset[str] = frozenset()
    stimuli_dir: Path | None = None
    captions: Path | None = None
    stim_file_rows: Mapping[str, tuple[Path, int]] = field(default_factory=dict)
    eeg_tables: Mapping[str, pd.DataFrame] = field(default_factory=dict, repr=False, compare=False)

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


def _note_rows(
    rows: dict[str, tuple[Path, int]], path: Path, table: pd.DataFrame, mask: Any
) -> None:
    """Record the first row naming each ``stim_file`` of the stimulus rows ``mask``."""
    if "stim_file" not in table.columns:
        return
    for row in np.flatnonzero(mask):
        rows.setdefault(str(table["stim_file"].iloc[row]).strip(), (path, int(row) + 1))


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
    rows: dict[str, tuple[Path, int]] = {}

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
        _note_rows(rows, Path(run.events), table, mask)
    eeg: dict[str, tuple[str, ...]] = {}
    eeg_tables: dict[str, pd.DataFrame] = {}
    for rec in eeg_recordings:
        if rec.events is None or not Path(rec.events).is_file():
            eeg[rec.key] = ()
            continue
        table = load(Path(rec.events))
        eeg_tables[rec.key] = table
        mask = stimulus_mask(table, stimulus_events, id_column=None, where=rec.events)
        column = eeg_stim_column or "stim_file"
        if column in table.columns:
            mask = mask & [not is_missing(v) for v in table[column]]
        eeg[rec.key] = _ids(table, mask, column)
        files = stimulus_mask(table, stimulus_events, id_column="stim_file", where=rec.events)
        _note_rows(rows, Path(rec.events), table, files)
    trials: dict[str, tuple[str, ...]] = {}
    for session in betas:
        table = load(Path(session.trials))
        mask = stimulus_mask(table, stimulus_events, id_column="stim_file", where=session.trials)
        trials[session.key] = _ids(table, mask, "stim_file")
        _note_rows(rows, Path(session.trials), table, mask)
    return DesignFacts(
        run_stimuli=runs,
        eeg_stimuli=eeg,
        trial_stimuli=trials,
        event_tables=tuple(tables),
        columns=frozenset(columns),
        stimuli_dir=stimuli_dir if stimuli_dir.is_dir() else None,
        captions=captions if captions is not None and captions.is_file() else None,
        stim_file_rows=rows,
        eeg_tables=eeg_tables,
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
    from neuroflow.demo import demo_layout, resolve_config
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
    # the columns the generator writes that name events and stimuli (its EEG events are
    # "test" or "train", value 2 or 1)
    test = [images[i].split == "test" for i in order]
    events = pd.DataFrame(
        {
            "onset": [str(n) for n in range(len(order))],
            "trial_type": ["test" if t else "train" for t in test],
            "value": ["2" if t else "1" for t in test],
            "stim_file": [images[i].stim_file for i in order],
        }
    )
    return DesignFacts(
        run_stimuli=runs,
        eeg_stimuli=eeg,
        columns=frozenset({"onset", "duration", "trial_type", "stim_file"}),
        stimuli_dir=layout.stimuli_dir,
        captions=layout.captions,
        eeg_tables={rec.key: events for rec in layout.eeg_recordings},
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

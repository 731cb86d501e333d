"""Records that describe one recording's files, shared by every stage.

The workflow builds these once per invocation (from a BIDS index, or from the
demo's known layout before the demo exists) and derives job inputs from them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def entity_key(
    subject: str, session: str | None, task: str | None, run: str | None, **extra: str | None
) -> str:
    """BIDS-style key of one recording, e.g. ``"sub-01_ses-02_task-movie_run-1"``.

    Parameters
    ----------
    subject, session, task, run : str | None
        Entity labels without their prefix; ``None`` entities are left out.
    **extra : str | None
        Further entities (e.g. ``acq``), in BIDS order after ``task``.

    Returns
    -------
    key : str
        Entities joined by underscores.
    """
    parts = [f"sub-{subject}"]
    if session:
        parts.append(f"ses-{session}")
    if task:
        parts.append(f"task-{task}")
    for name, value in extra.items():
        if value:
            parts.append(f"{name}-{value}")
    if run:
        parts.append(f"run-{run}")
    return "_".join(parts)


@dataclass(frozen=True)
class FmriRun:
    """Files of one fMRI run.

    Attributes
    ----------
    subject, session, task, run : str | None
        BIDS entity labels (without prefixes).
    bold : Path
        4-D BOLD NIfTI (raw, or fMRIPrep's ``desc-preproc_bold``).
    events : Path | None
        ``_events.tsv`` of the run.
    sidecars : tuple of Path
        JSON sidecars from the least to the most specific (inheritance order).
    mask : Path | None
        Brain mask on the BOLD grid, when the dataset provides one.
    confounds : Path | None
        fMRIPrep ``desc-confounds_timeseries.tsv``.
    space : str | None
        Template space of derivatives, ``None`` for raw data.
    kind : str
        ``"bold"`` (a 4-D NIfTI) or ``"timeseries"`` (a (time, target) matrix of parcel
        or vertex signals in ``bold``: HDF5, ``.npy`` or TSV).
    container_key : str | None
        Name of the run's dataset inside an HDF5 file that holds several runs
        (``kind="timeseries"``); ``None`` when the file holds this run only.
    """

    subject: str
    session: str | None
    task: str | None
    run: str | None
    bold: Path
    events: Path | None = None
    sidecars: tuple[Path, ...] = field(default_factory=tuple)
    mask: Path | None = None
    confounds: Path | None = None
    space: str | None = None
    kind: str = "bold"
    container_key: str | None = None

    @property
    def key(self) -> str:
        """Entity key, unique within a dataset."""
        return entity_key(self.subject, self.session, self.task, self.run)


@dataclass(frozen=True)
class EegRecording:
    """Files of one EEG recording.

    Attributes
    ----------
    subject, session, task, run : str | None
        BIDS entity labels (without prefixes).
    eeg : Path
        Main data file (``.vhdr``, ``.edf``, ``.bdf``, ``.set`` or ``.fif``).
    events, channels, electrodes : Path | None
        ``_events.tsv``, ``_channels.tsv``, ``_electrodes.tsv``.
    sidecars : tuple of Path
        ``_eeg.json`` (or ``_meg.json``) sidecars from the least to the most specific.
    datatype : str
        BIDS folder of the file: ``"eeg"``, or ``"meg"`` for the EEG channels of a
        MEG + EEG FIF recording.
    epoched : bool
        Whether the file holds epochs (MNE ``-epo.fif``, epoched EEGLAB ``.set``)
        rather than a continuous recording.
    """

    subject: str
    session: str | None
    task: str | None
    run: str | None
    eeg: Path
    events: Path | None = None
    channels: Path | None = None
    electrodes: Path | None = None
    sidecars: tuple[Path, ...] = field(default_factory=tuple)
    datatype: str = "eeg"
    epoched: bool = False

    @property
    def key(self) -> str:
        """Entity key, unique within a dataset."""
        return entity_key(self.subject, self.session, self.task, self.run)


@dataclass(frozen=True)
class BetasSession:
    """Single-trial response estimates of one subject and session, made elsewhere.

    Attributes
    ----------
    subject, session : str | None
        BIDS entity labels (without prefixes).
    betas : Path
        ``*_betas.nii[.gz]`` (4-D, trials last), ``*_betas.h5`` (dataset ``betas``,
        (trial, voxel) or (trial, x, y, z)) or ``*_betas.npy`` ((trial, voxel)).
    trials : Path
        ``*_trials.tsv``: one row per trial, column ``stim_file`` (the stimulus id).
    mask : Path | None
        Brain mask image on the betas grid (needed for (trial, voxel) matrices to place
        voxels in space; optional otherwise).
    ncsnr : Path | None
        Noise-ceiling SNR per voxel (image on the betas grid, or ``.npy`` (voxel,)).
    """

    subject: str
    session: str | None
    betas: Path
    trials: Path
    mask: Path | None = None
    ncsnr: Path | None = None

    @property
    def key(self) -> str:
        """Entity key, unique within a dataset."""
        return entity_key(self.subject, self.session, None, None)


def normalise_label(label: Any) -> str:
    """A label as compared with others: integers without leading zeros (``"04"`` -> ``"4"``)."""
    text = str(label)
    return text.lstrip("0") or "0" if text.isdigit() else text


def run_matches(run: FmriRun | Mapping[str, Any], labels: Sequence[Any]) -> bool:
    """Whether a run is named by a list of run labels.

    Parameters
    ----------
    run : FmriRun | dict
        A run record, or its entities (``subject``, ``session``, ``task``, ``run``).
    labels : sequence
        Run labels (``"4"`` matches ``run-04``), ``"ses-<x>_run-<y>"`` for a session's
        run, or full entity keys (``"sub-01_ses-2_task-movie_run-1"``).

    Returns
    -------
    matches : bool
    """
    if isinstance(run, FmriRun):
        entities = {
            "subject": run.subject,
            "session": run.session,
            "task": run.task,
            "run": run.run,
        }
    else:
        entities = dict(run)
    label = entities.get("run")
    key = entity_key(*(entities.get(n) for n in ("subject", "session", "task", "run")))
    wanted = {normalise_label(lab) for lab in labels}
    if label is not None and normalise_label(label) in wanted:
        return True
    for lab in labels:
        text = str(lab)
        if text == key:
            return True
        m = re.fullmatch(r"ses-([^_]+)_run-(.+)", text)
        if (
            m
            and str(entities.get("session")) == m[1]
            and normalise_label(label) == normalise_label(m[2])
        ):
            return True
    return False


def natural_key(text: str) -> tuple:
    """Sort key that orders the numbers inside a string by value (``run-2`` < ``run-10``)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))

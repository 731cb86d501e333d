"""Records that describe one recording's files, shared by every stage.

The workflow builds these once per invocation (from a BIDS index, or from the
demo's known layout before the demo exists) and derives job inputs from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
        ``_eeg.json`` sidecars from the least to the most specific.
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

    @property
    def key(self) -> str:
        """Entity key, unique within a dataset."""
        return entity_key(self.subject, self.session, self.task, self.run)

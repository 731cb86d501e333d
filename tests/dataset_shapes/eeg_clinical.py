"""EEG-only datasets of clinical shapes: one event type, or no events at all.

Layout (``XX`` = 01, 02; ``TASK`` = ``photic`` or ``rest``)::

    dataset_description.json  participants.tsv
    sub-XX/eeg/sub-XX_task-TASK_eeg.vhdr (+ .vmrk, .eeg)    BrainVision, 19 channels
    sub-XX/eeg/sub-XX_task-TASK_{events.tsv,channels.tsv,eeg.json}

:func:`make_single_condition_eeg` writes a photic-stimulation recording whose events are
all of one type (``trial_type`` ``flash``, no ``stim_file``): a visual evoked response
over occipital sites after every flash, nothing to classify. :func:`make_resting_eeg`
writes eyes-closed resting state: no markers in the BrainVision file, and an events
table with its header only (``events=False`` leaves the table out); an occipital alpha
rhythm (``alpha_hz``) over the 1/f background.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    CHANNELS,
    component,
    prepare_root,
    rng_for,
    simulate_eeg,
    write_dataset_description,
    write_json,
    write_rows,
    write_tsv,
)

__all__ = ["CLINICAL_CHANNELS", "make_resting_eeg", "make_single_condition_eeg"]

#: The 10-20 channels of a clinical recording (19 of the 32 the shapes simulate).
CLINICAL_CHANNELS = (
    "Fp1", "Fp2", "F7", "F3", "Fz", "F4", "F8", "T7", "C3", "Cz",
    "C4", "T8", "P7", "P3", "Pz", "P4", "P8", "O1", "O2",
)  # fmt: skip
LINE_FREQ = 50.0
PADDING = 2.0
EVENT_COLUMNS = ("onset", "duration", "trial_type", "value", "sample")


def _check_channels() -> None:
    missing = [c for c in CLINICAL_CHANNELS if c not in CHANNELS]
    if missing:  # pragma: no cover - a constant of this module
        raise RuntimeError(f"Channels {missing} have no simulated position.")


def _write_recording(
    root: Path,
    subject: str,
    task: str,
    *,
    data: np.ndarray,
    sfreq: float,
    onsets: np.ndarray,
    rows: list[list[str]] | None,
    description: str,
) -> dict[str, Any]:
    """Write one BrainVision recording with its sidecars; ``rows`` None: no events table."""
    import pybv

    folder = root / f"sub-{subject}" / "eeg"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"sub-{subject}_task-{task}"
    events = np.column_stack([onsets, np.ones_like(onsets)]) if onsets.size else None
    pybv.write_brainvision(
        data=data,
        sfreq=sfreq,
        ch_names=list(CLINICAL_CHANNELS),
        ref_ch_names="FCz",
        fname_base=f"{stem}_eeg",
        folder_out=str(folder),
        events=events,
        resolution=0.1,
        unit="µV",
        fmt="binary_int16",
        meas_date=datetime(2021, 6, 1, 9, tzinfo=UTC) + timedelta(days=int(subject)),
    )
    if rows is not None:
        write_rows(folder / f"{stem}_events.tsv", EVENT_COLUMNS, rows)
    n = len(CLINICAL_CHANNELS)
    write_tsv(
        folder / f"{stem}_channels.tsv",
        {
            "name": list(CLINICAL_CHANNELS),
            "type": ["EEG"] * n,
            "units": ["µV"] * n,
            "status": ["good"] * n,
        },
    )
    write_json(
        folder / f"{stem}_eeg.json",
        {
            "TaskName": task,
            "TaskDescription": description,
            "SamplingFrequency": sfreq,
            "PowerLineFrequency": LINE_FREQ,
            "EEGReference": "FCz",
            "EEGPlacementScheme": "10-20",
            "EEGChannelCount": n,
            "RecordingType": "continuous",
            "RecordingDuration": round(data.shape[1] / sfreq, 4),
        },
    )
    return {
        "subject": subject,
        "path": folder / f"{stem}_eeg.vhdr",
        "events": folder / f"{stem}_events.tsv" if rows is not None else None,
        "n_events": int(onsets.size),
        "n_times": int(data.shape[1]),
    }


def _top_level(root: Path, name: str, subjects: list[str]) -> None:
    write_dataset_description(root, name)
    write_tsv(
        root / "participants.tsv",
        {"participant_id": [f"sub-{s}" for s in subjects], "age": [47, 62][: len(subjects)]},
    )


def make_single_condition_eeg(
    root: str | Path,
    *,
    seed: int = 0,
    n_subjects: int = 2,
    n_events: int = 40,
    sfreq: float = 200.0,
    vep_uv: float = 6.0,
    noise_uv: float = 6.0,
) -> dict[str, Any]:
    """Write a photic-stimulation EEG dataset whose events are all of one type.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_subjects : int
        Subjects (one recording each, at most 2).
    n_events : int
        Flashes per recording (1.0-1.4 s apart).
    sfreq : float
        Sampling frequency (Hz).
    vep_uv : float
        Peak of the visual evoked response (µV) over O1/O2.
    noise_uv : float
        Background RMS (µV).

    Returns
    -------
    facts : dict
        ``root``, ``task`` (``"photic"``), ``subjects``, ``recordings`` (one dict per
        subject: ``subject``, ``path``, ``events``, ``n_events``, ``n_times``),
        ``conditions`` (``["flash"]``), ``sfreq``, ``ch_names``.
    """
    if not 1 <= n_subjects <= 2:
        raise ValueError(f"`n_subjects` must be 1 or 2, got {n_subjects!r} instead.")
    _check_channels()
    root = prepare_root(root)
    subjects = [f"{i + 1:02d}" for i in range(n_subjects)]
    _top_level(root, "neuroflow test shape: single-condition clinical EEG", subjects)
    recordings = []
    for sub in subjects:
        rng = rng_for(seed, "eeg_clinical", "photic", sub)
        soa = rng.uniform(1.0, 1.4, size=n_events)
        onsets = np.round((PADDING + np.r_[0.0, np.cumsum(soa[:-1])]) * sfreq).astype(int)
        n_times = int(onsets[-1] + round((1.4 + PADDING) * sfreq))
        data = simulate_eeg(
            rng=rng,
            ch_names=CLINICAL_CHANNELS,
            sfreq=sfreq,
            n_times=n_times,
            onsets=onsets,
            components=[component(("O1", "O2"), 0.1, 0.02, np.full(n_events, vep_uv))],
            noise_uv=noise_uv,
            line_freq=LINE_FREQ,
        )
        rows = [
            [f"{o / sfreq:.4f}", "0.0", "flash", "1", str(o)]
            for o in onsets  # one event type: nothing to classify
        ]
        recordings.append(
            _write_recording(
                root,
                sub,
                "photic",
                data=data,
                sfreq=sfreq,
                onsets=onsets,
                rows=rows,
                description="Intermittent photic stimulation (single flashes).",
            )
        )
    return {
        "root": root,
        "task": "photic",
        "subjects": subjects,
        "recordings": recordings,
        "conditions": ["flash"],
        "sfreq": float(sfreq),
        "ch_names": list(CLINICAL_CHANNELS),
    }


def make_resting_eeg(
    root: str | Path,
    *,
    seed: int = 0,
    n_subjects: int = 2,
    duration: float = 40.0,
    sfreq: float = 200.0,
    alpha_hz: float = 10.0,
    alpha_uv: float = 8.0,
    noise_uv: float = 6.0,
    events: bool = True,
) -> dict[str, Any]:
    """Write an eyes-closed resting-state EEG dataset: no events at all.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_subjects : int
        Subjects (one recording each, at most 2).
    duration : float
        Length of each recording (s).
    sfreq : float
        Sampling frequency (Hz).
    alpha_hz, alpha_uv : float
        Frequency (Hz) and amplitude (µV) of the occipital alpha rhythm (O1, O2, P7,
        P8, Pz; half as strong at the parietal sites).
    noise_uv : float
        Background RMS (µV).
    events : bool
        Write an events table with its header only (True), or none.

    Returns
    -------
    facts : dict
        ``root``, ``task`` (``"rest"``), ``subjects``, ``recordings`` (as
        :func:`make_single_condition_eeg`, ``n_events`` 0), ``sfreq``, ``ch_names``,
        ``alpha_hz``, ``alpha_channels``.
    """
    if not 1 <= n_subjects <= 2:
        raise ValueError(f"`n_subjects` must be 1 or 2, got {n_subjects!r} instead.")
    _check_channels()
    root = prepare_root(root)
    subjects = [f"{i + 1:02d}" for i in range(n_subjects)]
    _top_level(root, "neuroflow test shape: resting-state EEG", subjects)
    n_times = round(duration * sfreq)
    times = np.arange(n_times) / sfreq
    gains = {"O1": 1.0, "O2": 1.0, "P7": 0.5, "P8": 0.5, "Pz": 0.5}
    recordings = []
    for sub in subjects:
        rng = rng_for(seed, "eeg_clinical", "rest", sub)
        data = simulate_eeg(
            rng=rng,
            ch_names=CLINICAL_CHANNELS,
            sfreq=sfreq,
            n_times=n_times,
            onsets=np.zeros(0, dtype=int),
            components=[component(("O1",), 0.1, 0.02, np.zeros(0))],  # no event, no response
            noise_uv=noise_uv,
            line_freq=LINE_FREQ,
        )
        # waxing and waning alpha: a 10 Hz carrier under a slow random envelope
        envelope = 0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(0.05, 0.15) * times)
        alpha = alpha_uv * 1e-6 * envelope * np.sin(2 * np.pi * alpha_hz * times)
        for name, gain in gains.items():
            data[CLINICAL_CHANNELS.index(name)] += gain * alpha
        recordings.append(
            _write_recording(
                root,
                sub,
                "rest",
                data=data,
                sfreq=sfreq,
                onsets=np.zeros(0, dtype=int),
                rows=[] if events else None,
                description="Eyes-closed resting state.",
            )
        )
    return {
        "root": root,
        "task": "rest",
        "subjects": subjects,
        "recordings": recordings,
        "sfreq": float(sfreq),
        "ch_names": list(CLINICAL_CHANNELS),
        "alpha_hz": float(alpha_hz),
        "alpha_channels": list(gains),
    }

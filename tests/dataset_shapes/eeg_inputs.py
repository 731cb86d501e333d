"""Small BIDS EEG datasets of the inputs the demo never has: short stored epochs, rest.

Layout (``scaled=False``)::

    dataset_description.json
    sub-01/eeg/sub-01_task-faces_eeg.set            epoched EEGLAB (MATLAB v5), epochs
                                                    spanning [-0.06, 0.08] s, 250 Hz,
                                                    named face / scrambled, no positions
    sub-01/eeg/sub-01_task-faces_{channels.tsv,eeg.json}
    sub-02/eeg/sub-02_task-rest_eeg.vhdr (+ .vmrk, .eeg)   BrainVision, 30 s at 250 Hz,
                                                    no events of any kind
    sub-02/eeg/sub-02_task-rest_{channels.tsv,eeg.json}
    sub-02/eeg/sub-02_{electrodes.tsv,coordsystem.json}

With ``scaled=True`` the dataset holds one resting recording, ``sub-03_task-rest``, whose
samples are µV values written as V (10^6 too large; ``_channels.tsv`` says ``V``).

Signal: spatially smooth 1/f noise (``noise_uv`` RMS) with 50 Hz line noise; the resting
recording adds a 10 Hz alpha rhythm (``alpha_uv`` µV amplitude) over occipito-parietal
sites (:data:`ALPHA_CENTRES`); the epochs carry a P1 (50 ms) over the same sites.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io

from neuroflow.demo.eeg import channel_positions

from ._common import (
    component,
    prepare_root,
    rng_for,
    simulate_eeg,
    write_dataset_description,
    write_json,
    write_tsv,
)

__all__ = [
    "ALPHA_CENTRES",
    "EPOCH_WINDOW",
    "N170_CENTRES",
    "N170_LATENCY",
    "make_eeg_inputs",
    "make_faces_eeg",
    "write_eeglab_epochs",
]

#: Stored window (s) of the epoched recording.
EPOCH_WINDOW = (-0.06, 0.08)
#: Sites of the planted alpha rhythm (and of the P1).
ALPHA_CENTRES = ("O1", "O2", "Oz", "Pz")
SFREQ = 250.0
#: Peak (s) and sites of the planted face-sensitive negativity of :func:`make_faces_eeg`.
N170_LATENCY = 0.17
N170_CENTRES = ("P7", "P8")
#: ds000117's MEG/EEG stim types and their first-presentation triggers.
_STIM_TYPES = {"Famous": 5, "Unfamiliar": 13, "Scrambled": 17}
#: The 16 recorded channels (10-20 names).
NAMES = (
    "Fp1",
    "Fp2",
    "F3",
    "Fz",
    "F4",
    "C3",
    "Cz",
    "C4",
    "P7",
    "P3",
    "Pz",
    "P4",
    "P8",
    "O1",
    "Oz",
    "O2",
)


def write_eeglab_epochs(
    path: Path,
    data: np.ndarray,
    *,
    sfreq: float,
    tmin: float,
    ch_names: Sequence[str],
    event_names: Sequence[str],
) -> None:
    """Write epochs as an EEGLAB ``.set`` (MATLAB v5, data inside the file).

    Parameters
    ----------
    path : Path
        The ``.set`` file.
    data : ndarray, shape (n_epochs, n_channels, n_times)
        Epochs in V (EEGLAB stores µV).
    sfreq : float
        Sampling rate (Hz).
    tmin : float
        Time (s) of the first sample of each epoch.
    ch_names : sequence of str
        Channel labels (no positions).
    event_names : sequence of str
        The time-locking event of each epoch.
    """
    n_trials, n_channels, n_times = data.shape
    chanlocs = np.zeros((n_channels,), dtype=[("labels", object), ("type", object)])
    for i, name in enumerate(ch_names):
        chanlocs[i] = (name, "EEG")
    event = np.zeros((n_trials,), dtype=[("type", object), ("latency", float), ("epoch", float)])
    epoch = np.zeros((n_trials,), dtype=[("event", float), ("eventtype", object)])
    for i, name in enumerate(event_names):
        latency = i * n_times - tmin * sfreq + 1  # 1-based, in concatenated samples
        event[i] = (name, latency, i + 1)
        epoch[i] = (i + 1, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(
        path,
        {
            "setname": "epochs",
            "nbchan": float(n_channels),
            "trials": float(n_trials),
            "pnts": float(n_times),
            "srate": float(sfreq),
            "xmin": float(tmin),
            "xmax": float(tmin + (n_times - 1) / sfreq),
            "times": (tmin + np.arange(n_times) / sfreq) * 1e3,
            "data": (data * 1e6).transpose(1, 2, 0).astype(np.float32),
            "chanlocs": chanlocs,
            "event": event,
            "epoch": epoch,
            "icawinv": np.array([]),
            "icasphere": np.array([]),
            "icaweights": np.array([]),
            "ref": "common",
        },
        appendmat=False,
    )


def _sidecars(stem: Path, names: Sequence[str], units: str, duration: float | None) -> None:
    """``_channels.tsv`` and ``_eeg.json`` of one recording."""
    write_tsv(
        Path(f"{stem}_channels.tsv"),
        {"name": list(names), "type": ["EEG"] * len(names), "units": [units] * len(names)},
    )
    meta: dict[str, Any] = {
        "SamplingFrequency": SFREQ,
        "PowerLineFrequency": 50,
        "EEGReference": "FCz",
    }
    if duration is not None:
        meta["RecordingDuration"] = duration
    write_json(Path(f"{stem}_eeg.json"), meta)


def _epoched(root: Path, seed: int, n_epochs: int, noise_uv: float) -> dict[str, Any]:
    """The epoched EEGLAB recording of sub-01 (its epochs cut from a simulated run)."""
    rng = rng_for(seed, "eeg_inputs", "epoched")
    names = list(NAMES)
    kinds = ["face" if i % 2 == 0 else "scrambled" for i in range(n_epochs)]
    spacing = round(0.5 * SFREQ)
    onsets = np.arange(1, n_epochs + 1) * spacing
    p1 = component(ALPHA_CENTRES, 0.05, 0.01, np.full(n_epochs, 4.0))
    data = simulate_eeg(
        rng=rng,
        ch_names=names,
        sfreq=SFREQ,
        n_times=int(onsets[-1] + spacing),
        onsets=onsets,
        components=[p1],
        noise_uv=noise_uv,
    )
    first = round(EPOCH_WINDOW[0] * SFREQ)
    n_times = round((EPOCH_WINDOW[1] - EPOCH_WINDOW[0]) * SFREQ) + 1
    epochs = np.stack([data[:, o + first : o + first + n_times] for o in onsets])
    stem = root / "sub-01" / "eeg" / "sub-01_task-faces"
    write_eeglab_epochs(
        Path(f"{stem}_eeg.set"),
        epochs,
        sfreq=SFREQ,
        tmin=first / SFREQ,
        ch_names=names,
        event_names=kinds,
    )
    _sidecars(stem, names, "µV", None)
    return {
        "key": "sub-01_task-faces",
        "subject": "01",
        "epoched": True,
        "window": [first / SFREQ, (first + n_times - 1) / SFREQ],
        "n_epochs": n_epochs,
        "conditions": sorted(set(kinds)),
        "has_positions": False,
    }


def _resting(
    root: Path,
    seed: int,
    subject: str,
    duration: float,
    noise_uv: float,
    alpha_uv: float,
    scale: float,
) -> dict[str, Any]:
    """A resting BrainVision recording with an occipital alpha rhythm and no events."""
    import mne

    rng = rng_for(seed, "eeg_inputs", "rest", subject)
    names = list(NAMES)
    n_times = int(duration * SFREQ)
    data = simulate_eeg(
        rng=rng,
        ch_names=names,
        sfreq=SFREQ,
        n_times=n_times,
        onsets=np.zeros(0, dtype=int),
        components=[component(ALPHA_CENTRES, 0.1, 0.01, np.zeros(0))],
        noise_uv=noise_uv,
    )
    pos = dict(zip(names, channel_positions(names), strict=True))
    pos["Oz"] = channel_positions(["Oz"])[0]
    weights = np.array([max(0.0, 1.0 - np.linalg.norm(pos[n] - pos["Oz"]) / 0.08) for n in names])
    time = np.arange(n_times) / SFREQ
    envelope = 1.0 + 0.3 * np.sin(2 * np.pi * 0.2 * time)
    data += weights[:, None] * alpha_uv * 1e-6 * envelope * np.sin(2 * np.pi * 10.0 * time)
    data *= scale
    info = mne.create_info(names, SFREQ, "eeg")
    raw = mne.io.RawArray(data, info, verbose="error")
    raw.set_meas_date(None)
    eeg_dir = root / f"sub-{subject}" / "eeg"
    eeg_dir.mkdir(parents=True, exist_ok=True)
    stem = eeg_dir / f"sub-{subject}_task-rest"
    mne.export.export_raw(
        Path(f"{stem}_eeg.vhdr"), raw, fmt="brainvision", overwrite=True, verbose="error"
    )
    _sidecars(stem, names, "V" if scale != 1.0 else "µV", duration)
    write_tsv(
        eeg_dir / f"sub-{subject}_electrodes.tsv",
        {
            "name": names,
            "x": [float(pos[n][0]) for n in names],
            "y": [float(pos[n][1]) for n in names],
            "z": [float(pos[n][2]) for n in names],
        },
    )
    write_json(
        eeg_dir / f"sub-{subject}_coordsystem.json",
        {"EEGCoordinateSystem": "CapTrak", "EEGCoordinateUnits": "m"},
    )
    return {
        "key": f"sub-{subject}_task-rest",
        "subject": subject,
        "epoched": False,
        "duration": duration,
        "has_positions": True,
        "alpha_channels": [n for n, w in zip(names, weights, strict=True) if w > 0.5],
        "scale": scale,
    }


def make_eeg_inputs(
    root: str | Path,
    *,
    seed: int = 0,
    scaled: bool = False,
    n_epochs: int = 40,
    duration: float = 30.0,
    noise_uv: float = 5.0,
    alpha_uv: float = 20.0,
) -> dict[str, Any]:
    """Write the dataset into ``root`` (absent or empty) and return its facts.

    Parameters
    ----------
    root : path-like
        Dataset root.
    seed : int
        Seed of every random stream.
    scaled : bool
        Write only a resting recording whose samples are 10^6 too large.
    n_epochs : int
        Epochs of the epoched recording (alternately face and scrambled).
    duration : float
        Length (s) of a resting recording.
    noise_uv, alpha_uv : float
        Background RMS and alpha amplitude (µV).

    Returns
    -------
    facts : dict
        ``root``, ``recordings`` (one dict each: ``key``, ``subject``, ``epoched``, and ``window``,
        ``n_epochs``, ``conditions`` of the epoched one or ``duration``,
        ``alpha_channels``, ``scale`` of a resting one), ``sfreq``, ``bands``-free
        planted facts (``alpha_freq``).
    """
    root = prepare_root(root)
    write_dataset_description(root, "neuroflow EEG inputs")
    if scaled:
        recordings = [_resting(root, seed, "03", duration, noise_uv, alpha_uv, 1e6)]
    else:
        recordings = [
            _epoched(root, seed, n_epochs, noise_uv),
            _resting(root, seed, "02", duration, noise_uv, alpha_uv, 1.0),
        ]
    return {"root": root, "recordings": recordings, "sfreq": SFREQ, "alpha_freq": 10.0}


def make_faces_eeg(
    root: str | Path,
    *,
    seed: int = 0,
    n_trials: int = 90,
    face_uv: float = 10.0,
    noise_uv: float = 5.0,
) -> dict[str, Any]:
    """One continuous face-recognition EEG run in ds000117's event columns.

    ``sub-01/eeg/sub-01_task-facerecognition_run-01_eeg.vhdr`` (BrainVision, 250 Hz) with
    ``_events.tsv`` columns ``onset duration trigger stim_type stim_file`` (``Famous``,
    ``Unfamiliar``, ``Scrambled`` in turn, no ``trial_type``), ``_channels.tsv``,
    ``_eeg.json`` and ``_electrodes.tsv``. Every image evokes a P1 (0.1 s) over occipital
    sites; faces add a negativity peaking at :data:`N170_LATENCY` s over
    :data:`N170_CENTRES` of ``face_uv`` µV, scrambled images 30 % of it (20 % jitter).

    Returns
    -------
    facts : dict
        ``root``, ``key``, ``eeg`` (path), ``n_trials``, ``stim_types`` (per trial),
        ``n170_latency``, ``n170_channels``.
    """
    import mne

    root = prepare_root(root)
    write_dataset_description(root, "neuroflow face EEG")
    rng = rng_for(seed, "eeg_inputs", "faces")
    names = list(NAMES)
    kinds = [list(_STIM_TYPES)[i % 3] for i in range(n_trials)]
    face = np.array([k != "Scrambled" for k in kinds])
    soa = rng.uniform(0.9, 1.1, n_trials)
    onsets = np.round((1.0 + np.concatenate([[0.0], np.cumsum(soa[:-1])])) * SFREQ).astype(int)
    jitter = 1.0 + 0.2 * rng.standard_normal(n_trials)
    components = [
        component(("O1", "O2"), 0.1, 0.02, np.full(n_trials, 3.0)),
        component(N170_CENTRES, N170_LATENCY, 0.02, -face_uv * np.where(face, 1.0, 0.3) * jitter),
    ]
    data = simulate_eeg(
        rng=rng,
        ch_names=names,
        sfreq=SFREQ,
        n_times=int(onsets[-1] + 2 * SFREQ),
        onsets=onsets,
        components=components,
        noise_uv=noise_uv,
    )
    raw = mne.io.RawArray(data, mne.create_info(names, SFREQ, "eeg"), verbose="error")
    raw.set_meas_date(None)
    eeg_dir = root / "sub-01" / "eeg"
    eeg_dir.mkdir(parents=True)
    stem = eeg_dir / "sub-01_task-facerecognition_run-01"
    mne.export.export_raw(
        Path(f"{stem}_eeg.vhdr"), raw, fmt="brainvision", overwrite=True, verbose="error"
    )
    write_tsv(
        Path(f"{stem}_events.tsv"),
        {
            "onset": [round(o / SFREQ, 4) for o in onsets],
            "duration": [0.8] * n_trials,
            "trigger": [_STIM_TYPES[k] for k in kinds],
            "stim_type": kinds,
            "stim_file": [f"meg/{k[0].lower()}{i:03d}.bmp" for i, k in enumerate(kinds)],
        },
    )
    _sidecars(stem, names, "µV", raw.n_times / SFREQ)
    return {
        "root": root,
        "key": "sub-01_task-facerecognition_run-01",
        "eeg": Path(f"{stem}_eeg.vhdr"),
        "n_trials": n_trials,
        "stim_types": kinds,
        "n170_latency": N170_LATENCY,
        "n170_channels": list(N170_CENTRES),
    }

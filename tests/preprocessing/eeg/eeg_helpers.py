"""Helpers for the EEG preprocessing tests: synthetic recordings and event tables."""

from __future__ import annotations

from pathlib import Path

import mne
import numpy as np
import pandas as pd

EEG_DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "eeg"
CHANNELS = ["Fz", "Cz", "Pz", "F3", "F4", "C3", "C4", "P3", "P4", "O1", "O2"]


def synthetic_raw(
    rng: np.random.Generator,
    *,
    n_eeg: int = 9,
    sfreq: float = 250.0,
    duration: float = 30.0,
    eog: bool = False,
) -> mne.io.RawArray:
    """Correlated EEG-like noise (V) on standard 10-20 channels, shape (n_eeg, n_times)."""
    n_times = int(duration * sfreq)
    sources = np.cumsum(rng.standard_normal((3, n_times)), axis=1) * 2e-7
    sources -= sources.mean(axis=1, keepdims=True)
    mixing = rng.uniform(0.5, 1.5, (n_eeg, 3))
    data = mixing @ sources + rng.standard_normal((n_eeg, n_times)) * 2e-6
    names, types = CHANNELS[:n_eeg], ["eeg"] * n_eeg
    if eog:
        data = np.vstack([data, rng.standard_normal((1, n_times)) * 5e-6])
        names, types = [*names, "VEOG"], [*types, "eog"]
    raw = mne.io.RawArray(data, mne.create_info(names, sfreq, types), verbose="error")
    raw.set_meas_date(None)
    return raw


def standard_positions(names: list[str]) -> dict[str, np.ndarray]:
    """Positions (m) of the named channels in MNE's colin27_1020 montage."""
    pos = mne.channels.make_standard_montage("colin27_1020").get_positions()["ch_pos"]
    return {n: pos[n] for n in names}


def events_table(onsets: np.ndarray, sfreq: float) -> pd.DataFrame:
    """An ``_events.tsv`` table alternating faces and houses with stimulus files."""
    kinds = np.where(np.arange(len(onsets)) % 2 == 0, "face", "house")
    return pd.DataFrame(
        {
            "onset": onsets,
            "duration": 0.5,
            "sample": np.round(onsets * sfreq).astype(int),
            "trial_type": kinds,
            "stim_file": [f"stimuli/{k}_{i:02d}.png" for i, k in enumerate(kinds)],
        }
    )

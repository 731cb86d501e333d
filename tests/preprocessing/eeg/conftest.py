"""Fixtures for the EEG preprocessing tests: a synthetic BIDS EEG folder and real files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import mne
import pandas as pd
import pytest
from eeg_helpers import CHANNELS, EEG_DATA, standard_positions

from neuroflow.io.records import EegRecording


@pytest.fixture
def eeg_data() -> Path:
    """Folder of real EEG recordings; skips when absent."""
    if not EEG_DATA.exists():
        pytest.skip(f"real EEG recordings not found at {EEG_DATA.resolve()}")
    return EEG_DATA


@pytest.fixture
def make_bids(tmp_path: Path) -> Callable[..., EegRecording]:
    """Factory writing a BIDS EEG recording (BrainVision) and returning its record."""

    def _make(
        raw: mne.io.BaseRaw,
        events: pd.DataFrame,
        *,
        status: dict[str, str] | None = None,
        sidecar: dict | None = None,
        channel_rows: list[dict] | None = None,
        electrodes: bool = True,
    ) -> EegRecording:
        eeg_dir = tmp_path / "bids" / "sub-01" / "eeg"
        eeg_dir.mkdir(parents=True, exist_ok=True)
        stem = eeg_dir / "sub-01_task-vis_run-1"
        vhdr = Path(f"{stem}_eeg.vhdr")
        mne.export.export_raw(vhdr, raw, fmt="brainvision", overwrite=True, verbose="error")
        events.to_csv(f"{stem}_events.tsv", sep="\t", index=False, na_rep="n/a")
        bids_types = {"eeg": "EEG", "eog": "VEOG", "stim": "TRIG", "misc": "MISC"}
        rows = channel_rows or [
            {
                "name": n,
                "type": bids_types[t],
                "units": "V",
                "status": (status or {}).get(n, "good"),
            }
            for n, t in zip(raw.ch_names, raw.get_channel_types(), strict=True)
        ]
        pd.DataFrame(rows).to_csv(f"{stem}_channels.tsv", sep="\t", index=False)
        meta = {
            "SamplingFrequency": raw.info["sfreq"],
            "PowerLineFrequency": 50,
            "RecordingDuration": raw.n_times / raw.info["sfreq"],
            "EEGReference": "Cz",
        }
        Path(f"{stem}_eeg.json").write_text(json.dumps({**meta, **(sidecar or {})}))
        electrodes_tsv = None
        if electrodes:
            eeg_names = [n for n in raw.ch_names if n in CHANNELS]
            pos = standard_positions(eeg_names)
            table = pd.DataFrame(
                [{"name": n, "x": p[0], "y": p[1], "z": p[2]} for n, p in pos.items()]
            )
            electrodes_tsv = eeg_dir / "sub-01_electrodes.tsv"
            table.to_csv(electrodes_tsv, sep="\t", index=False)
            (eeg_dir / "sub-01_coordsystem.json").write_text(
                json.dumps({"EEGCoordinateSystem": "CapTrak", "EEGCoordinateUnits": "m"})
            )
        return EegRecording(
            subject="01",
            session=None,
            task="vis",
            run="1",
            eeg=vhdr,
            events=Path(f"{stem}_events.tsv"),
            channels=Path(f"{stem}_channels.tsv"),
            electrodes=electrodes_tsv,
            sidecars=(Path(f"{stem}_eeg.json"),),
        )

    return _make

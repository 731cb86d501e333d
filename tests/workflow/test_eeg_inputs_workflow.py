"""EEG inputs the demo never has, through ``snakemake``: short stored epochs with the
default window, a resting recording without events, samples in the wrong unit.

The run goes up to the QC stores (``--until qc_eeg``): which analyses apply to an
event-free recording is the plan's business, not tested here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from dataset_shapes.eeg_inputs import make_eeg_inputs
from shape_helpers import run_shape
from workflow_helpers import snakemake, write_config

from neuroflow.artifacts import read_provenance
from neuroflow.qc.eeg import BANDS, EEG_QC_FIGURES, EVENT_FIGURES

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def _config(bids: Path, **sections: dict) -> dict:
    return {"dataset": {"source": "bids", "bids_root": str(bids)}, **sections}


@pytest.fixture(scope="module")
def inputs_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("eeg_inputs")
    facts = make_eeg_inputs(root / "bids", seed=1)
    run_shape(root / "run", _config(root / "bids"), "--until", "qc_eeg")
    return root, facts


def _store(run: Path, stage: str, name: str) -> Path:
    (store,) = sorted((run / "results" / stage).glob(f"*/sub-*/{name}"))
    return store


def test_epoched_input_runs_with_its_own_window(inputs_run):
    root, facts = inputs_run
    (epo,) = [r for r in facts["recordings"] if r["epoched"]]
    ds = xr.open_zarr(_store(root / "run", "preprocess_eeg", f"{epo['key']}_epo.zarr"))
    np.testing.assert_allclose(ds["time"].values[[0, -1]], epo["window"], atol=1e-9)
    assert ds.sizes["epoch"] == epo["n_epochs"] and ds.attrs["input"] == "epochs"
    assert sorted(set(ds["condition"].values)) == epo["conditions"]


def test_every_recording_reaches_qc_with_band_power(inputs_run):
    root, facts = inputs_run
    run = root / "run"
    for rec in facts["recordings"]:
        store = _store(run, "qc_eeg", f"{rec['key']}_qc.zarr")
        qc = xr.open_zarr(store)
        assert read_provenance(store)["stage"] == "qc_eeg"
        assert qc["band_power"].dims == ("channel", "band")
        assert list(qc["band"].values) == list(BANDS)
        assert qc["band_power"].attrs["units"] == "V**2"
        kinds = EEG_QC_FIGURES
        if not rec["epoched"]:  # the resting recording: no events, no event figures
            kinds = tuple(k for k in EEG_QC_FIGURES if k not in EVENT_FIGURES)
            assert qc.sizes["event"] == 0 and qc.attrs["event_source"] == "none"
            alpha = qc["band_power"].sel(band="alpha")
            top = alpha.sortby(alpha, ascending=False)["channel"].values[:3]
            assert set(map(str, top)) == set(rec["alpha_channels"])
        figures = sorted(p.name for p in store.with_suffix("").glob("*.png"))
        assert figures == sorted(f"{rec['key']}_qc-{k}.png" for k in kinds), rec["key"]


def test_window_outside_the_stored_epochs_fails_when_planned(inputs_run, tmp_path):
    root, _ = inputs_run
    workdir = tmp_path / "window"
    workdir.mkdir()
    config = _config(root / "bids", preprocess_eeg={"epochs_tmin": -0.2, "epochs_tmax": 0.8})
    write_config(workdir / "config.yaml", config)
    proc = snakemake(workdir, "-n", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "sub-01_task-faces_eeg.set, got [-0.2, 0.8] s for epochs spanning [-0.06, 0.08]" in out
    assert "(configured: [-0.2, 0.8].)" in out
    assert not (workdir / "results").exists()


def test_samples_in_the_wrong_unit_stop_preprocessing(tmp_path):
    facts = make_eeg_inputs(tmp_path / "bids", seed=2, scaled=True)
    (rec,) = facts["recordings"]
    workdir = tmp_path / "run"
    workdir.mkdir()
    write_config(workdir / "config.yaml", _config(tmp_path / "bids"))
    proc = snakemake(workdir, "--cores", "1", "--until", "preprocess_eeg", check=False)
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (workdir / "logs").rglob("*.log"))
    message = proc.stdout + proc.stderr + logs
    assert f"EEG amplitudes of {tmp_path / 'bids'}/sub-03/eeg/{rec['key']}_eeg.vhdr" in message
    assert "gives their 'units' as 'V'" in message
    assert "must be at most 0.01 V (`amplitude_bounds.max_sd`)" in message
    assert not list((workdir / "results").rglob("*_epo.zarr"))

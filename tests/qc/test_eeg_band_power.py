"""Band power per channel in the EEG QC, resting (event-free) recordings included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.signal
from dataset_shapes.eeg_inputs import make_eeg_inputs

from neuroflow.artifacts import build_provenance, open_dataset, read_provenance
from neuroflow.preprocessing.eeg import (
    preprocess_eeg_epochs,
    preprocess_eeg_recording,
    recording_from_path,
)
from neuroflow.qc import QC_CATEGORY, qc_eeg_recording
from neuroflow.qc.eeg import BANDS, EEG_QC_FIGURES, EVENT_FIGURES, band_power
from neuroflow.variables import undescribed
from neuroflow.workflow.report_layout import qc_entry


def _scipy_band_power(data: np.ndarray, sfreq: float, n_fft: int) -> np.ndarray:
    """Band power (n_channels, n_bands) from SciPy's Welch estimate with MNE's settings
    (Hamming windows without overlap, each segment's mean removed)."""
    freqs, psd = scipy.signal.welch(
        data, sfreq, window="hamming", nperseg=n_fft, noverlap=0, detrend="constant", axis=-1
    )
    psd = psd.reshape(-1, *psd.shape[-2:]).mean(axis=0)
    step = freqs[1] - freqs[0]
    return np.stack(
        [psd[:, (freqs >= lo) & (freqs < hi)].sum(axis=1) * step for lo, hi in BANDS.values()],
        axis=1,
    )


def test_band_power_matches_scipy_and_a_planted_rhythm():
    rng = np.random.default_rng(7)
    sfreq, n_times = 200.0, 4321
    data = rng.standard_normal((5, n_times)) * 3e-6
    t = np.arange(n_times) / sfreq
    data[2] += 2e-5 * np.sin(2 * np.pi * 10.0 * t)  # alpha on channel 2
    data[4] += 2e-5 * np.sin(2 * np.pi * 20.0 * t)  # beta on channel 4
    power, n_freqs = band_power(data, sfreq, 400)
    assert power.shape == (5, len(BANDS))
    np.testing.assert_allclose(power, _scipy_band_power(data, sfreq, 400), rtol=1e-10)
    assert n_freqs.tolist() == [6, 8, 10, 34, 30]  # 0.5 Hz bins in [low, high)
    bands = list(BANDS)
    assert int(np.argmax(power[:, bands.index("alpha")])) == 2
    assert int(np.argmax(power[:, bands.index("beta")])) == 4
    # a sinusoid of amplitude A carries A²/2 of power (Hamming leakage stays in band)
    assert power[2, bands.index("alpha")] == pytest.approx(0.5 * 2e-5**2, rel=0.05)


def test_band_power_of_short_epochs():
    """Epochs are averaged; bands narrower than the resolution are NaN with 0 frequencies."""
    rng = np.random.default_rng(11)
    data = rng.standard_normal((6, 3, 36)) * 5e-6  # 0.14 s epochs at 250 Hz
    power, n_freqs = band_power(data, 250.0, 36)
    np.testing.assert_allclose(
        power[:, n_freqs > 0], _scipy_band_power(data, 250.0, 36)[:, n_freqs > 0], rtol=1e-10
    )
    assert n_freqs.tolist() == [0, 1, 0, 3, 2]  # one frequency every 6.9 Hz
    assert np.isnan(power[:, n_freqs == 0]).all() and np.isfinite(power[:, n_freqs > 0]).all()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("band_power")
    return root, make_eeg_inputs(root / "bids", seed=5)


def _qc(recording, epochs, continuous, out: Path, prefix: str) -> tuple[Path, Path]:
    config = {"enabled": True, "dpi": 50}
    return qc_eeg_recording(
        recording=recording,
        epochs_store=epochs,
        continuous_store=continuous,
        output=out / f"{prefix}_qc.zarr",
        plots=out / f"{prefix}_qc",
        prefix=prefix,
        config=config,
        provenance=build_provenance(stage="qc_eeg", version="abc", config=config),
    )


def test_resting_recording_qc_has_band_power(dataset, tmp_path):
    """An event-free recording: band power (channel x band) in the store, three figures."""
    root, facts = dataset
    (rest,) = [r for r in facts["recordings"] if not r["epoched"]]
    recording = recording_from_path(root / "bids" / "sub-02" / "eeg" / "sub-02_task-rest_eeg.vhdr")
    provenance = build_provenance(stage="preprocess_eeg", version="0", config={})
    epochs, continuous = preprocess_eeg_recording(
        recording=recording,
        epochs_output=tmp_path / "ep.zarr",
        continuous_output=tmp_path / "raw.zarr",
        config={},
        provenance=provenance,
    )
    store, plots = _qc(recording, epochs, continuous, tmp_path, rest["key"])
    qc = open_dataset(store)
    assert read_provenance(store)["stage"] == "qc_eeg"
    assert undescribed(qc) == []
    assert qc["band_power"].dims == ("channel", "band")
    assert qc["band_power"].attrs["units"] == "V**2"
    assert list(qc["band"].values) == list(BANDS)
    assert qc["band_fmin"].values.tolist() == [b[0] for b in BANDS.values()]
    assert qc["band_fmax"].attrs["units"] == "Hz"
    assert qc.sizes["event"] == 0 and qc.sizes["erp_condition"] == 0
    assert qc.attrs["event_source"] == "none"
    # the stored values are MNE's Welch band power of the continuous store (2 s windows)
    cont = open_dataset(continuous)
    expected = _scipy_band_power(cont["eeg"].values.astype(float), 250.0, 500)
    np.testing.assert_allclose(qc["band_power"].values, expected, rtol=1e-5)
    # the planted occipital alpha rhythm is where the alpha power is
    alpha = qc["band_power"].sel(band="alpha")
    top = [str(c) for c in alpha.sortby(alpha, ascending=False)["channel"].values[:3]]
    assert set(top) == set(rest["alpha_channels"])
    names = sorted(p.name for p in plots.iterdir())
    kinds = [k for k in EEG_QC_FIGURES if k not in EVENT_FIGURES]
    assert names == sorted(f"{rest['key']}_qc-{k}.png" for k in kinds)
    entry = qc_entry(f"{rest['key']}_qc-band-power")
    assert entry.category == QC_CATEGORY and entry.labels["measure"] == "band power per channel"


def test_epoched_recording_qc_has_band_power_and_a_bar_chart(dataset, tmp_path):
    """Short epochs without positions: bars instead of scalp maps; low bands unresolved."""
    root, facts = dataset
    (epo,) = [r for r in facts["recordings"] if r["epoched"]]
    path = root / "bids" / "sub-01" / "eeg" / "sub-01_task-faces_eeg.set"
    config = {"find_noisy_channels": False, "find_uncorrelated_channels": False}
    epochs = preprocess_eeg_epochs(
        recording=path,
        epochs_output=tmp_path / "ep.zarr",
        config=config,
        provenance=build_provenance(stage="preprocess_eeg", version="0", config=config),
    )
    store, plots = _qc(recording_from_path(path), epochs, None, tmp_path, epo["key"])
    qc = open_dataset(store)
    resolved = qc["band_n_freqs"].values > 0
    assert resolved.tolist() == [False, True, False, True, True]
    assert np.isnan(qc["band_power"].values[:, ~resolved]).all()
    assert (qc["band_power"].values[:, resolved] > 0).all()
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(f"{epo['key']}_qc-{k}.png" for k in EEG_QC_FIGURES)

"""Quality control of every recording: EEG spectra, bad channels, ICA, drop log and
evoked responses; fMRI mean and tSNR maps, carpet plot, motion and the variance each
nuisance set removed. Stored as zarr beside a figure per measure for the report."""

from neuroflow.qc.stage import QC_CATEGORY, qc_eeg_recording, qc_fmri_run

__all__ = ["QC_CATEGORY", "qc_eeg_recording", "qc_fmri_run"]

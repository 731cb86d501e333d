"""Quality control of every recording: EEG spectra, bad channels, ICA, drop log and
evoked responses; fMRI mean and tSNR maps, carpet plot, motion and the variance each
nuisance set removed. Stored as zarr beside a figure per measure for the report."""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "stage": ["QC_CATEGORY", "qc_eeg_recording", "qc_fmri_run"],
    },
)

"""fMRI preprocessing: from a BOLD run to a cleaned (time, voxel) store.

:func:`preprocess_fmri_run` is the stage entry point; :func:`clean_signals`
is the numerical core (one orthogonal projection, see
:mod:`neuroflow.preprocessing.fmri.clean`). :func:`estimate_single_trials`
estimates (trial, voxel) responses of event-related designs (LSS / LSA) with
NSD's noise ceiling (:mod:`neuroflow.preprocessing.fmri.ncsnr`).
:func:`preprocess_timeseries_run` cleans parcel or vertex time series
(:mod:`neuroflow.preprocessing.fmri.timeseries`, indexed by :mod:`neuroflow.io.timeseries`)
into the same layout.
"""

from neuroflow.preprocessing.fmri.clean import clean_signals
from neuroflow.preprocessing.fmri.ncsnr import ncsnr_from_betas, noise_ceiling_from_ncsnr
from neuroflow.preprocessing.fmri.single_trial import estimate_single_trials
from neuroflow.preprocessing.fmri.stage import DEFAULT_CONFIG, preprocess_fmri_run, resolve_config
from neuroflow.preprocessing.fmri.timeseries import preprocess_timeseries_run

__all__ = [
    "DEFAULT_CONFIG",
    "clean_signals",
    "estimate_single_trials",
    "ncsnr_from_betas",
    "noise_ceiling_from_ncsnr",
    "preprocess_fmri_run",
    "preprocess_timeseries_run",
    "resolve_config",
]

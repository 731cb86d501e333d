"""fMRI preprocessing: from a BOLD run to a cleaned (time, voxel) store.

:func:`preprocess_fmri_run` is the stage entry point; :func:`clean_signals`
is the numerical core (one orthogonal projection, see
:mod:`neuroflow.preprocessing.fmri.clean`).
"""

from neuroflow.preprocessing.fmri.clean import clean_signals
from neuroflow.preprocessing.fmri.stage import DEFAULT_CONFIG, preprocess_fmri_run, resolve_config

__all__ = ["DEFAULT_CONFIG", "clean_signals", "preprocess_fmri_run", "resolve_config"]

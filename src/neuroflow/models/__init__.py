"""Ridge and banded-ridge solvers, hemodynamic delays and run-wise cross-validation.

The names below load their submodule on first use (PEP 562), so that reading one light
submodule (e.g. :mod:`neuroflow.models.delays` while a workflow is planned) does not
import PyTorch and scikit-learn, which the solvers need.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "_device": ["ComputeContext", "compute_context", "resolve_device", "resolve_dtype"],
        "_workers": ["matmul"],
        "banded": ["BandedRidgeCVResult", "banded_ridge_cv", "dirichlet_gammas", "r2_split"],
        "cv": ["check_splits", "parse_cv", "run_splits"],
        "delays": ["apply_delays", "fir_delays", "hrf_convolve"],
        "ridge": ["RidgeCVResult", "ridge_cv", "ridge_fit"],
        "selection": ["SCORE_TOLERANCE", "near_best", "select_penalty"],
    },
)

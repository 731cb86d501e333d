"""Ridge and banded-ridge solvers, hemodynamic delays and run-wise cross-validation."""

from ._device import ComputeContext, compute_context, resolve_device, resolve_dtype
from ._workers import matmul
from .banded import BandedRidgeCVResult, banded_ridge_cv, dirichlet_gammas, r2_split
from .cv import check_splits, parse_cv, run_splits
from .delays import apply_delays, fir_delays, hrf_convolve
from .ridge import RidgeCVResult, ridge_cv, ridge_fit
from .selection import SCORE_TOLERANCE, near_best, select_penalty

__all__ = [
    "SCORE_TOLERANCE",
    "BandedRidgeCVResult",
    "ComputeContext",
    "RidgeCVResult",
    "apply_delays",
    "banded_ridge_cv",
    "check_splits",
    "compute_context",
    "dirichlet_gammas",
    "fir_delays",
    "hrf_convolve",
    "matmul",
    "near_best",
    "parse_cv",
    "r2_split",
    "resolve_device",
    "resolve_dtype",
    "ridge_cv",
    "ridge_fit",
    "run_splits",
    "select_penalty",
]

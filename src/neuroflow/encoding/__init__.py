"""Encoding stage: stimulus features to brain responses."""

from .stage import DEFAULT_CONFIG, fit_encoding, group_repeats, make_alphas, with_defaults
from .trials import fit_trial_encoding

__all__ = [
    "DEFAULT_CONFIG",
    "fit_encoding",
    "fit_trial_encoding",
    "group_repeats",
    "make_alphas",
    "with_defaults",
]

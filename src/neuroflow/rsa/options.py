"""The ``rsa`` configuration section: its defaults and their checks.

:func:`resolve_config` fills a section with :data:`DEFAULT_CONFIG` and checks it (channel
groups, bootstrap factors, the model-time and linear-predictivity blocks) before any
RDM is computed; :mod:`neuroflow.rsa.stage` reads it for both RSA stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from neuroflow.config import merge_defaults

from .eeg import check_channel_groups
from .inference import BOOTSTRAP_FACTORS
from .model_time import MODEL_TIME_BOOTSTRAP_FACTORS

__all__ = ["DEFAULT_CONFIG", "resolve_config"]


#: The default ``rsa`` section (mirrored by ``workflow/schemas/rsa.schema.yaml``).
DEFAULT_CONFIG: dict[str, Any] = {
    "enabled": True,
    "feature_spaces": [],
    "comparisons": ["spearman", "tau-a"],
    "decim": 2,
    "eeg_stimuli": "all",
    "fmri_rdm": "crossnobis",
    "hrf_lag": 4.5,
    "noise_shrinkage": "shrinkage_diag",
    "min_repeats": 2,
    "bootstrap": {"over": "auto", "n_bootstraps": 1000, "level": 0.95, "eeg_times": "auto"},
    "equivalence_margin": None,
    "channel_groups": {},
    "model_time": {
        "enabled": True,
        "n_permutations": 200,
        "n_bootstraps": 200,
        "bootstrap_over": "auto",
        "alpha": 0.05,
        "seed": 0,
    },
    "predictivity_patterns": {
        "enabled": True,
        "symmetric": True,
        "cv": 5,
        "alphas": [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0, 1e4, 1e5],
        "n_boot": 1000,
        "seed": 0,
        "equivalence_margin": None,
        "alpha": 0.05,
    },
}


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the ``rsa`` section with defaults; unknown keys are errors.

    Parameters
    ----------
    config : dict | None
        The section as given.

    Returns
    -------
    config : dict
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config, "rsa", opaque=("channel_groups",))
    cfg["channel_groups"] = check_channel_groups(cfg["channel_groups"] or {})
    if cfg["fmri_rdm"] not in ("crossnobis", "correlation"):
        raise ValueError(
            f"`rsa.fmri_rdm` must be 'crossnobis' or 'correlation', got {cfg['fmri_rdm']!r} "
            "instead."
        )
    if cfg["eeg_stimuli"] not in ("all", "repeated"):
        raise ValueError(
            f"`rsa.eeg_stimuli` must be 'all' or 'repeated', got {cfg['eeg_stimuli']!r} instead."
        )
    if not cfg["comparisons"]:
        raise ValueError("`rsa.comparisons` must name at least one method, got none.")
    over = cfg["bootstrap"]["over"]
    if over not in ("auto", "none", *BOOTSTRAP_FACTORS):
        raise ValueError(
            "`rsa.bootstrap.over` must be one of auto, none, "
            f"{', '.join(BOOTSTRAP_FACTORS)}, got {over!r} instead."
        )
    if cfg["bootstrap"]["eeg_times"] not in ("auto", "all", "peaks"):
        raise ValueError(
            "`rsa.bootstrap.eeg_times` must be 'auto', 'all' or 'peaks', got "
            f"{cfg['bootstrap']['eeg_times']!r} instead."
        )
    _check_model_time(cfg["model_time"])
    _check_predictivity(cfg["predictivity_patterns"])
    margin = cfg["equivalence_margin"]
    if margin is not None and not margin > 0:
        raise ValueError(
            f"`rsa.equivalence_margin` must be positive or null, got {margin!r} instead."
        )
    return cfg


def _check_model_time(cfg: Mapping[str, Any]) -> None:
    """Check ``rsa.model_time``: its test must be able to reach its level."""
    alpha, n_perm = cfg["alpha"], cfg["n_permutations"]
    if not 0 < alpha < 1:
        raise ValueError(f"`rsa.model_time.alpha` must be in (0, 1), got {alpha!r} instead.")
    if cfg["bootstrap_over"] not in MODEL_TIME_BOOTSTRAP_FACTORS:
        raise ValueError(
            "`rsa.model_time.bootstrap_over` must be one of "
            f"{', '.join(MODEL_TIME_BOOTSTRAP_FACTORS)}, got {cfg['bootstrap_over']!r} instead."
        )
    if cfg["n_bootstraps"] < 10:
        raise ValueError(
            f"`rsa.model_time.n_bootstraps` must be at least 10, got {cfg['n_bootstraps']!r} "
            "instead."
        )
    need = int(np.ceil(1 / alpha - 1 - 1e-9))
    if n_perm < need:
        raise ValueError(
            f"`rsa.model_time.n_permutations` must be at least {need} for a p-value to reach "
            f"`rsa.model_time.alpha` = {alpha} (the smallest is 1 / (n_permutations + 1)), "
            f"got {n_perm!r} instead."
        )


def _check_predictivity(cfg: Mapping[str, Any]) -> None:
    """Check ``rsa.predictivity_patterns``."""
    key = "`rsa.predictivity_patterns"
    cv = cfg["cv"]
    if cv is not None and (isinstance(cv, bool) or not isinstance(cv, int) or cv < 2):
        raise ValueError(f"{key}.cv` must be an integer >= 2 or null, got {cv!r} instead.")
    alphas = cfg["alphas"]
    if (
        not isinstance(alphas, list | tuple)
        or not alphas
        or not all(isinstance(a, int | float) and not isinstance(a, bool) for a in alphas)
        or not all(a > 0 for a in alphas)
    ):
        raise ValueError(
            f"{key}.alphas` must be a non-empty list of positive numbers, got {alphas!r} instead."
        )
    n_boot = cfg["n_boot"]
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"{key}.n_boot` must be a positive integer, got {n_boot!r} instead.")
    if not 0 < cfg["alpha"] < 1:
        raise ValueError(f"{key}.alpha` must be in (0, 1), got {cfg['alpha']!r} instead.")
    margin = cfg["equivalence_margin"]
    if margin is not None and not margin > 0:
        raise ValueError(
            f"{key}.equivalence_margin` must be positive or null, got {margin!r} instead."
        )

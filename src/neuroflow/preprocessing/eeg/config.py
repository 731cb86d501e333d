"""Defaults of the ``preprocess_eeg`` configuration section and light checks.

The workflow validates the section against ``workflow/schemas/preprocess_eeg.schema.yaml``;
:func:`resolve_config` fills defaults and catches mistakes for direct Python callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from neuroflow.config import merge_defaults

__all__ = ["DEFAULT_CONFIG", "resolve_config"]

#: Defaults of every key of the ``preprocess_eeg`` section.
DEFAULT_CONFIG: dict[str, Any] = {
    "ch_types": ["eeg"],
    "drop_channels": [],
    "eog_channels": [],
    "eeg_template_montage": None,
    "bads_from_channels_tsv": True,
    "find_flat_channels": True,
    "flat_threshold": 1e-7,
    "find_noisy_channels": True,
    "noisy_z_threshold": 5.0,
    "find_uncorrelated_channels": True,
    "correlation_threshold": 0.4,
    "interpolate_bads": True,
    "notch_freq": "auto",
    "notch_widths": None,
    "l_freq": 0.1,
    "h_freq": 40.0,
    "l_trans_bandwidth": "auto",
    "h_trans_bandwidth": "auto",
    "eeg_reference": "average",
    "spatial_filter": None,
    "ica_algorithm": "fastica",
    "ica_n_components": None,
    "ica_l_freq": 1.0,
    "ica_max_iterations": 500,
    "ica_eog_threshold": 3.0,
    "ica_use_icalabel": True,
    "ica_icalabel_exclude": ["eye blink", "muscle artifact", "heart beat", "channel noise"],
    "ica_icalabel_threshold": 0.8,
    "random_state": 42,
    "resample_sfreq": None,
    "event_source": "auto",
    "event_column": "trial_type",
    "stim_column": "stim_file",
    "stim_channel": None,
    "conditions": None,
    "epochs_tmin": -0.2,
    "epochs_tmax": 0.8,
    "baseline": [None, 0.0],
    "reject": None,
    "reject_mad_k": 5.0,
    "n_jobs": 1,
}

_CHOICES = {
    "event_source": ("auto", "events_tsv", "annotations", "stim_channel"),
    "spatial_filter": (None, "ica"),
    "ica_algorithm": ("fastica", "infomax", "picard"),
}


def _positive(cfg: Mapping[str, Any], key: str, *, allow_none: bool = False) -> None:
    value = cfg[key]
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"`{key}` must be a positive number, got {value!r} instead.")


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill in defaults and check the ``preprocess_eeg`` section.

    Parameters
    ----------
    config : dict | None
        The section; missing keys take :data:`DEFAULT_CONFIG` values.

    Returns
    -------
    config : dict
        A new dict with every key.
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config, "preprocess_eeg")
    for key, choices in _CHOICES.items():
        if cfg[key] not in choices:
            raise ValueError(f"`{key}` must be one of {list(choices)}, got {cfg[key]!r} instead.")
    for key in ("l_freq", "h_freq", "resample_sfreq"):
        _positive(cfg, key, allow_none=True)
    for key in ("flat_threshold", "noisy_z_threshold", "correlation_threshold", "reject_mad_k"):
        _positive(cfg, key)
    if cfg["l_freq"] is not None and cfg["h_freq"] is not None and cfg["l_freq"] >= cfg["h_freq"]:
        raise ValueError(
            f"`l_freq` must be below `h_freq`, got {cfg['l_freq']} and {cfg['h_freq']} instead."
        )
    if not cfg["epochs_tmin"] < cfg["epochs_tmax"]:
        raise ValueError(
            f"`epochs_tmin` must be below `epochs_tmax`, got {cfg['epochs_tmin']} and "
            f"{cfg['epochs_tmax']} instead."
        )
    baseline = cfg["baseline"]
    if baseline is not None and (not isinstance(baseline, list | tuple) or len(baseline) != 2):
        raise ValueError(
            f"`baseline` must be null or a [start, stop] pair, got {baseline!r} instead."
        )
    reject = cfg["reject"]
    if not (reject is None or reject == "auto" or isinstance(reject, Mapping)):
        raise ValueError(
            f"`reject` must be null, 'auto' or a mapping of channel type to volts, got "
            f"{reject!r} instead."
        )
    ref = cfg["eeg_reference"]
    if not (ref is None or ref == "average" or isinstance(ref, list | tuple)):
        raise ValueError(
            f"`eeg_reference` must be null, 'average' or a list of channel names, got "
            f"{ref!r} instead."
        )
    notch = cfg["notch_freq"]
    if not (notch is None or notch == "auto" or isinstance(notch, int | float | list | tuple)):
        raise ValueError(
            f"`notch_freq` must be null, 'auto', a frequency or a list of frequencies, got "
            f"{notch!r} instead."
        )
    return cfg

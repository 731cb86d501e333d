"""Defaults of the ``preprocess_eeg`` configuration section and light checks.

The workflow validates the section against ``workflow/schemas/preprocess_eeg.schema.yaml``;
:func:`resolve_config` fills defaults and catches mistakes for direct Python callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from neuroflow.config import merge_defaults

__all__ = [
    "AMPLITUDE_ACTIONS",
    "BAD_CHANNEL_METHODS",
    "CONTINUOUS_WINDOW",
    "DEFAULT_CONFIG",
    "REJECT_METHODS",
    "epoch_window",
    "resolve_config",
]

#: Epoch window (s) that ``epochs_tmin``/``epochs_tmax`` ``"auto"`` means for continuous
#: recordings; epoched recordings keep their own stored window.
CONTINUOUS_WINDOW: tuple[float, float] = (-0.2, 0.8)
#: What an implausible amplitude does: stop the job, or keep going with a warning that
#: the summary lists.
AMPLITUDE_ACTIONS = ("error", "warn")
#: Bad-channel detectors: neuroflow's flat / noisy / uncorrelated criteria, or PREP's
#: ``NoisyChannels`` (the ``eegclean`` extra).
BAD_CHANNEL_METHODS = ("heuristic", "pyprep")
#: Epoch rejection: peak-to-peak limits (``reject``, ``reject_mad_k``), autoreject's local
#: per-channel limits with interpolation, or its global limit per channel type.
REJECT_METHODS = ("threshold", "autoreject", "autoreject_global")

#: Defaults of every key of the ``preprocess_eeg`` section.
DEFAULT_CONFIG: dict[str, Any] = {
    "ch_types": ["eeg"],
    "drop_channels": [],
    "eog_channels": [],
    "eeg_template_montage": None,
    "bads_from_channels_tsv": True,
    "bad_channels_method": "heuristic",
    "pyprep_ransac": True,
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
    "epochs_tmin": "auto",
    "epochs_tmax": "auto",
    "baseline": [None, 0.0],
    "reject_method": "threshold",
    "reject": None,
    "reject_mad_k": 5.0,
    "amplitude_bounds": {"min_sd": 1e-8, "max_sd": 1e-2, "action": "error"},
    "n_jobs": 1,
}

_CHOICES = {
    "event_source": ("auto", "events_tsv", "annotations", "stim_channel"),
    "spatial_filter": (None, "ica"),
    "ica_algorithm": ("fastica", "infomax", "picard"),
    "bad_channels_method": BAD_CHANNEL_METHODS,
    "reject_method": REJECT_METHODS,
}


def _positive(cfg: Mapping[str, Any], key: str, *, allow_none: bool = False) -> None:
    value = cfg[key]
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"`{key}` must be a positive number, got {value!r} instead.")


def _window_bound(value: Any, key: str) -> float | None:
    """A configured epoch edge as a float, ``None`` for ``"auto"``."""
    if value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise ValueError(f"`{key}` must be a number (s) or 'auto', got {value!r} instead.")
    return float(value)


def epoch_window(
    config: Mapping[str, Any], stored: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The epoch window [``epochs_tmin``, ``epochs_tmax``] (s) with ``"auto"`` resolved.

    Every reader of the two keys goes through this function.

    Parameters
    ----------
    config : dict
        The ``preprocess_eeg`` section (or any mapping holding the two keys).
    stored : (float, float) | None
        The window of an epoched recording as stored in its file; ``None`` for a
        continuous recording.

    Returns
    -------
    tmin, tmax : float
        Each ``"auto"`` edge is the stored window's edge for epoched input and
        :data:`CONTINUOUS_WINDOW`'s edge for continuous input.
    """
    default = CONTINUOUS_WINDOW if stored is None else stored
    edges = []
    for i, key in enumerate(("epochs_tmin", "epochs_tmax")):
        value = _window_bound(config.get(key, "auto"), key)
        edges.append(float(default[i]) if value is None else value)
    return edges[0], edges[1]


def _check_amplitude_bounds(bounds: Mapping[str, Any]) -> None:
    """Raise when ``amplitude_bounds`` is not a low < high pair of volts with an action."""
    low, high, action = bounds["min_sd"], bounds["max_sd"], bounds["action"]
    for key, value in (("min_sd", low), ("max_sd", high)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise ValueError(
                f"`amplitude_bounds.{key}` must be a positive number (V) or null, got "
                f"{value!r} instead."
            )
    if low is not None and high is not None and low >= high:
        raise ValueError(
            f"`amplitude_bounds.min_sd` must be below `amplitude_bounds.max_sd`, got {low} "
            f"and {high} instead."
        )
    if action not in AMPLITUDE_ACTIONS:
        raise ValueError(
            f"`amplitude_bounds.action` must be one of {list(AMPLITUDE_ACTIONS)}, got "
            f"{action!r} instead."
        )


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
    tmin = _window_bound(cfg["epochs_tmin"], "epochs_tmin")
    tmax = _window_bound(cfg["epochs_tmax"], "epochs_tmax")
    if tmin is not None and tmax is not None and not tmin < tmax:
        raise ValueError(
            f"`epochs_tmin` must be below `epochs_tmax`, got {cfg['epochs_tmin']} and "
            f"{cfg['epochs_tmax']} instead."
        )
    _check_amplitude_bounds(cfg["amplitude_bounds"])
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
    if cfg["reject_method"] != "threshold" and reject is not None:
        raise ValueError(
            f"`reject` must be null when `reject_method` is {cfg['reject_method']!r} "
            f"(autoreject sets its own limits), got {reject!r} instead."
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

"""A plausibility check of EEG amplitudes: samples in the wrong unit stop the stage.

MNE reads samples in volts, scaled by the unit the data file's header declares. A file
whose header declares V for samples stored in µV gives data 10^6 too large (hundreds of
volts), one declaring µV for samples in V data 10^6 too small; both would run to the end
with meaningless amplitudes. After filtering, the median over the kept EEG channels of
each channel's standard deviation (robust to a few bad channels) must lie within
``amplitude_bounds`` ([10 nV, 1 mV] by default; scalp EEG is around 10 µV).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mne
import numpy as np

from neuroflow.io.records import EegRecording

from .sidecars import read_channels_tsv

__all__ = ["amplitude_problem", "channel_units", "check_amplitude"]

logger = logging.getLogger(__name__)


def amplitude_problem(sd: float, bounds: Mapping[str, Any]) -> str | None:
    """Which bound ``sd`` breaks: ``"above"``, ``"below"``, or ``None`` when within."""
    if not np.isfinite(sd):
        return None
    if bounds.get("max_sd") is not None and sd > bounds["max_sd"]:
        return "above"
    if bounds.get("min_sd") is not None and sd < bounds["min_sd"]:
        return "below"
    return None


def channel_units(channels_tsv: Path | None, names: list[str]) -> str:
    """The ``units`` that ``_channels.tsv`` gives the named channels, for messages."""
    if channels_tsv is None:
        return "the recording has no _channels.tsv"
    table = read_channels_tsv(channels_tsv)
    units = table.loc[table["name"].isin(names), "units"]
    given = sorted({str(u) for u in units if u is not None})
    if not given:
        return f"{channels_tsv} gives these channels no 'units'"
    return f"{channels_tsv} gives their 'units' as {', '.join(repr(u) for u in given)}"


def check_amplitude(
    inst: mne.io.BaseRaw, cfg: Mapping[str, Any], recording: EegRecording
) -> float | None:
    """Check the median channel standard deviation of the kept EEG channels.

    Parameters
    ----------
    inst : mne.io.BaseRaw
        The filtered data (epoched input: its epochs concatenated in time), preloaded.
    cfg : dict
        The ``preprocess_eeg`` section (``amplitude_bounds``).
    recording : EegRecording
        Its files, for the message.

    Returns
    -------
    sd : float | None
        The measured median standard deviation (V); ``None`` without a good EEG channel.

    Raises
    ------
    ValueError
        When ``sd`` lies outside ``amplitude_bounds`` and its ``action`` is ``"error"``
        (with ``"warn"`` a warning is logged instead and the summary lists it).
    """
    types = inst.get_channel_types()
    names = [
        n
        for n, t in zip(inst.ch_names, types, strict=True)
        if t == "eeg" and n not in inst.info["bads"]
    ]
    if not names:
        return None
    sds = [float(inst.get_data(picks=[n]).std(dtype=np.float64)) for n in names]
    sd = float(np.median(sds))
    bounds = cfg["amplitude_bounds"]
    problem = amplitude_problem(sd, bounds)
    if problem is None:
        return sd
    bound = bounds["max_sd"] if problem == "above" else bounds["min_sd"]
    hint = (
        "Samples 10^6 too large are µV values declared as V"
        if problem == "above"
        else "Samples 10^6 too small are V values declared as µV"
    )
    message = (
        f"EEG amplitudes of {recording.eeg} must be plausible: the median over its "
        f"{len(names)} EEG channels of each channel's standard deviation after filtering "
        f"must be {'at most' if problem == 'above' else 'at least'} {bound:g} V "
        f"(`amplitude_bounds.{'max_sd' if problem == 'above' else 'min_sd'}`), got "
        f"{sd:.3g} V instead; {channel_units(recording.channels, names)}. {hint}: correct "
        "the unit in the data file's header (MNE scales the samples by it), or widen "
        "`amplitude_bounds` if the amplitudes are genuine."
    )
    if bounds["action"] == "error":
        raise ValueError(message)
    logger.warning("%s The recording is kept (`amplitude_bounds.action` is 'warn').", message)
    return sd

"""Peak-to-peak rejection of epochs and a readable log of why epochs were dropped."""

from __future__ import annotations

from collections.abc import Mapping

import mne
import numpy as np

from .bads import MAD_TO_STD

__all__ = ["describe_drop", "drop_log_records", "ptp_thresholds", "reject_by_ptp"]

_MNE_REASONS = {
    "TOO_SHORT": "epoch window extends past the edge of the recording",
    "NO_DATA": "epoch window extends past the edge of the recording",
    "IGNORED": "event not among the selected conditions",
    "DROP DUPLICATE": "another event at the same sample",
}


def ptp_thresholds(ptp: np.ndarray, k: float) -> np.ndarray:
    """Per-channel peak-to-peak limits ``median + k * 1.4826 * MAD`` over epochs.

    Parameters
    ----------
    ptp : ndarray, shape (n_epochs, n_channels)
        Peak-to-peak amplitude of each channel in each epoch.
    k : float
        Number of robust standard deviations above the median.

    Returns
    -------
    thresholds : ndarray, shape (n_channels,)
    """
    median = np.median(ptp, axis=0)
    mad = MAD_TO_STD * np.median(np.abs(ptp - median), axis=0)
    return median + k * mad


def reject_by_ptp(
    epochs: mne.BaseEpochs, reject: Mapping[str, float] | str | None, k: float
) -> dict[int, str]:
    """Drop epochs whose peak-to-peak amplitude exceeds a threshold, in place.

    Parameters
    ----------
    epochs : mne.BaseEpochs
        Preloaded epochs.
    reject : dict of str to float | "auto" | None
        Fixed limits per channel type (V), as MNE's ``reject`` (``None`` values are
        ignored); ``"auto"`` for
        per-channel limits from :func:`ptp_thresholds`; ``None`` to keep every epoch.
    k : float
        ``k`` of :func:`ptp_thresholds`.

    Returns
    -------
    reasons : dict of int to str
        Custom reason for each dropped epoch, keyed by its index in the original events
        (``"auto"`` only; MNE records fixed-threshold drops in ``epochs.drop_log``).
    """
    if isinstance(reject, Mapping):
        reject = {t: v for t, v in reject.items() if v is not None} or None
    if reject is None or len(epochs) == 0:
        return {}
    if isinstance(reject, Mapping):
        present = set(epochs.get_channel_types())
        unknown = sorted(set(reject) - present)
        if unknown:
            raise ValueError(
                f"`reject` keys must be channel types of the data {sorted(present)}, got "
                f"{unknown} instead."
            )
        epochs.drop_bad(reject=dict(reject), verbose="error")
        return {}
    data = epochs.get_data(copy=False)
    ptp = data.max(axis=-1) - data.min(axis=-1)
    above = ptp > ptp_thresholds(ptp, k)[None]
    dropped = np.flatnonzero(above.any(axis=1))
    names = np.array(epochs.ch_names)
    reasons = {
        int(epochs.selection[idx]): (
            f"peak-to-peak above per-channel median + {k:g} MAD on {', '.join(names[above[idx]])}"
        )
        for idx in dropped
    }
    epochs.drop(dropped, reason="PTP_AUTO", verbose="error")
    return reasons


def describe_drop(entry: tuple[str, ...], reject: Mapping[str, float] | str | None) -> str:
    """Turn one ``epochs.drop_log`` entry into a sentence.

    Parameters
    ----------
    entry : tuple of str
        Reasons MNE recorded for one event.
    reject : dict | str | None
        The rejection setting, to phrase channel-name entries.

    Returns
    -------
    reason : str
    """
    parts = []
    channels = []
    for item in entry:
        if item in _MNE_REASONS:
            parts.append(_MNE_REASONS[item])
        elif item.upper().startswith("BAD"):
            parts.append(f"overlaps annotation {item!r}")
        else:
            channels.append(item)
    if channels:
        limits = ", ".join(f"{t} {v:g} V" for t, v in dict(reject or {}).items() if v is not None)
        parts.append(f"peak-to-peak above `reject` ({limits}) on {', '.join(channels)}")
    return "; ".join(dict.fromkeys(parts)) or "dropped"


def drop_log_records(
    drop_log: tuple[tuple[str, ...], ...],
    onsets: np.ndarray,
    custom: Mapping[int, str],
    reject: Mapping[str, float] | str | None,
    conditions: np.ndarray | None = None,
) -> list[dict]:
    """One record per dropped event: its index, onset, condition and reason.

    Parameters
    ----------
    drop_log : tuple of tuple of str
        ``epochs.drop_log``, one entry per event given to :class:`mne.Epochs`.
    onsets : ndarray, shape (n_events,)
        Event onsets (s).
    custom : dict of int to str
        Reasons from :func:`reject_by_ptp`, which override ``drop_log`` entries.
    reject : dict | str | None
        The rejection setting.
    conditions : ndarray of str, shape (n_events,) | None
        Event conditions, recorded with each dropped event when given.

    Returns
    -------
    log : list of dict
        ``{"epoch": int, "onset": float, "reason": str}`` records in event order, with
        ``"condition"`` when ``conditions`` is given.
    """
    records = []
    for idx, entry in enumerate(drop_log):
        if not entry:
            continue
        reason = custom.get(idx) or describe_drop(entry, reject)
        record = {"epoch": idx, "onset": round(float(onsets[idx]), 6), "reason": reason}
        if conditions is not None:
            record["condition"] = str(conditions[idx])
        records.append(record)
    return records

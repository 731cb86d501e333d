"""Rejection of epochs and a readable log of why epochs were dropped.

Peak-to-peak limits (fixed or per channel from the median and MAD), or autoreject
(Jas et al., 2017; the ``eegclean`` extra): local per-channel limits with interpolation,
or one global limit per channel type.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mne
import numpy as np

from neuroflow.extras import require

from .bads import MAD_TO_STD

__all__ = [
    "AUTOREJECT_CV",
    "describe_drop",
    "drop_log_records",
    "ptp_thresholds",
    "reject_autoreject",
    "reject_autoreject_global",
    "reject_by_ptp",
    "reject_epochs",
    "rejection_method",
]

#: Folds of autoreject's cross-validation (its defaults): local, global.
AUTOREJECT_CV = {"autoreject": 10, "autoreject_global": 5}

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


def _autoreject_module(method: str) -> Any:
    return require("autoreject", f"Epoch rejection with `reject_method: {method}`")


def _check_enough_epochs(epochs: mne.BaseEpochs, method: str, path: Path | str) -> None:
    """Raise when there are fewer epochs than folds of autoreject's cross-validation."""
    folds = AUTOREJECT_CV[method]
    if len(epochs) < folds:
        raise ValueError(
            f"`reject_method` {method!r} cross-validates over {folds} folds and needs at "
            f"least {folds} epochs, got {len(epochs)} in {path} instead. Use `reject_method` "
            "'threshold' for short recordings."
        )


def reject_autoreject_global(
    epochs: mne.BaseEpochs, *, random_state: int | None, path: Path | str = "the recording"
) -> tuple[dict[int, str], dict[str, float]]:
    """Drop epochs above autoreject's global peak-to-peak limit per channel type, in place.

    Parameters
    ----------
    epochs : mne.BaseEpochs
        Preloaded epochs, shape (n_epochs, n_channels, n_times).
    random_state : int | None
        Seed of the cross-validation.
    path : path-like | str
        Data file, for messages.

    Returns
    -------
    reasons : dict of int to str
        Reason for each dropped epoch, keyed by its index in the original events.
    limits : dict of str to float
        :func:`autoreject.get_rejection_threshold`'s limit (V) per channel type.
    """
    autoreject = _autoreject_module("autoreject_global")
    _check_enough_epochs(epochs, "autoreject_global", path)
    types = [t for t in ("eeg", "eog") if t in epochs.get_channel_types()]
    with mne.utils.use_log_level("error"):
        limits = autoreject.get_rejection_threshold(
            epochs,
            ch_types=types,
            random_state=random_state,
            cv=AUTOREJECT_CV["autoreject_global"],
            verbose=False,
        )
    limits = {t: float(v) for t, v in limits.items()}
    data = epochs.get_data(copy=False)
    ptp = data.max(axis=-1) - data.min(axis=-1)
    ch_types = np.array(epochs.get_channel_types())
    above = np.zeros(ptp.shape, bool)
    for ch_type, limit in limits.items():
        above[:, ch_types == ch_type] = ptp[:, ch_types == ch_type] > limit
    names = np.array(epochs.ch_names)
    text = ", ".join(f"{t} {v:.3g} V" for t, v in limits.items())
    dropped = np.flatnonzero(above.any(axis=1))
    reasons = {
        int(epochs.selection[i]): (
            f"peak-to-peak above autoreject's global limit ({text}) on {', '.join(names[above[i]])}"
        )
        for i in dropped
    }
    epochs.drop(dropped, reason="AUTOREJECT_GLOBAL", verbose="error")
    return reasons, limits


def reject_autoreject(
    epochs: mne.BaseEpochs, *, random_state: int | None, path: Path | str = "the recording"
) -> tuple[dict[int, str], Any]:
    """Repair and drop epochs with autoreject's local per-channel limits, in place.

    Within each epoch, channels above their limit are interpolated from the others when
    few; epochs with too many bad channels are dropped (``AutoReject`` with its default
    parameter grid and 10-fold cross-validation).

    Parameters
    ----------
    epochs : mne.BaseEpochs
        Preloaded epochs, shape (n_epochs, n_channels, n_times); every EEG channel needs
        a position.
    random_state : int | None
        Seed of the cross-validation.
    path : path-like | str
        Data file, for messages.

    Returns
    -------
    reasons : dict of int to str
        Reason for each dropped epoch, keyed by its index in the original events.
    reject_log : autoreject.RejectLog
        Per epoch and channel: 0 good, 1 bad, 2 interpolated; ``bad_epochs`` marks drops.
    """
    autoreject = _autoreject_module("autoreject")
    _check_enough_epochs(epochs, "autoreject", path)
    eeg = [
        n for n, t in zip(epochs.ch_names, epochs.get_channel_types(), strict=True) if t == "eeg"
    ]
    loc = np.array([epochs.info["chs"][epochs.ch_names.index(n)]["loc"][:3] for n in eeg])
    unknown = [
        n
        for n, p in zip(eeg, loc, strict=True)
        if not (np.isfinite(p).all() and np.abs(p).sum() > 0)
    ]
    if unknown:
        raise ValueError(
            f"`reject_method` 'autoreject' interpolates channels and needs the position of "
            f"every EEG channel, got none for {unknown[:5]}{'...' if len(unknown) > 5 else ''} "
            f"of {path} instead. Add an _electrodes.tsv, set `eeg_template_montage`, or use "
            "`reject_method` 'autoreject_global'."
        )
    ar = autoreject.AutoReject(
        picks=eeg, cv=AUTOREJECT_CV["autoreject"], random_state=random_state, verbose=False
    )
    with mne.utils.use_log_level("error"):
        ar.fit(epochs)
        cleaned, log = ar.transform(epochs, return_log=True)
    dropped = np.flatnonzero(log.bad_epochs)
    n_bad = (log.labels[dropped] == 1).sum(axis=1)
    reasons = {
        int(epochs.selection[i]): (
            f"autoreject: {int(n)} channel(s) above their local peak-to-peak limits, too "
            "many to interpolate"
        )
        for i, n in zip(dropped, n_bad, strict=True)
    }
    epochs.drop(dropped, reason="AUTOREJECT", verbose="error")
    epochs.get_data(copy=False)[:] = cleaned.get_data(copy=False)
    return reasons, log


def rejection_method(config: Mapping[str, Any]) -> str:
    """The rejection that runs: ``reject_method``, ``"none"`` for a threshold of null."""
    method = config.get("reject_method", "threshold")
    return "none" if method == "threshold" and config.get("reject") is None else method


def reject_epochs(
    epochs: mne.BaseEpochs, config: Mapping[str, Any], path: Path | str = "the recording"
) -> dict[int, str]:
    """Drop (and, for ``autoreject``, repair) epochs in place as ``reject_method`` says.

    Parameters
    ----------
    epochs : mne.BaseEpochs
        Preloaded epochs.
    config : dict
        The ``preprocess_eeg`` section (keys ``reject_method``, ``reject``,
        ``reject_mad_k``, ``random_state``).
    path : path-like | str
        Data file, for messages.

    Returns
    -------
    reasons : dict of int to str
        Custom reasons keyed by the index of the event in the original events (see
        :func:`reject_by_ptp`).
    """
    method = config.get("reject_method", "threshold")
    if method == "threshold" or len(epochs) == 0:
        return reject_by_ptp(epochs, config["reject"], config["reject_mad_k"])
    if method == "autoreject_global":
        return reject_autoreject_global(epochs, random_state=config["random_state"], path=path)[0]
    if method == "autoreject":
        return reject_autoreject(epochs, random_state=config["random_state"], path=path)[0]
    raise ValueError(
        f"`reject_method` must be one of ['threshold', 'autoreject', 'autoreject_global'], "
        f"got {method!r} instead."
    )


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

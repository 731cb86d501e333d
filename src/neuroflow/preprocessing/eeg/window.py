"""The epoch window of each recording, checked before any job runs.

``epochs_tmin``/``epochs_tmax`` are ``"auto"`` by default (see
:func:`neuroflow.preprocessing.eeg.config.epoch_window`): [-0.2, 0.8] s around each event
of a continuous recording, the stored window of an epoched one. An explicit window must
lie within every epoched file's stored window; :func:`check_epoch_windows` reads each
epoched file's header (no data) so that a window that does not fit fails when the
workflow is planned, naming the file, its window and the configured one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from neuroflow.io.records import EegRecording

from .config import epoch_window

__all__ = ["check_epoch_windows", "check_window_within"]


def _configured(config: Mapping[str, Any]) -> str:
    """``[a, b]`` of the two keys as configured (``auto`` kept)."""
    return f"[{config.get('epochs_tmin', 'auto')}, {config.get('epochs_tmax', 'auto')}]"


def check_window_within(
    window: tuple[float, float],
    stored: tuple[float, float],
    sfreq: float,
    path: str | Path,
) -> None:
    """Raise when ``window`` reaches outside an epoched file's stored window.

    Parameters
    ----------
    window : (float, float)
        The resolved [``epochs_tmin``, ``epochs_tmax``] (s).
    stored : (float, float)
        First and last sample time (s) of the file's epochs.
    sfreq : float
        The file's sampling rate (Hz): edges within half a sample are inside.
    path : path-like
        The file, for the message.
    """
    tmin, tmax = window
    tol = 0.5 / sfreq
    if not tmin < tmax or tmin < stored[0] - tol or tmax > stored[1] + tol:
        raise ValueError(
            f"[`epochs_tmin`, `epochs_tmax`] must lie within the epochs of {path}, got "
            f"[{tmin:g}, {tmax:g}] s for epochs spanning [{stored[0]:g}, {stored[1]:g}] s "
            "instead. Set `epochs_tmin` and `epochs_tmax` inside the stored epochs, or to "
            "'auto' to keep the stored window."
        )


def check_epoch_windows(
    recordings: Iterable[EegRecording], config: Mapping[str, Any]
) -> dict[str, tuple[float, float]]:
    """Resolve and check the epoch window of every recording, reading headers only.

    Parameters
    ----------
    recordings : iterable of EegRecording
        The recordings the workflow will preprocess.
    config : dict
        The ``preprocess_eeg`` section.

    Returns
    -------
    windows : dict of str to (float, float)
        The resolved window (s) of each recording, by its key.

    Raises
    ------
    ValueError
        When the resolved window of a continuous recording is empty, or an epoched
        file's stored window does not hold the resolved window; the message names the
        file, its window and the configured one.
    """
    windows: dict[str, tuple[float, float]] = {}
    for rec in recordings:
        if not rec.epoched:
            tmin, tmax = epoch_window(config)
            if not tmin < tmax:
                raise ValueError(
                    f"`epochs_tmin` must be below `epochs_tmax` for the continuous "
                    f"recording {rec.eeg}, got {_configured(config)} (resolved to "
                    f"[{tmin:g}, {tmax:g}] s) instead."
                )
            windows[rec.key] = (tmin, tmax)
            continue
        from .read import read_epochs_window  # MNE's readers: only for epoched files

        start, stop, sfreq = read_epochs_window(rec.eeg)
        window = epoch_window(config, (start, stop))
        try:
            check_window_within(window, (start, stop), sfreq, rec.eeg)
        except ValueError as err:
            raise ValueError(f"{err} (configured: {_configured(config)}.)") from None
        windows[rec.key] = window
    return windows

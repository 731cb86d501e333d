"""Automatic detection of bad EEG channels.

Three criteria in the spirit of the PREP pipeline (Bigdely-Shamlo et al., 2015):
flat channels, channels whose amplitude is an outlier (robust z-score of the
standard deviation), and channels poorly correlated with their neighbours; or PREP's
own ``NoisyChannels`` from pyprep (the ``eegclean`` extra).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import mne
import numpy as np
from threadpoolctl import threadpool_limits

from neuroflow.extras import require

__all__ = [
    "find_bad_channels",
    "find_bad_channels_pyprep",
    "find_flat",
    "find_noisy",
    "find_uncorrelated",
    "neighbours",
    "sample_windows",
    "window_std",
]

#: Scale that turns a median absolute deviation into a standard deviation (normal data).
MAD_TO_STD = 1.4826
#: pyprep's criteria (``NoisyChannels.get_bads(as_dict=True)`` keys without ``bad_by_``).
PYPREP_CRITERIA = (
    "nan",
    "flat",
    "deviation",
    "hf_noise",
    "correlation",
    "SNR",
    "dropout",
    "psd",
    "ransac",
)

logger = logging.getLogger(__name__)


def window_std(windows: np.ndarray) -> np.ndarray:
    """Within-window standard deviation of each channel, pooled over windows.

    Each window is centred on its own mean first, so slow drifts between windows do
    not count as amplitude.

    Parameters
    ----------
    windows : ndarray, shape (n_windows, n_channels, n_samples)
        Stretches of the recording (see :func:`sample_windows`).

    Returns
    -------
    std : ndarray, shape (n_channels,)
        In the data's units (V).
    """
    if windows.size == 0:
        return np.zeros(windows.shape[1])
    centred = windows - windows.mean(axis=-1, keepdims=True)
    sq = np.einsum("wct,wct->c", centred, centred, dtype=np.float64)
    return np.sqrt(sq / (windows.shape[0] * windows.shape[2]))


def find_flat(std: np.ndarray, threshold: float) -> np.ndarray:
    """Channels whose standard deviation is below ``threshold``.

    Parameters
    ----------
    std : ndarray, shape (n_channels,)
        Channel standard deviations.
    threshold : float
        Limit in the same unit.

    Returns
    -------
    flat : ndarray of bool, shape (n_channels,)
    """
    return std < threshold


def find_noisy(std: np.ndarray, z_threshold: float, exclude: np.ndarray) -> np.ndarray:
    """Channels whose standard deviation is an outlier by robust z-score.

    Parameters
    ----------
    std : ndarray, shape (n_channels,)
        Channel standard deviations.
    z_threshold : float
        Channels with ``(std - median) / (1.4826 * MAD) > z_threshold`` are noisy.
    exclude : ndarray of bool, shape (n_channels,)
        Channels already bad, left out of the median and MAD.

    Returns
    -------
    noisy : ndarray of bool, shape (n_channels,)
    """
    ref = std[~exclude]
    if ref.size < 3:
        return np.zeros(std.shape, bool)
    median = np.median(ref)
    mad = MAD_TO_STD * np.median(np.abs(ref - median))
    if mad == 0:
        return (std > median) & ~exclude
    return ((std - median) / mad > z_threshold) & ~exclude


def neighbours(positions: np.ndarray | None, n_channels: int, k: int = 6) -> list[np.ndarray]:
    """The ``k`` nearest channels of each channel, or all others without positions.

    Parameters
    ----------
    positions : ndarray, shape (n_channels, 3) | None
        Sensor positions; ``None`` or any non-finite row means unknown.
    n_channels : int
        Number of channels.
    k : int
        Number of neighbours.

    Returns
    -------
    neighbours : list of ndarray of int
        One index array per channel, never containing the channel itself.
    """
    everyone = np.arange(n_channels)
    if positions is None or not np.isfinite(positions).all() or n_channels <= k + 1:
        return [np.delete(everyone, i) for i in range(n_channels)]
    dist = np.linalg.norm(positions[:, None] - positions[None], axis=-1)
    np.fill_diagonal(dist, np.inf)
    return list(np.argsort(dist, axis=1)[:, :k])


def find_uncorrelated(
    windows: np.ndarray, neighbour_idx: list[np.ndarray], threshold: float, exclude: np.ndarray
) -> np.ndarray:
    """Channels poorly correlated with their neighbours.

    For each window, a channel's score is its largest absolute correlation with a
    good neighbour; a channel whose median score over windows is below ``threshold``
    is flagged.

    Parameters
    ----------
    windows : ndarray, shape (n_windows, n_channels, n_samples)
        Short stretches of the recording.
    neighbour_idx : list of ndarray of int
        Neighbours of each channel (see :func:`neighbours`).
    threshold : float
        Correlation below which a channel is bad.
    exclude : ndarray of bool, shape (n_channels,)
        Channels already bad: never flagged, never used as neighbours.

    Returns
    -------
    uncorrelated : ndarray of bool, shape (n_channels,)
    """
    n_channels = windows.shape[1]
    if (~exclude).sum() < 3 or windows.shape[0] == 0:
        return np.zeros(n_channels, bool)
    unit = windows - windows.mean(axis=-1, keepdims=True)
    norm = np.sqrt(np.einsum("wct,wct->wc", unit, unit))[..., None]
    norm[norm == 0] = np.inf
    unit /= norm
    # Many small products: one BLAS thread is steady, several stall on a busy machine.
    with threadpool_limits(limits=1, user_api="blas"):
        corr = np.abs(np.einsum("wct,wdt->wcd", unit, unit, optimize=True))  # (n_win, n_ch, n_ch)
    score = np.zeros(n_channels)
    for ch in np.flatnonzero(~exclude):
        nb = neighbour_idx[ch][~exclude[neighbour_idx[ch]]]
        if nb.size:
            score[ch] = np.median(corr[:, ch, nb].max(axis=1))
        else:
            score[ch] = np.inf
    return (score < threshold) & ~exclude


def sample_windows(
    raw: mne.io.BaseRaw, picks: np.ndarray, duration: float, max_windows: int
) -> np.ndarray:
    """Evenly spaced windows of the picked channels.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        Preloaded recording.
    picks : ndarray of int, shape (n_channels,)
        Channels to take.
    duration : float
        Window length (s).
    max_windows : int
        Most windows; recordings shorter than ``max_windows * duration`` are covered
        whole, and one shorter than ``duration`` makes a single window.

    Returns
    -------
    windows : ndarray of float32, shape (n_windows, n_channels, n_samples)
    """
    length = min(max(round(duration * raw.info["sfreq"]), 2), raw.n_times)
    n_windows = min(max_windows, raw.n_times // length)
    out = np.empty((n_windows, len(picks), length), dtype=np.float32)
    starts = np.linspace(0, raw.n_times - length, n_windows).astype(int) if n_windows else []
    for i, start in enumerate(starts):
        out[i] = raw.get_data(picks=picks, start=start, stop=start + length)
    return out


def find_bad_channels(
    raw: mne.io.BaseRaw,
    picks: np.ndarray,
    *,
    flat_threshold: float | None,
    noisy_z_threshold: float | None,
    correlation_threshold: float | None,
    window: float = 1.0,
    max_windows: int = 200,
) -> dict[str, list[str]]:
    """Run the enabled detectors on the picked channels.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        Preloaded (and usually band-passed) recording; its ``info["bads"]`` are
        treated as already bad.
    picks : ndarray of int, shape (n_channels,)
        EEG channels to examine.
    flat_threshold, noisy_z_threshold, correlation_threshold : float | None
        Thresholds of each detector; ``None`` disables it.
    window : float
        Window length (s).
    max_windows : int
        Most windows examined: every criterion works on at most ``max_windows``
        evenly spaced windows, which bounds time and memory on long recordings.

    Returns
    -------
    bads : dict of str to list of str
        Channel names newly found by each of ``"flat"``, ``"noisy"``, ``"uncorrelated"``.
    """
    names = np.array([raw.ch_names[p] for p in picks])
    bad = np.isin(names, raw.info["bads"])
    found: dict[str, list[str]] = {"flat": [], "noisy": [], "uncorrelated": []}
    enabled = (flat_threshold, noisy_z_threshold, correlation_threshold)
    if len(picks) == 0 or all(t is None for t in enabled):
        return found
    windows = sample_windows(raw, picks, window, max_windows)
    std = window_std(windows)
    if flat_threshold is not None:
        flat = find_flat(std, flat_threshold) & ~bad
        found["flat"] = names[flat].tolist()
        bad |= flat
    if noisy_z_threshold is not None:
        noisy = find_noisy(std, noisy_z_threshold, bad)
        found["noisy"] = names[noisy].tolist()
        bad |= noisy
    if correlation_threshold is not None:
        pos = np.array([raw.info["chs"][p]["loc"][:3] for p in picks])
        known = np.isfinite(pos).all(axis=1) & (np.abs(pos).sum(axis=1) > 0)
        nb = neighbours(pos if known.all() else None, len(picks))
        uncorrelated = find_uncorrelated(windows, nb, correlation_threshold, bad)
        found["uncorrelated"] = names[uncorrelated].tolist()
    return found


def _all_positions(raw: mne.io.BaseRaw, picks: np.ndarray) -> bool:
    """Whether every picked channel has a finite, non-zero position."""
    pos = np.array([raw.info["chs"][p]["loc"][:3] for p in picks], dtype=float).reshape(-1, 3)
    return bool(len(pos)) and bool(np.isfinite(pos).all() and (np.abs(pos).sum(1) > 0).all())


def find_bad_channels_pyprep(
    raw: mne.io.BaseRaw,
    picks: np.ndarray,
    *,
    ransac: bool,
    random_state: int | None,
    path: str | Path = "the recording",
) -> dict[str, list[str]]:
    """Run PREP's ``NoisyChannels`` (pyprep) on the picked channels.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        Preloaded (and usually band-passed) recording; its ``info["bads"]`` are treated
        as already bad (not reported again).
    picks : ndarray of int, shape (n_channels,)
        EEG channels to examine.
    ransac : bool
        Also run the RANSAC criterion; it predicts each channel from the others' positions,
        so it runs only when every picked channel has one (a log line says when not).
    random_state : int | None
        Seed of RANSAC.
    path : path-like | str
        Data file, for messages.

    Returns
    -------
    bads : dict of str to list of str
        Channel names newly found by each criterion, keyed ``"pyprep_<criterion>"``
        (``"pyprep_deviation"``, ``"pyprep_correlation"``, ...; see
        :data:`PYPREP_CRITERIA`).

    Raises
    ------
    neuroflow.extras.MissingExtraError
        When pyprep is not installed.
    ValueError
        When pyprep fails on the recording (e.g. too few channels or samples).
    """
    pyprep = require("pyprep", "Bad-channel detection with `bad_channels_method: pyprep`")
    found: dict[str, list[str]] = {f"pyprep_{c}": [] for c in PYPREP_CRITERIA}
    if len(picks) == 0:
        return found
    eeg = raw.copy().pick(np.asarray(picks), verbose="error")
    known = set(eeg.info["bads"])
    use_ransac = ransac and _all_positions(raw, np.asarray(picks))
    if ransac and not use_ransac:
        logger.info("pyprep: RANSAC skipped, not every EEG channel has a position.")
    try:
        with mne.utils.use_log_level("error"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            noisy = pyprep.NoisyChannels(eeg, do_detrend=True, random_state=random_state)
            noisy.find_all_bads(ransac=use_ransac)
    except (IndexError, ValueError, np.linalg.LinAlgError) as err:
        raise ValueError(
            f"`bad_channels_method` 'pyprep' could not examine the {len(picks)} EEG channels "
            f"({eeg.n_times} samples) of {path} ({type(err).__name__}: {err}). Use "
            "`bad_channels_method` 'heuristic' for recordings this small."
        ) from err
    for key, names in noisy.get_bads(as_dict=True).items():
        criterion = key.removeprefix("bad_by_")
        if criterion in PYPREP_CRITERIA:
            found[f"pyprep_{criterion}"] = [str(n) for n in names if n not in known]
    return found

"""Simulated EEG responses to briefly flashed images.

The potential at channel ``c`` (referenced to FCz, which is not recorded) is::

    eeg[c, t] = sum_i generic(t - onset_i) * topo_generic[c]
              + sum_i sum_k a_visual[i, k] * g(t - onset_i; latency_visual) * topo_visual[k, c]
              + sum_i sum_k a_semantic[i, k] * g(t - onset_i; latency_semantic)
                  * topo_semantic[k, c]
              + background[c, t] + line[c, t]

- ``a_visual = X_visual @ weights_visual`` and ``a_semantic = X_semantic @
  weights_semantic`` (standardised features of the image on trial ``i``), each column
  scaled to unit standard deviation over trials and then to ``snr * noise_uv``;
- ``g`` is a Gaussian bump peaking at the configured latency (width ``WIDTHS``);
- topographies are Gaussian blobs (radius ``TOPO_RADIUS`` on the scalp) centred on
  posterior (visual: Oz, PO7, PO8...) or centro-parietal (semantic: CPz, CP1, CP2...)
  sites, normalised to a peak absolute value of 1 after re-referencing;
- ``generic`` is a stimulus-independent P1/N1 complex over occipital sites;
- ``background`` is 1/f noise, spatially smoothed, with RMS ``noise_uv`` per channel
  before re-referencing; ``line`` is a ``line_freq`` sinusoid (and a weaker harmonic)
  with per-channel amplitudes around ``line_noise_uv``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .stimuli import rng_for

__all__ = ["CHANNELS", "EegSubject", "channel_positions", "simulate_subject"]

#: 64 channels of the 10-20 system; the first ``n_channels`` are recorded (FCz is the
#: reference and AFz the ground, so neither is recorded).
CHANNELS: tuple[str, ...] = (
    "Fp1", "Fp2", "F7", "F3", "Fz", "F4", "F8", "FC5", "FC1", "FC2", "FC6", "T7", "C3",
    "Cz", "C4", "T8", "TP9", "CP5", "CP1", "CP2", "CP6", "TP10", "P7", "P3", "Pz", "P4",
    "P8", "PO9", "O1", "Oz", "O2", "PO10", "AF7", "AF3", "AF4", "AF8", "F5", "F1", "F2",
    "F6", "FT9", "FT7", "FC3", "FC4", "FT8", "FT10", "C5", "C1", "C2", "C6", "TP7", "CP3",
    "CPz", "CP4", "TP8", "P5", "P1", "P2", "P6", "PO7", "PO3", "POz", "PO4", "PO8",
)  # fmt: skip
REFERENCE = "FCz"
GROUND = "AFz"
#: Centres of the component topographies, cycled through for ``n_components``.
CENTRES = {
    "visual": ("Oz", "PO7", "PO8", "O1", "O2", "POz", "PO3", "PO4"),
    "semantic": ("CPz", "CP1", "CP2", "Pz", "Cz", "CP3", "CP4", "P1"),
}
#: Standard deviation (s) of each kind's Gaussian waveform.
WIDTHS = {"visual": 0.02, "semantic": 0.06}
#: Scalp radius (m) of the topographies.
TOPO_RADIUS = 0.045
#: Seconds of signal before the first and after the last onset.
PADDING = 2.0


def _montage():
    """The standard 10-20 montage of the installed MNE."""
    import mne

    name = "colin27_1020" if "colin27_1020" in mne.channels.get_builtin_montages() else None
    return mne.channels.make_standard_montage(name or "standard_1020")


def channel_positions(ch_names: Sequence[str]) -> np.ndarray:
    """Head-frame positions (m) of channels, shape (n_channels, 3).

    Positions are those MNE assigns when the standard 10-20 montage is set on a
    recording, so they match what readers of the data get.
    """
    import mne

    info = mne.create_info(list(ch_names), 1000.0, "eeg")
    info.set_montage(_montage())
    return np.array([ch["loc"][:3] for ch in info["chs"]])


def _topography(pos: np.ndarray, centre: np.ndarray, ref: int) -> np.ndarray:
    """Gaussian blob re-referenced to channel ``ref`` and scaled to peak 1."""
    d2 = ((pos - centre) ** 2).sum(axis=1)
    topo = np.exp(-d2 / (2 * TOPO_RADIUS**2))
    topo = topo - topo[ref]
    return np.delete(topo / np.abs(topo).max(), ref)


def _pink_noise(rng: np.random.Generator, n_channels: int, n_times: int) -> np.ndarray:
    """1/f noise with unit RMS per row, shape (n_channels, n_times)."""
    spec = np.fft.rfft(rng.standard_normal((n_channels, n_times)), axis=1)
    freqs = np.fft.rfftfreq(n_times)
    shaping = np.zeros_like(freqs)
    shaping[1:] = 1.0 / np.sqrt(freqs[1:])
    noise = np.fft.irfft(spec * shaping, n=n_times, axis=1)
    return noise / noise.std(axis=1, keepdims=True)


@dataclass
class EegSubject:
    """Simulated recording and ground truth of one subject.

    Attributes
    ----------
    data : ndarray, shape (n_channels, n_times)
        Potentials in volts.
    onsets : ndarray of int, shape (n_trials,)
        Onset samples (0-based).
    truth : dict of str to ndarray
        ``topographies_visual`` / ``topographies_semantic`` (n_components, n_channels),
        ``weights_visual`` (n_visual, n_components) and ``weights_semantic``
        (n_semantic, n_components) mapping standardised features to unit-variance
        amplitudes, ``amplitudes_visual`` / ``amplitudes_semantic`` (n_trials,
        n_components) in µV at the topography peak, ``latencies`` (2,) for visual then
        semantic (s), ``widths`` (2,) (s).
    """

    data: np.ndarray
    onsets: np.ndarray
    truth: dict[str, np.ndarray]


def simulate_subject(
    *,
    config: Mapping[str, Any],
    subject: str,
    features_visual: np.ndarray,
    features_semantic: np.ndarray,
) -> EegSubject:
    """Simulate one subject's recording.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section.
    subject : str
        Subject label (seeds the subject's streams).
    features_visual : ndarray, shape (n_trials, n_visual)
        Standardised visual features of the image on each trial.
    features_semantic : ndarray, shape (n_trials, n_semantic)
        Standardised semantic features of the image on each trial.

    Returns
    -------
    sim : EegSubject
    """
    e = config["eeg"]
    seed = config["seed"]
    sfreq = float(e["sfreq"])
    ch_names = list(CHANNELS[: e["n_channels"]])
    all_names = list(
        dict.fromkeys([*ch_names, REFERENCE, *CENTRES["visual"], *CENTRES["semantic"]])
    )
    pos_all = channel_positions(all_names)
    where = {name: i for i, name in enumerate(all_names)}
    pos = pos_all[[where[c] for c in [*ch_names, REFERENCE]]]
    ref = len(ch_names)

    rng_t = rng_for(seed, "eeg", subject, "timing")
    n_trials = features_visual.shape[0]
    soas = rng_t.uniform(e["soa"][0], e["soa"][1], size=n_trials)
    onset_s = PADDING + np.concatenate([[0.0], np.cumsum(soas[:-1])])
    onsets = np.round(onset_s * sfreq).astype(int)
    n_times = int(onsets[-1] + round((e["soa"][1] + PADDING) * sfreq))

    rng_w = rng_for(seed, "eeg", subject, "weights")
    k = e["n_components"]
    truth: dict[str, np.ndarray] = {}
    lat = np.array([e["latencies"]["visual"], e["latencies"]["semantic"]])
    evoked_len = round((lat.max() + 4 * max(WIDTHS.values())) * sfreq) + 1
    t_ev = np.arange(evoked_len) / sfreq
    data = np.zeros((len(ch_names), n_times))
    amp_uv = e["snr"] * e["noise_uv"]
    for kind, feats in (("visual", features_visual), ("semantic", features_semantic)):
        topo = np.stack(
            [_topography(pos, pos_all[where[CENTRES[kind][j % 8]]], ref) for j in range(k)]
        )
        weights = rng_w.standard_normal((feats.shape[1], k))
        amps = feats @ weights
        sd = amps.std(axis=0)
        weights /= np.where(sd > 0, sd, 1.0)
        amps = (feats @ weights) * amp_uv
        wave = np.exp(-((t_ev - e["latencies"][kind]) ** 2) / (2 * WIDTHS[kind] ** 2))
        _add_evoked(data, onsets, amps @ topo, wave)
        truth[f"topographies_{kind}"] = topo.astype(np.float32)
        truth[f"weights_{kind}"] = weights.astype(np.float32)
        truth[f"amplitudes_{kind}"] = amps.astype(np.float32)
    generic_topo = _topography(pos, pos_all[where["Oz"]], ref)
    generic = 3.0 * np.exp(-((t_ev - 0.1) ** 2) / (2 * 0.015**2)) - 4.0 * np.exp(
        -((t_ev - 0.17) ** 2) / (2 * 0.02**2)
    )
    _add_evoked(data, onsets, np.tile(generic_topo, (n_trials, 1)), generic)
    truth["latencies"] = lat
    truth["widths"] = np.array([WIDTHS["visual"], WIDTHS["semantic"]])
    truth["topography_generic"] = generic_topo.astype(np.float32)

    rng_n = rng_for(seed, "eeg", subject, "noise")
    d2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=-1)
    mixing = np.exp(-d2 / (2 * 0.04**2))
    mixing /= np.sqrt((mixing**2).sum(axis=1, keepdims=True))
    background = mixing @ _pink_noise(rng_n, len(pos), n_times) * e["noise_uv"]
    background = background[:ref] - background[ref]
    t = np.arange(n_times) / sfreq
    phase = rng_n.uniform(0, 2 * np.pi, size=(len(ch_names), 1))
    gain = rng_n.uniform(0.5, 1.5, size=(len(ch_names), 1)) * e["line_noise_uv"]
    line = gain * np.sin(2 * np.pi * e["line_freq"] * t + phase)
    if 2 * e["line_freq"] < sfreq / 2:
        line += 0.3 * gain * np.sin(4 * np.pi * e["line_freq"] * t + 2 * phase)
    data += background + line
    return EegSubject(data=data * 1e-6, onsets=onsets, truth=truth)


def _add_evoked(data: np.ndarray, onsets: np.ndarray, maps: np.ndarray, wave: np.ndarray):
    """Add ``maps[i][:, None] * wave`` at each onset in place (µV)."""
    n = wave.size
    for i, onset in enumerate(onsets):
        stop = min(onset + n, data.shape[1])
        data[:, onset:stop] += maps[i][:, None] * wave[: stop - onset]

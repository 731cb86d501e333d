"""Shared pieces of the dataset-shape generators.

Stimuli are crops of the scikit-image photographs that :mod:`neuroflow.demo` uses
(:data:`neuroflow.demo.stimuli.PHOTOS`, rendered by :func:`neuroflow.demo.stimuli.render_shot`),
each with its own luminance and contrast jitter so that no two images are identical and
the planted image statistics vary widely. Every random stream comes from
:func:`neuroflow.demo.stimuli.rng_for` (seed plus names), so each part of a dataset is
reproducible on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuroflow.demo._io import write_json, write_nifti, write_png, write_tsv
from neuroflow.demo.eeg import CHANNELS, channel_positions
from neuroflow.demo.fmri import grid_affine
from neuroflow.demo.stimuli import FRAMINGS, PHOTOS, WIDE, Shot, render_shot, rng_for

__all__ = [
    "CHANNELS",
    "FEATURE_NAMES",
    "Picture",
    "add_evoked",
    "ar1",
    "component",
    "digest",
    "ellipsoid",
    "format_number",
    "grid_affine",
    "hrf_convolve",
    "image_features",
    "plan_pictures",
    "prepare_root",
    "render_pictures",
    "rng_for",
    "simulate_eeg",
    "standardise",
    "tile_durations",
    "write_captions",
    "write_dataset_description",
    "write_json",
    "write_nifti",
    "write_png",
    "write_rows",
    "write_tsv",
]

#: Names of the planted image statistics, as :mod:`neuroflow.features.image_statistics`
#: calls the same quantities (mean and standard deviation of Rec. 709 luma in [0, 1]).
FEATURE_NAMES: tuple[str, str] = ("luminance_mean", "luminance_std")
#: Rec. 709 luma weights.
_LUMA = np.array([0.2126, 0.7152, 0.0722])
BIDS_VERSION = "1.9.0"
GENERATED_BY = [{"Name": "neuroflow tests", "Description": "tests/dataset_shapes generator"}]


def prepare_root(root: str | Path) -> Path:
    """Create ``root``, which must be absent or an empty folder.

    Parameters
    ----------
    root : path-like
        Dataset root.

    Returns
    -------
    root : Path
    """
    root = Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise FileExistsError(f"`root` must be an empty or absent folder, got {root} instead.")
    root.mkdir(parents=True, exist_ok=True)
    return root


def write_dataset_description(
    root: Path, name: str, *, dataset_type: str = "raw", generated_by: list | None = None
) -> None:
    """Write ``dataset_description.json`` into ``root``."""
    desc: dict[str, Any] = {
        "Name": name,
        "BIDSVersion": BIDS_VERSION,
        "DatasetType": dataset_type,
        "License": "CC0",
        "Authors": ["neuroflow tests"],
    }
    if dataset_type == "derivative" or generated_by:
        desc["GeneratedBy"] = generated_by or GENERATED_BY
    write_json(root / "dataset_description.json", desc)


def write_rows(
    path: Path, header: Sequence[str], rows: Sequence[Sequence[str]], *, newline: str = "\n"
) -> None:
    """Write a TSV of pre-formatted cells with the given line end (``"\\r\\n"`` for CRLF)."""
    lines = ["\t".join(header), *("\t".join(row) for row in rows)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))


def format_number(value: float, decimals: int, *, strip: bool = False, lead: bool = False) -> str:
    """Format a number the way MATLAB-exported tables do (``.908``, ``22.55``, ``0``).

    Parameters
    ----------
    value : float
        The number.
    decimals : int
        Decimals kept.
    strip : bool
        Drop trailing zeros (and a trailing point).
    lead : bool
        Keep the ``0`` before the point of numbers below 1.

    Returns
    -------
    text : str
    """
    text = f"{value:.{decimals}f}"
    if strip and "." in text:
        text = text.rstrip("0").rstrip(".")
    if not lead:
        if text.startswith("0."):
            text = text[1:]
        elif text.startswith("-0."):
            text = "-" + text[2:]
    return text or "0"


def digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def standardise(x: np.ndarray) -> np.ndarray:
    """Z-score the columns of ``x`` (constant columns become 0)."""
    x = np.asarray(x, dtype=np.float64)
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


# --------------------------------------------------------------------------------------
# Stimuli


@dataclass(frozen=True)
class Picture:
    """One stimulus image: a photo crop with its own luminance and contrast.

    Attributes
    ----------
    stim_file : str
        Path relative to ``stimuli/``; also the stimulus id.
    shot : Shot
        The crop (photo, region, zoom, pan) as :mod:`neuroflow.demo.stimuli` plans them.
    level : float
        Factor on the mean luminance.
    contrast : float
        Factor on the deviations from the mean luminance.
    flip : bool
        Mirror left-right.
    """

    stim_file: str
    shot: Shot
    level: float
    contrast: float
    flip: bool

    @property
    def caption(self) -> str:
        """Text description of the picture."""
        return self.shot.caption


def _pool() -> list[tuple[str, str, float, str]]:
    """Every (photo, region, zoom, caption) crop of the demo's photographs."""
    pool = []
    for photo in PHOTOS:
        for region in photo.regions:
            zooms = (0.0,) if region.name == "full" else tuple(FRAMINGS)
            for zoom in zooms:
                framing = WIDE if zoom == 0.0 else FRAMINGS[zoom]
                pool.append((photo.name, region.name, zoom, f"{framing} {region.phrase}"))
    return pool


def plan_pictures(rng: np.random.Generator, stim_files: Sequence[str]) -> list[Picture]:
    """Plan one distinct picture per ``stim_file``, cycling through shuffled crops.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random stream.
    stim_files : sequence of str
        Names (relative to ``stimuli/``), all distinct.

    Returns
    -------
    pictures : list of Picture
    """
    if len(set(stim_files)) != len(stim_files):
        raise ValueError("`stim_files` must be distinct.")
    pool = _pool()
    order: list[int] = []
    while len(order) < len(stim_files):
        order.extend(rng.permutation(len(pool)).tolist())
    pictures = []
    for name, k in zip(stim_files, order, strict=False):
        photo, region, zoom, caption = pool[k]
        pan = tuple(float(v) for v in np.round(rng.uniform(-0.15, 0.15, size=2), 4))
        shot = Shot(name, photo, region, zoom, pan, caption, "train")
        level = float(np.round(rng.uniform(0.55, 1.35), 4))
        contrast = float(np.round(rng.uniform(0.35, 1.4), 4))
        pictures.append(Picture(name, shot, level, contrast, bool(rng.integers(2))))
    return pictures


def render_pictures(pictures: Sequence[Picture], size: int) -> np.ndarray:
    """Render pictures as uint8 RGB, shape (n_pictures, size, size, 3); all distinct."""
    out = np.empty((len(pictures), size, size, 3), dtype=np.uint8)
    for i, pic in enumerate(pictures):
        img = render_shot(pic.shot, size).astype(np.float64)
        if pic.flip:
            img = img[:, ::-1]
        mean = img.mean()
        img = (img - mean) * pic.contrast + mean * pic.level
        out[i] = np.clip(np.round(img), 0, 255).astype(np.uint8)
    hashes = {hashlib.sha1(img.tobytes()).hexdigest() for img in out}
    if len(hashes) != len(pictures):
        raise RuntimeError("Two rendered pictures are identical; change the seed.")
    return out


def image_features(images: np.ndarray) -> np.ndarray:
    """Mean and standard deviation of luma in [0, 1] per image, shape (n_images, 2).

    The same values as the ``luminance_mean`` and ``luminance_std`` columns of
    :func:`neuroflow.features.image_statistics.image_statistics`.

    Parameters
    ----------
    images : ndarray, shape (n_images, H, W, 3) or (n_images, H, W)
        uint8 images.
    """
    arr = np.asarray(images, dtype=np.float64) / 255.0
    luma = arr if arr.ndim == 3 else arr @ _LUMA
    flat = luma.reshape(len(luma), -1)
    return np.column_stack([flat.mean(axis=1), flat.std(axis=1)])


def write_captions(path: Path, stim_files: Sequence[str], captions: Sequence[str]) -> None:
    """Write ``captions.tsv`` (``stim_file``, ``caption``)."""
    write_tsv(path, {"stim_file": list(stim_files), "caption": list(captions)})


def tile_durations(
    rng: np.random.Generator, total: float, bounds: Sequence[float]
) -> tuple[np.ndarray, np.ndarray]:
    """Onsets and durations (0.1 s steps) of shots that tile ``total`` seconds exactly."""
    durations: list[float] = []
    elapsed = 0.0
    while total - elapsed > 1e-9:
        d = round(float(rng.uniform(bounds[0], bounds[1])), 1)
        left = round(total - elapsed, 6)
        if left - d < bounds[0]:
            d = left if left <= bounds[1] else round(left / 2, 1)
        durations.append(d)
        elapsed = round(elapsed + d, 6)
    dur = np.array(durations)
    onsets = np.round(np.concatenate([[0.0], np.cumsum(dur)[:-1]]), 6)
    return onsets, dur


# --------------------------------------------------------------------------------------
# fMRI


def canonical_hrf(dt: float, length: float = 32.0) -> np.ndarray:
    """SPM's double-gamma HRF sampled every ``dt`` seconds, scaled to unit integral."""
    from scipy.stats import gamma

    t = np.arange(0.0, length, dt)
    h = gamma.pdf(t, 6.0) - gamma.pdf(t, 16.0) / 6.0
    return h / (h.sum() * dt)


def hrf_convolve(
    values: np.ndarray,
    onsets: Sequence[float],
    durations: Sequence[float],
    n_volumes: int,
    tr: float,
    oversampling: int = 20,
) -> np.ndarray:
    """Boxcars of event values convolved with the HRF, sampled at ``n * tr``.

    Parameters
    ----------
    values : ndarray, shape (n_events, n_columns)
        Height of each event's boxcar per column.
    onsets, durations : sequence of float
        Event timing (s).
    n_volumes : int
        Number of volumes.
    tr : float
        Repetition time (s).
    oversampling : int
        Fine-grid points per TR.

    Returns
    -------
    design : ndarray, shape (n_volumes, n_columns)
        A sustained value ``x`` gives a plateau ``x``.
    """
    from scipy.signal import fftconvolve

    values = np.asarray(values, dtype=np.float64).reshape(len(onsets), -1)
    dt = tr / oversampling
    n_fine = n_volumes * oversampling
    fine = np.zeros((n_fine, values.shape[1]))
    for value, onset, duration in zip(values, onsets, durations, strict=True):
        start = round(onset / dt)
        stop = max(start + 1, round((onset + duration) / dt))
        fine[start : min(stop, n_fine)] += value
    hrf = canonical_hrf(dt) * dt
    return fftconvolve(fine, hrf[:, None], axes=0)[:n_fine:oversampling]


def ar1(rng: np.random.Generator, n_times: int, n_columns: int, phi: float) -> np.ndarray:
    """Stationary AR(1) noise with unit variance, shape (n_times, n_columns)."""
    from scipy.signal import lfilter

    u = rng.standard_normal((n_times, n_columns))
    u[0] /= np.sqrt(1.0 - phi**2)
    return lfilter([np.sqrt(1.0 - phi**2)], [1.0, -phi], u, axis=0)


def ellipsoid(shape: Sequence[int], centre: Sequence[float], radii: Sequence[float]) -> np.ndarray:
    """Boolean ellipsoid on a grid whose axes span [-1, 1], shape ``shape``."""
    axes = [np.linspace(-1.0, 1.0, n) for n in shape]
    u = np.stack(np.meshgrid(*axes, indexing="ij"))
    c = np.asarray(centre, dtype=float)[:, None, None, None]
    r = np.asarray(radii, dtype=float)[:, None, None, None]
    return (((u - c) / r) ** 2).sum(axis=0) <= 1.0


# --------------------------------------------------------------------------------------
# EEG


def _pink_noise(rng: np.random.Generator, n_rows: int, n_times: int) -> np.ndarray:
    """1/f noise with unit RMS per row, shape (n_rows, n_times)."""
    spec = np.fft.rfft(rng.standard_normal((n_rows, n_times)), axis=1)
    freqs = np.fft.rfftfreq(n_times)
    shaping = np.zeros_like(freqs)
    shaping[1:] = 1.0 / np.sqrt(np.maximum(freqs[1:], 0.5 / n_times))
    noise = np.fft.irfft(spec * shaping, n=n_times, axis=1)
    return noise / noise.std(axis=1, keepdims=True)


def add_evoked(data: np.ndarray, onsets: np.ndarray, maps: np.ndarray, wave: np.ndarray) -> None:
    """Add ``maps[i][:, None] * wave`` at each onset sample, in place."""
    n = wave.size
    for onset, topo in zip(onsets, maps, strict=True):
        stop = min(onset + n, data.shape[1])
        data[:, onset:stop] += topo[:, None] * wave[: stop - onset]


def component(
    centres: Sequence[str],
    latency: float,
    width: float,
    amplitudes: np.ndarray,
    *,
    radius: float = 0.045,
) -> dict[str, Any]:
    """An evoked component for :func:`simulate_eeg`.

    Parameters
    ----------
    centres : sequence of str
        10-20 names of the topography's peaks.
    latency, width : float
        Peak time and standard deviation (s) of the Gaussian wave.
    amplitudes : ndarray, shape (n_trials,)
        Peak amplitude (µV) per trial; negative for a negativity.
    radius : float
        Scalp radius (m) of the Gaussian topography around each centre.
    """
    return {
        "centres": tuple(centres),
        "latency": float(latency),
        "width": float(width),
        "amplitudes": np.asarray(amplitudes, dtype=float),
        "radius": float(radius),
    }


def simulate_eeg(
    *,
    rng: np.random.Generator,
    ch_names: Sequence[str],
    sfreq: float,
    n_times: int,
    onsets: np.ndarray,
    components: Sequence[Mapping[str, Any]],
    noise_uv: float = 10.0,
    line_freq: float = 50.0,
    line_uv: float = 4.0,
    reference: str = "FCz",
) -> np.ndarray:
    """Evoked components on spatially smooth 1/f noise plus line noise.

    Parameters
    ----------
    rng : numpy.random.Generator
        Random stream for the noise.
    ch_names : sequence of str
        10-20 names of the recorded channels (positions of MNE's standard montage).
    sfreq : float
        Sampling frequency (Hz).
    n_times : int
        Samples.
    onsets : ndarray of int, shape (n_trials,)
        Onset samples.
    components : sequence of dict
        Made by :func:`component`.
    noise_uv, line_freq, line_uv : float
        Background RMS (µV), line frequency (Hz) and line amplitude (µV).
    reference : str
        Unrecorded reference channel; the potentials are relative to it. Topographies
        are scaled to a peak absolute value of 1 after re-referencing, so a component's
        amplitude is its peak in the recorded data.

    Returns
    -------
    data : ndarray, shape (n_channels, n_times)
        Potentials in volts.
    """
    names = list(ch_names)
    centres = sorted({c for comp in components for c in comp["centres"]} - {*names, reference})
    all_names = [*names, reference, *centres]
    pos_all = channel_positions(all_names)
    n_rec = len(names)
    pos = pos_all[: n_rec + 1]
    where = {n: i for i, n in enumerate(all_names)}
    data = np.zeros((n_rec + 1, n_times))
    length = max(c["latency"] + 5 * c["width"] for c in components)
    t = np.arange(round(length * sfreq) + 1) / sfreq
    for comp in components:
        topo = np.zeros(n_rec + 1)
        for centre in comp["centres"]:
            d2 = ((pos - pos_all[where[centre]]) ** 2).sum(axis=1)
            topo += np.exp(-d2 / (2 * comp["radius"] ** 2))
        topo -= topo[n_rec]
        topo /= np.abs(topo).max()
        wave = np.exp(-((t - comp["latency"]) ** 2) / (2 * comp["width"] ** 2))
        amps = np.asarray(comp["amplitudes"], dtype=float)
        add_evoked(data, onsets, amps[:, None] * topo[None, :], wave)
    d2 = ((pos[:, None, :] - pos[None, :, :]) ** 2).sum(axis=-1)
    mixing = np.exp(-d2 / (2 * 0.05**2))
    mixing /= np.sqrt((mixing**2).sum(axis=1, keepdims=True))
    data += mixing @ _pink_noise(rng, n_rec + 1, n_times) * noise_uv
    data = data[:n_rec] - data[n_rec]
    time = np.arange(n_times) / sfreq
    phase = rng.uniform(0, 2 * np.pi, size=(n_rec, 1))
    gain = rng.uniform(0.5, 1.5, size=(n_rec, 1)) * line_uv
    data += gain * np.sin(2 * np.pi * line_freq * time + phase)
    return data * 1e-6

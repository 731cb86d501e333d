"""Simulated BOLD responses to the demo movies.

For voxel ``v`` and run ``r`` the recorded intensity is::

    bold[v, t] = baseline[v] * (1 + (signal[v, t] + noise[v, t] + drift[v, t]
                                     + motion[v, t]) / 100)

with every term in percent signal change (PSC):

- ``signal = X_visual(t) @ weights_visual[v] + X_semantic(t) @ weights_semantic[v]``,
  where ``X_*(t)`` are the standardised stimulus features of the shot on screen,
  convolved with the Glover HRF (normalised to unit sum, so a sustained feature value
  ``x`` gives a plateau ``x``) and sampled at the frame times ``t = n * TR``;
- ``noise``: AR(1) with coefficient ``ar_coef`` and stationary standard deviation
  ``noise_psc``, independent across voxels and runs;
- ``drift``: slow cosines (periods of at least 128 s) with a per-voxel RMS around
  ``drift_amplitude * noise_psc``;
- ``motion``: the run's six standardised motion parameters (written as confounds)
  times per-voxel loadings of RMS around ``motion_amplitude * noise_psc``.

Weights are low rank: ``weights[v] = basis @ loadings[v]`` with ``rank`` random
directions per feature space. Each planted voxel's weights are scaled so that
``var(signal) / noise_psc**2`` (over all runs) equals its SNR, drawn log-normally
around the ROI's configured SNR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .stimuli import Movie, rng_for

__all__ = [
    "ROI_NAMES",
    "FmriSubject",
    "convolved_design",
    "grid_affine",
    "roi_drives",
    "roi_labels",
    "simulate_subject",
]

#: ROI label values (0 = other brain, -1 is never stored: outside the brain is 0 in the mask).
ROI_NAMES: dict[int, str] = {0: "other", 1: "early_visual", 2: "semantic", 3: "noise"}
#: Temporal oversampling of the HRF convolution.
OVERSAMPLING = 16
#: Shortest drift period (seconds), as in SPM's default high-pass.
DRIFT_PERIOD = 128.0
#: Standard deviation of the log-normal spread of per-voxel SNRs.
SNR_SPREAD = 0.4
#: Mean intensity inside and outside the brain.
BRAIN_BASELINE = 1000.0
BACKGROUND_BASELINE = 100.0


def grid_affine(shape: Sequence[int], voxel_size: float) -> np.ndarray:
    """RAS affine of the BOLD grid, shape (4, 4), centred near the brain's centre."""
    affine = np.diag([voxel_size, voxel_size, voxel_size, 1.0])
    centre_mm = np.array([0.0, -18.0, 18.0])
    affine[:3, 3] = centre_mm - voxel_size * (np.asarray(shape) - 1) / 2
    return affine


def _ellipsoid(u: np.ndarray, centre: Sequence[float], radii: Sequence[float]) -> np.ndarray:
    """Boolean ellipsoid on normalised coordinates ``u``, shape (3, X, Y, Z)."""
    c = np.asarray(centre)[:, None, None, None]
    r = np.asarray(radii)[:, None, None, None]
    return (((u - c) / r) ** 2).sum(axis=0) <= 1.0


def roi_labels(shape: Sequence[int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Brain mask and ROI labels on the grid.

    Parameters
    ----------
    shape : sequence of int
        Grid shape ``(X, Y, Z)``; axes point right, anterior, superior.
    rng : numpy.random.Generator
        Jitters the ROI centres (per subject).

    Returns
    -------
    mask : ndarray of bool, shape (X, Y, Z)
        Ellipsoidal brain.
    labels : ndarray of uint8, shape (X, Y, Z)
        1 = early_visual (occipital pole), 2 = semantic (bilateral lateral temporal),
        3 = noise (frontal), 0 elsewhere in and outside the brain.
    """
    axes = [np.linspace(-1.0, 1.0, n) for n in shape]
    u = np.stack(np.meshgrid(*axes, indexing="ij"))
    mask = _ellipsoid(u, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
    jitter = rng.uniform(-0.06, 0.06, size=(4, 3))
    labels = np.zeros(tuple(shape), dtype=np.uint8)
    specs = [
        (1, (0.0, -0.72, -0.1), (0.45, 0.25, 0.4), jitter[0]),
        (2, (-0.55, -0.1, -0.25), (0.25, 0.35, 0.25), jitter[1]),
        (2, (0.55, -0.1, -0.25), (0.25, 0.35, 0.25), jitter[2]),
        (3, (0.0, 0.62, 0.25), (0.35, 0.2, 0.3), jitter[3]),
    ]
    for label, centre, radii, jit in specs:
        labels[_ellipsoid(u, np.asarray(centre) + jit, radii) & mask] = label
    for label, name in ROI_NAMES.items():
        if label and not np.any(labels == label):
            raise ValueError(f"ROI {name!r} is empty on grid {tuple(shape)}; use a larger grid.")
    return mask, labels


def convolved_design(
    features: np.ndarray, movie_index: np.ndarray, movie: Movie, n_volumes: int, tr: float
) -> np.ndarray:
    """Stimulus features of a movie convolved with the HRF, sampled per volume.

    Parameters
    ----------
    features : ndarray, shape (n_stimuli, n_features)
        Standardised features of every stimulus.
    movie_index : ndarray of int, shape (n_shots,)
        Row of ``features`` for each shot of ``movie``.
    movie : Movie
        Onsets and durations of the shots.
    n_volumes : int
        Number of volumes.
    tr : float
        Repetition time (s).

    Returns
    -------
    design : ndarray, shape (n_volumes, n_features)
        Value at frame times ``n * tr``.
    """
    from nilearn.glm.first_level import glover_hrf
    from scipy.signal import fftconvolve

    dt = tr / OVERSAMPLING
    t = np.arange(n_volumes * OVERSAMPLING) * dt
    onsets = np.asarray(movie.onsets)
    ends = onsets + np.asarray(movie.durations)
    shot = np.searchsorted(onsets, t, side="right") - 1
    on = (shot >= 0) & (t < ends[np.clip(shot, 0, None)])
    fine = np.zeros((t.size, features.shape[1]))
    fine[on] = features[movie_index[shot[on]]]
    hrf = glover_hrf(tr, oversampling=OVERSAMPLING, time_length=32.0)
    conv = fftconvolve(fine, hrf[:, None], axes=0)[: t.size]
    return conv[::OVERSAMPLING]


def _ar1(rng: np.random.Generator, n_times: int, n_voxels: int, phi: float) -> np.ndarray:
    """Stationary AR(1) noise with unit variance, shape (n_times, n_voxels)."""
    out = rng.standard_normal((n_times, n_voxels))
    scale = np.sqrt(1.0 - phi**2)
    for t in range(1, n_times):
        # in place, row by row: scale * u[t] + phi * out[t - 1]
        out[t] *= scale
        out[t] += phi * out[t - 1]
    return out


def _drift_basis(n_volumes: int, tr: float) -> np.ndarray:
    """Cosines with periods of at least DRIFT_PERIOD, shape (n_volumes, n_cosines)."""
    duration = n_volumes * tr
    n_cos = max(1, int(np.floor(2 * duration / DRIFT_PERIOD)))
    n = np.arange(n_volumes)
    return np.column_stack([np.cos(np.pi * (n + 0.5) * k / n_volumes) for k in range(1, n_cos + 1)])


def motion_parameters(rng: np.random.Generator, n_volumes: int) -> np.ndarray:
    """Slow head-motion random walks, shape (n_volumes, 6).

    Columns are ``trans_x, trans_y, trans_z`` (mm) and ``rot_x, rot_y, rot_z``
    (radians), as in fMRIPrep's confounds.
    """
    steps = rng.standard_normal((n_volumes, 6)) * np.array([0.02] * 3 + [0.0004] * 3)
    walk = np.cumsum(steps, axis=0)
    return walk - walk[0]


def framewise_displacement(motion: np.ndarray, radius: float = 50.0) -> np.ndarray:
    """Power's framewise displacement (mm), shape (n_volumes,), NaN at the first volume."""
    diff = np.abs(np.diff(motion, axis=0))
    fd = diff[:, :3].sum(axis=1) + radius * diff[:, 3:].sum(axis=1)
    return np.concatenate([[np.nan], fd])


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


@dataclass
class FmriSubject:
    """Simulated data and ground truth of one subject.

    Attributes
    ----------
    mask : ndarray of bool, shape (X, Y, Z)
    labels : ndarray of uint8, shape (X, Y, Z)
    bold : list of ndarray of int16, shape (X, Y, Z, n_volumes)
        One image per run.
    motion : list of ndarray, shape (n_volumes, 6)
    truth : dict of str to ndarray
        Per-brain-voxel ground truth (see :func:`simulate_subject`).
    test_noise, test_nuisance : dict of int to ndarray, shape (n_volumes, n_brain)
        Per test run (index into the runs), the AR noise and the drift plus motion
        term over the brain voxels, in PSC, for the ceilings after cleaning.
    """

    mask: np.ndarray
    labels: np.ndarray
    bold: list[np.ndarray]
    motion: list[np.ndarray]
    truth: dict[str, np.ndarray]
    test_noise: dict[int, np.ndarray]
    test_nuisance: dict[int, np.ndarray]


def _concatenated_variance(blocks: Sequence[np.ndarray], chunk: int = 16384) -> np.ndarray:
    """``np.concatenate(blocks).var(axis=0)`` a column chunk at a time, shape (n_columns,).

    Same values as the one-shot call (the reduction runs over rows in the same order),
    without a copy of every block at once.
    """
    n = blocks[0].shape[1]
    out = np.empty(n)
    for start in range(0, n, chunk):
        cols = slice(start, start + chunk)
        out[cols] = np.concatenate([b[:, cols] for b in blocks]).var(axis=0)
    return out


def _weights(rng: np.random.Generator, n_features: int, n_voxels: int, rank: int) -> np.ndarray:
    """Low-rank random weights, shape (n_features, n_voxels)."""
    basis = rng.standard_normal((n_features, rank))
    return basis @ rng.standard_normal((rank, n_voxels))


def simulate_subject(
    *,
    config: Mapping[str, Any],
    subject: str,
    runs: Sequence[Movie],
    designs: Mapping[str, tuple[np.ndarray, np.ndarray]],
    test_movie: str | None,
) -> FmriSubject:
    """Simulate every run of one subject.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section.
    subject : str
        Subject label (seeds the subject's streams).
    runs : sequence of Movie
        The movie shown in each run, in run order.
    designs : dict of str to (ndarray, ndarray)
        Per movie name, the convolved visual and semantic designs,
        shapes (n_volumes, n_visual) and (n_volumes, n_semantic).
    test_movie : str | None
        Name of the repeated movie, for the implied noise ceilings.

    Returns
    -------
    sim : FmriSubject
        ``truth`` holds, over the ``n_brain`` mask voxels in C order: ``voxel_ijk``
        (n_brain, 3), ``roi`` (n_brain,), ``weights_visual`` (n_brain, n_visual) and
        ``weights_semantic`` (n_brain, n_semantic) in PSC per standardised feature unit,
        ``snr`` (n_brain,) and ``signal`` (n_runs, n_volumes, n_brain) in PSC. The
        noise ceilings depend on the cleaning and are added by
        :func:`neuroflow.demo.ceiling.cleaned_ceilings`.
    """
    f = config["fmri"]
    seed = config["seed"]
    n_vol, tr, psc = f["n_volumes"], f["tr"], f["noise_psc"]
    shape = tuple(f["grid_shape"])
    mask, labels = roi_labels(shape, rng_for(seed, "fmri", subject, "rois"))
    ijk = np.argwhere(mask)
    roi = labels[mask]
    n_brain = roi.size
    rng_w = rng_for(seed, "fmri", subject, "weights")
    n_vis = next(iter(designs.values()))[0].shape[1]
    n_sem = next(iter(designs.values()))[1].shape[1]
    w_vis = _weights(rng_w, n_vis, n_brain, f["rank"]["visual"])
    w_sem = _weights(rng_w, n_sem, n_brain, f["rank"]["semantic"])
    weak = (roi == 0) & (rng_w.uniform(size=n_brain) < f["weak_fraction"])
    w_vis[:, ~((roi == 1) | weak)] = 0.0
    w_sem[:, ~((roi == 2) | weak)] = 0.0
    snr_roi = np.select(
        [roi == 1, roi == 2, weak],
        [f["snr"]["early_visual"], f["snr"]["semantic"], f["snr"]["other"]],
        0.0,
    )
    snr = snr_roi * np.exp(SNR_SPREAD * rng_w.standard_normal(n_brain))
    raw = {m.name: designs[m.name][0] @ w_vis + designs[m.name][1] @ w_sem for m in runs}
    var = _concatenated_variance([raw[m.name] for m in runs])
    scale = np.divide(np.sqrt(snr) * psc, np.sqrt(var), out=np.zeros(n_brain), where=var > 0)
    w_vis *= scale
    w_sem *= scale
    signal = np.empty((len(runs), n_vol, n_brain), dtype=np.float32)
    for r, m in enumerate(runs):
        signal[r] = raw[m.name] * scale

    rng_n = rng_for(seed, "fmri", subject, "noise")
    baseline = np.full(shape, BACKGROUND_BASELINE)
    baseline[mask] = BRAIN_BASELINE * rng_n.uniform(0.85, 1.15, size=n_brain)
    n_all = int(np.prod(shape))
    drift_basis = _drift_basis(n_vol, tr)
    bold, motions = [], []
    test_noise, test_nuisance = {}, {}
    # (n_volumes, grid) float64 arrays are built in place, a few at a time: whole-brain
    # grids (hundreds of thousands of voxels) fit in memory
    for r, movie in enumerate(runs):
        total = _ar1(rng_n, n_vol, n_all, f["ar_coef"])
        total *= psc
        coef = rng_n.standard_normal((drift_basis.shape[1], n_all))
        drift = drift_basis @ coef
        drift *= f["drift_amplitude"] * psc * rng_n.uniform(0.5, 1.5, n_all) / drift.std(axis=0)
        motion = motion_parameters(rng_n, n_vol)
        loadings = rng_n.standard_normal((6, n_all)) / np.sqrt(6)
        nuisance = _standardise(motion) @ loadings
        nuisance *= f["motion_amplitude"]
        nuisance *= psc
        if movie.name == test_movie:
            test_noise[r] = total.reshape(n_vol, *shape)[:, mask]
            test_nuisance[r] = (
                drift.reshape(n_vol, *shape)[:, mask] + nuisance.reshape(n_vol, *shape)[:, mask]
            )
        total += drift
        del drift
        total += nuisance
        del nuisance
        total.reshape(n_vol, *shape)[:, mask] += raw[movie.name] * scale
        total /= 100.0
        total += 1.0
        vol = total.reshape(n_vol, *shape)
        vol *= baseline
        np.round(vol, out=vol)
        np.clip(vol, 0, 32767, out=vol)
        bold.append(np.moveaxis(vol, 0, -1).astype(np.int16))
        del total, vol
        motions.append(motion)
    del raw
    truth = {
        "voxel_ijk": ijk.astype(np.int16),
        "roi": roi.astype(np.uint8),
        "weights_visual": w_vis.T.astype(np.float32),
        "weights_semantic": w_sem.T.astype(np.float32),
        "snr": snr.astype(np.float32),
        "signal": signal,
    }
    return FmriSubject(
        mask=mask,
        labels=labels,
        bold=bold,
        motion=motions,
        truth=truth,
        test_noise=test_noise,
        test_nuisance=test_nuisance,
    )


def roi_drives(
    *,
    roi: np.ndarray,
    weights_visual: np.ndarray,
    weights_semantic: np.ndarray,
    visual: np.ndarray,
    semantic: np.ndarray,
) -> dict[str, np.ndarray]:
    """Mean planted response of each ROI to images held on screen, per feature space.

    For ROI ``r`` and space ``s``, ``mean_v(weights_s[v]) @ z_s`` over the ROI's voxels
    ``v``: the plateau that a sustained presentation reaches (the HRF has unit sum), in
    percent signal change per unit of the convolved design.

    Parameters
    ----------
    roi : ndarray of int, shape (n_brain,)
        ROI label of each brain voxel (:data:`ROI_NAMES`).
    weights_visual : ndarray, shape (n_brain, n_visual)
        Visual weights in PSC per standardised feature unit.
    weights_semantic : ndarray, shape (n_brain, n_semantic)
        Semantic weights in PSC per standardised feature unit.
    visual : ndarray, shape (n_images, n_visual)
        Visual features of the images, standardised like the stimuli.
    semantic : ndarray, shape (n_images, n_semantic)
        Semantic features of the images, standardised like the stimuli.

    Returns
    -------
    drives : dict of str to ndarray, shape (n_images,)
        ``"<roi>_visual"`` and ``"<roi>_semantic"`` for each ROI but ``"other"``, in
        label order. An ROI without voxels drives 0.
    """
    drives = {}
    for label, name in ROI_NAMES.items():
        if label == 0:
            continue
        sel = np.asarray(roi) == label
        for space, weights, z in (
            ("visual", weights_visual, visual),
            ("semantic", weights_semantic, semantic),
        ):
            z = np.asarray(z, dtype=np.float64)
            if not sel.any():
                drives[f"{name}_{space}"] = np.zeros(z.shape[0])
                continue
            mean_w = np.asarray(weights, dtype=np.float64)[sel].mean(axis=0)
            drives[f"{name}_{space}"] = z @ mean_w
    return drives


def synthetic_t1w(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A T1-weighted-looking image on the grid: bright core, grey rim, dark outside.

    Returns
    -------
    t1w : ndarray of int16, shape (X, Y, Z)
    """
    axes = [np.linspace(-1.0, 1.0, n) for n in mask.shape]
    u = np.stack(np.meshgrid(*axes, indexing="ij"))
    core = _ellipsoid(u, (0.0, 0.0, 0.0), (0.6, 0.65, 0.6))
    img = np.where(mask, 600.0, 20.0)
    img[core] = 900.0
    img += rng.normal(0.0, 15.0, size=mask.shape)
    return np.clip(np.round(img), 0, 32767).astype(np.int16)

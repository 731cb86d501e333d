"""An fMRI-only movie dataset: no repeated stimuli, no atlas, no derivatives.

Layout::

    dataset_description.json  README  participants.tsv
    stimuli/captions.tsv
    stimuli/concepts.tsv                                     stim_file, concepts (";"-listed)
    stimuli/shots/run1_shot01.png ... run3_shotNN.png       every shot distinct
    sub-0S/func/sub-0S_task-movie_run-R_bold.nii.gz          R = 1, 2, 3 (not zero-padded)
    sub-0S/func/sub-0S_task-movie_run-R_bold.json            RepetitionTime (per run only)
    sub-0S/func/sub-0S_task-movie_run-R_events.tsv           onset duration trial_type stim_file

Both subjects watch the same three movies (one per run); each movie is a sequence of
distinct shots (2-6 s) tiling the run. BOLD (int16) is ``baseline * (1 + (signal + noise
+ drift) / 100)`` on an ellipsoidal "brain" (baseline ~1000, ~100 outside), where in a
posterior blob of voxels ``signal`` is the HRF-convolved (SPM double gamma) mean
luminance and luminance standard deviation of the shot on screen (z-scored over all
shots), mixed with per-voxel positive weights and scaled to a per-voxel SNR around
``snr`` (signal variance over AR(1) noise variance), and zero elsewhere; ``noise`` is
AR(1) (coefficient 0.3, 1 % signal change) and ``drift`` slow cosines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    FEATURE_NAMES,
    ar1,
    ellipsoid,
    grid_affine,
    hrf_convolve,
    image_features,
    plan_pictures,
    prepare_root,
    render_pictures,
    rng_for,
    standardise,
    tile_durations,
    write_captions,
    write_dataset_description,
    write_json,
    write_nifti,
    write_png,
    write_tsv,
)

__all__ = ["make_fmri_movie"]

TASK = "movie"
NOISE_PSC = 1.0
AR_COEF = 0.3


def simulate_bold(
    *,
    rng: np.random.Generator,
    mask: np.ndarray,
    signal: np.ndarray,
    tr: float,
    noise_psc: float = NOISE_PSC,
    drift_psc: float = 1.0,
) -> np.ndarray:
    """Int16 BOLD of one run.

    Parameters
    ----------
    rng : numpy.random.Generator
        Noise stream.
    mask : ndarray of bool, shape (X, Y, Z)
        Brain voxels.
    signal : ndarray, shape (n_volumes, X, Y, Z)
        Signal in percent signal change.
    tr : float
        Repetition time (s), for the drift periods (>= 128 s).
    noise_psc, drift_psc : float
        AR(1) noise and drift standard deviations (percent signal change).

    Returns
    -------
    bold : ndarray of int16, shape (X, Y, Z, n_volumes)
    """
    n_vol = signal.shape[0]
    shape = mask.shape
    n_all = int(np.prod(shape))
    baseline = np.where(mask, 1000.0, 100.0) * rng.uniform(0.9, 1.1, size=shape)
    noise = ar1(rng, n_vol, n_all, AR_COEF) * noise_psc
    n_cos = max(1, int(2 * n_vol * tr / 128.0))
    frames = np.arange(n_vol)
    basis = np.column_stack(
        [np.cos(np.pi * (frames + 0.5) * k / n_vol) for k in range(1, n_cos + 1)]
    )
    drift = basis @ rng.standard_normal((n_cos, n_all)) * drift_psc / np.sqrt(n_cos)
    total = (noise + drift).reshape(n_vol, *shape) + signal
    vol = baseline * (1.0 + total / 100.0)
    return np.clip(np.round(np.moveaxis(vol, 0, -1)), 0, 32767).astype(np.int16)


#: Concepts of the shots: three follow the planted features, one does not.
PLANTED_CONCEPTS = ("bright", "dark", "contrasty")
UNRELATED_CONCEPT = "lucky"


def _concepts(feats: np.ndarray, rng: np.random.Generator) -> list[list[str]]:
    """Concept labels of each shot from its z-scored (luminance, contrast) features.

    ``bright`` / ``dark``: the top / bottom third of mean luminance; ``contrasty``: the
    top third of luminance SD; ``lucky``: a random third, unrelated to the responses.
    """
    lum_hi, lum_lo = np.quantile(feats[:, 0], [2 / 3, 1 / 3])
    sd_hi = np.quantile(feats[:, 1], 2 / 3)
    lucky = rng.random(len(feats)) < 1 / 3
    out = []
    for (lum, sd), luck in zip(feats[:, :2], lucky, strict=True):
        labels = ["bright"] if lum > lum_hi else ["dark"] if lum < lum_lo else []
        labels += ["contrasty"] if sd > sd_hi else []
        labels += [UNRELATED_CONCEPT] if luck else []
        out.append(labels)
    return out


def make_fmri_movie(
    root: str | Path,
    *,
    seed: int = 0,
    n_subjects: int = 2,
    n_runs: int = 3,
    n_volumes: int = 120,
    tr: float = 2.0,
    grid_shape: tuple[int, int, int] = (11, 12, 9),
    voxel_size: float = 3.0,
    shot_duration: tuple[float, float] = (2.0, 6.0),
    image_size: int = 48,
    snr: float = 1.0,
) -> dict[str, Any]:
    """Write an fMRI movie dataset whose shots never repeat.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_subjects, n_runs, n_volumes : int
        Subjects, runs (one distinct movie each) and volumes per run.
    tr : float
        Repetition time (s), written only in the per-run ``_bold.json`` (and the header).
    grid_shape : tuple of int
        BOLD grid.
    voxel_size : float
        Voxel side (mm).
    shot_duration : tuple of float
        Shortest and longest shot (s).
    image_size : int
        Side of the PNG shots (pixels).
    snr : float
        Median per-voxel signal-to-noise variance ratio in the blob.

    Returns
    -------
    facts : dict
        ``root``, ``task``, ``subjects``, ``runs`` (``["1", "2", "3"]``), ``train_runs``
        (all but the last), ``test_runs`` (the last), ``tr``, ``n_volumes``,
        ``grid_shape``, ``affine``, ``bold`` / ``events`` / ``sidecars`` (dicts keyed by
        ``(subject, run)``), ``stimuli`` (every ``stim_file``, in order of appearance),
        ``run_stimuli`` (run to its stim_files), ``captions`` (path), ``concepts``
        (stim_file to its labels, see :data:`PLANTED_CONCEPTS`), ``features``
        (names) and ``feature_values`` (stim_file to raw values), ``planted``:
        ``blob`` (subject to boolean mask, shape grid_shape), ``brain`` (subject to
        mask), ``weights`` (subject to (n_blob, 2) weights on the z-scored features),
        ``snr`` (subject to per-voxel SNR), ``noise_psc``.
    """
    root = prepare_root(root)
    subjects = [f"{i + 1:02d}" for i in range(n_subjects)]
    runs = [str(r + 1) for r in range(n_runs)]
    write_dataset_description(root, "neuroflow test shape: fMRI movie without repeats")
    (root / "README").write_text(
        "Synthetic fMRI movie dataset (neuroflow tests): every shot is shown once.\n",
        encoding="utf-8",
    )
    write_tsv(root / "participants.tsv", {"participant_id": [f"sub-{s}" for s in subjects]})

    rng = rng_for(seed, "fmri_movie", "movies")
    timing = {run: tile_durations(rng, n_volumes * tr, shot_duration) for run in runs}
    run_stimuli = {
        run: [f"shots/run{run}_shot{k + 1:02d}.png" for k in range(len(timing[run][0]))]
        for run in runs
    }
    stim_files = [s for run in runs for s in run_stimuli[run]]
    pictures = plan_pictures(rng, stim_files)
    images = render_pictures(pictures, image_size)
    for pic, img in zip(pictures, images, strict=True):
        write_png(root / "stimuli" / pic.stim_file, img)
    write_captions(root / "stimuli" / "captions.tsv", stim_files, [p.caption for p in pictures])
    raw_features = image_features(images)
    feats = standardise(raw_features)
    concepts = _concepts(feats, rng_for(seed, "fmri_movie", "concepts"))
    write_tsv(
        root / "stimuli" / "concepts.tsv",
        {"stim_file": stim_files, "concepts": [";".join(c) or "n/a" for c in concepts]},
    )
    index = {s: i for i, s in enumerate(stim_files)}
    designs = {
        run: hrf_convolve(
            feats[[index[s] for s in run_stimuli[run]]],
            timing[run][0],
            timing[run][1],
            n_volumes,
            tr,
        )
        for run in runs
    }

    affine = grid_affine(grid_shape, voxel_size)
    facts_bold, facts_events, facts_sidecars = {}, {}, {}
    blobs, brains, weights, snrs = {}, {}, {}, {}
    for sub in subjects:
        rng_s = rng_for(seed, "fmri_movie", sub, "anatomy")
        brain = ellipsoid(grid_shape, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
        centre = np.array([0.0, -0.55, -0.05]) + rng_s.uniform(-0.06, 0.06, size=3)
        blob = ellipsoid(grid_shape, centre, (0.4, 0.3, 0.4)) & brain
        n_blob = int(blob.sum())
        w = rng_s.uniform(0.3, 1.0, size=(2, n_blob))
        voxel_snr = snr * np.exp(0.3 * rng_s.standard_normal(n_blob))
        all_signal = np.concatenate([designs[run] for run in runs]) @ w
        scale = np.sqrt(voxel_snr) * NOISE_PSC / all_signal.std(axis=0)
        rng_n = rng_for(seed, "fmri_movie", sub, "noise")
        for run in runs:
            signal = np.zeros((n_volumes, *grid_shape))
            signal[:, blob] = designs[run] @ w * scale
            bold = simulate_bold(rng=rng_n, mask=brain, signal=signal, tr=tr)
            stem = root / f"sub-{sub}" / "func" / f"sub-{sub}_task-{TASK}_run-{run}"
            write_nifti(stem.with_name(stem.name + "_bold.nii.gz"), bold, affine, tr=tr)
            write_json(
                stem.with_name(stem.name + "_bold.json"),
                {
                    "TaskName": TASK,
                    "RepetitionTime": tr,
                    "TaskDescription": "Passive viewing of a movie of photo crops.",
                    "SliceTimingCorrected": False,
                },
            )
            onsets, durations = timing[run]
            write_tsv(
                stem.with_name(stem.name + "_events.tsv"),
                {
                    "onset": onsets,
                    "duration": durations,
                    "trial_type": ["shot"] * len(onsets),
                    "stim_file": run_stimuli[run],
                },
                default_decimals=3,
            )
            facts_bold[sub, run] = stem.with_name(stem.name + "_bold.nii.gz")
            facts_events[sub, run] = stem.with_name(stem.name + "_events.tsv")
            facts_sidecars[sub, run] = stem.with_name(stem.name + "_bold.json")
        blobs[sub], brains[sub] = blob, brain
        weights[sub] = (w * scale).T
        snrs[sub] = voxel_snr
    return {
        "root": root,
        "task": TASK,
        "subjects": subjects,
        "runs": runs,
        "train_runs": runs[:-1],
        "test_runs": runs[-1:],
        "tr": float(tr),
        "n_volumes": n_volumes,
        "grid_shape": tuple(grid_shape),
        "affine": affine,
        "bold": facts_bold,
        "events": facts_events,
        "sidecars": facts_sidecars,
        "stimuli": stim_files,
        "run_stimuli": run_stimuli,
        "captions": root / "stimuli" / "captions.tsv",
        "concepts": dict(zip(stim_files, concepts, strict=True)),
        "features": list(FEATURE_NAMES),
        "feature_values": {s: raw_features[i] for s, i in index.items()},
        "planted": {
            "blob": blobs,
            "brain": brains,
            "weights": weights,
            "snr": snrs,
            "noise_psc": NOISE_PSC,
        },
    }

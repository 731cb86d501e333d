"""An event-related image study in the ds000117 style, as fMRIPrep derivatives.

Layout (one subject, ``S`` = 01..03 sessions, ``R`` = 01..04 runs per session)::

    dataset_description.json  participants.tsv
    task-images_bold.json                    TR 2.0, only here
    stimuli/img_NNN.png                      one image per event, never repeated
    sub-01/ses-0S/func/sub-01_ses-0S_task-images_run-0R_events.tsv
    derivatives/fmriprep/dataset_description.json
    derivatives/fmriprep/sub-01/ses-0S/func/
        sub-01_ses-0S_task-images_run-0R_space-MNI152NLin2009cAsym_desc-preproc_bold.nii.gz
        sub-01_ses-0S_task-images_run-0R_space-MNI152NLin2009cAsym_desc-brain_mask.nii.gz
        sub-01_ses-0S_task-images_run-0R_desc-confounds_timeseries.tsv

Design: short image events (0.8-1.2 s, onsets 3.5-6.5 s apart, so several events share
no TR and most TRs hold none), one 16 s rest block per run (a row with ``trial_type``
``rest`` and ``stim_file`` ``n/a``), ``response_time`` ``n/a`` on about a third of the
rows, and each image's category (``animal`` or ``object``) in ``trial_type``.

Planted signal (percent signal change, on top of AR(1) noise and slow drifts):

- ``visual`` ROI: every image evokes a response, scaled per image by its z-scored
  luminance mean and standard deviation (the ``luminance_mean``/``luminance_std``
  columns of :mod:`neuroflow.features.image_statistics`);
- ``category`` ROI: ``animal`` images evoke a response, ``object`` images none.

Each event's boxcar, at its onset and for its duration, is convolved with SPM's
canonical HRF on a 0.1 s grid and sampled at the volumes: ``planted["design"]`` holds
these exact regressors per run, for an oracle fit. Head motion (random walks plus a
small jerk at every image onset) leaks into every brain voxel, as an artefact that the
fMRIPrep confounds table describes exactly (24 motion columns, ``white_matter``,
``csf``, ``framewise_displacement``, one non-steady-state volume).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
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
    write_dataset_description,
    write_json,
    write_nifti,
    write_png,
    write_tsv,
)

__all__ = ["make_event_related"]

TASK = "images"
SPACE = "MNI152NLin2009cAsym"
MOTION = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z")
REST_DURATION = 16.0


def _events(rng: np.random.Generator, n_volumes: int, tr: float, first: int, design: str):
    """One run's image events (onset, duration, image index) and the rest block's onset.

    ``design``: ``"event_related"`` (one ~1 s image every 3.5-6.5 s) or ``"blocked"``
    (blocks of 8-14 s of 0.8 s images, one per second, between 10-16 s of fixation).
    """
    end = n_volumes * tr - 18.0
    rest_at = float(np.round(rng.uniform(0.4, 0.6) * end, 3))
    onsets, durations = [], []
    t = float(rng.uniform(4.0, 6.0))
    block_end = -1.0
    while t < end:
        if rest_at <= t < rest_at + REST_DURATION:
            t = rest_at + REST_DURATION + float(rng.uniform(2.0, 4.0))
            continue
        if design == "event_related":
            onsets.append(round(t, 3))
            durations.append(round(float(rng.uniform(0.8, 1.2)), 3))
            t += float(rng.uniform(3.5, 6.5))
            continue
        if t >= block_end:  # a new block
            block_end = t + float(rng.uniform(8.0, 14.0))
        onsets.append(round(t, 3))
        durations.append(0.8)
        t += 1.0
        if t >= block_end:
            t += float(rng.uniform(10.0, 16.0))
    images = np.arange(first, first + len(onsets))
    return np.array(onsets), np.array(durations), images, rest_at


def _motion(rng: np.random.Generator, n_volumes: int, tr: float, onsets: np.ndarray):
    """Motion parameters (n_volumes, 6): random walks and a jerk of trans_z at image onsets."""
    steps = rng.standard_normal((n_volumes, 6)) * np.array([0.03] * 3 + [0.0005] * 3)
    motion = np.cumsum(steps, axis=0)
    jerk = np.zeros(n_volumes)
    jerk[np.minimum((onsets // tr).astype(int), n_volumes - 1)] = 0.08
    motion[:, 2] += jerk
    return motion - motion[0]


def _confounds_table(motion: np.ndarray, rng: np.random.Generator) -> dict[str, list]:
    """fMRIPrep's columns: 24 motion, white_matter, csf, FD, one non-steady-state volume."""
    n = len(motion)
    cols: dict[str, list] = {}
    for i, name in enumerate(MOTION):
        base = motion[:, i]
        deriv = np.r_[np.nan, np.diff(base)]
        cols[name] = base.tolist()
        cols[f"{name}_derivative1"] = deriv.tolist()
        cols[f"{name}_power2"] = (base**2).tolist()
        cols[f"{name}_derivative1_power2"] = (deriv**2).tolist()
    cols["white_matter"] = (500.0 + rng.standard_normal(n)).tolist()
    cols["csf"] = (800.0 + rng.standard_normal(n)).tolist()
    diff = np.abs(np.diff(motion, axis=0))
    cols["framewise_displacement"] = [
        np.nan,
        *(diff[:, :3].sum(axis=1) + 50 * diff[:, 3:].sum(axis=1)).tolist(),
    ]
    cols["non_steady_state_outlier00"] = [1, *[0] * (n - 1)]
    return cols


def make_event_related(
    root: str | Path,
    *,
    seed: int = 0,
    n_sessions: int = 3,
    n_runs: int = 4,
    n_volumes: int = 110,
    tr: float = 2.0,
    grid_shape: tuple[int, int, int] = (11, 13, 10),
    snr: float = 0.5,
    motion_leak: float = 1.0,
    image_size: int = 48,
    design: str = "event_related",
) -> dict[str, Any]:
    """Write an event-related fMRIPrep-style dataset with planted ROIs.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_sessions, n_runs : int
        Sessions, and runs per session.
    n_volumes : int
        Volumes per run (the first is a non-steady-state volume, 40 % brighter).
    tr : float
        Repetition time (s).
    grid_shape : tuple of int
        Grid of the preprocessed BOLD (3 mm voxels).
    snr : float
        Variance of each ROI voxel's planted response over that of its AR(1) noise,
        on average over runs.
    motion_leak : float
        Standard deviation of the motion artefact in brain voxels, in units of the noise
        standard deviation.
    image_size : int
        Side of the PNG images (pixels).
    design : {"event_related", "blocked"}
        One ~1 s image every 3.5-6.5 s, or blocks of 8-14 s of 0.8 s images (one per
        second) between 10-16 s of fixation; a 16 s rest row in every run either way.

    Returns
    -------
    facts : dict
        ``root``, ``fmriprep_dir``, ``task``, ``subject``, ``sessions``, ``runs``
        (``(session, run)`` pairs), ``tr``, ``n_volumes``, ``space``, ``preproc``,
        ``confounds`` and ``events`` (paths keyed by ``(session, run)``), ``rois``
        (``"visual"``, ``"category"``: boolean masks on the grid), ``brain``,
        ``affine``, ``non_steady_state`` (1) and ``design`` (per ``(session, run)``,
        a dict of ROI name to its planted regressors, shape (n_volumes, n_columns)).
    """
    if design not in ("event_related", "blocked"):
        raise ValueError(f"`design` must be 'event_related' or 'blocked', got {design!r} instead.")
    root = prepare_root(root)
    sub = "01"
    sessions = [f"{s:02d}" for s in range(1, n_sessions + 1)]
    runs = [(ses, f"{r:02d}") for ses in sessions for r in range(1, n_runs + 1)]
    write_dataset_description(root, "neuroflow test shape: event-related image study")
    write_tsv(root / "participants.tsv", {"participant_id": [f"sub-{sub}"], "age": [27]})
    write_json(root / f"task-{TASK}_bold.json", {"TaskName": TASK, "RepetitionTime": tr})
    write_json(
        root / f"task-{TASK}_events.json",
        {"trial_type": {"Description": "Image category (animal, object) or rest"}},
    )

    rng_d = rng_for(seed, "event-related", "design")
    timing = {}
    first = 0
    for key in runs:
        timing[key] = _events(rng_d, n_volumes, tr, first, design)
        first += len(timing[key][0])
    names = [f"img_{i:03d}.png" for i in range(first)]
    images = render_pictures(
        plan_pictures(rng_for(seed, "event-related", "images"), names), image_size
    )
    for name, img in zip(names, images, strict=True):
        write_png(root / "stimuli" / name, img)
    stats = standardise(image_features(images))
    category = rng_for(seed, "event-related", "category").permutation(first) % 2 == 0

    affine = grid_affine(grid_shape, 3.0)
    brain = ellipsoid(grid_shape, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
    visual = ellipsoid(grid_shape, (0.0, -0.55, -0.1), (0.5, 0.35, 0.45)) & brain
    cat_roi = ellipsoid(grid_shape, (0.0, 0.4, 0.25), (0.45, 0.35, 0.4)) & brain & ~visual
    rng_w = rng_for(seed, "event-related", "weights")
    w_visual = np.array([0.6, 1.0, 0.7])  # evoked, luminance mean, luminance std
    gains = {"visual": np.exp(0.3 * rng_w.standard_normal(int(visual.sum())))}
    gains["category"] = np.exp(0.3 * rng_w.standard_normal(int(cat_roi.sum())))
    leak = rng_w.standard_normal((6, int(brain.sum())))

    design, courses = {}, {}
    for key in runs:
        onsets, durations, idx, _ = timing[key]
        values = np.column_stack(
            [np.ones(len(idx)), stats[idx, 0], stats[idx, 1], category[idx].astype(float)]
        )
        conv = hrf_convolve(values, onsets, durations, n_volumes, tr, oversampling=int(tr / 0.1))
        design[key] = {"visual": conv[:, :3], "category": conv[:, 3:]}
        courses[key] = np.column_stack([conv[:, :3] @ w_visual, conv[:, 3]])
    scale = np.sqrt(snr) / np.concatenate(list(courses.values())).std(axis=0)

    rng_n = rng_for(seed, "event-related", "noise")
    out_dir = root / "derivatives" / "fmriprep" / f"sub-{sub}"
    paths: dict[str, dict] = {"preproc": {}, "confounds": {}, "events": {}}
    for key in runs:
        ses, run = key
        onsets, durations, idx, rest_at = timing[key]
        stem = f"sub-{sub}_ses-{ses}_task-{TASK}_run-{run}"
        rows = sorted(
            [
                (o, d, "animal" if category[i] else "object", names[i])
                for o, d, i in zip(onsets, durations, idx, strict=True)
            ]
            + [(rest_at, REST_DURATION, "rest", None)]
        )
        rt = rng_n.uniform(0.4, 1.2, len(rows))
        paths["events"][key] = root / f"sub-{sub}" / f"ses-{ses}" / "func" / f"{stem}_events.tsv"
        write_tsv(
            paths["events"][key],
            {
                "onset": [r[0] for r in rows],
                "duration": [r[1] for r in rows],
                "trial_type": [r[2] for r in rows],
                "stim_file": [r[3] for r in rows],
                "response_time": [None if rng_n.uniform() < 0.35 else v for v in rt],
            },
            decimals={"onset": 3, "duration": 3, "response_time": 3},
        )
        noise = ar1(rng_n, n_volumes, int(brain.sum()), 0.3)
        n_cos = 3
        frames = np.arange(n_volumes)
        basis = np.column_stack(
            [np.cos(np.pi * (frames + 0.5) * k / n_volumes) for k in range(1, n_cos + 1)]
        )
        drift = basis @ rng_n.standard_normal((n_cos, int(brain.sum()))) / np.sqrt(n_cos)
        motion = _motion(rng_n, n_volumes, tr, onsets)
        artefact = standardise(motion) @ leak / np.sqrt(6.0) * motion_leak
        signal = np.zeros((n_volumes, int(brain.sum())))
        inside_v = visual[brain]
        inside_c = cat_roi[brain]
        signal[:, inside_v] = np.outer(courses[key][:, 0] * scale[0], gains["visual"])
        signal[:, inside_c] = np.outer(courses[key][:, 1] * scale[1], gains["category"])
        psc = signal + noise + 2.0 * drift + artefact
        vol = np.zeros((*grid_shape, n_volumes), dtype=np.float32)
        baseline = 800.0 * rng_for(seed, "event-related", "baseline").uniform(
            0.9, 1.1, int(brain.sum())
        )
        vol[brain] = (baseline * (1.0 + psc / 100.0)).T
        vol[..., 0] *= 1.4
        func = out_dir / f"ses-{ses}" / "func"
        base = func / f"{stem}_space-{SPACE}"
        write_nifti(Path(f"{base}_desc-preproc_bold.nii.gz"), vol, affine, tr=tr)
        write_nifti(Path(f"{base}_desc-brain_mask.nii.gz"), brain.astype(np.uint8), affine)
        paths["confounds"][key] = func / f"{stem}_desc-confounds_timeseries.tsv"
        write_tsv(paths["confounds"][key], _confounds_table(motion, rng_n))
        paths["preproc"][key] = Path(f"{base}_desc-preproc_bold.nii.gz")
    write_dataset_description(
        root / "derivatives" / "fmriprep",
        "fMRIPrep - fMRI PREProcessing workflow (simulated)",
        dataset_type="derivative",
        generated_by=[{"Name": "fMRIPrep", "Version": "23.2.0"}],
    )
    return {
        "root": root,
        "fmriprep_dir": root / "derivatives" / "fmriprep",
        "task": TASK,
        "subject": sub,
        "sessions": sessions,
        "runs": runs,
        "tr": tr,
        "n_volumes": n_volumes,
        "space": SPACE,
        **paths,
        "rois": {"visual": visual, "category": cat_roi},
        "brain": brain,
        "affine": affine,
        "non_steady_state": 1,
        "design": design,
    }

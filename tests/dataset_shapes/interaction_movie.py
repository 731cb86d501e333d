"""An fMRI movie whose responses are not all linear in the features of any one TR.

Layout (as :func:`make_fmri_movie`, plus the shots' features in the events tables)::

    dataset_description.json  README  participants.tsv
    stimuli/shots/run1_shot01.png ...                       every shot distinct
    sub-0S/func/sub-0S_task-movie_run-R_bold.nii.gz          R = 1 .. n_runs
    sub-0S/func/sub-0S_task-movie_run-R_bold.json            RepetitionTime
    sub-0S/func/sub-0S_task-movie_run-R_events.tsv           onset duration trial_type
                                                             stim_file v1..v4 s1..s4

Every subject watches the same movies: shots of 2-4 TRs that start on a volume, each
with four ``visual`` (``v1``-``v4``) and four ``semantic`` (``s1``-``s4``) values that
drift slowly from shot to shot (the columns an ``events`` extractor reads as two
feature spaces). Three ROIs of voxels respond to them (percent signal change on AR(1)
noise and slow drifts, each event convolved with SPM's HRF at its onset and for its
duration):

- ``visual``: a rank-2 linear map of the visual values;
- ``semantic``: a rank-2 linear map of the semantic values;
- ``interaction``: a share :data:`INTERACTION_SHARE` of the signal variance is the product
  of one visual and one semantic direction of the shot on screen, the rest a linear map
  of both spaces. No linear map of the features predicts the product; a model that
  combines the two spaces within a time point can.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    ellipsoid,
    grid_affine,
    hrf_convolve,
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
from .fmri_movie import simulate_bold

__all__ = ["INTERACTION_SHARE", "ROIS", "make_interaction_movie"]

TASK = "movie"
NOISE_PSC = 1.0
ROIS = ("visual", "semantic", "interaction")
#: Share of the interaction ROI's signal variance carried by the product term.
INTERACTION_SHARE = 0.8
N_DIMS = 4


def _shot_timing(rng: np.random.Generator, n_volumes: int, tr: float):
    """Onsets and durations of shots of 2-4 whole TRs tiling the run."""
    lengths: list[int] = []
    while sum(lengths) < n_volumes:
        lengths.append(int(rng.integers(2, 5)))
    lengths[-1] -= sum(lengths) - n_volumes
    if lengths[-1] < 1:
        lengths[-2] += lengths.pop()
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return starts * tr, np.asarray(lengths, dtype=float) * tr


def _drifting(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """``n`` rows of ``d`` values, AR(1) from shot to shot (0.7), unit variance."""
    x = np.zeros((n, d))
    x[0] = rng.standard_normal(d)
    for i in range(1, n):
        x[i] = 0.7 * x[i - 1] + np.sqrt(1 - 0.7**2) * rng.standard_normal(d)
    return standardise(x)


def make_interaction_movie(
    root: str | Path,
    *,
    seed: int = 0,
    n_subjects: int = 2,
    n_runs: int = 5,
    n_volumes: int = 240,
    tr: float = 1.5,
    grid_shape: tuple[int, int, int] = (10, 11, 8),
    voxel_size: float = 3.0,
    snr: float = 1.0,
) -> dict[str, Any]:
    """Write an fMRI movie with a linear visual, a linear semantic and an interaction ROI.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_subjects, n_runs, n_volumes : int
        Subjects, runs (one distinct movie each; the last is the one held out) and
        volumes per run.
    tr : float
        Repetition time (s).
    grid_shape : tuple of int
        BOLD grid.
    voxel_size : float
        Voxel side (mm).
    snr : float
        Signal-to-noise variance ratio of every ROI voxel.

    Returns
    -------
    facts : dict
        ``root``, ``task``, ``subjects``, ``runs``, ``tr``, ``n_volumes``,
        ``visual_columns`` / ``semantic_columns`` (events.tsv column names) and
        ``planted``: ``rois`` (subject to a dict of ROI name to boolean mask of
        ``grid_shape``), ``brain`` (subject to mask).
    """
    root = prepare_root(root)
    subjects = [f"{i + 1:02d}" for i in range(n_subjects)]
    runs = [str(r + 1) for r in range(n_runs)]
    write_dataset_description(root, "neuroflow test shape: movie with an interaction ROI")
    (root / "README").write_text(
        "Synthetic fMRI movie (neuroflow tests): one ROI responds to a product of features.\n",
        encoding="utf-8",
    )
    write_tsv(root / "participants.tsv", {"participant_id": [f"sub-{s}" for s in subjects]})

    rng = rng_for(seed, "interaction_movie", "movies")
    timing = {run: _shot_timing(rng, n_volumes, tr) for run in runs}
    run_stimuli = {
        run: [f"shots/run{run}_shot{k + 1:02d}.png" for k in range(len(timing[run][0]))]
        for run in runs
    }
    stim_files = [s for run in runs for s in run_stimuli[run]]
    pictures = plan_pictures(rng, stim_files)
    for pic, img in zip(pictures, render_pictures(pictures, 16), strict=True):
        write_png(root / "stimuli" / pic.stim_file, img)
    visual = _drifting(rng, len(stim_files), N_DIMS)
    semantic = _drifting(rng, len(stim_files), N_DIMS)
    u = rng.standard_normal(N_DIMS) / np.sqrt(N_DIMS)
    w = rng.standard_normal(N_DIMS) / np.sqrt(N_DIMS)
    product = standardise(((visual @ u) * (semantic @ w))[:, None])
    split = np.cumsum([0] + [len(run_stimuli[run]) for run in runs])
    shots = {run: slice(split[i], split[i + 1]) for i, run in enumerate(runs)}

    def convolved(values: np.ndarray) -> np.ndarray:
        """Per-shot values (n_shots, k) as HRF-convolved regressors of every run, stacked."""
        return np.concatenate(
            [hrf_convolve(values[shots[r]], *timing[r], n_volumes, tr) for r in runs]
        )

    designs = {"visual": convolved(visual), "semantic": convolved(semantic)}
    design_product = convolved(product)
    affine = grid_affine(grid_shape, voxel_size)
    vis_cols = [f"v{k + 1}" for k in range(N_DIMS)]
    sem_cols = [f"s{k + 1}" for k in range(N_DIMS)]
    roi_masks, brains = {}, {}
    centres = {
        "visual": (0.0, -0.55, -0.1),
        "semantic": (0.0, 0.55, -0.1),
        "interaction": (0.0, 0.0, 0.5),
    }
    for sub in subjects:
        rng_s = rng_for(seed, "interaction_movie", sub, "responses")
        brain = ellipsoid(grid_shape, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
        masks = {
            roi: ellipsoid(grid_shape, centre, (0.6, 0.4, 0.45)) & brain
            for roi, centre in centres.items()
        }
        assert not (masks["visual"] & masks["semantic"]).any()
        assert not ((masks["visual"] | masks["semantic"]) & masks["interaction"]).any()
        signal_all = np.zeros((n_runs * n_volumes, *grid_shape))
        for roi, mask in masks.items():
            n = int(mask.sum())
            parts = {
                "visual": ("visual",),
                "semantic": ("semantic",),
                "interaction": ("visual", "semantic"),
            }[roi]
            maps = [designs[p] @ rng_s.standard_normal((N_DIMS, 2)) for p in parts]
            latent = standardise(sum(maps))
            signal = standardise(latent @ rng_s.standard_normal((2, n)))
            if roi == "interaction":
                gain = rng_s.uniform(0.5, 1.5, n)
                signal = (
                    np.sqrt(1 - INTERACTION_SHARE) * signal
                    + np.sqrt(INTERACTION_SHARE) * standardise(design_product) * gain
                )
            signal_all[:, mask] = standardise(signal) * np.sqrt(snr) * NOISE_PSC
        rng_n = rng_for(seed, "interaction_movie", sub, "noise")
        for i, run in enumerate(runs):
            signal = signal_all[i * n_volumes : (i + 1) * n_volumes]
            bold = simulate_bold(rng=rng_n, mask=brain, signal=signal, tr=tr)
            stem = root / f"sub-{sub}" / "func" / f"sub-{sub}_task-{TASK}_run-{run}"
            write_nifti(stem.with_name(stem.name + "_bold.nii.gz"), bold, affine, tr=tr)
            write_json(
                stem.with_name(stem.name + "_bold.json"),
                {"TaskName": TASK, "RepetitionTime": tr, "SliceTimingCorrected": False},
            )
            onsets, durations = timing[run]
            table = {
                "onset": onsets,
                "duration": durations,
                "trial_type": ["shot"] * len(onsets),
                "stim_file": run_stimuli[run],
            }
            table.update({c: visual[shots[run], k] for k, c in enumerate(vis_cols)})
            table.update({c: semantic[shots[run], k] for k, c in enumerate(sem_cols)})
            write_tsv(stem.with_name(stem.name + "_events.tsv"), table, default_decimals=4)
        roi_masks[sub], brains[sub] = masks, brain
    return {
        "root": root,
        "task": TASK,
        "subjects": subjects,
        "runs": runs,
        "tr": float(tr),
        "n_volumes": n_volumes,
        "visual_columns": vis_cols,
        "semantic_columns": sem_cols,
        "planted": {"rois": roi_masks, "brain": brains},
    }

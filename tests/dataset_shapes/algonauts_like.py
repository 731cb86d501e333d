"""Parcel time series of movie watching, in the shape of the Algonauts 2025 data.

Layout::

    dataset_description.json  README
    parcels.tsv                                         index name (Schaefer-like names)
    task-movie_timeseries.json                          RepetitionTime 1.49
    stimuli/captions.tsv
    stimuli/shots/movie1_shot01.png ...                 movies 1, 2 (runs 1, 2) and 3 (runs 3, 4)
    sub-0S/func/sub-0S_task-movie_desc-parcels_timeseries.h5
        datasets task-movie_run-1 ... task-movie_run-4, float32 (time, parcel)
    sub-0S/func/sub-0S_task-movie_run-R_events.tsv      onset duration trial_type stim_file

Runs 1 and 2 show distinct movies; runs 3 and 4 show the same test movie (identical
events). Each movie is a sequence of distinct shots (2-6 s) of photo crops.

Planted signal: visual parcels (names containing ``_Vis_``) follow the HRF-convolved
z-scored (luminance mean, luminance SD) of the shot on screen with positive per-parcel
weights, scaled to a per-parcel SNR around ``snr`` (variance ratio to the AR(1) noise);
other parcels are noise only. Every parcel has its own offset and scale (arbitrary
units), as un-normalised parcel averages would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    FEATURE_NAMES,
    ar1,
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
    write_png,
    write_tsv,
)

__all__ = ["NETWORKS", "make_algonauts_like", "parcel_names"]

TASK = "movie"
#: Parcels per hemisphere and Schaefer 7-network name.
NETWORKS = {
    "Vis": 5,
    "SomMot": 3,
    "DorsAttn": 3,
    "SalVentAttn": 3,
    "Limbic": 2,
    "Cont": 2,
    "Default": 2,
}


def parcel_names() -> list[str]:
    """Schaefer-like names, left hemisphere first (``7Networks_LH_Vis_1`` ...)."""
    return [
        f"7Networks_{hemi}_{net}_{k + 1}"
        for hemi in ("LH", "RH")
        for net, n in NETWORKS.items()
        for k in range(n)
    ]


def make_algonauts_like(
    root: str | Path,
    *,
    seed: int = 0,
    n_volumes: int = 150,
    tr: float = 1.49,
    shot_duration: tuple[float, float] = (2.0, 6.0),
    snr: float = 1.0,
    image_size: int = 48,
    n_subjects: int = 2,
) -> dict[str, Any]:
    """Write an Algonauts-like dataset of parcel time series (2 subjects x 4 runs).

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_volumes : int
        Time points per run.
    tr : float
        Repetition time (s), only in ``task-movie_timeseries.json``.
    shot_duration : tuple of float
        Shortest and longest shot (s).
    snr : float
        Median per-parcel SNR (variance ratio) of the visual parcels.
    image_size : int
        Side of the PNG shots (pixels).
    n_subjects : int
        1 or 2; each subject's data do not depend on how many there are.

    Returns
    -------
    facts : dict
        ``root``, ``task``, ``subjects``, ``runs`` (``["1", "2", "3", "4"]``),
        ``train_runs`` (``["1", "2"]``), ``test_runs`` (``["3", "4"]``),
        ``repeat_groups`` (``[["3", "4"]]``), ``run_movies`` (run to movie number),
        ``tr``, ``n_volumes``, ``timeseries`` (subject to the HDF5 path),
        ``datasets`` (run to dataset name), ``events`` (keyed by ``(subject, run)``),
        ``parcels`` (names), ``parcels_tsv``, ``sidecar``, ``stimuli`` (all
        stim_files), ``run_stimuli``, ``features`` and ``feature_values``, ``planted``
        (``visual`` parcel names, ``visual_index`` (0-based columns), ``weights`` per
        subject (n_visual, 2), ``snr``).
    """
    import h5py

    if n_subjects not in (1, 2):
        raise ValueError(f"`n_subjects` must be 1 or 2, got {n_subjects!r} instead.")
    root = prepare_root(root)
    subjects = ["01", "02"][:n_subjects]
    runs = ["1", "2", "3", "4"]
    run_movies = {"1": 1, "2": 2, "3": 3, "4": 3}
    names = parcel_names()
    visual = np.array(["_Vis_" in n for n in names])
    write_dataset_description(root, "neuroflow test shape: Algonauts-like parcel time series")
    (root / "README").write_text(
        "Synthetic Algonauts-like dataset (neuroflow tests): parcel time series of movies.\n",
        encoding="utf-8",
    )
    write_tsv(root / "parcels.tsv", {"index": list(range(1, len(names) + 1)), "name": names})
    write_json(
        root / f"task-{TASK}_timeseries.json",
        {
            "TaskName": TASK,
            "RepetitionTime": tr,
            "Atlas": "Schaefer2018 7Networks (simulated, 40 parcels)",
            "Units": "arbitrary",
        },
    )

    rng = rng_for(seed, "algonauts", "movies")
    timing = {m: tile_durations(rng, n_volumes * tr, shot_duration) for m in (1, 2, 3)}
    movie_stimuli = {
        m: [f"shots/movie{m}_shot{k + 1:02d}.png" for k in range(len(timing[m][0]))]
        for m in (1, 2, 3)
    }
    stim_files = [s for m in (1, 2, 3) for s in movie_stimuli[m]]
    pictures = plan_pictures(rng, stim_files)
    images = render_pictures(pictures, image_size)
    for pic, img in zip(pictures, images, strict=True):
        write_png(root / "stimuli" / pic.stim_file, img)
    write_captions(root / "stimuli" / "captions.tsv", stim_files, [p.caption for p in pictures])
    raw = image_features(images)
    feats = standardise(raw)
    index = {s: i for i, s in enumerate(stim_files)}
    designs = {
        m: hrf_convolve(
            feats[[index[s] for s in movie_stimuli[m]]], *timing[m], n_volumes=n_volumes, tr=tr
        )
        for m in (1, 2, 3)
    }

    ts_paths, event_paths, weights = {}, {}, {}
    for sub in subjects:
        rng_s = rng_for(seed, "algonauts", sub, "weights")
        w = rng_s.uniform(0.3, 1.0, size=(2, int(visual.sum())))
        parcel_snr = snr * np.exp(0.3 * rng_s.standard_normal(int(visual.sum())))
        stacked = np.concatenate([designs[run_movies[r]] for r in runs]) @ w
        w = w * np.sqrt(parcel_snr) / stacked.std(axis=0)
        offset = rng_s.uniform(-50.0, 50.0, size=len(names))
        gain = rng_s.uniform(0.5, 2.0, size=len(names))
        rng_n = rng_for(seed, "algonauts", sub, "noise")
        func = root / f"sub-{sub}" / "func"
        func.mkdir(parents=True, exist_ok=True)
        path = func / f"sub-{sub}_task-{TASK}_desc-parcels_timeseries.h5"
        with h5py.File(path, "w") as f:
            for run in runs:
                m = run_movies[run]
                y = ar1(rng_n, n_volumes, len(names), 0.3)
                y[:, visual] += designs[m] @ w
                y = (y * gain + offset).astype(np.float32)
                f.create_dataset(f"task-{TASK}_run-{run}", data=y, track_times=False)
        ts_paths[sub] = path
        for run in runs:
            m = run_movies[run]
            onsets, durations = timing[m]
            events = func / f"sub-{sub}_task-{TASK}_run-{run}_events.tsv"
            write_tsv(
                events,
                {
                    "onset": onsets,
                    "duration": durations,
                    "trial_type": ["shot"] * len(onsets),
                    "stim_file": movie_stimuli[m],
                },
                default_decimals=3,
            )
            event_paths[sub, run] = events
        weights[sub] = w.T
    return {
        "root": root,
        "task": TASK,
        "subjects": subjects,
        "runs": runs,
        "train_runs": ["1", "2"],
        "test_runs": ["3", "4"],
        "repeat_groups": [["3", "4"]],
        "run_movies": run_movies,
        "tr": float(tr),
        "n_volumes": n_volumes,
        "timeseries": ts_paths,
        "datasets": {run: f"task-{TASK}_run-{run}" for run in runs},
        "events": event_paths,
        "parcels": names,
        "parcels_tsv": root / "parcels.tsv",
        "sidecar": root / f"task-{TASK}_timeseries.json",
        "stimuli": stim_files,
        "run_stimuli": {run: movie_stimuli[run_movies[run]] for run in runs},
        "features": list(FEATURE_NAMES),
        "feature_values": dict(zip(stim_files, raw, strict=True)),
        "planted": {
            "visual": [n for n, v in zip(names, visual, strict=True) if v],
            "visual_index": np.flatnonzero(visual).tolist(),
            "weights": weights,
            "snr": snr,
        },
    }

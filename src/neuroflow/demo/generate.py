"""Write the demo BIDS dataset and read its ground truth back."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..artifacts import atomic_directory
from ..extras import require
from ..features.image_statistics import FEATURE_NAMES, image_statistics
from . import eeg as eeg_sim
from . import fmri as fmri_sim
from ._config import resolve_config
from ._io import png_bytes, read_npz, write_json, write_nifti, write_npz, write_png, write_tsv
from .cache import generate_cached
from .layout import CONFOUNDS, EEG_TASK, FMRI_TASK, GROUNDTRUTH, demo_layout, run_movies
from .stimuli import (
    FRAMINGS,
    POOL_FOLDER,
    WIDE,
    Shot,
    crop_key,
    embed_captions,
    plan_eeg_images,
    plan_movies,
    plan_pool,
    render_shot,
    rng_for,
)

__all__ = [
    "FORMAT_VERSION",
    "MARKER",
    "foreign_files",
    "generate_demo_dataset",
    "load_ground_truth",
]

#: Bumped when the dataset's content changes meaning.
FORMAT_VERSION = 5
#: The demo's provenance record at the dataset root; its ``files`` lists every file
#: the generator wrote (relative POSIX paths, the marker included).
MARKER = ".neuroflow.json"
BIDS_VERSION = "1.9.0"
SEMANTIC_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_GENERATED_BY = [{"Name": "neuroflow", "Description": "neuroflow.demo simulation"}]
_MOTION = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z")

README = """\
neuroflow demo dataset
======================

A small simulated dataset: fMRI while watching a "movie" of crops of photographs and
EEG while viewing flashed images of the same kind. Responses are simulated from
low-level image statistics (early visual ROI, posterior ~100 ms EEG topographies) and
from sentence embeddings of each image's caption (semantic ROI, centro-parietal
~400 ms EEG topographies), with realistic noise. Photographs come from scikit-image's
bundled data. The planted ground truth is under derivatives/groundtruth/ (see
groundtruth.json). Runs listed as "test" in groundtruth.json show the same movie.
"""


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (x - mean) / sd, mean, sd


def _write_top_level(root: Path, cfg: Mapping[str, Any], subjects: tuple[str, ...]) -> None:
    write_json(
        root / "dataset_description.json",
        {
            "Name": "neuroflow demo: simulated movie fMRI and image EEG",
            "BIDSVersion": BIDS_VERSION,
            "DatasetType": "raw",
            "License": "CC0",
            "Authors": ["neuroflow contributors"],
            "GeneratedBy": _GENERATED_BY,
            "HowToAcknowledge": "Simulated data; photographs from scikit-image's data module.",
        },
    )
    rng = rng_for(cfg["seed"], "participants")
    write_tsv(
        root / "participants.tsv",
        {
            "participant_id": [f"sub-{s}" for s in subjects],
            "age": [int(a) for a in rng.integers(20, 40, size=len(subjects))],
            "sex": [str(x) for x in rng.choice(["F", "M"], size=len(subjects))],
        },
    )
    write_json(
        root / "participants.json",
        {
            "age": {"Description": "Simulated age of the participant", "Units": "year"},
            "sex": {"Description": "Simulated sex", "Levels": {"F": "female", "M": "male"}},
        },
    )
    (root / "README").write_text(README, encoding="utf-8")
    (root / ".bidsignore").write_text("sub-*/anat/*_desc-brain_mask.nii.gz\n", encoding="utf-8")
    f = cfg["fmri"]
    write_json(
        root / f"task-{FMRI_TASK}_bold.json",
        {
            "TaskName": FMRI_TASK,
            "RepetitionTime": f["tr"],
            "TaskDescription": "Passive viewing of a movie of cropped photographs.",
            "SliceTimingCorrected": False,
            "Manufacturer": "neuroflow simulation",
        },
    )
    write_json(
        root / f"task-{FMRI_TASK}_events.json",
        {
            "trial_type": {"Description": "Always 'shot': one continuous view of one image."},
            "stim_file": {"Description": "Image on screen, relative to stimuli/."},
        },
    )
    write_json(
        root / f"task-{EEG_TASK}_events.json",
        {
            "trial_type": {
                "Description": "Image set",
                "Levels": {"train": "shown once", "test": "shown repeatedly"},
            },
            "value": {"Description": "Trigger code: 1 = train image, 2 = test image"},
            "sample": {"Description": "Onset sample (0-based)"},
            "stim_file": {"Description": "Image on screen, relative to stimuli/."},
        },
    )


def _distinct_crops(shots: Sequence[Shot]) -> tuple[list[Shot], np.ndarray]:
    """The first shot of each distinct crop, and the crop of every shot.

    Shots that frame the same pixels (the same :func:`~neuroflow.demo.stimuli.crop_key`)
    render to the same image, so each crop is rendered once.

    Parameters
    ----------
    shots : sequence of Shot
        Stimuli in dataset order.

    Returns
    -------
    crops : list of Shot
        One shot per distinct crop, in order of first appearance.
    which : ndarray of int, shape (n_shots,)
        Index into ``crops`` of each shot's crop.
    """
    first: dict[tuple[str, int, int, int], int] = {}
    crops: list[Shot] = []
    which = np.empty(len(shots), dtype=np.intp)
    for i, shot in enumerate(shots):
        key = crop_key(shot)
        if key not in first:
            first[key] = len(crops)
            crops.append(shot)
        which[i] = first[key]
    return crops, which


def _render_stimuli(root: Path, shots: list[Shot], size: int) -> tuple[np.ndarray, np.ndarray]:
    """Write every stimulus PNG, rendering and encoding each distinct crop once.

    Returns
    -------
    images : ndarray of uint8, shape (n_crops, size, size, 3)
        The distinct crops (see :func:`_distinct_crops`).
    which : ndarray of int, shape (n_shots,)
        Index into ``images`` of each shot's image.
    """
    crops, which = _distinct_crops(shots)
    images = np.stack([render_shot(s, size) for s in crops])
    encoded = [png_bytes(img) for img in images]
    for shot, k in zip(shots, which, strict=True):
        path = root / "stimuli" / shot.stim_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(encoded[k])
    write_tsv(
        root / "stimuli" / "captions.tsv",
        {"stim_file": [s.stim_file for s in shots], "caption": [s.caption for s in shots]},
    )
    write_tsv(
        root / "stimuli" / "concepts.tsv",
        {"stim_file": [s.stim_file for s in shots], "concepts": [shot_concepts(s) for s in shots]},
    )
    return images, which


def shot_concepts(shot: Shot) -> str:
    """The concept labels of a shot, ``;``-separated: photograph, region, framing.

    The photograph (e.g. ``chelsea``) and the region (e.g. ``eyes``; none for a wide shot
    of the whole photograph) carry both feature spaces of the response model; the
    framing (``close-up``, ``medium shot``, ``wide shot``) mostly the visual one.
    """
    framing = FRAMINGS.get(shot.zoom, WIDE).removeprefix("a ").removesuffix(" of")
    labels = [shot.photo] + ([shot.region] if shot.region != "full" else []) + [framing]
    return ";".join(labels)


def _pool_name(shot: Shot) -> str:
    """File name of a pool image relative to ``stimuli/pool/``."""
    return shot.stim_file.removeprefix(f"{POOL_FOLDER}/")


def _render_pool(root: Path, pool: list[Shot], size: int) -> np.ndarray:
    """Write the pool PNGs and ``stimuli/pool/captions.tsv``.

    Returns
    -------
    images : ndarray of uint8, shape (n_pool, size, size, 3)
    """
    images = np.stack([render_shot(s, size) for s in pool])
    for shot, img in zip(pool, images, strict=True):
        write_png(root / "stimuli" / shot.stim_file, img)
    write_tsv(
        root / "stimuli" / POOL_FOLDER / "captions.tsv",
        {"stim_file": [_pool_name(s) for s in pool], "caption": [s.caption for s in pool]},
    )
    return images


def _restandardise(x: np.ndarray, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """``(x - mean) / sd`` in float64, with the stimuli's mean and std, shape of ``x``."""
    return (np.asarray(x, dtype=np.float64) - mean) / sd


def _write_pool_drives(
    path: Path,
    pool: list[Shot],
    truth: Mapping[str, np.ndarray],
    z_vis: np.ndarray,
    z_sem: np.ndarray,
) -> None:
    """Write one subject's ROI-mean planted drives of the pool images.

    ``z_vis`` (n_pool, 24) and ``z_sem`` (n_pool, 384) are the pool's features
    standardised with the stimuli's mean and std; ``truth`` holds the subject's
    ``roi`` and weights (see :func:`neuroflow.demo.fmri.roi_drives`).
    """
    drives = fmri_sim.roi_drives(
        roi=truth["roi"],
        weights_visual=truth["weights_visual"],
        weights_semantic=truth["weights_semantic"],
        visual=z_vis,
        semantic=z_sem,
    )
    write_tsv(path, {"stim_file": [_pool_name(s) for s in pool]} | drives, default_decimals=None)


def _write_pool_tables(
    gt: Path, pool: list[Shot], vis_raw: np.ndarray, sem_raw: np.ndarray
) -> None:
    """Write ``pool_features.npz`` (raw features) and ``pool_stimuli.tsv`` (crops).

    ``vis_raw`` (n_pool, 24) are the image statistics, ``sem_raw`` (n_pool, 384) the
    caption embeddings, neither standardised.
    """
    names = [_pool_name(s) for s in pool]
    write_npz(
        gt / "pool_features.npz",
        pool_stimulus=np.array(names),
        pool_visual=vis_raw,
        visual_names=np.array(FEATURE_NAMES),
        pool_semantic=sem_raw,
    )
    write_tsv(
        gt / "pool_stimuli.tsv",
        {
            "stim_file": names,
            "photo": [s.photo for s in pool],
            "region": [s.region for s in pool],
            "zoom": [s.zoom for s in pool],
            "pan_row": [s.pan[0] for s in pool],
            "pan_col": [s.pan[1] for s in pool],
            "caption": [s.caption for s in pool],
        },
        default_decimals=4,
    )


def _write_fmri_subject(root, cfg, sub, layout_runs, sim, affine, movies) -> None:
    f = cfg["fmri"]
    write_nifti(
        root / f"sub-{sub}" / "anat" / f"sub-{sub}_desc-brain_mask.nii.gz",
        sim.mask.astype(np.uint8),
        affine,
    )
    t1w = fmri_sim.synthetic_t1w(sim.mask, rng_for(cfg["seed"], "fmri", sub, "t1w"))
    write_nifti(root / f"sub-{sub}" / "anat" / f"sub-{sub}_T1w.nii.gz", t1w, affine)
    for rec, bold, motion, movie in zip(layout_runs, sim.bold, sim.motion, movies, strict=True):
        write_nifti(rec.bold, bold, affine, tr=f["tr"])
        write_tsv(
            rec.events,
            {
                "onset": list(movie.onsets),
                "duration": list(movie.durations),
                "trial_type": ["shot"] * len(movie.shots),
                "stim_file": [s.stim_file for s in movie.shots],
            },
            default_decimals=3,
        )
        if rec.confounds is not None:
            cols = _motion_columns(motion)
            cols["framewise_displacement"] = fmri_sim.framewise_displacement(motion)
            write_tsv(rec.confounds, cols, default_decimals=6)


def _motion_columns(motion: np.ndarray) -> dict[str, np.ndarray]:
    """fMRIPrep's 24 motion columns of (n_volumes, 6) parameters (derivatives n/a first)."""
    cols = {}
    for i, name in enumerate(_MOTION):
        deriv = np.concatenate([[np.nan], np.diff(motion[:, i])])
        cols[name] = motion[:, i]
        cols[f"{name}_derivative1"] = deriv
        cols[f"{name}_power2"] = motion[:, i] ** 2
        cols[f"{name}_derivative1_power2"] = deriv**2
    return cols


def _add_ceilings(sim: fmri_sim.FmriSubject, cfg: Mapping[str, Any], recs: list) -> None:
    """Add the noise ceilings after the default cleaning to ``sim.truth``."""
    from .ceiling import cleaned_ceilings, cleaning_models

    f = cfg["fmri"]
    n_brain = sim.truth["roi"].size
    ceilings = dict.fromkeys(("ceiling_single", "ceiling_mean", "ceiling_realized"))
    if sim.test_noise:
        runs = sorted(sim.test_noise)
        models = cleaning_models(
            tr=f["tr"], n_volumes=f["n_volumes"], confounds=[recs[r].confounds for r in runs]
        )
        ceilings = cleaned_ceilings(
            signal=sim.truth["signal"][runs[0]].astype(np.float64),
            noise=[sim.test_noise[r] for r in runs],
            nuisance=[sim.test_nuisance[r] for r in runs],
            models=models,
            noise_sd=f["noise_psc"],
            ar_coef=f["ar_coef"],
        )
    for key, value in ceilings.items():
        sim.truth[key] = (np.zeros(n_brain) if value is None else value).astype(np.float32)


def _write_eeg_subject(root, cfg, sub, rec, sim, images, order) -> None:
    pybv = require("pybv", "The demo dataset's EEG recordings")

    e = cfg["eeg"]
    ch_names = list(eeg_sim.CHANNELS[: e["n_channels"]])
    test = np.array([images[i].split == "test" for i in order])
    codes = np.where(test, 2, 1)
    events = np.column_stack([sim.onsets, np.ones_like(sim.onsets), codes])
    rec.eeg.parent.mkdir(parents=True, exist_ok=True)
    pybv.write_brainvision(
        data=sim.data,
        sfreq=float(e["sfreq"]),
        ch_names=ch_names,
        ref_ch_names=eeg_sim.REFERENCE,
        fname_base=rec.eeg.stem,
        folder_out=str(rec.eeg.parent),
        events=events,
        resolution=0.01,
        unit="µV",
        fmt="binary_float32",
        meas_date=None,
        overwrite=True,
    )
    sfreq = float(e["sfreq"])
    write_tsv(
        rec.events,
        {
            "onset": [o / sfreq for o in sim.onsets],
            "duration": [float(e["stim_duration"])] * len(order),
            "trial_type": ["test" if t else "train" for t in test],
            "value": [int(c) for c in codes],
            "sample": [int(o) for o in sim.onsets],
            "stim_file": [images[i].stim_file for i in order],
        },
        default_decimals=4,
    )
    write_tsv(
        rec.channels,
        {
            "name": ch_names,
            "type": ["EEG"] * len(ch_names),
            "units": ["µV"] * len(ch_names),
            "low_cutoff": ["n/a"] * len(ch_names),
            "high_cutoff": ["n/a"] * len(ch_names),
            "status": ["good"] * len(ch_names),
        },
    )
    pos = eeg_sim.channel_positions(ch_names)
    write_tsv(
        rec.electrodes,
        {"name": ch_names, "x": pos[:, 0], "y": pos[:, 1], "z": pos[:, 2]},
        default_decimals=6,
    )
    write_json(
        rec.electrodes.parent / f"sub-{sub}_coordsystem.json",
        {
            "EEGCoordinateSystem": "CapTrak",
            "EEGCoordinateUnits": "m",
            "EEGCoordinateSystemDescription": (
                "MNE head frame of the standard 10-20 montage: RAS, origin between the "
                "preauricular points."
            ),
        },
    )
    write_json(
        rec.sidecars[0],
        {
            "TaskName": EEG_TASK,
            "TaskDescription": "Passive viewing of briefly flashed images.",
            "SamplingFrequency": sfreq,
            "PowerLineFrequency": float(e["line_freq"]),
            "EEGReference": eeg_sim.REFERENCE,
            "EEGGround": eeg_sim.GROUND,
            "EEGPlacementScheme": "10-20",
            "EEGChannelCount": len(ch_names),
            "SoftwareFilters": "n/a",
            "RecordingType": "continuous",
            "RecordingDuration": round(sim.data.shape[1] / sfreq, 6),
            "Manufacturer": "neuroflow simulation",
        },
    )


def _pool_meta(n_images: int) -> dict[str, Any] | None:
    """The ``pool`` entry of ``groundtruth.json`` (``None`` without a pool)."""
    if n_images == 0:
        return None
    return {
        "n_images": n_images,
        "folder": f"stimuli/{POOL_FOLDER}",
        "stimulus_ids": "file names relative to the pool folder",
        "captions": f"stimuli/{POOL_FOLDER}/captions.tsv",
        "features": "pool_features.npz",
        "crops": "pool_stimuli.tsv",
        "drives": "sub-<label>/sub-<label>_pool.tsv",
        "drive": (
            "mean over the ROI's voxels of weights_<space> @ z_<space>(image), z standardised "
            "with the stimuli's mean and std of features.npz"
        ),
        "units": "percent signal change per unit of the convolved design",
    }


def _groundtruth_meta(cfg, layout, shots, n_vis_per_subject) -> dict[str, Any]:
    runs = run_movies(cfg)
    return {
        "format_version": FORMAT_VERSION,
        "seed": cfg["seed"],
        "subjects": list(layout.subjects),
        "config": cfg,
        "features": {
            "file": "features.npz",
            "stimulus_ids": "stimulus",
            "visual": {"names": list(FEATURE_NAMES), "extractor": "image_statistics"},
            "semantic": {"model": SEMANTIC_MODEL, "input": "caption", "dim": 384},
            "standardisation": "(x - mean) / std over all stimuli, stored in features.npz",
        },
        "fmri": {
            "task": FMRI_TASK,
            "tr": cfg["fmri"]["tr"],
            "n_volumes": cfg["fmri"]["n_volumes"],
            "runs": [{"run": r, "movie": m, "split": s} for r, m, s in runs],
            "train_runs": list(layout.train_runs),
            "test_runs": list(layout.test_runs),
            "repeat_groups": [list(layout.test_runs)] if layout.test_runs else [],
            "rois": {str(k): v for k, v in fmri_sim.ROI_NAMES.items()},
            "hrf": "glover (nilearn), unit sum, frame times n * TR",
            "noise_psc": cfg["fmri"]["noise_psc"],
            "ar_coef": cfg["fmri"]["ar_coef"],
            "snr": cfg["fmri"]["snr"],
            "files": {
                "rois": "sub-<label>/sub-<label>_desc-rois_dseg.nii.gz",
                "voxels": "sub-<label>/sub-<label>_fmri.npz",
            },
        },
        "eeg": {
            "task": EEG_TASK,
            "reference": eeg_sim.REFERENCE,
            "latencies": cfg["eeg"]["latencies"],
            "widths": dict(eeg_sim.WIDTHS),
            "centres": {
                k: list(v[: cfg["eeg"]["n_components"]]) for k, v in eeg_sim.CENTRES.items()
            },
            "snr": cfg["eeg"]["snr"],
            "files": {"components": "sub-<label>/sub-<label>_eeg.npz"},
        },
        "n_visual_features": n_vis_per_subject,
        "n_stimuli": len(shots),
        "pool": _pool_meta(cfg["pool"]["n_images"]),
    }


def generate_demo_dataset(
    *, output: str | Path, config: Mapping[str, Any], provenance: Mapping[str, Any]
) -> Path:
    """Write the demo BIDS dataset (stage entry point).

    Parameters
    ----------
    output : path-like
        Dataset root; replaced atomically once the new dataset is complete.
    config : dict
        The ``demo`` section (missing keys take their defaults).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`, written to
        ``output/.neuroflow.json``.

    Returns
    -------
    output : Path
        The dataset root, holding exactly the files of
        :func:`~neuroflow.demo.demo_layout`.

    Notes
    -----
    With ``NEUROFLOW_DEMO_CACHE`` set, the files are copied from the dataset generated
    there for the same config, package source and libraries (:mod:`neuroflow.demo.cache`),
    generated first if it is missing; the marker file is written anew.
    """
    cfg = resolve_config(config)
    output = Path(output)
    with atomic_directory(output) as tmp:
        generate_cached(tmp, cfg, _generate)
        files = [*_relative_entries(tmp), MARKER]
        record = {**dict(provenance), "files": sorted(set(files))}
        (tmp / MARKER).write_text(
            json.dumps(record, indent=2, sort_keys=True, default=str) + "\n",
            encoding="utf-8",
        )
    return output


def _relative_entries(root: Path) -> list[str]:
    """Files, links and empty folders under ``root``, as relative POSIX paths."""
    out = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        links = [d for d in dirs if (here / d).is_symlink()]
        out += [(here / name).relative_to(root).as_posix() for name in [*files, *links]]
        if not dirs and not files and here != root:
            out.append(here.relative_to(root).as_posix() + "/")
    return out


def _demo_files(root: Path) -> set[str] | None:
    """What the demo marker of ``root`` says the generator wrote (None: no demo marker).

    A marker without a ``files`` list (older demos) is answered with the files of the
    layout of the config it records.
    """
    try:
        record = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or str(record.get("stage")) != "demo":
        return None
    if isinstance(record.get("files"), list):
        return {str(name) for name in record["files"]}
    try:
        layout = demo_layout(record.get("config") or {}, root)
    except (KeyError, TypeError, ValueError):
        return {MARKER}
    return {path.relative_to(root).as_posix() for path in layout.files} | {MARKER}


def foreign_files(folder: str | os.PathLike) -> list[Path]:
    """What lies in ``folder`` that the demo generator did not write there.

    Parameters
    ----------
    folder : path-like
        A folder the demo is about to be generated into (replacing all it holds).

    Returns
    -------
    paths : list of Path
        Files, links and empty folders not listed by the demo marker of ``folder``
        (:data:`MARKER`), sorted; every entry when ``folder`` holds no demo marker (or
        the marker of another stage); empty when ``folder`` is missing or empty.
    """
    root = Path(folder)
    if not root.is_dir():
        return []
    written = _demo_files(root) or set()
    return [root / name for name in sorted(_relative_entries(root)) if name not in written]


def _generate(root: Path, cfg: dict[str, Any]) -> None:
    layout = demo_layout(cfg, root)
    f = cfg["fmri"]
    train, test = plan_movies(cfg)
    images, order = plan_eeg_images(cfg)
    movies_by_name = {m.name: m for m in [*train, *([test] if test else [])]}
    shots = [s for m in movies_by_name.values() for s in m.shots] + images
    _write_top_level(root, cfg, layout.subjects)
    crops, which = _render_stimuli(root, shots, cfg["image_size"])
    # the statistics of an image do not depend on the other images of the batch
    vis_raw = image_statistics(crops)[which]
    sem_raw = embed_captions([s.caption for s in shots])
    vis, vis_mean, vis_sd = _standardise(vis_raw)
    sem, sem_mean, sem_sd = _standardise(sem_raw.astype(np.float64))
    index = {s.stim_file: i for i, s in enumerate(shots)}
    pool = plan_pool(cfg, shots) if cfg["pool"]["n_images"] else []
    if pool:
        pool_vis = image_statistics(_render_pool(root, pool, cfg["image_size"]))
        pool_sem = embed_captions([s.caption for s in pool])
        z_pool_vis = _restandardise(pool_vis, vis_mean, vis_sd)
        z_pool_sem = _restandardise(pool_sem, sem_mean, sem_sd)

    designs = {}
    for name, movie in movies_by_name.items():
        idx = np.array([index[s.stim_file] for s in movie.shots])
        designs[name] = (
            fmri_sim.convolved_design(vis, idx, movie, f["n_volumes"], f["tr"]),
            fmri_sim.convolved_design(sem, idx, movie, f["n_volumes"], f["tr"]),
        )
    run_list = [movies_by_name[m] for _, m, _ in run_movies(cfg)]
    affine = fmri_sim.grid_affine(f["grid_shape"], f["voxel_size"])
    gt = root / GROUNDTRUTH
    trial_idx = np.array([index[images[i].stim_file] for i in order])
    for sub in layout.subjects:
        sim = fmri_sim.simulate_subject(
            config=cfg,
            subject=sub,
            runs=run_list,
            designs=designs,
            test_movie=test.name if test else None,
        )
        recs = [r for r in layout.fmri_runs if r.subject == sub]
        _write_fmri_subject(root, cfg, sub, recs, sim, affine, run_list)
        _add_ceilings(sim, cfg, recs)
        write_nifti(gt / f"sub-{sub}" / f"sub-{sub}_desc-rois_dseg.nii.gz", sim.labels, affine)
        write_npz(
            gt / f"sub-{sub}" / f"sub-{sub}_fmri.npz",
            affine=affine,
            run=np.array([r for r, _, _ in run_movies(cfg)]),
            **sim.truth,
        )
        if pool:
            path = gt / f"sub-{sub}" / f"sub-{sub}_pool.tsv"
            _write_pool_drives(path, pool, sim.truth, z_pool_vis, z_pool_sem)
        esim = eeg_sim.simulate_subject(
            config=cfg,
            subject=sub,
            features_visual=vis[trial_idx],
            features_semantic=sem[trial_idx],
        )
        rec = next(r for r in layout.eeg_recordings if r.subject == sub)
        _write_eeg_subject(root, cfg, sub, rec, esim, images, order)
        write_npz(
            gt / f"sub-{sub}" / f"sub-{sub}_eeg.npz",
            ch_names=np.array(eeg_sim.CHANNELS[: cfg["eeg"]["n_channels"]]),
            onsets=esim.onsets,
            stimulus=np.array([images[i].stim_file for i in order]),
            **esim.truth,
        )
        # before the next subject is simulated: one subject in memory at a time
        del sim, esim

    write_json(
        gt / "dataset_description.json",
        {
            "Name": "neuroflow demo ground truth",
            "BIDSVersion": BIDS_VERSION,
            "DatasetType": "derivative",
            "GeneratedBy": _GENERATED_BY,
        },
    )
    write_tsv(
        gt / "rois.tsv",
        {
            "index": list(fmri_sim.ROI_NAMES),
            "name": list(fmri_sim.ROI_NAMES.values()),
        },
    )
    write_tsv(
        gt / "stimuli.tsv",
        {
            "stim_file": [s.stim_file for s in shots],
            "split": [s.split for s in shots],
            "photo": [s.photo for s in shots],
            "region": [s.region for s in shots],
            "zoom": [s.zoom for s in shots],
            "pan_row": [s.pan[0] for s in shots],
            "pan_col": [s.pan[1] for s in shots],
            "caption": [s.caption for s in shots],
        },
        default_decimals=4,
    )
    write_npz(
        gt / "features.npz",
        stimulus=np.array([s.stim_file for s in shots]),
        visual=vis_raw,
        visual_names=np.array(FEATURE_NAMES),
        visual_mean=vis_mean,
        visual_std=vis_sd,
        semantic=sem_raw,
        semantic_mean=sem_mean,
        semantic_std=sem_sd,
    )
    write_tsv(
        gt / "features_visual.tsv",
        {"stim_file": [s.stim_file for s in shots]}
        | {name: vis_raw[:, j] for j, name in enumerate(FEATURE_NAMES)},
        default_decimals=None,
    )
    if pool:
        _write_pool_tables(gt, pool, pool_vis, pool_sem)
    write_json(gt / "groundtruth.json", _groundtruth_meta(cfg, layout, shots, len(FEATURE_NAMES)))
    if f["write_confounds"]:
        write_json(
            root / CONFOUNDS / "dataset_description.json",
            {
                "Name": "neuroflow demo motion confounds",
                "BIDSVersion": BIDS_VERSION,
                "DatasetType": "derivative",
                "GeneratedBy": _GENERATED_BY,
            },
        )


def load_ground_truth(root: str | Path) -> dict[str, Any]:
    """Read the planted ground truth of a demo dataset.

    Parameters
    ----------
    root : path-like
        Dataset root written by :func:`generate_demo_dataset`.

    Returns
    -------
    truth : dict
        The metadata of ``groundtruth.json`` plus ``"stimuli"`` (``features.npz``
        arrays: ``stimulus`` ids, raw ``visual`` and ``semantic`` features and their
        standardisation), ``"pool_features"`` (``pool_features.npz`` arrays:
        ``pool_stimulus`` ids, raw ``pool_visual`` (n_pool, 24) and ``pool_semantic``
        (n_pool, 384); ``None`` without a pool) and ``"subject"``: per label, ``"fmri"``
        (the voxel arrays of ``sub-<label>_fmri.npz`` plus ``labels``, the ROI image,
        shape (X, Y, Z)), ``"eeg"`` (the arrays of ``sub-<label>_eeg.npz``) and
        ``"pool"`` (the columns of ``sub-<label>_pool.tsv``: ``stim_file`` and the
        ``<roi>_<space>`` drives, each shape (n_pool,), in percent signal change per
        unit of the convolved design; ``None`` without a pool).
    """
    import nibabel as nib

    gt = Path(root) / GROUNDTRUTH
    meta_file = gt / "groundtruth.json"
    if not meta_file.exists():
        raise FileNotFoundError(f"No demo ground truth at {meta_file}.")
    truth = json.loads(meta_file.read_text(encoding="utf-8"))
    truth["stimuli"] = read_npz(gt / "features.npz")
    has_pool = bool(truth.get("pool"))
    truth["pool_features"] = read_npz(gt / "pool_features.npz") if has_pool else None
    truth["subject"] = {}
    for sub in truth["subjects"]:
        fmri = read_npz(gt / f"sub-{sub}" / f"sub-{sub}_fmri.npz")
        fmri["labels"] = np.asarray(
            nib.load(gt / f"sub-{sub}" / f"sub-{sub}_desc-rois_dseg.nii.gz").dataobj
        )
        truth["subject"][sub] = {
            "fmri": fmri,
            "eeg": read_npz(gt / f"sub-{sub}" / f"sub-{sub}_eeg.npz"),
            "pool": _read_drives(gt / f"sub-{sub}" / f"sub-{sub}_pool.tsv") if has_pool else None,
        }
    return truth


def _read_drives(path: Path) -> dict[str, np.ndarray]:
    """Columns of a ``sub-<label>_pool.tsv``: ``stim_file`` (str), drives (float64)."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    header, body = rows[0], rows[1:]
    columns = {name: [row[j] for row in body] for j, name in enumerate(header)}
    return {
        name: np.array(values) if name == "stim_file" else np.array(values, dtype=np.float64)
        for name, values in columns.items()
    }

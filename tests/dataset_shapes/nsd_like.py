"""Single-trial betas estimated elsewhere, in the shape of the Natural Scenes Dataset.

Layout::

    dataset_description.json  README
    stimuli/captions.tsv
    stimuli/nsd/nsdNNNNN.png                                   5-digit NSD-like ids
    sub-01/sub-01_ncsnr.nii.gz                                 (``ncsnr=True``)
    sub-01/ses-0K/func/sub-01_ses-0K_betas.nii.gz              float32 (x, y, z, trial), % signal
    sub-01/ses-0K/func/sub-01_ses-0K_trials.tsv                stim_file trial_type run
    sub-02/sub-02_mask.nii.gz                                  uint8; its non-zero voxels in
                                                               C order are the HDF5 columns
    sub-02/ses-0K/func/sub-02_ses-0K_betas.h5                  dataset ``betas`` int16
                                                               (trial, voxel), attr scale=300
    sub-02/ses-0K/func/sub-02_ses-0K_trials.tsv
    derivatives/rois/dataset_description.json
    derivatives/rois/rois.tsv                                  index name: 1 early_visual, 2 other
    derivatives/rois/sub-0S_desc-rois_dseg.nii.gz              on each subject's grid

Each subject has two sessions of ``n_trials`` trials in three runs. ``n_test`` shared
test images are shown ``n_repeats`` times to every subject (presentations spread over
both sessions); every other trial shows a subject-specific image once. Stored values are
``beta / 300`` rounded to int16 for sub-02 (``betas = stored / scale``), as NSD does.

Planted signal: in ``early_visual`` voxels, ``beta = X @ w + session offset + noise``,
where ``X`` is the image's z-scored (luminance mean, luminance SD), ``w`` per-voxel
positive weights scaled so that ``var(X @ w) / var(noise)`` is around ``snr``; ``other``
voxels are offset + noise. Outside the brain the NIfTI betas are 0. The NCSNR image is
computed from the data as NSD defines it (betas z-scored per session; noise SD from
the test images' repeats).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    FEATURE_NAMES,
    ellipsoid,
    grid_affine,
    image_features,
    plan_pictures,
    prepare_root,
    render_pictures,
    rng_for,
    standardise,
    write_captions,
    write_dataset_description,
    write_nifti,
    write_png,
    write_tsv,
)

__all__ = ["ROI_NAMES", "make_nsd_like"]

ROI_NAMES = {1: "early_visual", 2: "other"}
SCALE = 300
GRIDS = {"01": (10, 12, 9), "02": (11, 10, 9)}
VOXEL_SIZE = 2.0


def _ncsnr(betas_by_session: list[np.ndarray], stims_by_session: list[list[str]], test: list[str]):
    """NSD's noise-ceiling SNR per voxel from (trial, voxel) betas of each session."""
    z = [(b - b.mean(axis=0)) / np.where(b.std(axis=0) > 0, b.std(axis=0), 1.0)
         for b in betas_by_session]  # fmt: skip
    allz = np.concatenate(z)
    stims = np.array([s for ss in stims_by_session for s in ss])
    variances = [allz[stims == t].var(axis=0, ddof=1) for t in test]
    noise_sd = np.sqrt(np.mean(variances, axis=0))
    signal_sd = np.sqrt(np.clip(1.0 - noise_sd**2, 0.0, None))
    return signal_sd / np.where(noise_sd > 0, noise_sd, np.inf)


def make_nsd_like(
    root: str | Path,
    *,
    seed: int = 0,
    n_trials: int = 150,
    n_test: int = 15,
    n_repeats: int = 3,
    snr: float = 0.8,
    image_size: int = 40,
    ncsnr: bool = True,
) -> dict[str, Any]:
    """Write an NSD-like dataset of single-trial betas (2 subjects x 2 sessions).

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_trials : int
        Trials per session (three runs of about a third each).
    n_test : int
        Shared test images, each shown ``n_repeats`` times to every subject.
    n_repeats : int
        Presentations of each test image per subject.
    snr : float
        Median per-voxel variance ratio of the image signal to the trial noise in
        ``early_visual``.
    image_size : int
        Side of the PNG images (pixels).
    ncsnr : bool
        Write ``sub-01/sub-01_ncsnr.nii.gz``.

    Returns
    -------
    facts : dict
        ``root``, ``subjects``, ``sessions`` (``["01", "02"]``), ``runs`` (``[1, 2, 3]``),
        ``formats`` (subject to ``"nifti"`` / ``"hdf5"``), ``scale`` (300), ``betas``
        and ``trials`` (paths keyed by ``(subject, session)``), ``mask`` (sub-02's),
        ``ncsnr`` (path or None), ``rois`` (subject to dseg path), ``rois_tsv``,
        ``roi_names``, ``grid_shape`` and ``affine`` (per subject), ``n_trials``
        (per session), ``test_images`` (stim_files), ``n_repeats``, ``train_images``
        (subject to stim_files), ``stimuli`` (all stim_files), ``features`` (names),
        ``feature_values`` (stim_file to raw values), ``planted`` (``early_visual``
        per subject: boolean mask on its grid; ``brain``; ``weights`` per subject
        (n_early_visual, 2); ``snr``).
    """
    root = prepare_root(root)
    subjects = ["01", "02"]
    sessions = ["01", "02"]
    n_total = n_trials * len(sessions)
    n_train = n_total - n_test * n_repeats
    if n_train < 1:
        raise ValueError(
            f"`n_test` x `n_repeats` ({n_test * n_repeats}) must be below the trials of a "
            f"subject ({n_total})."
        )
    write_dataset_description(root, "neuroflow test shape: NSD-like single-trial betas")
    (root / "README").write_text(
        "Synthetic NSD-like dataset (neuroflow tests): single-trial betas.\n", encoding="utf-8"
    )

    rng = rng_for(seed, "nsd", "images")
    ids = rng.choice(np.arange(1, 73001), size=n_test + n_train * len(subjects), replace=False)
    names = [f"nsd/nsd{i:05d}.png" for i in ids]
    test = sorted(names[:n_test])
    train = {
        sub: names[n_test + k * n_train : n_test + (k + 1) * n_train]
        for k, sub in enumerate(subjects)
    }
    stim_files = sorted(names)
    pictures = plan_pictures(rng, stim_files)
    images = render_pictures(pictures, image_size)
    for pic, img in zip(pictures, images, strict=True):
        write_png(root / "stimuli" / pic.stim_file, img)
    write_captions(root / "stimuli" / "captions.tsv", stim_files, [p.caption for p in pictures])
    raw = image_features(images)
    feats = dict(zip(stim_files, standardise(raw), strict=True))

    rois_dir = root / "derivatives" / "rois"
    write_dataset_description(rois_dir, "ROIs", dataset_type="derivative")
    write_tsv(rois_dir / "rois.tsv", {"index": list(ROI_NAMES), "name": list(ROI_NAMES.values())})

    facts_betas, facts_trials, rois, affines = {}, {}, {}, {}
    early, brains, weights = {}, {}, {}
    mask_path = ncsnr_path = None
    for sub in subjects:
        shape = GRIDS[sub]
        affine = grid_affine(shape, VOXEL_SIZE)
        rng_s = rng_for(seed, "nsd", sub, "anatomy")
        brain = ellipsoid(shape, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
        centre = np.array([0.0, -0.6, -0.1]) + rng_s.uniform(-0.05, 0.05, size=3)
        vis = ellipsoid(shape, centre, (0.45, 0.35, 0.45)) & brain
        labels = np.where(vis, 1, np.where(brain, 2, 0)).astype(np.uint8)
        write_nifti(rois_dir / f"sub-{sub}_desc-rois_dseg.nii.gz", labels, affine)
        rois[sub] = rois_dir / f"sub-{sub}_desc-rois_dseg.nii.gz"
        n_brain = int(brain.sum())
        vis_cols = vis[brain]  # early-visual flags of the brain voxels in C order
        w = np.zeros((2, n_brain))
        w[:, vis_cols] = rng_s.uniform(0.3, 1.0, size=(2, int(vis_cols.sum())))
        voxel_snr = snr * np.exp(0.3 * rng_s.standard_normal(n_brain))
        all_x = np.array([feats[s] for s in stim_files])
        sd = (all_x @ w).std(axis=0)
        w *= np.divide(np.sqrt(voxel_snr), sd, out=np.zeros_like(sd), where=sd > 0)

        # presentation order: test repeats spread over both sessions, train images once
        rng_o = rng_for(seed, "nsd", sub, "order")
        shown = rng_o.permutation([*np.repeat(test, n_repeats), *train[sub]]).tolist()
        per_session = [shown[k * n_trials : (k + 1) * n_trials] for k in range(len(sessions))]
        rng_n = rng_for(seed, "nsd", sub, "noise")
        betas_all = []
        for ses, stims in zip(sessions, per_session, strict=True):
            x = np.array([feats[s] for s in stims])
            offset = rng_n.normal(0.0, 1.0, size=n_brain) + rng_n.normal(0.0, 0.5)
            betas = x @ w + offset + rng_n.standard_normal((len(stims), n_brain))
            betas_all.append(betas)
            func = root / f"sub-{sub}" / f"ses-{ses}" / "func"
            runs = np.repeat([1, 2, 3], int(np.ceil(len(stims) / 3)))[: len(stims)]
            write_tsv(
                func / f"sub-{sub}_ses-{ses}_trials.tsv",
                {"stim_file": stims, "trial_type": ["image"] * len(stims), "run": runs},
            )
            facts_trials[sub, ses] = func / f"sub-{sub}_ses-{ses}_trials.tsv"
            if sub == "01":
                vol = np.zeros((*shape, len(stims)), dtype=np.float32)
                vol[brain] = betas.T.astype(np.float32)
                path = func / f"sub-{sub}_ses-{ses}_betas.nii.gz"
                write_nifti(path, vol, affine, tr=1.0)
            else:
                import h5py

                path = func / f"sub-{sub}_ses-{ses}_betas.h5"
                stored = np.clip(np.round(betas * SCALE), -32768, 32767).astype(np.int16)
                with h5py.File(path, "w", track_order=False) as f:
                    dset = f.create_dataset("betas", data=stored, track_times=False)
                    dset.attrs["scale"] = SCALE
            facts_betas[sub, ses] = path
        if sub == "02":
            mask_path = root / f"sub-{sub}" / f"sub-{sub}_mask.nii.gz"
            write_nifti(mask_path, brain.astype(np.uint8), affine)
        if sub == "01" and ncsnr:
            values = _ncsnr(betas_all, per_session, test)
            vol = np.zeros(shape, dtype=np.float32)
            vol[brain] = values.astype(np.float32)
            ncsnr_path = root / f"sub-{sub}" / f"sub-{sub}_ncsnr.nii.gz"
            write_nifti(ncsnr_path, vol, affine)
        affines[sub] = affine
        early[sub], brains[sub] = vis, brain
        weights[sub] = w[:, vis_cols].T
    return {
        "root": root,
        "subjects": subjects,
        "sessions": sessions,
        "runs": [1, 2, 3],
        "formats": {"01": "nifti", "02": "hdf5"},
        "scale": SCALE,
        "betas": facts_betas,
        "trials": facts_trials,
        "mask": mask_path,
        "ncsnr": ncsnr_path,
        "rois": rois,
        "rois_tsv": rois_dir / "rois.tsv",
        "roi_names": dict(ROI_NAMES),
        "grid_shape": {s: GRIDS[s] for s in subjects},
        "affine": affines,
        "n_trials": n_trials,
        "test_images": test,
        "n_repeats": n_repeats,
        "train_images": train,
        "stimuli": stim_files,
        "features": list(FEATURE_NAMES),
        "feature_values": dict(zip(stim_files, raw, strict=True)),
        "planted": {"early_visual": early, "brain": brains, "weights": weights, "snr": snr},
    }

"""Single-trial betas of five ROIs that mix three stimulus geometries (NSD-like layout).

Layout::

    dataset_description.json  README
    stimuli/captions.tsv
    stimuli/images/imgNNNN.png                                 4-digit ids, not consecutive
    sub-0S/ses-01/func/sub-0S_ses-01_betas.nii.gz              float32 (x, y, z, trial)
    sub-0S/ses-01/func/sub-0S_ses-01_trials.tsv                stim_file trial_type run
    derivatives/rois/dataset_description.json
    derivatives/rois/rois.tsv                                  index name: 1 roi_a ... 5 roi_e
    derivatives/rois/sub-0S_desc-rois_dseg.nii.gz              on each subject's grid

Three subjects, each on its own grid, see the same ``n_stimuli`` images; every image is
shown 2 or 3 times to every subject (which ones 3 times differs by subject), in a
shuffled order over three runs. The five ROIs are blobs of 20 to 40 voxels each
(counts differ by subject); the other brain voxels are unlabelled noise.

Planted geometry: three latent stimulus geometries, each a (stimulus, dimension) code
scaled to a mean squared distance of 1 between stimuli:

- ``image_statistics``: the stimuli's
  :func:`neuroflow.features.image_statistics.image_statistics` features, each image's
  vector centred and scaled to unit norm (squared distances are twice the correlation
  distances, i.e. the geometry of the extractor's correlation RDM);
- ``latent_2`` and ``latent_3``: random Gaussian codes of 3 dimensions.

ROI ``r`` responds with ``Z_r = [m_r1 L_1, m_r2 L_2, m_r3 L_3]`` (weights :data:`MIXING`):
``roi_a`` = image statistics, ``roi_b`` = image statistics + 0.6 latent 2, ``roi_c`` =
latent 2, ``roi_d`` = latent 3, ``roi_e`` = latent 2 + 0.6 latent 3 (unequal weights, so
that no relabelling of the ROIs, such as reversing the chain a-b-c-e-d, keeps the
pattern). Each subject sees it through its own random voxel projection ``P_sr``
(Gaussian), scaled so that the voxels' stimulus variance over the trial noise variance
is around ``snr``; then ``beta = Z_r P_sr + voxel offset + noise`` with a per-subject
noise level. The planted ROI × ROI pattern is the Spearman correlation between the
ROIs' noise-free RDMs (squared Euclidean distances of the ``Z_r``, the quantity
crossnobis estimates), which a projection preserves on average.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    ellipsoid,
    grid_affine,
    plan_pictures,
    prepare_root,
    render_pictures,
    rng_for,
    write_captions,
    write_dataset_description,
    write_nifti,
    write_png,
    write_tsv,
)

__all__ = ["LATENTS", "MIXING", "ROI_NAMES", "make_roi_geometry", "planted_pattern"]

ROI_NAMES = {1: "roi_a", 2: "roi_b", 3: "roi_c", 4: "roi_d", 5: "roi_e"}
#: Names of the latent geometries, in the column order of :data:`MIXING`.
LATENTS = ("image_statistics", "latent_2", "latent_3")
#: Amplitude of each latent geometry (columns, :data:`LATENTS`) in each ROI (rows).
MIXING = np.array(
    [
        [1.0, 0.0, 0.0],
        [1.0, 0.6, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0],
        [0.0, 1.0, 0.6],
    ]
)
SUBJECTS = ("01", "02", "03")
GRIDS = {"01": (9, 10, 8), "02": (10, 9, 8), "03": (9, 9, 9)}
VOXEL_SIZE = 2.5
#: Dimensions of the random latent codes.
RANDOM_DIMS = 3


def _unit_distance(code: np.ndarray) -> np.ndarray:
    """``code`` scaled to a mean squared Euclidean distance of 1 between its rows."""
    code = code - code.mean(axis=0)
    # mean over pairs i < j of |c_i - c_j|^2 = 2 n / (n - 1) * mean squared norm
    n = code.shape[0]
    mean_sq = 2.0 * n / (n - 1) * (code**2).sum(axis=1).mean()
    return code / np.sqrt(mean_sq)


def _squared_distances(code: np.ndarray) -> np.ndarray:
    """Condensed squared Euclidean distances between the rows of ``code``."""
    i, j = np.triu_indices(code.shape[0], k=1)
    return ((code[i] - code[j]) ** 2).sum(axis=1)


def planted_pattern(rdms: np.ndarray) -> np.ndarray:
    """Spearman correlation between every pair of condensed RDMs, shape (n_rdms, n_rdms).

    Parameters
    ----------
    rdms : ndarray, shape (n_rdms, n_pairs)
        Condensed RDMs.

    Returns
    -------
    pattern : ndarray of float64, shape (n_rdms, n_rdms)
    """
    from scipy.stats import rankdata

    ranks = rankdata(np.asarray(rdms, dtype=np.float64), axis=1)
    return np.corrcoef(ranks)


def _roi_blobs(rng: np.random.Generator, brain: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Labels 1..n of contiguous blobs of ``sizes`` voxels inside ``brain`` (0 elsewhere)."""
    shape = brain.shape
    axes = [np.linspace(-1.0, 1.0, n) for n in shape]
    coords = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)[brain]
    angles = 2 * np.pi * (np.arange(len(sizes)) / len(sizes)) + rng.uniform(-0.2, 0.2)
    centres = np.column_stack(
        [0.55 * np.cos(angles), 0.55 * np.sin(angles), rng.uniform(-0.3, 0.3, len(sizes))]
    )
    free = np.ones(len(coords), dtype=bool)
    flat = np.zeros(len(coords), dtype=np.uint8)
    for k, (centre, size) in enumerate(zip(centres, sizes, strict=True)):
        dist = np.where(free, ((coords - centre) ** 2).sum(axis=1), np.inf)
        take = np.argsort(dist, kind="stable")[:size]
        flat[take] = k + 1
        free[take] = False
    labels = np.zeros(shape, dtype=np.uint8)
    labels[brain] = flat
    return labels


def make_roi_geometry(
    root: str | Path,
    *,
    seed: int = 0,
    n_stimuli: int = 48,
    snr: float = 0.5,
    image_size: int = 32,
) -> dict[str, Any]:
    """Write single-trial betas of 3 subjects whose 5 ROIs mix 3 stimulus geometries.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    n_stimuli : int
        Images, all shown to every subject 2 or 3 times.
    snr : float
        Median per-voxel variance ratio of the stimulus signal to the trial noise in
        the ROIs.
    image_size : int
        Side of the PNG images (pixels).

    Returns
    -------
    facts : dict
        ``root``, ``subjects``, ``sessions`` (``["01"]``), ``runs`` (``[1, 2, 3]``),
        ``betas`` and ``trials`` (paths keyed by ``(subject, session)``), ``rois``
        (subject to dseg path), ``rois_tsv``, ``roi_names`` (index to name),
        ``grid_shape`` and ``affine`` (per subject), ``stimuli`` (sorted stim_files),
        ``presentations`` (subject to {stim_file: count}), ``roi_sizes`` (subject to
        {ROI: voxels}), ``latents`` (:data:`LATENTS`), ``mixing`` (ROI to its weights
        on the latents), and ``planted``: ``codes`` (latent to its (stimulus, dim)
        code over ``stimuli``), ``latent_rdms`` and ``roi_rdms`` (condensed squared
        distances over ``stimuli``, the latter (roi, pair) in :data:`ROI_NAMES` order),
        ``pattern`` (the Spearman ROI × ROI pattern of ``roi_rdms``), ``image_rois``
        (ROIs driven by the image statistics) and ``unrelated_rois`` (the others),
        ``labels`` (subject to the dseg volume), ``brain`` (subject to its mask),
        ``noise_sd`` (subject to its trial noise SD) and ``snr``.
    """
    from neuroflow.features.image_statistics import image_statistics

    root = prepare_root(root)
    subjects = list(SUBJECTS)
    write_dataset_description(root, "neuroflow test shape: ROIs mixing stimulus geometries")
    (root / "README").write_text(
        "Synthetic single-trial betas (neuroflow tests): five ROIs mixing three stimulus "
        "geometries.\n",
        encoding="utf-8",
    )

    rng = rng_for(seed, "roi_geometry", "images")
    ids = rng.choice(np.arange(1, 10000), size=n_stimuli, replace=False)
    stim_files = sorted(f"images/img{i:04d}.png" for i in ids)
    pictures = plan_pictures(rng, stim_files)
    images = render_pictures(pictures, image_size)
    for pic, img in zip(pictures, images, strict=True):
        write_png(root / "stimuli" / pic.stim_file, img)
    write_captions(root / "stimuli" / "captions.tsv", stim_files, [p.caption for p in pictures])

    feats = image_statistics(images)
    feats = feats - feats.mean(axis=1, keepdims=True)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    rng_l = rng_for(seed, "roi_geometry", "latents")
    codes = {
        "image_statistics": _unit_distance(feats),
        "latent_2": _unit_distance(rng_l.standard_normal((n_stimuli, RANDOM_DIMS))),
        "latent_3": _unit_distance(rng_l.standard_normal((n_stimuli, RANDOM_DIMS))),
    }
    roi_codes = [
        np.concatenate([w * codes[name] for w, name in zip(weights, LATENTS, strict=True)], axis=1)
        for weights in MIXING
    ]
    roi_rdms = np.stack([_squared_distances(z) for z in roi_codes])

    rois_dir = root / "derivatives" / "rois"
    write_dataset_description(rois_dir, "ROIs", dataset_type="derivative")
    write_tsv(rois_dir / "rois.tsv", {"index": list(ROI_NAMES), "name": list(ROI_NAMES.values())})

    facts_betas, facts_trials, rois, affines = {}, {}, {}, {}
    labels_by, brains, noise_sds, presentations, roi_sizes = {}, {}, {}, {}, {}
    for sub in subjects:
        shape = GRIDS[sub]
        affine = grid_affine(shape, VOXEL_SIZE)
        rng_s = rng_for(seed, "roi_geometry", sub, "anatomy")
        brain = ellipsoid(shape, (0.0, 0.0, 0.0), (0.9, 0.9, 0.9))
        sizes = rng_s.integers(20, 41, size=len(ROI_NAMES)).tolist()
        labels = _roi_blobs(rng_s, brain, sizes)
        write_nifti(rois_dir / f"sub-{sub}_desc-rois_dseg.nii.gz", labels, affine)
        rois[sub] = rois_dir / f"sub-{sub}_desc-rois_dseg.nii.gz"
        flat = labels[brain]  # ROI index of every brain voxel in C order
        n_brain = flat.size

        # noise-free responses: each ROI's code through this subject's own projection
        signal = np.zeros((n_stimuli, n_brain))
        for k, code in enumerate(roi_codes):
            cols = np.flatnonzero(flat == k + 1)
            proj = rng_s.standard_normal((code.shape[1], cols.size))
            resp = code @ proj
            voxel_snr = snr * np.exp(0.3 * rng_s.standard_normal(cols.size))
            resp *= np.sqrt(voxel_snr) / resp.std(axis=0)
            signal[:, cols] = resp
        noise_sd = float(rng_s.uniform(0.8, 1.25))
        voxel_sd = noise_sd * np.exp(0.15 * rng_s.standard_normal(n_brain))
        signal *= voxel_sd  # keeps each voxel's SNR with its own noise level

        rng_o = rng_for(seed, "roi_geometry", sub, "order")
        counts = np.full(n_stimuli, 2)
        counts[rng_o.choice(n_stimuli, size=n_stimuli // 2, replace=False)] = 3
        order = rng_o.permutation(np.repeat(np.arange(n_stimuli), counts))
        stims = [stim_files[i] for i in order]
        rng_n = rng_for(seed, "roi_geometry", sub, "noise")
        offset = rng_n.normal(2.0, 1.0, size=n_brain)
        betas = signal[order] + offset + voxel_sd * rng_n.standard_normal((order.size, n_brain))

        func = root / f"sub-{sub}" / "ses-01" / "func"
        runs = np.repeat([1, 2, 3], int(np.ceil(order.size / 3)))[: order.size]
        write_tsv(
            func / f"sub-{sub}_ses-01_trials.tsv",
            {"stim_file": stims, "trial_type": ["image"] * order.size, "run": runs},
        )
        vol = np.zeros((*shape, order.size), dtype=np.float32)
        vol[brain] = betas.T.astype(np.float32)
        write_nifti(func / f"sub-{sub}_ses-01_betas.nii.gz", vol, affine, tr=1.0)
        facts_trials[sub, "01"] = func / f"sub-{sub}_ses-01_trials.tsv"
        facts_betas[sub, "01"] = func / f"sub-{sub}_ses-01_betas.nii.gz"
        affines[sub] = affine
        labels_by[sub], brains[sub], noise_sds[sub] = labels, brain, noise_sd
        presentations[sub] = dict(zip(stim_files, counts.tolist(), strict=True))
        roi_sizes[sub] = {name: int((labels == k).sum()) for k, name in ROI_NAMES.items()}

    names = list(ROI_NAMES.values())
    return {
        "root": root,
        "subjects": subjects,
        "sessions": ["01"],
        "runs": [1, 2, 3],
        "betas": facts_betas,
        "trials": facts_trials,
        "rois": rois,
        "rois_tsv": rois_dir / "rois.tsv",
        "roi_names": dict(ROI_NAMES),
        "grid_shape": {s: GRIDS[s] for s in subjects},
        "affine": affines,
        "stimuli": stim_files,
        "presentations": presentations,
        "roi_sizes": roi_sizes,
        "latents": list(LATENTS),
        "mixing": {name: MIXING[k].tolist() for k, name in enumerate(names)},
        "planted": {
            "codes": codes,
            "latent_rdms": {name: _squared_distances(c) for name, c in codes.items()},
            "roi_rdms": roi_rdms,
            "pattern": planted_pattern(roi_rdms),
            "image_rois": [n for k, n in enumerate(names) if MIXING[k, 0] > 0],
            "unrelated_rois": [n for k, n in enumerate(names) if MIXING[k, 0] == 0],
            "labels": labels_by,
            "brain": brains,
            "noise_sd": noise_sds,
            "snr": snr,
        },
    }

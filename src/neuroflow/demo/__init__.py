"""The embedded demo dataset: a small simulated BIDS dataset with planted ground truth.

:func:`generate_demo_dataset` writes, offline and deterministically for a seed (same
seed, same bytes), fMRI of a naturalistic "movie" and EEG of flashed images, whose
responses are simulated from two feature spaces of the stimuli:

- *visual*: :func:`neuroflow.features.image_statistics.image_statistics` of each
  stimulus PNG (luminance, contrast, colour, oriented and spatial-frequency energy);
- *semantic*: the 384-d MiniLM sentence embedding (``all-MiniLM-L6-v2``, unit norm) of
  each stimulus caption.

Both are standardised over all stimuli before use (means and standard deviations are
stored). :func:`demo_layout` lists every file before anything is written.

Stimuli
-------
Each stimulus is a square crop of a photograph bundled with scikit-image (astronaut,
cat, coffee, rocket, cameraman, galaxies, ...), centred on a described region at one of
three framings (wide shot, medium shot, close-up), resized to ``image_size`` pixels and
saved as ``stimuli/shots/shot-NNNN.png`` (fMRI movie shots) or
``stimuli/images/image-NNNN.png`` (EEG images). ``stimuli/captions.tsv`` has
``stim_file`` and ``caption``, e.g. ``"a close-up of the green eyes of a tabby cat"``.
``stimuli/concepts.tsv`` has ``stim_file`` and ``concepts``, the ``;``-separated labels
of each stimulus: photograph, region (none for a wide shot) and framing, e.g.
``chelsea;eyes;close-up``.

The *pool* (``pool.n_images`` images, none when 0) holds never-shown crops of the same
photographs, for in-silico prediction: drawn from their own random stream (so every
other file but ``groundtruth.json`` is the same with or without a pool), at continuous
zooms and pans that span the stimuli's range of image statistics, and never framing
the same pixels as a shot or an EEG image. They are saved as
``stimuli/pool/pool-NNNN.png`` at ``image_size``, with ``stimuli/pool/captions.tsv``
(``stim_file`` relative to ``stimuli/pool/``, ``caption`` in the shots' style).

fMRI (task ``movie``)
---------------------
Per subject, ``n_train_runs`` runs each show a distinct movie (shots of 3-6 s tiling
the run), then ``n_test_repeats`` runs show one test movie with identical events.
``_events.tsv``: onset, duration, trial_type (``shot``), stim_file. BOLD is int16 on a
``grid_shape`` grid of ``voxel_size`` mm voxels, TR in the header and in
``task-movie_bold.json``. ``sub-XX/anat`` holds the brain mask (an ellipsoid, on the
BOLD grid) and a synthetic T1w. Motion parameters with fMRIPrep's expansions
(``*_derivative1``, ``*_power2``, ``*_derivative1_power2``, derivatives ``n/a`` at the
first volume) and framewise displacement are in ``derivatives/confounds/`` (fMRIPrep
column names), so every ``preprocess_fmri.confounds.motion`` model loads from them.
The response model is described in :mod:`neuroflow.demo.fmri`.

EEG (task ``images``)
---------------------
One BrainVision recording per subject (standard 10-20 names, FCz reference), with
``_events.tsv`` (onset, duration, trial_type ``train``/``test``, value 1/2, sample,
stim_file), ``_channels.tsv``, ``_electrodes.tsv`` + ``_coordsystem.json`` and
``_eeg.json``. ``n_test_images`` images are each shown ``n_repeats`` times, the rest
once. The response model is described in :mod:`neuroflow.demo.eeg`.

Ground truth (``derivatives/groundtruth/``)
-------------------------------------------
``groundtruth.json``
    Seed, resolved config, run table (``runs``: run, movie, split), ``train_runs``,
    ``test_runs``, ``repeat_groups`` (runs showing the same movie), ROI names, HRF,
    noise settings, EEG latencies (s), widths and topography centres, and ``pool``
    (pool size, files and drive units; ``null`` without a pool).
``rois.tsv``
    ``index``, ``name``: 0 other (brain), 1 early_visual, 2 semantic, 3 noise.
``stimuli.tsv``
    stim_file, split, photo, region, zoom, pan_row, pan_col, caption.
``features.npz``
    ``stimulus`` (n_stimuli,) ids; ``visual`` (n_stimuli, 24) raw image statistics with
    ``visual_names``, ``visual_mean``, ``visual_std``; ``semantic`` (n_stimuli, 384)
    raw embeddings with ``semantic_mean``, ``semantic_std``. ``features_visual.tsv``
    repeats the visual features as a table.
``pool_features.npz`` (with a pool)
    ``pool_stimulus`` (n_pool,) ids (relative to ``stimuli/pool/``); ``pool_visual``
    (n_pool, 24) raw image statistics with ``visual_names``; ``pool_semantic``
    (n_pool, 384) raw caption embeddings. Standardise them with the stimuli's
    ``visual_mean``/``visual_std`` and ``semantic_mean``/``semantic_std`` of
    ``features.npz`` (the pool's own statistics play no part).
``pool_stimuli.tsv`` (with a pool)
    stim_file, photo, region, zoom, pan_row, pan_col, caption of each pool image.
``sub-XX/sub-XX_desc-rois_dseg.nii.gz``
    ROI labels on the BOLD grid (outside the brain is 0 too; use the brain mask).
``sub-XX/sub-XX_fmri.npz``
    Over the brain-mask voxels in C order: ``voxel_ijk`` (n_brain, 3), ``roi``,
    ``weights_visual`` (n_brain, 24), ``weights_semantic`` (n_brain, 384) in percent
    signal change per standardised feature unit, ``snr`` (signal variance over noise
    variance), ``ceiling_single`` (expected correlation between the noiseless signal
    and one test run, both passed through the default ``preprocess_fmri`` cleaning),
    ``ceiling_mean`` (same against the mean of the cleaned test repeats),
    ``ceiling_realized`` (the drawn single-run value, z-scored as the stage does),
    ``signal`` (n_runs, n_volumes, n_brain) noiseless response in percent signal
    change, plus ``run`` labels and the ``affine``. The ceilings are what a perfect
    model reaches after cleaning: detrending, high-pass and confound regression remove
    part of the signal as well as drift, and whatever drift or motion they leave counts
    as noise (see :mod:`neuroflow.demo.ceiling`).
``sub-XX/sub-XX_eeg.npz``
    ``ch_names``, ``onsets`` (samples), ``stimulus`` per trial, ``topographies_visual``
    and ``topographies_semantic`` (n_components, n_channels), ``weights_*``
    (n_features, n_components), ``amplitudes_*`` (n_trials, n_components) in µV,
    ``latencies`` and ``widths`` (visual, semantic) in s, ``topography_generic``.
``sub-XX/sub-XX_pool.tsv`` (with a pool)
    ``stim_file``, then for each ROI (early_visual, semantic, noise) ``<roi>_visual``
    and ``<roi>_semantic``: the mean over the ROI's voxels of the planted response to
    the pool image held on screen, ``mean(weights_<space>) @ z_<space>(image)``, with
    ``z`` standardised as above. Units: percent signal change per unit of the convolved
    design (the HRF has unit sum, so this is the plateau of a sustained presentation).
    Only early_visual is driven by visual and semantic by semantic features; the noise
    ROI's drives are 0 (see :func:`neuroflow.demo.fmri.roi_drives`).

Use :func:`load_ground_truth` to read all of it.
"""

from __future__ import annotations

from ._config import DEFAULT_CONFIG, resolve_config
from .generate import FORMAT_VERSION, generate_demo_dataset, load_ground_truth
from .layout import DemoLayout, demo_layout

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "DemoLayout",
    "demo_layout",
    "generate_demo_dataset",
    "load_ground_truth",
    "resolve_config",
]

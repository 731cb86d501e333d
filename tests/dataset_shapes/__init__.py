"""Generators of small synthetic datasets in shapes the workflow has not seen before.

Each generator writes one dataset into an empty (or absent) folder and returns a dict of
facts (subjects, runs, conditions, planted signals, paths...) for the tests that run the
workflow on it::

    from dataset_shapes import make_eeg_only

    facts = make_eeg_only(tmp_path / "bids", seed=0)

=========================  ==============================================================
generator                  shape
=========================  ==============================================================
:func:`make_eeg_only`      BIDS EEG only, as MNE-BIDS writes it: oddball task, two runs,
                           BrainVision and FIF subjects, events without ``stim_file``;
                           :func:`show_images` turns it into an image-viewing design
                           with a ``test`` block
:func:`make_fmri_movie`    BIDS fMRI only: movie runs of shots that never repeat, TR in
                           per-run sidecars, no atlas, no derivatives
:func:`make_ds000117_like` ds000117's shape: ``ses-mri`` fMRI and ``ses-eeg`` EEG, CRLF
                           event tables in the real columns, stimuli in ``stimuli/func``
                           and ``stimuli/meg``, TR only in the top-level sidecar;
                           optional fMRIPrep derivatives and MEG+EEG FIF
:func:`make_nsd_like`      single-trial betas (NIfTI and scaled int16 HDF5) with trial
                           tables, shared repeated test images, ROI atlases
:func:`make_algonauts_like` parcel time series in HDF5, Schaefer-like parcel names, a
                           repeated test movie
:func:`make_event_related` fMRIPrep derivatives of an event-related image study: three
                           sessions of four runs, ~1 s events, rest rows, motion that
                           leaks into the signal, the exact planted regressors
:func:`make_roi_geometry`  single-trial betas of three subjects whose five ROIs mix three
                           stimulus geometries (one of them the image statistics), with
                           the planted ROI x ROI pattern
:func:`make_interaction_movie`  an fMRI movie whose shots carry two feature spaces in the
                           events tables; one ROI responds to their product, two linearly
:func:`make_single_condition_eeg`  clinical BrainVision EEG whose events are all of one
                           type (photic flashes), no ``stim_file``
:func:`make_resting_eeg`   resting-state BrainVision EEG: no markers, an events table with
                           its header only (or none), an occipital alpha rhythm
=========================  ==============================================================

All are deterministic per seed, write well under 20 MB and take a few seconds.
"""

from __future__ import annotations

from .algonauts_like import make_algonauts_like
from .ds000117_like import make_ds000117_like
from .eeg_clinical import make_resting_eeg, make_single_condition_eeg
from .eeg_only import make_eeg_only, show_images
from .event_related import make_event_related
from .fmri_movie import make_fmri_movie
from .interaction_movie import make_interaction_movie
from .nsd_like import make_nsd_like
from .roi_geometry import make_roi_geometry

__all__ = [
    "make_algonauts_like",
    "make_ds000117_like",
    "make_eeg_only",
    "make_event_related",
    "make_fmri_movie",
    "make_interaction_movie",
    "make_nsd_like",
    "make_resting_eeg",
    "make_roi_geometry",
    "make_single_condition_eeg",
    "show_images",
]

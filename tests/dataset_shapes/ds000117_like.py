"""A small dataset in the shape of OpenNeuro ds000117 (Wakeman & Henson face processing).

Layout (``XX`` = 01, 02)::

    dataset_description.json  README  participants.tsv
    task-facerecognition_bold.json            the ONLY place the TR (2.0) is written
    task-facerecognition_events.json
    stimuli/func/f001.bmp ... u036.bmp s036.bmp i999.bmp
    stimuli/meg/f0NN.bmp ...                  the EEG images: same bytes as stimuli/func/,
                                              except one scrambled file (``conflict``)
    sub-XX/ses-mri/func/sub-XX_ses-mri_task-facerecognition_run-0{1..4}_bold.nii.gz
    sub-XX/ses-mri/func/sub-XX_ses-mri_task-facerecognition_run-0{1..4}_events.tsv   CRLF
    sub-XX/ses-eeg/eeg/sub-XX_ses-eeg_task-facerecognition_run-0{1,2}_eeg.{vhdr,vmrk,eeg}
    sub-XX/ses-eeg/eeg/sub-XX_ses-eeg_task-facerecognition_run-0{1,2}_events.tsv      CRLF
    sub-XX/ses-eeg/eeg/sub-XX_ses-eeg_task-facerecognition_run-0{1,2}_channels.tsv
    sub-XX/ses-eeg/eeg/sub-XX_ses-eeg_task-facerecognition_run-0{1,2}_eeg.json
  ``fmriprep=True`` adds::

    derivatives/fmriprep/dataset_description.json
    derivatives/fmriprep/sub-XX/ses-mri/func/
        sub-XX_ses-mri_task-facerecognition_run-0R_space-MNI152NLin2009cAsym_desc-preproc_bold.nii.gz
        sub-XX_ses-mri_task-facerecognition_run-0R_space-MNI152NLin2009cAsym_desc-brain_mask.nii.gz
        sub-XX_ses-mri_task-facerecognition_run-0R_desc-confounds_timeseries.tsv
  ``meg_fif=True`` adds::

    sub-XX/ses-meg/meg/sub-XX_ses-meg_task-facerecognition_run-01_meg.fif
        (magnetometers MEGxxx1, planar gradiometers MEGxxx2/3, EEG001-EEG064, STI101)
    sub-XX/ses-meg/meg/sub-XX_ses-meg_task-facerecognition_run-01_{events.tsv,channels.tsv,meg.json}
    sub-XX/ses-meg/meg/sub-XX_ses-meg_coordsystem.json

Design, as in the real study: famous (F), unfamiliar (U) and scrambled (S) images, each
shown twice, either immediately again (next trial) or after 4-12 other trials; triggers
F 5/6/7, U 13/14/15, S 17/18/19 for first / immediate / delayed presentations. The fMRI
events table has the real fMRI columns (``onset duration circle_duration stim_type
trigger button_pushed response_time stim_file``, numbers such as ``.908``, upper-case
stim types) and one 20 s rest row (``n/a``, trigger 999, ``func/i999.bmp``); the EEG
and MEG tables have the real MEG columns (``onset duration onset_sample stim_type
trigger stim_file``, ``Famous``/``Unfamiliar``/``Scrambled``). There is no
``trial_type`` column anywhere.

Images are 64 x 64 grayscale BMPs of drawn faces (random geometry and shading) and
phase-scrambled faces (same amplitude spectrum, random phases), each with its own mean
luminance and contrast.

Planted signal
    fMRI: a bilateral ventral "face" blob responds to faces (amplitude 1) and to
    scrambled images (0.25); an occipital "early visual" blob responds to every image
    (0.5) plus the image's z-scored luminance mean and standard deviation (positive
    per-voxel weights). Both are scaled to a per-voxel SNR around ``fmri_snr`` (signal
    over AR(1) noise variance). EEG/MEG: a P1 (0.1 s) for every image and an N170-like
    negativity (peak :data:`N170_LATENCY` s) over lateral occipito-temporal sites,
    ``face_uv`` µV for faces and 30 % of it for scrambled images.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    CHANNELS,
    component,
    ellipsoid,
    format_number,
    grid_affine,
    hrf_convolve,
    image_features,
    prepare_root,
    rng_for,
    simulate_eeg,
    standardise,
    write_dataset_description,
    write_json,
    write_nifti,
    write_rows,
    write_tsv,
)
from .fmri_movie import simulate_bold

__all__ = ["N170_CENTRES", "N170_LATENCY", "make_ds000117_like"]

TASK = "facerecognition"
CRLF = "\r\n"
CATEGORIES = ("F", "U", "S")
FMRI_TYPES = {"F": "FAMOUS", "U": "UNFAMILIAR", "S": "SCRAMBLED"}
MEG_TYPES = {"F": "Famous", "U": "Unfamiliar", "S": "Scrambled"}
TRIGGERS = {"F": 5, "U": 13, "S": 17}
REST_TRIGGER = 999
REST_STIM = "func/i999.bmp"
FMRI_COLUMNS = (
    "onset",
    "duration",
    "circle_duration",
    "stim_type",
    "trigger",
    "button_pushed",
    "response_time",
    "stim_file",
)
MEG_COLUMNS = ("onset", "duration", "onset_sample", "stim_type", "trigger", "stim_file")
N170_CENTRES = ("P7", "P8", "PO9", "PO10")
N170_LATENCY = 0.17
LINE_FREQ = 50.0
MNI_SPACE = "MNI152NLin2009cAsym"
_MOTION = ("trans_x", "trans_y", "trans_z", "rot_x", "rot_y", "rot_z")


# --------------------------------------------------------------------------------------
# Images


def _face(rng: np.random.Generator, size: int) -> np.ndarray:
    """A drawn grayscale face in [0, 1], shape (size, size)."""
    from scipy.ndimage import gaussian_filter
    from skimage.draw import disk, ellipse, polygon

    shape = (size, size)
    img = np.full(shape, rng.uniform(0.3, 0.55))
    cy = size * (0.52 + rng.uniform(-0.04, 0.04))
    cx = size * (0.5 + rng.uniform(-0.04, 0.04))
    ry = size * rng.uniform(0.34, 0.4)
    rx = size * rng.uniform(0.25, 0.31)
    skin = rng.uniform(0.6, 0.85)
    img[ellipse(cy - 0.22 * ry, cx, 0.85 * ry, 1.1 * rx, shape=shape)] = rng.uniform(0.05, 0.35)
    img[ellipse(cy + 0.08 * ry, cx, 0.88 * ry, 0.95 * rx, shape=shape)] = skin
    eye_y = cy - rng.uniform(0.08, 0.18) * ry
    gap = rng.uniform(0.32, 0.45) * rx
    for side in (-1, 1):
        ex = cx + side * gap
        img[ellipse(eye_y, ex, 0.08 * ry, 0.2 * rx, shape=shape)] = 0.95
        img[disk((eye_y, ex), 0.07 * rx + 0.6, shape=shape)] = 0.08
        brow = ellipse(eye_y - 0.16 * ry, ex, 0.03 * ry + 0.5, 0.24 * rx, shape=shape)
        img[brow] = skin * 0.35
    nose_y = cy + rng.uniform(0.15, 0.25) * ry
    img[polygon([eye_y, nose_y, nose_y], [cx, cx - 0.12 * rx, cx + 0.12 * rx], shape=shape)] = (
        skin * 0.8
    )
    mouth_y = cy + rng.uniform(0.42, 0.52) * ry
    img[ellipse(mouth_y, cx, 0.05 * ry + 0.5, rng.uniform(0.25, 0.4) * rx, shape=shape)] = 0.25
    return gaussian_filter(img, size / 96)


def _scramble(rng: np.random.Generator, img: np.ndarray) -> np.ndarray:
    """Phase-scrambled copy of ``img`` with the same amplitude spectrum, mean and SD."""
    spec = np.fft.fft2(img - img.mean())
    phase = np.angle(np.fft.fft2(rng.standard_normal(img.shape)))
    out = np.real(np.fft.ifft2(np.abs(spec) * np.exp(1j * phase)))
    out = (out - out.mean()) / max(out.std(), 1e-12) * img.std()
    return out + img.mean()


def _finish(rng: np.random.Generator, img: np.ndarray) -> np.ndarray:
    """Give an image its own mean luminance and contrast; uint8."""
    level = rng.uniform(0.3, 0.7)
    contrast = rng.uniform(0.5, 1.6)
    out = (img - img.mean()) * contrast + level
    return np.clip(np.round(out * 255), 0, 255).astype(np.uint8)


def _rest_image(size: int) -> np.ndarray:
    """Mid-grey image with a black fixation cross, uint8."""
    img = np.full((size, size), 128, dtype=np.uint8)
    c, h = size // 2, max(1, size // 32)
    img[c - h : c + h + 1, c - size // 8 : c + size // 8 + 1] = 0
    img[c - size // 8 : c + size // 8 + 1, c - h : c + h + 1] = 0
    return img


def _write_bmp(path: Path, img: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(img, mode="L").save(path, format="BMP")


def _name(cat: str, number: int) -> str:
    return f"{cat.lower()}{number:03d}.bmp"


# --------------------------------------------------------------------------------------
# Designs


def _sequence(
    rng: np.random.Generator, items: Sequence[tuple[str, int]], delay: tuple[int, int] = (4, 12)
) -> list[tuple[str, int, int]]:
    """Order presentations: each item twice, immediately or after ``delay`` other trials.

    Returns
    -------
    trials : list of (category, number, kind)
        ``kind`` 0 first, 1 immediate repeat, 2 delayed repeat.
    """
    order = [items[i] for i in rng.permutation(len(items))]
    immediate = rng.uniform(size=len(order)) < 0.5
    immediate[-4:] = True
    trials: list[tuple[str, int, int]] = []
    pending: list[tuple[int, tuple[str, int]]] = []
    for item, imm in zip(order, immediate, strict=True):
        while pending and pending[0][0] <= len(trials):
            trials.append((*pending.pop(0)[1], 2))
        trials.append((*item, 0))
        if imm:
            trials.append((*item, 1))
        else:
            pending.append((len(trials) + int(rng.integers(delay[0], delay[1] + 1)), item))
            pending.sort()
    trials.extend((*item, 2) for _, item in pending)
    return trials


def _fmri_events(rng: np.random.Generator, trials: list[tuple[str, int, int]]):
    """Rows (formatted cells) and timing of one fMRI run, with one 20 s rest."""
    rest_after = len(trials) // 2 + int(rng.integers(-3, 4))
    rows, timing = [], []
    onset = 0.0
    for i, (cat, num, kind) in enumerate(trials):
        duration = round(float(rng.uniform(0.8, 0.999)), 3)
        rows.append(
            [
                format_number(onset, 3, strip=True),
                format_number(duration, 3),
                format_number(float(rng.uniform(0.41, 0.6)), 3),
                FMRI_TYPES[cat],
                str(TRIGGERS[cat] + kind),
                str(int(rng.choice([4, 7]))),
                format_number(float(rng.uniform(0.9, 2.5)), 3),
                f"func/{_name(cat, num)}",
            ]
        )
        timing.append((onset, duration, cat, num))
        onset = round(onset + float(rng.uniform(2.9, 3.4)), 3)
        if i == rest_after:
            rows.append(
                [
                    format_number(onset, 3, strip=True),
                    "20.000",
                    "20.000",
                    "n/a",
                    str(REST_TRIGGER),
                    "20000",
                    "20.000",
                    REST_STIM,
                ]
            )
            onset = round(onset + 20.0 + float(rng.uniform(0.4, 0.7)), 3)
    return rows, timing


def _meg_events(
    rng: np.random.Generator, trials: list[tuple[str, int, int]], sfreq: float, padding: float
):
    """Onset samples and formatted rows of one EEG/MEG run (real MEG table columns)."""
    soa = rng.uniform(1.3, 1.6, size=len(trials))
    onsets = np.round((padding + np.concatenate([[0.0], np.cumsum(soa[:-1])])) * sfreq)
    onsets = onsets.astype(int)
    rows = [
        [
            format_number(o / sfreq, 4, strip=True, lead=True),
            "0",
            str(o),
            MEG_TYPES[cat],
            str(TRIGGERS[cat] + kind),
            f"meg/{_name(cat, num)}",
        ]
        for o, (cat, num, kind) in zip(onsets, trials, strict=True)
    ]
    return onsets, rows


def _eeg_components(
    trials: list[tuple[str, int, int]], face_uv: float, drive: dict[str, float] | None = None
) -> list[dict]:
    n = len(trials)
    face = np.array([cat != "S" for cat, _, _ in trials])
    p1 = np.full(n, 3.0)
    if drive is not None:  # the image statistics modulate the P1
        p1 = p1 + np.array([drive[_name(cat, num)] for cat, num, _ in trials])
    return [
        component(("O1", "Oz", "O2"), 0.1, 0.02, p1),
        component(
            N170_CENTRES, N170_LATENCY, 0.025, -face_uv * np.where(face, 1.0, 0.3), radius=0.05
        ),
    ]


# --------------------------------------------------------------------------------------
# Writers


def _channels_tsv(path: Path, names: Sequence[str], types: Sequence[str], units: Sequence[str]):
    n = len(names)
    write_tsv(
        path,
        {
            "name": list(names),
            "type": list(types),
            "units": list(units),
            "low_cutoff": ["n/a"] * n,
            "high_cutoff": ["n/a"] * n,
            "status": ["good"] * n,
        },
    )


def _write_eeg_run(
    path: Path,
    *,
    data: np.ndarray,
    sfreq: float,
    ch_names: Sequence[str],
    onsets: np.ndarray,
    codes: Sequence[int],
    rows: list[list[str]],
    meas_date: datetime,
) -> None:
    import pybv

    path.parent.mkdir(parents=True, exist_ok=True)
    pybv.write_brainvision(
        data=data,
        sfreq=sfreq,
        ch_names=list(ch_names),
        ref_ch_names="FCz",
        fname_base=path.name.removesuffix(".vhdr"),
        folder_out=str(path.parent),
        events=np.column_stack([onsets, codes]),
        resolution=0.1,
        unit="µV",
        fmt="binary_int16",
        meas_date=meas_date,
    )
    base = path.name.removesuffix("_eeg.vhdr")
    write_rows(path.with_name(f"{base}_events.tsv"), MEG_COLUMNS, rows, newline=CRLF)
    _channels_tsv(
        path.with_name(f"{base}_channels.tsv"),
        ch_names,
        ["EEG"] * len(ch_names),
        ["µV"] * len(ch_names),
    )
    write_json(
        path.with_name(f"{base}_eeg.json"),
        {
            "TaskName": TASK,
            "TaskDescription": "Judging the symmetry of famous, unfamiliar and scrambled faces.",
            "SamplingFrequency": sfreq,
            "PowerLineFrequency": LINE_FREQ,
            "EEGReference": "FCz",
            "EEGPlacementScheme": "10-20",
            "EEGChannelCount": len(ch_names),
            "EOGChannelCount": 0,
            "ECGChannelCount": 0,
            "SoftwareFilters": "n/a",
            "RecordingType": "continuous",
            "RecordingDuration": round(data.shape[1] / sfreq, 4),
            "Manufacturer": "neuroflow simulation",
        },
    )


def _write_meg_run(
    path: Path,
    *,
    rng: np.random.Generator,
    trials: list[tuple[str, int, int]],
    sfreq: float,
    face_uv: float,
    meas_date: datetime,
    n_sensors: int = 8,
    n_eeg: int = 64,
) -> dict[str, Any]:
    """Write one FIF run with MEG (mag + grad), EEG001-EEG0nn and STI101, plus sidecars."""
    import mne

    padding = 2.0
    onsets, rows = _meg_events(rng, trials, sfreq, padding)
    n_times = int(onsets[-1] + round((1.6 + padding) * sfreq))
    eeg_1020 = list(CHANNELS[:n_eeg])
    eeg = simulate_eeg(
        rng=rng,
        ch_names=eeg_1020,
        sfreq=sfreq,
        n_times=n_times,
        onsets=onsets,
        components=_eeg_components(trials, face_uv),
        noise_uv=6.0,
        line_freq=LINE_FREQ,
    )
    meg_names, meg_types = [], []
    for k in range(n_sensors):
        stem = f"MEG{k // 4 + 1:02d}{k % 4 + 1}"
        for suffix, kind in (("1", "mag"), ("2", "grad"), ("3", "grad")):
            meg_names.append(stem + suffix)
            meg_types.append(kind)
    is_mag = np.array([t == "mag" for t in meg_types])
    noise_scale = np.where(is_mag, 2e-13, 4e-12)
    mixing = rng.standard_normal((len(meg_names), len(meg_names))) * 0.3 + np.eye(len(meg_names))
    meg = mixing @ rng.standard_normal((len(meg_names), n_times))
    meg = meg / meg.std(axis=1, keepdims=True) * noise_scale[:, None]
    face = np.array([cat != "S" for cat, _, _ in trials])
    t = np.arange(round(0.3 * sfreq)) / sfreq
    wave = np.exp(-((t - N170_LATENCY) ** 2) / (2 * 0.025**2))
    pattern = rng.standard_normal(len(meg_names)) * noise_scale * 2.0
    for onset, is_face in zip(onsets, face, strict=True):
        stop = min(onset + wave.size, n_times)
        amp = 1.0 if is_face else 0.3
        meg[:, onset:stop] += amp * pattern[:, None] * wave[: stop - onset]
    stim = np.zeros((1, n_times))
    codes = [TRIGGERS[cat] + kind for cat, _, kind in trials]
    for onset, code in zip(onsets, codes, strict=True):
        stim[0, onset : onset + round(0.05 * sfreq)] = code
    names = [*meg_names, *eeg_1020, "STI101"]
    types = [*meg_types, *["eeg"] * n_eeg, "stim"]
    info = mne.create_info(names, sfreq, types)
    data = np.concatenate([meg, eeg, stim])
    peak = np.abs(data).max(axis=1)
    for ch, top in zip(info["chs"], peak, strict=True):
        ch["range"] = 1.0
        ch["cal"] = 1.0 if ch["kind"] == mne.io.constants.FIFF.FIFFV_STIM_CH else top / 30000.0
    raw = mne.io.RawArray(data, info, verbose=False)
    montage = "colin27_1020"
    if montage not in mne.channels.get_builtin_montages():
        montage = "standard_1020"
    raw.set_montage(montage, verbose=False)
    eeg_names = [f"EEG{i + 1:03d}" for i in range(n_eeg)]
    raw.rename_channels(dict(zip(eeg_1020, eeg_names, strict=True)))
    raw.info["line_freq"] = LINE_FREQ
    raw.set_meas_date(meas_date)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw.save(path, fmt="short", verbose=False)
    base = path.name.removesuffix("_meg.fif")
    write_rows(path.with_name(f"{base}_events.tsv"), MEG_COLUMNS, rows, newline=CRLF)
    units = {"mag": "T", "grad": "T/m", "eeg": "V", "stim": "n/a"}
    bids_types = {"mag": "MEGMAG", "grad": "MEGGRADPLANAR", "eeg": "EEG", "stim": "TRIG"}
    _channels_tsv(
        path.with_name(f"{base}_channels.tsv"),
        raw.ch_names,
        [bids_types[t] for t in types],
        [units[t] for t in types],
    )
    write_json(
        path.with_name(f"{base}_meg.json"),
        {
            "TaskName": TASK,
            "SamplingFrequency": sfreq,
            "PowerLineFrequency": LINE_FREQ,
            "DewarPosition": "upright",
            "SoftwareFilters": "n/a",
            "DigitizedLandmarks": True,
            "DigitizedHeadPoints": False,
            "MEGChannelCount": len(meg_names),
            "MEGREFChannelCount": 0,
            "EEGChannelCount": n_eeg,
            "EOGChannelCount": 0,
            "ECGChannelCount": 0,
            "StimulusChannelCount": 1,
            "RecordingType": "continuous",
            "RecordingDuration": round(n_times / sfreq, 4),
            "Manufacturer": "neuroflow simulation (Elekta-like channel names)",
        },
    )
    write_json(
        path.parent / f"{base.split('_task-')[0]}_coordsystem.json",
        {
            "MEGCoordinateSystem": "ElektaNeuromag",
            "MEGCoordinateUnits": "m",
            "EEGCoordinateSystem": "ElektaNeuromag",
            "EEGCoordinateUnits": "m",
            "AnatomicalLandmarkCoordinateSystem": "ElektaNeuromag",
            "AnatomicalLandmarkCoordinateUnits": "m",
        },
    )
    return {
        "path": path,
        "events": path.with_name(f"{base}_events.tsv"),
        "sfreq": sfreq,
        "n_trials": len(trials),
        "meg_channels": meg_names,
        "eeg_channels": eeg_names,
        "stim_channel": "STI101",
    }


def _regions(shape: Sequence[int], jitter: np.ndarray):
    """Brain, bilateral ventral face blob and occipital visual blob on a grid (booleans)."""
    brain = ellipsoid(shape, (0.0, 0.0, 0.0), (0.85, 0.9, 0.85))
    face = ellipsoid(shape, np.array([-0.45, -0.3, -0.45]) + jitter[0], (0.25, 0.3, 0.3))
    face |= ellipsoid(shape, np.array([0.45, -0.3, -0.45]) + jitter[1], (0.25, 0.3, 0.3))
    vis = ellipsoid(shape, np.array([0.0, -0.72, -0.05]) + jitter[2], (0.4, 0.25, 0.4)) & brain
    return brain, face & brain & ~vis, vis


def _blob_signal(
    shape: Sequence[int], jitter: np.ndarray, courses: np.ndarray, rng: np.random.Generator
):
    """Regions and signal (n_volumes, X, Y, Z) with per-voxel log-normal gains.

    ``courses`` has shape (n_volumes, 2): the face blob's and the visual blob's response.
    """
    brain, face, vis = _regions(shape, jitter)
    signal = np.zeros((len(courses), *shape))
    for k, blob in enumerate((face, vis)):
        gains = np.exp(0.3 * rng.standard_normal(int(blob.sum())))
        signal[:, blob] = np.outer(courses[:, k], gains)
    return brain, face, vis, signal


def _write_bold(path: Path, bold: np.ndarray, affine: np.ndarray, tr: float | None) -> None:
    """Write int16 BOLD; with ``tr=None`` the header has no time units and pixdim[4] 1."""
    if tr is not None:
        write_nifti(path, bold, affine, tr=tr)
        return
    import nibabel as nib

    img = nib.Nifti1Image(bold, affine)
    img.header.set_xyzt_units("mm")
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.to_filename(path)


def _confounds(rng: np.random.Generator, n_volumes: int) -> dict[str, list[str]]:
    """fMRIPrep-like confounds columns (formatted): motion, FD, one non-steady-state volume."""
    steps = rng.standard_normal((n_volumes, 6)) * np.array([0.02] * 3 + [0.0004] * 3)
    motion = np.cumsum(steps, axis=0)
    motion -= motion[0]
    diff = np.abs(np.diff(motion, axis=0))
    fd = diff[:, :3].sum(axis=1) + 50.0 * diff[:, 3:].sum(axis=1)
    cols = {name: [f"{v:.6g}" for v in motion[:, i]] for i, name in enumerate(_MOTION)}
    cols["framewise_displacement"] = ["n/a", *(f"{v:.6g}" for v in fd)]
    cols["non_steady_state_outlier00"] = ["1", *["0"] * (n_volumes - 1)]
    return cols


# --------------------------------------------------------------------------------------


def make_ds000117_like(
    root: str | Path,
    *,
    seed: int = 0,
    fmriprep: bool = False,
    meg_fif: bool = False,
    n_volumes: int = 110,
    header_tr: float | None = 2.0,
    grid_shape: tuple[int, int, int] = (11, 13, 9),
    mni_shape: tuple[int, int, int] = (10, 12, 9),
    fmri_per_run: int = 9,
    eeg_per_run: int = 12,
    meg_per_run: int = 6,
    eeg_sfreq: float = 200.0,
    face_uv: float = 8.0,
    fmri_snr: float = 1.0,
    image_size: int = 64,
    n_fmri_runs: int = 4,
    eeg_feature_uv: float = 0.0,
    n_subjects: int = 2,
) -> dict[str, Any]:
    """Write a ds000117-shaped dataset: fMRI and EEG sessions of a face task.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream.
    fmriprep : bool
        Also write fMRIPrep-like derivatives (MNI-space preprocessed BOLD on another
        grid, brain masks, confounds with one non-steady-state volume, brighter).
    meg_fif : bool
        Also write one MEG-session FIF run per subject with MEG and 64 EEG channels.
    n_volumes : int
        Volumes per fMRI run (TR 2 s).
    header_tr : float | None
        TR written in the NIfTI headers (``pixdim[4]``); ``None`` leaves it unset (1.0
        in nibabel's default header, no time units), to check that readers take the TR
        from the top-level sidecar.
    grid_shape, mni_shape : tuple of int
        Raw BOLD grid (3 mm) and fMRIPrep output grid (3 mm, another origin).
    fmri_per_run, eeg_per_run, meg_per_run : int
        New images per category per run (each is shown twice).
    eeg_sfreq : float
        EEG (and MEG) sampling frequency (Hz).
    face_uv : float
        N170 amplitude for faces (µV; scrambled images get 30 %).
    fmri_snr : float
        Median per-voxel SNR (variance ratio) in both fMRI blobs.
    image_size : int
        Side of the BMP images (pixels).
    n_fmri_runs : int
        fMRI runs per subject (2 to 4; the real study has 9).
    eeg_feature_uv : float
        µV added to the EEG P1 (0.1 s, O1/Oz/O2) per SD of the image's statistics drive:
        its z-scored luminance mean plus z-scored luminance SD (over the EEG images),
        divided by sqrt(2); 0 (default) leaves every P1 at 3 µV.
    n_subjects : int
        1 or 2; each subject's data do not depend on how many there are.

    Returns
    -------
    facts : dict
        ``root``, ``task``, ``subjects``, ``sessions``, ``fmri_runs`` (``"01"`` on),
        ``eeg_runs``, ``tr``, ``tr_sidecar``, ``n_volumes``, ``grid_shape``, ``affine``,
        ``bold`` / ``fmri_events`` (keyed by ``(subject, run)``), ``eeg`` (keyed by
        ``(subject, run)``: ``path``, ``events``, ``channels``, ``sidecar``,
        ``n_trials``), ``eeg_sfreq``, ``eeg_channels``, ``triggers``, ``stim_types``,
        ``stimuli`` (``func`` and ``meg`` file lists relative to ``stimuli/``),
        ``identical`` (names present in both folders with the same bytes),
        ``conflict`` (the name present in both with different bytes), ``rest_stim``,
        ``image_features`` (``func/...`` name to luminance mean and SD), ``planted``
        (``face_blob``, ``visual_blob``, ``brain`` per subject, ``fmri_snr``,
        ``n170_latency``, ``n170_channels``, ``face_uv``, ``scrambled_fraction``) and,
        with the options, ``fmriprep`` (``preproc``, ``mask``, ``confounds`` keyed by
        ``(subject, run)``, ``space``, ``grid_shape``, ``affine``,
        ``non_steady_state``) and ``meg`` (keyed by subject).
    """
    if n_subjects not in (1, 2):
        raise ValueError(f"`n_subjects` must be 1 or 2, got {n_subjects!r} instead.")
    root = prepare_root(root)
    subjects = ["01", "02"][:n_subjects]
    if not 2 <= n_fmri_runs <= 4:
        raise ValueError(f"`n_fmri_runs` must be 2, 3 or 4, got {n_fmri_runs!r} instead.")
    fmri_runs = ["01", "02", "03", "04"][:n_fmri_runs]
    eeg_runs = ["01", "02"]
    tr = 2.0
    n_pool = fmri_per_run * len(fmri_runs)
    n_meg = eeg_per_run * len(eeg_runs)
    if n_meg > n_pool:
        raise ValueError(
            f"`eeg_per_run` x 2 ({n_meg}) must not exceed `fmri_per_run` x `n_fmri_runs` "
            f"({n_pool})."
        )

    # ---- top level
    write_dataset_description(root, "neuroflow test shape: ds000117-like face processing")
    (root / "README").write_text(
        "Synthetic dataset in the shape of OpenNeuro ds000117 (neuroflow tests).\n",
        encoding="utf-8",
    )
    write_tsv(
        root / "participants.tsv",
        {
            "participant_id": [f"sub-{s}" for s in subjects],
            "age": [31, 25][:n_subjects],
            "sex": ["M", "F"][:n_subjects],
        },
    )
    write_json(
        root / f"task-{TASK}_bold.json",
        {"TaskName": TASK, "RepetitionTime": tr, "EchoTime": 0.03, "FlipAngle": 78},
    )
    write_json(
        root / f"task-{TASK}_events.json",
        {
            "stim_type": {"Description": "Image category (fMRI upper case, EEG/MEG title case)"},
            "trigger": {
                "Description": "5/6/7 famous, 13/14/15 unfamiliar, 17/18/19 scrambled: first, "
                "immediate and delayed presentation; 999 rest",
            },
            "stim_file": {"Description": "Image on screen, relative to stimuli/"},
        },
    )

    # ---- stimuli
    rng_img = rng_for(seed, "ds000117", "images")
    faces: dict[str, np.ndarray] = {}
    raw_images: dict[str, np.ndarray] = {}
    for cat in CATEGORIES:
        for num in range(1, n_pool + 1):
            face = _face(rng_img, image_size)
            if cat == "S":
                face = _scramble(rng_img, face)
            raw_images[_name(cat, num)] = face
    for name, img in raw_images.items():
        faces[name] = _finish(rng_img, img)
    rng_meg = rng_for(seed, "ds000117", "meg-set")
    meg_numbers = {
        cat: sorted((rng_meg.choice(n_pool, size=n_meg, replace=False) + 1).tolist())
        for cat in CATEGORIES
    }
    conflict = _name("S", meg_numbers["S"][0])
    stim_dir = root / "stimuli"
    for name, img in faces.items():
        _write_bmp(stim_dir / "func" / name, img)
    _write_bmp(stim_dir / "func" / "i999.bmp", _rest_image(image_size))
    meg_files = []
    meg_images: dict[str, np.ndarray] = {}
    for cat in CATEGORIES:
        for num in meg_numbers[cat]:
            name = _name(cat, num)
            img = faces[name]
            if name == conflict:
                img = _finish(rng_meg, _scramble(rng_meg, raw_images[name]))
            _write_bmp(stim_dir / "meg" / name, img)
            meg_files.append(f"meg/{name}")
            meg_images[name] = img
    # the statistics drive of every EEG image (used when eeg_feature_uv is set)
    meg_z = standardise(image_features(np.stack(list(meg_images.values()))))
    drive = dict(zip(meg_images, eeg_feature_uv * meg_z.sum(axis=1) / np.sqrt(2), strict=True))
    func_files = [f"func/{n}" for n in faces] + [REST_STIM]
    feats_raw = image_features(np.stack(list(faces.values())))
    feats = dict(zip(faces, standardise(feats_raw), strict=True))

    # ---- fMRI
    affine = grid_affine(grid_shape, 3.0)
    mni_affine = grid_affine(mni_shape, 3.0)
    mni_affine[:3, 3] += np.array([1.5, -2.0, 1.0])
    bold_paths, event_paths, blobs = {}, {}, {}
    prep: dict[str, Any] = {"preproc": {}, "mask": {}, "confounds": {}, "regions": {}}
    eeg_facts: dict[tuple[str, str], dict[str, Any]] = {}
    meg_facts: dict[str, dict[str, Any]] = {}
    for si, sub in enumerate(subjects):
        rng = rng_for(seed, "ds000117", sub, "fmri-design")
        perm = {cat: rng.permutation(n_pool) + 1 for cat in CATEGORIES}
        designs = {}
        func = root / f"sub-{sub}" / "ses-mri" / "func"
        for r, run in enumerate(fmri_runs):
            items = [
                (cat, int(n))
                for cat in CATEGORIES
                for n in perm[cat][r * fmri_per_run : (r + 1) * fmri_per_run]
            ]
            trials = _sequence(rng, items)
            rows, timing = _fmri_events(rng, trials)
            end = timing[-1][0] + timing[-1][1]
            if end > n_volumes * tr:
                raise ValueError(
                    f"`n_volumes` must cover the {len(trials)} trials of a run ({end:.0f} s, "
                    f"TR {tr:g} s), got {n_volumes} instead: raise it or lower "
                    "`fmri_per_run`."
                )
            stem = f"sub-{sub}_ses-mri_task-{TASK}_run-{run}"
            write_rows(func / f"{stem}_events.tsv", FMRI_COLUMNS, rows, newline=CRLF)
            event_paths[sub, run] = func / f"{stem}_events.tsv"
            values = np.array(
                [
                    [cat != "S", cat == "S", 1.0, *feats[_name(cat, num)]]
                    for _, _, cat, num in timing
                ],
                dtype=float,
            )
            designs[run] = hrf_convolve(
                values, [t[0] for t in timing], [t[1] for t in timing], n_volumes, tr
            )
        rng_a = rng_for(seed, "ds000117", sub, "anatomy")
        jitter = rng_a.uniform(-0.05, 0.05, size=(3, 3))
        # the two blobs' time courses, scaled to the SNR over all runs
        w_vis = rng_a.uniform(0.3, 1.0, size=2)
        weights = np.array([[1.0, 0.0], [0.25, 0.0], [0.0, 0.5], [0.0, w_vis[0]], [0.0, w_vis[1]]])
        courses = {run: designs[run] @ weights for run in fmri_runs}
        sd = np.concatenate(list(courses.values())).std(axis=0)
        courses = {run: c * np.sqrt(fmri_snr) / sd for run, c in courses.items()}
        rng_n = rng_for(seed, "ds000117", sub, "fmri-noise")
        for run in fmri_runs:
            gains = rng_for(seed, "ds000117", sub, "gains")
            brain, face, vis, sig = _blob_signal(grid_shape, jitter, courses[run], gains)
            bold = simulate_bold(rng=rng_n, mask=brain, signal=sig, tr=tr)
            stem = f"sub-{sub}_ses-mri_task-{TASK}_run-{run}"
            path = root / f"sub-{sub}" / "ses-mri" / "func" / f"{stem}_bold.nii.gz"
            _write_bold(path, bold, affine, header_tr)
            bold_paths[sub, run] = path
            blobs[sub] = {"brain": brain, "face": face, "visual": vis}
            if fmriprep:
                rng_p = rng_for(seed, "ds000117", sub, run, "fmriprep")
                gains = rng_for(seed, "ds000117", sub, "gains-mni")
                mbrain, mface, mvis, msig = _blob_signal(mni_shape, jitter, courses[run], gains)
                vol = simulate_bold(rng=rng_p, mask=mbrain, signal=msig, tr=tr).astype(np.float32)
                vol[..., 0] *= 1.4  # non-steady state, flagged in the confounds
                out = root / "derivatives" / "fmriprep" / f"sub-{sub}" / "ses-mri" / "func"
                base = out / f"{stem}_space-{MNI_SPACE}"
                write_nifti(Path(f"{base}_desc-preproc_bold.nii.gz"), vol, mni_affine, tr=tr)
                write_nifti(
                    Path(f"{base}_desc-brain_mask.nii.gz"), mbrain.astype(np.uint8), mni_affine
                )
                conf = _confounds(rng_p, n_volumes)
                write_rows(
                    out / f"{stem}_desc-confounds_timeseries.tsv",
                    list(conf),
                    [list(r) for r in zip(*conf.values(), strict=True)],
                )
                prep["preproc"][sub, run] = Path(f"{base}_desc-preproc_bold.nii.gz")
                prep["mask"][sub, run] = Path(f"{base}_desc-brain_mask.nii.gz")
                prep["confounds"][sub, run] = out / f"{stem}_desc-confounds_timeseries.tsv"
                prep["regions"][sub] = (mbrain, mface, mvis)

        # ---- EEG session
        ch_names = list(CHANNELS[:32])
        rng_e = rng_for(seed, "ds000117", sub, "eeg")
        eeg_perm = {cat: rng_e.permutation(meg_numbers[cat]) for cat in CATEGORIES}
        for r, run in enumerate(eeg_runs):
            items = [
                (cat, int(n))
                for cat in CATEGORIES
                for n in eeg_perm[cat][r * eeg_per_run : (r + 1) * eeg_per_run]
            ]
            trials = _sequence(rng_e, items)
            onsets, rows = _meg_events(rng_e, trials, eeg_sfreq, 2.0)
            n_times = int(onsets[-1] + round(3.6 * eeg_sfreq))
            data = simulate_eeg(
                rng=rng_e,
                ch_names=ch_names,
                sfreq=eeg_sfreq,
                n_times=n_times,
                onsets=onsets,
                components=_eeg_components(trials, face_uv, drive if eeg_feature_uv else None),
                noise_uv=6.0,
                line_freq=LINE_FREQ,
            )
            stem = f"sub-{sub}_ses-eeg_task-{TASK}_run-{run}"
            path = root / f"sub-{sub}" / "ses-eeg" / "eeg" / f"{stem}_eeg.vhdr"
            _write_eeg_run(
                path,
                data=data,
                sfreq=eeg_sfreq,
                ch_names=ch_names,
                onsets=onsets,
                codes=[TRIGGERS[c] + k for c, _, k in trials],
                rows=rows,
                meas_date=datetime(2012, 3, 1 + si, 10, tzinfo=UTC) + timedelta(hours=r),
            )
            eeg_facts[sub, run] = {
                "path": path,
                "events": path.with_name(f"{stem}_events.tsv"),
                "channels": path.with_name(f"{stem}_channels.tsv"),
                "sidecar": path.with_name(f"{stem}_eeg.json"),
                "n_trials": len(trials),
            }

        if meg_fif:
            rng_m = rng_for(seed, "ds000117", sub, "meg")
            items = [
                (cat, int(n))
                for cat in CATEGORIES
                for n in rng_m.choice(meg_numbers[cat], size=meg_per_run, replace=False)
            ]
            stem = f"sub-{sub}_ses-meg_task-{TASK}_run-01"
            meg_facts[sub] = _write_meg_run(
                root / f"sub-{sub}" / "ses-meg" / "meg" / f"{stem}_meg.fif",
                rng=rng_m,
                trials=_sequence(rng_m, items),
                sfreq=eeg_sfreq,
                face_uv=face_uv,
                meas_date=datetime(2012, 3, 1 + si, 14, tzinfo=UTC),
            )

    if fmriprep:
        write_dataset_description(
            root / "derivatives" / "fmriprep",
            "fMRIPrep - fMRI PREProcessing workflow (simulated)",
            dataset_type="derivative",
            generated_by=[{"Name": "fMRIPrep", "Version": "23.2.0"}],
        )

    facts: dict[str, Any] = {
        "root": root,
        "task": TASK,
        "subjects": subjects,
        "sessions": ["mri", "eeg", *(["meg"] if meg_fif else [])],
        "fmri_runs": fmri_runs,
        "eeg_runs": eeg_runs,
        "tr": tr,
        "tr_sidecar": root / f"task-{TASK}_bold.json",
        "header_tr": header_tr,
        "n_volumes": n_volumes,
        "grid_shape": tuple(grid_shape),
        "affine": affine,
        "bold": bold_paths,
        "fmri_events": event_paths,
        "eeg": eeg_facts,
        "eeg_sfreq": float(eeg_sfreq),
        "eeg_channels": list(CHANNELS[:32]),
        "line_freq": LINE_FREQ,
        "triggers": {
            MEG_TYPES[c]: [TRIGGERS[c], TRIGGERS[c] + 1, TRIGGERS[c] + 2] for c in CATEGORIES
        },
        "stim_types": {"fmri": list(FMRI_TYPES.values()), "eeg": list(MEG_TYPES.values())},
        "stimuli": {"func": func_files, "meg": meg_files},
        "identical": sorted(m.split("/")[1] for m in meg_files if not m.endswith(conflict)),
        "conflict": conflict,
        "rest_stim": REST_STIM,
        "image_features": {f"func/{n}": v for n, v in zip(faces, feats_raw, strict=True)},
        "planted": {
            "face_blob": {s: b["face"] for s, b in blobs.items()},
            "visual_blob": {s: b["visual"] for s, b in blobs.items()},
            "brain": {s: b["brain"] for s, b in blobs.items()},
            "fmri_snr": fmri_snr,
            "face_response": {"faces": 1.0, "scrambled": 0.25},
            "n170_latency": N170_LATENCY,
            "n170_channels": list(N170_CENTRES),
            "face_uv": face_uv,
            "scrambled_fraction": 0.3,
            "p1_latency": 0.1,
            "p1_channels": ["O1", "Oz", "O2"],
            "eeg_feature_uv": eeg_feature_uv,
            "eeg_feature_drive": {f"meg/{n}": float(v) for n, v in drive.items()},
        },
    }
    if fmriprep:
        regions_mni = prep.pop("regions")
        facts["fmriprep"] = {
            **prep,
            "space": MNI_SPACE,
            "grid_shape": tuple(mni_shape),
            "affine": mni_affine,
            "non_steady_state": 1,
            "brain": {s: r[0] for s, r in regions_mni.items()},
            "face_blob": {s: r[1] for s, r in regions_mni.items()},
            "visual_blob": {s: r[2] for s, r in regions_mni.items()},
        }
    if meg_fif:
        facts["meg"] = meg_facts
    return facts

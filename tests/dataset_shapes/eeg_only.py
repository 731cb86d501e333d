"""An EEG-only BIDS dataset as MNE-BIDS writes it: an auditory-oddball-like P300 task.

Layout (``sessions=False``; with ``sessions=True`` every file below ``sub-XX/`` moves to
``sub-XX/ses-01/`` and the scans table becomes ``sub-XX_ses-01_scans.tsv``)::

    dataset_description.json  README  participants.tsv  participants.json
    sub-01/sub-01_scans.tsv
    sub-01/eeg/sub-01_task-oddball_run-01_eeg.vhdr (+ .vmrk, .eeg)   BrainVision
    sub-01/eeg/sub-01_task-oddball_run-01_{events.tsv,channels.tsv,eeg.json}
    sub-01/eeg/sub-01_{electrodes.tsv,coordsystem.json}
    ...run-02...
    sub-02/eeg/sub-02_task-oddball_run-0R_eeg.fif                    FIF
    ...

Everything is genuine :func:`mne_bids.write_raw_bids` output, except FIF subjects:
MNE-BIDS refuses FIF for the ``eeg`` datatype (BIDS EEG allows ``.vhdr``, ``.edf``,
``.bdf`` and ``.set``), so a FIF subject is written by MNE-BIDS as BrainVision and its
data files are then replaced by ``_eeg.fif`` holding the same data (float32, with the
events as annotations), and ``scans.tsv`` is updated: the non-compliant layout that
datasets converted by hand from Neuromag/MNE pipelines carry. (EDF output would need
``edfio``, which is not installed.)

Signal: per trial, a P1/N1 over occipital sites for every tone and a P300-like
positivity (Gaussian wave peaking at :data:`P300_LATENCY` s, width :data:`P300_WIDTH` s)
over centro-parietal sites (:data:`P300_CENTRES`), ``p300_uv`` µV on deviants and 20 % of
that on standards, with 30 % trial-to-trial amplitude jitter; background 1/f noise,
spatially smooth, ``noise_uv`` RMS; 50 Hz line noise (``PowerLineFrequency`` 50 in the
sidecar). Optionally, independent white noise per channel (``sensor_noise_uv`` RMS) and
each subject's own symmetric positive-definite channel mixing (``channel_mixing``: a
random rotation of the channels, log-normal gains, rotated back; the same for every run
of a subject), the head-to-head differences that cross-subject decoding has to bridge.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._common import CHANNELS, component, prepare_root, rng_for, simulate_eeg, write_png

__all__ = ["P300_CENTRES", "P300_LATENCY", "P300_WIDTH", "make_eeg_only", "show_images"]

TASK = "oddball"
EVENT_ID = {"standard": 1, "deviant": 2}
P300_CENTRES = ("Pz", "CP1", "CP2")
P300_LATENCY = 0.35
P300_WIDTH = 0.06
LINE_FREQ = 50.0
PADDING = 2.0
_FORMATS = ("BrainVision", "FIF")


def _montage_name() -> str:
    """The installed MNE's name of the standard 10-20 montage."""
    import mne

    builtin = mne.channels.get_builtin_montages()
    return "colin27_1020" if "colin27_1020" in builtin else "standard_1020"


def _plan_run(rng: np.random.Generator, n_events: int, n_deviants: int, sfreq: float):
    """Onset samples and condition codes of one run (no two deviants in a row)."""
    first = 3
    slots = n_events - first - (n_deviants - 1)
    if slots < n_deviants:
        raise ValueError(f"`n_events` ({n_events}) is too small for {n_deviants} deviants.")
    picks = np.sort(rng.choice(slots, size=n_deviants, replace=False)) + np.arange(n_deviants)
    codes = np.ones(n_events, dtype=int)
    codes[picks + first] = EVENT_ID["deviant"]
    soa = rng.uniform(0.9, 1.1, size=n_events)
    onset_s = PADDING + np.concatenate([[0.0], np.cumsum(soa[:-1])])
    onsets = np.round(onset_s * sfreq).astype(int)
    n_times = int(onsets[-1] + round((1.1 + PADDING) * sfreq))
    return onsets, codes, n_times


def _write_fif_instead(raw, bids_path, events: np.ndarray) -> Path:
    """Replace the BrainVision files of ``bids_path`` by an ``_eeg.fif`` with the same data."""
    import mne

    vhdr = bids_path.fpath
    fif = vhdr.with_suffix(".fif")
    raw = raw.copy()
    sfreq = raw.info["sfreq"]
    names = {v: k for k, v in EVENT_ID.items()}
    raw.set_annotations(
        mne.Annotations(
            onset=events[:, 0] / sfreq,
            duration=np.zeros(len(events)),
            description=[names[c] for c in events[:, 2]],
            orig_time=raw.info["meas_date"],
        )
    )
    raw.save(fif, fmt="single", overwrite=False, verbose=False)
    for ext in (".vhdr", ".vmrk", ".eeg"):
        vhdr.with_suffix(ext).unlink()
    scans = next(vhdr.parents[1].glob("*_scans.tsv"))
    scans.write_text(scans.read_text(encoding="utf-8").replace(vhdr.name, fif.name), "utf-8")
    return fif


def make_eeg_only(
    root: str | Path,
    *,
    seed: int = 0,
    sessions: bool = False,
    n_events: int = 80,
    deviant_fraction: float = 0.25,
    sfreq: float = 200.0,
    p300_uv: float = 10.0,
    noise_uv: float = 6.0,
    formats: Sequence[str] = _FORMATS,
    sensor_noise_uv: float = 0.0,
    channel_mixing: float = 0.0,
) -> dict[str, Any]:
    """Write an EEG-only oddball dataset (2 subjects x 2 runs, 32 channels) with MNE-BIDS.

    Parameters
    ----------
    root : path-like
        Dataset root; created, must be absent or empty.
    seed : int
        Seed of every random stream (same seed, same data).
    sessions : bool
        Put the runs under ``ses-01``.
    n_events : int
        Tones per run.
    deviant_fraction : float
        Fraction of deviants per run (never two in a row, none among the first three).
    sfreq : float
        Sampling frequency (Hz), at most 250.
    p300_uv : float
        Peak P300 amplitude on deviants (µV) at the topography peak.
    noise_uv : float
        Background RMS (µV).
    formats : sequence of str
        Data format per subject (``"BrainVision"`` or ``"FIF"``); one subject each.
    sensor_noise_uv : float
        RMS (µV) of white noise independent across channels, added before the mixing.
    channel_mixing : float
        Standard deviation of the log gains of each subject's channel mixing
        ``R diag(exp(g)) R^T`` (``R`` a random rotation); 0 mixes nothing.

    Returns
    -------
    facts : dict
        ``root``, ``task``, ``subjects``, ``sessions`` (``["01"]`` or ``[]``), ``runs``
        (``["01", "02"]``), ``formats`` (subject to format), ``recordings`` (one dict
        per run: ``subject``, ``session``, ``run``, ``format``, ``path`` of the data
        file, ``events``, ``channels``, ``sidecar``, ``n_events``, ``n_deviants``,
        ``n_times``), ``sfreq``, ``ch_names``, ``line_freq``, ``conditions``,
        ``event_id``, ``montage`` and ``planted`` (``contrast``: deviant minus
        standard, ``latency``, ``width``, ``channels``, ``amplitude_uv``,
        ``standard_fraction``, ``noise_uv``, ``sensor_noise_uv``); ``mixing``: subject
        to its mixing matrix, shape (32, 32) (the identity without ``channel_mixing``).
    """
    import mne
    import mne_bids

    if not 0 < sfreq <= 250:
        raise ValueError(f"`sfreq` must be in (0, 250] Hz, got {sfreq!r} instead.")
    bad = [f for f in formats if f not in _FORMATS]
    if bad or not formats:
        raise ValueError(f"`formats` must hold values of {list(_FORMATS)}, got {formats!r}.")
    root = prepare_root(root)
    subjects = [f"{i + 1:02d}" for i in range(len(formats))]
    runs = ["01", "02"]
    session = "01" if sessions else None
    ch_names = list(CHANNELS[:32])
    n_deviants = round(n_events * deviant_fraction)
    montage_name = _montage_name()
    montage = mne.channels.make_standard_montage(montage_name)
    recordings = []
    mixings = {sub: _mixing(seed, sub, len(ch_names), channel_mixing) for sub in subjects}
    with tempfile.TemporaryDirectory() as scratch:
        for sub, fmt in zip(subjects, formats, strict=True):
            for r, run in enumerate(runs):
                rng = rng_for(seed, "eeg_only", sub, run)
                onsets, codes, n_times = _plan_run(rng, n_events, n_deviants, sfreq)
                dev = codes == EVENT_ID["deviant"]
                jitter = np.clip(1.0 + 0.3 * rng.standard_normal(n_events), 0.1, None)
                occipital = ("O1", "Oz", "O2")
                components = [
                    component(occipital, 0.1, 0.02, np.full(n_events, 3.0)),
                    component(occipital, 0.17, 0.025, np.full(n_events, -4.0)),
                    component(
                        P300_CENTRES,
                        P300_LATENCY,
                        P300_WIDTH,
                        p300_uv * np.where(dev, 1.0, 0.2) * jitter,
                        radius=0.06,
                    ),
                ]
                data = simulate_eeg(
                    rng=rng,
                    ch_names=ch_names,
                    sfreq=sfreq,
                    n_times=n_times,
                    onsets=onsets,
                    components=components,
                    noise_uv=noise_uv,
                    line_freq=LINE_FREQ,
                )
                if sensor_noise_uv:
                    sensor = rng_for(seed, "eeg_only", sub, run, "sensor")
                    data = data + sensor_noise_uv * 1e-6 * sensor.standard_normal(data.shape)
                if channel_mixing:
                    data = mixings[sub] @ data
                info = mne.create_info(ch_names, sfreq, "eeg")
                raw = mne.io.RawArray(data, info, verbose=False)
                raw.set_montage(montage, verbose=False)
                raw.info["line_freq"] = LINE_FREQ
                date = datetime(2023, 5, 2, 9, 0, tzinfo=UTC) + timedelta(days=int(sub), hours=r)
                raw.set_meas_date(date)
                if fmt == "FIF":
                    # a float32 source file, as a converted recording would be
                    src = Path(scratch) / f"sub-{sub}_run-{run}_raw.fif"
                    raw.save(src, fmt="single", verbose=False)
                    raw = mne.io.read_raw_fif(src, preload=True, verbose=False)
                events = np.column_stack([onsets, np.zeros_like(onsets), codes])
                bids_path = mne_bids.BIDSPath(
                    subject=sub, session=session, task=TASK, run=run, datatype="eeg", root=root
                )
                mne_bids.write_raw_bids(
                    raw,
                    bids_path,
                    events=events.copy(),
                    event_id=EVENT_ID,
                    format="BrainVision",
                    allow_preload=True,
                    verbose=False,
                )
                path = bids_path.fpath
                if fmt == "FIF":
                    path = _write_fif_instead(raw, bids_path, events)
                stem = path.name.rsplit("_eeg", 1)[0]
                recordings.append(
                    {
                        "subject": sub,
                        "session": session,
                        "run": run,
                        "format": fmt,
                        "path": path,
                        "events": path.with_name(f"{stem}_events.tsv"),
                        "channels": path.with_name(f"{stem}_channels.tsv"),
                        "sidecar": path.with_name(f"{stem}_eeg.json"),
                        "n_events": n_events,
                        "n_deviants": int(dev.sum()),
                        "n_times": n_times,
                    }
                )
    mne_bids.make_dataset_description(
        path=root,
        name="neuroflow test shape: EEG-only oddball",
        dataset_type="raw",
        authors=["neuroflow tests"],
        overwrite=True,
        verbose=False,
    )
    return {
        "root": root,
        "task": TASK,
        "subjects": subjects,
        "sessions": [session] if session else [],
        "runs": runs,
        "formats": dict(zip(subjects, formats, strict=True)),
        "recordings": recordings,
        "sfreq": float(sfreq),
        "ch_names": ch_names,
        "line_freq": LINE_FREQ,
        "conditions": list(EVENT_ID),
        "event_id": dict(EVENT_ID),
        "montage": montage_name,
        "planted": {
            "contrast": ["deviant", "standard"],
            "latency": P300_LATENCY,
            "width": P300_WIDTH,
            "channels": list(P300_CENTRES),
            "amplitude_uv": float(p300_uv),
            "standard_fraction": 0.2,
            "noise_uv": float(noise_uv),
            "sensor_noise_uv": float(sensor_noise_uv),
        },
        "mixing": mixings,
    }


def _mixing(seed: int, subject: str, n_channels: int, log_sd: float) -> np.ndarray:
    """A subject's symmetric positive-definite channel mixing, shape (n_channels, n_channels)."""
    if not log_sd:
        return np.eye(n_channels)
    from scipy.stats import ortho_group

    rng = rng_for(seed, "eeg_only", subject, "mixing")
    rotation = ortho_group.rvs(n_channels, random_state=rng)
    return (rotation * np.exp(rng.normal(0.0, log_sd, n_channels))) @ rotation.T


def show_images(facts: dict[str, Any], *, n_test: int, n_train: int) -> dict[str, Any]:
    """Turn a :func:`make_eeg_only` dataset into an image-viewing design with a test block.

    Every run's events keep their onsets; the first ``2 * n_test`` events show the test
    images (``trial_type`` ``test``, each twice), the others cycle through the training
    images (``trial_type`` ``train``). ``stim_file`` names the images, written as small
    PNGs under ``stimuli/images/``.

    Parameters
    ----------
    facts : dict
        What :func:`make_eeg_only` returned.
    n_test, n_train : int
        Distinct test and training images.

    Returns
    -------
    facts : dict
        ``facts`` with ``test_images`` and ``train_images`` (stim_files) added.
    """
    root = Path(facts["root"])
    test = [f"images/test_{i:02d}.png" for i in range(n_test)]
    train = [f"images/train_{i:02d}.png" for i in range(n_train)]
    rng = rng_for(0, "eeg_only", "images")
    for stim in test + train:
        write_png(root / "stimuli" / stim, rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))
    for rec in facts["recordings"]:
        table = pd.read_csv(rec["events"], sep="\t", dtype=str, keep_default_na=False)
        n_shown = 2 * n_test
        rows = range(len(table))
        table["trial_type"] = ["test" if i < n_shown else "train" for i in rows]
        table["stim_file"] = [
            test[i % n_test] if i < n_shown else train[(i - n_shown) % n_train] for i in rows
        ]
        table.to_csv(rec["events"], sep="\t", index=False)
    return {**facts, "test_images": test, "train_images": train}

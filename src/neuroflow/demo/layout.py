"""Where the demo generator writes every file (known before anything is written)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..io.records import EegRecording, FmriRun
from ._config import resolve_config
from .stimuli import POOL_FOLDER, plan_eeg_images, plan_movies, pool_names

__all__ = ["EEG_TASK", "FMRI_TASK", "DemoLayout", "demo_layout", "run_movies"]

FMRI_TASK = "movie"
EEG_TASK = "images"
GROUNDTRUTH = Path("derivatives") / "groundtruth"
CONFOUNDS = Path("derivatives") / "confounds"


@dataclass(frozen=True)
class DemoLayout:
    """Files of the demo dataset.

    Attributes
    ----------
    root : Path
        Dataset root.
    subjects : tuple of str
        Subject labels (``"01"``, ``"02"``...).
    fmri_runs : tuple of FmriRun
        Every fMRI run, by subject then run.
    eeg_recordings : tuple of EegRecording
        One recording per subject.
    stimulus_ids : tuple of str
        ``stim_file`` of every stimulus (relative to ``stimuli/``): movie shots, then EEG
        images.
    pool_ids : tuple of str
        File names of the never-shown pool images, relative to :attr:`pool_dir`
        (``pool-0001.png``...); empty when ``pool.n_images`` is 0.
    train_runs, test_runs : tuple of str
        Run labels of the distinct training movies and of the repeated test movie.
    captions : Path
        ``stimuli/captions.tsv``.
    groundtruth : Path
        ``derivatives/groundtruth``.
    files : tuple of Path
        Every file the generator writes, sorted.
    """

    root: Path
    subjects: tuple[str, ...]
    fmri_runs: tuple[FmriRun, ...]
    eeg_recordings: tuple[EegRecording, ...]
    stimulus_ids: tuple[str, ...]
    pool_ids: tuple[str, ...]
    train_runs: tuple[str, ...]
    test_runs: tuple[str, ...]
    captions: Path
    groundtruth: Path
    files: tuple[Path, ...]

    @property
    def stimuli_dir(self) -> Path:
        """``stimuli/`` folder."""
        return self.root / "stimuli"

    @property
    def pool_dir(self) -> Path:
        """``stimuli/pool/`` folder (pool images and their ``captions.tsv``)."""
        return self.stimuli_dir / POOL_FOLDER


def run_movies(config: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Run label, movie name and split of each fMRI run, in order.

    Parameters
    ----------
    config : dict
        A resolved ``demo`` section.

    Returns
    -------
    runs : list of (str, str, str)
        E.g. ``[("1", "train-1", "train"), ..., ("4", "test", "test"), ("5", "test", "test")]``.
    """
    f = config["fmri"]
    runs = [(str(i + 1), f"train-{i + 1}", "train") for i in range(f["n_train_runs"])]
    start = len(runs)
    runs += [(str(start + i + 1), "test", "test") for i in range(f["n_test_repeats"])]
    return runs


def _subject_fmri(root: Path, cfg: Mapping[str, Any], sub: str) -> tuple[list[FmriRun], list[Path]]:
    func = root / f"sub-{sub}" / "func"
    anat = root / f"sub-{sub}" / "anat"
    mask = anat / f"sub-{sub}_desc-brain_mask.nii.gz"
    files = [mask, anat / f"sub-{sub}_T1w.nii.gz"]
    runs = []
    for run, _, _ in run_movies(cfg):
        stem = f"sub-{sub}_task-{FMRI_TASK}_run-{run}"
        conf = None
        if cfg["fmri"]["write_confounds"]:
            conf = (
                root / CONFOUNDS / f"sub-{sub}" / "func" / f"{stem}_desc-confounds_timeseries.tsv"
            )
            files.append(conf)
        rec = FmriRun(
            subject=sub,
            session=None,
            task=FMRI_TASK,
            run=run,
            bold=func / f"{stem}_bold.nii.gz",
            events=func / f"{stem}_events.tsv",
            sidecars=(root / f"task-{FMRI_TASK}_bold.json",),
            mask=mask,
            confounds=conf,
        )
        runs.append(rec)
        files += [rec.bold, rec.events]
    return runs, files


def _subject_eeg(root: Path, sub: str) -> tuple[EegRecording, list[Path]]:
    eeg = root / f"sub-{sub}" / "eeg"
    stem = f"sub-{sub}_task-{EEG_TASK}"
    rec = EegRecording(
        subject=sub,
        session=None,
        task=EEG_TASK,
        run=None,
        eeg=eeg / f"{stem}_eeg.vhdr",
        events=eeg / f"{stem}_events.tsv",
        channels=eeg / f"{stem}_channels.tsv",
        electrodes=eeg / f"sub-{sub}_electrodes.tsv",
        sidecars=(eeg / f"{stem}_eeg.json",),
    )
    files = [
        rec.eeg,
        rec.eeg.with_suffix(".vmrk"),
        rec.eeg.with_suffix(".eeg"),
        rec.events,
        rec.channels,
        rec.electrodes,
        eeg / f"sub-{sub}_coordsystem.json",
        *rec.sidecars,
    ]
    return rec, files


def _pool_files(root: Path, pool_ids: tuple[str, ...], subjects: tuple[str, ...]) -> list[Path]:
    """Files of the pool and of its ground truth (none without a pool)."""
    if not pool_ids:
        return []
    pool = root / "stimuli" / POOL_FOLDER
    gt = root / GROUNDTRUTH
    return [
        pool / "captions.tsv",
        *(pool / name for name in pool_ids),
        gt / "pool_features.npz",
        gt / "pool_stimuli.tsv",
        *(gt / f"sub-{sub}" / f"sub-{sub}_pool.tsv" for sub in subjects),
    ]


def demo_layout(config: Mapping[str, Any] | None, root: str | Path) -> DemoLayout:
    """Describe the files :func:`~neuroflow.demo.generate_demo_dataset` will write.

    Pure: plans the stimuli from the seed, reads and writes nothing.

    Parameters
    ----------
    config : dict | None
        The ``demo`` section; missing keys take their defaults.
    root : path-like
        Where the dataset will be written.

    Returns
    -------
    layout : DemoLayout
    """
    cfg = resolve_config(config)
    key = (json.dumps(cfg, sort_keys=True, default=repr), str(root))
    if key not in _LAYOUTS:  # the plan asks several times per run: the layout is immutable
        if len(_LAYOUTS) >= 16:
            _LAYOUTS.clear()
        _LAYOUTS[key] = _layout(cfg, Path(root))
    return _LAYOUTS[key]


#: Layouts already planned, by (resolved config as JSON, root).
_LAYOUTS: dict[tuple[str, str], DemoLayout] = {}


def _layout(cfg: Mapping[str, Any], root: Path) -> DemoLayout:
    """:func:`demo_layout` of a resolved config."""
    subjects = tuple(f"{i + 1:02d}" for i in range(cfg["n_subjects"]))
    train, test = plan_movies(cfg)
    images, _ = plan_eeg_images(cfg)
    shots = [s for m in train for s in m.shots] + (list(test.shots) if test else [])
    stim_ids = tuple(s.stim_file for s in [*shots, *images])
    pool_ids = tuple(pool_names(cfg["pool"]["n_images"]))
    gt = root / GROUNDTRUTH
    files: list[Path] = [
        root / name
        for name in (
            "dataset_description.json",
            "participants.tsv",
            "participants.json",
            "README",
            ".bidsignore",
            ".neuroflow.json",
            f"task-{FMRI_TASK}_bold.json",
            f"task-{FMRI_TASK}_events.json",
            f"task-{EEG_TASK}_events.json",
        )
    ]
    files += [root / "stimuli" / "captions.tsv", root / "stimuli" / "concepts.tsv"]
    files += [root / "stimuli" / s for s in stim_ids]
    files += [
        gt / name
        for name in (
            "dataset_description.json",
            "groundtruth.json",
            "rois.tsv",
            "stimuli.tsv",
            "features.npz",
            "features_visual.tsv",
        )
    ]
    files += _pool_files(root, pool_ids, subjects)
    if cfg["fmri"]["write_confounds"]:
        files.append(root / CONFOUNDS / "dataset_description.json")
    fmri_runs: list[FmriRun] = []
    eeg_recs: list[EegRecording] = []
    for sub in subjects:
        runs, f_files = _subject_fmri(root, cfg, sub)
        rec, e_files = _subject_eeg(root, sub)
        fmri_runs += runs
        eeg_recs.append(rec)
        files += f_files + e_files
        files += [
            gt / f"sub-{sub}" / f"sub-{sub}_desc-rois_dseg.nii.gz",
            gt / f"sub-{sub}" / f"sub-{sub}_fmri.npz",
            gt / f"sub-{sub}" / f"sub-{sub}_eeg.npz",
        ]
    runs = run_movies(cfg)
    return DemoLayout(
        root=root,
        subjects=subjects,
        fmri_runs=tuple(fmri_runs),
        eeg_recordings=tuple(eeg_recs),
        stimulus_ids=stim_ids,
        pool_ids=pool_ids,
        train_runs=tuple(r for r, _, split in runs if split == "train"),
        test_runs=tuple(r for r, _, split in runs if split == "test"),
        captions=root / "stimuli" / "captions.tsv",
        groundtruth=gt,
        files=tuple(sorted(files)),
    )

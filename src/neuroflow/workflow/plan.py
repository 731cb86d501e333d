"""What the workflow will compute, and where each artifact lives.

:class:`WorkflowPlan` is built once per Snakemake invocation from the validated
config: it indexes the dataset once (or predicts the demo's files before the
demo exists), computes every stage's version id and builds result paths.
The rules in ``rules/*.smk`` only ask it for paths.

Layout of ``results/``::

    demo/<v>/                                         the generated BIDS dataset
    preprocess_fmri/<v>/sub-XX/<key>_desc-clean_bold.zarr
    preprocess_eeg/<v>/sub-XX/<key>_epo.zarr, <key>_raw.zarr
    features/<extractor>-<v>/<layer>.zarr
    align_features/<extractor>-<v>/sub-XX/<key>_<layer>.zarr
    encoding/<model>-<v>/sub-XX_encoding.zarr
    evaluation/<model>-<v>/sub-XX_scores.zarr
    summary/<v>/scores.tsv, summary.zarr, plots/
    single_trial/<v>/sub-XX/sub-XX_desc-singletrial_betas.zarr   (when enabled)
    trial_encoding/<model>-<v>/sub-XX_encoding.zarr              (when single_trial is enabled)
    trial_evaluation/<model>-<v>/sub-XX_scores.zarr
    eeg_encoding/<model>-<v>/sub-XX/<key>_encoding.zarr
    eeg_evaluation/<model>-<v>/sub-XX/<key>_scores.zarr
    eeg_trf/<model>-<v>/sub-XX/<key>_trf.zarr                    (when eeg_encoding.trf is enabled)
    decoding/<v>/decoding_eeg.zarr
    rsa/eeg-<v>/rsa_eeg.zarr, rsa/fmri-<v>/rsa_fmri.zarr
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuroflow.io.records import EegRecording, FmriRun
from neuroflow.workflow.versions import (
    eeg_encoding_config,
    eeg_trf_config,
    encoding_config,
    stage_versions,
    trial_encoding_config,
)

__all__ = ["WorkflowPlan"]


@dataclass
class WorkflowPlan:
    """Versions, recordings and result paths for one config.

    Parameters
    ----------
    config : dict
        The whole validated config.
    """

    config: Mapping[str, Any]
    versions: dict[str, str] = field(init=False)
    results: Path = field(init=False)
    fmri_runs: list[FmriRun] = field(init=False)
    eeg_recordings: list[EegRecording] = field(init=False)
    _fmri_by_key: dict[str, FmriRun] = field(init=False, repr=False)
    _eeg_by_key: dict[str, EegRecording] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.results = Path(self.config["results_dir"])
        self.versions = stage_versions(self.config)
        self.fmri_runs, self.eeg_recordings = self._index()
        self._fmri_by_key = {r.key: r for r in self.fmri_runs}
        self._eeg_by_key = {r.key: r for r in self.eeg_recordings}

    # ------------------------------------------------------------------ dataset
    @property
    def is_demo(self) -> bool:
        """Whether the input is the embedded demo dataset."""
        return self.config["dataset"]["source"] == "demo"

    @property
    def bids_root(self) -> Path:
        """Root of the BIDS dataset (the demo's output folder for the demo)."""
        if self.is_demo:
            return self.results / "demo" / self.versions["demo"]
        return Path(self.config["dataset"]["bids_root"])

    def _index(self) -> tuple[list[FmriRun], list[EegRecording]]:
        """Index the dataset once (or predict the demo's files before it exists)."""
        ds = self.config["dataset"]
        if self.is_demo:
            from neuroflow.demo import demo_layout

            layout = demo_layout(self.config["demo"], self.bids_root)
            return self._filter(layout.fmri_runs), self._filter(layout.eeg_recordings)
        from neuroflow.io.bids import index_eeg_recordings, index_fmri_runs

        if not ds.get("bids_root"):
            raise ValueError(
                f"`dataset.bids_root` must name the BIDS folder when `dataset.source` is "
                f"{ds['source']!r}, got {ds.get('bids_root')!r} instead."
            )
        if ds["source"] == "fmriprep" and not ds.get("fmriprep_dir"):
            raise ValueError(
                "`dataset.fmriprep_dir` must name the fMRIPrep output folder when "
                f"`dataset.source` is 'fmriprep', got {ds.get('fmriprep_dir')!r} instead."
            )
        filters = {key: ds.get(key) or None for key in ("subjects", "sessions", "tasks", "runs")}
        has_func = ds["source"] == "fmriprep" or self._has(ds, "func")
        fmri = []
        if has_func:
            fmri = index_fmri_runs(
                ds["bids_root"],
                fmriprep_dir=ds.get("fmriprep_dir") if ds["source"] == "fmriprep" else None,
                space=ds.get("space"),
                confounds_pattern=ds.get("confounds_pattern"),
                **filters,
            )
        # Filters are checked strictly against the fMRI runs; EEG recordings that
        # match them are kept (a task filter naming an fMRI task is not an EEG error).
        eeg = index_eeg_recordings(ds["bids_root"]) if self._has(ds, "eeg") else []
        return fmri, self._filter(eeg)

    @staticmethod
    def _has(ds: Mapping[str, Any], datatype: str) -> bool:
        """Whether any subject (or session) folder has a ``datatype`` folder."""
        root = Path(ds["bids_root"])
        return any(root.glob(f"sub-*/{datatype}")) or any(root.glob(f"sub-*/ses-*/{datatype}"))

    def _filter(self, records: Any) -> list[Any]:
        """Apply the dataset filters to the demo's records (run labels match as numbers)."""
        ds = self.config["dataset"]

        def norm(value: Any) -> str:
            text = str(value)
            return text.lstrip("0") or "0" if text.isdigit() else text

        def keep(value: str | None, allowed: list[Any] | None) -> bool:
            return not allowed or (value is not None and norm(value) in {norm(a) for a in allowed})

        return [
            r
            for r in records
            if keep(r.subject, ds.get("subjects"))
            and keep(r.session, ds.get("sessions"))
            and keep(r.task, ds.get("tasks"))
            and keep(r.run, ds.get("runs"))
        ]

    @property
    def subjects(self) -> list[str]:
        """Subjects with at least one fMRI run, sorted."""
        return sorted({r.subject for r in self.fmri_runs})

    def fmri_run(self, key: str) -> FmriRun:
        """The fMRI run record with entity key ``key``."""
        try:
            return self._fmri_by_key[key]
        except KeyError:
            raise KeyError(f"No fMRI run with key {key!r} in the dataset.") from None

    def eeg_recording(self, key: str) -> EegRecording:
        """The EEG recording record with entity key ``key``."""
        try:
            return self._eeg_by_key[key]
        except KeyError:
            raise KeyError(f"No EEG recording with key {key!r} in the dataset.") from None

    def runs_of(self, subject: str) -> list[FmriRun]:
        """fMRI runs of one subject, in key order."""
        return sorted((r for r in self.fmri_runs if r.subject == subject), key=lambda r: r.key)

    def roi_files(self, run: FmriRun) -> tuple[Path | None, Path | None]:
        """ROI label image and labels table for a run (the demo's ground truth by default).

        Parameters
        ----------
        run : FmriRun
            The run.

        Returns
        -------
        atlas, labels : Path | None
            From ``preprocess_fmri.rois`` when set; for the demo, its planted ROIs.
        """
        rois = self.config["preprocess_fmri"].get("rois") or {}
        if rois.get("atlas"):
            labels = rois.get("labels")
            return Path(rois["atlas"]), Path(labels) if labels else None
        if self.is_demo:
            truth = self.bids_root / "derivatives" / "groundtruth"
            return (
                truth / f"sub-{run.subject}" / f"sub-{run.subject}_desc-rois_dseg.nii.gz",
                truth / "rois.tsv",
            )
        return None, None

    # ------------------------------------------------------------------ paths
    def stage_dir(self, stage: str, name: str | None = None) -> Path:
        """Folder of one stage version: ``results/<stage>/[<name>-]<version>``."""
        key = f"{stage}/{name}" if name else stage
        version = self.versions[key]
        return self.results / stage / (f"{name}-{version}" if name else version)

    def fmri_store(self, key: str) -> Path:
        """Cleaned (time, voxel) store of one fMRI run."""
        run = self.fmri_run(key)
        return (
            self.stage_dir("preprocess_fmri")
            / f"sub-{run.subject}"
            / (f"{key}_desc-clean_bold.zarr")
        )

    def eeg_epochs_store(self, key: str) -> Path:
        """(epoch, channel, time) store of one EEG recording."""
        rec = self.eeg_recording(key)
        return self.stage_dir("preprocess_eeg") / f"sub-{rec.subject}" / f"{key}_epo.zarr"

    def eeg_continuous_store(self, key: str) -> Path:
        """(channel, time) store of one EEG recording."""
        rec = self.eeg_recording(key)
        return self.stage_dir("preprocess_eeg") / f"sub-{rec.subject}" / f"{key}_raw.zarr"

    def extractor_layers(self, name: str) -> list[str]:
        """Names of the layer stores of one extractor (known before any model loads)."""
        from neuroflow.features.config import layer_names

        return layer_names(self.extractor(name))

    def extractor(self, name: str) -> dict[str, Any]:
        """Config entry of the extractor called ``name``."""
        for entry in self.config["features"]["extractors"]:
            if entry["name"] == name:
                return dict(entry)
        raise KeyError(f"No feature extractor named {name!r} in the config.")

    def feature_store(self, name: str, layer: str) -> Path:
        """(stimulus, feature) store of one extractor layer."""
        return self.stage_dir("features", name) / f"{layer}.zarr"

    def aligned_store(self, name: str, layer: str, key: str) -> Path:
        """(time, feature) store of one extractor layer on one fMRI run's TR grid."""
        run = self.fmri_run(key)
        return self.stage_dir("align_features", name) / f"sub-{run.subject}" / f"{key}_{layer}.zarr"

    def feature_space(self, space: str) -> tuple[str, str]:
        """Split ``"extractor:layer"`` (or ``"extractor"``: its last layer) into its parts."""
        name, _, layer = space.partition(":")
        layers = self.extractor_layers(name)
        if not layer:
            return name, layers[-1]
        if layer not in layers:
            raise KeyError(
                f"Feature space {space!r}: extractor {name!r} has no layer {layer!r}; "
                f"its layers are {layers}."
            )
        return name, layer

    def encoding_models(self) -> list[str]:
        """Names of the configured encoding models."""
        return list(self.config["encoding"]["models"])

    def encoding_config(self, model: str) -> dict[str, Any]:
        """What the encoding stage receives for ``model``."""
        return encoding_config(self.config, model)

    def encoding_store(self, model: str, subject: str) -> Path:
        """Fitted encoding model and test predictions of one subject."""
        return self.stage_dir("encoding", model) / f"sub-{subject}_encoding.zarr"

    def scores_store(self, model: str, subject: str) -> Path:
        """Per-target scores of one subject's encoding model."""
        return self.stage_dir("evaluation", model) / f"sub-{subject}_scores.zarr"

    def eeg_encoding_config(self, model: str) -> dict[str, Any]:
        """What the EEG encoding stage receives for ``model``."""
        return eeg_encoding_config(self.config, model)

    def eeg_encoding_store(self, model: str, key: str) -> Path:
        """EEG encoding model (channel x latency) of one recording."""
        rec = self.eeg_recording(key)
        return self.stage_dir("eeg_encoding", model) / f"sub-{rec.subject}" / f"{key}_encoding.zarr"

    def eeg_scores_store(self, model: str, key: str) -> Path:
        """Per-target scores of one recording's EEG encoding model."""
        rec = self.eeg_recording(key)
        return self.stage_dir("eeg_evaluation", model) / f"sub-{rec.subject}" / f"{key}_scores.zarr"

    @property
    def trf_enabled(self) -> bool:
        """Whether TRF models are fitted (``eeg_encoding.enabled`` and ``.trf.enabled``)."""
        return any(key.startswith("eeg_trf/") for key in self.versions)

    def eeg_trf_config(self, model: str) -> dict[str, Any]:
        """What the EEG TRF stage receives for ``model``."""
        return eeg_trf_config(self.config, model)

    def eeg_trf_store(self, model: str, key: str) -> Path:
        """Temporal response functions (lag x feature x channel) of one recording."""
        rec = self.eeg_recording(key)
        return self.stage_dir("eeg_trf", model) / f"sub-{rec.subject}" / f"{key}_trf.zarr"

    def all_trf_stores(self) -> list[Path]:
        """TRF stores the summary gathers (model x recording); empty when TRFs are off."""
        if not self.trf_enabled:
            return []
        return [
            self.eeg_trf_store(m, r.key)
            for m in self.encoding_models()
            for r in self.eeg_recordings
        ]

    def single_trial_store(self, subject: str) -> Path:
        """(trial, voxel) single-trial responses of one subject."""
        return (
            self.stage_dir("single_trial")
            / f"sub-{subject}"
            / f"sub-{subject}_desc-singletrial_betas.zarr"
        )

    def trial_encoding_config(self, model: str) -> dict[str, Any]:
        """What the single-trial encoding stage receives for ``model``."""
        return trial_encoding_config(self.config, model)

    def trial_encoding_store(self, model: str, subject: str) -> Path:
        """Single-trial encoding model and held-out stimulus predictions of one subject."""
        return self.stage_dir("trial_encoding", model) / f"sub-{subject}_encoding.zarr"

    def trial_scores_store(self, model: str, subject: str) -> Path:
        """Per-voxel scores of one subject's single-trial encoding model."""
        return self.stage_dir("trial_evaluation", model) / f"sub-{subject}_scores.zarr"

    def all_scores_stores(self) -> list[Path]:
        """Score stores of every voxel-wise model the summary gathers.

        Returns
        -------
        stores : list of Path
            Run-based models (model x subject), then, when ``single_trial.enabled``,
            the single-trial models (model x subject).
        """
        models, subjects = self.encoding_models(), self.subjects
        out = [self.scores_store(m, s) for m in models for s in subjects]
        if self.config["single_trial"]["enabled"]:
            out += [self.trial_scores_store(m, s) for m in models for s in subjects]
        return out

    def all_feature_spaces(self) -> dict[str, Path]:
        """Every extractor layer by label (``name``, or ``name:layer`` for several layers)."""
        out = {}
        for entry in self.config["features"]["extractors"]:
            layers = self.extractor_layers(entry["name"])
            for layer in layers:
                label = entry["name"] if len(layers) == 1 else f"{entry['name']}:{layer}"
                out[label] = self.feature_store(entry["name"], layer)
        return out

    def decoding_store(self) -> Path:
        """EEG decoding results of every subject."""
        return self.stage_dir("decoding") / "decoding_eeg.zarr"

    def rsa_store(self, modality: str) -> Path:
        """RSA results of every subject for ``"eeg"`` or ``"fmri"``."""
        return self.stage_dir("rsa", modality) / f"rsa_{modality}.zarr"

    def summary_dir(self) -> Path:
        """Folder of the cross-model, cross-subject summary."""
        return self.stage_dir("summary")

    def all_version_dirs(self) -> list[Path]:
        """Every stage-version folder the current config reaches."""
        out = []
        for key in self.versions:
            stage, _, name = key.partition("/")
            if stage == "dataset":
                continue
            out.append(self.stage_dir(stage, name or None))
        return out

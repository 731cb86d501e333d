"""What the workflow will compute, and where each artifact lives.

:class:`WorkflowPlan` is built once per Snakemake invocation from the validated
config. It indexes the dataset once (or predicts the demo's files before the demo
exists), reads its events tables, decides which analyses apply to what the dataset
has (modalities, stimuli, repeats, ROI labels), computes every stage's version id and
builds result paths. The rules in ``rules/*.smk`` only ask it for paths.

Analyses that do not apply are left out with one line each in :attr:`WorkflowPlan.notes`
(printed when the workflow starts and kept by the summary): an EEG-only dataset has no
fMRI stages, a dataset without ``stimuli/`` no image features, a movie shown once no
RSA over repeated stimuli, a dataset without ROI labels no ROI-level RSA.
Problems of the dataset that do not stop the workflow (a missing
``dataset_description.json``) are :attr:`WorkflowPlan.warnings`: printed with the notes
and listed in the summary's ``warnings.tsv``.

Layout of ``results/``::

    demo/<v>/                                         the generated BIDS dataset
    preprocess_fmri/<v>/sub-XX/<key>_desc-clean_bold.zarr   (BOLD runs or time series)
    preprocess_eeg/<v>/sub-XX/<key>_epo.zarr, <key>_raw.zarr
    features/<extractor>-<v>/<layer>.zarr
    align_features/<extractor>-<v>/sub-XX/<key>_<layer>.zarr
    encoding/<model>-<v>/sub-XX_encoding.zarr
    evaluation/<model>-<v>/sub-XX_scores.zarr
    summary/<v>/scores.tsv, scores.zarr, plots/, warnings.tsv, layer_sweep.tsv,
                alignment_metrics.tsv
    single_trial/<v>/sub-XX/sub-XX_desc-singletrial_betas.zarr   (estimated or imported)
    trial_encoding/<model>-<v>/sub-XX_encoding.zarr
    trial_evaluation/<model>-<v>/sub-XX_scores.zarr
    eeg_encoding/<model>-<v>/sub-XX_encoding.zarr
    eeg_evaluation/<model>-<v>/sub-XX_scores.zarr
    eeg_trf/<model>-<v>/sub-XX/<key>_trf.zarr                    (when eeg_encoding.trf is enabled)
    decoding/<v>/decoding_eeg.zarr
    decoding_cross_subject/<v>/decoding_eeg_cross_subject.zarr   (2+ subjects or sessions)
    decoding_fmri/<v>/decoding_fmri.zarr                         (betas or event patterns)
    rsa/eeg-<v>/rsa_eeg.zarr, rsa/fmri-<v>/rsa_fmri.zarr

Why one module of ~1,300 lines: :class:`WorkflowPlan` is the one object the Snakefile
and every rule query, and nearly all of it is some hundred accessors of a few lines over
one shared state (the dataset index, the resolved config, the version ids). What is
decided lives elsewhere, below it: which analyses apply
(:mod:`neuroflow.workflow.applicability`), the version ids
(:mod:`neuroflow.workflow.versions`), what the events tables say
(:mod:`neuroflow.workflow.design`). Splitting the accessors over mixin classes would
spread one object's state over several files without separating a responsibility.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuroflow.io.records import BetasSession, EegRecording, FmriRun
from neuroflow.names import layer_id
from neuroflow.workflow.checks import config_errors
from neuroflow.workflow.defaults import drop_orphan_defaults
from neuroflow.workflow.design import (
    DesignFacts,
    demo_design,
    read_design,
    table_identity,
)
from neuroflow.workflow.methods import RunFacts
from neuroflow.workflow.sweeps import SweepLayer, expand_layer_sweeps
from neuroflow.workflow.transform_sweeps import TransformVariant, expand_transform_sweeps
from neuroflow.workflow.versions import (
    PlanScope,
    compute_versions,
    cross_subject_config,
    data_version,
    decoding_config,
    decoding_fmri_config,
    eeg_encoding_config,
    eeg_model_names,
    eeg_trf_config,
    encoding_config,
    is_transformer,
    trial_encoding_config,
)

__all__ = ["WorkflowPlan", "stage_versions"]


def _check_config(config: Mapping[str, Any]) -> None:
    """Raise one error listing every cross-field inconsistency of ``config``."""
    from neuroflow.config import ConfigError

    errors = config_errors(config)
    if errors:
        raise ConfigError("Invalid configuration:\n- " + "\n- ".join(errors))


def _check_builders(config: Mapping[str, Any]) -> dict[str, Any]:
    """Refuse ``torch_module`` builders outside the trusted places (nothing is imported).

    Returns ``config`` with ``trust`` (the resolved ``features.code_dirs`` and
    ``features.trusted_packages``) added to each entry that names a ``builder``: the
    extraction job checks the builder against it, and the entry's version covers it.
    """
    from neuroflow.features.config import fill_entry
    from neuroflow.features.presets import check_builder
    from neuroflow.features.trust import builder_trust

    features = config["features"]
    trust = builder_trust(features)
    entries = []
    for entry in features["extractors"]:
        if entry.get("extractor") == "torch_module":
            check_builder(fill_entry(entry), trust)
        entries.append(entry if entry.get("builder") is None else {**entry, "trust": trust})
    return {**config, "features": {**features, "extractors": entries}}


@dataclass
class WorkflowPlan:
    """Versions, recordings, applicable analyses and result paths for one config.

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
    betas_sessions: list[BetasSession] = field(init=False)
    design: DesignFacts = field(init=False)
    scope: PlanScope = field(init=False)
    _fmri_by_key: dict[str, FmriRun] = field(init=False, repr=False)
    _eeg_by_key: dict[str, EegRecording] = field(init=False, repr=False)
    _test_runs: dict[str, list[str]] = field(init=False, repr=False)
    warnings: tuple[str, ...] = field(init=False, default=())
    sweeps: dict[str, list[SweepLayer]] = field(init=False, default_factory=dict)
    transform_sweeps: dict[str, list[TransformVariant]] = field(init=False, default_factory=dict)
    config_notes: tuple[str, ...] = field(init=False, default=())
    _layers: dict[str, list[str]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.config, notes = drop_orphan_defaults(self.config)
        self.config_notes = tuple(notes)
        self.config, self.transform_sweeps = expand_transform_sweeps(self.config)
        _check_config(self.config)
        self.config = _check_builders(self.config)
        self.config, self.sweeps = expand_layer_sweeps(self.config, self.extractor_layers)
        self._layers = {}  # the layers of the config as the sweeps leave it
        self.results = Path(self.config["results_dir"])
        _check_results_dir(self.results)
        self._data_key, self._data_version = data_version(self.config)
        self.fmri_runs, self.eeg_recordings, self.betas_sessions = self._index()
        self.warnings = self._dataset_warnings()
        self._fmri_by_key = {r.key: r for r in self.fmri_runs}
        self._eeg_by_key = {r.key: r for r in self.eeg_recordings}
        self._check_roi_files()
        self._check_betas_scale()
        self._check_eeg_windows()
        self.design = self._read_design()
        self.config, alignment_note = self._resolve_alignment()
        self.scope, self._test_runs = self._decide()
        if alignment_note:
            self.scope = dataclasses.replace(self.scope, notes=(*self.scope.notes, alignment_note))
        self.scope = self._check_transformers(self.scope)
        self.versions = compute_versions(self.config, self.scope)

    # ------------------------------------------------------------------ dataset
    @property
    def dataset(self) -> Mapping[str, Any]:
        """The ``dataset`` section."""
        return self.config["dataset"]

    @property
    def is_demo(self) -> bool:
        """Whether the input is the embedded demo dataset."""
        return self.dataset["source"] == "demo"

    @property
    def source(self) -> str:
        """``demo``, ``bids``, ``fmriprep``, ``betas`` or ``timeseries``."""
        return str(self.dataset["source"])

    @property
    def bids_root(self) -> Path:
        """Root of the BIDS dataset (the demo's output folder for the demo)."""
        if self.is_demo:
            return self.results / "demo" / self._data_version
        # one spelling per folder (trailing slash, "..", symlinks): the paths that jobs
        # and notes see are the same for every spelling of the config
        return Path(self.dataset["bids_root"]).expanduser().resolve()

    @property
    def stimuli_dir(self) -> Path:
        """The dataset's ``stimuli/`` folder."""
        return self.bids_root / "stimuli"

    @property
    def captions(self) -> Path:
        """The captions table (``dataset.captions``, else ``stimuli/captions.tsv``)."""
        given = self.dataset.get("captions")
        if given:
            path = Path(given)
            return path if path.is_absolute() or path.exists() else self.bids_root / path
        return self.stimuli_dir / "captions.tsv"

    @property
    def stimulus_events(self) -> dict[str, Any]:
        """``dataset.stimulus_events``: which events rows are stimuli."""
        return dict(self.dataset.get("stimulus_events") or {})

    def _filters(self) -> dict[str, list[str] | None]:
        ds = self.dataset
        return {key: ds.get(key) or None for key in ("subjects", "sessions", "tasks", "runs")}

    def _index(self) -> tuple[list[FmriRun], list[EegRecording], list[BetasSession]]:
        """Index the dataset once (or predict the demo's files before it exists)."""
        ds = self.dataset
        if self.is_demo:
            from neuroflow.demo import demo_layout

            layout = demo_layout(self.config["demo"], self.bids_root)
            fmri, eeg = self._filter(layout.fmri_runs), self._filter(layout.eeg_recordings)
            self._check_demo_filters(layout)
            return fmri, eeg, []
        from neuroflow.io.bids import check_filters, index_fmri_runs
        from neuroflow.io.bids_eeg import index_eeg_recordings

        if not ds.get("bids_root"):
            raise ValueError(
                f"`dataset.bids_root` must name the BIDS folder when `dataset.source` is "
                f"{ds['source']!r}, got {ds.get('bids_root')!r} instead."
            )
        root = self.bids_root
        if not root.is_dir():
            raise FileNotFoundError(
                f"`dataset.bids_root` must be an existing folder, got {str(root)!r} instead."
            )
        if ds["source"] == "fmriprep" and not ds.get("fmriprep_dir"):
            raise ValueError(
                "`dataset.fmriprep_dir` must name the fMRIPrep output folder when "
                f"`dataset.source` is 'fmriprep', got {ds.get('fmriprep_dir')!r} instead."
            )
        filters = self._filters()
        seen: dict[str, set[str]] = {}
        fmri: list[FmriRun] = []
        betas: list[BetasSession] = []
        if ds["source"] == "timeseries":
            from neuroflow.io.timeseries import index_timeseries_runs

            fmri = index_timeseries_runs(root, strict=False, seen=seen, **filters)
        elif ds["source"] == "betas":
            from neuroflow.io.betas import index_betas

            betas = index_betas(
                root,
                subjects=filters["subjects"],
                sessions=filters["sessions"],
                strict=False,
                seen=seen,
            )
        elif ds["source"] == "fmriprep" or self._has(root, "func"):
            fmri = index_fmri_runs(
                root,
                fmriprep_dir=ds.get("fmriprep_dir") if ds["source"] == "fmriprep" else None,
                space=ds.get("space"),
                confounds_pattern=ds.get("confounds_pattern"),
                strict=False,
                seen=seen,
                **filters,
            )
        eeg: list[EegRecording] = []
        include_meg = bool(ds.get("eeg_from_meg", True))
        if self._has(root, "eeg") or (include_meg and self._has(root, "meg")):
            eeg = index_eeg_recordings(
                root, strict=False, seen=seen, include_meg=include_meg, **filters
            )
        # Filters are checked against every modality at once: a session that only the
        # EEG has (ses-eeg) is no error because the fMRI runs live in ses-mri.
        check_filters(root, seen=seen, **filters)
        if not (fmri or eeg or betas):
            raise ValueError(
                f"No recordings in {root} match the selection {self._describe_filters()} "
                f"(looked for fMRI runs, EEG recordings{' and betas' if betas else ''} "
                f"for `dataset.source` {ds['source']!r})."
            )
        return fmri, eeg, betas

    def _check_eeg_windows(self) -> None:
        """The epoch window fits every epoched EEG file (headers read, no data)."""
        if not self.eeg_recordings:
            return
        from neuroflow.preprocessing.eeg.window import check_epoch_windows

        check_epoch_windows(self.eeg_recordings, self.config["preprocess_eeg"])

    def _describe_filters(self) -> str:
        chosen = {k: v for k, v in self._filters().items() if v}
        return str(chosen) if chosen else "(all subjects, sessions, tasks and runs)"

    @staticmethod
    def _has(root: Path, datatype: str) -> bool:
        """Whether any subject (or session) folder has a ``datatype`` folder."""
        return any(root.glob(f"sub-*/{datatype}")) or any(root.glob(f"sub-*/ses-*/{datatype}"))

    def _check_demo_filters(self, layout: Any) -> None:
        """Filters naming nothing in the demo are errors, as they are for real data."""
        records = [*layout.fmri_runs, *layout.eeg_recordings]
        for key, attr in (("subjects", "subject"), ("tasks", "task"), ("runs", "run")):
            wanted = self.dataset.get(key) or []
            have = sorted({str(getattr(r, attr)) for r in records if getattr(r, attr)})
            for label in wanted:
                if not any(_same(label, h) for h in have):
                    close = difflib.get_close_matches(str(label), have, n=3)
                    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
                    raise ValueError(
                        f"`dataset.{key}` names {label!r}, which the demo dataset does not "
                        f"have (available: {', '.join(have) or 'none'}).{hint}"
                    )
        if self.dataset.get("sessions"):
            raise ValueError(
                f"`dataset.sessions` must be empty for the demo dataset (it has no sessions), "
                f"got {self.dataset['sessions']} instead."
            )

    def _filter(self, records: Any) -> list[Any]:
        """Apply the dataset filters to the demo's records (run labels match as numbers)."""
        ds = self.dataset

        def keep(value: str | None, allowed: list[Any] | None) -> bool:
            return not allowed or (value is not None and any(_same(value, a) for a in allowed))

        return [
            r
            for r in records
            if keep(r.subject, ds.get("subjects"))
            and keep(r.session, ds.get("sessions"))
            and keep(r.task, ds.get("tasks"))
            and keep(r.run, ds.get("runs"))
        ]

    def _dataset_warnings(self) -> tuple[str, ...]:
        """Problems of the dataset as a whole that do not stop the workflow.

        They concern BIDS files the workflow does not read, such as
        ``dataset_description.json``.
        """
        if self.is_demo:
            return ()
        from neuroflow.io.bids import dataset_description_warnings

        return tuple(dataset_description_warnings(self.bids_root))

    def _read_design(self) -> DesignFacts:
        given = self.dataset.get("captions")
        if given and not self.is_demo and not self.captions.is_file():
            raise FileNotFoundError(
                f"`dataset.captions` must name an existing captions table (a TSV with columns "
                f"stim_file and caption), got {given!r} instead: {self.captions} does not exist."
            )
        if self.is_demo:
            return demo_design(
                self.config["demo"],
                self.bids_root,
                {r.key: str(r.run) for r in self.fmri_runs},
            )
        return read_design(
            fmri_runs=self.fmri_runs,
            eeg_recordings=self.eeg_recordings,
            betas=self.betas_sessions,
            stimulus_events=self.stimulus_events,
            eeg_stim_column=self.config["preprocess_eeg"].get("stim_column"),
            stimuli_dir=self.stimuli_dir,
            captions=self.captions,
        )

    # ------------------------------------------------------------------ alignment
    def _run_timings(self) -> dict[str, Any]:
        """Timing of each fMRI run's stimulus events (see :mod:`neuroflow.features.design`).

        Events tables and sidecars are read (headers for a TR no sidecar gives); for the
        demo, its generator's movie plan. Runs without events or a TR are left out.
        """
        from neuroflow.features.design import classify_run

        if self.is_demo:
            from neuroflow.demo import resolve_config
            from neuroflow.demo.layout import run_movies
            from neuroflow.demo.stimuli import plan_movies

            cfg = resolve_config(self.config["demo"])
            train, test = plan_movies(cfg)
            movies = {m.name: m for m in [*train, *([test] if test else [])]}
            by_label = {label: movies[name] for label, name, _ in run_movies(cfg)}
            tr = float(cfg["fmri"]["tr"])
            return {
                r.key: classify_run(
                    np.asarray(by_label[str(r.run)].onsets),
                    np.asarray(by_label[str(r.run)].durations),
                    tr,
                )
                for r in self.fmri_runs
                if str(r.run) in by_label
            }
        from neuroflow.io.bids import read_sidecar
        from neuroflow.io.events import read_events_table, stimulus_mask

        out = {}
        for run in self.fmri_runs:
            if run.events is None or not Path(run.events).is_file():
                continue
            table = read_events_table(run.events)
            if not {"onset", "duration"} <= set(table.columns):
                continue
            tr = read_sidecar(run).get("RepetitionTime") or self.dataset.get("repetition_time")
            if not tr and run.kind == "bold":
                from neuroflow.io.files import load_nifti

                zooms = load_nifti(run.bold, "BOLD image", check_data=False).header.get_zooms()
                tr = zooms[3] if len(zooms) > 3 else None
            if not isinstance(tr, int | float) or not tr > 0:
                continue
            column = "stim_file" if "stim_file" in table.columns else None
            keep = stimulus_mask(table, self.stimulus_events, id_column=column, where=run.events)
            numbers = table.loc[keep, ["onset", "duration"]].apply(pd.to_numeric, errors="coerce")
            out[run.key] = classify_run(
                numbers["onset"].to_numpy(float), numbers["duration"].to_numpy(float), float(tr)
            )
        return out

    def _resolve_alignment(self) -> tuple[dict[str, Any], str | None]:
        """The config with ``features.alignment``'s ``auto`` values resolved for this dataset.

        ``method: auto`` reads the design from the fMRI runs' events
        (:mod:`neuroflow.features.design`): event-related and blocked designs get the
        settings of ``config/presets/event_related.yaml``, movies the average within TRs.
        Returns the config and the plan note that says what was chosen for an
        event-related or blocked design (None otherwise: the aligned stores record the
        settings); a dataset whose runs disagree is refused.
        """
        from neuroflow.features.design import PER_EVENT_KINDS, classify_design, resolve_alignment

        alignment = self.config["features"]["alignment"]
        delays = self.config["encoding"]["delays"]
        if "auto" not in (alignment.get("method"), alignment.get("hrf_model")) and (
            alignment.get("event_regressor") != "auto"
        ):
            return dict(self.config), None
        timings = self._run_timings() if alignment.get("method") == "auto" else {}
        kind, conflicts = classify_design(timings)
        if conflicts:
            raise ValueError(
                "`features.alignment.method` is 'auto', but the fMRI runs' events show "
                f"different designs ({'; '.join(conflicts)}). Select runs of one design "
                "with `dataset.tasks` (or `dataset.runs`), or set the alignment yourself: "
                "add `--configfile config/presets/event_related.yaml` for event-related "
                "designs, or set `features.alignment.method: average` for movies and "
                "blocked designs."
            )
        resolved, new_delays = resolve_alignment(alignment, delays, kind)
        config = {
            **self.config,
            "features": {**self.config["features"], "alignment": resolved},
            "encoding": {**self.config["encoding"], "delays": new_delays},
        }
        if alignment.get("method") != "auto" or kind not in PER_EVENT_KINDS:
            # movies keep the alignment (and the notes, which the summary's version
            # covers) they had before `auto`
            return config, None
        example = next(((k, t) for k, t in timings.items() if t.kind == kind), None)
        why = f" ({example[0]}: {example[1].describe()})" if example else ""
        chosen = (
            f"method {resolved['method']}, hrf_model {resolved['hrf_model']}, "
            f"event_regressor {str(resolved['event_regressor']).lower()}"
        )
        if resolved["method"] == "hrf":
            chosen += f", encoding.delays.method {new_delays['method']}"
        return config, (
            f"features.alignment.method auto: the design is {kind.replace('_', '-')}{why}; "
            f"aligned with {chosen}, as config/presets/event_related.yaml does."
        )

    # ------------------------------------------------------------------ scope
    def _decide(self) -> tuple[PlanScope, dict[str, list[str]]]:
        """Which analyses apply, with a note for each one left out."""
        from neuroflow.workflow.applicability import decide_scope

        return decide_scope(self)

    @property
    def notes(self) -> tuple[str, ...]:
        """What to tell before the run starts, one line each.

        First the :attr:`warnings` about the dataset (each prefixed ``"warning: "``),
        then the analyses left out with their reasons
        (:attr:`PlanScope.notes <neuroflow.workflow.versions.PlanScope>`).
        """
        return (*(f"warning: {w}" for w in self.warnings), *self.scope.notes)

    @property
    def subjects(self) -> list[str]:
        """Subjects with at least one fMRI run (or imported betas), sorted."""
        return sorted(
            {r.subject for r in self.fmri_runs} | {b.subject for b in self.betas_sessions}
        )

    @property
    def encoding_subjects(self) -> list[str]:
        """Subjects whose runs allow a run-based encoding model (held-out runs resolved)."""
        return sorted(self._test_runs)

    @property
    def eeg_subjects(self) -> list[str]:
        """Subjects with at least one EEG recording, sorted."""
        return sorted({r.subject for r in self.eeg_recordings})

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

    def recordings_of(self, subject: str) -> list[EegRecording]:
        """EEG recordings of one subject, in key order."""
        return sorted((r for r in self.eeg_recordings if r.subject == subject), key=lambda r: r.key)

    def betas_of(self, subject: str) -> list[BetasSession]:
        """Imported betas sessions of one subject, in key order."""
        return sorted((b for b in self.betas_sessions if b.subject == subject), key=lambda b: b.key)

    def encoding_runs_of(self, subject: str) -> list[FmriRun]:
        """fMRI runs of one subject that its run-based encoding models use (those with
        stimulus events), in key order."""
        keys = set(self.scope.selection.get("encoding_runs", {}).get(subject, []))
        return [r for r in self.runs_of(subject) if r.key in keys]

    def test_runs_of(self, subject: str) -> list[str]:
        """Keys of the held-out test runs of one subject's run-based encoding models."""
        return list(self._test_runs.get(subject, []))

    def roi_files(self, run: FmriRun | str) -> tuple[Path | None, Path | None]:
        """ROI label image and labels table of a run or subject.

        Parameters
        ----------
        run : FmriRun | str
            The run, or a subject label.

        Returns
        -------
        atlas, labels : Path | None
            From ``preprocess_fmri.rois`` when set (``{subject}`` and ``{session}`` in
            the paths are filled in; relative paths are looked up in the working folder,
            then in the dataset); for the demo, its planted ROIs.
        """
        subject = run if isinstance(run, str) else run.subject
        session = None if isinstance(run, str) else run.session
        rois = self.config["preprocess_fmri"].get("rois") or {}
        if rois.get("atlas"):
            atlas = self._dataset_path(
                rois["atlas"], subject, session, "preprocess_fmri.rois.atlas"
            )
            labels = (
                self._dataset_path(rois["labels"], subject, session, "preprocess_fmri.rois.labels")
                if rois.get("labels")
                else None
            )
            return atlas, labels
        if self.is_demo:
            truth = self.bids_root / "derivatives" / "groundtruth"
            return (
                truth / f"sub-{subject}" / f"sub-{subject}_desc-rois_dseg.nii.gz",
                truth / "rois.tsv",
            )
        return None, None

    def _dataset_path(
        self, pattern: str, subject: str, session: str | None, key: str = "preprocess_fmri.rois"
    ) -> Path:
        """A configured path with ``{subject}``/``{session}`` filled in, found here or in
        the dataset; an error naming ``key`` and the folders searched when it is in
        neither."""
        try:
            text = str(pattern).format(subject=subject, session=session or "")
        except (KeyError, IndexError) as err:
            raise ValueError(
                f"`preprocess_fmri.rois` paths may only use {{subject}} and {{session}}, got "
                f"{pattern!r} instead."
            ) from err
        path = Path(text).expanduser()
        if path.exists() or self.is_demo:
            return path
        inside = self.bids_root / path
        if not path.is_absolute() and inside.exists():
            return inside
        whose = f"sub-{subject}" + (f" (ses-{session})" if session else "")
        where = (
            "it does not exist"
            if path.is_absolute()
            else f"it is neither in the working folder ({Path.cwd()}) nor in the dataset "
            f"({self.bids_root})"
        )
        raise FileNotFoundError(
            f"`{key}` must name an existing file for every subject, got {pattern!r}, which "
            f"for {whose} is {str(path)!r}: {where}. Give that subject its file, or leave "
            "it out with `dataset.subjects`."
        )

    def _check_roi_files(self) -> None:
        """Every run (or betas subject) finds its ROI atlas and labels before any job."""
        rois = self.config["preprocess_fmri"].get("rois") or {}
        if self.is_demo or self.source == "timeseries" or not rois.get("atlas"):
            return
        for run in self.fmri_runs:
            self.roi_files(run)
        for subject in sorted({b.subject for b in self.betas_sessions}):
            self.roi_files(subject)

    def _check_betas_scale(self) -> None:
        """Integer betas declare the factor they were stored with (headers read only)."""
        if not self.betas_sessions:
            return
        from neuroflow.io.betas_files import stored_scale

        for session in self.betas_sessions:
            stored_scale(Path(session.betas), self.dataset.get("betas_scale"))

    def _n_volumes(self, run: FmriRun) -> int:
        """Volumes (or time points) of a run, from its header or array shape only."""
        if self.is_demo:
            return int(self.config["demo"]["fmri"]["n_volumes"])
        if run.kind == "timeseries":
            from neuroflow.io.timeseries import timeseries_length

            return timeseries_length(Path(run.bold), run.container_key)
        from neuroflow.io.files import load_nifti

        return int(load_nifti(run.bold, "BOLD image", check_data=False).shape[3])

    def _check_transformers(self, scope: Any) -> Any:
        """Refuse a transformer window longer than every run; note subjects left without
        a validation run (their training runs all epochs, unstopped)."""
        import dataclasses

        from neuroflow.config.transformer_options import check_window, validation_note

        models = [m for m in scope.models if is_transformer(self.config, m)]
        if not models:
            return scope
        runs = {r.key: r for s in self._test_runs for r in self.encoding_runs_of(s)}
        lengths = {key: self._n_volumes(run) for key, run in runs.items()}
        training = {
            s: len([r for r in self.encoding_runs_of(s) if r.key not in self._test_runs[s]])
            for s in self._test_runs
        }
        notes = []
        for model in models:
            options = self.encoding_config(model)["transformer"]
            check_window(model, options, lengths)
            note = validation_note(model, options, training)
            if note is not None:
                notes.append(note)
        return dataclasses.replace(scope, notes=(*scope.notes, *notes)) if notes else scope

    @property
    def has_roi_labels(self) -> bool:
        """Whether voxels carry ROI labels that group several of them (an atlas or the
        demo's ROIs; parcel time series have one target per label)."""
        rois = self.config["preprocess_fmri"].get("rois") or {}
        return self.source != "timeseries" and (bool(rois.get("atlas")) or self.is_demo)

    # ------------------------------------------------------------------ tables
    def stimulus_tables(self) -> list[Path]:
        """Events (or trials) tables that list the stimuli: fMRI runs, EEG recordings, betas."""
        tables = [r.events for r in self.fmri_runs] + [r.events for r in self.eeg_recordings]
        tables += [b.trials for b in self.betas_sessions]
        return [Path(p) for p in tables if p is not None]

    def training_tables(self) -> list[Path]:
        """Events tables of the training runs (the stimuli a PCA may be fitted on).

        Without run-based encoding (EEG or betas only), every stimulus table.
        """
        if not self._test_runs:
            return self.stimulus_tables()
        test = {key for keys in self._test_runs.values() for key in keys}
        return [
            Path(r.events)
            for subject in self._test_runs
            for r in self.encoding_runs_of(subject)
            if r.key not in test and r.events is not None
        ]

    def table_identity(self) -> list[str]:
        """What identifies the stimulus tables in version ids (keys for the demo)."""
        if self.is_demo:
            return sorted([r.key for r in self.fmri_runs] + [r.key for r in self.eeg_recordings])
        return table_identity(self.stimulus_tables(), self.bids_root)

    # ------------------------------------------------------------------ paths
    def stage_dir(self, stage: str, name: str | None = None) -> Path:
        """Folder of one stage version: ``results/<stage>/[<name>-]<version>``."""
        key = f"{stage}/{name}" if name else stage
        version = self.versions[key]
        return self.results / stage / (f"{name}-{version}" if name else version)

    def fmri_store(self, key: str) -> Path:
        """Cleaned (time, voxel) store of one fMRI run (or one run of time series)."""
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

    @property
    def qc_enabled(self) -> bool:
        """Whether the QC stages run (``qc.enabled``)."""
        return bool(self.config["qc"]["enabled"])

    def qc_store(self, modality: str, key: str) -> Path:
        """QC store of one EEG recording (``"eeg"``) or fMRI run (``"fmri"``)."""
        rec = self.eeg_recording(key) if modality == "eeg" else self.fmri_run(key)
        return self.stage_dir(f"qc_{modality}") / f"sub-{rec.subject}" / f"{key}_qc.zarr"

    def qc_plots(self, modality: str, key: str) -> Path:
        """Folder of the QC figures of one recording (``<key>_qc-<kind>.png``)."""
        return self.qc_store(modality, key).with_suffix("")

    def qc_targets(self) -> list[Path]:
        """Every QC store and figure folder the config reaches."""
        if not self.qc_enabled:
            return []
        out = []
        if self.config["preprocess_eeg"].get("enabled", True):
            for rec in self.eeg_recordings:
                out += [self.qc_store("eeg", rec.key), self.qc_plots("eeg", rec.key)]
        if self.source != "timeseries":  # parcel series have no image to check
            for run in self.fmri_runs:
                out += [self.qc_store("fmri", run.key), self.qc_plots("fmri", run.key)]
        return out

    @property
    def continuous_recordings(self) -> list[EegRecording]:
        """EEG recordings read as continuous data (they also get a continuous store)."""
        return [r for r in self.eeg_recordings if not r.epoched]

    @property
    def epoched_recordings(self) -> list[EegRecording]:
        """EEG recordings that arrive as epochs (MNE -epo.fif, epoched EEGLAB)."""
        return [r for r in self.eeg_recordings if r.epoched]

    @property
    def extractors(self) -> list[dict[str, Any]]:
        """Config entries of the extractors that run (those with stimuli to work on)."""
        return [self.extractor(name) for name in self.scope.extractors]

    def extractor_layers(self, name: str) -> list[str]:
        """Names of the layer stores of one extractor (known before any model loads)."""
        from neuroflow.features.config import layer_names

        # asked for by every rule that reads a feature store: checked once per extractor
        if name not in self._layers:
            self._layers[name] = layer_names(self.extractor(name))
        return list(self._layers[name])

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

    def layer_sweeps(self) -> list[dict[str, Any]]:
        """Layer models of the sweeps whose models run (see :mod:`.sweeps`), as records."""
        running = set(self.scope.models) | set(self.scope.trial_models)
        return [
            layer.as_dict()
            for layers in self.sweeps.values()
            for layer in layers
            if layer.model in running
        ]

    def transform_variants(self) -> list[dict[str, Any]]:
        """Variants of the transform sweeps whose extractors run (see :mod:`.transform_sweeps`)."""
        running = set(self.scope.extractors)
        return [
            v.as_dict()
            for variants in self.transform_sweeps.values()
            for v in variants
            if v.extractor in running
        ]

    def layer_order(self) -> dict[str, list[str]]:
        """Layer names of every extractor that runs, in extraction order."""
        return {name: self.extractor_layers(name) for name in self.scope.extractors}

    def run_facts(self) -> RunFacts:
        """What the run does, for its methods paragraph (see :mod:`.methods`)."""
        return RunFacts(
            n_fmri_subjects=len(self.encoding_subjects),
            n_eeg_subjects=len(self.eeg_subjects),
            encoding_models=tuple(self.encoding_models()),
            eeg_models=tuple(self.eeg_models()),
            decoding=self.decoding_enabled,
            decoding_cross_subject=self.decoding_cross_subject_enabled,
            decoding_fmri=self.decoding_fmri_patterns if self.decoding_fmri_enabled else "",
            rsa=tuple(self.rsa_modalities),
            extractors=tuple(self.extractors),
        )

    def encoding_models(self) -> list[str]:
        """Names of the encoding models that run."""
        return list(self.scope.models)

    def encoding_config(self, model: str, subject: str | None = None) -> dict[str, Any]:
        """What the encoding stage receives for ``model`` (and ``subject``'s test runs).

        With a subject, ``split.test_runs`` holds the keys of its held-out runs, as
        resolved from the setting (``auto``: a repeated sequence, else the last run).
        """
        section = encoding_config(self.config, model)
        if subject is not None:
            section["split"] = {**section["split"], "test_runs": self.test_runs_of(subject)}
        return section

    def linear_models(self) -> list[str]:
        """Encoding models fitted per subject (ridge, banded ridge)."""
        return [m for m in self.encoding_models() if not is_transformer(self.config, m)]

    def transformer_models(self) -> list[str]:
        """Encoding models trained across subjects in one job (``model: transformer``)."""
        return [m for m in self.encoding_models() if is_transformer(self.config, m)]

    def encoding_store(self, model: str, subject: str) -> Path:
        """Fitted encoding model and test predictions of one subject."""
        return self.stage_dir("encoding", model) / f"sub-{subject}_encoding.zarr"

    def transformer_training_store(self, model: str) -> Path:
        """Training curves and weights of a transformer model (all subjects)."""
        return self.stage_dir("encoding", model) / "training.zarr"

    def scores_store(self, model: str, subject: str) -> Path:
        """Per-target scores of one subject's encoding model."""
        return self.stage_dir("evaluation", model) / f"sub-{subject}_scores.zarr"

    def eeg_models(self) -> list[str]:
        """Names of the EEG encoding models that run."""
        return list(self.scope.eeg_models)

    def eeg_encoding_config(self, model: str) -> dict[str, Any]:
        """What the EEG encoding stage receives for ``model``."""
        return eeg_encoding_config(self.config, model)

    def eeg_encoding_store(self, model: str, subject: str) -> Path:
        """EEG encoding model (channel x latency) of one subject's recordings."""
        return self.stage_dir("eeg_encoding", model) / f"sub-{subject}_encoding.zarr"

    def eeg_scores_store(self, model: str, subject: str) -> Path:
        """Per-target scores of one subject's EEG encoding model."""
        return self.stage_dir("eeg_evaluation", model) / f"sub-{subject}_scores.zarr"

    @property
    def trf_enabled(self) -> bool:
        """Whether TRF models are fitted (``eeg_encoding.enabled`` and ``.trf.enabled``)."""
        return self.scope.trf

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
            for m in self.eeg_models()
            for r in self.continuous_recordings
        ]

    @property
    def single_trial_enabled(self) -> bool:
        """Whether single-trial betas are estimated (or imported) and modelled."""
        return self.scope.single_trial

    @property
    def trial_subjects(self) -> list[str]:
        """Subjects with single-trial betas (estimated from runs, or imported)."""
        if not self.single_trial_enabled:
            return []
        if self.source == "betas":
            return sorted({b.subject for b in self.betas_sessions})
        return sorted({r.subject for r in self.fmri_runs})

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

    # ------------------------------------------------------------------ geometry
    @property
    def geometry_enabled(self) -> bool:
        """Whether the ``geometry`` stage runs (enabled, and some extractor runs)."""
        return self.scope.geometry is not None

    @property
    def geometry_labels(self) -> str | None:
        """The class labels table the ``geometry`` stage reads (None: no class metrics)."""
        return (self.scope.geometry or {}).get("labels")

    @property
    def geometry_ood(self) -> bool:
        """Whether the ``geometry`` stage computes its out-of-distribution readout."""
        return bool((self.scope.geometry or {}).get("ood"))

    def geometry_store(self) -> Path:
        """Geometry of every extractor layer (``geometry.tsv``, ``.png`` beside it)."""
        return self.stage_dir("geometry") / "geometry.zarr"

    # ------------------------------------------------------------------ predict
    @property
    def predict_models(self) -> dict[str, tuple[str, ...]]:
        """Encoding model -> the stimulus pools the ``predict`` stage applies it to."""
        plan = self.scope.predict
        return dict(plan.models) if plan is not None else {}

    def pool(self, name: str) -> Any:
        """The :class:`~neuroflow.workflow.predict.PoolPlan` of one stimulus pool."""
        return self.scope.predict.pools[name]

    @property
    def predict_eeg_models(self) -> dict[str, tuple[str, ...]]:
        """EEG encoding model -> the stimulus pools the ``predict_eeg`` stage applies it to."""
        plan = self.scope.predict
        return dict(plan.eeg_models) if plan is not None else {}

    def pool_extractors(self) -> dict[str, tuple[str, ...]]:
        """Extractor name -> the pools it extracts for the ``predict`` stages."""
        plan = self.scope.predict
        applied = plan is not None and (plan.models or plan.eeg_models)
        return dict(plan.extractors) if applied else {}

    def pool_feature_store(self, extractor: str, pool: str, layer: str) -> Path:
        """(stimulus, feature) store of one extractor layer over one stimulus pool."""
        return self.stage_dir("pool_features", extractor) / pool / f"{layer}.zarr"

    def predict_encoder(self, model: str, subject: str) -> Path:
        """The fitted model ``predict`` reads: run-based, else single-trial."""
        if model in self.scope.models:
            return self.encoding_store(model, subject)
        return self.trial_encoding_store(model, subject)

    def predict_subjects(self, model: str) -> list[str]:
        """Subjects with a fitted ``model`` to predict from."""
        return self.encoding_subjects if model in self.scope.models else self.trial_subjects

    def predict_store(self, model: str, subject: str, pool: str) -> Path:
        """Predicted responses of one subject's model to one pool (TSV and sheets beside)."""
        return self.stage_dir("predict", model) / f"sub-{subject}_{pool}.zarr"

    def predict_eeg_store(self, model: str, subject: str, pool: str) -> Path:
        """Predicted evoked responses of one subject's EEG model to one pool."""
        return self.stage_dir("predict_eeg", model) / f"sub-{subject}_{pool}.zarr"

    def predict_targets(self) -> list[Path]:
        """Every ``predict`` and ``predict_eeg`` store, ranking table and sheet folder."""
        stores = [
            self.predict_store(model, subject, pool)
            for model, pools in self.predict_models.items()
            for subject in self.predict_subjects(model)
            for pool in pools
        ]
        stores += [
            self.predict_eeg_store(model, subject, pool)
            for model, pools in self.predict_eeg_models.items()
            for subject in self.eeg_subjects
            for pool in pools
        ]
        out = []
        for store in stores:
            stem = store.name.removesuffix(".zarr")
            out += [
                store,
                store.with_name(f"{stem}_ranking.tsv"),
                store.with_name(f"{stem}_contact_sheets"),
            ]
        return out

    def all_scores_stores(self) -> list[Path]:
        """Score stores of every voxel-wise model the summary gathers.

        Returns
        -------
        stores : list of Path
            Run-based models (model x subject), then the single-trial models
            (model x subject) when they run.
        """
        out = [
            self.scores_store(m, s) for m in self.encoding_models() for s in self.encoding_subjects
        ]
        out += [
            self.trial_scores_store(m, s)
            for m in self.scope.trial_models
            for s in self.trial_subjects
        ]
        return out

    def all_eeg_scores_stores(self) -> list[Path]:
        """Score stores of every EEG encoding model (model x subject)."""
        return [self.eeg_scores_store(m, s) for m in self.eeg_models() for s in self.eeg_subjects]

    def all_feature_spaces(self) -> dict[str, Path]:
        """Every extractor layer that runs, by label (``name``, or ``name:layer``)."""
        out = {}
        for entry in self.extractors:
            layers = self.extractor_layers(entry["name"])
            for layer in layers:
                label = entry["name"] if len(layers) == 1 else layer_id(entry["name"], layer)
                out[label] = self.feature_store(entry["name"], layer)
        return out

    def analysis_spaces(self, analysis: str) -> dict[str, Path]:
        """Feature spaces of a stimulus-level analysis (``"decoding"`` or ``"rsa"``)."""
        spaces = self.scope.spaces.get(analysis, ())
        out = {}
        for label in spaces:
            name, layer = self.feature_space(label)
            out[label] = self.feature_store(name, layer)
        return out

    @property
    def decoding_enabled(self) -> bool:
        """Whether the EEG decoding stage runs."""
        return self.scope.decoding

    @property
    def resting_recordings(self) -> list[EegRecording]:
        """Continuous EEG recordings whose events tables list no event (resting state):
        preprocessed and checked, left out of the analyses of epochs."""
        keys = set(self.scope.selection.get("resting_eeg", ()))
        return [r for r in self.eeg_recordings if r.key in keys]

    @property
    def event_recordings(self) -> list[EegRecording]:
        """EEG recordings with events to cut epochs around (all but the resting ones)."""
        keys = set(self.scope.selection.get("resting_eeg", ()))
        return [r for r in self.eeg_recordings if r.key not in keys]

    def event_recordings_of(self, subject: str) -> list[EegRecording]:
        """EEG recordings of one subject with events, in key order."""
        return [r for r in self.event_recordings if r.subject == subject]

    @property
    def decoding_subjects(self) -> list[str]:
        """EEG subjects decoded within subject (those with an analysis that applies)."""
        if not self.decoding_enabled:
            return []
        return list(self.scope.selection.get("decoding_subjects", self.eeg_subjects))

    def decoding_store(self) -> Path:
        """EEG decoding results of every subject, with the group tests."""
        return self.stage_dir("decoding") / "decoding_eeg.zarr"

    def decoding_subject_store(self, subject: str) -> Path:
        """EEG decoding results of one subject (a wildcard pattern is fine)."""
        return self.stage_dir("decoding") / "subjects" / f"sub-{subject}_decoding_eeg.zarr"

    @property
    def decoding_cross_subject_enabled(self) -> bool:
        """Whether EEG is decoded across subjects (or across a subject's sessions)."""
        return self.scope.decoding_cross_subject

    def decoding_config(self) -> dict[str, Any]:
        """The ``decoding`` section of the within-subject EEG decoding jobs."""
        return decoding_config(self.config)

    def decoding_fmri_config(self) -> dict[str, Any]:
        """The ``decoding`` section of the fMRI decoding job (its ``fmri`` block included)."""
        return decoding_fmri_config(self.config)

    def cross_subject_config(self) -> dict[str, Any]:
        """What the cross-subject decoding job reads (``seed``, ``decim``, its block)."""
        return cross_subject_config(self.config)

    def decoding_cross_subject_store(self) -> Path:
        """Cross-subject (or cross-session) EEG decoding results."""
        return self.stage_dir("decoding_cross_subject") / "decoding_eeg_cross_subject.zarr"

    @property
    def decoding_fmri_enabled(self) -> bool:
        """Whether stimuli are identified (and concepts decoded) from fMRI patterns."""
        return self.scope.decoding_fmri

    @property
    def decoding_fmri_patterns(self) -> str:
        """``"trials"`` (single-trial betas) or ``"events"`` (mean BOLD of each event)."""
        given = ((self.config["decoding"].get("fmri") or {}).get("patterns")) or "auto"
        if given == "auto":
            return "trials" if self.single_trial_enabled else "events"
        return str(given)

    def decoding_fmri_inputs(self) -> list[Path]:
        """Brain stores of ``decode_fmri``: single-trial stores or preprocessed runs."""
        if self.decoding_fmri_patterns == "trials":
            return [self.single_trial_store(s) for s in self.trial_subjects]
        return [self.fmri_store(r.key) for r in self.fmri_runs]

    @property
    def concept_annotations(self) -> Path | None:
        """The concept annotation table of fMRI concept decoding, or ``None``.

        ``decoding.fmri.concepts.annotations``: ``auto`` is ``stimuli/concepts.tsv`` of
        the dataset when it exists (the demo writes one); a relative path is taken from
        the working folder when it exists there, else from the dataset root.
        """
        cc = (self.config["decoding"].get("fmri") or {}).get("concepts") or {}
        if not cc.get("enabled", True):
            return None
        given = cc.get("annotations", "auto")
        if given is None:
            return None
        if given == "auto":
            path = self.stimuli_dir / "concepts.tsv"
            return path if self.is_demo or path.exists() else None
        path = Path(str(given)).expanduser()
        return path if path.is_absolute() or path.exists() else self.bids_root / path

    def decoding_fmri_store(self) -> Path:
        """fMRI decoding results of every subject (identification and concepts)."""
        return self.stage_dir("decoding_fmri") / "decoding_fmri.zarr"

    def decoding_stores(self) -> list[Path]:
        """Decoding stores the summary gathers (EEG, cross-subject EEG, then fMRI)."""
        out = [self.decoding_store()] if self.decoding_enabled else []
        if self.decoding_cross_subject_enabled:
            out.append(self.decoding_cross_subject_store())
        return out + ([self.decoding_fmri_store()] if self.decoding_fmri_enabled else [])

    @property
    def rsa_modalities(self) -> list[str]:
        """Modalities whose RSA stage runs (``"eeg"``, ``"fmri"``)."""
        return list(self.scope.rsa)

    def rsa_store(self, modality: str) -> Path:
        """RSA results of every subject for ``"eeg"`` or ``"fmri"``."""
        return self.stage_dir("rsa", modality) / f"rsa_{modality}.zarr"

    def summary_dir(self) -> Path:
        """Folder of the cross-model, cross-subject summary."""
        return self.stage_dir("summary")

    @property
    def has_summary(self) -> bool:
        """Whether the run has a summary: an analysis feeds it, or the plan left analyses
        out (the summary keeps the notes saying why), or QC runs."""
        return bool(
            self.all_scores_stores()
            or self.decoding_stores()
            or self.rsa_modalities
            or self.all_trf_stores()
            or self.all_eeg_scores_stores()
            or self.scope.notes
            or self.qc_targets()
        )

    def all_version_dirs(self) -> list[Path]:
        """Every stage-version folder the current config reaches."""
        out = []
        for key in self.versions:
            stage, _, name = key.partition("/")
            if stage == "dataset":
                continue
            out.append(self.stage_dir(stage, name or None))
        return out

    def eeg_model_names(self) -> list[str]:
        """Names of the configured EEG encoding models (before applicability)."""
        return eeg_model_names(self.config)


def _check_results_dir(path: Path) -> None:
    """Refuse a ``results_dir`` that is (or lies below) an existing file."""
    for parent in (path, *path.absolute().parents):
        if parent.exists():
            if not parent.is_dir():
                what = "an existing file" if parent == path else f"below the file {parent}"
                raise ValueError(
                    f"`results_dir` must be a folder (or a path where one can be made), got "
                    f"{str(path)!r} instead, {what}. Choose another `results_dir`, or move "
                    "the file away."
                )
            return


def _same(a: Any, b: Any) -> bool:
    """Labels match exactly, or as integers (``run-01`` matches ``1``)."""
    a, b = str(a), str(b)
    return a == b or (a.isdigit() and b.isdigit() and int(a) == int(b))


def stage_versions(config: Mapping[str, Any]) -> dict[str, str]:
    """Version id of every stage output that the config reaches.

    A shortcut for ``WorkflowPlan(config).versions`` (the plan indexes the dataset to
    know which analyses apply; for the demo nothing is read).

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    versions : dict of str to str
        See :func:`neuroflow.workflow.versions.compute_versions`.
    """
    return dict(WorkflowPlan(config).versions)

"""Which analyses apply to a dataset: the plan's scope and the notes on what is left out.

The default configuration asks for everything neuroflow can do; a dataset supplies what
it has. :func:`decide_scope` keeps the analyses whose inputs exist and writes one note
for each one it leaves out, so that the same configuration finishes on an EEG-only
study, an fMRI movie shown once, or a dataset without stimulus files:

- a feature extractor needs stimuli of its modality (image or video files under
  ``stimuli/``, captions for text models, events tables for the ``events`` extractor);
- an encoding model needs the extractors of its feature spaces, and run-based fMRI
  encoding a subject with a held-out run and a training run;
- EEG encoding, decoding and EEG RSA need EEG recordings; RSA and the stimulus parts
  of decoding need feature spaces; fMRI RSA needs ROI labels and stimuli shown in
  ``rsa.min_repeats`` runs of every subject; cross-subject EEG decoding needs 2+ EEG
  subjects (or, leave-one-session-out, a subject with 2+ sessions).

The decoding analyses' conditions are in :mod:`neuroflow.workflow.decoding_scope`.

Settings that name something that does not exist at all (an extractor no entry
defines, a layer an extractor does not have) are configuration errors, raised before
any job runs with the key that names them; so are stimuli a job would refuse (see
:mod:`neuroflow.workflow.stimulus_checks`).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow.io.records import natural_key
from neuroflow.names import layer_id
from neuroflow.trial_split import N_BLOCKS_ONE_RUN
from neuroflow.workflow.decoding_scope import (
    _cross_subject_classes,
    _decoding_cross_subject,
    _decoding_eeg,
    _decoding_fmri,
    _eeg_epoch_labels,
    _fmri_presentations,
    _resting_recordings,
    _subject_labels,
)
from neuroflow.workflow.design import resolve_test_runs
from neuroflow.workflow.predict import PredictPlan, plan_predict
from neuroflow.workflow.stimulus_checks import (
    check_stimulus_files,
    identification_notes,
    stimulus_modality,
)
from neuroflow.workflow.versions import (
    PlanScope,
    eeg_model_names,
    eeg_model_spaces,
    encoding_config,
    is_transformer,
)

if TYPE_CHECKING:
    from neuroflow.workflow.plan import WorkflowPlan


__all__ = ["STIMULUS_ANALYSES", "decide_scope", "extractor_unavailable"]


#: Analyses that pool subjects over stimuli; they read per-stimulus feature spaces.
STIMULUS_ANALYSES = ("decoding", "rsa")


_FILE_MODALITIES = {
    "image": (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp"),
    "video": (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".npy"),
    "audio": (".wav",),
    "text": (".txt",),
}


def _modality_of(stim: str) -> str | None:
    suffix = Path(stim.split("#", 1)[0]).suffix.lower()
    for modality, extensions in _FILE_MODALITIES.items():
        if suffix in extensions:
            return modality
    return None


def extractor_unavailable(entry: Mapping[str, Any], plan: WorkflowPlan) -> str | None:
    """Why an extractor entry cannot run on the plan's dataset (None when it can).

    Parameters
    ----------
    entry : dict
        One ``features.extractors`` entry.
    plan : WorkflowPlan
        The plan (its design facts are read).

    Returns
    -------
    reason : str | None
        A short reason, e.g. ``"the dataset has no stimuli/ folder"``.
    """
    from neuroflow.features.config import fill_entry
    from neuroflow.features.registry import get_extractor

    design = plan.design
    if plan.is_demo:
        return None
    filled = fill_entry(entry)
    if filled["extractor"] == "events":
        return None if design.event_tables else "no recording has an events table"
    if filled["text_source"] == "transcript":
        column = filled["transcript_column"]
        has_words = column in design.columns
        has_files = any(s.lower().endswith(".tsv") for s in design.stimulus_ids)
        if has_words or has_files:
            return None
        return f"no events table has a {column!r} column or names a transcript .tsv"
    info = get_extractor(filled["extractor"])
    ids = design.stimulus_ids
    modality = filled["modality"]
    if modality == "auto":
        if info.modalities == ("text",):
            modality = "text"
        else:
            # files of other modalities among them: refused or noted by check_stimulus_files
            found = stimulus_modality(ids, info.modalities)
            modality = found or (info.modalities[0] if ids else "image")
    if modality == "text":
        if design.captions is not None or any(_modality_of(s) == "text" for s in ids):
            return None
        return (
            f"no captions table ({plan.captions}; set `dataset.captions` to use another) "
            "and no .txt stimuli"
        )
    if modality not in info.modalities:
        return f"it does not accept {modality} stimuli (it takes {', '.join(info.modalities)})"
    if not ids:
        return "the events tables name no stimulus files (column stim_file)"
    if design.stimuli_dir is None:
        return f"the dataset has no stimuli/ folder ({plan.stimuli_dir})"
    return None


def _space_labels(plan: WorkflowPlan, names: Sequence[str]) -> list[str]:
    """Labels of every layer of the given extractors (``name`` or ``name:layer``)."""
    out = []
    for name in names:
        layers = plan.extractor_layers(name)
        out += [name] if len(layers) == 1 else [layer_id(name, layer) for layer in layers]
    return out


def _check_space(plan: WorkflowPlan, space: str, key: str, configured: Sequence[str]) -> str:
    """The extractor of a feature space; a configuration error when it names nothing."""
    name, _, layer = str(space).partition(":")
    if name not in configured:
        close = difflib.get_close_matches(name, list(configured), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"`{key}` names feature space {space!r}, but no `features.extractors` entry is "
            f"called {name!r} (entries: {', '.join(configured) or 'none'}).{hint}"
        )
    if layer:
        layers = plan.extractor_layers(name)
        if layer not in layers:
            close = difflib.get_close_matches(layer, layers, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(
                f"`{key}` names feature space {space!r}, but extractor {name!r} has no layer "
                f"{layer!r} (its layers: {', '.join(layers)}).{hint}"
            )
    return name


def _split_spaces(
    plan: WorkflowPlan,
    spaces: Sequence[str],
    key: str,
    configured: Sequence[str],
    running: Sequence[str],
) -> tuple[list[str], list[str]]:
    """Feature spaces whose extractor runs, and those whose extractor was left out."""
    keep, lost = [], []
    for space in spaces:
        name = _check_space(plan, space, key, configured)
        (keep if name in running else lost).append(str(space))
    return keep, lost


def _fmri_repeats_ok(plan: WorkflowPlan, min_repeats: int) -> str | None:
    """Why fMRI RSA over repeated stimuli cannot run (None when it can)."""
    per_subject: list[set[str]] = []
    if plan.source == "betas":
        for subject in sorted({b.subject for b in plan.betas_sessions}):
            counts: Counter[str] = Counter()
            for session in plan.betas_of(subject):
                counts.update(plan.design.trial_stimuli.get(session.key, ()))
            per_subject.append({s for s, n in counts.items() if n >= min_repeats})
    else:
        for subject in sorted({r.subject for r in plan.fmri_runs}):
            counts = Counter()
            for run in plan.runs_of(subject):
                counts.update(set(plan.design.run_stimuli.get(run.key, ())))
            per_subject.append({s for s, n in counts.items() if n >= min_repeats})
    common = set.intersection(*per_subject) if per_subject else set()
    if len(common) >= 3:
        return None
    where = "trials" if plan.source == "betas" else "runs"
    return (
        f"it needs at least 3 stimuli shown in {min_repeats}+ {where} of every subject "
        f"(`rsa.min_repeats`), and this design has {len(common)} (a movie or story shown "
        "once has none)"
    )


def _resolve_test_runs(
    plan: WorkflowPlan, notes: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Runs and held-out runs of each subject's run-based encoding.

    A run whose events table is missing or names no stimulus (a rest run, a header-only
    table) would be modelled as a run of zero features; it is left out of encoding with a
    note (its preprocessed store is still made).

    Returns
    -------
    runs, test : dict of str to list of str
        Subject -> keys of its runs used by encoding, and of the held-out ones among
        them; subjects left out have no entry.
    """
    setting = plan.config["encoding"]["split"]["test_runs"]
    used: dict[str, list[str]] = {}
    test: dict[str, list[str]] = {}
    for subject in sorted({r.subject for r in plan.fmri_runs}):
        all_runs = plan.runs_of(subject)
        runs = [r for r in all_runs if plan.design.run_stimuli.get(r.key)]
        for run in all_runs:
            if run not in runs:
                table = run.events if run.events is not None else "no events table"
                notes.append(
                    f"encoding: {run.key} left out, no stimulus events ({table}); a run "
                    "without them would be fitted as a run of zero features"
                )
        if not runs:
            continue
        keys = resolve_test_runs(runs, setting, plan.design.run_stimuli)
        labels = [r.key for r in runs]
        if setting != "auto" and not keys:
            raise ValueError(
                f"`encoding.split.test_runs` {list(setting)} names none of sub-{subject}'s "
                f"fMRI runs ({', '.join(labels)}); name their run labels or use 'auto'."
            )
        if not keys:
            notes.append(
                f"encoding: sub-{subject} left out, it has {len(runs)} fMRI run with "
                "stimuli (run-based encoding needs a held-out run and a training run)"
            )
            continue
        if len(keys) == len(runs):
            if setting == "auto":
                keys = [max(labels, key=natural_key)]
            else:
                raise ValueError(
                    f"`encoding.split.test_runs` {list(setting)} holds out every fMRI run of "
                    f"sub-{subject} ({', '.join(labels)}); at least one must train the model."
                )
        _check_folds(plan, subject, labels, keys)
        used[subject], test[subject] = labels, keys
    return used, test


def _check_folds(
    plan: WorkflowPlan, subject: str, labels: Sequence[str], test: Sequence[str]
) -> None:
    """``encoding.cv.grouped_kfold`` must not ask for more folds than there are groups.

    The penalty is cross-validated over whole training runs; a subject with one training
    run is cross-validated over contiguous blocks of it instead.
    """
    cv = plan.config["encoding"]["cv"]
    training = [key for key in labels if key not in test]
    if not isinstance(cv, Mapping):
        return
    groups = len(training) if len(training) > 1 else N_BLOCKS_ONE_RUN
    if int(cv["grouped_kfold"]) > groups:
        what = (
            f"{len(training)} training runs ({', '.join(training)})"
            if len(training) > 1
            else f"one training run, cross-validated over {groups} blocks"
        )
        raise ValueError(
            f"`encoding.cv.grouped_kfold` must be at most the number of training runs, got "
            f"{cv['grouped_kfold']} but sub-{subject} has {what}; use fewer folds or "
            "'leave-one-run-out'."
        )


def _runnable_extractors(plan: WorkflowPlan, notes: list[str]) -> list[str]:
    """Names of the extractors with stimuli to work on (a note for each other one)."""
    cfg = plan.config["features"]
    configured = [e["name"] for e in cfg["extractors"]]
    twice = sorted({n for n in configured if configured.count(n) > 1})
    if twice:
        raise ValueError(
            f"`features.extractors` must name each entry once, got {twice} more than once."
        )
    out = []
    for entry in cfg["extractors"]:
        reason = extractor_unavailable(entry, plan)
        if reason is None:
            out.append(entry["name"])
        elif cfg.get("unavailable", "skip") == "error":
            raise ValueError(
                f"`features.extractors` entry {entry['name']!r} cannot run on this dataset: "
                f"{reason}. Remove the entry, or set `features.unavailable: skip`."
            )
        else:
            notes.append(f"features/{entry['name']}: skipped, {reason}")
    return out


def _check_parcel_target(plan: WorkflowPlan) -> None:
    """``encoding.target: parcels`` needs parcel signals."""
    cfg = plan.config
    if cfg["encoding"].get("target", "voxels") != "parcels":
        return
    rois = cfg["preprocess_fmri"].get("rois") or {}
    if plan.source != "timeseries" and not (
        (rois.get("atlas") or plan.is_demo) and rois.get("parcels")
    ):
        raise ValueError(
            "`encoding.target: parcels` needs parcel time series: set "
            "`preprocess_fmri.rois.atlas` and `preprocess_fmri.rois.parcels: true`, or use "
            "`dataset.source: timeseries`."
        )


def _eeg_models(plan: WorkflowPlan, split: Any, notes: list[str]) -> list[str]:
    """EEG encoding models whose feature spaces are all extracted."""
    cfg = plan.config
    if not plan.eeg_recordings or not cfg["eeg_encoding"].get("enabled", True):
        return []
    own = bool(cfg["eeg_encoding"].get("models"))
    out = []
    for model in eeg_model_names(cfg):
        section = "eeg_encoding" if own else "encoding"
        _, lost = split(eeg_model_spaces(cfg, model), f"{section}.models.{model}.feature_spaces")
        if lost:
            notes.append(
                f"eeg_encoding/{model}: skipped, feature space(s) {lost} are not extracted"
            )
        else:
            out.append(model)
    return out


def _analysis_spaces(
    plan: WorkflowPlan, split: Any, extractors: Sequence[str], notes: list[str]
) -> dict[str, tuple[str, ...]]:
    """Feature spaces of the stimulus-level analyses: as configured, else every layer."""
    out: dict[str, tuple[str, ...]] = {}
    for analysis in STIMULUS_ANALYSES:
        wanted = plan.config[analysis].get("feature_spaces") or []
        if wanted:
            keep, lost = split(wanted, f"{analysis}.feature_spaces")
            if lost:
                notes.append(
                    f"{analysis}: feature space(s) {lost} left out, their extractors are not run"
                )
        else:
            keep = _space_labels(plan, extractors)
        out[analysis] = tuple(keep)
    return out


def _eeg_rsa_unavailable(plan: WorkflowPlan, spaces: Sequence[str]) -> str | None:
    """Why EEG RSA cannot run (None when it can)."""
    if not spaces:
        return "no feature space to compare the EEG with"
    per_subject: dict[str, set[str]] = {}
    for rec in plan.eeg_recordings:
        per_subject.setdefault(rec.subject, set()).update(plan.design.eeg_stimuli.get(rec.key, ()))
    fewest = min((len(ids) for ids in per_subject.values()), default=0)
    if fewest < 3:
        column = plan.config["preprocess_eeg"].get("stim_column")
        return f"it needs at least 3 stimulus ids (column {column!r}) per subject, got {fewest}"
    return None


def _fmri_rsa_unavailable(plan: WorkflowPlan, spaces: Sequence[str]) -> str | None:
    """Why fMRI RSA cannot run (None when it can)."""
    if not spaces:
        return "no feature space to compare the fMRI with"
    if plan.source == "timeseries":
        return (
            "parcel time series have one target per ROI, and ROI RDMs need patterns over "
            "several voxels"
        )
    if not plan.has_roi_labels:
        return (
            "the voxels have no ROI labels; set `preprocess_fmri.rois.atlas` (a label image, "
            "or a per-subject path with {subject}) to get ROI RDMs"
        )
    return _fmri_repeats_ok(plan, int(plan.config["rsa"]["min_repeats"]))


def _rsa_modalities(plan: WorkflowPlan, spaces: Sequence[str], notes: list[str]) -> list[str]:
    """Modalities whose RSA runs (a note for each one that cannot)."""
    if not plan.config["rsa"].get("enabled", True):
        return []
    out = []
    checks = (
        ("eeg", bool(plan.eeg_recordings), _eeg_rsa_unavailable),
        ("fmri", bool(plan.fmri_runs or plan.betas_sessions), _fmri_rsa_unavailable),
    )
    for modality, present, why_not in checks:
        if not present:
            continue
        reason = why_not(plan, spaces)
        if reason:
            notes.append(f"rsa_{modality}: skipped, {reason}")
        else:
            out.append(modality)
    return out


def _geometry(
    plan: WorkflowPlan, extractors: Sequence[str], notes: list[str]
) -> dict[str, Any] | None:
    """Whether the ``geometry`` stage runs, the class labels it reads and whether its
    out-of-distribution readout applies."""
    import hashlib

    section = plan.config.get("geometry") or {}
    if not section.get("enabled", True) or not extractors:
        return None
    given = section.get("labels")
    column = section.get("distribution_column")
    if not given:
        if column:
            notes.append("geometry: out-of-distribution readout left out, no labels table")
        return {"labels": None, "labels_identity": None, "ood": False}
    path = Path(given).expanduser()
    path = path if path.is_absolute() else plan.bids_root / path
    if plan.is_demo and path.is_relative_to(plan.bids_root):
        # written by the demo job
        return {"labels": str(path), "labels_identity": None, "ood": bool(column)}
    if not path.is_file():
        notes.append(f"geometry: class metrics left out, the labels table {path} does not exist")
        return {"labels": None, "labels_identity": None, "ood": False}
    checksum = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    why_not = _ood_why_not(path, column, section.get("train_distribution")) if column else ""
    if why_not:
        notes.append(f"geometry: out-of-distribution readout left out, {why_not}")
    return {"labels": str(path), "labels_identity": checksum, "ood": bool(column) and not why_not}


def _ood_why_not(path: Path, column: str, train: str | None) -> str:
    """Why the labels table gives no held-out distribution (``""``: it does)."""
    import csv

    with path.open(newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    if not rows or column not in rows[0]:
        return f"the labels table {path} has no column {column!r}"
    values = {str(r[column]).strip() for r in rows}
    if train is None or str(train) not in values:
        return f"no stimulus of {path} has {column} = {train!r} (geometry.train_distribution)"
    if len(values) < 2:
        return f"every stimulus of {path} has {column} = {train!r}, none is held out"
    return ""


def _predict(
    plan: WorkflowPlan, models: Sequence[str], eeg_models: Sequence[str] = ()
) -> PredictPlan:
    """Pools and models of the ``predict`` stages (nothing without stimulus sets)."""
    section = dict(plan.config.get("predict") or {})
    if not section.get("stimulus_sets") or not (models or eeg_models):
        return PredictPlan(pools={}, models={}, extractors={}, notes=())
    demo_files = None
    if plan.is_demo:
        from neuroflow.demo import demo_layout

        demo_files = list(demo_layout(plan.config["demo"], plan.bids_root).files)
    # a layer sweep's name stands for every layer model it expands into
    sweeps = {name: [layer.model for layer in layers] for name, layers in plan.sweeps.items()}
    # and a transform-swept model's name for each of its variants
    variants: dict[str, list[str]] = {}
    for swept in plan.transform_sweeps.values():
        for variant in swept:
            for pair in variant.models:
                base, _, model = pair.partition("=")
                variants.setdefault(base, []).append(model)
    wanted = [v for w in section.get("models") or [] for v in variants.get(w, [w])]
    section["models"] = [m for w in wanted for m in sweeps.get(w, [w])]
    spaces = {
        m: [s.split(":")[0] for s in encoding_config(plan.config, m)["feature_spaces"]]
        for m in models
    }
    eeg_spaces = {
        m: [s.split(":")[0] for s in eeg_model_spaces(plan.config, m)] for m in eeg_models
    }
    return plan_predict(
        section,
        stimuli_dir=plan.stimuli_dir,
        models=spaces,
        extractor_of=plan.extractor,
        demo_files=demo_files,
        eeg_models=eeg_spaces,
    )


def decide_scope(plan: WorkflowPlan) -> tuple[PlanScope, dict[str, list[str]]]:
    """The analyses that apply to the plan's dataset, and the held-out fMRI runs.

    Parameters
    ----------
    plan : WorkflowPlan
        A plan whose recordings and design facts are known.

    Returns
    -------
    scope : PlanScope
    test_runs : dict of str to list of str
        Subject -> keys of its held-out runs (subjects with run-based encoding only).
    """
    cfg = plan.config
    notes: list[str] = list(plan.config_notes)
    extractors = _runnable_extractors(plan, notes)
    extractors = check_stimulus_files(plan, extractors, notes)
    configured = [e["name"] for e in cfg["features"]["extractors"]]

    def split(spaces: Sequence[str], key: str) -> tuple[list[str], list[str]]:
        return _split_spaces(plan, spaces, key, configured, extractors)

    # fMRI encoding on runs (held-out runs) and on single trials (held-out stimuli)
    has_fmri = bool(plan.fmri_runs or plan.betas_sessions)
    models: list[str] = []
    for model, entry in cfg["encoding"]["models"].items():
        _, lost = split(entry["feature_spaces"], f"encoding.models.{model}.feature_spaces")
        if not lost:
            models.append(model)
        elif has_fmri:
            notes.append(f"encoding/{model}: skipped, feature space(s) {lost} are not extracted")
    _check_parcel_target(plan)
    encoding_runs, test_runs = (
        _resolve_test_runs(plan, notes) if plan.fmri_runs and models else ({}, {})
    )
    single = plan.source == "betas" or bool(cfg["single_trial"]["enabled"] and plan.fmri_runs)

    eeg_models = _eeg_models(plan, split, notes)
    trf = bool(
        eeg_models
        and (cfg["eeg_encoding"].get("trf") or {}).get("enabled", False)
        and plan.continuous_recordings
    )
    spaces = _analysis_spaces(plan, split, extractors, notes)
    rsa = _rsa_modalities(plan, spaces["rsa"], notes)
    eeg_labels = _eeg_epoch_labels(plan)
    resting = _resting_recordings(plan, eeg_labels, notes)
    decoding_subjects = (
        _decoding_eeg(
            plan, _subject_labels(plan, eeg_labels, resting), bool(spaces["decoding"]), notes
        )
        if plan.eeg_recordings and cfg["decoding"].get("enabled", True)
        else []
    )
    decoding = bool(decoding_subjects)
    cross_subject = decoding and _decoding_cross_subject(plan, notes, resting)
    if cross_subject:
        reason = _cross_subject_classes(plan, eeg_labels, resting)
        if reason is not None:
            notes.append(f"decoding_cross_subject: skipped, {reason}")
            cross_subject = False
    decoding_fmri = _decoding_fmri(plan, single, bool(spaces["decoding"]), notes)
    notes += identification_notes(
        plan,
        eeg=decoding and bool(spaces["decoding"]),
        fmri=decoding_fmri and bool(spaces["decoding"]),
        eeg_labels=eeg_labels,
    )
    run_models = models if test_runs else []
    # a transformer learns from time series across subjects: no single-trial or
    # in-silico counterpart
    transformers = [m for m in models if is_transformer(cfg, m)]
    trial_models = [m for m in models if single and m not in transformers]
    stage = "encoding" if plan.source == "betas" else "trial_encoding"
    if single:
        notes += [
            f"{stage}/{m}: skipped, a transformer needs BOLD time series" for m in transformers
        ]
    if trial_models:
        notes += _trial_split_notes(plan, trial_models[0], stage)
    linear = [m for m in run_models if m not in transformers]
    predict = _predict(plan, [*linear, *(m for m in trial_models if m not in linear)], eeg_models)
    notes += predict.notes
    geometry = _geometry(plan, extractors, notes)
    selection = {
        "fmri": sorted(r.key for r in plan.fmri_runs),
        "eeg": sorted(r.key for r in plan.eeg_recordings),
        "betas": sorted(b.key for b in plan.betas_sessions),
        "tables": plan.table_identity(),
        "stimulus_events": plan.stimulus_events,
        "test_runs": test_runs,
        "encoding_runs": encoding_runs,
    }
    # recorded only when some are left out, so that other selections keep their versions
    if resting:
        selection["resting_eeg"] = sorted(resting)
    if decoding and decoding_subjects != plan.eeg_subjects:
        selection["decoding_subjects"] = sorted(decoding_subjects)
    scope = PlanScope(
        extractors=tuple(extractors),
        models=tuple(run_models),
        trial_models=tuple(trial_models),
        eeg_models=tuple(eeg_models),
        rsa=tuple(rsa),
        decoding=decoding,
        decoding_fmri=decoding_fmri,
        decoding_cross_subject=cross_subject,
        single_trial=single,
        trf=trf,
        spaces=spaces,
        predict=predict,
        geometry=geometry,
        selection=selection,
        notes=tuple(dict.fromkeys(notes)),
    )
    return scope, test_runs


def _trial_split_notes(plan: WorkflowPlan, model: str, stage: str) -> list[str]:
    """A note when a subject's single-trial split tests on more stimuli than it trains on.

    The split is the one the trial encoding stage draws (``encoding.trial_split``) from
    the stimuli the events tables give; subjects they do not describe, and splits the
    stage will refuse (it names the file), get no note.
    """
    from neuroflow.trial_split import select_trial_test_stimuli, split_note

    split = plan.trial_encoding_config(model).get("trial_split") or {}
    test = split.get("test", "auto")
    parts = []
    for subject, stims in sorted(_fmri_presentations(plan, "trials").items()):
        stims = [s for s in stims or () if s]
        if not stims:
            continue
        try:
            test_ids = select_trial_test_stimuli(
                stims,
                test,
                fraction=float(split.get("test_fraction", 0.2)),
                seed=int(split.get("seed", 0)),
            )
        except ValueError:
            continue
        n_test = len(test_ids)
        note = split_note(len(set(stims)) - n_test, n_test, test)
        if note is not None:
            parts.append(f"sub-{subject} {note}")
    return [f"{stage}: {'; '.join(parts)}"] if parts else []

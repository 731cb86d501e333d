"""The stage graph and the version id of every stage output.

A version id is a short hash of the stage's own config section, the version
ids of its inputs and the stage's format version (see
:func:`neuroflow.artifacts.version_id`). Everything here is computed from the
config alone, before any job runs, so Snakemake's output paths carry it.

Bump a stage's entry in :data:`FORMAT_VERSIONS` when a code change alters the
meaning or values of that stage's output: its version and every downstream
version change, and the next run recomputes them. Cosmetic code changes leave
the versions, and so the results, as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuroflow.artifacts import version_id

__all__ = [
    "FORMAT_VERSIONS",
    "STAGES",
    "PlanScope",
    "compute_versions",
    "cross_subject_config",
    "data_version",
    "dataset_identity",
    "decoding_config",
    "decoding_fmri_config",
    "eeg_encoding_config",
    "eeg_model_names",
    "eeg_model_spaces",
    "eeg_trf_config",
    "encoding_config",
    "trial_encoding_config",
]

#: Format version of each stage's output.
FORMAT_VERSIONS: dict[str, int] = {
    "demo": 5,
    "preprocess_fmri": 3,
    "preprocess_eeg": 4,
    "features": 5,
    "align_features": 3,
    "encoding": 6,
    "evaluation": 6,
    "summary": 10,
    "single_trial": 3,
    "eeg_encoding": 6,
    "eeg_evaluation": 2,
    "eeg_trf": 2,
    "decoding": 8,
    "decoding_fmri": 4,
    "decoding_cross_subject": 1,
    "rsa": 8,
    "trial_encoding": 5,
    "trial_evaluation": 2,
    "qc_eeg": 2,
    "qc_fmri": 1,
    "pool_features": 1,
    "predict": 1,
    "predict_eeg": 1,
    "geometry": 2,
}

#: Stage name -> upstream stages, in execution order.
STAGES: dict[str, tuple[str, ...]] = {
    "demo": (),
    "preprocess_fmri": ("demo",),
    "preprocess_eeg": ("demo",),
    "features": ("demo",),
    "align_features": ("features", "preprocess_fmri"),
    "encoding": ("align_features", "preprocess_fmri"),
    "evaluation": ("encoding",),
    "summary": ("evaluation",),
    "single_trial": ("preprocess_fmri",),
    "eeg_encoding": ("preprocess_eeg", "features"),
    "eeg_evaluation": ("eeg_encoding",),
    "eeg_trf": ("preprocess_eeg", "features"),
    "decoding": ("preprocess_eeg", "features"),
    "decoding_fmri": ("single_trial", "preprocess_fmri", "features"),
    "decoding_cross_subject": ("preprocess_eeg",),
    "rsa": ("preprocess_eeg", "preprocess_fmri", "features"),
    "trial_encoding": ("single_trial", "features"),
    "trial_evaluation": ("trial_encoding",),
    "qc_eeg": ("preprocess_eeg",),
    "qc_fmri": ("preprocess_fmri",),
    "geometry": ("features", "summary"),
    "pool_features": ("demo",),
    "predict": ("encoding", "trial_encoding", "pool_features"),
    "predict_eeg": ("eeg_encoding", "pool_features"),
}


@dataclass(frozen=True)
class PlanScope:
    """What a plan computes, beyond the config: the analyses that apply to the dataset.

    :class:`~neuroflow.workflow.plan.WorkflowPlan` decides this from the config and the
    dataset (which modalities exist, which extractors have stimuli, which designs have
    repeats); the version ids cover it, so that a version folder always holds the
    results of one selection of recordings and analyses.

    Attributes
    ----------
    extractors : tuple of str
        Names of the feature extractors that run (config order).
    models : tuple of str
        Run-based fMRI encoding models that run.
    trial_models : tuple of str
        Single-trial encoding models that run.
    eeg_models : tuple of str
        EEG encoding models that run.
    rsa : tuple of str
        Modalities of the RSA stages that run (``"eeg"``, ``"fmri"``).
    decoding : bool
        Whether the EEG decoding stage runs.
    decoding_fmri : bool
        Whether stimuli are identified from single-trial betas.
    decoding_cross_subject : bool
        Whether EEG is decoded across subjects (or across a subject's sessions).
    single_trial : bool
        Whether single-trial betas are estimated (or imported) and modelled.
    trf : bool
        Whether EEG temporal response functions are fitted.
    spaces : dict of str to tuple of str
        Feature spaces of the stimulus-level analyses (``"decoding"``, ``"rsa"``).
    selection : dict
        The recordings the group-level stages pool (entity keys per modality), the
        stimulus tables they read, the stimulus-event rules and the held-out runs.
    geometry : dict | None
        With the ``geometry`` stage: ``labels`` (the class labels TSV, or None) and
        ``labels_identity`` (its checksum, for a real dataset); None: no stage.
    predict : PredictPlan | None
        Pools of new stimuli, the extractors run over them and the encoding models
        applied to them (:mod:`neuroflow.workflow.predict`); None or empty: no
        ``predict`` stage.
    notes : tuple of str
        Analyses left out, each with its reason (logged, and kept by the summary).
    """

    extractors: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    trial_models: tuple[str, ...] = ()
    eeg_models: tuple[str, ...] = ()
    rsa: tuple[str, ...] = ()
    decoding: bool = False
    decoding_fmri: bool = False
    decoding_cross_subject: bool = False
    single_trial: bool = False
    trf: bool = False
    spaces: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    predict: Any = None
    geometry: Mapping[str, Any] | None = None
    selection: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _normalised_path(value: Any) -> str | None:
    """An absolute path without symlinks, ``..`` or a trailing slash (None stays None)."""
    if value in (None, ""):
        return None
    return str(Path(str(value)).expanduser().resolve())


def dataset_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the input dataset (filters excluded: they select jobs).

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    identity : dict
        For the demo, its config section; for a real dataset, its paths (resolved, so
        that every spelling of one folder gives one identity), the derivatives space
        and the settings that change how its files are read.
    """
    ds = config["dataset"]
    if ds["source"] == "demo":
        return {"source": "demo", "demo": config["demo"]}
    identity = {
        "source": ds["source"],
        "bids_root": _normalised_path(ds.get("bids_root")),
        "fmriprep_dir": _normalised_path(ds.get("fmriprep_dir")),
        "space": ds.get("space"),
    }
    for key in ("captions", "repetition_time", "betas_scale", "eeg_from_meg"):
        if ds.get(key) is not None:
            identity[key] = _normalised_path(ds[key]) if key == "captions" else ds[key]
    return identity


def _v(stage: str, section: Any, inputs: Mapping[str, str]) -> str:
    return version_id(
        stage=stage, config=section, inputs=inputs, format_version=FORMAT_VERSIONS[stage]
    )


def data_version(config: Mapping[str, Any]) -> tuple[str, str]:
    """Key (``"demo"`` or ``"dataset"``) and version id of the input dataset."""
    identity = dataset_identity(config)
    key = "demo" if identity["source"] == "demo" else "dataset"
    return key, version_id(stage=key, config=identity, format_version=FORMAT_VERSIONS["demo"])


def compute_versions(config: Mapping[str, Any], scope: PlanScope) -> dict[str, str]:
    """Version id of every stage output a plan reaches.

    Parameters
    ----------
    config : dict
        The whole validated config.
    scope : PlanScope
        The analyses that apply and the recordings they pool.

    Returns
    -------
    versions : dict of str to str
        Keys are ``"demo"`` (or ``"dataset"``), ``"preprocess_fmri"``,
        ``"preprocess_eeg"``, ``"features/<name>"``, ``"align_features/<name>"``,
        ``"encoding/<model>"``, ``"evaluation/<model>"``, ``"single_trial"``,
        ``"eeg_encoding/<model>"``, ``"eeg_evaluation/<model>"``, ``"decoding"``,
        ``"rsa/<modality>"``, ``"summary"``, ``"qc_eeg"`` and ``"qc_fmri"`` (with
        ``qc.enabled``); with cross-subject EEG decoding, ``"decoding_cross_subject"``;
        with single trials,
        ``"trial_encoding/<model>"`` and ``"trial_evaluation/<model>"``; with TRFs,
        ``"eeg_trf/<model>"``. Stages that do not apply have no entry.
    """
    data_key, data_id = data_version(config)
    versions: dict[str, str] = {data_key: data_id}
    data_v = {"dataset": data_id}
    selection = dict(scope.selection)
    design = {"stimulus_events": config["dataset"].get("stimulus_events") or {}}
    # Stages that pool recordings carry the selection: a different choice of subjects,
    # runs or stimulus tables is a different result, so it gets a different folder.
    pooled = {"selection": version_id(stage="selection", config=selection)}
    versions["preprocess_fmri"] = _v("preprocess_fmri", config["preprocess_fmri"], data_v)
    versions["preprocess_eeg"] = _v(
        "preprocess_eeg", {**config["preprocess_eeg"], **design}, data_v
    )
    if config["qc"]["enabled"]:
        for modality in ("eeg", "fmri"):
            brain = f"preprocess_{modality}"
            versions[f"qc_{modality}"] = _v(
                f"qc_{modality}", config["qc"], {brain: versions[brain]}
            )

    features = config["features"]
    for name in scope.extractors:
        entry = next(e for e in features["extractors"] if e["name"] == name)
        versions[f"features/{name}"] = _v("features", {**entry, **design}, {**data_v, **pooled})
        versions[f"align_features/{name}"] = _v(
            "align_features",
            {**features["alignment"], **design},
            {
                "features": versions[f"features/{name}"],
                "preprocess_fmri": versions["preprocess_fmri"],
            },
        )

    for model in scope.models:
        section = encoding_config(config, model)
        inputs = {"preprocess_fmri": versions["preprocess_fmri"], **pooled}
        for space in section["feature_spaces"]:
            extractor = space.split(":")[0]
            inputs[f"align_features/{space}"] = versions[f"align_features/{extractor}"]
        versions[f"encoding/{model}"] = _v("encoding", section, inputs)
        versions[f"evaluation/{model}"] = _v(
            "evaluation", config["evaluation"], {"encoding": versions[f"encoding/{model}"]}
        )
    if scope.single_trial:
        upstream = "preprocess_fmri" if config["dataset"]["source"] != "betas" else "dataset"
        versions["single_trial"] = _v(
            "single_trial",
            {**config["single_trial"], **design},
            {upstream: versions.get(upstream, data_id), **pooled},
        )
        for model in scope.trial_models:
            section = trial_encoding_config(config, model)
            inputs = {**_feature_inputs(versions, section, "single_trial"), **pooled}
            versions[f"trial_encoding/{model}"] = _v("trial_encoding", section, inputs)
            versions[f"trial_evaluation/{model}"] = _v(
                "trial_evaluation",
                config["evaluation"],
                {"trial_encoding": versions[f"trial_encoding/{model}"]},
            )
    for model in scope.eeg_models:
        section = eeg_encoding_config(config, model)
        inputs = {**_feature_inputs(versions, section, "preprocess_eeg"), **pooled}
        versions[f"eeg_encoding/{model}"] = _v("eeg_encoding", section, inputs)
        versions[f"eeg_evaluation/{model}"] = _v(
            "eeg_evaluation",
            config["evaluation"],
            {"eeg_encoding": versions[f"eeg_encoding/{model}"]},
        )
    if scope.trf:
        for model in scope.eeg_models:
            section = eeg_trf_config(config, model)
            inputs = _feature_inputs(versions, section, "preprocess_eeg")
            versions[f"eeg_trf/{model}"] = _v("eeg_trf", section, inputs)

    def space_versions(analysis: str) -> dict[str, str]:
        spaces = scope.spaces.get(analysis, ())
        return {f"features/{s}": versions[f"features/{s.split(':')[0]}"] for s in spaces}

    if scope.decoding:
        versions["decoding"] = _v(
            "decoding",
            decoding_config(config),
            {"preprocess_eeg": versions["preprocess_eeg"], **space_versions("decoding"), **pooled},
        )
    if scope.decoding_cross_subject:
        versions["decoding_cross_subject"] = _v(
            "decoding_cross_subject",
            cross_subject_config(config),
            {"preprocess_eeg": versions["preprocess_eeg"], **pooled},
        )
    if scope.decoding_fmri:
        patterns = (config["decoding"].get("fmri") or {}).get("patterns", "auto")
        if patterns == "auto":
            patterns = "trials" if scope.single_trial else "events"
        brain = "single_trial" if patterns == "trials" else "preprocess_fmri"
        versions["decoding_fmri"] = _v(
            "decoding_fmri",
            {**decoding_fmri_config(config), **design},
            {brain: versions[brain], **space_versions("decoding"), **pooled},
        )
    for modality in scope.rsa:
        brain = {
            "eeg": "preprocess_eeg",
            "fmri": "single_trial" if config["dataset"]["source"] == "betas" else "preprocess_fmri",
        }[modality]
        versions[f"rsa/{modality}"] = _v(
            "rsa",
            {**config["rsa"], **design},
            {brain: versions[brain], **space_versions("rsa"), **pooled},
        )
    _predict_versions(config, scope, versions, data_v)
    # Every analysis the summary gathers or describes (its methods paragraph names the
    # EEG encoding models and the quality control too), so that changing one gives the
    # summary a new version.
    evaluation_inputs = {
        k: v
        for k, v in versions.items()
        if k.startswith(("evaluation/", "trial_evaluation/", "eeg_evaluation/", "eeg_trf/", "rsa/"))
        or k in ("decoding", "decoding_fmri", "decoding_cross_subject")
    }
    versions["summary"] = _v(
        "summary",
        {**config["evaluation"], "qc": config["qc"], "notes": list(scope.notes)},
        {**evaluation_inputs, **pooled},
    )
    if scope.geometry is not None:
        versions["geometry"] = _v(
            "geometry",
            {**config["geometry"], **dict(scope.geometry)},
            {
                **{f"features/{n}": versions[f"features/{n}"] for n in scope.extractors},
                "summary": versions["summary"],
            },
        )
    return versions


def _predict_versions(
    config: Mapping[str, Any],
    scope: PlanScope,
    versions: dict[str, str],
    data_v: Mapping[str, str],
) -> None:
    """Add ``pool_features/<extractor>``, ``predict/<model>`` and ``predict_eeg/<model>``."""
    plan = scope.predict
    if plan is None or not (plan.models or plan.eeg_models):
        return
    for name, pools in plan.extractors.items():
        entry = next(e for e in config["features"]["extractors"] if e["name"] == name)
        identity = {p: dict(plan.pools[p].identity) for p in pools}
        versions[f"pool_features/{name}"] = _v(
            "pool_features", {"extractor": entry, "pools": identity}, dict(data_v)
        )
    # each stage's id covers the settings it reads: the EEG ones do not reach fMRI stores
    shared = ("k", "keep_voxels", "batch_size", "tail")
    cfg = config["predict"]
    targets = cfg.get("targets") or {}
    section = {k: cfg[k] for k in shared if k in cfg}
    fmri_section = dict(section)
    if targets.get("voxels"):
        fmri_section["voxels"] = list(targets["voxels"])
    eeg_section = {
        **section,
        "channels": list(targets.get("channels") or []),
        "channel_groups": dict(cfg.get("channel_groups") or {}),
        "latency_window": cfg.get("latency_window"),
    }
    for model, pools in plan.models.items():
        fitted = f"encoding/{model}" if model in scope.models else f"trial_encoding/{model}"
        inputs = {"model": versions[fitted]}
        for space in encoding_config(config, model)["feature_spaces"]:
            extractor = space.split(":")[0]
            inputs[f"pool_features/{extractor}"] = versions[f"pool_features/{extractor}"]
        versions[f"predict/{model}"] = _v("predict", {**fmri_section, "pools": list(pools)}, inputs)
    for model, pools in plan.eeg_models.items():
        inputs = {"model": versions[f"eeg_encoding/{model}"]}
        for space in eeg_model_spaces(config, model):
            extractor = space.split(":")[0]
            inputs[f"pool_features/{extractor}"] = versions[f"pool_features/{extractor}"]
        versions[f"predict_eeg/{model}"] = _v(
            "predict_eeg", {**eeg_section, "pools": list(pools)}, inputs
        )


def _feature_inputs(
    versions: Mapping[str, str], section: Mapping[str, Any], brain_stage: str
) -> dict[str, str]:
    """Upstream versions of a model reading per-stimulus features: the brain data's
    stage plus the extractor of every feature space (``"<extractor>[:<layer>]"``)."""
    inputs = {brain_stage: versions[brain_stage]}
    for space in section["feature_spaces"]:
        inputs[f"features/{space}"] = versions[f"features/{space.split(':')[0]}"]
    return inputs


def _model_section(config: Mapping[str, Any], model: str, drop: Sequence[str]) -> dict[str, Any]:
    """The shared ``encoding`` settings (less ``drop``) plus one model's entry and name."""
    encoding = config["encoding"]
    if model not in encoding["models"]:
        raise KeyError(
            f"No encoding model named {model!r}; configured: {list(encoding['models'])}."
        )
    shared = {k: v for k, v in encoding.items() if k not in ("models", *drop)}
    # `transformer: null` (the schema's default) is no setting: left out, so that the
    # ridge models' versions do not depend on it
    entry = {
        k: v for k, v in encoding["models"][model].items() if not (k == "transformer" and v is None)
    }
    return {**shared, **entry, "name": model}


def encoding_config(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Settings of one encoding model: the shared settings plus the model's entry.

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``encoding.models``.

    Returns
    -------
    section : dict
        What the encoding stage receives for this model.
    """
    # trial_split only concerns the single-trial models: changing it reruns nothing here.
    section = _model_section(config, model, _TRIAL_ONLY_KEYS)
    if section.get("model") == "transformer":
        from neuroflow.config.transformer_options import resolve_options

        # every option in the version: a changed package default reruns the model
        section["transformer"] = resolve_options(section.get("transformer"))
    elif "transformer" in section:
        raise ValueError(
            f"`encoding.models.{model}.transformer` needs `model: transformer`, got model "
            f"{section.get('model', 'auto')!r} instead."
        )
    return section


def is_transformer(config: Mapping[str, Any], model: str) -> bool:
    """Whether ``encoding.models.<model>`` is a transformer (trained across subjects)."""
    entry = config["encoding"]["models"].get(model) or {}
    return entry.get("model") == "transformer"


#: ``encoding`` keys read only by the single-trial models.
_TRIAL_ONLY_KEYS = ("trial_split",)
#: ``encoding`` keys read only by the run-based models (time series, held-out runs).
_RUN_ONLY_KEYS = ("cv", "delays", "split", "filter_design")


def trial_encoding_config(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Settings of one single-trial encoding model (held-out stimuli).

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``encoding.models``.

    Returns
    -------
    section : dict
        The ``encoding`` settings the trial stage reads (solver, penalties, scoring,
        standardisation, banded search, ``trial_split``, device, dtype) plus the
        model's entry; the run-only keys (``cv``, ``delays``, ``split``,
        ``filter_design``) are left out, so changing them reruns no trial model.
    """
    return _model_section(config, model, _RUN_ONLY_KEYS)


def eeg_model_names(config: Mapping[str, Any]) -> list[str]:
    """Names of the EEG encoding models: ``eeg_encoding.models``, else ``encoding.models``
    (less the transformers)."""
    own = config["eeg_encoding"].get("models") or {}
    if own:
        return list(own)
    # a transformer is an fMRI model across subjects: no EEG model takes its name
    return [m for m in config["encoding"]["models"] if not is_transformer(config, m)]


def eeg_model_spaces(config: Mapping[str, Any], model: str) -> list[str]:
    """Feature spaces of one EEG encoding model.

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``eeg_encoding.models`` (or of ``encoding.models`` when that is empty).

    Returns
    -------
    spaces : list of str
    """
    own = config["eeg_encoding"].get("models") or {}
    if own:
        if model not in own:
            raise KeyError(f"No EEG encoding model named {model!r}; configured: {list(own)}.")
        return list(own[model]["feature_spaces"])
    return list(encoding_config(config, model)["feature_spaces"])


def eeg_encoding_config(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Settings of one EEG encoding model: ``eeg_encoding`` plus the model's spaces.

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``eeg_encoding.models``, or of ``encoding.models`` when
        ``eeg_encoding.models`` is empty (EEG models then share the fMRI models' names
        and feature spaces).

    Returns
    -------
    section : dict
        What the EEG encoding stage (epochs) receives for this model: every
        ``eeg_encoding`` key but ``enabled``, ``models`` and the ``trf`` block, so TRF
        settings rerun no epochs model.
    """
    shared = {
        k: v for k, v in config["eeg_encoding"].items() if k not in ("enabled", "trf", "models")
    }
    return {**shared, "name": model, "feature_spaces": eeg_model_spaces(config, model)}


#: ``decoding`` keys the cross-subject stage reads besides its ``cross_subject`` block.
_CROSS_SUBJECT_KEYS = ("seed", "decim")


def decoding_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Settings of the within-subject EEG decoding stage.

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    section : dict
        The ``decoding`` section without its ``cross_subject`` and ``fmri`` blocks, so
        that cross-subject or fMRI-only settings rerun no within-subject EEG decoding
        (the fMRI stage adds its ``fmri`` block back).
    """
    return {k: v for k, v in config["decoding"].items() if k not in ("cross_subject", "fmri")}


def decoding_fmri_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Settings of the fMRI decoding stage.

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    section : dict
        The ``decoding`` section without its ``cross_subject`` block (the ``fmri``
        block included), so that cross-subject settings rerun no fMRI decoding.
    """
    return {**decoding_config(config), "fmri": config["decoding"].get("fmri") or {}}


def cross_subject_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Settings of the cross-subject EEG decoding stage.

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    section : dict
        The ``decoding`` keys it reads: ``seed``, ``decim`` and the ``cross_subject``
        block (what :func:`neuroflow.decoding.cross_subject_stage.decode_eeg_cross_subject`
        receives).
    """
    decoding = config["decoding"]
    out = {k: decoding[k] for k in _CROSS_SUBJECT_KEYS if k in decoding}
    return {**out, "cross_subject": dict(decoding.get("cross_subject") or {})}


#: ``eeg_encoding`` keys read by the TRF stage (besides the ``trf`` block).
_TRF_KEYS = ("alphas", "scoring", "standardize", "device", "dtype", "target_batch_size")


def eeg_trf_config(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Settings of one EEG temporal response function model (continuous recording).

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``encoding.models`` (TRF models share the fMRI models' names).

    Returns
    -------
    section : dict
        What :func:`neuroflow.encoding.trf.fit_trf` reads: the model's name and
        feature spaces, the shared solver settings (penalties, scoring,
        standardisation, device, dtype, batch size) and the ``trf`` block without
        its ``enabled`` switch. The epochs-only keys (``cv``, ``test``, ``tmin``,
        ``tmax``, ``decim``) are left out, so changing them reruns no TRF.
    """
    eeg = config["eeg_encoding"]
    shared = {k: eeg[k] for k in _TRF_KEYS if k in eeg}
    trf = {k: v for k, v in (eeg.get("trf") or {}).items() if k != "enabled"}
    return {**shared, "trf": trf, "name": model, "feature_spaces": eeg_model_spaces(config, model)}

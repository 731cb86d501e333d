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
from typing import Any

from neuroflow.artifacts import version_id

__all__ = [
    "FORMAT_VERSIONS",
    "STAGES",
    "dataset_identity",
    "eeg_encoding_config",
    "eeg_trf_config",
    "encoding_config",
    "stage_versions",
    "trial_encoding_config",
]

#: Format version of each stage's output.
FORMAT_VERSIONS: dict[str, int] = {
    "demo": 3,
    "preprocess_fmri": 2,
    "preprocess_eeg": 1,
    "features": 1,
    "align_features": 1,
    "encoding": 2,
    "evaluation": 1,
    "summary": 1,
    "single_trial": 1,
    "eeg_encoding": 1,
    "eeg_evaluation": 1,
    "eeg_trf": 1,
    "decoding": 2,
    "rsa": 2,
    "trial_encoding": 1,
    "trial_evaluation": 1,
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
    "rsa": ("preprocess_eeg", "preprocess_fmri", "features"),
    "trial_encoding": ("single_trial", "features"),
    "trial_evaluation": ("trial_encoding",),
}


def dataset_identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """What identifies the input dataset (filters excluded: they select jobs).

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    identity : dict
        For the demo, its config section; for a real dataset, its paths and
        the derivatives space.
    """
    ds = config["dataset"]
    if ds["source"] == "demo":
        return {"source": "demo", "demo": config["demo"]}
    return {
        "source": ds["source"],
        "bids_root": str(ds.get("bids_root")),
        "fmriprep_dir": str(ds.get("fmriprep_dir")),
        "space": ds.get("space"),
    }


def _v(stage: str, section: Any, inputs: Mapping[str, str]) -> str:
    return version_id(
        stage=stage, config=section, inputs=inputs, format_version=FORMAT_VERSIONS[stage]
    )


def stage_versions(config: Mapping[str, Any]) -> dict[str, str]:
    """Version id of every stage output that the config reaches.

    Parameters
    ----------
    config : dict
        The whole validated config.

    Returns
    -------
    versions : dict of str to str
        Keys are ``"demo"`` (or ``"dataset"``), ``"preprocess_fmri"``,
        ``"preprocess_eeg"``, ``"features/<name>"``, ``"align_features/<name>"``,
        ``"encoding/<model>"``, ``"evaluation/<model>"``, ``"single_trial"``,
        ``"eeg_encoding/<model>"``, ``"eeg_evaluation/<model>"``, ``"decoding"``,
        ``"rsa/<modality>"``, ``"summary"``; when ``single_trial.enabled``,
        ``"trial_encoding/<model>"`` and ``"trial_evaluation/<model>"``; when
        ``eeg_encoding.enabled`` and ``eeg_encoding.trf.enabled``, ``"eeg_trf/<model>"``.
    """
    identity = dataset_identity(config)
    data_key = "demo" if identity["source"] == "demo" else "dataset"
    versions: dict[str, str] = {
        data_key: version_id(
            stage=data_key, config=identity, format_version=FORMAT_VERSIONS["demo"]
        )
    }
    data_v = {"dataset": versions[data_key]}
    versions["preprocess_fmri"] = _v("preprocess_fmri", config["preprocess_fmri"], data_v)
    versions["preprocess_eeg"] = _v("preprocess_eeg", config["preprocess_eeg"], data_v)

    features = config["features"]
    split = config["encoding"]["split"]
    for entry in features["extractors"]:
        name = entry["name"]
        section = dict(entry)
        if _uses_training_split(entry):
            section["split"] = split
        versions[f"features/{name}"] = _v("features", section, data_v)
        versions[f"align_features/{name}"] = _v(
            "align_features",
            features["alignment"],
            {
                "features": versions[f"features/{name}"],
                "preprocess_fmri": versions["preprocess_fmri"],
            },
        )

    for model in config["encoding"]["models"]:
        section = encoding_config(config, model)
        inputs = {"preprocess_fmri": versions["preprocess_fmri"]}
        for space in section["feature_spaces"]:
            extractor = space.split(":")[0]
            inputs[f"align_features/{space}"] = versions[f"align_features/{extractor}"]
        versions[f"encoding/{model}"] = _v("encoding", section, inputs)
        versions[f"evaluation/{model}"] = _v(
            "evaluation", config["evaluation"], {"encoding": versions[f"encoding/{model}"]}
        )
    versions["single_trial"] = _v(
        "single_trial", config["single_trial"], {"preprocess_fmri": versions["preprocess_fmri"]}
    )
    for model in config["encoding"]["models"]:
        section = eeg_encoding_config(config, model)
        inputs = _feature_inputs(versions, section, "preprocess_eeg")
        versions[f"eeg_encoding/{model}"] = _v("eeg_encoding", section, inputs)
        versions[f"eeg_evaluation/{model}"] = _v(
            "eeg_evaluation",
            config["evaluation"],
            {"eeg_encoding": versions[f"eeg_encoding/{model}"]},
        )
    if _trf_enabled(config):
        for model in config["encoding"]["models"]:
            section = eeg_trf_config(config, model)
            inputs = _feature_inputs(versions, section, "preprocess_eeg")
            versions[f"eeg_trf/{model}"] = _v("eeg_trf", section, inputs)

    if config["single_trial"]["enabled"]:
        for model in config["encoding"]["models"]:
            section = trial_encoding_config(config, model)
            inputs = _feature_inputs(versions, section, "single_trial")
            versions[f"trial_encoding/{model}"] = _v("trial_encoding", section, inputs)
            versions[f"trial_evaluation/{model}"] = _v(
                "trial_evaluation",
                config["evaluation"],
                {"trial_encoding": versions[f"trial_encoding/{model}"]},
            )

    feature_versions = {k: v for k, v in versions.items() if k.startswith("features/")}
    versions["decoding"] = _v(
        "decoding",
        config["decoding"],
        {"preprocess_eeg": versions["preprocess_eeg"], **feature_versions},
    )
    versions["rsa/eeg"] = _v(
        "rsa", config["rsa"], {"preprocess_eeg": versions["preprocess_eeg"], **feature_versions}
    )
    versions["rsa/fmri"] = _v(
        "rsa", config["rsa"], {"preprocess_fmri": versions["preprocess_fmri"], **feature_versions}
    )
    evaluation_inputs = {
        k: v
        for k, v in versions.items()
        if k.startswith(("evaluation/", "trial_evaluation/", "eeg_trf/", "rsa/")) or k == "decoding"
    }
    versions["summary"] = _v("summary", config["evaluation"], evaluation_inputs)
    return versions


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
    return {**shared, **encoding["models"][model], "name": model}


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
    return _model_section(config, model, _TRIAL_ONLY_KEYS)


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


def eeg_encoding_config(config: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Settings of one EEG encoding model: ``eeg_encoding`` plus the model's spaces.

    Parameters
    ----------
    config : dict
        The whole validated config.
    model : str
        A key of ``encoding.models`` (EEG models share the fMRI models' names).

    Returns
    -------
    section : dict
        What the EEG encoding stage (epochs) receives for this model: every
        ``eeg_encoding`` key but ``enabled`` and the ``trf`` block, so TRF settings
        rerun no epochs model.
    """
    entry = encoding_config(config, model)
    shared = {k: v for k, v in config["eeg_encoding"].items() if k not in ("enabled", "trf")}
    return {**shared, "name": model, "feature_spaces": list(entry["feature_spaces"])}


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
        What :func:`neuroflow.encoding.eeg.fit_trf` reads: the model's name and
        feature spaces, the shared solver settings (penalties, scoring,
        standardisation, device, dtype, batch size) and the ``trf`` block without
        its ``enabled`` switch. The epochs-only keys (``cv``, ``test``, ``tmin``,
        ``tmax``, ``decim``) are left out, so changing them reruns no TRF.
    """
    entry = encoding_config(config, model)
    eeg = config["eeg_encoding"]
    shared = {k: eeg[k] for k in _TRF_KEYS if k in eeg}
    trf = {k: v for k, v in (eeg.get("trf") or {}).items() if k != "enabled"}
    return {**shared, "trf": trf, "name": model, "feature_spaces": list(entry["feature_spaces"])}


def _trf_enabled(config: Mapping[str, Any]) -> bool:
    """Whether the config asks for TRF models (both switches on)."""
    eeg = config["eeg_encoding"]
    return bool(eeg.get("enabled", True) and (eeg.get("trf") or {}).get("enabled", False))


def _uses_training_split(entry: Mapping[str, Any]) -> bool:
    """Whether an extractor fits anything on training stimuli (e.g. PCA)."""
    reduction = entry.get("reduction") or {}
    if isinstance(reduction, Mapping):
        return str(reduction.get("method", "none")).lower() == "pca"
    return str(reduction).lower() == "pca"

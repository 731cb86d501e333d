"""Defaults and checks of a feature-extraction configuration entry.

The ``features`` section of the workflow configuration holds a list of
extractor entries (``features.extractors``) and the alignment settings
(``features.alignment``). :func:`extract_features` receives one entry and
:func:`align_features` the alignment settings; both fill missing keys from the
defaults below, which mirror ``workflow/schemas/features.schema.yaml``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from neuroflow.config import merge_defaults
from neuroflow.features.events import DEFAULT_EVENTS, events_spec
from neuroflow.features.layers import layer_spec
from neuroflow.features.registry import MODALITIES, check_modality, get_extractor
from neuroflow.models.delays import SHIFTED_HRF_MODELS

__all__ = [
    "DEFAULT_ALIGNMENT",
    "DEFAULT_ENTRY",
    "HRF_MODEL_NAMES",
    "SHIFTED_HRF_MODELS",
    "fill_alignment",
    "fill_entry",
    "hrf_models",
    "layer_name",
    "layer_names",
]

#: Default extractor entry (the packaged offline MiniLM on the captions).
DEFAULT_ENTRY: dict[str, Any] = {
    "name": "minilm",
    "extractor": "sentence_transformer",
    "modality": "auto",
    "model": "all-MiniLM-L6-v2",
    "weights": "pretrained",
    "seed": 0,
    "model_config": {},
    "tokenizer": None,
    "builder": None,
    "builder_kwargs": {},
    "weights_file": None,
    "torchscript": None,
    "layers": None,
    "pooling": "mean",
    "normalize": True,
    "batch_size": 16,
    "device": "auto",
    "dtype": "auto",
    "max_length": 256,
    "context_words": 0,
    "text_source": "captions",
    "transcript_column": "word",
    "frames_per_video": 8,
    "frame_rate": None,
    "clip_frames": None,
    "window_s": 2.0,
    "transforms": {"resize": None, "center_crop": None, "blur_sigma": 0.0},
    "input": {"resize": None, "center_crop": None, "mean": None, "std": None},
    "gabor": {
        "size": [64, 64],
        "spatial_frequencies": [0, 2, 4, 8],
        "directions": [0, 45, 90, 135, 180, 225, 270, 315],
        "temporal_frequencies": [0, 2, 4],
        "fps": 24,
    },
    "audio": {"sampling_rate": 16000, "n_mels": 64, "window_s": 0.025, "hop_s": 0.01},
    "events": copy.deepcopy(DEFAULT_EVENTS),
    "storage_dtype": "float32",
    "reduction": {"method": "none", "n_components": 64, "seed": 0},
}


#: HRF models of ``features.alignment.hrf_model`` (the keys of
#: :data:`neuroflow.preprocessing.fmri.single_trial.HRF_MODELS`, named here so that
#: validating a config does not import nilearn's GLM, and of :data:`SHIFTED_HRF_MODELS`).
HRF_MODEL_NAMES = (
    "glover",
    "glover + derivative",
    "glover + derivative + dispersion",
    "spm",
    "spm + derivative",
    "spm + derivative + dispersion",
    *SHIFTED_HRF_MODELS,
)

#: Default alignment settings.
DEFAULT_ALIGNMENT: dict[str, Any] = {
    "method": "average",
    "aggregation": "mean",
    "delays": [0],
    "tr_reference": "start",
    "lanczos_window": 3,
    "hrf_model": "glover",
    "oversampling": 50,
    "slice_time_ref": 0.0,
    "event_regressor": False,
    "missing": "error",
}

_CHOICES = {
    "weights": ("pretrained", "random"),
    "pooling": ("cls", "mean", "patch_mean", "last"),
    "device": ("auto", "cpu", "cuda", "mps"),
    "dtype": ("auto", "float32", "float16", "bfloat16"),
    "storage_dtype": ("float32", "float16"),
    "text_source": ("captions", "transcript"),
}


def layer_name(spec: str | Mapping[str, int | float]) -> str:
    """Deterministic name of a layer specification, used in output paths.

    Parameters
    ----------
    spec : dict | str
        ``{"index": i}`` (block index; 0 is the embedding output, negative
        counts from the end), ``{"depth": f}`` (fraction of depth in [0, 1]) or
        a named layer (str). Bare numbers are refused (see
        :func:`neuroflow.features.layers.layer_spec`).

    Returns
    -------
    name : str
        ``"layer-<i>"`` (``"layer-minus<k>"`` for negative indices),
        ``"depth-<f>"`` for fractions (``{depth: 1}`` and ``{depth: 1.0}`` are
        both ``"depth-1"``), or the string itself.
    """
    kind, value = layer_spec(spec)
    if kind == "index":
        return f"layer-{value}" if int(value) >= 0 else f"layer-minus{-int(value)}"
    if kind == "depth":
        return f"depth-{value:g}"
    return str(value)


def layer_names(config: Mapping[str, Any]) -> list[str]:
    """Names of the stores an entry produces, known before any model is loaded.

    Parameters
    ----------
    config : dict
        One extractor entry.

    Returns
    -------
    names : list of str
        One name per entry of ``layers`` (see :func:`layer_name`), or the names
        the extractor derives from its model's structure (``torch_module``:
        module names, globs, ``"all"``; see
        :meth:`neuroflow.features.registry.Extractor.planned_layer_names`).
    """
    entry = fill_entry(config)
    planned = get_extractor(entry["extractor"]).cls.planned_layer_names(entry)
    return planned if planned is not None else [layer_name(spec) for spec in entry["layers"]]


def fill_entry(config: Mapping[str, Any]) -> dict[str, Any]:
    """Fill an extractor entry's missing keys with defaults and check it.

    Parameters
    ----------
    config : dict
        One extractor entry (possibly partial). It may carry ``trust``, the
        workflow's ``features.code_dirs`` and ``features.trusted_packages``
        (see :func:`neuroflow.features.trust.builder_trust`), which the
        workflow plan adds and a ``torch_module`` builder is checked against
        when the extraction job imports it; it is kept as given.

    Returns
    -------
    entry : dict
        A complete copy.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"`config` must be a dict, got {type(config).__name__} instead.")
    trust = config.get("trust")
    entry = merge_defaults(
        DEFAULT_ENTRY,
        {key: value for key, value in config.items() if key != "trust"},
        "features.extractors[]",
        opaque=("model_config", "levels", "builder_kwargs"),
    )
    if trust is not None:
        entry["trust"] = _trust(trust)
    for key, choices in _CHOICES.items():
        if entry[key] not in choices:
            raise ValueError(f"`{key}` must be one of {choices}, got {entry[key]!r} instead.")
    info = get_extractor(entry["extractor"])
    modality = entry["modality"]
    if modality != "auto":
        if modality not in MODALITIES:
            raise ValueError(
                f"`modality` must be 'auto' or one of {MODALITIES}, got {modality!r} instead."
            )
        check_modality(info.name, modality, source="set in the configuration")
    info.cls.check_entry(entry)
    if entry["layers"] is None:
        entry["layers"] = copy.deepcopy(list(info.cls.default_layers))
    fixed = info.cls.fixed_layers
    if fixed and list(entry["layers"]) != list(fixed):
        raise ValueError(
            f"`layers` of {info.name!r} must be {list(fixed)} (or left unset), got "
            f"{entry['layers']!r} instead."
        )
    layers = entry["layers"]
    if not isinstance(layers, list | tuple) or not layers:
        raise ValueError(f"`layers` must be a non-empty list, got {layers!r} instead.")
    names = [layer_name(spec) for spec in layers]
    if len(set(names)) != len(names):
        raise ValueError(f"`layers` must name each layer once, got {list(layers)} instead.")
    if not isinstance(entry["batch_size"], int) or entry["batch_size"] < 1:
        raise ValueError(
            f"`batch_size` must be a positive int, got {entry['batch_size']!r} instead."
        )
    if not isinstance(entry["context_words"], int) or entry["context_words"] < 0:
        raise ValueError(
            f"`context_words` must be a non-negative int, got {entry['context_words']!r} instead."
        )
    rate = entry["frame_rate"]
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0
    ):
        raise ValueError(
            f"`frame_rate` must be a positive number of Hz or None, got {rate!r} instead."
        )
    _check_window(entry)
    column = entry["transcript_column"]
    if not isinstance(column, str) or not column.strip():
        raise ValueError(f"`transcript_column` must be a non-empty str, got {column!r} instead.")
    if entry["text_source"] == "transcript":
        if rate is not None:
            raise ValueError(
                f"`frame_rate` must be None with `text_source: transcript`, got {rate!r} instead."
            )
        if entry["modality"] not in ("auto", "text"):
            raise ValueError(
                "`modality` must be 'auto' or 'text' with `text_source: transcript`, got "
                f"{entry['modality']!r} instead."
            )
        check_modality(info.name, "text", source="`text_source: transcript` gives text")
    windowed_audio = entry["modality"] == "audio" and "audio" in info.cls.window_modalities
    if rate is not None and entry["modality"] not in ("auto", "video") and not windowed_audio:
        raise ValueError(
            "`frame_rate` applies to video stimuli (and to audio stimuli for extractors that read "
            "windows of sound, e.g. hf_audio); `modality` must be 'auto' or 'video' with it, got "
            f"{entry['modality']!r} instead."
        )
    method = entry["reduction"]["method"]
    if method not in ("none", "pca", "random_projection"):
        raise ValueError(
            "`reduction.method` must be one of ('none', 'pca', 'random_projection'), got "
            f"{method!r} instead."
        )
    n_comp = entry["reduction"]["n_components"]
    if not isinstance(n_comp, int) or n_comp < 1:
        raise ValueError(
            f"`reduction.n_components` must be a positive int, got {n_comp!r} instead."
        )
    entry["events"] = events_spec(entry["events"])
    if getattr(info.cls, "reads_events", False):
        _check_events_entry(entry)
    if (
        entry["weights"] == "random"
        and entry["builder"] is None
        and not entry["model_config"]
        and not entry["model"]
    ):
        raise ValueError(
            "`weights: random` needs `model_config` (a dict with `model_type`) or `model` "
            "(a folder with config.json), got neither."
        )
    return entry


def _trust(value: Any) -> dict[str, list[str]]:
    """A copy of an entry's ``trust`` (``code_dirs`` and ``trusted_packages``), checked."""
    keys = ("code_dirs", "trusted_packages")
    if not isinstance(value, Mapping) or set(value) - set(keys):
        raise ValueError(
            f"`trust` must be a dict with keys {keys} (lists of str), got {value!r} instead."
        )
    out = {}
    for key in keys:
        items = value.get(key, [])
        if not isinstance(items, list | tuple) or not all(isinstance(v, str) for v in items):
            raise ValueError(f"`trust.{key}` must be a list of str, got {items!r} instead.")
        out[key] = list(items)
    return out


def _check_window(entry: Mapping[str, Any]) -> None:
    """Check ``clip_frames`` and ``window_s`` (windowed rows of hf_video and hf_audio)."""
    frames = entry["clip_frames"]
    bad_frames = isinstance(frames, bool) or not isinstance(frames, int) or frames < 1
    if frames is not None and bad_frames:
        raise ValueError(
            f"`clip_frames` must be a positive int (frames per window) or None (the model's own "
            f"clip length), got {frames!r} instead."
        )
    window = entry["window_s"]
    if (
        isinstance(window, bool)
        or not isinstance(window, int | float)
        or not 0 < float(window) < float("inf")
    ):
        raise ValueError(
            f"`window_s` must be a positive number of seconds, got {window!r} instead."
        )


def _check_events_entry(entry: Mapping[str, Any]) -> None:
    """Settings an ``extractor: events`` entry needs (it reads events tables, not files)."""
    spec = entry["events"]
    if not spec["categorical"] and not spec["numeric"]:
        raise ValueError(
            "`events.categorical` or `events.numeric` must name at least one events.tsv column "
            f"with `extractor: {entry['extractor']}`, got neither (entry {entry['name']!r})."
        )
    if entry["reduction"]["method"] != "none":
        raise ValueError(
            f"`reduction.method` must be 'none' with `extractor: {entry['extractor']}` (each "
            "feature is a named condition or modulator), got "
            f"{entry['reduction']['method']!r} instead."
        )
    if entry["frame_rate"] is not None or entry["text_source"] != "captions":
        raise ValueError(
            f"`frame_rate` must be None and `text_source` 'captions' with `extractor: "
            f"{entry['extractor']}`, got {entry['frame_rate']!r} and {entry['text_source']!r} "
            "instead."
        )


def hrf_models(value: Any) -> list[str]:
    """The HRF models of ``features.alignment.hrf_model`` as a list.

    Parameters
    ----------
    value : str | list of str
        One model of :data:`HRF_MODEL_NAMES`, or a list of distinct ones: a library of
        alternatives from which the encoder picks one per voxel by cross-validation.

    Returns
    -------
    models : list of str
        ``[value]`` for one model, else a copy of the list.
    """
    models = [value] if isinstance(value, str) else value
    if (
        not isinstance(models, list | tuple)
        or not models
        or len(set(map(str, models))) != len(models)
        or any(m not in HRF_MODEL_NAMES for m in models)
    ):
        raise ValueError(
            f"`hrf_model` must be one of {HRF_MODEL_NAMES} or a non-empty list of distinct "
            f"ones, got {value!r} instead."
        )
    return list(models)


def fill_alignment(config: Mapping[str, Any]) -> dict[str, Any]:
    """Fill the alignment settings' missing keys with defaults and check them.

    Parameters
    ----------
    config : dict
        The ``features.alignment`` section (possibly partial).

    Returns
    -------
    alignment : dict
        A complete copy.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"`config` must be a dict, got {type(config).__name__} instead.")
    cfg = merge_defaults(DEFAULT_ALIGNMENT, config, "features.alignment")
    choices = {
        "method": ("average", "lanczos", "hrf"),
        "aggregation": ("mean", "sum"),
        "tr_reference": ("start", "center"),
        "missing": ("error", "skip"),
    }
    for key, allowed in choices.items():
        if cfg[key] not in allowed:
            raise ValueError(f"`{key}` must be one of {allowed}, got {cfg[key]!r} instead.")
    hrf_models(cfg["hrf_model"])
    delays = cfg["delays"]
    if (
        not isinstance(delays, list | tuple)
        or not delays
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in delays)
        or len(set(delays)) != len(delays)
    ):
        raise ValueError(
            f"`delays` must be a non-empty list of distinct ints (TR lags), got {delays!r} instead."
        )
    if not isinstance(cfg["lanczos_window"], int) or cfg["lanczos_window"] < 1:
        raise ValueError(
            f"`lanczos_window` must be a positive int, got {cfg['lanczos_window']!r} instead."
        )
    oversampling = cfg["oversampling"]
    if isinstance(oversampling, bool) or not isinstance(oversampling, int) or oversampling < 1:
        raise ValueError(f"`oversampling` must be a positive int, got {oversampling!r} instead.")
    if not isinstance(cfg["event_regressor"], bool):
        raise ValueError(
            f"`event_regressor` must be a bool, got {cfg['event_regressor']!r} instead."
        )
    ref = cfg["slice_time_ref"]
    if isinstance(ref, bool) or not isinstance(ref, int | float) or not 0.0 <= ref <= 1.0:
        raise ValueError(f"`slice_time_ref` must be a number in [0, 1], got {ref!r} instead.")
    return cfg

"""Options of the multimodal transformer encoder, checked without importing torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_OPTIONS", "resolve_options"]

#: Options of a transformer encoding model (``encoding.models.<name>.transformer``).
DEFAULT_OPTIONS: dict[str, Any] = {
    "hidden": 128,
    "n_layers": 2,
    "n_heads": 4,
    "window_trs": 12,
    "window": "causal",
    "combine": "concat",
    "heads": "per_subject",
    "dropout": 0.1,
    "modality_dropout": 0.2,
    "loss": "mse",
    "lr": 2e-3,
    "weight_decay": 0.01,
    "epochs": 60,
    "patience": 10,
    "batch_size": 64,
    "validation_runs": 1,
    "refit": True,
    "seeds": [0, 1],
    "device": "auto",
    "mixed_precision": True,
    "deterministic": True,
}

_CHOICES = {
    "window": ("causal", "centred"),
    "combine": ("concat", "sum"),
    "heads": ("per_subject", "subject_embedding"),
    "loss": ("mse", "pearson"),
}


def resolve_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_OPTIONS` updated with ``options``, checked.

    Parameters
    ----------
    options : dict | None
        Any subset of :data:`DEFAULT_OPTIONS`.

    Returns
    -------
    options : dict
        Every option, validated.
    """
    from neuroflow.config.validation import merge_defaults

    out = merge_defaults(DEFAULT_OPTIONS, dict(options or {}), "transformer")
    for key, allowed in _CHOICES.items():
        if out[key] not in allowed:
            raise ValueError(
                f"`transformer.{key}` must be one of {list(allowed)}, got {out[key]!r} instead."
            )
    for key in ("hidden", "n_layers", "n_heads", "window_trs", "epochs", "batch_size"):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`transformer.{key}` must be an int >= 1, got {value!r} instead.")
    if out["hidden"] % out["n_heads"]:
        raise ValueError(
            f"`transformer.hidden` must be a multiple of `n_heads` ({out['n_heads']}), got "
            f"{out['hidden']} instead."
        )
    for key in ("dropout", "modality_dropout"):
        if not 0.0 <= float(out[key]) < 1.0:
            raise ValueError(f"`transformer.{key}` must be in [0, 1), got {out[key]!r} instead.")
    seeds = out["seeds"]
    if (
        not isinstance(seeds, list | tuple)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ValueError(
            f"`transformer.seeds` must be a non-empty list of distinct ints, got {seeds!r} instead."
        )
    out["seeds"] = [int(s) for s in seeds]
    return out

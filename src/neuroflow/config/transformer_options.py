"""Options of the multimodal transformer encoder, checked without importing torch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_OPTIONS", "check_window", "resolve_options", "validation_note"]

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


def check_window(model: str, options: Mapping[str, Any], run_lengths: Mapping[str, int]) -> None:
    """Refuse a window longer than every run the model is trained and tested on.

    Parameters
    ----------
    model : str
        The model's name (``encoding.models.<model>``).
    options : dict
        Its resolved options (:func:`resolve_options`).
    run_lengths : dict of str to int
        Run key -> number of volumes, for every run of the model's subjects.

    Raises
    ------
    ValueError
        Naming the value, the longest run and its length.
    """
    if not run_lengths:
        return
    key, longest = max(run_lengths.items(), key=lambda item: (item[1], item[0]))
    window = int(options["window_trs"])
    if window > longest:
        raise ValueError(
            f"`encoding.models.{model}.transformer.window_trs` must be at most the length of "
            f"the longest run, {longest} volumes ({key}), got {window} instead: no window "
            "would fit in any run, so the model would learn positions that never hold data. "
            f"Set a window of at most {longest} TRs."
        )


def validation_note(
    model: str, options: Mapping[str, Any], training_runs: Mapping[str, int]
) -> str | None:
    """A plan note when ``validation_runs`` leaves subjects without a validation run.

    A subject is validated (its last ``validation_runs`` training runs stop training
    early) only when it has more training runs than that.

    Parameters
    ----------
    model : str
        The model's name.
    options : dict
        Its resolved options (:func:`resolve_options`).
    training_runs : dict of str to int
        Subject -> number of training runs (held-out test runs excluded).

    Returns
    -------
    note : str | None
        One line for the plan's notes, or ``None`` when every subject is validated.
    """
    n_val = int(options["validation_runs"])
    without = sorted(s for s, n in training_runs.items() if not (n_val and n > n_val))
    if not without:
        return None
    key = f"`encoding.models.{model}.transformer.validation_runs`"
    if len(without) < len(training_runs):
        subjects = ", ".join(f"sub-{s} ({training_runs[s]})" for s in without)
        return (
            f"encoding/{model}: {key} is {n_val}, which leaves {subjects} without a "
            "validation run (a subject needs more training runs than that): their "
            "validation scores are NaN and only the other subjects stop training early."
        )
    most = max(training_runs.values(), default=0)
    why = (
        f"{key} is 0"
        if not n_val
        else f"{key} is {n_val} but every subject has at most {most} training run(s) (a "
        f"subject needs more than {n_val})"
    )
    refit = " and is not refitted" if options.get("refit") else ""
    return (
        f"encoding/{model}: no validation run: {why}, so the model trains all "
        f"{options['epochs']} epochs without early stopping{refit}, and its validation "
        "scores are NaN."
    )

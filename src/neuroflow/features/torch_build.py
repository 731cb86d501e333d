"""Building the model of a ``torch_module`` entry: a trusted ``builder`` callable with
its weights (a state dict, checked against the model's keys), an exported program
(``.pt2``, read with ``torch.export.load``) or a TorchScript file (read with a warning
saying how to re-save it as ``.pt2``), or a packaged preset's builder and weights.
:class:`neuroflow.features.torch_module.TorchModuleExtractor` reads its layers.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import lazy_loader

from neuroflow.extras import install_hint
from neuroflow.features.hf import hash_state_dict
from neuroflow.features.presets import preset_packages
from neuroflow.features.trust import import_trusted_builder
from neuroflow.stimuli.files import file_sha256

torch = lazy_loader.load("torch")

__all__ = ["build_module", "import_builder"]

logger = logging.getLogger(__name__)

_WEIGHTS_HINT = (
    "Save the weights with `torch.save(model.state_dict(), path)` and set `weights_file` to "
    "that path, or set `weights: random` for a seeded random initialisation."
)


_EXPORT_SAVE = "`torch.export.save(torch.export.export(model.eval(), (example,)), 'model.pt2')`"


_TORCHSCRIPT_HINT = f"Save the model with {_EXPORT_SAVE} and set `torchscript` to that path."


_EXPORT_SUFFIX = ".pt2"


def import_builder(
    spec: str, trust: Mapping[str, Any] | None = None, *, entry: str = ""
) -> Callable[..., Any]:
    """The function a ``builder`` string names, imported once its place is trusted.

    Parameters
    ----------
    spec : str
        ``"package.module:function"``; the part after the colon may be a dotted
        attribute path (``"package.module:Class.from_name"``).
    trust : dict | None
        ``code_dirs`` and ``trusted_packages`` (see
        :func:`neuroflow.features.trust.builder_trust`); None trusts nothing.
    entry : str
        The entry's name, for messages.

    Returns
    -------
    builder : callable
        The imported function.
    """
    return import_trusted_builder(spec, trust, entry=entry)[0]


def _existing_file(value: Any, key: str, hint: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{key}` must be a file path, got {value!r} instead.")
    path = Path(value).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"`{key}` file {value!r} does not exist (looked at {path.resolve()}; relative paths "
            f"are read from the working folder {Path.cwd()}). {hint}"
        )
    return path.resolve()


def _read_state_dict(path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise ValueError(
            f"`weights_file` {path} must hold a state dict saved with "
            f"`torch.save(model.state_dict(), path)`, got a file torch.load cannot read with "
            f"weights_only=True ({err})."
        ) from err
    for key in ("state_dict", "model"):
        if isinstance(state, Mapping) and isinstance(state.get(key), Mapping):
            state = state[key]
            break
    if not isinstance(state, Mapping) or not state:
        raise ValueError(
            f"`weights_file` {path} must hold a state dict (parameter name to tensor, possibly "
            f"under a 'state_dict' or 'model' key), got {type(state).__name__} instead."
        )
    state = dict(state)
    if all(str(k).startswith("module.") for k in state):  # saved from DataParallel
        state = {str(k).removeprefix("module."): v for k, v in state.items()}
    return state


def _load_weights(model: torch.nn.Module, path: Path, builder: str) -> None:
    state = _read_state_dict(path)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        raise ValueError(
            f"`weights_file` {path} does not fit the module built by {builder!r}: {err}"
        ) from err
    if missing or unexpected:
        raise ValueError(
            f"`weights_file` {path} does not fit the module built by {builder!r}: missing keys "
            f"{list(missing)[:5]}, unexpected keys {list(unexpected)[:5]} (first five of "
            f"{len(missing)} and {len(unexpected)})."
        )


def _call_builder(entry: Mapping[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Build an entry's module; also the builder's module file and its SHA-256."""
    spec = entry["builder"]
    try:
        builder, origin = import_trusted_builder(
            spec,
            entry.get("trust"),
            entry=str(entry["name"]),
            extra_packages=preset_packages(entry),
        )
    except ValueError as err:
        hint = install_hint(spec.partition(":")[0].split(".")[0])
        raise ValueError(f"{err} {hint}".rstrip()) from err
    digest = file_sha256(origin.file)
    logger.info(
        "torch_module %r: calling builder %s from %s (sha256 %s, allowed by %s %s)",
        entry["name"],
        spec,
        origin.file,
        digest,
        origin.source,
        origin.where,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(entry["seed"]))
        model = builder(**dict(entry["builder_kwargs"]))
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"`builder` {spec!r} must return a torch.nn.Module, got {type(model).__name__} instead."
        )
    return model, {"builder_file": str(origin.file), "builder_sha256": digest}


def _load_program(path: Path, name: str) -> torch.nn.Module:
    """A ``torch.export`` program (``.pt2``) or a TorchScript file of entry ``name``, on the CPU."""
    if path.suffix == _EXPORT_SUFFIX:
        return torch.export.load(str(path)).module()
    # TorchScript has no loader outside torch.jit, which torch deprecates as a whole:
    # existing files keep loading, with a warning (kept in the store and the summary's
    # warnings) telling how to re-save the model for torch.export.load.
    logger.warning(
        "torch_module %r: `torchscript` %s is a TorchScript file, a format torch deprecates "
        "(a later torch may not read it); re-save the model with %s and set `torchscript` "
        "to the .pt2 file.",
        name,
        path,
        _EXPORT_SAVE,
    )
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"`torch\.jit\.load` is", category=DeprecationWarning
        )
        return torch.jit.load(str(path), map_location="cpu")


def build_module(entry: Mapping[str, Any]) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Build the model of a ``torch_module`` entry on the CPU, weights loaded.

    Parameters
    ----------
    entry : dict
        The entry, defaults and preset filled in (see
        :func:`neuroflow.features.config.fill_entry`).

    Returns
    -------
    model : torch.nn.Module
        In training mode, as built (an exported program as saved).
    source : dict
        ``weights_sha256`` (of the program file, of the weights file, or of
        the built module's state dict when neither), ``weights_source``
        (``"torchscript"``, ``"weights_file"`` or ``"state_dict"``), ``path``
        (the file read, or None), ``builder_file`` and ``builder_sha256`` (the
        builder's module file and its SHA-256; None for a program file) and
        ``exported`` (whether the model is a ``torch.export`` program).
    """
    if entry["torchscript"] is not None:
        path = _existing_file(entry["torchscript"], "torchscript", _TORCHSCRIPT_HINT)
        digest = file_sha256(path)
        logger.info("torch_module %r: loading %s (sha256 %s)", entry["name"], path, digest)
        try:
            model = _load_program(path, entry["name"])
        except Exception as err:
            kind = "an exported program" if path.suffix == _EXPORT_SUFFIX else "a TorchScript file"
            raise ValueError(
                f"`torchscript` {path} cannot be read as {kind} ({err}). {_TORCHSCRIPT_HINT}"
            ) from err
        source = {"weights_sha256": digest, "weights_source": "torchscript", "path": str(path)}
        builder = {"builder_file": None, "builder_sha256": None}
        return model, {**source, **builder, "exported": path.suffix == _EXPORT_SUFFIX}
    model, builder = _call_builder(entry)
    if entry["weights"] == "pretrained" and entry["weights_file"] is not None:
        path = _existing_file(entry["weights_file"], "weights_file", _WEIGHTS_HINT)
        _load_weights(model, path, entry["builder"])
        source = {"weights_sha256": file_sha256(path), "weights_source": "weights_file"}
        return model, {**source, "path": str(path), **builder, "exported": False}
    source = {"weights_sha256": hash_state_dict(model), "weights_source": "state_dict"}
    return model, {**source, "path": None, **builder, "exported": False}

"""The shipped default models, and what happens to them when a config drops their features.

Snakemake merges a user's ``--configfile`` into ``config/config.yaml`` key by key, so the
default ``encoding.models`` (the demo's ``visual``, ``semantic``, ``joint`` and the
``efficientnet`` layer sweep) stay in every run, while a user's ``features.extractors``
list replaces the default extractors. A default model whose extractor the user's list no
longer has is then left out of the run with a note (:func:`drop_orphan_defaults`),
instead of failing the run; a model the user wrote (or changed) that names a missing
extractor is still a configuration error, with a "did you mean" hint.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_CONFIG",
    "REPOSITORY",
    "SCHEMA",
    "default_config",
    "drop_orphan_defaults",
    "shipped_encoding_models",
    "workflow_root",
]

#: The installed package folder (``src/neuroflow`` of a clone, or in site-packages).
PACKAGE = Path(__file__).resolve().parents[1]
#: Where a wheel carries the workflow (Snakefile, rules, scripts, config, workflow/).
PACKAGED_WORKFLOW = PACKAGE / "_workflow"
#: The default config, relative to the folder that holds the Snakefile (and to the
#: working folder, where the Snakefile's ``configfile:`` reads it).
DEFAULT_CONFIG = Path("config") / "config.yaml"


def _find_workflow_root() -> Path | None:
    """The folder with the Snakefile: the clone of an editable install, else the wheel's copy."""
    clone = PACKAGE.parents[1]
    if PACKAGE.parent.name == "src" and all(
        (clone / name).is_file() for name in ("Snakefile", "pyproject.toml")
    ):
        return clone
    if (PACKAGED_WORKFLOW / "Snakefile").is_file():
        return PACKAGED_WORKFLOW
    return None


#: The folder that holds the Snakefile, rules/, scripts/, config/ and workflow/: the
#: clone for an editable install (``pip install -e .``), the packaged copy
#: ``neuroflow/_workflow`` for a wheel. Where neither exists, the packaged path (missing;
#: :func:`workflow_root` then says how to fix the install).
REPOSITORY = _find_workflow_root() or PACKAGED_WORKFLOW
#: The config schema of that workflow.
SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"


def workflow_root() -> Path:
    """The folder that holds the workflow's Snakefile.

    Returns
    -------
    root : Path
        The clone of an editable install, or ``neuroflow/_workflow`` inside an installed
        wheel; either has ``Snakefile``, ``rules/``, ``scripts/``, ``config/`` and
        ``workflow/`` (schemas, profiles, report captions).

    Raises
    ------
    FileNotFoundError
        When the install has no workflow tree (e.g. a package copied without it).
    """
    if not (REPOSITORY / "Snakefile").is_file():
        raise FileNotFoundError(
            "The neuroflow workflow (Snakefile, rules/, scripts/, config/, workflow/) must "
            f"be installed with the package, got no Snakefile in {PACKAGED_WORKFLOW} nor in "
            f"a clone around {PACKAGE} instead. Reinstall neuroflow from a wheel or source "
            "distribution (`pip install --force-reinstall neuroflow`), or install a clone "
            "with `pip install -e <clone>`."
        )
    return REPOSITORY


def default_config(cwd: str | os.PathLike | None = None) -> Path:
    """The config a run starts from, before any ``--configfile``.

    Parameters
    ----------
    cwd : path-like | None
        The working folder of the run (default: the current one).

    Returns
    -------
    config : Path
        ``config/config.yaml`` of the working folder when it has one (the Snakefile's
        ``configfile:`` reads it, as ``snakemake`` run in a clone does), else the default
        config shipped with the workflow (:func:`workflow_root`). Relative to the working
        folder in the first case, absolute in the second.

    Raises
    ------
    FileNotFoundError
        When neither exists.
    """
    local = DEFAULT_CONFIG if cwd is None else Path(cwd) / DEFAULT_CONFIG
    if local.is_file():
        return local
    return workflow_root() / DEFAULT_CONFIG


@functools.cache
def shipped_encoding_models() -> dict[str, Any]:
    """``encoding.models`` as the schema's defaults (= ``config/config.yaml``) ship them.

    Returns
    -------
    models : dict
        Model name -> entry with every default filled in; empty when the schema is not
        next to the package (then no model counts as a shipped default).
    """
    from neuroflow.config import fill_defaults, load_schema

    if not SCHEMA.is_file():
        return {}
    schema = load_schema(SCHEMA)
    models = fill_defaults({}, schema)["encoding"]["models"]
    entry_schema = schema["properties"]["encoding"]["properties"]["models"]
    return {
        name: fill_defaults(entry, entry_schema["additionalProperties"])
        for name, entry in models.items()
    }


def drop_orphan_defaults(
    config: Mapping[str, Any], shipped: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Leave out the shipped default models whose extractors the config does not have.

    Parameters
    ----------
    config : dict
        The whole validated config.
    shipped : dict | None
        The shipped ``encoding.models`` (default :func:`shipped_encoding_models`).

    Returns
    -------
    config : dict
        ``config`` itself when nothing is left out, else a copy without those models.
    notes : list of str
        One line per model left out.
    """
    shipped = shipped_encoding_models() if shipped is None else shipped
    configured = {entry["name"] for entry in config["features"]["extractors"]}
    orphans, notes = [], []
    for name, entry in config["encoding"]["models"].items():
        missing = sorted({str(s).partition(":")[0] for s in entry["feature_spaces"]} - configured)
        if missing and name in shipped and dict(entry) == dict(shipped[name]):
            orphans.append(name)
            notes.append(
                f"encoding/{name}: the default model is left out, its extractor(s) {missing} "
                "are not in `features.extractors`"
            )
    if not orphans:
        return dict(config), []
    out = copy.deepcopy(dict(config))
    out["encoding"]["models"] = {
        k: v for k, v in out["encoding"]["models"].items() if k not in orphans
    }
    return out, notes

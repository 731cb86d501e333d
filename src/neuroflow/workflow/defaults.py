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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["REPOSITORY", "SCHEMA", "drop_orphan_defaults", "shipped_encoding_models"]

#: The repository this package runs from (an editable install of a clone).
REPOSITORY = Path(__file__).resolve().parents[3]
#: The config schema of that repository.
SCHEMA = REPOSITORY / "workflow" / "schemas" / "config.schema.yaml"


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

"""Validate a workflow configuration against the JSON Schema.

The schema lives in ``workflow/schemas/config.schema.yaml`` and references one
file per section (``$ref: demo.schema.yaml``). :func:`load_schema` inlines
those references; :func:`validate_config` fills defaults and reports the first
problems with the key path, what was expected and what was given, suggesting
the closest valid key for a misspelt one.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml

__all__ = [
    "ConfigError",
    "coerce_overrides",
    "deep_update",
    "fill_defaults",
    "load_config",
    "load_schema",
    "sorted_config",
    "validate_config",
]

_JSON_TYPES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true/false)",
    "null": "null",
}


class ConfigError(ValueError):
    """Raised when a configuration does not match the schema."""


def _inline_local_refs(node: Any, document: Mapping[str, Any], depth: int = 0) -> Any:
    """Replace ``#/...`` references by the part of ``document`` they point to."""
    if depth > 50:
        raise ConfigError("Schema references nest too deeply (a cycle?).")
    if isinstance(node, list):
        return [_inline_local_refs(item, document, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = document
        for part in ref[2:].split("/"):
            target = target[part]
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _inline_local_refs(merged, document, depth + 1)
    return {key: _inline_local_refs(value, document, depth) for key, value in node.items()}


#: libyaml's safe loader when PyYAML was built with it (the schema's files load ~8x faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: A file's path, modification time (ns) and size.
_Stamp = tuple[Path, int, int]


def _read_yaml(path: Path) -> Any:
    """A YAML file of the schema, read with the safe loader."""
    return yaml.load(path.read_text(), Loader=_SAFE_LOADER)


def _resolve_refs(
    node: Any, base: Path, seen: tuple[Path, ...] = (), read: list[_Stamp] | None = None
) -> Any:
    """Inline ``$ref`` entries that point at sibling YAML files (each file's stamp,
    taken before it is read, appended to ``read``)."""
    if isinstance(node, list):
        return [_resolve_refs(item, base, seen, read) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        target = (base / ref).resolve()
        if target in seen:
            raise ConfigError(f"Schema reference cycle through {target}.")
        if not target.exists():
            raise ConfigError(f"Schema file {target} referenced from {base} does not exist.")
        if read is not None:
            read.append(_stamp(target))
        loaded = _read_yaml(target) or {}
        loaded = _inline_local_refs(loaded, loaded)
        loaded.pop("$schema", None)
        loaded.pop("$id", None)
        loaded.pop("$defs", None)
        merged = {**_resolve_refs(loaded, target.parent, (*seen, target), read)}
        merged.update({k: v for k, v in node.items() if k != "$ref"})
        return merged
    return {key: _resolve_refs(value, base, seen, read) for key, value in node.items()}


#: Schemas loaded in this process: path -> (the stamps of the files read, the schema).
_LOADED: dict[Path, tuple[list[_Stamp], dict[str, Any]]] = {}


def _stamp(path: Path) -> _Stamp:
    """``(path, modification time, size)`` of a file; -1 for both when it is gone."""
    try:
        st = path.stat()
    except OSError:
        return path, -1, -1
    return path, st.st_mtime_ns, st.st_size


def load_schema(path: str | os.PathLike) -> dict[str, Any]:
    """Load the config schema and inline its per-section files.

    A process reads the files once: later calls return a copy of what was read as long
    as none of the files changed (modification time and size), since a run validates
    its config several times (~20 ms per reading, 2 ms per copy).

    Parameters
    ----------
    path : path-like
        ``workflow/schemas/config.schema.yaml``.

    Returns
    -------
    schema : dict
        A self-contained JSON Schema, the caller's own copy.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"Config schema {path} does not exist.")
    key = path.resolve()
    cached = _LOADED.get(key)
    if cached is not None and [_stamp(p) for p, _, _ in cached[0]] == cached[0]:
        return copy.deepcopy(cached[1])
    read = [_stamp(key)]
    schema = _resolve_refs(_read_yaml(path), path.parent, read=read)
    _LOADED[key] = (read, copy.deepcopy(schema))
    return schema


def _default_for(schema: Mapping[str, Any]) -> Any:
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    if schema.get("type") == "object":
        return {}
    return None


def fill_defaults(config: Any, schema: Mapping[str, Any]) -> Any:
    """Return a copy of ``config`` with schema defaults filled in, recursively.

    Parameters
    ----------
    config : object
        Parsed configuration (usually a dict).
    schema : dict
        The (resolved) JSON Schema of ``config``.

    Returns
    -------
    filled : object
        Mappings gain every missing property that has a default; objects
        without a default become ``{}`` and are filled in turn.
    """
    if not isinstance(config, dict) or schema.get("type") != "object":
        if isinstance(config, list) and isinstance(schema.get("items"), Mapping):
            return [fill_defaults(item, schema["items"]) for item in config]
        return config
    out = dict(config)
    properties = schema.get("properties", {})
    for key, sub in properties.items():
        if key not in out:
            default = _default_for(sub)
            if default is None and "default" not in sub:
                continue
            out[key] = default
        out[key] = fill_defaults(out[key], sub)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        for key in out:
            if key not in properties:
                out[key] = fill_defaults(out[key], extra)
    return out


def _key_path(path: Any) -> str:
    parts = []
    for item in path:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "<top level>"


def _schema_at(schema: Mapping[str, Any], path: Any) -> Mapping[str, Any]:
    node: Mapping[str, Any] = schema
    for item in path:
        if isinstance(item, int):
            node = node.get("items", {})
        else:
            props = node.get("properties", {})
            node = props.get(item, node.get("additionalProperties") or {})
        if not isinstance(node, Mapping):
            return {}
    return node


def _describe(error: jsonschema.ValidationError, schema: Mapping[str, Any], source: str) -> str:
    where = _key_path(error.absolute_path)
    if error.validator == "additionalProperties":
        parent = _schema_at(schema, error.absolute_path)
        allowed = sorted(parent.get("properties", {}))
        given = sorted(set(error.instance) - set(allowed))
        messages = []
        for key in given:
            full = f"{where}.{key}" if error.absolute_path else key
            hint = difflib.get_close_matches(key, allowed, n=1, cutoff=0.5)
            tip = f" Did you mean '{hint[0]}'?" if hint else ""
            messages.append(
                f"Unknown key '{full}' in {source}.{tip} Valid keys here: {', '.join(allowed)}."
            )
        return " ".join(messages)
    if error.validator == "type":
        expected = error.validator_value
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_JSON_TYPES.get(n, n) for n in names)
        return (
            f"'{where}' in {source} must be {wanted}, got {error.instance!r} "
            f"({type(error.instance).__name__}) instead."
        )
    if error.validator == "enum":
        options = ", ".join(repr(v) for v in error.validator_value)
        hint = ""
        if isinstance(error.instance, str):
            close = difflib.get_close_matches(
                error.instance, [str(v) for v in error.validator_value], n=1
            )
            hint = f" Did you mean {close[0]!r}?" if close else ""
        return (
            f"'{where}' in {source} must be one of {options}, got {error.instance!r} instead.{hint}"
        )
    if error.validator == "required":
        return f"'{where}' in {source} is missing a required key: {error.message}."
    return f"'{where}' in {source} is invalid: {error.message}."


def validate_config(
    config: Mapping[str, Any],
    schema: Mapping[str, Any] | str | os.PathLike,
    *,
    source: str = "the config",
) -> dict[str, Any]:
    """Validate ``config``, fill defaults and return the result.

    Parameters
    ----------
    config : dict
        Parsed configuration.
    schema : dict | path-like
        Resolved schema, or the path of ``config.schema.yaml``.
    source : str
        How to name the config in messages (usually its file name).

    Returns
    -------
    config : dict
        A new dict with defaults filled in.

    Raises
    ------
    ConfigError
        Naming each offending key path, the expectation and the value given.
    """
    if not isinstance(schema, Mapping):
        schema = load_schema(schema)
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"{source} must be a mapping of sections, got {type(config).__name__} instead."
        )
    filled = fill_defaults(dict(config), schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(
        validator.iter_errors(filled), key=lambda e: (len(e.absolute_path), list(e.absolute_path))
    )
    if errors:
        lines = [_describe(err, schema, source) for err in errors[:10]]
        more = f"\n(and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise ConfigError("Invalid configuration:\n- " + "\n- ".join(lines) + more)
    return filled


def _valid(value: Any, node: Mapping[str, Any]) -> bool:
    """Whether ``value`` matches the (resolved) schema ``node``."""
    return jsonschema.Draft202012Validator(node).is_valid(value)


def _expected_types(node: Mapping[str, Any]) -> str:
    """The JSON types a schema node accepts, in words (``"a number or null"``)."""
    names: list[str] = []
    for branch in [node, *node.get("oneOf", []), *node.get("anyOf", [])]:
        kind = branch.get("type") if isinstance(branch, Mapping) else None
        for name in [kind] if isinstance(kind, str) else list(kind or []):
            if _JSON_TYPES.get(name, name) not in names:
                names.append(_JSON_TYPES.get(name, name))
    return " or ".join(names) or "a value of the schema"


def _coerce_children(value: Any, node: Mapping[str, Any], where: str, source: str) -> Any:
    """Coerce the entries of a mapping or list override, each by its own schema node."""
    if isinstance(value, Mapping):
        return {
            key: _coerce_override(item, _schema_at(node, [key]), f"{where}.{key}", source)
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = node.get("items")
        items = items if isinstance(items, Mapping) else {}
        return [
            _coerce_override(item, items, f"{where}[{i}]", source) for i, item in enumerate(value)
        ]
    return value


def _coerce_override(value: Any, node: Mapping[str, Any], where: str, source: str) -> Any:
    """``value`` typed as ``node`` expects: a string parsed as YAML where a string fails."""
    if _valid(value, node):
        return value
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as err:
            problem = str(err).splitlines()[0]
            raise ConfigError(
                f"'{where}' in {source} must be {_expected_types(node)} written in YAML, "
                f"got {value!r} instead ({problem})."
            ) from err
        if isinstance(parsed, str):
            return value  # a string after all: validation names what was expected
        value = parsed
        if _valid(value, node):
            return value
    for branch in [*node.get("oneOf", []), *node.get("anyOf", [])]:
        if isinstance(branch, Mapping):
            candidate = _coerce_children(value, branch, where, source)
            if _valid(candidate, branch):
                return candidate
    return _coerce_children(value, node, where, source)


def coerce_overrides(
    overrides: Mapping[str, Any],
    schema: Mapping[str, Any] | str | os.PathLike,
    *,
    source: str = "--config",
) -> dict[str, Any]:
    """Type the values of ``--config KEY=VALUE`` overrides as the schema expects.

    Snakemake parses an override's value as an integer, a float, a boolean, then with
    YAML's base loader, which keeps every value inside a mapping or list a string
    (``encoding='{"delays": {"lags": [1, 2]}}'`` gives ``{"lags": ["1", "2"]}``).
    Each string where the schema expects something else is read again with
    ``yaml.safe_load``; strings the schema accepts are kept as they are.

    Parameters
    ----------
    overrides : dict
        The parsed overrides (Snakemake's ``parse_config`` result), top-level keys.
    schema : dict | path-like
        Resolved schema, or the path of ``config.schema.yaml``.
    source : str
        How to name the overrides in messages.

    Returns
    -------
    overrides : dict
        A new dict; values that neither form matches are left for
        :func:`validate_config` to report with their key path.

    Raises
    ------
    ConfigError
        When a string where the schema expects another type is not valid YAML,
        naming the entry's key path.
    """
    if not isinstance(schema, Mapping):
        schema = load_schema(schema)
    return {
        key: _coerce_override(value, _schema_at(schema, [key]), str(key), source)
        for key, value in overrides.items()
    }


def load_config(
    path: str | os.PathLike, schema_path: str | os.PathLike, overrides: Mapping | None = None
) -> dict[str, Any]:
    """Read a YAML config file, apply overrides, validate and fill defaults.

    Parameters
    ----------
    path : path-like
        The YAML config.
    schema_path : path-like
        ``workflow/schemas/config.schema.yaml``.
    overrides : dict | None
        Nested values that replace those from the file.

    Returns
    -------
    config : dict
        The validated config.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"Config file {path} does not exist.")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"Config file {path} is not valid YAML: {err}") from err
    if overrides:
        data = deep_update(data, overrides)
    return validate_config(data, schema_path, source=str(path))


def sorted_config(config: Any) -> Any:
    """Copy of ``config`` with every mapping's keys sorted, recursively.

    Parameters
    ----------
    config : object
        A validated configuration.

    Returns
    -------
    config : object
        Equal content in canonical key order, so two files that differ only in
        key order give identical job parameters.
    """
    if isinstance(config, Mapping):
        return {key: sorted_config(config[key]) for key in sorted(config)}
    if isinstance(config, list):
        return [sorted_config(item) for item in config]
    return config


def deep_update(base: Mapping[str, Any], updates: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``updates`` into a copy of ``base``."""
    out = copy.deepcopy(dict(base))
    for key, value in updates.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_update(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def unknown_key_message(path: str, key: str, allowed: Sequence[str]) -> str:
    """``Unknown key 'a.b'; did you mean 'c'? Valid keys here: ...`` for a stage section."""
    hint = difflib.get_close_matches(str(key), [str(a) for a in allowed], n=1, cutoff=0.5)
    tip = f" Did you mean '{hint[0]}'?" if hint else ""
    return f"Unknown key '{path}'.{tip} Valid keys here: {', '.join(sorted(map(str, allowed)))}."


def merge_defaults(
    defaults: Mapping[str, Any],
    given: Mapping[str, Any] | None,
    section: str,
    *,
    opaque: Collection[str] = (),
) -> dict[str, Any]:
    """Fill a stage's config section from its defaults; unknown keys are errors.

    Every stage entry point calls this on the section it receives, so a package user
    gets the same checks and messages as the workflow's schema validation.

    Parameters
    ----------
    defaults : dict
        The stage's ``DEFAULT_CONFIG`` (not modified).
    given : dict | None
        The section as given (possibly partial; ``None`` is empty).
    section : str
        Its dotted name in the config, used in error messages (e.g. ``"encoding"``).
    opaque : collection of str
        Keys whose mapping values are taken whole, not merged (free-form mappings
        such as a model's ``model_config``).

    Returns
    -------
    config : dict
        A deep copy of ``defaults`` updated recursively with ``given``.
    """
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise TypeError(f"`{section}` must be a mapping, got {type(given).__name__} instead.")
    # the defaults' key order; a value given replaces its default, which is not copied
    out = {key: None if key in given else copy.deepcopy(v) for key, v in defaults.items()}
    for key, value in given.items():
        path = f"{section}.{key}"
        if key not in defaults:
            raise ValueError(unknown_key_message(path, key, list(defaults)))
        default = defaults[key]
        if isinstance(default, Mapping) and key not in opaque and value is not None:
            if not isinstance(value, Mapping):
                raise TypeError(f"`{path}` must be a mapping, got {type(value).__name__} instead.")
            out[key] = merge_defaults(default, value, path, opaque=opaque)
        else:
            out[key] = copy.deepcopy(value)
    return out

"""Reference pages generated at build time: configuration, outputs and command line.

MkDocs loads this file as a hook (``hooks:`` in ``mkdocs.yml``); :func:`on_files` adds
three pages that are never written by hand:

- ``reference/configuration.md`` from the JSON Schema (``workflow/schemas``): every key
  with its type, default, allowed values and description;
- ``reference/outputs.md`` from the variable descriptions of the stores
  (:data:`neuroflow.variables.DESCRIPTIONS`) and the columns of ``scores.tsv``;
- ``reference/cli.md`` from the parser of the ``neuroflow`` command.

"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
#: Longest default shown in full in the configuration table.
MAX_DEFAULT = 80
#: Placeholder for the free names of a mapping (``encoding.models.<name>``).
NAME = "<name>"


# --------------------------------------------------------------------------- helpers
def _cell(text: Any) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    text = text.replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
    return text.replace("|", r"\|")


def _code(text: str) -> str:
    """``text`` as inline code inside a table cell (a pipe in a code span splits no cell)."""
    return "`" + str(text).replace("`", "'") + "`"


def _branches(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The alternatives of a ``oneOf`` / ``anyOf`` node."""
    out = [*node.get("oneOf", []), *node.get("anyOf", [])]
    return [b for b in out if isinstance(b, Mapping)]


# --------------------------------------------------------------------------- configuration
def schema_keys(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping]]:
    """Every key of a (resolved) schema, depth first, as ``(dotted path, node)``.

    Mapping keys of free names are written :data:`NAME` and list items ``[]``
    (``features.extractors[].name``); the properties of object alternatives
    (``oneOf``) are listed under the key itself.
    """
    seen: set[str] = set()
    for node in [schema, *_branches(schema)]:
        for key, sub in (node.get("properties") or {}).items():
            child = f"{path}.{key}" if path else key
            if child in seen or not isinstance(sub, Mapping):
                continue
            seen.add(child)
            yield child, sub
            yield from schema_keys(sub, child)
        extra = node.get("additionalProperties")
        if path and isinstance(extra, Mapping) and (extra.get("properties") or _branches(extra)):
            child = f"{path}.{NAME}"
            if child not in seen:
                seen.add(child)
                yield from schema_keys(extra, child)
        items = node.get("items")
        if path and isinstance(items, Mapping):
            for item in [items, *_branches(items)]:
                if item.get("properties"):
                    yield from schema_keys(item, f"{path}[]")


def _type_of(node: Mapping[str, Any]) -> str:
    """The JSON types a node accepts (``number | null``)."""
    names: list[str] = []
    for branch in [node, *_branches(node)]:
        kind = branch.get("type")
        kinds = [kind] if isinstance(kind, str) else list(kind or [])
        if not kinds and "const" in branch:
            kinds = [_json_type(branch["const"])]
        if kinds == ["array"] and isinstance(branch.get("items"), Mapping):
            inner = _type_of(branch["items"])
            kinds = [f"array of {inner}" if inner else "array"]
        for name in kinds:
            if name not in names:
                names.append(name)
    return " \\| ".join(names)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _bounds(node: Mapping[str, Any]) -> list[str]:
    signs = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
    return [f"{sign} {node[key]}" for key, sign in signs.items() if key in node]


def _allowed(node: Mapping[str, Any]) -> str:
    """Enumerated values, constants of the alternatives, bounds and patterns of a node."""
    parts: list[str] = []
    for branch in [node, *_branches(node)]:
        if "enum" in branch:
            parts.extend(_code(json.dumps(v)) for v in branch["enum"])
        if "const" in branch:
            parts.append(_code(json.dumps(branch["const"])))
        parts.extend(_cell(b) for b in _bounds(branch))
        if "pattern" in branch:
            parts.append("pattern " + _code(branch["pattern"]))
        items = branch.get("items")
        if isinstance(items, Mapping) and "enum" in items:
            parts.append("items: " + ", ".join(_code(json.dumps(v)) for v in items["enum"]))
    unique: list[str] = []
    for part in parts:
        if part not in unique:
            unique.append(part)
    return ", ".join(unique)


def _default(node: Mapping[str, Any]) -> str:
    if "default" not in node:
        return ""
    text = json.dumps(node["default"], ensure_ascii=False)
    if len(text) > MAX_DEFAULT:
        return _code(text[: MAX_DEFAULT - 1] + "…") + " (see `config/config.yaml`)"
    return _code(text)


def config_reference(schema: Mapping[str, Any] | None = None) -> str:
    """The configuration reference page, Markdown.

    Parameters
    ----------
    schema : dict | None
        The resolved schema (:func:`neuroflow.config.load_schema`); None reads
        ``workflow/schemas/config.schema.yaml``.

    Returns
    -------
    page : str
        One section per top-level key, a table of every key below it.
    """
    if schema is None:
        from neuroflow.config import load_schema

        schema = load_schema(SCHEMA)
    lines = [
        "# Configuration reference",
        "",
        "Generated from the JSON Schema (`workflow/schemas/*.schema.yaml`) each time the",
        "site is built. Every key has a type, a default and a description; unknown keys are",
        "rejected at every level. `<name>` stands for a name you choose (a model, a pool),",
        "`[]` for each item of a list. The [configuration guide](../configuration.md)",
        "explains how the sections work together.",
        "",
    ]
    header = ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    top = schema.get("properties", {})
    scalars = [k for k, v in top.items() if "properties" not in v and not _branches(v)]
    if scalars:
        lines += ["## Top level", "", *header]
        lines += [_row(key, top[key]) for key in scalars]
        lines.append("")
    for section, node in top.items():
        if section in scalars:
            continue
        lines += [f"## {section}", ""]
        if node.get("description"):
            lines += [re.sub(r"\s+", " ", node["description"]).strip(), ""]
        lines += header
        lines += [_row(path, sub) for path, sub in schema_keys(node, section)]
        lines.append("")
    return "\n".join(lines)


def _row(path: str, node: Mapping[str, Any]) -> str:
    description = node.get("description") or next(
        (b["description"] for b in _branches(node) if b.get("description")), ""
    )
    cells = [_code(path), _type_of(node), _default(node), _allowed(node), _cell(description)]
    return "| " + " | ".join(cells) + " |"


# --------------------------------------------------------------------------- outputs
def outputs_reference() -> str:
    """The outputs reference page, Markdown: store variables and ``scores.tsv`` columns."""
    from neuroflow.evaluation.summary import TABLE_COLUMNS
    from neuroflow.export import SUMMARY_COLUMN_DESCRIPTIONS, SUMMARY_METRIC_DESCRIPTIONS
    from neuroflow.variables import DESCRIPTIONS

    lines = [
        "# Outputs reference",
        "",
        "Generated from the code each time the site is built. The [outputs guide](../outputs.md)",
        "shows where each store is written and how to open it.",
        "",
        "## `scores.tsv` columns",
        "",
        "`results/summary/<v>/scores.tsv` is one tidy table over every analysis, in this",
        "column order (`neuroflow export` writes the same descriptions to its JSON sidecar).",
        "",
        "| column | description |",
        "|---|---|",
    ]
    for column in TABLE_COLUMNS:
        lines.append(f"| {_code(column)} | {_cell(SUMMARY_COLUMN_DESCRIPTIONS.get(column, ''))} |")
    lines += [
        "",
        "## `metric` values",
        "",
        "Metrics not listed here are store variables of the same name (next section), or are",
        "described in the sidecar that `neuroflow export` writes beside the table.",
        "",
        "| metric | description |",
        "|---|---|",
    ]
    for metric, text in SUMMARY_METRIC_DESCRIPTIONS.items():
        lines.append(f"| {_code(metric)} | {_cell(text)} |")
    lines += [
        "",
        "## Store variables",
        "",
        "Every variable of the decoding, RSA and summary stores carries a `long_name` and",
        "`units` attribute (`ds[name].attrs`). A name matches the first pattern (a regular",
        "expression over the whole name) of this table; a `group_` prefix marks the group",
        "test of a variable, and `_sd` / `_sem` suffixes its across-subject SD and SEM.",
        "",
        "| variable (pattern) | long name | units |",
        "|---|---|---|",
    ]
    for pattern, long_name, units in DESCRIPTIONS:
        lines.append(f"| {_code(pattern)} | {_cell(long_name)} | {_cell(units)} |")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- command line
def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if "%" in text:
        text = text % {**vars(action), "prog": prog}
    return text


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += " " + (action.metavar or action.dest.upper())
        else:
            name = action.metavar or action.dest
        default = action.default
        shown = (
            "" if default in (None, False, [], argparse.SUPPRESS) else _code(json.dumps(default))
        )
        choices = ", ".join(_code(c) for c in action.choices or [])
        rows.append(
            f"| {_code(name)} | {shown} | {choices} | {_cell(_help(action, parser.prog))} |"
        )
    return rows


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The command-line reference page, Markdown, from the ``neuroflow`` parser."""
    if parser is None:
        from neuroflow.cli import build_parser

        parser = build_parser()
    header = ["| argument | default | choices | help |", "|---|---|---|---|"]
    lines = [
        "# Command line",
        "",
        "Generated from the parser of the `neuroflow` command each time the site is built",
        "(`neuroflow --help`, `neuroflow <command> --help`).",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        _cell(parser.description or ""),
        "",
        *header,
        *_option_rows(parser),
        "",
    ]
    for name, sub in _subcommands(parser).items():
        lines += [
            f"## neuroflow {name}",
            "",
            "```text",
            sub.format_usage().strip(),
            "```",
            "",
            _cell(sub.description or ""),
            "",
            *header,
            *_option_rows(sub),
            "",
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- MkDocs hook
def generated_pages() -> dict[str, str]:
    """The generated pages: path inside the site's sources -> Markdown."""
    return {
        "reference/configuration.md": config_reference(),
        "reference/outputs.md": outputs_reference(),
        "reference/cli.md": cli_reference(),
    }


def on_files(files, config):
    """Add the generated pages."""
    from mkdocs.structure.files import File

    pages = generated_pages()
    for path, content in pages.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files

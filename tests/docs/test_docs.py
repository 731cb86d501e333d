"""The documentation: its config snippets validate, its commands parse, the site builds.

Every fenced ``yaml`` block of README.md and docs/ is a config (or a part of one) that
the schema must accept; every ``neuroflow ...`` and ``snakemake ...`` line of a shell
block must parse as its command line parses it (``--config KEY=VALUE`` values included);
and ``mkdocs build --strict`` (warnings and broken links are errors) must pass.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from neuroflow.cli import build_parser
from neuroflow.cli.run import snakemake_run_args
from neuroflow.config import coerce_overrides, load_schema, validate_config
from neuroflow.config.validation import deep_update

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
#: The pages: the README and every Markdown file of the site's sources.
PAGES = sorted(
    [REPO / "README.md", *(p for p in (REPO / "docs").rglob("*.md") if "hooks" not in p.parts)]
)
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S
)
#: Shell lines that run one of these commands (after an optional ``.venv/bin/``).
COMMAND = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?(?P<cmd>neuroflow|snakemake)\s")


def _blocks(langs: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """``(page, line, text)`` of every fenced block of the given languages."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match["lang"] in langs:
                line = text.count("\n", 0, match.start()) + 1
                body = textwrap.dedent(match["body"])
                found.append((str(page.relative_to(REPO)), line, body))
    return found


def _commands() -> list[tuple[str, int, list[str]]]:
    """``(page, line, argv)`` of every neuroflow / snakemake command of the shell blocks."""
    found = []
    for page, start, body in _blocks(("bash", "sh", "shell", "console")):
        for offset, raw in enumerate(body.splitlines()):
            line = re.split(r"\s(?:\|\||&&|\||>)\s", raw)[0]
            if not COMMAND.match(line):
                continue
            argv = shlex.split(line, comments=True)
            while "=" in argv[0] and not argv[0].startswith("-"):
                argv = argv[1:]  # environment variables before the command
            found.append((page, start + 1 + offset, argv))
    return found


@pytest.fixture(scope="module")
def schema() -> dict:
    return load_schema(SCHEMA)


@pytest.fixture(scope="module")
def default_config() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


YAML_BLOCKS = _blocks(("yaml", "yml"))
PYTHON_BLOCKS = _blocks(("python", "py"))
COMMANDS = _commands()


def test_the_pages_have_snippets_and_commands():
    """The collection finds what the pages show (a broken pattern would test nothing)."""
    pages = {page for page, _, _ in YAML_BLOCKS}
    assert {"README.md", "docs/recipes/ds000117.md", "docs/recipes/nsd-betas.md"} <= pages
    assert len(YAML_BLOCKS) >= 10
    assert {"docs/outputs.md", "docs/development.md"} <= {page for page, _, _ in PYTHON_BLOCKS}
    kinds = {argv[0].rsplit("/", 1)[-1] for _, _, argv in COMMANDS}
    assert kinds == {"neuroflow", "snakemake"}
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize(
    ("page", "line", "text"), YAML_BLOCKS, ids=[f"{p}:{n}" for p, n, _ in YAML_BLOCKS]
)
def test_yaml_snippet_is_a_valid_config(page, line, text, schema, default_config):
    """Each snippet, on top of the default config as a --configfile would be, validates."""
    snippet = yaml.safe_load(text)
    assert isinstance(snippet, dict), f"{page}:{line} is not a mapping"
    validate_config(deep_update(default_config, snippet), schema, source=f"{page}:{line}")


def _check_neuroflow(argv: list[str]) -> None:
    if argv[1:2] == ["run"]:
        args, _ = snakemake_run_args(argv[2:], REPO, cwd=REPO)
        _check_snakemake(["snakemake", *args])
        return
    parsed = build_parser().parse_args(argv[1:])
    for entry in getattr(parsed, "config", []):
        if "=" in entry:
            _check_overrides([entry])


def _check_snakemake(argv: list[str]) -> None:
    from snakemake.cli import get_argument_parser

    parsed = get_argument_parser().parse_args(argv[1:])
    if parsed.config:
        _check_overrides(parsed.config)


def _check_overrides(entries: list[str]) -> None:
    """``--config`` values are parsed as Snakemake parses them, typed and validated."""
    from snakemake.cli import parse_config

    schema = load_schema(SCHEMA)
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    overrides = coerce_overrides(parse_config(entries), schema)
    validate_config(deep_update(default, overrides), schema, source="--config")


@pytest.mark.parametrize(
    ("page", "line", "text"), PYTHON_BLOCKS, ids=[f"{p}:{n}" for p, n, _ in PYTHON_BLOCKS]
)
def test_python_snippet_compiles_and_its_imports_exist(page, line, text):
    """Each Python snippet is valid Python, and every name it imports exists."""
    tree = ast.parse(text, filename=f"{page}:{line}")
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    assert imports, f"{page}:{line} imports nothing: what does it call?"
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
            continue
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert hasattr(module, alias.name), f"{page}:{line}: {node.module}.{alias.name}"


@pytest.mark.parametrize(
    ("page", "line", "argv"), COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS]
)
def test_command_parses(page, line, argv):
    """Each command parses as its own parser parses it (argparse exits on an error)."""
    try:
        if argv[0].endswith("neuroflow"):
            _check_neuroflow(argv)
        else:
            _check_snakemake(argv)
    except SystemExit as err:  # argparse's way of refusing a command line
        pytest.fail(f"{page}:{line}: {shlex.join(argv)} does not parse (exit {err.code})")


# --------------------------------------------------------------------------- generated pages
def _reference_module():
    spec = importlib.util.spec_from_file_location(
        "neuroflow_docs_reference", REPO / "docs" / "hooks" / "reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _key_names(node: object) -> set[str]:
    """Every property name anywhere in a schema node."""
    names: set[str] = set()
    if isinstance(node, dict):
        for key, sub in (node.get("properties") or {}).items():
            names.add(key)
            names |= _key_names(sub)
        for key in ("additionalProperties", "items"):
            names |= _key_names(node.get(key))
        for key in ("oneOf", "anyOf"):
            for branch in node.get(key, []):
                names |= _key_names(branch)
    return names


def test_configuration_reference_lists_every_key(schema):
    """Every key of the schema has a row, with its default."""
    page = _reference_module().config_reference(schema)
    cell = r"((?:[^|\\]|\\.)*)"  # a table cell, escaped pipes included
    rows = re.findall(rf"^\| `([^`]+)` \| {cell} \| {cell} \|", page, re.M)
    paths = [path for path, _, _ in rows]
    assert len(paths) == len(set(paths))
    names = {re.split(r"[.\[\]]+", path.replace("<name>", ""))[-1] or path for path in paths}
    names |= {part for path in paths for part in re.split(r"[.\[\]]+", path) if part}
    missing = _key_names(schema) - names
    assert not missing, f"keys without a row: {sorted(missing)}"
    by_path = {path: (kind, default) for path, kind, default in rows}
    assert by_path["encoding.alphas.num"] == (
        "integer",
        f"`{schema['properties']['encoding']['properties']['alphas']['properties']['num']['default']}`",
    )
    assert '`"leave-one-run-out"`' in page  # a oneOf constant among the allowed values
    assert "## preprocess_eeg" in page and "## Top level" in page


def test_outputs_and_cli_references_come_from_the_code():
    from neuroflow.evaluation.summary import TABLE_COLUMNS
    from neuroflow.variables import DESCRIPTIONS

    reference = _reference_module()
    outputs = reference.outputs_reference()
    for column in TABLE_COLUMNS:
        assert f"| `{column}` |" in outputs
    for pattern, _, _ in DESCRIPTIONS:
        assert f"`{pattern}`" in outputs, pattern
    cli = reference.cli_reference()
    parser = build_parser()
    subcommands = next(
        a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    for name, sub in subcommands.items():
        assert f"## neuroflow {name}" in cli
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in cli, (name, flag)


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    """``mkdocs build --strict``: no warning, no broken link, every page generated."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip(
            "mkdocs and mkdocs-material are not installed: `pip install -e '.[docs]'` "
            "(`make install` includes them)"
        )
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    start = time.monotonic()
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    site = tmp_path / "site"
    for page in (
        "reference/configuration",
        "reference/outputs",
        "reference/cli",
        "troubleshooting",
    ):
        assert (site / page / "index.html").is_file(), page
    troubleshooting = (site / "troubleshooting" / "index.html").read_text()
    assert "Bad inputs and what neuroflow does with them" in troubleshooting  # included
    assert took < 120, f"the site took {took:.0f} s to build"

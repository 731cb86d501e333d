"""Declared dependencies: everything the package imports is declared, nothing declared is unused."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Extras of tools around the product (tests, lint, the browser check, the docs site), not
#: imported by it.
TOOL_EXTRAS = {"test", "report-test", "docs"}
#: Declared distributions used without an import statement, with the place that uses them.
USED_WITHOUT_IMPORT = {
    # `--executor slurm` loads the plugin by its name.
    "snakemake-executor-plugin-slurm": "workflow/profiles/slurm",
}
_IMPORT_RE = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.MULTILINE)
#: Imports of optional parts through ``neuroflow.extras.require("<module>", ...)``.
_REQUIRE_RE = re.compile(r"\brequire\(\s*[\"']([A-Za-z_]\w*)[\"']")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, str]:
    """Declared distribution -> the table that declares it (``""`` for the core)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    tables = {"": project["dependencies"], **project["optional-dependencies"]}
    out: dict[str, str] = {}
    for table, specs in tables.items():
        for spec in specs:
            name = _normalise(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0])
            if name != "neuroflow":
                out.setdefault(name, table)
    return out


def _python_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _string_references() -> set[str]:
    """Modules the package imports by name at run time (model presets, packaged models)."""
    from neuroflow.features import hf, presets

    names = set(hf._PACKAGED_MODELS.values())
    for preset in presets.PRESETS.values():
        for key in ("builder", "weights_file"):
            if key in preset:
                names.add(preset[key].split(":")[0].split(".")[0])
    return names


@functools.cache
def _product_imports() -> dict[str, set[str]]:
    """Third-party top-level module -> files of the product that import it."""
    files = [
        *sorted((REPO / "src" / "neuroflow").rglob("*.py")),
        *sorted((REPO / "scripts").glob("*.py")),
    ]
    found: dict[str, set[str]] = {}
    for path in files:
        for name in _python_imports(path) | set(_REQUIRE_RE.findall(path.read_text())):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        for name in _IMPORT_RE.findall(path.read_text()):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    for name in _string_references():
        found.setdefault(name, set()).add("src/neuroflow/features (model presets)")
    ignore = set(sys.stdlib_module_names) | {"neuroflow", "__future__"}
    return {name: where for name, where in found.items() if name not in ignore}


@functools.cache
def _installed_modules() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def _distributions(module: str) -> set[str]:
    dists = _installed_modules().get(module)
    if dists:
        return {_normalise(d) for d in dists}
    return {_normalise(module)}  # not installed (an optional extra): its usual name


def test_every_import_is_declared():
    declared = _declared()
    undeclared = {
        module: sorted(where)
        for module, where in _product_imports().items()
        if not _distributions(module) & declared.keys()
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_every_declared_dependency_is_used():
    used = set()
    for module in _product_imports():
        used |= _distributions(module)
    unused = {
        name
        for name, table in _declared().items()
        if table not in TOOL_EXTRAS and name not in used and name not in USED_WITHOUT_IMPORT
    }
    assert not unused, f"declared in pyproject.toml but never imported: {sorted(unused)}"


def test_used_without_import_entries_exist():
    for name, where in USED_WITHOUT_IMPORT.items():
        assert name in _declared(), name
        assert (REPO / where).exists(), where


def test_opencv_is_the_headless_build():
    if importlib.util.find_spec("cv2") is None:
        pytest.skip("OpenCV is not installed (the `video` extra)")
    assert _distributions("cv2") == {"opencv-python-headless"}

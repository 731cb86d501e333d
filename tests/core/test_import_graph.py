"""The package's imports form layers that only point down.

Every module of ``src/neuroflow`` is read with :mod:`ast` (nothing is imported) and
the graph of imports between neuroflow modules is built from its module-level and
function-level imports; imports under ``if TYPE_CHECKING:`` are left out, since they
never run. The graph must have

- no cycle between modules (no strongly connected component of more than one module),
- no import from a lower layer of :data:`LAYERS` into a higher one,
- no import of a private name (``_x``, or a name inside a private module) from another
  neuroflow package or from a third-party library, and no use of the third-party APIs
  in :data:`AVOIDED_APIS`.

``docs/architecture.md`` draws the same layer table.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = REPO / "src" / "neuroflow"

# Bottom first. A module belongs to the first entry that equals it or contains it
# (``neuroflow.encoding`` holds ``neuroflow.encoding.stage``; the bare package name
# holds only the package's own ``__init__``); a module may import
# modules of its own layer and of every layer below it, never of a layer above.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "core",
        (
            "neuroflow",
            "neuroflow.progress",
            "neuroflow.heap",
            "neuroflow.extras",
            "neuroflow.stage_warnings",
            "neuroflow.manifests",
            "neuroflow.artifacts",
            "neuroflow.variables",
            "neuroflow.peaks",
            "neuroflow.rois",
            "neuroflow.figures",
            "neuroflow.names",
            "neuroflow.config",
            "neuroflow.io.files",
            "neuroflow.io.arrays",
            "neuroflow.io.records",
            "neuroflow.io.events",
            "neuroflow.io.bids",
            "neuroflow.io.bids_eeg",
            "neuroflow.io.timeseries",
            "neuroflow.trial_split",
            "neuroflow.models",
        ),
    ),
    ("preprocessing", ("neuroflow.preprocessing",)),
    ("imported inputs", ("neuroflow.io",)),
    ("stimuli", ("neuroflow.stimuli",)),
    ("features", ("neuroflow.features",)),
    ("demo dataset", ("neuroflow.demo",)),
    ("quality control", ("neuroflow.qc",)),
    ("metrics", ("neuroflow.evaluation.metrics", "neuroflow.evaluation.noise_ceiling")),
    ("analysis inputs", ("neuroflow.analysis_inputs",)),
    (
        "analyses",
        ("neuroflow.encoding", "neuroflow.decoding", "neuroflow.rsa", "neuroflow.geometry"),
    ),
    ("analyses of fitted models", ("neuroflow.insilico",)),
    ("evaluation and reporting", ("neuroflow.evaluation", "neuroflow.export")),
    (
        "workflow index",
        (
            "neuroflow.workflow.lock",
            "neuroflow.workflow.conda_envs",
            "neuroflow.workflow.report_layout",
            "neuroflow.workflow.checks",
            "neuroflow.workflow.defaults",
            "neuroflow.workflow.sweeps",
            "neuroflow.workflow.transform_sweeps",
            "neuroflow.workflow.methods",
            "neuroflow.workflow.predict",
            "neuroflow.workflow.design",
            "neuroflow.workflow.stimulus_checks",
            "neuroflow.workflow.versions",
        ),
    ),
    ("workflow scope", ("neuroflow.workflow.applicability", "neuroflow.workflow.decoding_scope")),
    ("workflow plan", ("neuroflow.workflow",)),
    ("command line", ("neuroflow.cli",)),
)

# Layers whose packages import none of one another: each analysis reads what it shares
# with the others from the layers below.
INDEPENDENT_LAYERS: frozenset[str] = frozenset({"analyses"})

# Known exceptions, each with the reason it stays: (importing module, imported name).
ALLOWED_PRIVATE: frozenset[tuple[str, str]] = frozenset(
    {
        # TorchScript files have no loader outside torch.jit; its replacement by
        # torch.export is under way.
        ("neuroflow.features.torch_build", "torch.jit.load"),
        # Documented in the os module (an underscore by convention): a forked job ends
        # without running the warm server's exit handlers.
        ("neuroflow.workflow.warm_jobs", "os._exit"),
    }
)

# Third-party namespaces the package must not use, with what to use instead.
AVOIDED_APIS: Mapping[str, str] = {"torch.jit": "torch.export"}


@dataclass(frozen=True)
class Import:
    """One import statement's target, as read from the source.

    Attributes
    ----------
    module : str
        The importing module (``neuroflow.encoding.stage``).
    target : str
        The imported module (``neuroflow.evaluation.metrics``, or a third-party module).
    name : str
        The name as written (``neuroflow.evaluation.metrics.pearson_r``).
    line : int
        Line number of the statement.
    """

    module: str
    target: str
    name: str
    line: int


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of a package directory, by dotted name.

    Parameters
    ----------
    root : Path
        The package directory (holding ``__init__.py``).
    package : str
        Its dotted name.

    Returns
    -------
    modules : dict of str to Path
        ``{"pkg.sub.mod": path}``; a package's ``__init__.py`` is named after the package.
    """
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of a tree but those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _owner(name: str, modules: Iterable[str]) -> str:
    """The longest known module that is ``name`` or contains it."""
    known = set(modules)
    parts = name.split(".")
    for stop in range(len(parts), 0, -1):
        candidate = ".".join(parts[:stop])
        if candidate in known:
            return candidate
    return name


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    chain = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        chain.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return None
    chain.append(value.id)
    return chain[::-1]


def read_imports(modules: Mapping[str, Path], package: str) -> list[Import]:
    """The imports of every module, third-party ones and attribute uses included.

    Parameters
    ----------
    modules : mapping of str to Path
        The package's modules, as from :func:`module_names`.
    package : str
        The package's dotted name; its own imports resolve to its modules.

    Returns
    -------
    imports : list of Import
        One per imported name, plus one per ``alias.attribute`` use of a third-party
        module that reaches a private name or an :data:`AVOIDED_APIS` namespace.
    """
    found: list[Import] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        aliases: dict[str, str] = {}
        nodes = list(_runtime_nodes(tree))
        # imports first, so that every alias is known when its uses are read
        nodes.sort(key=lambda n: not (isinstance(n, ast.Import | ast.ImportFrom) or _lazy(n)))
        inner: set[int] = set()  # attributes inside a longer chain, read with it
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
                    target = _owner(alias.name, modules)
                    found.append(Import(module, target, alias.name, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(module, is_package, node)
                for alias in node.names:
                    name = f"{source}.{alias.name}"
                    target = _owner(name, modules) if source.startswith(package) else source
                    found.append(Import(module, target, name, node.lineno))
                    aliases[alias.asname or alias.name] = name
            elif _lazy(node):
                # ``torch = lazy_loader.load("torch")``: an import that runs on first use
                aliases[node.targets[0].id] = node.value.args[0].value
                found.append(
                    Import(
                        module, node.value.args[0].value, aliases[node.targets[0].id], node.lineno
                    )
                )
            elif isinstance(node, ast.Attribute):
                inner.add(id(node.value))
                if id(node) in inner:
                    continue
                chain = _attribute_chain(node)
                if chain is None or chain[0] not in aliases:
                    continue
                name = ".".join([aliases[chain[0]], *chain[1:]])
                if name.startswith(package):
                    continue
                if _is_private(name) or any(_within(name, api) for api in AVOIDED_APIS):
                    found.append(Import(module, name.rsplit(".", 1)[0], name, node.lineno))
    return found


def _lazy(node: ast.AST) -> bool:
    """Whether a node is ``name = lazy_loader.load("module")`` (a deferred import)."""
    return (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and _attribute_chain(node.value.func) == ["lazy_loader", "load"]
        and len(node.value.args) == 1
        and isinstance(node.value.args[0], ast.Constant)
        and isinstance(node.value.args[0].value, str)
    )


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _is_private(name: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def _unit(module: str, package: str) -> str:
    """The package (or top-level module) a module belongs to: ``neuroflow.io``."""
    return ".".join(module.split(".")[:2]) if module.startswith(package) else module


def _holds(member: str, module: str) -> bool:
    """Whether a layer-table entry holds a module (a top-level name holds only itself)."""
    return module == member or ("." in member and module.startswith(member + "."))


def _entry(module: str, members: Sequence[str]) -> str:
    """The entry of a layer that holds a module."""
    return next(member for member in members if _holds(member, module))


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int:
    """Index of a module's layer in ``layers``; ValueError when none holds it."""
    for index, (_, members) in enumerate(layers):
        if any(_holds(member, module) for member in members):
            return index
    raise ValueError(f"module {module!r} is in no layer of the layer table.")


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def problems(
    root: Path,
    package: str,
    layers: Sequence[tuple[str, Sequence[str]]],
    allowed_private: Iterable[tuple[str, str]] = (),
    independent: Iterable[str] = (),
) -> dict[str, list[str]]:
    """Cycles, upward imports and private imports of a package, as readable lines.

    Parameters
    ----------
    root : Path
        The package directory.
    package : str
        Its dotted name.
    layers : sequence of (str, sequence of str)
        The layer table, bottom first.
    allowed_private : iterable of (str, str)
        ``(module, name)`` pairs left out of the private-import check.
    independent : iterable of str
        Names of layers whose entries must not import one another.

    Returns
    -------
    problems : dict of str to list of str
        ``{"cycles": [...], "upward": [...], "sideways": [...], "private": [...],
        "unplaced": [...]}``, each line naming the pair as ``a.b -> c.d (name)``.
    """
    modules = module_names(root, package)
    imports = read_imports(modules, package)
    allowed = set(allowed_private)
    internal = [i for i in imports if i.target in modules and i.target != i.module]
    peers = set(independent)
    out: dict[str, list[str]] = {
        "cycles": [],
        "upward": [],
        "sideways": [],
        "private": [],
        "unplaced": [],
    }

    for component in cycles((i.module, i.target) for i in internal):
        members = set(component)
        inside = [i for i in internal if {i.module, i.target} <= members]
        pairs = sorted({f"{i.module} -> {i.target} ({i.name})" for i in inside})
        out["cycles"].append(" | ".join(pairs))

    for module in sorted(modules):
        try:
            layer_of(module, layers)
        except ValueError as err:
            out["unplaced"].append(str(err))
    for i in internal:
        try:
            low, high = layer_of(i.module, layers), layer_of(i.target, layers)
        except ValueError:
            continue
        if high > low:
            out["upward"].append(
                f"{i.module} -> {i.target} ({i.name}): layer {layers[low][0]!r} "
                f"imports layer {layers[high][0]!r}"
            )
        elif high == low and layers[low][0] in peers:
            own, other = (_entry(m, layers[low][1]) for m in (i.module, i.target))
            if own != other:
                out["sideways"].append(
                    f"{i.module} -> {i.target} ({i.name}): {own} imports {other}, "
                    f"both of layer {layers[low][0]!r}"
                )

    for i in imports:
        if (i.module, i.name) in allowed:
            continue
        if i.name.startswith(package):
            if _unit(i.module, package) == _unit(i.target, package):
                continue
            if _is_private(i.name):
                out["private"].append(f"{i.module} -> {i.target} ({i.name})")
        elif _is_private(i.name):
            out["private"].append(f"{i.module} -> {i.target} ({i.name})")
        else:
            for api, instead in AVOIDED_APIS.items():
                if _within(i.name, api):
                    out["private"].append(
                        f"{i.module} -> {i.target} ({i.name}): use {instead} instead"
                    )
    return {key: sorted(set(lines)) for key, lines in out.items()}


def _report(found: Mapping[str, list[str]]) -> str:
    return "\n".join(
        f"{key} ({len(lines)}):\n" + "\n".join(f"  {line}" for line in lines)
        for key, lines in found.items()
        if lines
    )


def test_neuroflow_imports_point_down() -> None:
    """neuroflow has no import cycle, upward or sideways import, or foreign private import."""
    found = problems(PACKAGE_ROOT, "neuroflow", LAYERS, ALLOWED_PRIVATE, INDEPENDENT_LAYERS)
    assert not any(found.values()), "neuroflow's import graph breaks its layers:\n" + _report(found)


def test_allowed_private_imports_still_exist() -> None:
    """Every allow-listed private import is still in the code (the list only shrinks)."""
    modules = module_names(PACKAGE_ROOT, "neuroflow")
    seen = {(i.module, i.name) for i in read_imports(modules, "neuroflow")}
    assert seen >= ALLOWED_PRIVATE, sorted(ALLOWED_PRIVATE - seen)


def test_every_layer_member_exists() -> None:
    """Every entry of the layer table names a module or package of neuroflow."""
    modules = module_names(PACKAGE_ROOT, "neuroflow")
    missing = [
        member
        for _, members in LAYERS
        for member in members
        if not any(_holds(member, name) for name in modules)
    ]
    assert not missing, missing


def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "fake" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "fake"


FAKE_LAYERS = (
    ("low", ("fake.low",)),
    ("peers", ("fake.mid.p", "fake.mid.q")),
    ("high", ("fake.high", "fake")),
)


def test_checker_finds_planted_problems(tmp_path: Path) -> None:
    """A cycle, upward and sideways imports and private imports of a fake package."""
    root = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": """
                from typing import TYPE_CHECKING

                if TYPE_CHECKING:
                    from fake.high.c import Hidden  # never runs: not an edge


                def f():
                    from fake.high.c import g  # function-level: an edge
                    from scipy.stats._stats import _kendall_dis
                    return g, _kendall_dis
            """,
            "low/b.py": "from fake.low.a import f\n",
            "low/_private.py": "def helper():\n    return 1\n",
            "mid/__init__.py": "",
            "mid/p.py": "from fake.mid.q import x\n",
            "mid/q.py": "from fake.low.b import f as x\n",
            "high/__init__.py": "",
            "high/c.py": """
                import torch

                from fake.low import b
                from fake.low._private import helper
                from fake.low.a import f as _g


                def g():
                    return torch.jit.load, torch._C, helper, b, _g
            """,
            "high/d.py": "from . import c\nfrom .c import g\nfrom ..mid import p\n",
            "high/e.py": """
                import lazy_loader

                tch = lazy_loader.load("torch")


                def h():
                    return tch.jit.script
            """,
        },
    )
    found = problems(root, "fake", FAKE_LAYERS, independent={"peers"})

    assert found["cycles"] == [
        "fake.high.c -> fake.low.a (fake.low.a.f) | fake.high.c -> fake.low.b (fake.low.b)"
        " | fake.low.a -> fake.high.c (fake.high.c.g) | fake.low.b -> fake.low.a (fake.low.a.f)"
    ]
    assert found["upward"] == [
        "fake.low.a -> fake.high.c (fake.high.c.g): layer 'low' imports layer 'high'"
    ]
    assert found["sideways"] == [
        "fake.mid.p -> fake.mid.q (fake.mid.q.x): fake.mid.p imports fake.mid.q, "
        "both of layer 'peers'"
    ]
    assert found["private"] == [
        "fake.high.c -> fake.low._private (fake.low._private.helper)",
        "fake.high.c -> torch (torch._C)",
        "fake.high.c -> torch.jit (torch.jit.load): use torch.export instead",
        "fake.high.e -> torch.jit (torch.jit.script): use torch.export instead",
        "fake.low.a -> scipy.stats._stats (scipy.stats._stats._kendall_dis)",
    ]
    assert found["unplaced"] == ["module 'fake.mid' is in no layer of the layer table."]
    assert "fake.high.d" not in str(found)  # relative imports, downward: fine

    allowed = problems(
        root,
        "fake",
        FAKE_LAYERS,
        {("fake.low.a", "scipy.stats._stats._kendall_dis"), ("fake.high.c", "torch.jit.load")},
    )
    assert len(allowed["private"]) == 3
    assert allowed["sideways"] == []  # without the layer marked independent


def test_checker_names_unplaced_modules(tmp_path: Path) -> None:
    """A module outside every layer is reported, not silently accepted."""
    root = _write_package(tmp_path, {"__init__.py": "", "stray.py": "X = 1\n"})
    found = problems(root, "fake", (("low", ("fake.low",)),))
    assert found["unplaced"] == [
        "module 'fake' is in no layer of the layer table.",
        "module 'fake.stray' is in no layer of the layer table.",
    ]
    with pytest.raises(ValueError, match=r"'fake\.stray' is in no layer"):
        layer_of("fake.stray", (("low", ("fake.low",)),))

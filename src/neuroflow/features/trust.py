"""Which Python code a configuration may ask an extraction job to run.

A ``torch_module`` entry may name a ``builder`` (``"package.module:function"``).
Planning and checking a configuration never import it: they only check, on
disk, that the module it names lies

- inside one of the folders listed in ``features.code_dirs`` (paths resolved,
  symbolic links followed, and the module file confined to the folder), or
- among the files of an installed distribution listed in
  ``features.trusted_packages`` (read from its ``importlib.metadata`` record,
  which imports nothing).

Standard-library and built-in modules (``os``, ``subprocess``, ``builtins``,
...) are refused whatever the lists say. Only the extraction job imports the
module, and it checks again that the file it imported is the one the plan
allowed and that the callable is defined inside the same folder or package.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.metadata
import logging
import re
import sys
import sysconfig
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BuilderOrigin",
    "builder_trust",
    "file_digest",
    "find_module_file",
    "import_trusted_builder",
    "locate_builder",
]

logger = logging.getLogger(__name__)

#: ``"package.module:function"``, a dotted attribute path after the colon.
BUILDER_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
#: What a refused builder's message says is allowed.
ALLOWED = (
    "a builder must be a function in a module under a folder of `features.code_dirs` or in an "
    "installed distribution listed in `features.trusted_packages`"
)


@dataclass(frozen=True)
class BuilderOrigin:
    """Where the module of a ``builder`` lies on disk, found without importing it.

    Attributes
    ----------
    module : str
        The module name (before the colon).
    file : Path
        The module's file (``.py``, ``__init__.py`` or an extension module), resolved.
    root : Path
        The folder (or single-module file) every part of the builder must lie in:
        the ``code_dirs`` folder, or the distribution's top-level package.
    source : str
        ``"code_dirs"`` or ``"trusted_packages"``.
    where : str
        The folder of ``features.code_dirs`` or the distribution name that allowed it.
    """

    module: str
    file: Path
    root: Path
    source: str
    where: str


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes.

    Parameters
    ----------
    path : str | Path
        A file.

    Returns
    -------
    digest : str
        64 hexadecimal characters.
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _python_library_dirs() -> list[Path]:
    """Folders of Python's own library and of its installed packages."""
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    paths = {sysconfig.get_paths().get(name) for name in names}
    return [Path(p).resolve() for p in paths if p]


def builder_trust(features: Mapping[str, Any]) -> dict[str, list[str]]:
    """Check the trust settings of the ``features`` section and resolve the folders.

    Parameters
    ----------
    features : dict
        The ``features`` section; reads ``code_dirs`` (folders, relative ones
        read from the working folder) and ``trusted_packages`` (distribution
        names), both optional.

    Returns
    -------
    trust : dict
        ``code_dirs`` (absolute, symbolic links resolved) and
        ``trusted_packages`` (as given), both lists of str.
    """
    dirs = features.get("code_dirs") or []
    packages = features.get("trusted_packages") or []
    if not isinstance(dirs, list | tuple) or not all(isinstance(d, str) and d for d in dirs):
        raise ValueError(f"`features.code_dirs` must be a list of folders, got {dirs!r} instead.")
    if not isinstance(packages, list | tuple) or not all(
        isinstance(p, str) and p for p in packages
    ):
        raise ValueError(
            f"`features.trusted_packages` must be a list of distribution names, got "
            f"{packages!r} instead."
        )
    library = _python_library_dirs()
    resolved = []
    for i, value in enumerate(dirs):
        path = Path(value).expanduser().resolve()
        if not path.is_dir():
            raise FileNotFoundError(
                f"`features.code_dirs[{i}]` must be an existing folder, got {value!r} instead "
                f"(looked at {path}; relative paths are read from the working folder "
                f"{Path.cwd()})."
            )
        if any(path.is_relative_to(lib) for lib in library):
            raise ValueError(
                f"`features.code_dirs[{i}]` must be a folder of your own code, got {value!r} "
                f"instead, which lies in Python's library or installed packages ({path}); "
                "list an installed distribution in `features.trusted_packages` instead."
            )
        resolved.append(str(path))
    return {"code_dirs": resolved, "trusted_packages": [str(p) for p in packages]}


def _module_candidates(parts: Sequence[str]) -> list[str]:
    """Relative paths (POSIX) a module of dotted name ``parts`` may have."""
    base = "/".join(parts)
    suffixes = [*importlib.machinery.SOURCE_SUFFIXES, *importlib.machinery.EXTENSION_SUFFIXES]
    return [f"{base}/__init__.py"] + [base + suffix for suffix in suffixes]


def find_module_file(module: str, folders: Sequence[str | Path]) -> Path | None:
    """The file of a module under the first folder that has it, found without importing.

    Parameters
    ----------
    module : str
        Dotted module name.
    folders : sequence of str | Path
        Folders to look in, in order (e.g. ``sys.path``; ``""`` is the working folder).

    Returns
    -------
    file : Path | None
        The ``.py``, ``__init__.py`` or extension module file, or None.
    """
    parts = module.split(".")
    for folder in folders:
        base = Path(folder or ".")
        if not base.is_dir():
            continue
        for rel in _module_candidates(parts):
            if (base / rel).is_file():
                return (base / rel).resolve()
    return None


def _in_code_dir(parts: Sequence[str], folder: Path) -> BuilderOrigin | None:
    for rel in _module_candidates(parts):
        candidate = folder / rel
        if candidate.is_file():
            file = candidate.resolve()
            if not file.is_relative_to(folder):
                return None  # a link out of the folder: not confined
            return BuilderOrigin(".".join(parts), file, folder, "code_dirs", str(folder))
    return None


def _in_distribution(parts: Sequence[str], name: str) -> BuilderOrigin | None:
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError as err:
        raise ValueError(
            f"`features.trusted_packages` lists {name!r}, which is not an installed "
            "distribution; install it or leave it out of the list."
        ) from err
    files = {str(f).replace("\\", "/"): f for f in dist.files or []}
    for rel in _module_candidates(parts):
        if rel in files:
            file = Path(dist.locate_file(files[rel])).resolve()
            package = any(key.startswith(parts[0] + "/") for key in files)
            root = Path(dist.locate_file(parts[0])).resolve() if package else file
            if file.is_file():
                return BuilderOrigin(".".join(parts), file, root, "trusted_packages", name)
    return None


def locate_builder(
    spec: Any,
    trust: Mapping[str, Sequence[str]] | None,
    *,
    entry: str = "",
    extra_packages: Sequence[str] = (),
) -> BuilderOrigin:
    """Find the module file of a ``builder`` among the trusted places, importing nothing.

    Parameters
    ----------
    spec : str
        ``"package.module:function"``.
    trust : dict | None
        ``code_dirs`` and ``trusted_packages`` (see :func:`builder_trust`); None
        trusts nothing.
    entry : str
        The entry's name, for messages.
    extra_packages : sequence of str
        Distributions trusted besides the listed ones (those of a packaged preset).

    Returns
    -------
    origin : BuilderOrigin
        Where the module lies and what allowed it.
    """
    which = f" of `features.extractors` entry {entry!r}" if entry else ""
    if not isinstance(spec, str) or not BUILDER_RE.match(spec):
        raise ValueError(
            f"`builder`{which} must be 'package.module:function', got {spec!r} instead."
        )
    module = spec.partition(":")[0]
    parts = module.split(".")
    if parts[0] in sys.stdlib_module_names or parts[0] in sys.builtin_module_names:
        raise ValueError(
            f"`builder` {spec!r}{which} names {parts[0]!r}, a module of Python's standard "
            f"library, which is never allowed: {ALLOWED}."
        )
    trust = trust or {}
    dirs = [Path(d) for d in trust.get("code_dirs", [])]
    packages = [*trust.get("trusted_packages", []), *extra_packages]
    for folder in dirs:
        origin = _in_code_dir(parts, folder)
        if origin is not None:
            return origin
    for name in packages:
        origin = _in_distribution(parts, name)
        if origin is not None:
            return origin
    looked = [f"`features.code_dirs` {[str(d) for d in dirs]}"]
    looked.append(f"`features.trusted_packages` {list(trust.get('trusted_packages', []))}")
    raise ValueError(
        f"`builder` {spec!r}{which} names module {module!r}, which lies in none of "
        f"{' nor '.join(looked)}: {ALLOWED}. Add the folder holding {parts[0]!r} to "
        "`features.code_dirs`, or the installed distribution providing it to "
        "`features.trusted_packages`."
    )


def _defining_file(target: Any) -> Path | None:
    """File of the module that defines a callable (None when it has none)."""
    name = getattr(target, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None


def import_trusted_builder(
    spec: str,
    trust: Mapping[str, Sequence[str]] | None,
    *,
    entry: str = "",
    extra_packages: Sequence[str] = (),
) -> tuple[Callable[..., Any], BuilderOrigin]:
    """Import the callable a ``builder`` names, after checking where it lies.

    Only extraction jobs call this; planning uses :func:`locate_builder`.

    Parameters
    ----------
    spec : str
        ``"package.module:function"``.
    trust : dict | None
        See :func:`locate_builder`.
    entry : str
        The entry's name, for messages.
    extra_packages : sequence of str
        Distributions trusted besides the listed ones.

    Returns
    -------
    builder : callable
        The function (or class, or bound method) the spec names.
    origin : BuilderOrigin
        Where its module lies.
    """
    origin = locate_builder(spec, trust, entry=entry, extra_packages=extra_packages)
    module_name, _, attr_path = spec.partition(":")
    added = origin.source == "code_dirs" and str(origin.root) not in sys.path
    if added:
        sys.path.insert(0, str(origin.root))
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"`builder` {spec!r}: module {module_name!r} ({origin.file}) cannot be imported "
            f"({err})."
        ) from err
    finally:
        if added:
            sys.path.remove(str(origin.root))
    imported = getattr(target, "__file__", None)
    if imported is None or Path(imported).resolve() != origin.file:
        raise ValueError(
            f"`builder` {spec!r}: importing {module_name!r} gave {imported!r}, not the file "
            f"{origin.file} allowed by {origin.source} ({origin.where}); another module of "
            "that name comes first on the Python path: rename your module."
        )
    for attr in attr_path.split("."):
        if not hasattr(target, attr):
            raise ValueError(
                f"`builder` {spec!r}: {getattr(target, '__name__', module_name)!r} has no "
                f"attribute {attr!r}."
            )
        target = getattr(target, attr)
        if isinstance(target, types.ModuleType):
            raise ValueError(
                f"`builder` {spec!r} must name a callable defined in {module_name!r}, got "
                f"module {target.__name__!r} after the colon; {ALLOWED}."
            )
    if not callable(target):
        raise ValueError(f"`builder` {spec!r} must name a callable, got {type(target).__name__}.")
    defined = _defining_file(target)
    if defined is None or not (defined == origin.root or defined.is_relative_to(origin.root)):
        raise ValueError(
            f"`builder` {spec!r} must name a callable defined under {origin.root}, got one "
            f"defined in {defined or 'no file'}; {ALLOWED}."
        )
    return target, origin

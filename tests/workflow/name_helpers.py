"""Every spelling of every layer across a run's artifacts.

A layer has two spellings (:mod:`neuroflow.names`): its identifier ``<owner>:<layer>``
and its file-system-safe form ``<owner>__<layer>``, where the owner is its extractor or
a layer sweep over that extractor; the layer's name appears alone only beside its
extractor (a feature store in its extractor's folder, a ``layer`` column, a ``layer-``
entity of a file name). :func:`layer_spellings` finds every place where a name of a
layer with punctuation (``blocks.7``, ``avg-pooling``, ``depth-0.5``) is written in
another way: ``blocks_7``, ``blocks-7``, ``efficientnetblocks7``, ``_blocks.7``, or
after an owner that is neither the extractor nor one of its sweeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd
from workflow_helpers import report_data

#: A feature store's folder: ``<extractor>-<version>``.
_FEATURES_DIR = re.compile(r"^(?P<extractor>[A-Za-z0-9_]+)-[0-9a-f]{10}$")
#: Runs of characters a name is made of.
_TOKEN = re.compile(r"[A-Za-z0-9_.:+\-]+")
#: What may stand right before a layer's name without an owner: a ``layer-`` entity, the
#: end of a BIDS entity (``..._run-1_`` in ``sub-01_task-movie_run-1_blocks.7.zarr``), or
#: other layer names joined by ``+`` (the ``layer`` column of a joint model).
_BARE_PREFIX = re.compile(
    r"(^|[_/])layer-$|(^|_)(sub|ses|task|acq|run)-[A-Za-z0-9]+_$|^[A-Za-z0-9.\-]+(\+[A-Za-z0-9.\-]+)*\+$"
)
#: What may stand right before an owner: the start, an entity key, ``_``, ``+`` or ``/``.
_OWNER_START = re.compile(r"(^|[_+/]|-)$")
#: Attributes that name something other than a layer (the PyTorch module a layer was
#: read from, ``_blocks.7``).
_OTHER_NAMES = {"module"}


def run_layers(results: Path) -> dict[str, set[str]]:
    """Extractor -> its layer names, from the feature stores of a run."""
    layers: dict[str, set[str]] = {}
    for store in (results / "features").glob("*/*.zarr"):
        match = _FEATURES_DIR.match(store.parent.name)
        if match:
            layers.setdefault(match["extractor"], set()).add(store.name.removesuffix(".zarr"))
    return layers


def run_sweeps(results: Path) -> dict[str, str]:
    """Sweep -> the extractor it sweeps, from the run's ``layer_sweep.tsv``."""
    sweeps: dict[str, str] = {}
    for table in (results / "summary").glob("*/layer_sweep.tsv"):
        rows = pd.read_csv(table, sep="\t", dtype=str)
        if {"sweep", "extractor"} <= set(rows.columns):
            sweeps.update(zip(rows["sweep"], rows["extractor"], strict=True))
    return sweeps


def _strings(value: object) -> Iterator[str]:
    """Every key and string value of a JSON document, except under :data:`_OTHER_NAMES`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            if key not in _OTHER_NAMES:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def artifact_strings(*folders: Path, report: Path | None = None) -> Iterator[tuple[str, str]]:
    """(where, text) of every file and folder name, table cell and JSON string under
    ``folders``, and of the report's results."""
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder).as_posix()
            yield rel, path.name
            if path.suffix == ".json" and path.stat().st_size < 20_000_000:
                for text in _strings(json.loads(path.read_text())):
                    yield rel, text
            elif path.suffix == ".tsv":
                rows = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
                for text in [*rows.columns, *rows.to_numpy().ravel()]:
                    yield rel, str(text)
    if report is not None:
        results, _ = report_data(report.read_text())
        for text in _strings(results):
            yield report.name, text


def _loose(layer: str) -> re.Pattern[str]:
    """``layer`` with any or no punctuation between its parts (``blocks.7``: ``blocks_7``,
    ``blocks-7``, ``blocks7``), not followed by a letter or digit."""
    parts = re.split(r"[^A-Za-z0-9]+", layer)
    return re.compile("[._\\-]?".join(map(re.escape, parts)) + r"(?![A-Za-z0-9])")


def misspellings(
    strings: Iterable[tuple[str, str]], layers: dict[str, set[str]], sweeps: dict[str, str]
) -> list[str]:
    """``where: text`` of each string that spells a layer in a way other than its two forms.

    Parameters
    ----------
    strings : iterable of (str, str)
        (where, text), e.g. from :func:`artifact_strings`.
    layers : dict of str to set of str
        Extractor -> its layer names (see :func:`run_layers`); names without punctuation
        (``output``) cannot be misspelled and are not checked.
    sweeps : dict of str to str
        Sweep -> its extractor (see :func:`run_sweeps`).
    """
    # a loose spelling holds each alphanumeric part of the layer as it is: a token
    # without the longest part cannot match, and most tokens are skipped by that test
    checked = [
        (extractor, layer, _loose(layer), max(re.split(r"[^A-Za-z0-9]+", layer), key=len))
        for extractor, names in layers.items()
        for layer in names
        if re.search(r"[^A-Za-z0-9]", layer)
    ]
    owners = {e: {e} | {s for s, x in sweeps.items() if x == e} for e in layers}
    bad = []
    for where, text in strings:
        for token in _TOKEN.findall(text):
            for extractor, layer, pattern, part in checked:
                if part not in token:
                    continue
                for match in pattern.finditer(token):
                    prefix = token[: match.start()]
                    if not _spelled_right(prefix, match[0], layer, owners[extractor]):
                        bad.append(f"{where}: {token!r} (layer {extractor}:{layer})")
    return sorted(set(bad))


def _spelled_right(prefix: str, found: str, layer: str, owners: set[str]) -> bool:
    """Whether ``found`` after ``prefix`` is the layer in one of its two forms (or alone)."""
    if found != layer:
        return False
    if not prefix or _BARE_PREFIX.search(prefix):
        return True
    for owner in owners:
        for separator in (":", "__"):
            head = prefix.removesuffix(owner + separator)
            if head != prefix and _OWNER_START.search(head):
                return True
    return False

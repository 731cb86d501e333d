"""Stimulus features of a generated demo, as the workflow's default extractors compute them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The two default extractors of the workflow (image statistics and packaged MiniLM).
DEMO_EXTRACTORS: dict[str, dict[str, Any]] = {
    "image_statistics": {"name": "image_statistics", "extractor": "image_statistics"},
    "minilm": {
        "name": "minilm",
        "extractor": "sentence_transformer",
        "model": "all-MiniLM-L6-v2",
        "device": "cpu",
    },
}


def extract_demo_features(
    root: Path, tables: Sequence[Path], work: Path, provenance: Mapping[str, Any]
) -> dict[str, Path]:
    """Run ``extract_features`` for every default extractor on the demo at ``root``.

    Returns
    -------
    stores : dict of str to Path
        Extractor name to its (single-layer) feature store under ``work``.
    """
    from neuroflow.features.extract import extract_features

    stores = {}
    for name, entry in DEMO_EXTRACTORS.items():
        paths = extract_features(
            stimuli_dir=root / "stimuli",
            stimulus_ids=list(tables),
            captions=root / "stimuli" / "captions.tsv",
            output=work / f"features_{name}",
            config=entry,
            provenance=dict(provenance),
        )
        stores[name] = next(iter(paths.values()))
    return stores

"""What the ``predict`` stage runs: the stimulus pools that exist and the models that read them.

A pool (``predict.stimulus_sets.<name>``) is used when its folder or table exists (for
the demo: when the generator writes it); an fMRI encoding model is applied to a pool
when every extractor of its feature spaces can read the pool
(:func:`neuroflow.features.pools.pool_extractor_problem`). Everything left out gets
one note, as other analyses that do not apply do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuroflow.features.pools import (
    pool_extractor_problem,
    pool_kind,
    pool_path,
    read_stimulus_pool,
)

__all__ = ["DEFAULT_STIMULUS_SETS", "PoolPlan", "PredictPlan", "plan_predict"]

#: The schema's default pools: the conventional ``stimuli/pool/`` folder, used when it
#: exists (the demo writes one) and skipped without a note when it does not.
DEFAULT_STIMULUS_SETS: dict[str, dict[str, Any]] = {
    "pool": {"folder": "pool", "glob": "*.png", "captions": "pool/captions.tsv"}
}


def _filled(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    """An entry without its unset keys (so a validated entry equals its plain spelling)."""
    return {k: v for k, v in (spec or {}).items() if v is not None}


@dataclass(frozen=True)
class PoolPlan:
    """One pool the run uses.

    Attributes
    ----------
    name : str
        The ``predict.stimulus_sets`` key.
    kind : str
        ``"image"`` or ``"text"``.
    spec : dict
        The entry with absolute paths (what the extraction job reads).
    files : tuple of Path
        The files the pool is read from (images, captions or sentences table), the
        extraction's inputs; empty for the demo, whose files the demo job writes.
    identity : dict
        What identifies the pool in version ids: the entry, and the file list with the
        tables' checksums for a real dataset.
    """

    name: str
    kind: str
    spec: Mapping[str, Any]
    files: tuple[Path, ...]
    identity: Mapping[str, Any]


@dataclass(frozen=True)
class PredictPlan:
    """The pools, the extractors run over each, and the models applied to each.

    Attributes
    ----------
    pools : dict of str to PoolPlan
    models : dict of str to tuple of str
        fMRI encoding model -> the pools it is applied to (models with none are absent).
    extractors : dict of str to tuple of str
        Extractor entry name -> the pools it extracts (those of every model applied).
    notes : tuple of str
        Pools and models left out, with the reason.
    eeg_models : dict of str to tuple of str
        EEG encoding model -> the pools it is applied to.
    """

    pools: Mapping[str, PoolPlan]
    models: Mapping[str, tuple[str, ...]]
    extractors: Mapping[str, tuple[str, ...]]
    notes: tuple[str, ...]
    eeg_models: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _absolute(spec: Mapping[str, Any], stimuli_dir: Path) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if v is not None}
    for key in ("folder", "captions", "sentences"):
        if out.get(key) is not None:
            out[key] = str(pool_path(out[key], stimuli_dir))
    if "folder" in out:
        out.setdefault("glob", "*.png")
    return out


def _demo_pool(spec: dict[str, Any], kind: str, files: set[Path], folders: set[Path]) -> bool:
    """Whether the demo generator writes the pool's folder (one of ``folders``, those
    that hold its ``files``) or table (one of ``files``)."""
    if kind == "image":
        return Path(spec["folder"]) in folders
    return Path(spec["sentences"]) in files


def _real_pool(name: str, spec: dict[str, Any], kind: str) -> tuple[tuple[Path, ...], dict]:
    pool = read_stimulus_pool(name, spec, Path("."))
    tables = [Path(spec[k]) for k in ("captions", "sentences") if spec.get(k)]
    files = [pool.folder / i for i in pool.ids] if pool.folder is not None else []
    identity = {
        "ids": list(pool.ids),
        "tables": {t.name: _checksum(t) for t in tables},
    }
    return tuple(files + tables), identity


def _pools(
    sets: Mapping[str, Mapping[str, Any]],
    stimuli_dir: Path,
    demo_files: Sequence[Path] | None,
    notes: list[str],
) -> dict[str, PoolPlan]:
    pools: dict[str, PoolPlan] = {}
    written = set(demo_files or ())
    folders = {f.parent for f in written}
    folders.update(*(folder.parents for folder in list(folders)))
    for name, raw in sets.items():
        kind = pool_kind(raw, name)
        spec = _absolute(raw, stimuli_dir)
        where = Path(spec.get("folder") or spec.get("sentences"))
        demo = demo_files is not None and where.is_relative_to(stimuli_dir.parent)
        exists = _demo_pool(spec, kind, written, folders) if demo else where.exists()
        if not exists:
            # the conventional stimuli/pool/ of the defaults is optional: no note
            if _filled(raw) != _filled(DEFAULT_STIMULUS_SETS.get(name)):
                what = "the demo dataset writes no" if demo else "there is no"
                notes.append(f"predict/{name}: skipped, {what} {where}")
            continue
        captions = spec.get("captions")
        if captions and not (Path(captions) in written if demo else Path(captions).is_file()):
            notes.append(
                f"predict/{name}: no captions table {captions}, so text models leave it out"
            )
            del spec["captions"]
        files, identity = ((), {}) if demo else _real_pool(name, spec, kind)
        pools[name] = PoolPlan(name, kind, spec, files, {"spec": dict(raw), **identity})
    return pools


def plan_predict(
    config: Mapping[str, Any],
    *,
    stimuli_dir: Path,
    models: Mapping[str, Sequence[str]],
    extractor_of: Callable[[str], Mapping[str, Any]],
    demo_files: Sequence[Path] | None = None,
    eeg_models: Mapping[str, Sequence[str]] | None = None,
) -> PredictPlan:
    """Decide the pools, extractions and predictions of the ``predict`` stage.

    Parameters
    ----------
    config : dict
        The ``predict`` section.
    stimuli_dir : Path
        The dataset's ``stimuli/`` folder (relative pool paths start there).
    models : dict of str to list of str
        Every fMRI encoding model that runs -> the extractor names of its feature
        spaces.
    extractor_of : callable
        Extractor name -> its ``features.extractors`` entry.
    demo_files : list of Path | None
        For the demo, every file the generator writes (its dataset does not exist
        yet when the run is planned); None for a real dataset.
    eeg_models : dict of str to list of str | None
        The same for every EEG encoding model that runs.

    Returns
    -------
    plan : PredictPlan
    """
    notes: list[str] = []
    sets = config.get("stimulus_sets") or {}
    pools = _pools(sets, Path(stimuli_dir), demo_files, notes)
    eeg_models = dict(eeg_models or {})
    wanted = list(config.get("models") or [])
    for model in wanted:
        if model not in models and model not in eeg_models:
            notes.append(f"predict/{model}: skipped, no encoding model {model!r} runs")
    extractors: dict[str, list[str]] = {}
    applied = _apply(models, wanted, pools, extractor_of, extractors, notes, "predict")
    applied_eeg = _apply(eeg_models, wanted, pools, extractor_of, extractors, notes, "predict_eeg")
    return PredictPlan(
        pools=pools,
        models=applied,
        extractors={k: tuple(v) for k, v in extractors.items()},
        notes=tuple(notes),
        eeg_models=applied_eeg,
    )


def _apply(
    models: Mapping[str, Sequence[str]],
    wanted: Sequence[str],
    pools: Mapping[str, PoolPlan],
    extractor_of: Callable[[str], Mapping[str, Any]],
    extractors: dict[str, list[str]],
    notes: list[str],
    stage: str,
) -> dict[str, tuple[str, ...]]:
    """The pools each model can read (and the extractions that adds, in place)."""
    applied: dict[str, tuple[str, ...]] = {}
    for model in (m for m in models if not wanted or m in wanted):
        names = list(dict.fromkeys(models[model]))
        usable = []
        for pool in pools.values():
            problems = [
                p
                for p in (
                    pool_extractor_problem(
                        extractor_of(n), pool.kind, bool(pool.spec.get("captions"))
                    )
                    for n in names
                )
                if p
            ]
            if problems:
                notes.append(f"{stage}/{model}: not applied to {pool.name}, {problems[0]}")
                continue
            usable.append(pool.name)
            for n in names:
                extractors.setdefault(n, [])
                if pool.name not in extractors[n]:
                    extractors[n].append(pool.name)
        if usable:
            applied[model] = tuple(usable)
    return applied

"""`neuroflow inspect` and `neuroflow versions`: what a store holds and where it came from."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow.artifacts import PARTIAL_MARKER, PROVENANCE_KEY, read_provenance
from neuroflow.cli.configs import _load_plan

if TYPE_CHECKING:
    pass

__all__ = ["cmd_inspect", "cmd_versions"]


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: obj}


def _version_record(folder: Path) -> dict[str, Any]:
    """Provenance of one stage-version folder (from its manifest or first store)."""
    manifest = folder / ".neuroflow.json"
    if manifest.exists():
        return json.loads(manifest.read_text())
    for store in sorted(folder.rglob("*.zarr")):
        if PARTIAL_MARKER in store.name or not (store / "zarr.json").exists():
            continue
        try:
            return read_provenance(store)
        except Exception:
            continue
    return {}


def _stage_version_dirs(results: Path, stage: str | None) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    if not results.exists():
        return out
    # hidden folders (.neuroflow: the lock and the run records) are no stages
    for stage_dir in sorted(
        p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")
    ):
        if stage and stage_dir.name != stage:
            continue
        out[stage_dir.name] = sorted(
            p for p in stage_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
    return out


def _comparable(record: Mapping[str, Any]) -> dict[str, Any]:
    """Config values and upstream versions of a version folder, flattened for diffing."""
    flat = _flatten(record.get("config", {}))
    upstream: dict[str, set[str]] = {}
    for item in record.get("inputs", []):
        if item.get("stage") and item.get("version"):
            upstream.setdefault(f"input {item['stage']}", set()).add(str(item["version"]))
    flat.update({key: ",".join(sorted(v)) for key, v in upstream.items()})
    return flat


# --------------------------------------------------------------------------- inspect
def _describe_store(path: Path) -> list[str]:
    import zarr

    group = zarr.open_group(str(path), mode="r")
    lines = [f"Store: {path}", "Arrays:"]
    for name, array in sorted(group.arrays()):
        meta = array.metadata
        dims = getattr(meta, "dimension_names", None) or array.attrs.get("_ARRAY_DIMENSIONS")
        codecs = getattr(meta, "codecs", None)
        codec_names = [type(c).__name__ for c in codecs] if codecs else []
        chunks = getattr(array, "chunks", None)
        lines.append(
            f"  {name:<24} dims={tuple(dims) if dims else ()} shape={array.shape} "
            f"dtype={array.dtype} chunks={chunks} codecs={codec_names}"
        )
    attrs = {k: v for k, v in group.attrs.items() if k != PROVENANCE_KEY}
    if attrs:
        lines.append("Attributes:")
        for key, value in sorted(attrs.items()):
            text = json.dumps(value, default=str)
            lines.append(f"  {key} = {text[:200]}{'...' if len(text) > 200 else ''}")
    return lines


def _located_input(recorded: str, stage: str | None, store: Path, store_stage: str | None) -> Path:
    """Where an upstream input recorded in ``store``'s provenance lies now.

    Stored paths are absolute, or relative to the folder the workflow ran in; either
    is used when it exists. Otherwise an input written by a stage is looked up in the
    results folder that holds ``store`` (the folders from the input's stage folder
    on), so that a results folder that was moved, or inspected from another folder,
    still resolves.
    """
    path = Path(recorded)
    if path.exists() or not stage or not store_stage:
        return path
    here = str(store_stage).split("/")[0]
    there = str(stage).split("/")[0]
    parts, own = path.parts, store.resolve().parts
    if there not in parts or here not in own[:-1]:
        return path
    results = Path(*own[: len(own) - 2 - own[:-1][::-1].index(here)])
    moved = results.joinpath(*parts[len(parts) - 1 - parts[::-1].index(there) :])
    return moved if moved.exists() else path


def _provenance_chain(path: Path, depth: int = 0, seen: set[str] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    pad = "  " * depth
    key = str(path.resolve())
    if key in seen:
        return [f"{pad}- {path} (see above)"]
    seen.add(key)
    if path.suffix == ".zarr" and (path / "zarr.json").exists():
        record = read_provenance(path)
    elif (path / ".neuroflow.json").exists():
        record = json.loads((path / ".neuroflow.json").read_text())
    else:
        return [f"{pad}- {path} (raw input)"]
    lines = [
        f"{pad}- {path}",
        f"{pad}  stage={record.get('stage')} version={record.get('version')} "
        f"created={record.get('created')} host={record.get('host')}",
    ]
    inputs = record.get("inputs", [])
    parents: dict[str, Path] = {}
    for item in inputs:
        p = _located_input(item["path"], item.get("stage"), path, record.get("stage"))
        # Inputs inside a versioned dataset folder are summarised by that folder.
        for parent in [p, *p.parents]:
            if (parent / ".neuroflow.json").exists():
                p = parent
                break
        parents.setdefault(str(p), p)
    for parent in parents.values():
        lines.extend(_provenance_chain(parent, depth + 1, seen))
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print a store's arrays, attributes and provenance chain, or verify stores.

    Exits 1 when a store differs from its manifest (with ``--verify``: also in
    checksums; on a folder: any store under it), 2 on a usage error.
    """
    from neuroflow.artifacts import find_stores
    from neuroflow.manifests import read_manifest, verify_store

    path = Path(args.path)
    if not path.exists():
        print(f"neuroflow inspect: {path} does not exist.", file=sys.stderr)
        return 2
    is_store = (path / "zarr.json").exists()
    if args.verify and not is_store and path.is_dir():
        counts = {"intact": 0, "damaged": 0, "without a manifest": 0}
        n_files = n_bytes = 0
        for store in find_stores(path):
            problems = verify_store(store, checksums=True)
            manifest = read_manifest(store) if not problems else None
            if problems:
                counts["damaged"] += 1
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                print(f"DAMAGED {store}: {problems[0]}{more}")
            elif manifest is None:
                counts["without a manifest"] += 1
            else:
                counts["intact"] += 1
                n_files += len(manifest["files"])
                n_bytes += sum(int(e["size"]) for e in manifest["files"].values())
        summary = ", ".join(f"{n} {what}" for what, n in counts.items())
        total = sum(counts.values())
        print(
            f"Verified {total} store{'s' * (total != 1)} under {path}: {summary} "
            f"({n_files} files, {n_bytes / 1e6:.1f} MB intact)."
        )
        return 1 if counts["damaged"] else 0
    if not is_store and not (path / ".neuroflow.json").exists():
        print(f"neuroflow inspect: {path} is not a neuroflow artifact.", file=sys.stderr)
        return 2
    if is_store:
        problems = verify_store(path, checksums=args.verify)
        if problems:
            print(f"Store {path} is damaged ({len(problems)} problem{'s' * (len(problems) != 1)}):")
            print("\n".join(f"  {problem}" for problem in problems))
            print("Rerun the stage that wrote it (delete the store, then run snakemake again).")
            return 1
        manifest = read_manifest(path)
        files = manifest["files"].values() if manifest else []
        sizes = f"{len(files)} files, {sum(int(e['size']) for e in files) / 1e6:.1f} MB"
        if args.verify:
            print(
                f"Verified: {sizes}, all intact"
                if manifest
                else f"{path} has no manifest (written by an older neuroflow): nothing to verify "
                "it against; rerun the stage that wrote it to get one."
            )
            return 0
        print("\n".join(_describe_store(path)))
        print(
            f"Integrity: {sizes}, names and sizes match the manifest (--verify compares "
            "checksums too)"
            if manifest
            else "Integrity: no manifest (written by an older neuroflow), not checked"
        )
        record = read_provenance(path)
    else:
        record = json.loads((path / ".neuroflow.json").read_text())
    print("Provenance:")
    for key in ("stage", "version", "format_version", "created", "host"):
        print(f"  {key}: {record.get(key)}")
    print("  config: " + json.dumps(record.get("config", {}), sort_keys=True))
    print("  software: " + json.dumps(record.get("software", {}), sort_keys=True))
    print("Provenance chain:")
    print("\n".join(_provenance_chain(path, 1)))
    return 0


# --------------------------------------------------------------------------- versions
def cmd_versions(args: argparse.Namespace) -> int:
    """List versions on disk, what differs between them, and the selected one."""
    plan, source = _load_plan(args)
    selected = {str(p) for p in plan.all_version_dirs()}
    found = _stage_version_dirs(plan.results, args.stage)
    if not found:
        where = f"results/{args.stage}" if args.stage else str(plan.results)
        print(f"No versions on disk under {where}.")
        return 0
    for stage, folders in found.items():
        print(f"{stage}:")
        records = {f: _comparable(_version_record(f)) for f in folders}
        keys = sorted({k for r in records.values() for k in r})
        differing = [k for k in keys if len({json.dumps(r.get(k)) for r in records.values()}) > 1]
        for folder in folders:
            mark = "*" if str(folder) in selected else " "
            diff = ", ".join(
                f"{k}={json.dumps(records[folder].get(k))}" for k in differing[: args.max_keys]
            )
            print(f" {mark} {folder.name:<32} {diff}")
    which = "that config" if source else "the config of these arguments"
    print(f"(* = selected by {which})")
    return 0

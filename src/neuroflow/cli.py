"""The ``neuroflow`` command line: inspect artifacts, list versions, clean up.

Run ``neuroflow --help`` or ``neuroflow <command> --help``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neuroflow import __version__
from neuroflow.artifacts import PARTIAL_MARKER, PROVENANCE_KEY, read_provenance

__all__ = ["main"]

DEFAULT_CONFIG = "config/config.yaml"
DEFAULT_SCHEMA = "workflow/schemas/config.schema.yaml"


# --------------------------------------------------------------------------- helpers
def _load_plan(args: argparse.Namespace) -> Any:
    from neuroflow.config import load_config
    from neuroflow.workflow.plan import WorkflowPlan

    config = load_config(args.config, args.schema)
    return WorkflowPlan(config)


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
    for stage_dir in sorted(p for p in results.iterdir() if p.is_dir()):
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
        p = Path(item["path"])
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
    """Print a store's arrays, attributes and provenance chain."""
    path = Path(args.path)
    if not path.exists():
        print(f"neuroflow inspect: {path} does not exist.", file=sys.stderr)
        return 2
    if not (path / "zarr.json").exists() and not (path / ".neuroflow.json").exists():
        print(f"neuroflow inspect: {path} is not a neuroflow artifact.", file=sys.stderr)
        return 2
    if (path / "zarr.json").exists():
        print("\n".join(_describe_store(path)))
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
    plan = _load_plan(args)
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
    print("(* = selected by the current config)")
    return 0


# --------------------------------------------------------------------------- gc
def cmd_gc(args: argparse.Namespace) -> int:
    """Remove stage versions (and interrupted writes) the config no longer reaches."""
    plan = _load_plan(args)
    keep = {p.resolve() for p in plan.all_version_dirs()}
    doomed: list[Path] = []
    for folders in _stage_version_dirs(plan.results, None).values():
        doomed.extend(f for f in folders if f.resolve() not in keep)
    if plan.results.exists():
        doomed.extend(p for p in plan.results.rglob(f"*{PARTIAL_MARKER}*") if p.is_dir())
    if not doomed:
        print("Nothing to remove.")
        return 0
    for path in doomed:
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        print(f"{'would remove' if args.dry_run else 'removing'} {path} ({size / 1e6:.1f} MB)")
        if not args.dry_run:
            shutil.rmtree(path, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------- demo-data
def cmd_demo_data(args: argparse.Namespace) -> int:
    """Generate the embedded demo dataset into a folder."""
    from neuroflow.artifacts import build_provenance
    from neuroflow.config import load_schema
    from neuroflow.config.validation import fill_defaults, validate_config
    from neuroflow.demo import generate_demo_dataset
    from neuroflow.workflow.versions import dataset_identity, stage_versions

    output = Path(args.output)
    if output.is_dir() and any(output.iterdir()) and not (output / ".neuroflow.json").is_file():
        if not args.force:
            print(
                f"neuroflow: {output} already holds files that neuroflow did not write; "
                "generating the demo there would replace them. Choose an empty or new folder, "
                "or pass --force to replace its content.",
                file=sys.stderr,
            )
            return 2
    elif output.exists() and not output.is_dir():
        print(f"neuroflow: {output} exists and is not a folder.", file=sys.stderr)
        return 2
    schema = load_schema(args.schema)
    config = validate_config(fill_defaults({}, schema), schema)
    if args.seed is not None:
        config["demo"]["seed"] = args.seed
    versions = stage_versions(config)
    provenance = build_provenance(
        stage="demo", version=versions["demo"], config=dataset_identity(config)["demo"]
    )
    out = generate_demo_dataset(output=output, config=config["demo"], provenance=provenance)
    print(f"Demo dataset written to {out}")
    return 0


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``neuroflow`` command."""
    parser = argparse.ArgumentParser(
        prog="neuroflow",
        description="neuroflow: inspect and manage the versioned artifacts of the workflow. "
        "Run the workflow itself with `snakemake`.",
    )
    parser.add_argument("--version", action="version", version=f"neuroflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_config_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", default=DEFAULT_CONFIG, help="config file (%(default)s)")
        p.add_argument("--schema", default=DEFAULT_SCHEMA, help="config schema (%(default)s)")

    p = sub.add_parser(
        "inspect",
        help="show a store's arrays, attributes and provenance chain",
        description="Show a zarr artifact's arrays (dims, shape, dtype, chunks, codecs), its "
        "attributes and its provenance chain back to the raw inputs.",
    )
    p.add_argument("path", help="a .zarr store (or the demo dataset folder)")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "versions",
        help="list the versions of each stage on disk",
        description="List every version of each stage found under the results folder, the "
        "config values that differ between them, and mark (*) the one the current config "
        "selects.",
    )
    p.add_argument("stage", nargs="?", help="limit to one stage, e.g. encoding")
    p.add_argument("--max-keys", type=int, default=6, help="differing keys shown per line")
    add_config_args(p)
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser(
        "gc",
        help="remove versions the current config no longer reaches",
        description="Remove stage versions that the current config does not select, and "
        "leftovers of interrupted writes. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    add_config_args(p)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser(
        "demo-data",
        help="generate the embedded demo BIDS dataset",
        description="Generate the simulated demo BIDS dataset (fMRI, EEG, stimuli, planted "
        "ground truth) into a folder, offline and deterministically.",
    )
    p.add_argument(
        "output",
        help="folder to create; an earlier demo there is replaced, other content is refused",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default from schema)")
    p.add_argument("--force", action="store_true", help="replace a folder that holds other files")
    p.add_argument("--schema", default=DEFAULT_SCHEMA, help="config schema (%(default)s)")
    p.set_defaults(func=cmd_demo_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neuroflow`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from neuroflow.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except (ConfigError, FileNotFoundError, KeyError, ValueError) as err:
        print(f"neuroflow {args.command}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

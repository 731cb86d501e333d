"""`neuroflow gc`: remove version folders no recent or latest run of this folder uses."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow.artifacts import PARTIAL_MARKER
from neuroflow.cli.configs import _config_key, _load_plan, _record_config
from neuroflow.cli.inspect import _stage_version_dirs

if TYPE_CHECKING:
    from neuroflow.workflow.runs import RunRecord

__all__ = ["cmd_gc"]


# --------------------------------------------------------------------------- gc
def _folder_size(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _human_size(size: int) -> str:
    if size >= 1e9:
        return f"{size / 1e9:.2f} GB"
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"


def _sweep(paths: Sequence[Path], *, dry_run: bool, indent: str = "") -> int:
    """Remove (or, for a dry run, list) folders; the bytes freed (or that would be)."""
    freed = 0
    for path in paths:
        size = _folder_size(path)
        print(f"{indent}{'would remove' if dry_run else 'removing'} {path} ({_human_size(size)})")
        if not dry_run:
            shutil.rmtree(path, ignore_errors=True)
            if path.exists():
                print(f"neuroflow gc: could not remove all of {path}", file=sys.stderr)
                continue
        freed += size
    return freed


def _confirm(question: str) -> bool:
    """Ask a yes/no question on the terminal; no answer (end of input) is no."""
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False


def _holder_text(holder: Mapping[str, Any]) -> str:
    fields = (("command", ""), ("host", "on host "), ("pid", "pid "), ("cwd", "working folder "))
    text = ", ".join(f"{label}{holder.get(key) or 'unknown'}" for key, label in fields)
    return f"{text}, started {holder.get('started') or 'unknown'}"


def _kept_by_recent_runs(
    kept: Mapping[RunRecord, list[Path]], args: argparse.Namespace
) -> list[Path]:
    """List the versions recent runs used; those --include-recent may remove."""
    from neuroflow.workflow.runs import describe_run

    removable: list[Path] = []
    for run, folders in sorted(kept.items(), key=lambda item: item[0].time, reverse=True):
        print(f"kept, used by {describe_run(run)}:")
        for folder in folders:
            demo = folder.parent.name == "demo"
            note = ", the demo dataset of a recent run: never removed" if demo else ""
            print(f"  {folder} ({_human_size(_folder_size(folder))}{note})")
            if args.include_recent and not demo:
                removable.append(folder)
    count = sum(len(f) for f in kept.values())
    hint = "" if args.include_recent else " (--include-recent removes them)"
    print(
        f"Kept {count} version folder(s) used by recent runs{hint}: the last "
        f"{args.keep_runs} runs and those of the last {args.keep_days:g} days "
        "(--keep-runs, --keep-days)."
    )
    return removable


def _selected_by_latest_runs(
    records: Sequence[RunRecord], schema: str | os.PathLike
) -> dict[str, RunRecord]:
    """The versions that the newest run of each config still selects, with that run.

    Runs are of one config when they had the same config arguments (:func:`_config_key`).
    The newest one's config is built again from them (what it selects now, the
    config files as they are now); when that fails, the versions it recorded count.

    Parameters
    ----------
    records : sequence of RunRecord
        The run records of the results folder, newest first.
    schema : path-like
        The config schema.

    Returns
    -------
    versions : dict
        ``"stage/version folder"`` -> the newest run of the config that selects it.
    """
    from neuroflow.config import ConfigError
    from neuroflow.workflow.plan import WorkflowPlan
    from neuroflow.workflow.runs import describe_run

    newest: dict[tuple, RunRecord] = {}
    for record in sorted(records, key=lambda r: r.time, reverse=True):
        newest.setdefault(_config_key(record), record)
    out: dict[str, RunRecord] = {}
    for record in newest.values():
        try:
            plan = WorkflowPlan(_record_config(record, schema))
            names = [p.relative_to(plan.results).as_posix() for p in plan.all_version_dirs()]
        except (ConfigError, FileNotFoundError, KeyError, ValueError) as err:
            print(
                f"neuroflow gc: the config of {describe_run(record)} cannot be built again "
                f"({err}); the versions that run recorded count as selected by it.",
                file=sys.stderr,
            )
            names = list(record.versions)
        for name in names:
            out.setdefault(name, record)
    return out


def _kept_by_latest_runs(kept: Mapping[RunRecord, list[Path]], results: Path) -> None:
    """List the versions kept because the newest run of a config selects them."""
    from neuroflow.workflow.runs import describe_run

    for run, folders in sorted(kept.items(), key=lambda item: item[0].time, reverse=True):
        print(f"kept, selected by the newest run of its config, {describe_run(run)}:")
        for folder in folders:
            print(f"  {folder} ({_human_size(_folder_size(folder))})")
    count = sum(len(f) for f in kept.values())
    print(
        f"Kept {count} version folder(s) that the newest run of a config selects: gc never "
        "removes them, whatever --keep-runs, --keep-days or --include-recent say. Run that "
        "config again (its new versions then replace them) or delete that run's record in "
        f"{results / '.neuroflow' / 'runs'} to let gc remove them."
    )


def _gc_under_lock(plan: Any, args: argparse.Namespace, holder: Mapping | None) -> int:
    """Decide what to remove and remove it; the bytes freed. ``holder``: a live run's lock."""
    from neuroflow.workflow.runs import read_run_records, recent_runs, versions_of_runs

    results: Path = plan.results
    selected = {p.relative_to(results).as_posix() for p in plan.all_version_dirs()}
    records, unreadable = read_run_records(results)
    for path in unreadable:
        print(f"neuroflow gc: ignoring {path}, not a run record", file=sys.stderr)
    latest = _selected_by_latest_runs(records, args.schema)
    recent = versions_of_runs(
        recent_runs(records, keep_runs=args.keep_runs, keep_days=args.keep_days)
    )
    old: list[Path] = []
    kept: dict[RunRecord, list[Path]] = {}
    kept_latest: dict[RunRecord, list[Path]] = {}
    for folders in _stage_version_dirs(results, None).values():
        for folder in folders:
            name = folder.relative_to(results).as_posix()
            if name in selected:
                continue
            if name in latest:
                kept_latest.setdefault(latest[name], []).append(folder)
            elif name in recent:
                kept.setdefault(recent[name], []).append(folder)
            else:
                old.append(folder)
    partials = [
        p
        for p in sorted(results.rglob(f"*{PARTIAL_MARKER}*"))
        if p.is_dir() and not any(p.is_relative_to(f) for f in old)
    ]
    if kept_latest:
        _kept_by_latest_runs(kept_latest, results)
    recent_doomed = _kept_by_recent_runs(kept, args) if kept else []
    if partials and holder is not None:
        print(
            f"Left alone {len(partials)} interrupted write(s): the results lock is held by a "
            f"live run ({_holder_text(holder)}), which may be writing them. Run gc again "
            "when it has finished."
        )
        for path in partials:
            print(f"  left alone {path}")
        partials = []
    if not (old or partials or recent_doomed):
        print("Nothing to remove.")
        return 0
    freed = _sweep([*old, *partials], dry_run=args.dry_run)
    if not recent_doomed:
        return freed
    if args.dry_run:
        print("and, after a confirmation (--include-recent):")
        return freed + _sweep(recent_doomed, dry_run=True, indent="  ")
    size = _human_size(sum(_folder_size(f) for f in recent_doomed))
    question = f"Remove {len(recent_doomed)} version folder(s) of recent runs ({size})?"
    if args.yes or _confirm(question):
        return freed + _sweep(recent_doomed, dry_run=False)
    print("Kept the versions of recent runs.")
    return freed


def cmd_gc(args: argparse.Namespace) -> int:
    """Remove versions that neither the config nor a recent run uses, and interrupted writes."""
    from neuroflow.workflow.lock import probe_lock, read_holder, try_lock

    plan, _ = _load_plan(args)
    if not plan.results.is_dir():
        print(f"Nothing to remove: {plan.results} does not exist.")
        return 0
    # gc holds the results lock while it reads the run records and deletes, so no run
    # starts in the middle; when a live run holds it, gc leaves .partial- folders alone.
    lock = None if args.dry_run else try_lock(plan.results, command="neuroflow gc")
    if args.dry_run:
        holder = probe_lock(plan.results)
    else:
        holder = read_holder(plan.results) if lock is None else None
    try:
        freed = _gc_under_lock(plan, args, holder)
    finally:
        if lock is not None:
            lock.release()
    print(f"{'Would free' if args.dry_run else 'Freed'} {_human_size(freed)} in total.")
    return 0

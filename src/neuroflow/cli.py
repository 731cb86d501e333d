"""The ``neuroflow`` command line: run the workflow, inspect artifacts, list versions, clean up.

Run ``neuroflow --help`` or ``neuroflow <command> --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow import __version__
from neuroflow.artifacts import PARTIAL_MARKER, PROVENANCE_KEY, read_provenance
from neuroflow.workflow.defaults import default_config, workflow_root

if TYPE_CHECKING:
    from neuroflow.workflow.runs import RunRecord

__all__ = ["main"]

DEFAULT_CONFIG = "config/config.yaml"
DEFAULT_SCHEMA = "workflow/schemas/config.schema.yaml"


# --------------------------------------------------------------------------- helpers
def _in_workflow(
    path: str | os.PathLike,
    root: str | os.PathLike | None = None,
    cwd: str | os.PathLike | None = None,
) -> Path:
    """``path`` if it exists, else the same relative path in the workflow tree if there.

    ``root`` defaults to :func:`~neuroflow.workflow.defaults.workflow_root`, ``cwd`` (the
    folder a relative ``path`` is relative to) to the current one.
    """
    path = Path(path)
    if path.is_absolute() or (path if cwd is None else Path(cwd) / path).exists():
        return path
    if root is None:
        try:
            root = workflow_root()
        except FileNotFoundError:
            return path
    packaged = Path(root) / path
    return packaged if packaged.exists() else path


def schema_path(path: str | os.PathLike) -> Path:
    """The config schema: ``path`` if it exists, else the same path in the workflow tree.

    Parameters
    ----------
    path : path-like
        ``--schema``, relative to the working folder or absolute.

    Returns
    -------
    schema : Path
        ``path``, or ``workflow_root() / path`` when a relative ``path`` is missing from
        the working folder but present there (commands run from any folder).
    """
    return _in_workflow(path)


def _base_config() -> Path:
    """The config a run starts from: the working folder's, else the shipped default."""
    try:
        return default_config()
    except FileNotFoundError:
        return Path(DEFAULT_CONFIG)  # missing: fine when --configfile files are given


def _config_arguments(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The config files and the ``KEY=VALUE`` overrides of --configfile / --config."""
    # as with `neuroflow run`: a --config value that is a file (no "=") adds a config file
    files = [v for v in args.config if "=" not in v or Path(v).is_file()]
    return [*args.configfile, *files], [v for v in args.config if v not in files]


def _load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The validated config a run gets from the same --configfile / --config arguments."""
    from neuroflow.workflow.runs import snakemake_config

    files, overrides = _config_arguments(args)
    return snakemake_config(
        files,
        overrides,
        base=_base_config(),
        schema=schema_path(args.schema),
        replace=args.replace_workflow_config,
    )


def _absolute(path: str | os.PathLike, cwd: str | os.PathLike) -> Path:
    """``path`` made absolute against ``cwd``, ``..`` and ``.`` removed (links kept)."""
    return Path(os.path.normpath(Path(cwd) / path))


def _under(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` when inside it, else absolute (POSIX)."""
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return path.as_posix()


def _shipped_config() -> Path | None:
    """The default config shipped with the workflow (None without a workflow tree)."""
    try:
        return _absolute(workflow_root() / DEFAULT_CONFIG, "/")
    except FileNotFoundError:
        return None


def _workflow_configfiles(record: RunRecord) -> list[Path]:
    """The files the Snakefile's ``configfile:`` read for a run (absolute).

    Records written before this was recorded: the working folder's
    ``config/config.yaml`` when it has one now.
    """
    if record.workflow_configfiles is not None:
        return [_absolute(f, record.cwd) for f in record.workflow_configfiles]
    local = _absolute(DEFAULT_CONFIG, record.cwd)
    return [local] if local.is_file() else []


def _config_key(record: RunRecord) -> tuple[tuple[str, ...], ...]:
    """What tells the configs of runs apart: their config files (relative to their working
    folder when inside it) and overrides, the shipped default config left out."""
    cwd = Path(record.cwd)
    shipped = _shipped_config()
    files = [_absolute(f, cwd) for f in record.configfiles]
    return (
        tuple(_under(f, cwd) for f in _workflow_configfiles(record)),
        tuple(_under(f, cwd) for f in files if f != shipped),
        tuple(record.config_args),
    )


def _used_arguments(record: RunRecord, files: Sequence[str], overrides: Sequence[str]) -> bool:
    """Whether a run had these --configfile files (the shipped default aside) and overrides.

    Files match by absolute path, or by their path inside the working folder (a copied
    project folder).
    """
    if list(record.config_args) != list(overrides):
        return False
    shipped = _shipped_config()
    here = Path.cwd()
    mine = [f for f in (_absolute(f, here) for f in files) if f != shipped]
    theirs = [f for f in (_absolute(f, record.cwd) for f in record.configfiles) if f != shipped]
    if mine == theirs:
        return True
    return [_under(f, here) for f in mine] == [_under(f, Path(record.cwd)) for f in theirs]


def _here(path: Path, record: RunRecord) -> Path:
    """A file of a run, in the current working folder when the run's was another one that
    held it (a copied project folder) and the current one holds it too."""
    cwd = Path(record.cwd)
    if cwd == Path.cwd() or not path.is_relative_to(cwd):
        return path
    moved = Path.cwd() / path.relative_to(cwd)
    return moved if moved.exists() else path


def _record_config(record: RunRecord, schema: str | os.PathLike) -> dict[str, Any]:
    """The config a recorded run got, built again from its arguments as it built them.

    Raises
    ------
    ConfigError
        When a file is missing now, or the config no longer validates.
    """
    from neuroflow.workflow.runs import snakemake_config

    read = [_here(f, record) for f in _workflow_configfiles(record)]
    files = [_here(_absolute(f, record.cwd), record) for f in record.configfiles]
    return snakemake_config(
        [*read[1:], *files],
        list(record.config_args),
        base=read[0] if read else Path(os.devnull) / "none",
        schema=schema_path(schema),
    )


def _describe_source(record: RunRecord) -> str:
    """Which config a command uses, when it is that of a recorded run."""
    from neuroflow.workflow.runs import describe_run

    read = _workflow_configfiles(record)
    base = (
        f"on top of {', '.join(map(str, read))}"
        if read
        else f"without {DEFAULT_CONFIG}: its working folder had none"
    )
    return f"config: as {describe_run(record)} built it ({base})"


def _resolve_config(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """The config of the run that a describing command (gc, versions, check-config) is about.

    The newest run recorded in the results folder with the same config arguments
    (the newest run of any config when none is given) tells how its config was built:
    with or without the working folder's ``config/config.yaml`` (``snakemake -d`` from
    a folder without one reads only the --configfile files). Without such a record, or
    with ``--no-recorded-config``, the config is built from the arguments as
    ``neuroflow run`` builds it.

    Returns
    -------
    config : dict
        The validated config.
    source : str | None
        A line saying which recorded run's config it is (None: the arguments alone).
    """
    from neuroflow.config import ConfigError
    from neuroflow.workflow.runs import describe_run, read_run_records

    try:
        config, error = _load_config(args), None
    except ConfigError as err:
        config, error = None, err
    if args.no_recorded_config:
        if error is not None:
            raise error
        return config, None
    results = Path(config["results_dir"] if config is not None else "results")
    files, overrides = _config_arguments(args)
    given = bool(files or overrides or args.replace_workflow_config)
    records, _ = read_run_records(results)
    record = next((r for r in records if not given or _used_arguments(r, files, overrides)), None)
    if record is None or (given and args.replace_workflow_config):
        if error is not None:
            raise error
        if records and record is None:
            return config, (
                "config: built from these arguments as `neuroflow run` builds it (no recorded "
                f"run in {results} used them)"
            )
        return config, None
    try:
        recorded = _record_config(record, args.schema)
    except ConfigError as err:
        if error is not None:
            raise error from err
        note = f"config: the arguments as given; that of {describe_run(record)} failed ({err})"
        return config, note
    return recorded, _describe_source(record)


def _load_plan(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The plan of the config a describing command is about, and which config it is.

    See :func:`_resolve_config`; the line saying which config is printed first.
    """
    from neuroflow.workflow.plan import WorkflowPlan

    config, source = _resolve_config(args)
    if source:
        print(source)
    return WorkflowPlan(config), source


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
    from neuroflow.artifacts import find_stores, read_manifest, verify_store

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


# --------------------------------------------------------------------------- check-config
def _plan_lines(plan: Any) -> list[str]:
    """What a run of ``plan`` would do, a line per fact."""
    models = plan.encoding_models()
    lines = [
        f"dataset: {plan.source} at {plan.bids_root}",
        f"  {len(plan.fmri_runs)} fMRI runs, {len(plan.eeg_recordings)} EEG recordings, "
        f"{len(plan.betas_sessions)} betas sessions",
        f"features: {', '.join(e['name'] for e in plan.extractors) or 'none'}",
        f"encoding models: {', '.join(models) or 'none'}",
        f"EEG encoding models: {', '.join(plan.eeg_models()) or 'none'}",
        f"decoding: {'EEG' if plan.decoding_enabled else 'off'}"
        + (", EEG across subjects" if plan.decoding_cross_subject_enabled else "")
        + (", fMRI identification" if plan.decoding_fmri_enabled else ""),
        f"RSA: {', '.join(plan.rsa_modalities) or 'off'}",
        f"results: {plan.results}",
    ]
    for subject in plan.encoding_subjects:
        lines.append(f"  sub-{subject} held-out runs: {', '.join(plan.test_runs_of(subject))}")
    lines += [f"note: {note}" for note in plan.notes]
    return lines


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a config and print what a run would do with it, and the models it reads.

    Exits 1 when a model the config's extractors read is missing from disk (as
    ``neuroflow models`` does), 0 otherwise.
    """
    from neuroflow.features.inventory import format_inventory
    from neuroflow.workflow.plan import WorkflowPlan

    config, source = _resolve_config(args)
    if source:
        print(source)
    plan = WorkflowPlan(config)
    print("\n".join(_plan_lines(plan)))
    records = _model_records(config, hashes=False)
    print("models (as `neuroflow models` finds them, offline; sha256 with `neuroflow models`):")
    lines = format_inventory(records, hashes=False)
    print("\n".join(f"  {line}" if line else "" for line in lines))
    missing = [record.name for record in records if record.status == "missing"]
    if missing:
        print(
            f"neuroflow check-config: the config is valid, but {len(missing)} model(s) that "
            f"its extractors read are missing ({', '.join(dict.fromkeys(missing))}): a run "
            "would fail at their feature jobs. Fetch them as listed above, then check again.",
            file=sys.stderr,
        )
        return 1
    print("Config OK: `snakemake -n` with the same arguments lists the jobs.")
    return 0


# --------------------------------------------------------------------------- models
def _model_records(config: Mapping[str, Any], *, hashes: bool) -> list[Any]:
    """What the config's extractors read, looked for on disk offline (nothing imported).

    Parameters
    ----------
    config : dict
        The validated config.
    hashes : bool
        Compute the SHA-256 of the weights found.

    Returns
    -------
    records : list of ModelRecord
        See :func:`neuroflow.features.inventory.model_inventory`.
    """
    from neuroflow.features.inventory import model_inventory
    from neuroflow.features.trust import builder_trust

    return model_inventory(
        config["features"]["extractors"],
        hashes=hashes,
        trust=builder_trust(config["features"]),
    )


def cmd_models(args: argparse.Namespace) -> int:
    """List the models the config's extractors read, and whether each is on disk.

    Exits 1 when one is missing, 0 when all are on disk (or none is needed).
    """
    from neuroflow.features.inventory import format_inventory

    config = _load_config(args)
    hashes = not args.no_hash
    records = _model_records(config, hashes=hashes)
    if args.json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
    else:
        print("\n".join(format_inventory(records, hashes=hashes)))
    return 1 if any(record.status == "missing" for record in records) else 0


# --------------------------------------------------------------------------- run
def snakemake_configfiles(argv: Sequence[str]) -> list[str]:
    """The files a snakemake command line passes with ``--configfile(s)``.

    Parameters
    ----------
    argv : sequence of str
        Snakemake's arguments.

    Returns
    -------
    files : list of str
        In command-line order (``--configfile a b``, ``--configfile=a``, ``--configfiles``).
    """
    files: list[str] = []
    taking = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if flag in ("--configfile", "--configfiles"):
            taking = not eq
            if eq:
                files.append(value)
        elif taking and not arg.startswith("-"):
            files.append(arg)
        else:
            taking = False
    return files


def _snakemake_command() -> list[str]:
    """The snakemake of this environment (beside this Python, else ``python -m``)."""
    beside = Path(sys.executable).with_name("snakemake")
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "snakemake"]


#: Snakemake options whose values ``neuroflow run`` reads (all others pass through).
_CONFIGFILE_FLAGS = ("--configfile", "--configfiles")
_CONFIG_FLAGS = ("--config", "-C")
_PROFILE_FLAGS = ("--profile", "--workflow-profile")
_SNAKEFILE_FLAGS = ("--snakefile", "-s")
_DIRECTORY_FLAGS = ("--directory", "-d")


def _option(arg: str, flags: Sequence[str]) -> tuple[str, str | None] | None:
    """``(flag, value)`` when ``arg`` is one of ``flags`` (``value``: after ``=``)."""
    flag, eq, value = arg.partition("=")
    if flag in flags:
        return flag, (value if eq else None)
    return None


def snakemake_run_args(
    argv: Sequence[str], root: str | os.PathLike, *, cwd: str | os.PathLike | None = None
) -> tuple[list[str], list[str]]:
    """The snakemake arguments of ``neuroflow run``, and the user's config files.

    Every argument passes through unchanged, except that:

    - ``-s <root>/Snakefile`` is added (unless ``-s``/``--snakefile`` is given);
    - every ``--configfile`` file and every ``--config`` value that is a file (has no
      ``=``, or exists) become one ``--configfile`` list at the end, in command-line
      order, after ``<root>/config/config.yaml`` (left out when the working folder has
      its own ``config/config.yaml``, which the Snakefile reads first, with
      ``--replace-workflow-config``, or with ``-s``); the ``KEY=VALUE`` values of
      ``--config`` become one ``--config`` list (Snakemake keeps only the last of repeated
      options);
    - ``--workflow-profile <root>/workflow/profiles/local`` is added (unless
      ``--profile`` or ``--workflow-profile`` is given); a relative profile path missing
      from the working folder is looked for in ``root`` (``workflow/profiles/slurm``).

    Parameters
    ----------
    argv : sequence of str
        The arguments after ``neuroflow run``.
    root : path-like
        The folder that holds the Snakefile (:func:`neuroflow.workflow.defaults.workflow_root`).
    cwd : path-like | None
        The working folder (default: the current one); ``-d``/``--directory`` replaces it.

    Returns
    -------
    args : list of str
        Snakemake's arguments.
    configfiles : list of str
        The user's config files, in order (without the default config).
    """
    root = Path(root).resolve()
    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    passthrough: list[str] = []
    configfiles: list[str] = []
    overrides: list[str] = []
    taking: str | None = None  # "files" or "config" while an option's values follow
    has_snakefile = has_profile = replace = False
    start = Path.cwd() if cwd is None else Path(cwd)
    workdir = start
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if taking and not arg.startswith("-"):
            if taking == "files" or "=" not in arg or (start / arg).is_file():
                configfiles.append(arg)
            else:
                overrides.append(arg)
            continue
        taking = None
        if (option := _option(arg, _CONFIGFILE_FLAGS + _CONFIG_FLAGS)) is not None:
            flag, value = option
            kind = "files" if flag in _CONFIGFILE_FLAGS else "config"
            if value is None:
                taking = kind  # the values follow
            elif kind == "files" or "=" not in value or (start / value).is_file():
                configfiles.append(value)  # --configfile=FILE: one value only
            else:
                overrides.append(value)
            continue
        passthrough.append(arg)
        if arg == "--replace-workflow-config":
            replace = True
        elif _option(arg, _SNAKEFILE_FLAGS) is not None:
            has_snakefile = True
        elif (option := _option(arg, _PROFILE_FLAGS)) is not None:
            has_profile = True
            flag, value = option
            if value is None and i < len(argv):
                value = argv[i]
                passthrough.append(str(_in_workflow(value, root, start)))
                i += 1
            elif value is not None:
                passthrough[-1] = f"{flag}={_in_workflow(value, root, start)}"
        elif (option := _option(arg, _DIRECTORY_FLAGS)) is not None:
            value = option[1]
            if value is None and i < len(argv):
                value = argv[i]
                passthrough.append(value)
                i += 1
            if value is not None:
                workdir = workdir / value
    args: list[str] = []
    if not has_snakefile:
        args += ["-s", str(root / "Snakefile")]
    if not has_profile:
        args += ["--workflow-profile", str(root / "workflow" / "profiles" / "local")]
    args += passthrough
    base = root / DEFAULT_CONFIG
    own_base = (workdir / DEFAULT_CONFIG).is_file() or has_snakefile
    files = configfiles if own_base or (replace and configfiles) else [str(base), *configfiles]
    if files:
        args += ["--configfile", *files]
    if overrides:
        args += ["--config", *overrides]
    return args, configfiles


def cmd_run(args: argparse.Namespace) -> int:
    """Check the config files' YAML, then run the workflow with snakemake."""
    from neuroflow.config import ConfigError
    from neuroflow.workflow.runs import check_yaml_syntax

    argv, configfiles = snakemake_run_args(args.snakemake_args, workflow_root())
    for path in configfiles:
        if not Path(path).is_file():
            raise ConfigError(f"Config file {path} must be an existing file, got no such file.")
        check_yaml_syntax(path)
    command = [*_snakemake_command(), *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
    return 0  # pragma: no cover  (execv does not return)


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


# --------------------------------------------------------------------------- export
def cmd_export(args: argparse.Namespace) -> int:
    """Export stores as NIfTI maps, MNE fif files, npy/HDF5 features and a TSV summary."""
    from neuroflow.export import EXPORT_KINDS, export_results

    written = export_results(
        args.paths,
        args.output,
        kinds=args.kinds or tuple(EXPORT_KINDS),
        features_format=args.features_format,
        overwrite=args.force,
    )
    for kind, files in written.items():
        print(f"{kind}: {len(files)} files")
        for path in files:
            print(f"  {path}")
    if not any(written.values()):
        print(f"neuroflow export: no store of {list(written)} under {args.paths}.", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- demo-data
def cmd_demo_data(args: argparse.Namespace) -> int:
    """Generate the embedded demo dataset into a folder."""
    from neuroflow.artifacts import build_provenance
    from neuroflow.config import load_schema
    from neuroflow.config.validation import fill_defaults, validate_config
    from neuroflow.demo import generate_demo_dataset
    from neuroflow.demo.generate import foreign_files
    from neuroflow.workflow.plan import stage_versions
    from neuroflow.workflow.versions import dataset_identity

    output = Path(args.output)
    if output.exists() and not output.is_dir():
        print(f"neuroflow demo-data: {output} exists and is not a folder.", file=sys.stderr)
        return 2
    foreign = foreign_files(output)
    if foreign and not args.force:
        shown = ", ".join(str(p.relative_to(output)) for p in foreign[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        print(
            f"neuroflow demo-data: {output} already holds files that neuroflow did not write "
            f"({len(foreign)}: {shown}{more}); generating the demo there would delete them. "
            "Choose an empty or new folder, move them out, or pass --force to replace the "
            "folder's whole content.",
            file=sys.stderr,
        )
        return 2
    schema = load_schema(schema_path(args.schema))
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
        description="neuroflow: run the workflow (`neuroflow run`), inspect and manage its "
        "versioned artifacts.",
    )
    parser.add_argument("--version", action="version", version=f"neuroflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_config_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--configfile",
            nargs="+",
            action="extend",
            default=[],
            metavar="FILE",
            help=f"config files merged in order on top of {DEFAULT_CONFIG} (the working "
            "folder's, else the one shipped with the workflow), as with `neuroflow run`",
        )
        p.add_argument(
            "--config",
            nargs="+",
            action="extend",
            default=[],
            metavar="KEY=VALUE",
            help="overrides applied last, parsed as `snakemake --config` parses them; a "
            "FILE (no '=') is read after the --configfile files, as `neuroflow run` does",
        )
        p.add_argument(
            "--replace-workflow-config",
            action="store_true",
            help=f"the --configfile files replace {DEFAULT_CONFIG} instead of updating it, "
            "as with the snakemake flag of that name",
        )
        p.add_argument("--schema", default=DEFAULT_SCHEMA, help="config schema (%(default)s)")

    def add_recorded_args(p: argparse.ArgumentParser) -> None:
        add_config_args(p)
        p.add_argument(
            "--no-recorded-config",
            action="store_true",
            help="build the config from the arguments alone, as `neuroflow run` would, not "
            "as the newest recorded run with these arguments (of any config, without "
            "arguments) built it",
        )

    p = sub.add_parser(
        "check-config",
        help="validate a config against the dataset without running anything",
        description="Read the config exactly as `snakemake` would from the same --configfile "
        "and --config arguments (as the newest recorded run with these arguments read it, "
        "named first: with or without the working folder's config/config.yaml), validate "
        "it (YAML syntax with file, line and column; "
        "schema; cross-field checks; the dataset it names) and print what a run would do: "
        "the recordings selected, the analyses that apply and a note for each one left out; "
        "then the models its extractors read, looked for on disk as `neuroflow models` looks "
        "(offline, nothing imported or loaded). Exits 1 when one of them is missing, 2 when "
        "the config is invalid.",
    )
    add_recorded_args(p)
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser(
        "models",
        help="list the models the config needs and whether each is on disk",
        description="List, for every entry of features.extractors, the model it reads (Hugging "
        "Face or sentence-transformers folder, cached id or packaged model; torch_module "
        "weights file, TorchScript file or preset), looked for exactly where feature "
        "extraction will look, offline: where it was found, its size and the SHA-256 the "
        "feature stores record (weights_sha256). For a missing model, the commands that fetch "
        "it on a machine with internet access and how to point neuroflow at the result. "
        "Weight-free extractors and `weights: random` entries need nothing. Exits 1 when a "
        "model is missing, so a script can check before submitting jobs. The config is built "
        f"as a run builds it: {DEFAULT_CONFIG}, then each --configfile, then the --config "
        "overrides.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--no-hash",
        action="store_true",
        help="skip the SHA-256 of the weights (reading every byte is slow for large models)",
    )
    add_config_args(p)
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "run",
        help="run the workflow (snakemake) from any folder",
        description="Run the installed workflow with `snakemake` in the working folder "
        "(results/ and .snakemake/ go there), from any folder: `neuroflow run --config "
        "my.yaml --cores 4`. The Snakefile, the default config (config/config.yaml of the "
        "working folder when it has one, else the shipped one) and the local workflow "
        "profile come with the package; --config FILE and --configfile FILE add config files "
        "on top of the default, in order; --config KEY=VALUE sets single values. Every "
        "other argument goes to snakemake unchanged (e.g. `-n`, `--cores 2`, a target, "
        "`--report report.html`, `--profile` or `--workflow-profile`, which replace the "
        "local profile). Every config file's YAML is read first: a syntax error is "
        "reported with the file, line and column.",
    )
    p.add_argument(
        "snakemake_args", nargs=argparse.REMAINDER, help="snakemake's arguments, unchanged"
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "inspect",
        help="show a store's arrays, attributes and provenance chain",
        description="Show a zarr artifact's arrays (dims, shape, dtype, chunks, codecs), its "
        "attributes and its provenance chain back to the raw inputs, after checking its files "
        "against its manifest (names and sizes). With --verify, only check the store, or every "
        "store under a folder, in full (checksums too).",
    )
    p.add_argument(
        "path", help="a .zarr store (or the demo dataset folder); with --verify also any folder"
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="compare every file of the store, or of every store under a folder, with the "
        "manifest written with it (names, sizes and checksums); exit 1 when one is damaged",
    )
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "versions",
        help="list the versions of each stage on disk",
        description="List every version of each stage found under the results folder, the "
        "config values that differ between them, and mark (*) the one the config selects. "
        "The config is that of the newest recorded run with the same config arguments (of "
        "any config, when none is given), built as that run built it, and named first; "
        f"without such a run, as a run builds it: {DEFAULT_CONFIG}, then each --configfile, "
        "then the --config overrides.",
    )
    p.add_argument("stage", nargs="?", help="limit to one stage, e.g. encoding")
    p.add_argument("--max-keys", type=int, default=6, help="differing keys shown per line")
    add_recorded_args(p)
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser(
        "gc",
        help="remove versions that neither the config nor a recent run uses",
        description="Remove the stage versions that the config does not select, and the "
        "leftovers of interrupted writes. The config is that of the newest recorded run "
        "(run records in <results>/.neuroflow/runs) with the same config arguments (of any "
        "config, when none is given), built as that run built it; without such a run, as "
        f"`neuroflow run` builds it ({DEFAULT_CONFIG}, then each --configfile, then the "
        "--config overrides). A version that the newest run of any config selects is never "
        "removed. Versions that a recent run used are kept and listed, whatever the config; "
        "--include-recent removes them after a confirmation. While a run holds the results "
        "lock, interrupted writes are left alone. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument(
        "--keep-runs",
        type=int,
        default=5,
        metavar="N",
        help="versions used by the last N runs count as recent (%(default)s)",
    )
    p.add_argument(
        "--keep-days",
        type=float,
        default=7.0,
        metavar="D",
        help="so do versions used by runs of the last D days (%(default)s)",
    )
    p.add_argument(
        "--include-recent",
        action="store_true",
        help="also remove versions of recent runs (after a confirmation; never the demo "
        "dataset a recent run used)",
    )
    p.add_argument("--yes", action="store_true", help="confirm --include-recent without asking")
    add_recorded_args(p)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser(
        "export",
        help="export stores in the formats of the field (NIfTI, MNE fif, npy/HDF5, TSV)",
        description="Export the stores under the given results folders (or the stores "
        "named): voxel-wise score maps as NIfTI statistical maps with BIDS-derivatives "
        "names (stat-r, stat-rnormalized, stat-p and FDR-thresholded desc-fdr maps), EEG "
        "epochs as MNE -epo.fif with the evoked response per condition in -ave.fif, "
        "features as .npy per layer (or HDF5) with the stimulus order, and the summary "
        "table with a JSON sidecar of its columns. Every file gets a JSON sidecar naming "
        "the store, stage and version it came from. Two versions of one model would "
        "write the same file: name the stores of one version, or remove the other with "
        "`neuroflow gc`. Every refusal comes before anything is written; the files are "
        "written into a hidden sibling folder and moved into place at the end.",
    )
    p.add_argument("paths", nargs="+", help="results folders, version folders or stores")
    p.add_argument(
        "--output",
        "-o",
        required=True,
        help="export folder (created); files it already holds are never replaced without --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the files of --output that this export writes again",
    )
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=["maps", "epochs", "eeg_scores", "tables", "features", "summary"],
        help="what to export (default: all)",
    )
    p.add_argument(
        "--features-format",
        choices=["npy", "h5"],
        default="npy",
        help="file format of the features (%(default)s)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "demo-data",
        help="generate the embedded demo BIDS dataset",
        description="Generate the simulated demo BIDS dataset (fMRI, EEG, stimuli, planted "
        "ground truth) into a folder, offline and deterministically.",
    )
    p.add_argument(
        "output",
        help="folder to create; an earlier demo there is replaced, a folder that holds any "
        "file the demo did not write is refused",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default from schema)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a folder that holds files the demo did not write (they are deleted)",
    )
    p.add_argument("--schema", default=DEFAULT_SCHEMA, help="config schema (%(default)s)")
    p.set_defaults(func=cmd_demo_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neuroflow`` command."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"]):
        # snakemake's options pass through untouched (argparse would claim some of them)
        args = argparse.Namespace(command="run", snakemake_args=argv[1:], func=cmd_run)
    else:
        args = parser.parse_args(argv)
    from neuroflow.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except (ConfigError, FileExistsError, FileNotFoundError, KeyError, ValueError) as err:
        print(f"neuroflow {args.command}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""Which configuration a command reads: the shipped defaults, config files, overrides.

The same resolution as a Snakemake run of the workflow: the shipped `config/config.yaml`
(or the working folder's), the `--configfile` files and `--config KEY=VALUE` overrides,
validated against the schema, and the record of what was used.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuroflow.workflow.defaults import default_config, workflow_root

if TYPE_CHECKING:
    from neuroflow.workflow.runs import RunRecord

__all__ = ["DEFAULT_CONFIG", "DEFAULT_SCHEMA", "schema_path"]


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

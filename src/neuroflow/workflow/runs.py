"""Run records: which version folders each real run used, for a safe ``neuroflow gc``.

The main process of every real (non-dry) Snakemake run writes one small JSON record into
``<results>/.neuroflow/runs/<UTC time>-<pid>.json`` before its first job: time, host,
pid, working folder, the ``--configfile`` files and ``--config`` overrides, the config
file the Snakefile's ``configfile:`` read under them (none when the working folder has no
``config/config.yaml``), and the version folders its plan selects (relative to the results
folder). Snakemake calls the workflow's ``onstart`` handler only in the main process of a
run that has jobs to run, so dry runs, jobs and runs with nothing to do write no record.
``neuroflow gc`` reads them back: a version that a recent run used is never removed
without confirmation, even when the config given to ``gc`` does not select it (the run
had overlays or overrides that ``gc`` was not told about).

:func:`snakemake_config` builds the config exactly as a run does from the same
arguments, so ``neuroflow gc --configfile ... --config ...`` selects what the run
selected.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from neuroflow.workflow.lock import STATE_DIR

__all__ = [
    "RUNS_DIR",
    "RunRecord",
    "check_yaml_syntax",
    "describe_run",
    "override_error",
    "read_run_records",
    "recent_runs",
    "run_record",
    "runs_dir",
    "snakemake_config",
    "versions_of_runs",
    "write_run_record",
]

#: Folder of the run records inside ``<results>/.neuroflow``.
RUNS_DIR = "runs"


@dataclass(frozen=True)
class RunRecord:
    """What one real run used.

    Parameters
    ----------
    time : datetime
        When the run started its first job (UTC).
    host : str
        The machine of its main process.
    pid : int
        The pid of its main process.
    cwd : str
        Its working folder.
    versions : tuple of str
        The version folders its plan selects, relative to the results folder
        (``"encoding/visual-0123456789"``, ``"demo/0123456789"``).
    configfiles : tuple of str
        Its ``--configfile`` files (absolute), in order.
    config_args : tuple of str
        Its ``--config`` overrides as given (``KEY=VALUE``).
    workflow_configfiles : tuple of str | None
        The config files (absolute) the Snakefile's ``configfile:`` read before the
        ``--configfile`` files: ``()`` when it read none (no ``config/config.yaml`` in
        the working folder, or ``--replace-workflow-config``); None in records written
        before this was recorded.
    path : Path | None
        The record's file, when read from disk.
    """

    time: datetime
    host: str
    pid: int
    cwd: str
    versions: tuple[str, ...]
    configfiles: tuple[str, ...] = ()
    config_args: tuple[str, ...] = ()
    workflow_configfiles: tuple[str, ...] | None = None
    path: Path | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form written to disk."""
        out = asdict(self)
        out.pop("path")
        out["time"] = self.time.astimezone(UTC).isoformat()
        return {key: list(v) if isinstance(v, tuple) else v for key, v in out.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path | None = None) -> RunRecord:
        """Read a record written by :meth:`to_dict`.

        Parameters
        ----------
        data : dict
            The parsed JSON.
        path : Path | None
            The file it came from.

        Returns
        -------
        record : RunRecord
            The record.

        Raises
        ------
        ValueError
            When ``time``, ``host``, ``pid``, ``cwd`` or ``versions`` is missing or has
            the wrong type.
        """
        if not isinstance(data, dict):
            raise ValueError(f"A run record must be a mapping, got {type(data).__name__} instead.")
        try:
            time = datetime.fromisoformat(str(data["time"]))
            versions = data["versions"]
            if not isinstance(versions, list):
                raise TypeError(type(versions).__name__)
            return cls(
                time=time if time.tzinfo else time.replace(tzinfo=UTC),
                host=str(data["host"]),
                pid=int(data["pid"]),
                cwd=str(data["cwd"]),
                versions=tuple(str(v) for v in versions),
                configfiles=tuple(str(v) for v in data.get("configfiles") or ()),
                config_args=tuple(str(v) for v in data.get("config_args") or ()),
                workflow_configfiles=None
                if data.get("workflow_configfiles") is None
                else tuple(str(v) for v in data["workflow_configfiles"]),
                path=path,
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"A run record must have time, host, pid, cwd and a list of versions, "
                f"got {sorted(data)} ({err}) instead."
            ) from err


def runs_dir(results: str | os.PathLike) -> Path:
    """The folder of the run records of a results folder.

    Parameters
    ----------
    results : path-like
        The results folder (``results_dir``).

    Returns
    -------
    path : Path
        ``<results>/.neuroflow/runs``.
    """
    return Path(results) / STATE_DIR / RUNS_DIR


def run_record(
    results: str | os.PathLike,
    version_dirs: Iterable[str | os.PathLike],
    configfiles: Iterable[str | os.PathLike] | None = (),
    config_args: Iterable[str] | None = (),
    *,
    workflow_configfiles: Iterable[str | os.PathLike] | None = None,
    now: datetime | None = None,
) -> RunRecord:
    """The record of a run that starts now in this process.

    Parameters
    ----------
    results : path-like
        The results folder.
    version_dirs : iterable of path-like
        The version folders the run's plan selects (``WorkflowPlan.all_version_dirs()``),
        inside ``results``.
    configfiles : iterable of path-like | None
        The run's ``--configfile`` files.
    config_args : iterable of str | None
        The run's ``--config`` overrides (``KEY=VALUE``).
    workflow_configfiles : iterable of path-like | None
        The config files the Snakefile's ``configfile:`` read (empty: none); None when
        not known.
    now : datetime | None
        The start time (default: now).

    Returns
    -------
    record : RunRecord
        Host, pid and working folder of this process, the rest as given.

    Raises
    ------
    ValueError
        When a version folder is not inside ``results``.
    """
    base = Path(results)
    versions = []
    for folder in version_dirs:
        try:
            versions.append(Path(folder).relative_to(base).as_posix())
        except ValueError as err:
            raise ValueError(
                f"Version folders must lie inside the results folder {base}, got {folder} instead."
            ) from err
    return RunRecord(
        time=(now or datetime.now(UTC)).astimezone(UTC),
        host=socket.gethostname(),
        pid=os.getpid(),
        cwd=os.getcwd(),
        versions=tuple(sorted(set(versions))),
        configfiles=tuple(str(Path(f).absolute()) for f in configfiles or ()),
        config_args=tuple(str(a) for a in config_args or ()),
        workflow_configfiles=None
        if workflow_configfiles is None
        else tuple(str(Path(f).absolute()) for f in workflow_configfiles),
    )


def write_run_record(results: str | os.PathLike, record: RunRecord) -> Path:
    """Write a record into ``<results>/.neuroflow/runs/<UTC time>-<pid>.json`` atomically.

    Parameters
    ----------
    results : path-like
        The results folder.
    record : RunRecord
        The record.

    Returns
    -------
    path : Path
        The file written.
    """
    folder = runs_dir(results)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = record.time.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = folder / f"{stamp}-{record.pid}.json"
    tmp = folder / f".{path.name}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(record.to_dict(), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_run_records(results: str | os.PathLike) -> tuple[list[RunRecord], list[Path]]:
    """Every run record of a results folder, newest first.

    Parameters
    ----------
    results : path-like
        The results folder.

    Returns
    -------
    records : list of RunRecord
        The readable records, newest first.
    unreadable : list of Path
        Files that are not valid records (left alone, reported by the caller).
    """
    folder = runs_dir(results)
    records: list[RunRecord] = []
    unreadable: list[Path] = []
    if not folder.is_dir():
        return records, unreadable
    for path in sorted(folder.glob("*.json")):
        try:
            records.append(RunRecord.from_dict(json.loads(path.read_text("utf-8")), path))
        except (OSError, ValueError):
            unreadable.append(path)
    records.sort(key=lambda r: r.time, reverse=True)
    return records, unreadable


def recent_runs(
    records: Sequence[RunRecord],
    *,
    keep_runs: int,
    keep_days: float,
    now: datetime | None = None,
) -> list[RunRecord]:
    """The runs that count as recent: the last ``keep_runs`` and those of the last days.

    Parameters
    ----------
    records : sequence of RunRecord
        Run records (any order).
    keep_runs : int
        How many of the newest runs are recent, whatever their age.
    keep_days : float
        Runs that started less than this many days before ``now`` are recent too.
    now : datetime | None
        The reference time (default: now).

    Returns
    -------
    recent : list of RunRecord
        The recent runs, newest first.

    Raises
    ------
    ValueError
        When ``keep_runs`` or ``keep_days`` is negative.
    """
    if keep_runs < 0:
        raise ValueError(f"`keep_runs` must be >= 0, got {keep_runs} instead.")
    if keep_days < 0:
        raise ValueError(f"`keep_days` must be >= 0, got {keep_days} instead.")
    newest = sorted(records, key=lambda r: r.time, reverse=True)
    since = (now or datetime.now(UTC)) - timedelta(days=keep_days)
    return [r for i, r in enumerate(newest) if i < keep_runs or r.time >= since]


def versions_of_runs(records: Iterable[RunRecord]) -> dict[str, RunRecord]:
    """Each version folder the runs used, with the newest run that used it.

    Parameters
    ----------
    records : iterable of RunRecord
        Run records (any order).

    Returns
    -------
    versions : dict
        ``"stage/version folder"`` -> the newest record listing it.
    """
    out: dict[str, RunRecord] = {}
    for record in sorted(records, key=lambda r: r.time):
        for version in record.versions:
            out[version] = record
    return out


def describe_run(record: RunRecord) -> str:
    """A one-line description of a run, for ``neuroflow gc``.

    Parameters
    ----------
    record : RunRecord
        The run.

    Returns
    -------
    text : str
        ``the run of 2025-01-31 12:00:00 UTC on host (pid 123, working folder /x;
        --configfile a.yaml; --config k=v)``.
    """
    details = f"pid {record.pid}, working folder {record.cwd}"
    if record.configfiles:
        details += "; --configfile " + " ".join(record.configfiles)
    if record.config_args:
        details += "; --config " + " ".join(record.config_args)
    when = record.time.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"the run of {when} on {record.host} ({details})"


def check_yaml_syntax(path: str | os.PathLike) -> None:
    """Raise a ConfigError naming the file, line and column of a YAML syntax error.

    Snakemake reports only "Config file is not valid JSON or YAML"; this reads the file
    the same way first (JSON is valid YAML) so the message can say where.
    """
    import yaml

    from neuroflow.config import ConfigError

    try:
        yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        what = " ".join(str(p) for p in (err.context, err.problem) if p)
        raise ConfigError(
            f"Config file {path} must be valid YAML, got a syntax error at {where}: {what}."
        ) from err
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"Config file {path} must be valid YAML, got {err} instead.") from err


def override_error(entry: str, error: Exception) -> str:
    """The message for a ``--config KEY=VALUE`` entry that Snakemake refuses.

    Parameters
    ----------
    entry : str
        The entry as given, e.g. ``"encoding.alpha=3"``.
    error : Exception
        Snakemake's error.

    Returns
    -------
    message : str
        Names the entry; a dotted key gets the mapping form that sets the same value.
    """
    key, _, value = entry.partition("=")
    if "." not in key:
        return f"--config entry {entry!r} is invalid: {error}"
    first, *rest = key.split(".")
    nested = value
    for part in reversed(rest):
        nested = f"{{{part}: {nested}}}"
    return (
        f"--config entry {entry!r} must be KEY=VALUE with a top-level KEY, got {key!r} "
        f"instead (Snakemake's --config takes no dotted keys). Set a nested value as a "
        f"mapping: --config {first}='{nested}'."
    )


def snakemake_config(
    configfiles: Sequence[str | os.PathLike] = (),
    config_args: Sequence[str] = (),
    *,
    base: str | os.PathLike,
    schema: str | os.PathLike,
    replace: bool = False,
) -> dict[str, Any]:
    """The validated config a run gets from the same config arguments.

    Follows Snakemake: the Snakefile's ``configfile:`` (``base``) is read first (it may
    be missing when ``--configfile`` files are given), each ``--configfile`` updates it
    recursively in order, then the ``--config`` overrides do, parsed as Snakemake
    parses them (Snakemake's own functions do the reading, parsing and merging). The
    result is validated and sorted as the Snakefile does.

    Parameters
    ----------
    configfiles : sequence of path-like
        ``--configfile`` files, in order.
    config_args : sequence of str
        ``--config`` overrides, ``KEY=VALUE`` each.
    base : path-like
        The Snakefile's ``configfile:`` (``config/config.yaml``).
    schema : path-like
        ``workflow/schemas/config.schema.yaml``.
    replace : bool
        Snakemake's ``--replace-workflow-config``: the ``--configfile`` files replace
        ``base`` instead of updating it.

    Returns
    -------
    config : dict
        The validated config, defaults filled in.

    Raises
    ------
    ConfigError
        When a file is missing or unreadable, an override is malformed, or the result
        does not match the schema.
    """
    from snakemake.cli import parse_config
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config
    from snakemake_interface_common.exceptions import WorkflowError

    from neuroflow.config import ConfigError, coerce_overrides, sorted_config, validate_config

    def load(path: str | os.PathLike) -> dict[str, Any]:
        if not Path(path).is_file():
            raise ConfigError(f"Config files must exist, got {str(path)!r} instead.")
        check_yaml_syntax(path)
        try:
            return load_configfile(str(path))
        except (OSError, WorkflowError) as err:
            raise ConfigError(f"Config file {path}: {err}") from err

    config: dict[str, Any] = {}
    if replace and configfiles:
        base = Path(os.devnull) / "none"  # read nothing from the Snakefile's config file
    if Path(base).exists():
        update_config(config, load(base))
    elif not configfiles:
        raise ConfigError(
            f"The config file {base} must exist when no --configfile is given, got a "
            f"missing file instead (working folder {os.getcwd()})."
        )
    for path in configfiles:
        update_config(config, load(path))
    overrides: dict[str, Any] = {}
    for entry in config_args:  # one at a time, so that an error names its entry
        try:
            update_config(overrides, parse_config([entry]))
        except ValueError as err:
            raise ConfigError(override_error(entry, err)) from err
    update_config(config, coerce_overrides(overrides, schema))
    sources = [str(p) for p in ([base] if Path(base).exists() else []) + list(configfiles)]
    source = " + ".join(sources) + (" + --config" if config_args else "")
    return sorted_config(validate_config(config, schema, source=source or "the config"))

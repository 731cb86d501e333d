"""`neuroflow run`: Snakemake on the installed workflow, with its config files in order."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from neuroflow.cli.configs import DEFAULT_CONFIG, _in_workflow
from neuroflow.workflow.defaults import workflow_root

if TYPE_CHECKING:
    pass

__all__ = ["cmd_run", "snakemake_configfiles", "snakemake_run_args"]


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

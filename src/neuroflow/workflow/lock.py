"""An exclusive lock on a results folder, so that two runs never write into it at once.

Snakemake locks the output files of a run inside its own working folder
(``.snakemake/locks``), so two runs started from different folders that share one
``results_dir`` are not locked against each other. The main process of a real run (and
``neuroflow gc`` while it deletes) therefore takes an exclusive POSIX record lock
(:func:`fcntl.lockf`) on ``<results>/.neuroflow/lock``:

- the kernel releases it when the process ends, however it ends (``SIGKILL`` included),
  so a crashed run never leaves a stale lock behind;
- record locks work across machines on NFS (through the NFS lock manager), so a run on a
  login node and a run on another node see each other;
- the holder writes its host, pid, working folder and start time into the file, so a
  second run can say who holds it.

POSIX record locks belong to a process, not to a file object: a process never conflicts
with its own lock, and closing *any* file object of the lock file in the holding process
releases the lock. The holding process must therefore keep the one file object it locked
with (:func:`hold_results_lock` keeps it at module level) and never open the lock file
otherwise (:func:`probe_lock` is for processes that do not hold it).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

__all__ = [
    "LOCK_NAME",
    "STATE_DIR",
    "ResultsLock",
    "ResultsLockedError",
    "acquire_lock",
    "hold_results_lock",
    "holder_info",
    "lock_path",
    "locked_message",
    "probe_lock",
    "read_holder",
    "try_lock",
]

#: Hidden folder inside ``results_dir`` that holds the lock and the run records.
STATE_DIR = ".neuroflow"
#: Name of the lock file inside :data:`STATE_DIR`.
LOCK_NAME = "lock"

#: Locks this process holds for the rest of its life, by resolved lock path (the file
#: objects must stay referenced: closing one releases the lock).
_HELD: dict[str, ResultsLock] = {}


class ResultsLockedError(RuntimeError):
    """Raised when another live process holds the lock of a results folder.

    Parameters
    ----------
    message : str
        What holds the lock and how to proceed.
    holder : dict
        The holder's record (``host``, ``pid``, ``cwd``, ``started``, ``command``); empty
        when it could not be read.
    """

    def __init__(self, message: str, holder: dict[str, Any]) -> None:
        super().__init__(message)
        self.holder = holder


@dataclass
class ResultsLock:
    """A lock held by this process on one results folder.

    Parameters
    ----------
    path : Path
        The lock file.
    file : file object
        The open lock file the lock was taken with (closing it releases the lock).
    """

    path: Path
    file: IO[str]

    def release(self) -> None:
        """Clear the holder record and release the lock (nothing when already released)."""
        if self.file.closed:
            return
        try:
            self.file.seek(0)
            self.file.truncate()
            self.file.flush()
        finally:
            fcntl.lockf(self.file.fileno(), fcntl.LOCK_UN)
            self.file.close()
            _HELD.pop(str(self.path.resolve()), None)


def lock_path(results: str | os.PathLike) -> Path:
    """The lock file of a results folder.

    Parameters
    ----------
    results : path-like
        The results folder (``results_dir``).

    Returns
    -------
    path : Path
        ``<results>/.neuroflow/lock``.
    """
    return Path(results) / STATE_DIR / LOCK_NAME


def holder_info(command: str, *, now: datetime | None = None) -> dict[str, Any]:
    """What a lock holder writes into the lock file.

    Parameters
    ----------
    command : str
        What holds the lock, e.g. ``"snakemake"`` or ``"neuroflow gc"``.
    now : datetime | None
        The start time (default: now, UTC).

    Returns
    -------
    info : dict
        ``host``, ``pid``, ``cwd``, ``started`` (ISO 8601, UTC) and ``command``.
    """
    started = (now or datetime.now(UTC)).astimezone(UTC)
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        "started": started.isoformat(timespec="seconds"),
        "command": command,
    }


def _is_conflict(err: OSError) -> bool:
    """Whether a failed non-blocking ``lockf`` means that another process holds the lock."""
    return err.errno in (errno.EACCES, errno.EAGAIN)


def try_lock(results: str | os.PathLike, *, command: str = "snakemake") -> ResultsLock | None:
    """Take the lock of a results folder if no other process holds it; never wait.

    Parameters
    ----------
    results : path-like
        The results folder; it and its ``.neuroflow`` folder are created if needed.
    command : str
        What takes the lock, written into the lock file with the host, pid, working
        folder and time.

    Returns
    -------
    lock : ResultsLock | None
        The lock, or ``None`` when another live process holds it.
    """
    path = lock_path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    handle = os.fdopen(fd, "r+", encoding="utf-8")
    try:
        fcntl.lockf(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        handle.close()
        if _is_conflict(err):
            return None
        raise OSError(
            err.errno,
            f"Cannot lock {path} ({err.strerror}): the filesystem must support POSIX record "
            "locks (on NFS: the lock manager). Run snakemake with --nolock to skip the lock.",
        ) from err
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(holder_info(command)) + "\n")
    handle.flush()
    os.fsync(handle.fileno())
    return ResultsLock(path=path, file=handle)


def read_holder(results: str | os.PathLike) -> dict[str, Any]:
    """The record the current (or last) holder wrote into the lock file.

    Parameters
    ----------
    results : path-like
        The results folder.

    Returns
    -------
    holder : dict
        ``host``, ``pid``, ``cwd``, ``started`` and ``command``; empty when the file is
        missing, empty or unreadable (e.g. read in the instant a new holder rewrites it).
    """
    try:
        data = json.loads(lock_path(results).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def probe_lock(results: str | os.PathLike) -> dict[str, Any] | None:
    """Whether another live process holds the lock, without taking it or creating files.

    Must not be called by a process that holds the lock itself (closing the probe's file
    object would release it).

    Parameters
    ----------
    results : path-like
        The results folder.

    Returns
    -------
    holder : dict | None
        The holder's record (see :func:`read_holder`) when the lock is held, else ``None``.
    """
    path = lock_path(results)
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if _is_conflict(err):
                return read_holder(results)
            raise
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def locked_message(results: str | os.PathLike, holder: dict[str, Any]) -> str:
    """Why a run cannot start on a locked results folder, and how to proceed.

    Parameters
    ----------
    results : path-like
        The results folder.
    holder : dict
        The holder's record (see :func:`read_holder`).

    Returns
    -------
    message : str
        Names the folder, the holder's command, host, pid, working folder and start
        time, and the ways forward.
    """

    def field(key: str) -> str:
        return str(holder.get(key) or "unknown")

    return (
        f"The results folder {Path(results).resolve()} is in use by another run "
        f"({field('command')} on host {field('host')}, pid {field('pid')}, working folder "
        f"{field('cwd')}, started {field('started')}). Two runs writing into one results "
        f"folder can overwrite each other's stores, so this run stops before any job "
        f"starts. Wait for that run to finish, or give this run another `results_dir` "
        f"(e.g. --config results_dir=results_b). If both runs select different versions "
        f"on purpose, run with --nolock. The lock is {lock_path(results).resolve()}; "
        f"it is released when its process ends, even when killed."
    )


def acquire_lock(results: str | os.PathLike, *, command: str = "snakemake") -> ResultsLock:
    """Take the lock of a results folder, or fail at once if another process holds it.

    Parameters
    ----------
    results : path-like
        The results folder.
    command : str
        What takes the lock (see :func:`try_lock`).

    Returns
    -------
    lock : ResultsLock
        The lock; call :meth:`ResultsLock.release` when done.

    Raises
    ------
    ResultsLockedError
        When another live process holds the lock, with :func:`locked_message`.
    """
    lock = try_lock(results, command=command)
    if lock is None:
        holder = read_holder(results)
        raise ResultsLockedError(locked_message(results, holder), holder)
    return lock


def hold_results_lock(
    results: str | os.PathLike, *, enabled: bool = True, command: str = "snakemake"
) -> ResultsLock | None:
    """Take the lock of a results folder for the rest of this process's life.

    The workflow's main process calls this before the first job of a real run. The
    lock is kept referenced at module level, so it lasts until the process ends; a
    second call for the same folder returns the lock already held.

    Parameters
    ----------
    results : path-like
        The results folder.
    enabled : bool
        ``False`` (Snakemake's ``--nolock``) takes no lock.
    command : str
        What takes the lock (see :func:`try_lock`).

    Returns
    -------
    lock : ResultsLock | None
        The lock held, or ``None`` when ``enabled`` is false.

    Raises
    ------
    ResultsLockedError
        When another live process holds the lock.
    """
    if not enabled:
        return None
    key = str(lock_path(results).resolve())
    held = _HELD.get(key)
    if held is not None and not held.file.closed:
        return held
    lock = acquire_lock(results, command=command)
    _HELD[key] = lock
    return lock

"""Snakemake runs of a test process start warm: each a fork of one launcher process.

``python -m snakemake`` spends about 1.4 s of CPU importing Snakemake and the modules the
Snakefile and the plan import; the workflow tests start it ~440 times. A
:class:`Launcher` imports them once (per test process, started on the first run) and
forks one child per run, which then is ``python -m snakemake ARGS`` as a new
interpreter would be: the run's working directory, environment, ``sys.argv``, standard
streams (files read back as the completed process's output, stdin empty), exit status,
and its own warm job server. The launcher never runs Snakemake itself, so every child
starts from the same freshly imported state.

A run whose environment differs from the launcher's in anything but the variables of
:data:`PER_TEST` (a variable read at import time could matter) runs as a new
interpreter, as does every run when ``NEUROFLOW_TEST_LAUNCHER=0`` (which also gives each
run its own warm job server: ``workflow_helpers.snakemake``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from neuroflow.workflow.warm_jobs import (
    SET_ON_IMPORT,
    receive_exactly,
    receive_message,
    send_message,
)

#: Set to 0 to start every Snakemake run as a new interpreter.
SWITCH = "NEUROFLOW_TEST_LAUNCHER"
#: Variables that may differ between a run and the launcher: set per test by pytest, read
#: by neuroflow at run time only, or set by libraries when the test process imports them.
PER_TEST = (
    "PYTEST_CURRENT_TEST",
    "NEUROFLOW_WARM_SERVER",
    "NEUROFLOW_DEMO_CACHE",
    *SET_ON_IMPORT,
)
#: What ``python -m snakemake`` imports before it reads a config, the Snakefile's own
#: imports, and what Snakemake and the plan import while a run starts (its source files,
#: report plugins; the plan's modules of every stage: ~0.5 s of CPU per run).
PRELOAD = (
    "snakemake.cli",
    "snakemake.api",
    "snakemake.script",
    "snakemake_executor_plugin_slurm",
    "neuroflow.config",
    "neuroflow.workflow.plan",
    "neuroflow.workflow.warm_jobs",
    "neuroflow.workflow.versions",
    "smart_open",
    "snakemake.report.html_reporter",
    "yte",
    "neuroflow.demo",
    "neuroflow.stimuli.video",
    "neuroflow.features.config",
    "neuroflow.features.inventory",
    "neuroflow.features.torch_build",
    "neuroflow.features.whisper_weights",
    "neuroflow.config.transformer_options",
    "neuroflow.decoding.options",
    "neuroflow.qc",
    "neuroflow.workflow.applicability",
    "neuroflow.workflow.runs",
    "neuroflow.workflow.concurrent_runs",
)
_HERE = Path(__file__).resolve().parent


def _comparable(env: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in PER_TEST}


def _watch(conn: socket.socket) -> None:
    """Kill this run when the test process stops waiting for it (closed or killed)."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _run(conn: socket.socket, request: tuple) -> None:
    """In a forked child: be ``python -m snakemake ARGS``; report the exit status."""
    import atexit as child_atexit
    import traceback

    status = 1
    try:
        conn.sendall(struct.pack("!i", os.getpid()))
        args, cwd, env, stdout, stderr = request
        threading.Thread(target=_watch, args=(conn,), daemon=True).start()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, stdout), (2, stderr)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        import snakemake.cli
        import snakemake.workflow

        # read from the current folder when Snakemake is imported
        snakemake.workflow.Workflow._rundir = str(Path.cwd().absolute())
        # as `python -m snakemake` sets it (importing snakemake.__main__ would run it)
        sys.argv = [os.path.join(os.path.dirname(snakemake.cli.__file__), "__main__.py"), *args]
        try:
            snakemake.cli.main(list(args))
            status = 0
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if isinstance(code, str):
                print(code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            status = 1
        with contextlib.suppress(BaseException):
            child_atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(struct.pack("!i", status))
        os._exit(status & 0xFF)


def serve(address: str, alive_fd: int) -> None:
    """The launcher: import :data:`PRELOAD`, then fork one child per request."""
    import gc
    import importlib
    import select

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()
    while True:
        ready, _, _ = select.select([listener, alive_fd], [], [])
        if alive_fd in ready:
            return
        conn, _ = listener.accept()
        payload = receive_message(conn)
        if payload is None:
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            os.close(alive_fd)
            _run(conn, pickle.loads(payload))
        conn.close()


def _new_file(folder: str) -> Path:
    fd, path = tempfile.mkstemp(dir=folder)
    os.close(fd)
    return Path(path)


class Launcher:
    """A test process's handle on its launcher (see the module's docstring)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = _comparable(env)
        self.folder = tempfile.mkdtemp(prefix="nf-launch-", dir="/tmp")
        self.address = os.path.join(self.folder, "socket")
        read, self._alive = os.pipe()
        code = (
            f"import sys; sys.path.insert(0, {str(_HERE)!r}); import snakemake_launcher; "
            "snakemake_launcher.serve(sys.argv[1], int(sys.argv[2]))"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, self.address, str(read)],
            pass_fds=(read,),
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=self.folder,
        )
        os.close(read)
        atexit.register(self.close)

    def accepts(self, env: Mapping[str, str]) -> bool:
        """Whether a run with ``env`` can start here."""
        return self.process.poll() is None and _comparable(env) == self.env

    def run(
        self, args: list[str], env: Mapping[str, str], timeout: float, cwd: Path | None = None
    ) -> subprocess.CompletedProcess:
        """``python -m snakemake *args`` in ``cwd`` (default: the current folder), as
        ``subprocess.run`` with ``capture_output=True, text=True`` would run it."""
        out, err = (_new_file(self.folder) for _ in range(2))
        cmd = [sys.executable, "-m", "snakemake", *args]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                deadline = time.monotonic() + 120.0
                while True:
                    try:
                        sock.connect(self.address)
                        break
                    except (FileNotFoundError, ConnectionRefusedError):
                        if self.process.poll() is not None or time.monotonic() > deadline:
                            raise
                        time.sleep(0.01)
                request = (list(args), str(cwd or os.getcwd()), dict(env), str(out), str(err))
                send_message(sock, pickle.dumps(request))
                sock.settimeout(timeout)
                try:
                    head = receive_exactly(sock, 4)
                    pid = None if head is None else struct.unpack("!i", head)[0]
                    reply = receive_exactly(sock, 4) if pid is not None else None
                except TimeoutError:
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(cmd, timeout) from None
            status = -signal.SIGKILL if reply is None else struct.unpack("!i", reply)[0]
            stdout = out.read_text(errors="replace")
            stderr = err.read_text(errors="replace")
        finally:
            for path in (out, err):
                path.unlink(missing_ok=True)
        return subprocess.CompletedProcess(cmd, status, stdout, stderr)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._alive)
        with contextlib.suppress(Exception):
            self.process.terminate()
            self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


_LAUNCHERS: list[Launcher] = []


def run(
    args: list[str], env: Mapping[str, str], timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m snakemake *args`` with ``env``: in a fork of this process's
    launcher when its environment is the same, else as a new interpreter."""
    if env.get(SWITCH, "1") != "0":
        if not _LAUNCHERS:
            _LAUNCHERS.append(Launcher(env))
        launcher = _LAUNCHERS[0]
        if launcher.accepts(env):
            return launcher.run(args, env, timeout, cwd)
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=timeout,
        cwd=cwd,
    )

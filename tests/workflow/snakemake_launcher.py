"""Snakemake runs of a test process start warm: each a fork of one launcher process.

``python -m snakemake`` spends about 1.4 s of CPU importing Snakemake and the modules the
Snakefile and the plan import; the workflow tests start it ~440 times. A
:class:`Launcher` imports them once (per test process, started on the first run) and
forks one child per run, which then is ``python -m snakemake ARGS`` as a new
interpreter would be: the run's working directory, environment, ``sys.argv``, standard
streams (files read back as the completed process's output, stdin empty), exit status,
and its own warm job server. The launcher never runs Snakemake itself, so every child
starts from the same freshly imported state. ``python -m neuroflow.cli`` (the
``neuroflow`` command, ~1.5 s of CPU per start) runs the same way (``module``), and
:meth:`Launcher.start` gives a run to poll and kill as ``subprocess.Popen`` would.

A run whose environment differs from the launcher's in anything but the variables of
:data:`PER_TEST` (a variable read at import time could matter) runs as a new
interpreter, as does every run when ``NEUROFLOW_TEST_LAUNCHER=0`` (which also gives each
run its own warm job server: ``workflow_helpers.snakemake``).

The children share one more thing: Snakemake's translation of each workflow file into
Python (:class:`ParseCache`, ~0.1 s of CPU per run for the Snakefile and its 16 rule
files), kept in the launcher's folder under the file's path and content, so a run
translates only files no earlier run of this launcher read as they are now.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import pickle
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

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
    "neuroflow.cli",
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


def _main(module: str, args: list[str]) -> None:
    """Run ``python -m MODULE ARGS`` in this process (it raises SystemExit or returns)."""
    if module != "snakemake":
        import runpy

        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    import snakemake.cli
    import snakemake.workflow

    # read from the current folder when Snakemake is imported
    snakemake.workflow.Workflow._rundir = str(Path.cwd().absolute())
    # as `python -m snakemake` sets it (importing snakemake.__main__ would run it)
    sys.argv = [os.path.join(os.path.dirname(snakemake.cli.__file__), "__main__.py"), *args]
    snakemake.cli.main(list(args))


def _run(conn: socket.socket, request: tuple) -> None:
    """In a forked child: be ``python -m MODULE ARGS``; report the exit status."""
    import atexit as child_atexit
    import traceback

    status = 1
    try:
        conn.sendall(struct.pack("!i", os.getpid()))
        module, args, cwd, env, stdout, stderr = request
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
        try:
            _main(module, list(args))
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


class _Folder(MutableMapping):
    """Pickled values in files of a folder, written atomically (a mapping for
    :class:`ParseCache` that forked runs share)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def __getitem__(self, key: str) -> Any:
        try:
            return pickle.loads((self.folder / key).read_bytes())
        except (OSError, EOFError, pickle.UnpicklingError) as err:
            raise KeyError(key) from err

    def __setitem__(self, key: str, value: Any) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".")  # hidden until replaced
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f)
        os.replace(tmp, self.folder / key)

    def __delitem__(self, key: str) -> None:
        (self.folder / key).unlink()

    def __iter__(self):
        return (p.name for p in self.folder.iterdir() if not p.name.startswith("."))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ParseCache:
    """``snakemake.workflow.parse`` that translates each workflow file once.

    Snakemake translates the Snakefile and every included rule file into Python on each
    run. The translation depends on the file's content and the arguments only, so it is
    kept in ``store`` under the file's path and content, the shell-command override and
    the rule count it starts from; a file that is not a local file is translated as
    usual. What a translation sets besides its result (the shell-command override) is
    set again from the store.
    """

    def __init__(self, parse: Callable, store: MutableMapping) -> None:
        self.parse = parse
        self.store = store

    def __call__(self, path, workflow, linemap, overwrite_shellcmd=None, rulecount=0):
        import snakemake.parser

        name = str(
            path.get_path_or_uri(secret_free=True) if hasattr(path, "get_path_or_uri") else path
        )
        if not os.path.isfile(name):
            return self.parse(path, workflow, linemap, overwrite_shellcmd, rulecount)
        key = hashlib.sha256(
            pickle.dumps((name, Path(name).read_bytes(), overwrite_shellcmd, rulecount))
        ).hexdigest()
        try:
            code, count, lines = self.store[key]
            snakemake.parser.Shell.overwrite_cmd = overwrite_shellcmd
        except KeyError:
            lines = {}
            code, count = self.parse(path, workflow, lines, overwrite_shellcmd, rulecount)
            self.store[key] = (code, count, lines)
        linemap.update(lines)
        return code, count


def serve(address: str, alive_fd: int) -> None:
    """The launcher: import :data:`PRELOAD`, then fork one child per request."""
    import gc
    import importlib

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    import snakemake.workflow

    parsed = _Folder(Path(address).parent / "parsed")
    snakemake.workflow.parse = ParseCache(snakemake.workflow.parse, parsed)
    # the config schema as every run reads it first (each run still reads any file of
    # it that changed since: neuroflow.config.load_schema compares their stamps), and the
    # built-in feature extractors, which the plan of every run imports to look them up
    with contextlib.suppress(Exception):
        from neuroflow.config import load_schema
        from neuroflow.features.registry import available_extractors

        load_schema(_HERE.parents[1] / "workflow" / "schemas" / "config.schema.yaml")
        available_extractors()
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


class Started:
    """A run started by :meth:`Launcher.start`: ``pid``, ``poll``, ``wait`` and ``kill`` as
    ``subprocess.Popen`` has them, and its output once it ended (:meth:`result`)."""

    def __init__(
        self, cmd: list[str], sock: socket.socket, pid: int | None, out: Path, err: Path
    ) -> None:
        self.args, self._sock, self.pid, self._out, self._err = cmd, sock, pid, out, err
        self.returncode: int | None = None if pid is not None else 1
        if pid is None:  # the fork failed before it started the run
            sock.close()

    def poll(self) -> int | None:
        """The exit status, or None while the run goes on."""
        if self.returncode is None:
            ready, _, _ = select.select([self._sock], [], [], 0)
            if ready:
                self._finish()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end of the run (``subprocess.TimeoutExpired`` after ``timeout``)."""
        if self.returncode is None:
            self._sock.settimeout(timeout)
            try:
                self._finish()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the run (its jobs end with its connections) and wait for it."""
        if self.returncode is None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self._sock.settimeout(None)
            self._finish()

    def _finish(self) -> None:
        reply = receive_exactly(self._sock, 4)
        self.returncode = -signal.SIGKILL if reply is None else struct.unpack("!i", reply)[0]
        self._sock.close()

    def result(self) -> subprocess.CompletedProcess:
        """The ended run's exit status and output; removes the output files."""
        try:
            stdout = self._out.read_text(errors="replace")
            stderr = self._err.read_text(errors="replace")
        finally:
            for path in (self._out, self._err):
                path.unlink(missing_ok=True)
        return subprocess.CompletedProcess(self.args, self.returncode, stdout, stderr)


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

    def start(
        self,
        args: list[str],
        env: Mapping[str, str],
        cwd: Path | None = None,
        module: str = "snakemake",
    ) -> Started:
        """Start ``python -m MODULE *args`` in ``cwd`` (default: the current folder)."""
        out, err = (_new_file(self.folder) for _ in range(2))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            deadline = time.monotonic() + 120.0
            while True:
                try:
                    sock.connect(self.address)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if self.process.poll() is not None or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            request = (module, list(args), str(cwd or os.getcwd()), dict(env), str(out), str(err))
            send_message(sock, pickle.dumps(request))
            head = receive_exactly(sock, 4)
        except BaseException:
            sock.close()
            for path in (out, err):
                path.unlink(missing_ok=True)
            raise
        pid = None if head is None else struct.unpack("!i", head)[0]
        return Started([sys.executable, "-m", module, *args], sock, pid, out, err)

    def run(
        self,
        args: list[str],
        env: Mapping[str, str],
        timeout: float,
        cwd: Path | None = None,
        module: str = "snakemake",
    ) -> subprocess.CompletedProcess:
        """``python -m MODULE *args`` in ``cwd`` (default: the current folder), as
        ``subprocess.run`` with ``capture_output=True, text=True`` would run it."""
        proc = self.start(args, env, cwd, module)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.result()  # removes its output files
            raise
        return proc.result()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._alive)
        with contextlib.suppress(Exception):
            self.process.terminate()
            self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


_LAUNCHERS: list[Launcher] = []


def _launcher(env: Mapping[str, str]) -> Launcher | None:
    """This process's launcher when a run with ``env`` can start there."""
    if env.get(SWITCH, "1") == "0":
        return None
    if not _LAUNCHERS:
        _LAUNCHERS.append(Launcher(env))
    return _LAUNCHERS[0] if _LAUNCHERS[0].accepts(env) else None


def run(
    args: list[str],
    env: Mapping[str, str],
    timeout: float,
    cwd: Path | None = None,
    module: str = "snakemake",
) -> subprocess.CompletedProcess:
    """Run ``python -m MODULE *args`` with ``env``: in a fork of this process's launcher
    when its environment is the same, else as a new interpreter."""
    launcher = _launcher(env)
    if launcher is not None:
        return launcher.run(args, env, timeout, cwd, module)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=timeout,
        cwd=cwd,
    )


class _NewInterpreter:
    """A run of :func:`start` as a new interpreter, in a session of its own (killing its
    process group kills what it started), with the API of :class:`Started`."""

    def __init__(self, cmd: list[str], env: Mapping[str, str], cwd: Path | None) -> None:
        self.args = cmd
        # read back (and closed) by result()
        self._files = [tempfile.TemporaryFile() for _ in range(2)]  # noqa: SIM115
        self._popen = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._files[0],
            stderr=self._files[1],
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        self.pid = self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._popen.wait(timeout)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._popen.wait()

    def result(self) -> subprocess.CompletedProcess:
        texts = []
        for file in self._files:
            file.seek(0)
            texts.append(file.read().decode(errors="replace"))
            file.close()
        return subprocess.CompletedProcess(self.args, self.returncode, *texts)


def start(
    args: list[str], env: Mapping[str, str], cwd: Path | None = None, module: str = "snakemake"
) -> Started | _NewInterpreter:
    """Start ``python -m MODULE *args`` with ``env`` (as :func:`run` would): ``poll``,
    ``wait``, ``kill`` (SIGKILL; a launched run's jobs end with its connections), and
    ``result`` (exit status and output) once it ended."""
    launcher = _launcher(env)
    if launcher is not None:
        return launcher.start(args, env, cwd, module)
    return _NewInterpreter([sys.executable, "-m", module, *args], env, cwd)

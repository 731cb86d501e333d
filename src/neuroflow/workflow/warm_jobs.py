"""Local jobs start warm: each ``script:`` job runs in a fork of one process that has
already imported the scientific stack.

Snakemake runs a ``script:`` job as a new ``python`` process. On a local run of a small
dataset most of each job is that interpreter importing NumPy, pandas, xarray, zarr and
neuroflow again (about 0.6 s of CPU, ~1.5 s per job with the shell around it: measured
on a 60-job parcel time-series run, 143 s of CPU in jobs of which 49 s was their work).
:func:`install` makes local runs start each Python script job instead as a fork of a
*warm server*: one clean, single-threaded process (started on the first job, one per
Snakemake process) that imports the stack once and forks a child per job. Each job still
runs alone in its own process (its own logging, warnings, BLAS threads and memory, as
before), with what the shell would have given it: the working directory, the
environment, ``OMP_NUM_THREADS`` and the other thread counts of the job's ``threads``
(the BLAS libraries already loaded are limited to them), ``TMPDIR`` from the ``tmpdir``
resource. A job that fails exits non-zero with its traceback on standard error, as
before. Measured on that run: 98 s -> 52 s of wall time on 2 cores, every table
byte-identical and every store equal. Whenever it waits for a job, the server imports
one more of the slower modules most jobs need (PyTorch, scikit-learn, Matplotlib, MNE,
nilearn) and last the Hugging Face libraries, with ``HF_HUB_OFFLINE=1`` as every
extractor sets before importing them; a job whose Hugging Face variables (cache folders,
token, verbosity) differ from the server's runs the usual way.

Several Snakemake processes can share one server (:class:`SharedServer`): a process
that starts many small runs one after another (a test suite, a sweep script) starts one,
imports the stack once, and names its socket in ``NEUROFLOW_WARM_SERVER`` for the runs it
starts. A run uses it only when its environment equals the one the server started with
(thread counts, temporary folders and the names the starter lists aside) and its
interpreter is the server's; otherwise it starts its own. A job of a shared server dies
when the Snakemake process that asked for it ends, killed or not, as a job of its own
server does.

Jobs run as before (a new interpreter) where this does not apply: cluster and other
non-local executors (each job is its own Snakemake process there), jobs in a conda
environment, container or environment modules, notebooks, and when
``NEUROFLOW_WARM_JOBS=0`` is set. A job dies with the server, which exits when the
Snakemake process does: a run that is killed leaves no job behind.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import hashlib
import importlib
import json
import os
import pickle
import runpy
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
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "EXTRACTION_SCRIPTS",
    "HF_EXTRACTORS",
    "HF_IMPORT_VARIABLES",
    "HF_PRELOAD",
    "HF_SCRIPTS",
    "IDLE_PRELOAD",
    "OFFLINE_DEFAULTS",
    "OFFLINE_ENVIRONMENT",
    "PRELOAD",
    "RUN_DEFAULTS",
    "SET_ON_IMPORT",
    "SHARED_ENV",
    "ServerUnavailableError",
    "SharedServer",
    "enabled",
    "environment_identity",
    "hf_import_environment",
    "idle_preload",
    "install",
    "job_environment",
    "load_compiled_code",
    "receive_exactly",
    "receive_message",
    "run_warm",
    "send_message",
    "serve",
    "uses_hf",
]

#: Set to ``0`` (or ``false``/``no``/``off``) to start every job as a new interpreter.
ENV_SWITCH = "NEUROFLOW_WARM_JOBS"
#: Modules the warm server imports once, before it forks the first job.
PRELOAD: tuple[str, ...] = (
    "numpy",
    "scipy.linalg",
    "pandas",
    "xarray",
    "zarr",
    "threadpoolctl",
    "snakemake.iocontainers",
    "neuroflow.workflow.runner",
    "neuroflow.workflow.warm_jobs",
)
#: Imported when the server is first idle (no job waiting), one module at a time, after
#: the versions of the installed packages every store records (~8 ms per job): most
#: fitting, extraction, decoding, quality-control and figure jobs need them (PyTorch alone
#: takes 1-2 s to import), the others lose nothing. Then the stages' own modules and what
#: they import besides, roughly in the order a run reaches them (0.1-0.3 s per job that
#: would import them itself). An entry ``"module:function"`` imports the module and calls
#: the function (:func:`load_compiled_code`).
IDLE_PRELOAD: tuple[str, ...] = (
    "neuroflow.artifacts:software_versions",
    "torch",
    "sklearn",
    "scipy.signal",
    "scipy.stats",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "nilearn.maskers",
    "mne",
    "neuroflow.preprocessing.fmri",
    "neuroflow.preprocessing.eeg.stage",
    "numba",
    "neuroflow.workflow.warm_jobs:load_compiled_code",
    "neuroflow.features.align",
    "neuroflow.features.extract",
    "neuroflow.encoding.stage",
    "neuroflow.encoding.trials",
    "neuroflow.evaluation.stage",
    "nilearn.plotting",
    "neuroflow.qc.fmri",
    "neuroflow.qc.eeg",
    "neuroflow.decoding.stage",
    "neuroflow.decoding.fmri",
    "rsatoolbox",
    "neuroflow.rsa.stage",
)
#: Imported last, with :data:`OFFLINE_ENVIRONMENT` set as every extractor sets it before
#: its first Hugging Face import (the libraries read it when imported): the demo's
#: generator and the text, image and audio extractors spend 2-4 s importing them.
HF_PRELOAD: tuple[str, ...] = ("transformers", "sentence_transformers")
#: Job scripts that import the Hugging Face libraries: always (the demo generator embeds
#: its captions with MiniLM), or for the extractors of :data:`HF_EXTRACTORS`.
HF_SCRIPTS = frozenset({"generate_demo.py"})
EXTRACTION_SCRIPTS = frozenset({"extract_features.py", "extract_pool_features.py"})
#: Extractor kinds (``extractor:`` of a ``features.extractors`` entry) that import them.
HF_EXTRACTORS = frozenset(
    {
        "sentence_transformer",
        "hf_text",
        "hf_vision",
        "hf_video",
        "hf_audio",
        "hf_clip",
        "mel_spectrogram",
    }
)
#: What neuroflow's extractors set before they import a Hugging Face library
#: (``neuroflow.features.hf``): no download at run time, and quiet loading.
OFFLINE_ENVIRONMENT: dict[str, str] = {"HF_HUB_OFFLINE": "1"}
OFFLINE_DEFAULTS: dict[str, str] = {"TRANSFORMERS_VERBOSITY": "error"}
#: Environment variables the Hugging Face libraries read when imported (their cache
#: folders, endpoint, token, offline mode and verbosity). A job whose values differ from
#: the server's after :data:`HF_PRELOAD` runs the usual way, as a new interpreter.
HF_IMPORT_VARIABLES: tuple[str, ...] = (
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS_",
    "TOKENIZERS_",
    "XDG_CACHE_HOME",
)
#: Environment variables Snakemake's shell sets to a job's thread count.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
#: What the Snakefile sets where unset, before any job loads OpenMP: idle solver threads
#: sleep instead of spinning, so that jobs sharing cores do not stall each other's
#: eigendecompositions (two concurrent 2-thread TRF fits on 2 cores took 185 s each with
#: spinning threads, 5 s without). A :class:`SharedServer` sets them too.
RUN_DEFAULTS: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE"}
#: Names the socket of a :class:`SharedServer` for the Snakemake processes started beside it.
SHARED_ENV = "NEUROFLOW_WARM_SERVER"
#: Variables that scikit-learn, joblib and PyTorch set in their own process when imported:
#: a Snakemake process that imported them (its plan may) differs from one that did not,
#: while the server imports them all the same.
SET_ON_IMPORT = ("KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "TORCHINDUCTOR_CACHE_DIR")
#: Variables that never make an environment differ from a shared server's: what each job
#: sets for itself (thread counts, temporary folder), what imports set, the server's name.
_UNCOMPARED = (
    *THREAD_VARIABLES,
    *("TMPDIR", "TMP", "TEMPDIR", "TEMP"),
    *SET_ON_IMPORT,
    SHARED_ENV,
)
#: Beside a shared server's socket: the identity of its environment and the names it ignores.
_IDENTITY_FILE = "identity.json"
_PATCHED = "_neuroflow_warm"
_SERVER_LOCK = threading.Lock()
_FOLDER_PREFIX = "neuroflow-warm-"
#: The workflow of the last :func:`install` call.
_INSTALLED: dict[str, Any] = {}
_PR_SET_PDEATHSIG = 1
#: A child's status when it declines a job before starting it (never an exit status).
_DECLINED = -1000


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether warm jobs are on (``NEUROFLOW_WARM_JOBS`` unset or not a false value)."""
    value = (os.environ if environ is None else environ).get(ENV_SWITCH, "1")
    return value.strip().lower() not in ("0", "false", "no", "off")


def job_environment(
    environ: Mapping[str, str], threads: int, tmpdir: str | None = None
) -> dict[str, str]:
    """The environment Snakemake's shell gives a job.

    Parameters
    ----------
    environ : mapping of str to str
        The Snakemake process's environment.
    threads : int
        The job's threads.
    tmpdir : str | None
        The job's ``tmpdir`` resource; sets ``TMPDIR``, ``TMP``, ``TEMP``, ``TEMPDIR``.

    Returns
    -------
    env : dict of str to str
        A copy of ``environ`` with the thread counts and temporary folder set.
    """
    env = dict(environ)
    env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    if tmpdir:
        env.update(dict.fromkeys(("TMPDIR", "TMP", "TEMPDIR", "TEMP"), str(tmpdir)))
    return env


def hf_import_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the Hugging Face libraries read when imported, as an extractor imports them.

    Parameters
    ----------
    environ : mapping of str to str
        A job's environment.

    Returns
    -------
    variables : dict of str to str
        The :data:`HF_IMPORT_VARIABLES` of ``environ`` with :data:`OFFLINE_ENVIRONMENT`
        set and :data:`OFFLINE_DEFAULTS` where unset.
    """
    env = {**OFFLINE_DEFAULTS, **environ, **OFFLINE_ENVIRONMENT}
    return {key: value for key, value in env.items() if key.startswith(HF_IMPORT_VARIABLES)}


def environment_identity(environ: Mapping[str, str], ignore: Iterable[str] = ()) -> str:
    """What a run must share with a :class:`SharedServer` to use it.

    Parameters
    ----------
    environ : mapping of str to str
        An environment.
    ignore : iterable of str
        Variables left out besides the thread counts, the temporary folders,
        :data:`SET_ON_IMPORT` and ``NEUROFLOW_WARM_SERVER``.

    Returns
    -------
    identity : str
        SHA-256 (hex) of this interpreter's path and the variables compared, sorted.
    """
    skip = {*_UNCOMPARED, *ignore}
    items = sorted((key, value) for key, value in environ.items() if key not in skip)
    payload = json.dumps([sys.executable, items]).encode()
    return hashlib.sha256(payload).hexdigest()


def idle_preload(jobs: Iterable[tuple[str, Any]] | None) -> tuple[str, ...]:
    """What the server imports when idle, for a run that has ``jobs`` to run.

    Parameters
    ----------
    jobs : iterable of (str, params) | None
        Script path and params of each job the run has to run (None: not known).

    Returns
    -------
    modules : tuple of str
        :data:`IDLE_PRELOAD`, then :data:`HF_PRELOAD` when one of the ``jobs``
        :func:`uses_hf` or they are not known.
    """
    if jobs is not None and not any(uses_hf(script, params) for script, params in jobs):
        return IDLE_PRELOAD
    return (*IDLE_PRELOAD, *HF_PRELOAD)


def _named(script: str, names: frozenset[str]) -> bool:
    name = os.path.basename(str(script))
    return any(name == known or name.endswith(f".{known}") for known in names)


def uses_hf(script: str, params: Any = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a job imports the Hugging Face libraries.

    Parameters
    ----------
    script : str
        The rule's script, or the job script Snakemake wrote from it
        (``.snakemake/scripts/tmpXXXXXXXX.<name>``).
    params : snakemake.io.Params | mapping | None
        The job's params; a feature-extraction job's ``cfg`` names its extractor, the
        demo generator's its ``demo`` section.
    environ : mapping | None
        The job's environment: a demo generator that copies its dataset from the
        demo cache (:func:`neuroflow.demo.cache.cached_entry`) imports nothing.

    Returns
    -------
    uses : bool
        True for :data:`HF_SCRIPTS`, and for :data:`EXTRACTION_SCRIPTS` of an extractor
        of :data:`HF_EXTRACTORS` (or one the params do not name).
    """
    if _named(script, HF_SCRIPTS):
        return not _demo_cached(params, environ)
    if not _named(script, EXTRACTION_SCRIPTS):
        return False
    try:
        kind = params["cfg"]["extractor"]
    except (KeyError, TypeError, IndexError):
        return True
    return kind in HF_EXTRACTORS


def _demo_cached(params: Any, environ: Mapping[str, str] | None) -> bool:
    """Whether a demo job's dataset waits in the demo cache."""
    from neuroflow.demo.cache import cached_entry

    try:
        config = params["cfg"]
    except (KeyError, TypeError, IndexError):
        return False
    return cached_entry(config, environ) is not None


def _pending_jobs(workflow: Any) -> list[tuple[str, Any]] | None:
    """Script and params of each job the run still has to run (None when the graph
    cannot say)."""
    try:
        jobs = list(workflow.dag.needrun_jobs(exclude_finished=False))
        return [(str(job.rule.script), job.params) for job in jobs if job.rule.script]
    except Exception:  # no graph, or one the scheduler changed while it was read
        return None


def _die_with_parent() -> None:
    """Ask the kernel to kill this process when its parent exits (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def send_message(sock: socket.socket, payload: bytes) -> None:
    """Send ``payload`` as one length-prefixed message (what :func:`receive_message` reads).

    Parameters
    ----------
    sock : socket.socket
        A connected stream socket.
    payload : bytes
        The message.
    """
    sock.sendall(struct.pack("!I", len(payload)) + payload)


def receive_message(sock: socket.socket) -> bytes | None:
    """One length-prefixed message (:func:`send_message`); None when the other end closed
    first."""
    head = receive_exactly(sock, 4)
    if head is None:
        return None
    return receive_exactly(sock, struct.unpack("!I", head)[0])


def receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from ``sock``; None when the other end closed first."""
    chunks, left = [], size
    while left:
        chunk = sock.recv(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _run_script(path: str, cwd: str, env: dict[str, str], threads: int) -> int:
    """Run one generated job script as ``python <path>`` would; its exit status."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # found again from the job's TMPDIR
    from threadpoolctl import threadpool_limits

    # the BLAS and OpenMP libraries the server loaded read their thread counts at load
    threadpool_limits(limits=threads)
    if "numexpr" in sys.modules:
        sys.modules["numexpr"].set_num_threads(threads)
    sys.argv = [path]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _watch_client(conn: socket.socket) -> None:
    """Kill this process as soon as the other end of ``conn`` closes (a thread).

    The client sends nothing after its request: whatever ``recv`` returns is the end
    (or an error) of a client that stopped waiting, killed or cancelled.
    """
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _job(
    conn: socket.socket,
    request: tuple,
    hf_environment: dict[str, str] | None,
    shared: bool = False,
) -> None:
    """In a forked child of the server: run the requested job and report its status.

    A job whose :func:`hf_import_environment` differs from the server's
    (``hf_environment``, None while no Hugging Face library is imported) is declined. A
    job of a ``shared`` server dies when its client's connection closes.
    """
    status = 1
    try:
        _die_with_parent()
        if os.getppid() == 1:  # the server exited before the kernel was asked
            os._exit(1)
        if shared:  # the client is not this process's parent: watch its connection
            threading.Thread(target=_watch_client, args=(conn,), daemon=True).start()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        path, cwd, env, threads, _ = request
        if hf_environment is not None and hf_import_environment(env) != hf_environment:
            status = _DECLINED
        else:
            status = _run_script(path, cwd, env, threads)
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
            conn.sendall(struct.pack("!i", status))
        os._exit(status & 0xFF)


def _import(names: Iterable[str]) -> None:
    """Import each module of ``names``; call the function of a ``"module:function"``."""
    for name in names:
        module, _, function = name.partition(":")
        with contextlib.suppress(ImportError):
            imported = importlib.import_module(module)
            if function:
                getattr(imported, function)()


def load_compiled_code() -> None:
    """Load the numba-compiled functions that jobs call, once in the server.

    Each is compiled once per installation and cached on disk, but a process loads the
    machine code (and numba's compiler) at its first call: 0.15 s in every job that
    reads an EEG recording (MNE computes its time axis with numba), or that compares
    RDMs by Kendall's tau-a, when the server has not. Calls public functions on tiny
    inputs; a failure (numba or MNE missing, an unreadable cache) is left to the jobs,
    which load the code themselves: a warm-up never stops the server.
    """
    import numpy as np

    with contextlib.suppress(Exception):
        import mne

        info = mne.create_info(1, 1.0, "eeg")
        _ = mne.io.RawArray(np.zeros((1, 2)), info, verbose="error").times
    with contextlib.suppress(Exception):
        from neuroflow.rsa.kendall import pair_counts

        pair_counts(np.arange(3.0), np.array([2.0, 0.0, 1.0]))


def _import_next(idle: list[str], hf_environment: dict[str, str] | None) -> dict | None:
    """Import (and remove) the first module of ``idle``; the Hugging Face variables the
    server imported with (None before the first of :data:`HF_PRELOAD`)."""
    name = idle.pop(0)
    if name in HF_PRELOAD and hf_environment is None:
        hf_environment = hf_import_environment(os.environ)
        os.environ.update(hf_environment)
    _import([name])
    return hf_environment


def serve(
    address: str, alive_fd: int, idle: Iterable[str] = IDLE_PRELOAD, shared: bool = False
) -> None:
    """The warm server: import :data:`PRELOAD`, then fork one child per connection.

    Whenever no job is waiting, it imports one more module of ``idle``: those of
    :data:`HF_PRELOAD` with :data:`OFFLINE_ENVIRONMENT` set. A job that asks for them
    (:func:`uses_hf`) waits until they are all imported, so that its own process
    does not import them again. The server has one thread throughout (none of these
    imports starts one), so every fork is clean. Its objects are frozen out of the
    cyclic garbage collector before each fork (:func:`gc.freeze`): with PyTorch, MNE
    and the Hugging Face libraries imported, each full collection in a job would
    otherwise visit ~540,000 objects (0.27 s; nilearn collects before it reads each
    image's data) and copy the memory pages it touches.

    Parameters
    ----------
    address : str
        Path of the Unix socket to listen on.
    alive_fd : int
        Read end of a pipe the parent holds open; the server exits when it closes.
    idle : iterable of str
        Modules to import one at a time while no job waits (see :func:`idle_preload`).
    shared : bool
        Whether Snakemake processes other than the parent ask for jobs
        (:class:`SharedServer`): each job then watches its connection.
    """
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    # the server's objects live as long as it does: the cyclic collector never needs to
    # visit them, here or in a job (where a visit also copies every page it touches)
    gc.disable()
    _import(PRELOAD)
    idle = [name for name in idle if name]
    hf_environment: dict[str, str] | None = None
    while True:
        ready, _, _ = select.select([listener, alive_fd], [], [], 0 if idle else None)
        if alive_fd in ready:  # the parent exited, maybe killed: its folder goes too
            folder = os.path.dirname(address)
            if os.path.basename(folder).startswith(_FOLDER_PREFIX):
                shutil.rmtree(folder, ignore_errors=True)
            return
        if not ready:  # no job waiting: import one module that later jobs will need
            hf_environment = _import_next(idle, hf_environment)
            continue
        conn, _ = listener.accept()
        message = receive_message(conn)
        if message is None:
            conn.close()
            continue
        request = pickle.loads(message)
        while request[-1] and idle:  # a job that imports them all: once, here, for all
            hf_environment = _import_next(idle, hf_environment)
        gc.freeze()  # a job's collections skip what the server made
        if os.fork() == 0:
            gc.enable()
            listener.close()
            os.close(alive_fd)
            _job(conn, request, hf_environment, shared)
        conn.close()


class ServerUnavailableError(RuntimeError):
    """The warm server could not be started or reached (its jobs run the usual way)."""


#: Longest socket path every platform accepts (Linux allows 107 bytes, macOS 103).
_MAX_SOCKET_PATH = 100


def _socket_base(temp: str | None = None) -> str:
    """Where the server's folder goes: the temporary folder, unless its path is too long
    for a Unix socket (cluster scratch folders can be), then ``/tmp``.

    Parameters
    ----------
    temp : str | None
        The temporary folder (default: :func:`tempfile.gettempdir`).

    Returns
    -------
    base : str
        The folder to create the server's folder in.
    """
    temp = tempfile.gettempdir() if temp is None else temp
    # <temp>/neuroflow-warm-<8 characters>/socket
    if len(os.path.join(temp, _FOLDER_PREFIX + "x" * 8, "socket")) <= _MAX_SOCKET_PATH:
        return temp
    return "/tmp"


class _Server:
    """The parent's handle on one warm server (started on the first job)."""

    def __init__(
        self,
        idle: Iterable[str] = IDLE_PRELOAD,
        environ: Mapping[str, str] | None = None,
        shared: bool = False,
    ) -> None:
        # a folder only this user can enter: only this user's processes can ask for a job
        self.folder = tempfile.mkdtemp(prefix=_FOLDER_PREFIX, dir=_socket_base())
        self.address = os.path.join(self.folder, "socket")
        read, self._alive = os.pipe()
        # one BLAS thread while the server imports: no worker threads exist when it forks
        env = job_environment(os.environ if environ is None else environ, 1)
        code = (
            "import sys; from neuroflow.workflow.warm_jobs import serve; "
            "serve(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(','), sys.argv[4] == '1')"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, self.address, str(read), ",".join(idle), str(int(shared))],
            pass_fds=(read,),
            stdin=subprocess.DEVNULL,
            env=env,
            # a shared server imports nothing from the folder of whoever started it
            cwd=self.folder if shared else None,
        )
        os.close(read)
        atexit.register(self.close)

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + 120.0
        while True:
            try:
                sock.connect(self.address)
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    sock.close()
                    raise ServerUnavailableError(
                        f"the warm job server must be running, got exit status "
                        f"{self.process.poll()} instead"
                    ) from None
                time.sleep(0.01)

    def close(self) -> None:
        """Stop the server (at exit: every job has ended or is being cancelled)."""
        with contextlib.suppress(OSError):
            os.close(self._alive)
        with contextlib.suppress(Exception):
            self.process.terminate()  # at once, even halfway through an idle import
            self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


class SharedServer:
    """A warm server for the Snakemake processes started beside it.

    It imports :data:`IDLE_PRELOAD` and :data:`HF_PRELOAD` (offline) at once, and lives
    until :meth:`close` or the end of the process that started it. Name its
    :attr:`address` in ``NEUROFLOW_WARM_SERVER`` of the runs that should use it: a run
    does when its environment has the :func:`environment_identity` the server started
    with, and starts its own server otherwise.

    Parameters
    ----------
    environ : mapping of str to str | None
        The environment of the runs it serves (default: this process's), with
        :data:`RUN_DEFAULTS` where unset, as the Snakefile sets them.
    ignore : iterable of str
        Variables whose values may differ between those runs (e.g. one a test runner
        sets per test), besides the thread counts and temporary folders.

    Examples
    --------
    >>> with SharedServer() as server:  # doctest: +SKIP
    ...     env = {**os.environ, SHARED_ENV: server.address}
    ...     for config in configs:
    ...         subprocess.run(["snakemake", "--configfile", config], env=env)
    """

    def __init__(
        self, environ: Mapping[str, str] | None = None, ignore: Iterable[str] = ()
    ) -> None:
        environ = {**RUN_DEFAULTS, **(os.environ if environ is None else environ)}
        ignore = sorted(set(ignore))
        self._server = _Server((*IDLE_PRELOAD, *HF_PRELOAD), environ, shared=True)
        #: Path of the server's socket, for ``NEUROFLOW_WARM_SERVER``.
        self.address = self._server.address
        #: Process id of the server (each job's parent).
        self.pid = self._server.process.pid
        self._server.connect().close()  # listening: a run that names it finds it
        identity = {"identity": environment_identity(environ, ignore), "ignore": ignore}
        path = os.path.join(self._server.folder, _IDENTITY_FILE)
        with open(path + ".partial", "w") as file:
            json.dump(identity, file)
        os.replace(path + ".partial", path)

    def close(self) -> None:
        """Stop the server; jobs still running die with it."""
        self._server.close()

    def __enter__(self) -> SharedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SharedClient:
    """A Snakemake process's handle on a :class:`SharedServer` it did not start."""

    def __init__(self, address: str) -> None:
        self.address = address

    def connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.address)
        except OSError as err:
            sock.close()
            raise ServerUnavailableError(
                f"the shared warm job server at {self.address} must accept jobs, got {err} instead"
            ) from None
        return sock


def _shared_server(environ: Mapping[str, str]) -> _SharedClient | None:
    """The shared server ``environ`` names, if its environment is the same (else None)."""
    address = environ.get(SHARED_ENV)
    if not address:
        return None
    try:
        with open(os.path.join(os.path.dirname(address), _IDENTITY_FILE)) as file:
            identity = json.load(file)
        same = identity["identity"] == environment_identity(environ, identity["ignore"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return _SharedClient(address) if same else None


#: The running server of this process (the first job starts it, or finds a shared one).
_SERVERS: list[_Server | _SharedClient] = []


def _server(
    idle: Callable[[], Iterable[str]], environ: Mapping[str, str] | None = None
) -> _Server | _SharedClient:
    """This process's server: the shared one ``environ`` names when its environment is
    the same, else one started with ``idle()`` as its idle imports, if none is."""
    with _SERVER_LOCK:
        if not _SERVERS:
            shared = _shared_server(os.environ if environ is None else environ)
            try:
                _SERVERS.append(shared or _Server(idle()))
            except OSError as err:
                raise ServerUnavailableError(
                    f"the warm job server must start, got {err} instead"
                ) from err
        return _SERVERS[0]


def run_warm(
    path: str,
    *,
    threads: int = 1,
    tmpdir: str | None = None,
    environ: Mapping[str, str] | None = None,
    params: Any = None,
    jobs: Callable[[], Iterable[tuple[str, Any]] | None] | None = None,
) -> None:
    """Run a Python script in a fork of the warm server and wait for it.

    Parameters
    ----------
    path : str
        The script (a job script Snakemake wrote, preamble included).
    threads : int
        The job's threads (thread-count variables and BLAS limits).
    tmpdir : str | None
        The job's temporary folder, if any.
    environ : mapping | None
        The environment to start from (default: this process's).
    params : snakemake.io.Params | mapping | None
        The job's params (see :func:`uses_hf`).
    jobs : callable | None
        Gives the script and params of each of the run's jobs, when this job starts the
        server: it then imports what they need (:func:`idle_preload`; None: everything).

    Raises
    ------
    subprocess.CalledProcessError
        When the script exits with a non-zero status, or its process is killed.
    ServerUnavailableError
        When the server cannot start or be reached, or declines the job (its Hugging
        Face variables differ from the server's): the script never started.
    """
    environ = os.environ if environ is None else environ
    env = job_environment(environ, threads, tmpdir)
    server = _server(lambda: idle_preload(None if jobs is None else jobs()), environ)
    sys.stdout.flush()
    sys.stderr.flush()
    with server.connect() as sock:
        request = (str(path), os.getcwd(), env, int(threads), uses_hf(path, params, env))
        send_message(sock, pickle.dumps(request))
        reply = receive_exactly(sock, 4)
    status = -signal.SIGKILL if reply is None else struct.unpack("!i", reply)[0]
    if status == _DECLINED:
        raise ServerUnavailableError(
            "a warm job's Hugging Face variables must equal the warm server's, got "
            f"{sorted(hf_import_environment(env).items())} instead"
        )
    if status != 0:
        raise subprocess.CalledProcessError(status, f"python {path}")


def install(workflow: Any) -> bool:
    """Run this workflow's local Python script jobs warm (see the module's docstring).

    Parameters
    ----------
    workflow : snakemake.workflow.Workflow
        The workflow object of the Snakefile. Whether a job runs warm is decided when it
        runs: the main process of a run with a local executor only.

    Returns
    -------
    installed : bool
        False where it never applies (not POSIX, or ``NEUROFLOW_WARM_JOBS=0``).
    """
    if os.name != "posix" or not enabled():
        return False
    from snakemake.script import PythonScript

    # the latest workflow decides (one process may build several through the API)
    _INSTALLED["workflow"] = workflow
    original = PythonScript.execute_script
    if not getattr(original, _PATCHED, False):
        PythonScript.execute_script = _warm(original)
    return True


def _applies(script: Any, workflow: Any, edit: bool) -> bool:
    """Whether one script job of ``workflow`` runs warm."""
    try:
        local = workflow.is_main_process and workflow.local_exec and not workflow.dryrun
    except (AttributeError, AssertionError):
        return False
    return (
        local
        and not edit
        and script.conda_env is None
        and script.container_img is None
        and script.env_modules is None
        and script.bench_record is None
    )


def _warm(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def execute_script(self: Any, fname: str, edit: bool = False) -> None:
        workflow = _INSTALLED.get("workflow")
        if not _applies(self, workflow, edit):
            return original(self, fname, edit=edit)
        resources = self.resources or {}
        tmpdir = resources.get("tmpdir") if hasattr(resources, "get") else None
        try:
            run_warm(
                fname,
                threads=int(self.threads or 1),
                tmpdir=tmpdir,
                params=getattr(self, "params", None),
                jobs=lambda: _pending_jobs(workflow),
            )
        except ServerUnavailableError:  # the job was never started: run it the usual way
            return original(self, fname, edit=edit)

    setattr(execute_script, _PATCHED, True)
    return execute_script

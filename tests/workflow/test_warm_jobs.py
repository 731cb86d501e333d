"""Warm job starts: a script run in a fork of the warm server behaves as ``python script``.

It sees the working directory, environment and thread counts the shell would give it;
its exit status, a traceback on failure and a kill reach the caller; and a job whose
Snakemake process is killed dies with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from threadpoolctl import threadpool_limits

from neuroflow.workflow.warm_jobs import (
    HF_PRELOAD,
    IDLE_PRELOAD,
    PRELOAD,
    RUN_DEFAULTS,
    SET_ON_IMPORT,
    SHARED_ENV,
    SharedServer,
    enabled,
    environment_identity,
    job_environment,
    run_warm,
)


def _script(folder: Path, body: str) -> Path:
    path = folder / "job.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_job_environment_sets_thread_counts_and_temporary_folder():
    env = job_environment({"HOME": "/h", "OMP_NUM_THREADS": "8"}, 3, "/scratch/t")
    assert env["HOME"] == "/h"
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    assert env["MKL_NUM_THREADS"] == env["NUMEXPR_NUM_THREADS"] == "3"
    assert env["TMPDIR"] == env["TMP"] == env["TEMP"] == "/scratch/t"
    assert "TMPDIR" not in job_environment({}, 1)


@pytest.mark.parametrize(
    ("value", "expected"), [(None, True), ("1", True), ("0", False), (" Off ", False)]
)
def test_switch(value, expected):
    environ = {} if value is None else {"NEUROFLOW_WARM_JOBS": value}
    assert enabled(environ) is expected


def test_a_script_sees_what_the_shell_would_give_it(tmp_path, monkeypatch):
    out = tmp_path / "seen.json"
    script = _script(
        tmp_path,
        f"""
        import json, os, sys
        from threadpoolctl import threadpool_info
        blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
        json.dump(
            {{
                "cwd": os.getcwd(),
                "argv": sys.argv,
                "omp": os.environ.get("OMP_NUM_THREADS"),
                "tmp": os.environ.get("TMPDIR"),
                "gettempdir": __import__("tempfile").gettempdir(),
                "mine": os.environ.get("MY_VARIABLE"),
                "blas": blas,
                "pid": os.getpid(),
                "torch": sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None,
            }},
            open({str(out)!r}, "w"),
        )
        """,
    )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("MY_VARIABLE", "kept")
    run_warm(str(script), threads=2, tmpdir=str(tmp_path))
    seen = json.loads(out.read_text())
    assert seen["cwd"] == str(work) and seen["argv"] == [str(script)]
    assert (seen["omp"], seen["tmp"], seen["mine"]) == ("2", str(tmp_path), "kept")
    assert seen["gettempdir"] == str(tmp_path)
    assert seen["blas"] and set(seen["blas"]) == {2}
    assert seen["pid"] != os.getpid()
    # a second job is a new process too, with its own thread count; the server imported
    # PyTorch while the first ran, and its thread count follows the job's too
    run_warm(str(script), threads=3)
    again = json.loads(out.read_text())
    assert again["pid"] not in (seen["pid"], os.getpid())
    assert again["omp"] == "3" and set(again["blas"]) == {3}
    assert again["torch"] == 3


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ("raise ValueError('x.zarr: bad input')", 1),
        ("import sys; sys.exit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),
    ],
)
def test_failures_reach_the_caller(tmp_path, body, status):
    script = _script(tmp_path, body)
    with pytest.raises(subprocess.CalledProcessError, match=r"job\.py") as err:
        run_warm(str(script))
    assert err.value.returncode == status


def test_a_traceback_goes_to_standard_error(tmp_path):
    script = _script(tmp_path, "raise ValueError('x.zarr: values must be finite')")
    code = f"from neuroflow.workflow.warm_jobs import run_warm; run_warm({str(script)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "ValueError: x.zarr: values must be finite" in proc.stderr
    assert "Traceback" in proc.stderr


def _sleeper(folder: Path, pid_file: Path) -> Path:
    """A job script that writes its process id into ``pid_file``, then sleeps."""
    return _script(
        folder,
        f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
        """,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of a reaped parent is gone from /proc/<pid>/stat as 'Z'
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason=(
        "a job dies with its parent through prctl(PR_SET_PDEATHSIG), which only Linux "
        "has; elsewhere a job may outlive a killed Snakemake process"
    ),
)
def test_a_job_dies_with_its_snakemake_process(tmp_path, request):
    pid_file = tmp_path / "job.pid"
    script = _sleeper(tmp_path, pid_file)
    code = f"from neuroflow.workflow.warm_jobs import run_warm; run_warm({str(script)!r})"
    # where the server's socket folder goes (a short path: sockets take ~100 bytes)
    server_tmp = Path(tempfile.mkdtemp(prefix="nf-test-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(server_tmp, ignore_errors=True))
    env = {**os.environ, "TMPDIR": str(server_tmp)}
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 300  # a safety net: the job starts in about a second
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.05)
    job = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)  # the parent only, not its process group
    parent.wait()
    while _alive(job):
        assert time.monotonic() < deadline, "the job outlived its Snakemake process"
        time.sleep(0.05)
    # the server removed its socket folder on its way out
    while any(server_tmp.iterdir()):
        assert time.monotonic() < deadline, list(server_tmp.iterdir())
        time.sleep(0.05)


def _warm_client(script: Path, env: dict[str, str]) -> subprocess.Popen:
    """A process that runs ``script`` warm, as a Snakemake process does."""
    code = f"from neuroflow.workflow.warm_jobs import run_warm; run_warm({str(script)!r})"
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_the_identity_of_an_environment():
    env = {"HOME": "/h", "MY_VARIABLE": "a", "PER_TEST": "1"}
    same = {**env, "OMP_NUM_THREADS": "4", "TMPDIR": "/scratch", SHARED_ENV: "/s/socket"}
    assert environment_identity(same) == environment_identity(env)
    assert environment_identity({**env, "MY_VARIABLE": "b"}) != environment_identity(env)
    assert environment_identity({**env, "PYTHONHASHSEED": "0"}) != environment_identity(env)
    imported = {**env, "KMP_INIT_AT_FORK": "FALSE", "TORCHINDUCTOR_CACHE_DIR": "/tmp/t"}
    assert environment_identity(imported) == environment_identity(env)
    assert environment_identity({**env, "PER_TEST": "2"}) != environment_identity(env)
    assert environment_identity({**env, "PER_TEST": "2"}, ["PER_TEST"]) == environment_identity(
        env, ["PER_TEST"]
    )


@pytest.mark.slow
def test_what_the_server_imports_sets_no_other_variable():
    """A library that sets a variable when imported would make every Snakemake process
    that imported it differ from a shared server that did not (:data:`SET_ON_IMPORT`);
    one that starts a thread would make the server's forks unsafe."""
    modules = [*PRELOAD, *IDLE_PRELOAD, *HF_PRELOAD, "neuroflow.workflow.plan"]
    assert "neuroflow.workflow.warm_jobs:load_compiled_code" in modules
    code = (
        "import importlib, json, os, sys, threading; before = dict(os.environ)\n"
        f"for name in {modules!r}:\n"
        "    module, _, function = name.partition(':')\n"
        "    imported = importlib.import_module(module)\n"
        "    getattr(imported, function)() if function else None\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "json.dump(sorted(k for k in {**before, **os.environ} "
        "if before.get(k) != os.environ.get(k)), sys.stdout)"
    )
    env = {k: v for k, v in os.environ.items() if k not in SET_ON_IMPORT}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)) <= set(SET_ON_IMPORT)


def test_runs_with_the_environment_of_a_shared_server_fork_it(tmp_path):
    """A run whose environment is the shared server's (per-test names aside) forks its
    jobs from it; one whose environment differs starts its own server."""
    out = tmp_path / "seen.json"
    script = _script(
        tmp_path,
        f"""
        import json, os
        json.dump({{"ppid": os.getppid(), "mine": os.environ["MY_VARIABLE"]}},
                  open({str(out)!r}, "w"))
        """,
    )
    server_tmp = Path(tempfile.mkdtemp(prefix="nf-test-", dir="/tmp"))
    # as the Snakefile sets them for its runs
    env = {**os.environ, **RUN_DEFAULTS, "MY_VARIABLE": "a", "PER_TEST": "1"}
    env["TMPDIR"] = str(server_tmp)
    try:
        with SharedServer(env, ignore=["PER_TEST"]) as server:
            runs = {
                "same": {**env, "PER_TEST": "2", "OMP_NUM_THREADS": "3"},
                "other": {**env, "MY_VARIABLE": "b"},
            }
            parents = {}
            for name, run_env in runs.items():
                client = _warm_client(script, {**run_env, SHARED_ENV: server.address})
                assert client.wait(timeout=600) == 0
                seen = json.loads(out.read_text())
                parents[name] = seen["ppid"]
                assert seen["mine"] == run_env["MY_VARIABLE"]
            assert parents["same"] == server.pid
            assert parents["other"] not in (server.pid, os.getpid())
    finally:
        shutil.rmtree(server_tmp, ignore_errors=True)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason=(
        "the test reads each job's parent process from /proc, which only Linux has; the "
        "shared server's jobs watch their connection the same way elsewhere"
    ),
)
def test_a_job_of_a_shared_server_dies_with_its_snakemake_process(tmp_path):
    pid_file = tmp_path / "job.pid"
    script = _sleeper(tmp_path, pid_file)
    server_tmp = Path(tempfile.mkdtemp(prefix="nf-test-", dir="/tmp"))
    env = {**os.environ, **RUN_DEFAULTS, "TMPDIR": str(server_tmp)}
    try:
        with SharedServer(env) as server:
            client = _warm_client(script, {**env, SHARED_ENV: server.address})
            deadline = time.monotonic() + 300  # a safety net: the job starts in a second
            while not pid_file.exists() or not pid_file.read_text():
                assert time.monotonic() < deadline and client.poll() is None
                time.sleep(0.05)
            job = int(pid_file.read_text())
            assert _parent(job) == server.pid  # not a child of the killed process
            client.send_signal(signal.SIGKILL)
            client.wait()
            while _alive(job):
                assert time.monotonic() < deadline, "the job outlived its Snakemake process"
                time.sleep(0.05)
            assert _alive(server.pid)  # the server serves the next run
    finally:
        shutil.rmtree(server_tmp, ignore_errors=True)


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def test_a_job_finds_its_own_temporary_folder(tmp_path, monkeypatch):
    """What the server cached before the fork (here, the temporary folder) is found again."""
    import tempfile

    from neuroflow.workflow.warm_jobs import _run_script

    out = tmp_path / "tmp.txt"
    script = _script(
        tmp_path,
        f"import tempfile; open({str(out)!r}, 'w').write(tempfile.gettempdir())",
    )
    job_tmp = tmp_path / "job_tmp"
    job_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "stale"))
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)
    env = job_environment(os.environ, 1, str(job_tmp))
    with threadpool_limits(limits=None):  # the test process's own limits come back
        assert _run_script(str(script), str(tmp_path), env, 1) == 0
    assert out.read_text() == str(job_tmp)


def _workflow(main: bool = True, local: bool = True, dry: bool = False) -> SimpleNamespace:
    return SimpleNamespace(is_main_process=main, local_exec=local, dryrun=dry)


def _job_script(**changes: object) -> SimpleNamespace:
    fields = {"conda_env": None, "container_img": None, "env_modules": None}
    return SimpleNamespace(**{**fields, "bench_record": None, **changes})


@pytest.mark.parametrize(
    ("workflow", "script", "warm"),
    [
        (_workflow(), _job_script(), True),
        (_workflow(main=False), _job_script(), False),  # a cluster job's own process
        (_workflow(local=False), _job_script(), False),  # a cluster run's main process
        (_workflow(dry=True), _job_script(), False),
        (_workflow(), _job_script(conda_env="/envs/x"), False),
        (_workflow(), _job_script(container_img="x.sif"), False),
        (_workflow(), _job_script(env_modules=["python"]), False),
        (_workflow(), _job_script(bench_record=object()), False),
        (None, _job_script(), False),
    ],
)
def test_which_jobs_start_warm(workflow, script, warm):
    from neuroflow.workflow.warm_jobs import _applies

    assert _applies(script, workflow, edit=False) is warm


def test_the_latest_workflow_decides(monkeypatch):
    from snakemake.script import PythonScript

    from neuroflow.workflow import warm_jobs

    calls = []
    monkeypatch.setattr(PythonScript, "execute_script", lambda self, f, edit=False: calls.append(f))
    monkeypatch.setattr(warm_jobs, "_INSTALLED", {})
    monkeypatch.delenv("NEUROFLOW_WARM_JOBS", raising=False)
    assert warm_jobs.install(_workflow())
    assert warm_jobs.install(_workflow(local=False))  # patched once, decided by this one
    PythonScript.execute_script(_job_script(), "job.py")
    assert calls == ["job.py"]  # not warm: Snakemake's own way
    monkeypatch.setenv("NEUROFLOW_WARM_JOBS", "0")
    assert not warm_jobs.install(_workflow())


def test_a_long_temporary_folder_gets_a_short_socket_path():
    from neuroflow.workflow.warm_jobs import _socket_base

    assert _socket_base("/scratch/u") == "/scratch/u"
    assert _socket_base("/scratch/" + "x" * 100) == "/tmp"


def test_a_job_runs_the_usual_way_when_the_server_is_unavailable(monkeypatch):
    from snakemake.script import PythonScript

    from neuroflow.workflow import warm_jobs

    def unavailable(*args, **kwargs):
        raise warm_jobs.ServerUnavailableError("the warm job server must start, got ...")

    calls = []
    monkeypatch.setattr(PythonScript, "execute_script", lambda self, f, edit=False: calls.append(f))
    monkeypatch.setattr(warm_jobs, "_INSTALLED", {})
    monkeypatch.setattr(warm_jobs, "run_warm", unavailable)
    monkeypatch.delenv("NEUROFLOW_WARM_JOBS", raising=False)
    assert warm_jobs.install(_workflow())
    job = _job_script(threads=1, resources={})
    PythonScript.execute_script(job, "job.py")
    assert calls == ["job.py"]


def test_the_hugging_face_libraries_are_imported_for_runs_that_need_them():
    from neuroflow.workflow.warm_jobs import HF_PRELOAD, IDLE_PRELOAD, idle_preload, uses_hf

    def extraction(kind):
        return ("../scripts/extract_features.py", {"cfg": {"extractor": kind}})

    quiet = [("../scripts/fit_encoding.py", {}), extraction("image_statistics")]
    assert idle_preload(quiet) == IDLE_PRELOAD
    for jobs in ([*quiet, extraction("sentence_transformer")], [("generate_demo.py", {})], None):
        assert idle_preload(jobs) == (*IDLE_PRELOAD, *HF_PRELOAD)
    # a job script Snakemake wrote; an extraction whose extractor is not known
    assert uses_hf("/w/.snakemake/scripts/tmpq1w2e3r4.extract_pool_features.py", None)
    assert not uses_hf("/w/.snakemake/scripts/tmpq1w2e3r4.fit_encoding.py", None)


def test_every_hugging_face_extractor_is_known():
    """Each extractor named as importing the Hugging Face libraries does (one that is
    not named only imports them in its own job, as every job did before)."""
    import inspect

    from neuroflow.features.registry import available_extractors, get_extractor
    from neuroflow.workflow.warm_jobs import HF_EXTRACTORS

    assert set(available_extractors()) >= HF_EXTRACTORS
    for kind in available_extractors():
        # the modules of the extractor's class and of the classes it builds on
        classes = [c for c in get_extractor(kind).cls.__mro__ if c.__module__ != "builtins"]
        source = "".join(inspect.getsource(inspect.getmodule(c)) for c in classes)
        uses = any(f"{word} transformers" in source for word in ("import", "from"))
        assert uses or "sentence_transformers" in source or kind not in HF_EXTRACTORS, kind


def test_a_demo_job_that_copies_from_the_demo_cache_imports_nothing(tmp_path):
    """The demo generator waits for the Hugging Face imports unless its dataset is in the
    demo cache of its environment (then it only copies files)."""
    from neuroflow.demo import resolve_config
    from neuroflow.demo.cache import CACHE_ENV, cache_key
    from neuroflow.workflow.warm_jobs import uses_hf

    params = {"stage": "demo", "cfg": {"seed": 5, "n_subjects": 1}}
    env = {CACHE_ENV: str(tmp_path)}
    script = ".snakemake/scripts/tmpab12cd34.generate_demo.py"
    assert uses_hf(script, params, env) and uses_hf(script, params, {})
    (tmp_path / cache_key(resolve_config(params["cfg"]))).mkdir()
    assert not uses_hf(script, params, env)
    assert uses_hf(script, params, {}) and uses_hf(script, {"cfg": {"seed": 6}}, env)
    assert uses_hf(script, None, env)


def test_the_pending_jobs_come_from_the_job_graph():
    from neuroflow.workflow.warm_jobs import _pending_jobs

    def job(script, params=None):
        return SimpleNamespace(rule=SimpleNamespace(script=script), params=params)

    def dag(jobs):
        return SimpleNamespace(needrun_jobs=lambda exclude_finished: iter(jobs))

    jobs = [job("../scripts/qc_eeg.py", {"a": 1}), job(None), job("../scripts/generate_demo.py")]
    workflow = SimpleNamespace(dag=dag(jobs))
    assert _pending_jobs(workflow) == [
        ("../scripts/qc_eeg.py", {"a": 1}),
        ("../scripts/generate_demo.py", None),
    ]

    def changing(exclude_finished):
        raise RuntimeError("Set changed size during iteration")

    assert _pending_jobs(SimpleNamespace(dag=SimpleNamespace(needrun_jobs=changing))) is None
    assert _pending_jobs(SimpleNamespace(dag=None)) is None


def test_hugging_face_jobs_start_offline_and_other_cache_folders_start_cold(tmp_path, monkeypatch):
    from neuroflow.workflow.warm_jobs import ServerUnavailableError

    out = tmp_path / "seen.json"
    script = _script(
        tmp_path,
        f"""
        import json, os, sys
        loaded = "transformers" in sys.modules
        hub = sys.modules.get("huggingface_hub.constants")
        json.dump(
            {{
                "loaded": loaded,
                "offline": None if hub is None else hub.HF_HUB_OFFLINE,
                "variable": os.environ.get("HF_HUB_OFFLINE"),
            }},
            open({str(out)!r}, "w"),
        )
        """,
    )
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    # jobs give the server the idle time it imports in (about 5 s of imports in all)
    deadline = time.monotonic() + 600  # a safety net
    while True:
        run_warm(str(script))
        seen = json.loads(out.read_text())
        if seen["loaded"]:
            break
        assert time.monotonic() < deadline, "the server never imported transformers"
        time.sleep(0.5)
    # imported offline, as the extractors import it; the job's own variables unchanged
    assert seen == {"loaded": True, "offline": True, "variable": None}
    out.unlink()
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    with pytest.raises(ServerUnavailableError, match="Hugging Face variables must equal"):
        run_warm(str(script))
    assert not out.exists()  # declined before it started: it runs the usual way


def test_a_job_collects_garbage_without_visiting_the_servers_objects(tmp_path):
    out = tmp_path / "gc.json"
    script = _script(
        tmp_path,
        f"""
        import gc, json
        json.dump({{"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}},
                  open({str(out)!r}, "w"))
        """,
    )
    run_warm(str(script))
    seen = json.loads(out.read_text())
    # the server's imports (NumPy, pandas, xarray, zarr, ...) are frozen; the job's own
    # objects are collected as usual
    assert seen["enabled"] and seen["frozen"] > 10_000


def test_the_server_loads_compiled_code_before_it_forks():
    """``load_compiled_code`` (an idle entry of the server, after numba and MNE) leaves
    the machine code of the numba functions jobs call loaded, so forks do not load it
    each; in a new interpreter, as the server calls it."""
    code = (
        "from neuroflow.rsa import kendall\n"
        "from neuroflow.workflow.warm_jobs import load_compiled_code\n"
        "assert not kendall._pair_counts.signatures\n"
        "load_compiled_code()\n"
        "assert kendall._pair_counts.signatures\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    order = list(IDLE_PRELOAD)
    entry = order.index("neuroflow.workflow.warm_jobs:load_compiled_code")
    assert order.index("mne") < entry and order.index("numba") < entry

"""Every config key, changed alone, never reruns a job into an existing version folder.

Snakemake reruns a job whose params or input files differ from the ones recorded with its
output. If two configs gave one output path different params, the second run would
overwrite (or delete, on failure) a valid store of the first under the same version. So
for each leaf key of the default config, this builds the job graph of the default config
and of the config with that one key changed (in process, through Snakemake's API) and
checks that every output path the two graphs share has the same rule, params and inputs.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import shutil
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from snakemake_launcher import ParseCache
from workflow_helpers import REPO, config_leaves

from neuroflow.config import ConfigError, load_schema, validate_config
from neuroflow.config.validation import fill_defaults

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


#: Values for keys whose default (null, empty) gives nothing to derive a change from.
EXPLICIT: dict[str, Any] = {
    "dataset.subjects": ["01"],
    "dataset.tasks": ["movie"],
    "dataset.runs": ["1", "2", "4", "5"],
    "dataset.stimulus_events.exclude": {"trial_type": ["n/a"]},
    "dataset.repetition_time": 2.0,
    "preprocess_fmri.drop_volumes": 2,
    "preprocess_fmri.smoothing_fwhm": 4.0,
    "preprocess_fmri.low_pass_hz": 0.2,
    "preprocess_fmri.confounds.strategy": ["motion"],
    "preprocess_fmri.confounds.std_dvars_threshold": 1.5,
    "single_trial.noise_ceiling_n": 2,
    "preprocess_eeg.notch_freq": 50.0,
    "preprocess_eeg.notch_widths": 1.0,
    "preprocess_eeg.l_trans_bandwidth": 0.05,
    "preprocess_eeg.h_trans_bandwidth": 5.0,
    "preprocess_eeg.eeg_reference": None,
    "preprocess_eeg.ica_n_components": 10,
    "preprocess_eeg.resample_sfreq": 100.0,
    "encoding.cv": {"grouped_kfold": 2},
    "encoding.split.test_runs": ["5"],
    "eeg_encoding.tmin": 0.0,
    "eeg_encoding.tmax": 0.5,
    "eeg_encoding.models": {"words": {"feature_spaces": ["minilm"]}},
    "decoding.feature_spaces": ["minilm"],
    "rsa.feature_spaces": ["minilm"],
    "evaluation.permutation.block_length_trs": 10,
}


def _candidates(value: Any) -> list[Any]:
    """Values to try in place of ``value``, in order, until one is valid."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1, value * 2]
    if isinstance(value, float):
        return [value * 1.5 if value else 0.5, value * 0.5 if value else 1.0, value + 0.1]
    if isinstance(value, str):
        return [f"{value}x"]  # enums are handled from the schema
    if isinstance(value, list) and value:
        shorter = [value[:-1]] if len(value) > 1 else []
        first = value[0]
        if isinstance(first, int | float) and not isinstance(first, bool):
            return [*shorter, [*value[:-1], value[-1] * 2 + 1]]
        return [*shorter, [*value, value[-1]], list(reversed(value))]
    return []


def _enum_alternatives(schema: Mapping[str, Any], value: Any) -> list[Any]:
    found: list[Any] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        if "enum" in node:
            found += [v for v in node["enum"] if v != value]
        if "const" in node and node["const"] != value:
            found.append(node["const"])
        for key in ("oneOf", "anyOf"):
            stack.extend(node.get(key, []))
    return found


def _schema_at(schema: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    node: Any = schema
    for key in path:
        props = node.get("properties", {}) if isinstance(node, Mapping) else {}
        if key in props:
            node = props[key]
        elif isinstance(node, Mapping) and isinstance(node.get("additionalProperties"), Mapping):
            node = node["additionalProperties"]
        else:
            return {}
    return node


def _set(config: dict, path: tuple[str, ...], value: Any) -> dict:
    out = copy.deepcopy(config)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _nested(path: tuple[str, ...], value: Any) -> dict:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out


def _jobs(workdir: Path, overrides: Mapping[str, Any]) -> dict[str, tuple[str, str, tuple]]:
    """Output path -> (rule, params, inputs) of every job the config reaches."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        Quietness,
        ResourceSettings,
    )

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        wf_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(config=dict(overrides)),
            snakefile=REPO / "Snakefile",
            workdir=workdir,
        )
        dag_api = wf_api.dag(DAGSettings(forceall=True))
        workflow = dag_api.workflow_api._workflow
        workflow._prepare_dag(
            forceall=True, ignore_incomplete=True, lock_warn_only=True, nolock=True
        )
        workflow._build_dag()
        jobs: dict[str, tuple[str, str, tuple]] = {}
        for job in workflow.dag.jobs:
            params = repr(sorted(job.params.items()))
            inputs = tuple(sorted(map(str, job.input)))
            for out in job.output:
                jobs[str(out)] = (job.rule.name, params, inputs)
        return jobs


#: Job graphs built between two garbage collections (see :func:`_collected_every`).
GRAPHS_PER_COLLECTION = 50


@contextlib.contextmanager
def _collected_every(n_graphs: int) -> Iterator[Callable[[], None]]:
    """Collect the garbage of the job graphs every ``n_graphs`` graphs (the callable
    yielded counts them), with what is alive on entry frozen.

    Each graph leaves ~23,000 objects in reference cycles. Left to the collector's
    thresholds, a full collection ran every ~7 graphs and walked everything since the
    last (52 of them, 30 s of a ~90 s walk); every 50 graphs the walk takes ~70 s, with
    ~100 MB more memory at its peak.
    """
    from neuroflow.heap import frozen_heap

    count = 0

    def built() -> None:
        nonlocal count
        count += 1
        if count % n_graphs == 0:
            gc.collect()

    gc.collect()
    with frozen_heap():
        gc.disable()
        try:
            yield built
        finally:
            gc.enable()
            gc.collect()


@pytest.fixture
def parse_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parse and compile each workflow file and read the config file once for all job
    graphs, and read each input or params function's parameters once for all its jobs
    (the config schema is read once per process by :func:`neuroflow.config.load_schema`).

    The first three depend on the files only, never on the overrides: each of the ~370
    graphs below is still built from its own config (a fresh copy of the file's values
    with its overrides) by executing the compiled workflow files anew, without its
    ~0.2 s of parsing, compiling and loading.
    """
    import snakemake.api  # first: snakemake.workflow alone is a circular import
    import snakemake.common
    import snakemake.common.configfile
    import snakemake.jobs
    import snakemake.rules
    import snakemake.workflow

    load_configfile = snakemake.common.configfile.load_configfile
    configs: dict[tuple[str, bytes], Any] = {}

    def cached_configfile(path):
        key = (str(path), Path(path).read_bytes())
        if key not in configs:
            configs[key] = load_configfile(path)
        return copy.deepcopy(configs[key])

    # A function's parameters (inspect.signature, ~20 us) are read at every job of its
    # rule: once per input or params function of each graph is enough (weak keys: the
    # functions, and the plans they hold, go with their graph).
    get_function_params = snakemake.common.get_function_params
    seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def function_params(func):
        try:
            return seen[func]
        except (KeyError, TypeError):  # TypeError: no weak reference to it
            params = get_function_params(func)
            with contextlib.suppress(TypeError):
                seen[func] = params
            return params

    for module in (snakemake.common, snakemake.rules, snakemake.jobs):
        monkeypatch.setattr(module, "get_function_params", function_params)
    monkeypatch.setattr(snakemake.common.configfile, "load_configfile", cached_configfile)
    monkeypatch.setattr(snakemake.workflow, "parse", ParseCache(snakemake.workflow.parse, {}))
    # Workflow.include compiles each file's translation: a code object per (text, file)
    monkeypatch.setattr(snakemake.workflow, "compile", functools.lru_cache(compile), raising=False)


@pytest.mark.usefixtures("parse_once")
def test_no_config_change_reruns_a_job_under_an_existing_version(tmp_path, monkeypatch):
    schema = load_schema(SCHEMA)
    defaults = validate_config(fill_defaults({}, schema), schema)
    (tmp_path / "config").mkdir()
    shutil.copy(REPO / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    base = _jobs(tmp_path, {})
    assert len(base) > 50

    checked, refused, untried, clashes = [], [], [], []
    with _collected_every(GRAPHS_PER_COLLECTION) as built:
        for path, value in config_leaves(defaults):
            dotted = ".".join(path)
            tries = [EXPLICIT[dotted]] if dotted in EXPLICIT else []
            tries += [*_enum_alternatives(_schema_at(schema, path), value), *_candidates(value)]
            new = next((v for v in tries if _valid(_set(defaults, path, v), schema)), _MISSING)
            if new is _MISSING:
                untried.append(dotted)
                continue
            try:
                changed = _jobs(tmp_path, _nested(path, new))
            except Exception as err:  # refused by the plan (e.g. a filter naming nothing)
                refused.append(f"{dotted}={new!r}: {type(err).__name__}")
                continue
            finally:
                built()
            checked.append(dotted)
            for out in set(base) & set(changed):
                if base[out] != changed[out]:
                    clashes.append(f"{dotted}={new!r} changes the job of {out}")
    report = f"{len(checked)} keys checked, refused: {refused}, untried: {untried}\n" + "\n".join(
        clashes[:40]
    )
    print(report)
    assert not clashes, report
    # the walk covers the config: keys that no valid change exists for are few
    assert len(checked) >= 0.8 * (len(checked) + len(refused) + len(untried)), report


_MISSING = object()


def _valid(config: dict, schema: Mapping[str, Any]) -> bool:
    try:
        validate_config(config, schema)
    except ConfigError:
        return False
    return True

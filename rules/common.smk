# Shared by every rule: the workflow plan (dataset index, applicable analyses, version
# ids, result paths) built once per invocation, and small input/param helpers.
import re
import sys

from neuroflow.workflow.conda_envs import conda_env_file
from neuroflow.workflow.concurrent_runs import keep_concurrently_committed_outputs
from neuroflow.workflow.lock import hold_results_lock
from neuroflow.workflow.methods import methods_rst
from neuroflow.workflow.plan import WorkflowPlan
from neuroflow.qc import QC_CATEGORY
from neuroflow.workflow.report_layout import INSILICO_CATEGORY, figure_entry, qc_entry
from neuroflow.workflow.runs import run_record, write_run_record
from neuroflow.workflow.warm_jobs import install as install_warm_jobs

PLAN = WorkflowPlan(config)
# Runs of other configs into the same results folder (--nolock) may commit a shared store
# after this run planned the job: Snakemake keeps it instead of deleting it under readers.
keep_concurrently_committed_outputs()
# Local runs start each Python job in a fork of one process that imported the scientific
# stack once (~1 s less per job); NEUROFLOW_WARM_JOBS=0 starts each as a new interpreter.
install_warm_jobs(workflow)
V = PLAN.versions
LOGS = Path("logs")
# Environment for `snakemake --use-conda`: envs/neuroflow-<cpu|gpu>.yaml (NEUROFLOW_CONDA_ENV)
# completed with the absolute path of this workflow's neuroflow source.
if any(m.name == "CONDA" for m in workflow.deployment_settings.deployment_method):
    CONDA_ENV = str(conda_env_file(workflow.basedir, Path(".snakemake") / "neuroflow-envs"))
else:
    CONDA_ENV = "../envs/neuroflow-cpu.yaml"

# One line per analysis the dataset does not support, printed once by the main process.
if workflow.is_main_process:
    for _note in PLAN.notes:
        print(f"neuroflow: {_note}", file=sys.stderr)


# Main process of a real run, before its first job (dry runs and jobs skip onstart): lock
# the results folder (not with --nolock) and record the versions this run uses, for gc.
onstart:
    hold_results_lock(PLAN.results, enabled=workflow.execution_settings.lock)
    given = workflow.config_settings  # --configfile files, --config overrides
    # what the Snakefile's `configfile:` read (listed after the --configfile files), so that
    # `neuroflow gc/versions/check-config` can build this run's config again
    read = workflow.configfiles[len(given.configfiles) :]
    if given.replace_workflow_config and given.overwrite_config:
        read = []
    record = run_record(
        PLAN.results,
        PLAN.all_version_dirs(),
        given.configfiles,
        given.config_args,
        workflow_configfiles=read,
    )
    write_run_record(PLAN.results, record)


wildcard_constraints:
    key=r"sub-[A-Za-z0-9]+(_ses-[A-Za-z0-9]+)?(_task-[A-Za-z0-9]+)?(_acq-[A-Za-z0-9]+)?(_run-[A-Za-z0-9]+)?",
    subject=r"[A-Za-z0-9]+",
    layer=r"[A-Za-z0-9][A-Za-z0-9.\-]*",
    version=r"[0-9a-f]{10}",
    # a configured model ([A-Za-z0-9_]+) or a layer model, whose name ends in its layer
    model=r"[A-Za-z0-9_]+(__[A-Za-z0-9][A-Za-z0-9.\-]*)?",
    extractor=r"[A-Za-z0-9_]+",


def key_choice(keys):
    """A wildcard pattern matching exactly these entity keys (never an empty pattern)."""
    return "|".join(re.escape(k) for k in keys) or "(?!)"


def stage_params(stage, section, name=None):
    """Params every job gets: its stage, version id and own config section."""
    key = f"{stage}/{name}" if name else stage
    return {"stage": key, "version": V[key], "cfg": section}


def dataset_input(paths):
    """Inputs that live in the dataset: the demo folder itself, or the real files."""
    if PLAN.is_demo:
        return [str(PLAN.bids_root)]
    return [str(p) for p in paths if p is not None]


def log_path(stage, *parts):
    """Log file of one job, beside the others of its stage version."""
    # appended, not `with_suffix`: a layer model's name ends in its layer (`x__blocks.2`)
    return str(LOGS.joinpath(stage, *map(str, parts))) + ".log"


def all_targets():
    """Every final artifact the config reaches on this dataset."""
    targets = [str(PLAN.fmri_store(r.key)) for r in PLAN.fmri_runs]
    if config["preprocess_eeg"].get("enabled", True):
        for rec in PLAN.eeg_recordings:
            targets.append(str(PLAN.eeg_epochs_store(rec.key)))
        targets += [str(PLAN.eeg_continuous_store(r.key)) for r in PLAN.continuous_recordings]
    for entry in PLAN.extractors:
        name = entry["name"]
        targets += [str(PLAN.feature_store(name, layer)) for layer in PLAN.extractor_layers(name)]
    targets += [str(PLAN.single_trial_store(s)) for s in PLAN.trial_subjects]
    targets += [str(p) for p in PLAN.all_scores_stores()]
    targets += [str(p) for p in PLAN.all_eeg_scores_stores()]
    targets += [str(p) for p in PLAN.all_trf_stores()]
    targets += [str(p) for p in PLAN.decoding_stores()]
    targets += [str(PLAN.rsa_store(m)) for m in PLAN.rsa_modalities]
    targets += [str(p) for p in PLAN.qc_targets()]
    targets += [str(p) for p in PLAN.predict_targets()]
    if PLAN.geometry_enabled:
        targets.append(str(PLAN.geometry_store()))
    if PLAN.has_summary:
        targets.append(str(PLAN.summary_dir() / "scores.tsv"))
        if PLAN.transform_variants():
            targets.append(str(PLAN.summary_dir() / "transform_sweeps.tsv"))
    return targets


# --------------------------------------------------------------------------- inputs
def fmri_run_files(wildcards):
    run = PLAN.fmri_run(wildcards.key)
    atlas, labels = PLAN.roi_files(run)
    return {
        "bold": run.bold,
        "events": run.events,
        "sidecars": list(run.sidecars),
        "mask": run.mask,
        "confounds": run.confounds,
        "roi_atlas": atlas,
        "roi_labels": labels,
    }


def fmri_run_inputs(wildcards):
    files = fmri_run_files(wildcards)
    paths = [files["bold"], files["events"], files["mask"], files["confounds"]]
    paths += [files["roi_atlas"], files["roi_labels"]] if not PLAN.is_demo else []
    return dataset_input([*paths, *files["sidecars"]])


def timeseries_run_files(wildcards):
    run = PLAN.fmri_run(wildcards.key)
    return {
        "timeseries": run.bold,
        "container_key": run.container_key,
        "events": run.events,
        "sidecars": list(run.sidecars),
        "repetition_time": config["dataset"].get("repetition_time"),
    }


def timeseries_run_inputs(wildcards):
    run = PLAN.fmri_run(wildcards.key)
    return dataset_input([run.bold, run.events, *run.sidecars])


def eeg_inputs(wildcards):
    rec = PLAN.eeg_recording(wildcards.key)
    return dataset_input([rec.eeg, rec.events, rec.channels, rec.electrodes, *rec.sidecars])


def qc_continuous_input(wildcards):
    """The recording's continuous store; none for recordings that arrive as epochs."""
    if PLAN.eeg_recording(wildcards.key).epoched:
        return []
    return str(PLAN.eeg_continuous_store(wildcards.key))


def stimuli_inputs(wildcards):
    """The stimulus tables, the stimuli folder and the captions (when they exist)."""
    extra = [p for p in (PLAN.stimuli_dir, PLAN.captions) if p.exists()]
    return dataset_input([*PLAN.stimulus_tables(), *extra])


def geometry_inputs(wildcards):
    """Every layer store of every extractor that runs, the labels and the layer scores."""
    inputs = {}
    for entry in PLAN.extractors:
        name = entry["name"]
        for layer in PLAN.extractor_layers(name):
            inputs[f"layer_{name}:{layer}"] = str(PLAN.feature_store(name, layer))
    if PLAN.geometry_labels:
        inputs["labels"] = dataset_input([PLAN.geometry_labels])
    if PLAN.has_summary:
        inputs["sweep_scores"] = str(PLAN.summary_dir() / "layer_sweep.tsv")
    return inputs


def pool_inputs(wildcards):
    """The files of one stimulus pool (the demo folder for the demo's)."""
    return dataset_input(PLAN.pool(wildcards.pool).files)


def predict_inputs(wildcards):
    """The subject's fitted model and the pool's features of each of its spaces."""
    model = wildcards.model
    inputs = {"encoder": str(PLAN.predict_encoder(model, wildcards.subject))}
    files = pool_inputs(wildcards)
    if files:
        inputs["pool"] = files
    for space in PLAN.encoding_config(model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.pool_feature_store(name, wildcards.pool, layer))
    return inputs


def predict_eeg_inputs(wildcards):
    """The subject's fitted EEG model and the pool's features of each of its spaces."""
    model = wildcards.model
    inputs = {"encoder": str(PLAN.eeg_encoding_store(model, wildcards.subject))}
    files = pool_inputs(wildcards)
    if files:
        inputs["pool"] = files
    for space in PLAN.eeg_encoding_config(model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.pool_feature_store(name, wildcards.pool, layer))
    return inputs


def encoding_inputs(wildcards):
    runs = PLAN.encoding_runs_of(wildcards.subject)
    inputs = {"brain": [str(PLAN.fmri_store(r.key)) for r in runs]}
    for space in PLAN.encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = [str(PLAN.aligned_store(name, layer, r.key)) for r in runs]
    return inputs


def transformer_encoding_inputs(wildcards):
    """Every encoding subject's runs and aligned feature stores (one job, all subjects)."""
    spaces = PLAN.encoding_config(wildcards.model)["feature_spaces"]
    inputs = {}
    for subject in PLAN.encoding_subjects:
        runs = PLAN.encoding_runs_of(subject)
        inputs[f"brain_{subject}"] = [str(PLAN.fmri_store(r.key)) for r in runs]
        for space in spaces:
            name, layer = PLAN.feature_space(space)
            inputs[f"space_{space}__sub-{subject}"] = [
                str(PLAN.aligned_store(name, layer, r.key)) for r in runs
            ]
    return inputs


def trial_encoding_inputs(wildcards):
    """The subject's single-trial betas, one run store (voxel grid) and the feature stores."""
    inputs = {"betas": str(PLAN.single_trial_store(wildcards.subject))}
    runs = PLAN.runs_of(wildcards.subject)
    if runs:
        inputs["brain"] = str(PLAN.fmri_store(runs[0].key))
    for space in PLAN.trial_encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.feature_store(name, layer))
    return inputs


def eeg_encoding_inputs(wildcards):
    recordings = PLAN.recordings_of(wildcards.subject)
    inputs = {"epochs": [str(PLAN.eeg_epochs_store(r.key)) for r in recordings]}
    for space in PLAN.eeg_encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.feature_store(name, layer))
    return inputs


def eeg_trf_inputs(wildcards):
    """The recording's continuous store and the model's (stimulus, feature) stores."""
    inputs = {"continuous": str(PLAN.eeg_continuous_store(wildcards.key))}
    for space in PLAN.eeg_trf_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.feature_store(name, layer))
    return inputs


# Report thumbnails (rules/report.smk)
from neuroflow.figures import THUMBNAIL_PRESETS

THUMBNAIL_SCRIPT = "../scripts/report_thumbnails.py"


def thumbnail_params(preset):
    """Params of a thumbnail job: the preset's settings and the full-size figure(s)."""
    return {
        "full_size": lambda wildcards, input: str(input.figures),
        **{k: list(v) if k == "formats" else v for k, v in THUMBNAIL_PRESETS[preset].items()},
    }


def thumbnail_path(path):
    """The thumbnail (folder) of a figure (folder) ``path``."""
    path = Path(path)
    if path.suffix == ".png":
        return path.with_name(f"{path.stem}_thumbnail.png")
    return path.with_name(f"{path.name}_thumbnails")


def thumbnail_targets():
    """The thumbnails of every figure (folder) the config reaches."""
    figures = [
        p
        for p in [*PLAN.qc_targets(), *PLAN.predict_targets()]
        if p.name.endswith(("_qc", "_contact_sheets"))
    ]
    if PLAN.has_summary:
        figures.append(PLAN.summary_dir() / "plots")
        if PLAN.transform_variants():
            figures.append(PLAN.summary_dir() / "transform_sweeps.png")
    if PLAN.geometry_enabled:
        figures.append(PLAN.stage_dir("geometry") / "geometry.png")
    return [str(thumbnail_path(p)) for p in figures]

# Shared by every rule: the workflow plan (dataset index, version ids, result
# paths) built once per invocation, and small input/param helpers.
from neuroflow.workflow.plan import WorkflowPlan

PLAN = WorkflowPlan(config)
V = PLAN.versions
LOGS = Path("logs")
# Environment for `snakemake --use-conda` (see envs/; neuroflow-gpu.yaml on GPU nodes).
CONDA_ENV = "../envs/neuroflow-cpu.yaml"


wildcard_constraints:
    key=r"sub-[A-Za-z0-9]+(_ses-[A-Za-z0-9]+)?(_task-[A-Za-z0-9]+)?(_acq-[A-Za-z0-9]+)?(_run-[A-Za-z0-9]+)?",
    subject=r"[A-Za-z0-9]+",
    layer=r"[A-Za-z0-9][A-Za-z0-9.\-]*",
    version=r"[0-9a-f]{10}",
    model=r"[A-Za-z0-9_]+",
    extractor=r"[A-Za-z0-9_]+",


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
    return str(LOGS.joinpath(stage, *map(str, parts)).with_suffix(".log"))


def all_targets():
    """Every final artifact the config reaches."""
    targets = []
    targets += [str(PLAN.fmri_store(r.key)) for r in PLAN.fmri_runs]
    if config["preprocess_eeg"].get("enabled", True):
        for rec in PLAN.eeg_recordings:
            targets += [str(PLAN.eeg_epochs_store(rec.key)), str(PLAN.eeg_continuous_store(rec.key))]
    for name in (e["name"] for e in config["features"]["extractors"]):
        targets += [str(PLAN.feature_store(name, layer)) for layer in PLAN.extractor_layers(name)]
    if PLAN.encoding_models() and PLAN.subjects:
        targets.append(str(PLAN.summary_dir() / "scores.tsv"))
    if config["single_trial"]["enabled"]:
        targets += [str(PLAN.single_trial_store(s)) for s in PLAN.subjects]
        for model in PLAN.encoding_models():
            targets += [str(PLAN.trial_scores_store(model, s)) for s in PLAN.subjects]
    if config["eeg_encoding"]["enabled"]:
        for model in PLAN.encoding_models():
            targets += [str(PLAN.eeg_scores_store(model, r.key)) for r in PLAN.eeg_recordings]
    targets += [str(p) for p in PLAN.all_trf_stores()]
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
    return dataset_input([*paths, *files["sidecars"]])


def eeg_inputs(wildcards):
    rec = PLAN.eeg_recording(wildcards.key)
    return dataset_input([rec.eeg, rec.events, rec.channels, rec.electrodes, *rec.sidecars])


def stimulus_tables():
    """Events tables that list the stimuli (fMRI runs, then EEG recordings)."""
    tables = [r.events for r in PLAN.fmri_runs] + [r.events for r in PLAN.eeg_recordings]
    return [p for p in tables if p is not None]


def training_tables():
    """Events tables of the training runs (stimuli that reductions may be fitted on)."""
    test = {str(r).lstrip("0") for r in config["encoding"]["split"]["test_runs"]}
    return [r.events for r in PLAN.fmri_runs if str(r.run).lstrip("0") not in test and r.events]


def stimuli_inputs(wildcards):
    return dataset_input([*stimulus_tables(), PLAN.bids_root / "stimuli"])


def encoding_inputs(wildcards):
    runs = PLAN.runs_of(wildcards.subject)
    inputs = {"brain": [str(PLAN.fmri_store(r.key)) for r in runs]}
    for space in PLAN.encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = [str(PLAN.aligned_store(name, layer, r.key)) for r in runs]
    return inputs


def trial_encoding_inputs(wildcards):
    """The subject's single-trial betas, one run store (voxel grid) and the feature stores."""
    runs = PLAN.runs_of(wildcards.subject)
    inputs = {"betas": str(PLAN.single_trial_store(wildcards.subject))}
    inputs["brain"] = str(PLAN.fmri_store(runs[0].key))
    for space in PLAN.trial_encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = str(PLAN.feature_store(name, layer))
    return inputs


def eeg_encoding_inputs(wildcards):
    inputs = {"epochs": str(PLAN.eeg_epochs_store(wildcards.key))}
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

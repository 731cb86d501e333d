# fMRI: clean each run (drop volumes, mask, confounds, detrend, high-pass, z-score)
# into a (time, voxel) store with ROI labels and the run's events.


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


rule preprocess_fmri:
    input:
        fmri_run_inputs,
    output:
        directory(str(PLAN.stage_dir("preprocess_fmri") / "sub-{subject}" / "{key}_desc-clean_bold.zarr")),
    params:
        **stage_params("preprocess_fmri", config["preprocess_fmri"]),
        files=fmri_run_files,
    log:
        log_path("preprocess_fmri", V["preprocess_fmri"], "sub-{subject}", "{key}"),
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
    script:
        "../scripts/preprocess_fmri.py"

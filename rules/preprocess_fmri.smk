# fMRI: clean each run (drop volumes, mask, confounds, detrend, high-pass, z-score)
# into a (time, voxel) store with ROI labels and the run's events. Parcel or vertex
# time series (dataset.source: timeseries) get the same temporal cleaning into the
# same layout, one target per parcel.
if PLAN.source != "timeseries":

    rule preprocess_fmri:
        input:
            fmri_run_inputs,
        output:
            directory(
                str(PLAN.stage_dir("preprocess_fmri") / "sub-{subject}" / "{key}_desc-clean_bold.zarr")
            ),
        params:
            **stage_params("preprocess_fmri", config["preprocess_fmri"]),
            files=fmri_run_files,
        log:
            log_path("preprocess_fmri", V["preprocess_fmri"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/preprocess_fmri.py"

else:

    rule preprocess_timeseries:
        input:
            timeseries_run_inputs,
        output:
            directory(
                str(PLAN.stage_dir("preprocess_fmri") / "sub-{subject}" / "{key}_desc-clean_bold.zarr")
            ),
        params:
            **stage_params("preprocess_fmri", config["preprocess_fmri"]),
            files=timeseries_run_files,
        log:
            log_path("preprocess_fmri", V["preprocess_fmri"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 2000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/preprocess_timeseries.py"

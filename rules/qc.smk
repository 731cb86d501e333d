# Quality control: one store and one folder of figures per EEG recording and fMRI run,
# from the recording's own file and its preprocessed store. The figures are listed in
# the report under "Quality control", labelled by subject, recording and measure.
if PLAN.qc_enabled:

    rule qc_eeg:
        input:
            recording=eeg_inputs,
            epochs=lambda wc: str(PLAN.eeg_epochs_store(wc.key)),
            continuous=qc_continuous_input,
        output:
            store=directory(str(PLAN.stage_dir("qc_eeg") / "sub-{subject}" / "{key}_qc.zarr")),
            # in the report as thumbnails (rules/report.smk)
            plots=directory(str(PLAN.stage_dir("qc_eeg") / "sub-{subject}" / "{key}_qc")),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.eeg_recordings),
        params:
            **stage_params("qc_eeg", config["qc"]),
            recording=lambda wc: PLAN.eeg_recording(wc.key),
        log:
            log_path("qc_eeg", V["qc_eeg"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/qc_eeg.py"

    rule qc_fmri:
        input:
            files=fmri_run_inputs,
            clean=lambda wc: str(PLAN.fmri_store(wc.key)),
        output:
            store=directory(str(PLAN.stage_dir("qc_fmri") / "sub-{subject}" / "{key}_qc.zarr")),
            # in the report as thumbnails (rules/report.smk)
            plots=directory(str(PLAN.stage_dir("qc_fmri") / "sub-{subject}" / "{key}_qc")),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.fmri_runs),
        params:
            **stage_params("qc_fmri", config["qc"]),
            files=fmri_run_files,
            preprocess=config["preprocess_fmri"],
        log:
            log_path("qc_fmri", V["qc_fmri"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/qc_fmri.py"

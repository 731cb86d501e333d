# Single-trial responses of one subject: estimated from event-related runs (LSS / LSA,
# with single_trial.enabled) with NSD's noise ceiling, or imported from betas estimated
# elsewhere (dataset.source: betas).
if PLAN.single_trial_enabled and PLAN.source != "betas":

    rule estimate_single_trials:
        input:
            lambda wc: [str(PLAN.fmri_store(r.key)) for r in PLAN.runs_of(wc.subject)],
        output:
            directory(
                str(
                    PLAN.stage_dir("single_trial")
                    / "sub-{subject}"
                    / "sub-{subject}_desc-singletrial_betas.zarr"
                )
            ),
        params:
            **stage_params("single_trial", config["single_trial"]),
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("single_trial", V["single_trial"], "sub-{subject}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/estimate_single_trials.py"


if PLAN.single_trial_enabled and PLAN.source == "betas":

    rule import_betas:
        input:
            lambda wc: dataset_input(
                [
                    p
                    for b in PLAN.betas_of(wc.subject)
                    for p in (b.betas, b.trials, b.mask, b.ncsnr)
                ]
                + [p for p in PLAN.roi_files(wc.subject) if p is not None]
            ),
        output:
            directory(
                str(
                    PLAN.stage_dir("single_trial")
                    / "sub-{subject}"
                    / "sub-{subject}_desc-singletrial_betas.zarr"
                )
            ),
        params:
            **stage_params("single_trial", config["single_trial"]),
            sessions=lambda wc: PLAN.betas_of(wc.subject),
            rois=lambda wc: PLAN.roi_files(wc.subject),
            betas_scale=config["dataset"].get("betas_scale"),
        log:
            log_path("single_trial", V["single_trial"], "sub-{subject}"),
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/import_betas.py"

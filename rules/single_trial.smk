# Single-trial responses (LSS / LSA) of event-related designs, one store per
# subject with NSD's noise ceiling; only when single_trial.enabled is true.
if config["single_trial"]["enabled"]:

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
        log:
            log_path("single_trial", V["single_trial"], "sub-{subject}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/estimate_single_trials.py"

# Representational similarity: EEG (per time point, cross-temporal) and fMRI
# (per ROI, ROI x ROI alignment), all subjects at once for the noise ceilings.
if "eeg" in PLAN.rsa_modalities:

    rule rsa_eeg:
        input:
            epochs=[str(PLAN.eeg_epochs_store(r.key)) for r in PLAN.eeg_recordings],
            features=[str(p) for p in PLAN.analysis_spaces("rsa").values()],
        output:
            directory(str(PLAN.rsa_store("eeg"))),
        params:
            **stage_params("rsa", config["rsa"], "eeg"),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("rsa").items()},
        log:
            log_path("rsa", f"eeg-{V['rsa/eeg']}"),
        # A long single-threaded job: started first, the others fill the remaining cores.
        priority: 10
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/rsa_eeg.py"


if "fmri" in PLAN.rsa_modalities:

    rule rsa_fmri:
        input:
            runs=(
                [str(PLAN.single_trial_store(s)) for s in PLAN.trial_subjects]
                if PLAN.source == "betas"
                else [str(PLAN.fmri_store(r.key)) for r in PLAN.fmri_runs]
            ),
            features=[str(p) for p in PLAN.analysis_spaces("rsa").values()],
        output:
            directory(str(PLAN.rsa_store("fmri"))),
        params:
            **stage_params("rsa", config["rsa"], "fmri"),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("rsa").items()},
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("rsa", f"fmri-{V['rsa/fmri']}"),
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/rsa_fmri.py"

# EEG decoding over all subjects at once (group cluster tests need them together):
# time-resolved classification and feature decoding, identification of test images.
if PLAN.decoding_enabled:

    rule decode_eeg:
        input:
            epochs=[str(PLAN.eeg_epochs_store(r.key)) for r in PLAN.eeg_recordings],
            features=[str(p) for p in PLAN.analysis_spaces("decoding").values()],
        output:
            directory(str(PLAN.decoding_store())),
        params:
            **stage_params("decoding", config["decoding"]),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("decoding").items()},
        log:
            log_path("decoding", V["decoding"]),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_eeg.py"


# fMRI identification of held-out stimuli from single-trial betas (estimated or
# imported), per subject and ROI.
if PLAN.decoding_fmri_enabled:

    rule decode_fmri:
        input:
            betas=[str(PLAN.single_trial_store(s)) for s in PLAN.trial_subjects],
            features=[str(p) for p in PLAN.analysis_spaces("decoding").values()],
        output:
            directory(str(PLAN.decoding_fmri_store())),
        params:
            **stage_params("decoding_fmri", config["decoding"]),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("decoding").items()},
        log:
            log_path("decoding_fmri", V["decoding_fmri"]),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_fmri.py"

# EEG decoding, one job per subject (its recordings pooled): time-resolved
# classification and feature decoding, identification of test images. A subject that
# fails keeps the others' stores; one job then gathers them for the group cluster tests.
if PLAN.decoding_enabled:

    rule decode_eeg_subject:
        input:
            epochs=lambda wc: [
                str(PLAN.eeg_epochs_store(r.key)) for r in PLAN.recordings_of(wc.subject)
            ],
            features=[str(p) for p in PLAN.analysis_spaces("decoding").values()],
        output:
            directory(str(PLAN.decoding_subject_store("{subject}"))),
        params:
            **stage_params("decoding", config["decoding"]),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("decoding").items()},
        log:
            log_path("decoding", V["decoding"], "sub-{subject}"),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_eeg_subject.py"

    rule decode_eeg:
        input:
            subjects=[str(PLAN.decoding_subject_store(s)) for s in PLAN.eeg_subjects],
        output:
            directory(str(PLAN.decoding_store())),
        params:
            **stage_params("decoding", config["decoding"]),
        log:
            log_path("decoding", V["decoding"]),
        resources:
            mem_mb=lambda wildcards, attempt: 2000 * attempt,
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

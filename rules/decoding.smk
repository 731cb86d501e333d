# EEG decoding, one job per subject (its recordings pooled): time-resolved
# classification and feature decoding, identification of test images. A subject that
# fails keeps the others' stores; one job then gathers them for the group cluster tests.
if PLAN.decoding_enabled:

    rule decode_eeg_subject:
        input:
            epochs=lambda wc: [
                str(PLAN.eeg_epochs_store(r.key)) for r in PLAN.event_recordings_of(wc.subject)
            ],
            features=[str(p) for p in PLAN.analysis_spaces("decoding").values()],
        output:
            directory(str(PLAN.decoding_subject_store("{subject}"))),
        params:
            **stage_params("decoding", PLAN.decoding_config()),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("decoding").items()},
        log:
            log_path("decoding", V["decoding"], "sub-{subject}"),
        # One thread: subjects decode side by side (small matrices gain nothing from
        # threaded BLAS, whose thread start-ups cost more than the products).
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_eeg_subject.py"

    rule decode_eeg:
        input:
            subjects=[str(PLAN.decoding_subject_store(s)) for s in PLAN.decoding_subjects],
        output:
            directory(str(PLAN.decoding_store())),
        params:
            **stage_params("decoding", PLAN.decoding_config()),
        log:
            log_path("decoding", V["decoding"]),
        resources:
            mem_mb=lambda wildcards, attempt: 2000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_eeg.py"


# EEG decoding across subjects: one job over every subject's epochs stores, each subject
# (or each session of a subject) held out in turn, with and without Euclidean alignment.
if PLAN.decoding_cross_subject_enabled:

    rule decode_eeg_cross_subject:
        input:
            epochs=[str(PLAN.eeg_epochs_store(r.key)) for r in PLAN.event_recordings],
        output:
            directory(str(PLAN.decoding_cross_subject_store())),
        params:
            **stage_params("decoding_cross_subject", PLAN.cross_subject_config()),
        log:
            log_path("decoding_cross_subject", V["decoding_cross_subject"]),
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_eeg_cross_subject.py"


# fMRI decoding per subject and ROI from single-trial betas (estimated or imported) or
# from each stimulus event's mean BOLD: identification of held-out stimuli and concept
# decoding.
if PLAN.decoding_fmri_enabled:

    rule decode_fmri:
        input:
            brain=[str(p) for p in PLAN.decoding_fmri_inputs()],
            features=[str(p) for p in PLAN.analysis_spaces("decoding").values()],
            concepts=dataset_input([PLAN.concept_annotations]) if PLAN.concept_annotations else [],
        output:
            directory(str(PLAN.decoding_fmri_store())),
        params:
            **stage_params("decoding_fmri", PLAN.decoding_fmri_config()),
            spaces={k: str(v) for k, v in PLAN.analysis_spaces("decoding").items()},
            patterns=PLAN.decoding_fmri_patterns,
            concepts=str(PLAN.concept_annotations) if PLAN.concept_annotations else None,
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("decoding_fmri", V["decoding_fmri"]),
        # One thread and a high priority: threaded BLAS on its small matrices took 3-6x
        # longer on 2 cores than one thread; the long job starts first, others fill in.
        threads: 1
        priority: 10
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/decode_fmri.py"

# EEG: filter, re-reference, epoch and reject each recording into an
# (epoch, channel, time) store and a continuous (channel, time) store; recordings that
# arrive as epochs (MNE -epo.fif, epoched EEGLAB) give the epochs store only.
if PLAN.continuous_recordings:

    rule preprocess_eeg:
        input:
            eeg_inputs,
        output:
            epochs=directory(str(PLAN.stage_dir("preprocess_eeg") / "sub-{subject}" / "{key}_epo.zarr")),
            continuous=directory(
                str(PLAN.stage_dir("preprocess_eeg") / "sub-{subject}" / "{key}_raw.zarr")
            ),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.continuous_recordings),
        params:
            **stage_params("preprocess_eeg", config["preprocess_eeg"]),
            recording=lambda wc: PLAN.eeg_recording(wc.key),
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("preprocess_eeg", V["preprocess_eeg"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/preprocess_eeg.py"


if PLAN.epoched_recordings:

    rule preprocess_eeg_epochs:
        input:
            eeg_inputs,
        output:
            epochs=directory(str(PLAN.stage_dir("preprocess_eeg") / "sub-{subject}" / "{key}_epo.zarr")),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.epoched_recordings),
        params:
            **stage_params("preprocess_eeg", config["preprocess_eeg"]),
            recording=lambda wc: PLAN.eeg_recording(wc.key),
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("preprocess_eeg", V["preprocess_eeg"], "sub-{subject}", "{key}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/preprocess_eeg_epochs.py"

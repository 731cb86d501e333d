# EEG: filter, re-reference, epoch and reject each recording into an
# (epoch, channel, time) store and a continuous (channel, time) store.


rule preprocess_eeg:
    input:
        eeg_inputs,
    output:
        epochs=directory(str(PLAN.stage_dir("preprocess_eeg") / "sub-{subject}" / "{key}_epo.zarr")),
        continuous=directory(
            str(PLAN.stage_dir("preprocess_eeg") / "sub-{subject}" / "{key}_raw.zarr")
        ),
    params:
        **stage_params("preprocess_eeg", config["preprocess_eeg"]),
        recording=lambda wc: PLAN.eeg_recording(wc.key),
    log:
        log_path("preprocess_eeg", V["preprocess_eeg"], "sub-{subject}", "{key}"),
    resources:
        mem_mb=lambda wildcards, attempt: 4000 * attempt,
    conda:
        CONDA_ENV
    script:
        "../scripts/preprocess_eeg.py"

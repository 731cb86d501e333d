# EEG encoding: per subject (its recordings pooled) and model, ridge from stimulus
# features to every channel x latency of the epochs, scored on held-out test stimuli.
if PLAN.eeg_models():

    rule fit_eeg_encoding:
        input:
            unpack(eeg_encoding_inputs),
        output:
            directory(
                str(PLAN.results / "eeg_encoding" / "{model}-{version}" / "sub-{subject}_encoding.zarr")
            ),
        params:
            stage=lambda wc: f"eeg_encoding/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.eeg_encoding_config(wc.model),
        log:
            log_path("eeg_encoding", "{model}-{version}", "sub-{subject}"),
        # One thread: jobs of many subjects and models run side by side on one machine;
        # the SLURM profile (set-threads) gives each more, as does --set-threads here.
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_eeg_encoding.py"

    rule evaluate_eeg_encoding:
        input:
            lambda wc: str(PLAN.eeg_encoding_store(wc.model, wc.subject)),
        output:
            directory(
                str(PLAN.results / "eeg_evaluation" / "{model}-{version}" / "sub-{subject}_scores.zarr")
            ),
        params:
            stage=lambda wc: f"eeg_evaluation/{wc.model}",
            version=lambda wc: wc.version,
            cfg=config["evaluation"],
        log:
            log_path("eeg_evaluation", "{model}-{version}", "sub-{subject}"),
        conda:
            CONDA_ENV
        script:
            "../scripts/evaluate_encoding.py"


# Temporal response functions: per continuous recording and model, lagged ridge from
# the stimulus features (impulses at the onsets) to the continuous EEG (opt-in).
if PLAN.trf_enabled:

    rule fit_eeg_trf:
        input:
            unpack(eeg_trf_inputs),
        output:
            directory(
                str(
                    PLAN.results
                    / "eeg_trf"
                    / "{model}-{version}"
                    / "sub-{subject}"
                    / "{key}_trf.zarr"
                )
            ),
        params:
            stage=lambda wc: f"eeg_trf/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.eeg_trf_config(wc.model),
        log:
            log_path("eeg_trf", "{model}-{version}", "sub-{subject}", "{key}"),
        # One thread: jobs of many subjects and models run side by side on one machine;
        # the SLURM profile (set-threads) gives each more, as does --set-threads here.
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 8000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_eeg_trf.py"

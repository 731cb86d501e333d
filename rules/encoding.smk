# Encoding: per subject and model, ridge (or banded ridge) from aligned features
# to cleaned BOLD, penalties chosen by run-wise cross-validation on training runs;
# with single trials (estimated or imported betas), also from per-stimulus features
# to single-trial betas, scored on held-out stimuli.
if PLAN.encoding_models():

    rule fit_encoding:
        input:
            unpack(encoding_inputs),
        output:
            directory(
                str(PLAN.results / "encoding" / "{model}-{version}" / "sub-{subject}_encoding.zarr")
            ),
        params:
            stage=lambda wc: f"encoding/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.encoding_config(wc.model, wc.subject),
        log:
            log_path("encoding", "{model}-{version}", "sub-{subject}"),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 8000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_encoding.py"


if PLAN.scope.trial_models:

    rule fit_trial_encoding:
        input:
            unpack(trial_encoding_inputs),
        output:
            directory(
                str(PLAN.results / "trial_encoding" / "{model}-{version}" / "sub-{subject}_encoding.zarr")
            ),
        params:
            stage=lambda wc: f"trial_encoding/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.trial_encoding_config(wc.model),
        log:
            log_path("trial_encoding", "{model}-{version}", "sub-{subject}"),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 8000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_trial_encoding.py"

# Encoding: per subject and model, ridge (or banded ridge) from aligned features
# to cleaned BOLD, penalties chosen by run-wise cross-validation on training runs;
# with single trials (estimated or imported betas), also from per-stimulus features
# to single-trial betas, scored on held-out stimuli.
if PLAN.linear_models():

    rule fit_encoding:
        input:
            unpack(encoding_inputs),
        output:
            directory(
                str(PLAN.results / "encoding" / "{model}-{version}" / "sub-{subject}_encoding.zarr")
            ),
        wildcard_constraints:
            model="|".join(re.escape(m) for m in PLAN.linear_models()),
        params:
            stage=lambda wc: f"encoding/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.encoding_config(wc.model, wc.subject),
        log:
            log_path("encoding", "{model}-{version}", "sub-{subject}"),
        # One thread: jobs of many subjects and models run side by side on one machine;
        # the SLURM profile (set-threads) gives each more, as does --set-threads here.
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 8000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_encoding.py"


# A transformer model: one job trains it on every subject's training runs and writes
# each subject's store (the layout of a ridge store) and the training curves.
if PLAN.transformer_models():

    rule fit_transformer_encoding:
        input:
            unpack(transformer_encoding_inputs),
        output:
            training=directory(
                str(PLAN.results / "encoding" / "{model}-{version}" / "training.zarr")
            ),
            stores=[
                directory(
                    str(PLAN.results / "encoding" / "{model}-{version}" / f"sub-{s}_encoding.zarr")
                )
                for s in PLAN.encoding_subjects
            ],
        wildcard_constraints:
            model="|".join(re.escape(m) for m in PLAN.transformer_models()),
        params:
            stage=lambda wc: f"encoding/{wc.model}",
            version=lambda wc: wc.version,
            cfg=lambda wc: PLAN.encoding_config(wc.model),
            subjects=list(PLAN.encoding_subjects),
            test_runs={s: PLAN.test_runs_of(s) for s in PLAN.encoding_subjects},
        log:
            log_path("encoding", "{model}-{version}", "training"),
        # One thread on a CPU (small matrices gain little from more) and a high priority:
        # the long job starts first and the others fill the remaining cores.
        threads: 1
        priority: 10
        resources:
            mem_mb=lambda wildcards, attempt: 16000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_transformer_encoding.py"


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
        # One thread: jobs of many subjects and models run side by side on one machine;
        # the SLURM profile (set-threads) gives each more, as does --set-threads here.
        threads: 1
        resources:
            mem_mb=lambda wildcards, attempt: 8000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/fit_trial_encoding.py"

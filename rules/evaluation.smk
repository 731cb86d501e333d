# Evaluation: per-target scores of each subject's model on held-out data, then one
# table, one summary store and the plots across subjects and models.
if PLAN.encoding_models():

    rule evaluate_encoding:
        input:
            lambda wc: str(PLAN.encoding_store(wc.model, wc.subject)),
        output:
            directory(
                str(PLAN.results / "evaluation" / "{model}-{version}" / "sub-{subject}_scores.zarr")
            ),
        params:
            stage=lambda wc: f"evaluation/{wc.model}",
            version=lambda wc: wc.version,
            cfg=config["evaluation"],
        log:
            log_path("evaluation", "{model}-{version}", "sub-{subject}"),
        conda:
            CONDA_ENV
        script:
            "../scripts/evaluate_encoding.py"


if PLAN.scope.trial_models:

    rule evaluate_trial_encoding:
        input:
            lambda wc: str(PLAN.trial_encoding_store(wc.model, wc.subject)),
        output:
            directory(
                str(PLAN.results / "trial_evaluation" / "{model}-{version}" / "sub-{subject}_scores.zarr")
            ),
        params:
            stage=lambda wc: f"trial_evaluation/{wc.model}",
            version=lambda wc: wc.version,
            cfg=config["evaluation"],
        log:
            log_path("trial_evaluation", "{model}-{version}", "sub-{subject}"),
        conda:
            CONDA_ENV
        script:
            "../scripts/evaluate_encoding.py"


if PLAN.has_summary:

    rule summarize_scores:
        input:
            scores=[str(p) for p in PLAN.all_scores_stores()],
            decoding=[str(p) for p in PLAN.decoding_stores()],
            rsa=[str(PLAN.rsa_store(m)) for m in PLAN.rsa_modalities],
            trf=[str(p) for p in PLAN.all_trf_stores()],
            transformer_training=[
                str(PLAN.transformer_training_store(m)) for m in PLAN.transformer_models()
            ],
            eeg_scores=[str(p) for p in PLAN.all_eeg_scores_stores()],
        output:
            table=report(
                str(PLAN.summary_dir() / "scores.tsv"),
                caption="../workflow/report/scores_table.rst",
                category="Tables",
                labels={"table": "scores (every analysis, tidy)"},
            ),
            store=directory(str(PLAN.summary_dir() / "scores.zarr")),
            # in the report as thumbnails, SVG as they are (rules/report.smk)
            plots=directory(str(PLAN.summary_dir() / "plots")),
            warnings=report(
                str(PLAN.summary_dir() / "warnings.tsv"),
                caption="../workflow/report/warnings.rst",
                category="Warnings",
                labels={"table": "warnings"},
            ),
            layer_sweep=report(
                str(PLAN.summary_dir() / "layer_sweep.tsv"),
                caption="../workflow/report/layer_sweep.rst",
                category="Tables",
                labels={"table": "layer sweeps (layer x ROI)"},
            ),
            alignment=report(
                str(PLAN.summary_dir() / "alignment_metrics.tsv"),
                caption="../workflow/report/alignment_metrics.rst",
                category="Tables",
                labels={"table": "encoding vs RSA per layer sweep and ROI"},
            ),
            run_config=report(
                str(PLAN.summary_dir() / "config.yaml"),
                caption="../workflow/report/methods.rst",
                category="Methods",
                labels={"file": "config of the run"},
            ),
            methods=str(PLAN.summary_dir() / "methods.rst"),
        params:
            **stage_params("summary", config["evaluation"]),
            notes=lambda wc: list(PLAN.scope.notes),
            plan_warnings=lambda wc: list(PLAN.warnings),
            layer_sweeps=PLAN.layer_sweeps(),
            layer_order=PLAN.layer_order(),
            # shown short in the report's info panels (a MethodsText: its size and digest),
            # compared by that digest for reruns; a function, so that it stays a
            # MethodsText and Snakemake reads no wildcards into it
            methods=lambda wc: methods_rst(PLAN.config, PLAN.run_facts()),
        log:
            log_path("summary", V["summary"]),
        localrule: True
        conda:
            CONDA_ENV
        script:
            "../scripts/summarize_scores.py"

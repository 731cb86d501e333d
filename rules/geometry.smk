# Representational geometry of every extractor layer on the dataset's stimuli, beside the
# same layers' encoding, RSA and identification scores from the summary's layer sweeps.
if PLAN.geometry_enabled:

    rule geometry:
        input:
            unpack(geometry_inputs),
        output:
            store=directory(str(PLAN.geometry_store())),
            table=report(
                str(PLAN.stage_dir("geometry") / "geometry.tsv"),
                caption="../workflow/report/geometry.rst",
                category="Tables",
                labels={"table": "representational geometry (layer x metric)"},
            ),
            alignment=report(
                str(PLAN.stage_dir("geometry") / "geometry_alignment.tsv"),
                caption="../workflow/report/geometry.rst",
                category="Tables",
                labels={"table": "geometry vs scores across layers (Spearman)"},
            ),
            plot=str(PLAN.stage_dir("geometry") / "geometry.png"),  # thumbnail: report.smk
        params:
            **stage_params("geometry", config["geometry"]),
            labels=PLAN.geometry_labels,
            ood=PLAN.geometry_ood,
        log:
            log_path("geometry", V.get("geometry", "none")),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/geometry.py"

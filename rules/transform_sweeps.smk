# Transform sweeps: the summary rows of every variant of a swept stimulus transform
# (e.g. transforms: {blur_sigma: [0, 1, 2, 4]}), gathered into one table and drawn as
# score against the transform's value (report: Layer sweeps).
if PLAN.transform_variants() and PLAN.has_summary:

    rule transform_sweeps:
        input:
            scores=str(PLAN.summary_dir() / "scores.tsv"),
        output:
            table=report(
                str(PLAN.summary_dir() / "transform_sweeps.tsv"),
                caption="../workflow/report/transform_sweeps.rst",
                category="Tables",
                labels={"table": "transform sweeps (score per value)"},
            ),
            plot=str(PLAN.summary_dir() / "transform_sweeps.png"),  # thumbnail: report.smk
        params:
            variants=PLAN.transform_variants(),
        log:
            log_path("summary", V["summary"], "transform_sweeps"),
        localrule: True
        conda:
            CONDA_ENV
        script:
            "../scripts/transform_sweeps.py"

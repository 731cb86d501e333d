# The embedded demo dataset: a simulated BIDS dataset with planted ground truth,
# generated offline as the first job of the DAG when dataset.source is "demo".
if PLAN.is_demo:

    rule generate_demo:
        output:
            directory(str(PLAN.bids_root)),
        params:
            **stage_params("demo", config["demo"]),
        log:
            log_path("demo", V["demo"]),
        localrule: True
        conda:
            CONDA_ENV
        script:
            "../scripts/generate_demo.py"

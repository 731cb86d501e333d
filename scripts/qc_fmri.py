"""Quality control of one fMRI run."""

from neuroflow.qc import qc_fmri_run
from neuroflow.workflow.runner import run_job

files = snakemake.params.files
run_job(
    snakemake,
    qc_fmri_run,
    bold=files["bold"],
    clean_store=snakemake.input.clean,
    confounds=files["confounds"],
    preprocess_config=snakemake.params.preprocess,
    output=snakemake.output.store,
    plots=snakemake.output.plots,
    prefix=snakemake.wildcards.key,
)

"""Summarise every score store into one table, a summary store and plots."""

from neuroflow.evaluation import summarize_scores
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    summarize_scores,
    scores=list(snakemake.input),
    table=snakemake.output.table,
    plots_dir=snakemake.output.plots,
)

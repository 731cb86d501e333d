"""Estimate one subject's single-trial responses and noise ceiling."""

from neuroflow.preprocessing.fmri import estimate_single_trials
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    estimate_single_trials,
    runs=list(snakemake.input),
    stimulus_events=snakemake.params.stimulus_events,
    output=snakemake.output[0],
)

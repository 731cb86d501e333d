"""Resample one layer's per-stimulus features onto one fMRI run's TR grid."""

from neuroflow.features.align import align_features
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    align_features,
    features=snakemake.input.features,
    brain=snakemake.input.brain,
    stimulus_events=snakemake.params.stimulus_events,
    output=snakemake.output[0],
)

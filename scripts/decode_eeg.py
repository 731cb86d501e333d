"""Gather every subject's EEG decoding and test the subjects together."""

from neuroflow.decoding.stage import combine_eeg_decoding
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    combine_eeg_decoding,
    subjects=list(snakemake.input.subjects),
    output=snakemake.output[0],
)

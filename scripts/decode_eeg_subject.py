"""Decode stimuli and features from one subject's EEG epochs."""

from neuroflow.decoding.stage import decode_eeg_subject
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    decode_eeg_subject,
    epochs=list(snakemake.input.epochs),
    features=snakemake.params.spaces,
    output=snakemake.output[0],
)

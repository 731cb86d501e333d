"""Decode every subject's (or session's) EEG epochs with a decoder trained on the others."""

from neuroflow.decoding.cross_subject_stage import decode_eeg_cross_subject
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    decode_eeg_cross_subject,
    epochs=list(snakemake.input.epochs),
    output=snakemake.output[0],
)

"""Identify held-out stimuli from every subject's single-trial betas."""

from neuroflow.decoding.fmri import decode_fmri
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    decode_fmri,
    betas=list(snakemake.input.betas),
    features=snakemake.params.spaces,
    output=snakemake.output[0],
)

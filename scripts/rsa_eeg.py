"""RSA of every subject's EEG epochs against the model feature spaces."""

from neuroflow.rsa.stage import rsa_eeg
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    rsa_eeg,
    epochs=list(snakemake.input.epochs),
    features=snakemake.params.spaces,
    output=snakemake.output[0],
)

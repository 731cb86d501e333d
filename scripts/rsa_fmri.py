"""RSA of every subject's fMRI ROIs against the model feature spaces."""

from neuroflow.rsa.stage import rsa_fmri
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    rsa_fmri,
    runs=list(snakemake.input.runs),
    features=snakemake.params.spaces,
    stimulus_events=snakemake.params.stimulus_events,
    output=snakemake.output[0],
)

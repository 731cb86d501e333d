"""Fit one subject's single-trial encoding model and predict its held-out stimuli."""

from neuroflow.encoding import fit_trial_encoding
from neuroflow.workflow.runner import run_job

spaces = {
    name.removeprefix("space_"): path
    for name, path in snakemake.input.items()
    if name.startswith("space_")
}
run_job(
    snakemake,
    fit_trial_encoding,
    betas=snakemake.input.betas,
    brain=snakemake.input.get("brain"),
    features=spaces,
    output=snakemake.output[0],
)

"""Fit one subject's encoding model and predict its held-out runs."""

from neuroflow.encoding import fit_encoding
from neuroflow.workflow.runner import run_job

spaces = {
    name.removeprefix("space_"): list(paths)
    for name, paths in snakemake.input.items()
    if name.startswith("space_")
}
run_job(
    snakemake,
    fit_encoding,
    brain=list(snakemake.input.brain),
    features=spaces,
    output=snakemake.output[0],
)

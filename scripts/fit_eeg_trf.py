"""Fit one EEG recording's temporal response functions (continuous data)."""

from neuroflow.encoding.trf import fit_trf
from neuroflow.workflow.runner import run_job

spaces = {
    name.removeprefix("space_"): path
    for name, path in snakemake.input.items()
    if name.startswith("space_")
}
run_job(
    snakemake,
    fit_trf,
    continuous=snakemake.input.continuous,
    features=spaces,
    output=snakemake.output[0],
)

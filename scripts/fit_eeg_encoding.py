"""Fit one subject's EEG encoding model (channel x latency targets), recordings pooled."""

from neuroflow.encoding.eeg import fit_eeg_encoding
from neuroflow.workflow.runner import run_job

spaces = {
    name.removeprefix("space_"): path
    for name, path in snakemake.input.items()
    if name.startswith("space_")
}
run_job(
    snakemake,
    fit_eeg_encoding,
    epochs=list(snakemake.input.epochs),
    features=spaces,
    output=snakemake.output[0],
)

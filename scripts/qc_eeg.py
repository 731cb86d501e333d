"""Quality control of one EEG recording."""

from neuroflow.qc import qc_eeg_recording
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    qc_eeg_recording,
    recording=snakemake.params.recording,
    epochs_store=snakemake.input.epochs,
    continuous_store=snakemake.input.continuous or None,
    output=snakemake.output.store,
    plots=snakemake.output.plots,
    prefix=snakemake.wildcards.key,
)

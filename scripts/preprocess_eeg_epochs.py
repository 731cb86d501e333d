"""Clean one EEG recording that arrives as epochs."""

from neuroflow.preprocessing.eeg import preprocess_eeg_epochs
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    preprocess_eeg_epochs,
    recording=snakemake.params.recording,
    epochs_output=snakemake.output.epochs,
    stimulus_events=snakemake.params.stimulus_events,
)

"""Clean and epoch one EEG recording."""

from neuroflow.preprocessing.eeg import preprocess_eeg_recording
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    preprocess_eeg_recording,
    recording=snakemake.params.recording,
    epochs_output=snakemake.output.epochs,
    stimulus_events=snakemake.params.stimulus_events,
    continuous_output=snakemake.output.continuous,
)

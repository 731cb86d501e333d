"""Extract one extractor's features for every stimulus, one store per layer."""

from neuroflow.features.extract import extract_features
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    extract_features,
    stimuli_dir=snakemake.params.stimuli_dir,
    stimulus_ids=snakemake.params.stimulus_tables,
    captions=snakemake.params.captions,
    train_ids=snakemake.params.train_tables,
    output=dict(snakemake.output.items()),
)

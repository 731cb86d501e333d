"""Extract one extractor's features for every stimulus, one store per layer."""

from pathlib import Path

from neuroflow.features.extract import extract_features
from neuroflow.workflow.runner import run_job

params = snakemake.params
run_job(
    snakemake,
    extract_features,
    stimuli_dir=params.stimuli_dir,
    stimulus_ids=[Path(p) for p in params.stimulus_tables],
    captions=params.captions if Path(params.captions).is_file() else None,
    train_ids=[Path(p) for p in params.train_tables],
    stimulus_events=params.stimulus_events,
    output=dict(snakemake.output.items()),
)

"""Predict one subject's evoked EEG responses to a pool of new stimuli and rank the pool."""

from neuroflow.features.pools import read_stimulus_pool
from neuroflow.insilico.eeg import predict_eeg_pool_stage
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    predict_eeg_pool_stage,
    encoder_path=snakemake.input.encoder,
    feature_stores={
        name.removeprefix("space_"): path
        for name, path in snakemake.input.items()
        if name.startswith("space_")
    },
    pool=read_stimulus_pool(snakemake.wildcards.pool, snakemake.params.pool, "."),
    output=snakemake.output.store,
)

"""Extract one extractor's features for every stimulus of a pool, one store per layer."""

from neuroflow.features.pools import extract_pool_features, read_stimulus_pool
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    extract_pool_features,
    pool=read_stimulus_pool(snakemake.wildcards.pool, snakemake.params.pool, "."),
    output=dict(snakemake.output.items()),
)

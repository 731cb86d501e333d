"""Gather the summary rows of every transform-sweep variant; plot score against value."""

from neuroflow.evaluation.transform_sweep import write_transform_sweeps
from neuroflow.workflow.runner import job_logging

with job_logging(snakemake.log[0] if len(snakemake.log) else None):
    write_transform_sweeps(
        scores_tsv=snakemake.input.scores,
        variants=snakemake.params.variants,
        table=snakemake.output.table,
        plot=snakemake.output.plot,
    )

"""Summarise encoding scores (fMRI and EEG), decoding, RSA and TRFs into one table, a store
and plots."""

from neuroflow.evaluation.report import summarize_all
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    summarize_all,
    scores=list(snakemake.input.scores),
    decoding=list(snakemake.input.decoding),
    rsa=list(snakemake.input.rsa),
    trf=list(snakemake.input.trf),
    transformer_training=list(snakemake.input.transformer_training),
    eeg_scores=list(snakemake.input.eeg_scores),
    notes=list(snakemake.params.notes),
    warnings_tsv=snakemake.output.warnings,
    plan_warnings=list(snakemake.params.plan_warnings),
    layer_sweeps=list(snakemake.params.layer_sweeps),
    layer_order=dict(snakemake.params.layer_order),
    layer_sweep_tsv=snakemake.output.layer_sweep,
    alignment_tsv=snakemake.output.alignment,
    table=snakemake.output.table,
    plots_dir=snakemake.output.plots,
    run_config=dict(snakemake.config),
    run_config_yaml=snakemake.output.run_config,
    methods=snakemake.params.methods,
    methods_rst=snakemake.output.methods,
)

"""Representational geometry of every extractor layer, beside the layers' brain scores."""

from neuroflow.geometry.stage import run_geometry_stage
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    run_geometry_stage,
    feature_stores={
        name.removeprefix("layer_"): path
        for name, path in snakemake.input.items()
        if name.startswith("layer_")
    },
    labels_path=snakemake.params.labels,
    ood=snakemake.params.ood,
    layer_sweep_tsv=snakemake.input.get("sweep_scores"),
    output=snakemake.output.store,
)

"""Import one subject's single-trial betas estimated elsewhere."""

from neuroflow.io.betas import import_betas
from neuroflow.workflow.runner import run_job

atlas, labels = snakemake.params.rois
run_job(
    snakemake,
    import_betas,
    sessions=list(snakemake.params.sessions),
    roi_atlas=atlas,
    roi_labels=labels,
    betas_scale=snakemake.params.betas_scale,
    output=snakemake.output[0],
)

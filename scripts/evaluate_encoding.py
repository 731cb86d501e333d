"""Score one subject's encoding model (runs or single trials) on its held-out data."""

from neuroflow.evaluation import evaluate_model
from neuroflow.workflow.runner import run_job

run_job(snakemake, evaluate_model, prediction=snakemake.input[0], output=snakemake.output[0])

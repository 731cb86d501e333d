"""Generate the embedded demo BIDS dataset."""

from neuroflow.demo import generate_demo_dataset
from neuroflow.workflow.runner import run_job

run_job(snakemake, generate_demo_dataset, output=snakemake.output[0])

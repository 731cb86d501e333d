"""Clean one fMRI run into a (time, voxel) store."""

from neuroflow.preprocessing.fmri import preprocess_fmri_run
from neuroflow.workflow.runner import run_job

run_job(snakemake, preprocess_fmri_run, output=snakemake.output[0], **snakemake.params.files)

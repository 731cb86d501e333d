"""Clean one run of parcel or vertex time series into a (time, target) store."""

from neuroflow.preprocessing.fmri.timeseries import preprocess_timeseries_run
from neuroflow.workflow.runner import run_job

run_job(snakemake, preprocess_timeseries_run, output=snakemake.output[0], **snakemake.params.files)

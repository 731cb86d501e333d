"""Decode held-out stimuli and concepts from every subject's fMRI patterns."""

from neuroflow.decoding.fmri import decode_fmri
from neuroflow.workflow.runner import run_job

run_job(
    snakemake,
    decode_fmri,
    brain=list(snakemake.input.brain),
    features=snakemake.params.spaces,
    output=snakemake.output[0],
    patterns=snakemake.params.patterns,
    concepts=snakemake.params.concepts,
    stimulus_events=snakemake.params.stimulus_events,
)

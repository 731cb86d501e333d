# neuroflow: BIDS fMRI/EEG -> preprocessing -> stimulus features -> encoding -> evaluation.
#
#   snakemake --cores all            run everything the config reaches
#   snakemake -n                     show what would run
#   snakemake --report report.html   build the report after a run
#
# All logic lives in the `neuroflow` package; rules only wire paths together.
from pathlib import Path

from snakemake.utils import min_version

from neuroflow.config import sorted_config, validate_config

min_version("9.0")


configfile: "config/config.yaml"


# Validate before any job runs: unknown keys fail with a "did you mean" hint,
# defaults from the schema are filled in. Keys are sorted so that reordering the
# config file changes nothing (Snakemake compares rule params in key order).
config.update(
    sorted_config(
        validate_config(
            config,
            Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml",
            source="the config",
        )
    )
)


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/demo.smk"
include: "rules/preprocess_fmri.smk"
include: "rules/single_trial.smk"
include: "rules/preprocess_eeg.smk"
include: "rules/features.smk"
include: "rules/encoding.smk"
include: "rules/eeg_encoding.smk"
include: "rules/decoding.smk"
include: "rules/rsa.smk"
include: "rules/evaluation.smk"


rule all:
    input:
        all_targets(),
    default_target: True

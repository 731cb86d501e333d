# neuroflow: BIDS fMRI/EEG -> preprocessing -> stimulus features -> encoding -> evaluation.
#
#   snakemake --cores all            run everything the config reaches
#   snakemake -n                     show what would run
#   snakemake --report report.html   build the report after a run
#
# All logic lives in the `neuroflow` package; rules only wire paths together.
import os
from pathlib import Path

from snakemake.utils import min_version

# Every job inherits these before its libraries load OpenMP: idle solver threads sleep
# instead of spinning, so jobs that share cores (--cores N with several jobs, or a
# shared node) do not stall each other's eigendecompositions (measured: two concurrent
# 2-thread TRF fits on 2 cores took 185 s each with spinning threads, 5 s without).
from neuroflow.workflow.warm_jobs import RUN_DEFAULTS

for _name, _value in RUN_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

from neuroflow.config import coerce_overrides, load_schema, sorted_config, validate_config
from snakemake.utils import update_config

min_version("9.0")


configfile: "config/config.yaml"


# Validate before any job runs: unknown keys fail with a "did you mean" hint,
# defaults from the schema are filled in. Keys are sorted so that reordering the
# config file changes nothing (Snakemake compares rule params in key order).
# `--config KEY=VALUE` values inside a mapping or list arrive as strings (Snakemake
# reads them with YAML's base loader): they are typed as the schema expects first.
_CONFIG_SCHEMA = load_schema(
    Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
)
update_config(config, coerce_overrides(workflow.config_settings.config, _CONFIG_SCHEMA))
config.update(sorted_config(validate_config(config, _CONFIG_SCHEMA, source="the config")))


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
include: "rules/qc.smk"
include: "rules/predict.smk"
include: "rules/geometry.smk"
include: "rules/transform_sweeps.smk"
include: "rules/report.smk"


rule all:
    input:
        all_targets(),
        thumbnail_targets(),
    default_target: True

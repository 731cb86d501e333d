# Encoding: per subject and model, ridge (or banded ridge) from aligned features
# to cleaned BOLD, penalties chosen by run-wise cross-validation on training runs.


def encoding_inputs(wildcards):
    runs = PLAN.runs_of(wildcards.subject)
    inputs = {"brain": [str(PLAN.fmri_store(r.key)) for r in runs]}
    for space in PLAN.encoding_config(wildcards.model)["feature_spaces"]:
        name, layer = PLAN.feature_space(space)
        inputs[f"space_{space}"] = [str(PLAN.aligned_store(name, layer, r.key)) for r in runs]
    return inputs


rule fit_encoding:
    input:
        unpack(encoding_inputs),
    output:
        directory(str(PLAN.results / "encoding" / "{model}-{version}" / "sub-{subject}_encoding.zarr")),
    params:
        stage=lambda wc: f"encoding/{wc.model}",
        version=lambda wc: wc.version,
        cfg=lambda wc: PLAN.encoding_config(wc.model),
    log:
        log_path("encoding", "{model}-{version}", "sub-{subject}"),
    threads: 2
    resources:
        mem_mb=lambda wildcards, attempt: 8000 * attempt,
    script:
        "../scripts/fit_encoding.py"

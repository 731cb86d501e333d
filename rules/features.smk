# Stimulus features: one store per (extractor, layer) over every stimulus the
# selected recordings show, then per fMRI run an alignment onto its TR grid.


for _entry in PLAN.extractors:

    rule:
        name:
            f"extract_features_{_entry['name']}"
        input:
            stimuli_inputs,
        output:
            **{
                layer: directory(str(PLAN.feature_store(_entry["name"], layer)))
                for layer in PLAN.extractor_layers(_entry["name"])
            },
        params:
            **stage_params("features", _entry, _entry["name"]),
            stimuli_dir=str(PLAN.stimuli_dir),
            stimulus_tables=[str(p) for p in PLAN.stimulus_tables()],
            captions=str(PLAN.captions),
            train_tables=[str(p) for p in PLAN.training_tables()],
            stimulus_events=PLAN.stimulus_events,
        log:
            log_path("features", PLAN.stage_dir("features", _entry["name"]).name),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/extract_features.py"


rule align_features:
    input:
        features=lambda wc: str(PLAN.feature_store(wc.extractor, wc.layer)),
        brain=lambda wc: str(PLAN.fmri_store(wc.key)),
    output:
        directory(
            str(
                PLAN.results
                / "align_features"
                / "{extractor}-{version}"
                / "sub-{subject}"
                / "{key}_{layer}.zarr"
            )
        ),
    params:
        stage=lambda wc: f"align_features/{wc.extractor}",
        version=lambda wc: wc.version,
        # resolved by the plan (`method: auto` reads the design from the events)
        cfg=PLAN.config["features"]["alignment"],
        stimulus_events=PLAN.stimulus_events,
    log:
        log_path("align_features", "{extractor}-{version}", "sub-{subject}", "{key}_{layer}"),
    # Short jobs that every encoding model waits for (the transformer for all of them):
    # done first, so that the long fits start early and the short jobs fill around them.
    priority: 10
    conda:
        CONDA_ENV
    script:
        "../scripts/align_features.py"

# In-silico experiments: pools of stimuli that were never shown are feature-extracted
# with each model's extractor entries, then passed through every subject's fitted fMRI
# (predict) or EEG (predict_eeg) model; the stimuli that drive each ROI or channel group
# most and least are ranked and drawn; their thumbnails (rules/report.smk) are listed in
# the report under "In-silico".
for _name, _pools in PLAN.pool_extractors().items():

    rule:
        name:
            f"extract_pool_features_{_name}"
        input:
            pool_inputs,
        output:
            **{
                layer: directory(str(PLAN.pool_feature_store(_name, "{pool}", layer)))
                for layer in PLAN.extractor_layers(_name)
            },
        wildcard_constraints:
            pool=key_choice(_pools),
        params:
            **stage_params("pool_features", PLAN.extractor(_name), _name),
            pool=lambda wc: PLAN.pool(wc.pool).spec,
        log:
            log_path("pool_features", PLAN.stage_dir("pool_features", _name).name, "{pool}"),
        threads: 2
        resources:
            mem_mb=lambda wildcards, attempt: 6000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/extract_pool_features.py"


if PLAN.predict_models:

    rule predict:
        input:
            unpack(predict_inputs),
        output:
            store=directory(
                str(PLAN.results / "predict" / "{model}-{version}" / "sub-{subject}_{pool}.zarr")
            ),
            table=str(
                PLAN.results / "predict" / "{model}-{version}" / "sub-{subject}_{pool}_ranking.tsv"
            ),
            # full size; in the report as thumbnails (rules/report.smk)
            sheets=directory(
                str(
                    PLAN.results
                    / "predict"
                    / "{model}-{version}"
                    / "sub-{subject}_{pool}_contact_sheets"
                )
            ),
        wildcard_constraints:
            model=key_choice(PLAN.predict_models),
            pool=key_choice({p for pools in PLAN.predict_models.values() for p in pools}),
        params:
            stage=lambda wc: f"predict/{wc.model}",
            version=lambda wc: wc.version,
            cfg=config["predict"],
            pool=lambda wc: PLAN.pool(wc.pool).spec,
        log:
            log_path("predict", "{model}-{version}", "sub-{subject}_{pool}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/predict.py"


if PLAN.predict_eeg_models:

    rule predict_eeg:
        input:
            unpack(predict_eeg_inputs),
        output:
            store=directory(
                str(
                    PLAN.results / "predict_eeg" / "{model}-{version}" / "sub-{subject}_{pool}.zarr"
                )
            ),
            table=str(
                PLAN.results
                / "predict_eeg"
                / "{model}-{version}"
                / "sub-{subject}_{pool}_ranking.tsv"
            ),
            # full size; in the report as thumbnails (rules/report.smk)
            sheets=directory(
                str(
                    PLAN.results
                    / "predict_eeg"
                    / "{model}-{version}"
                    / "sub-{subject}_{pool}_contact_sheets"
                )
            ),
        wildcard_constraints:
            model=key_choice(PLAN.predict_eeg_models),
            pool=key_choice({p for pools in PLAN.predict_eeg_models.values() for p in pools}),
        params:
            stage=lambda wc: f"predict_eeg/{wc.model}",
            version=lambda wc: wc.version,
            cfg=config["predict"],
            pool=lambda wc: PLAN.pool(wc.pool).spec,
        log:
            log_path("predict_eeg", "{model}-{version}", "sub-{subject}_{pool}"),
        resources:
            mem_mb=lambda wildcards, attempt: 4000 * attempt,
        conda:
            CONDA_ENV
        script:
            "../scripts/predict_eeg.py"

# Report figures: the report embeds every file it lists, so it lists a small thumbnail
# of each raster figure (neuroflow.figures.write_thumbnails: at most THUMBNAIL_PRESETS'
# bytes each; contact sheets as JPEG, plots as 256-colour PNG or JPEG), written beside
# the full-size figures, which stay where their stage wrote them. Each figure keeps its
# caption, category and labels; its info panel lists the thumbnail's settings and the
# full-size file.
if PLAN.qc_enabled:

    rule qc_eeg_thumbnails:
        input:
            figures=str(PLAN.stage_dir("qc_eeg") / "sub-{subject}" / "{key}_qc"),
        output:
            thumbnails=report(
                directory(str(PLAN.stage_dir("qc_eeg") / "sub-{subject}" / "{key}_qc_thumbnails")),
                patterns=["{key}_qc-{kind}.png", "{key}_qc-{kind}.jpg"],
                caption="../workflow/report/qc.rst",
                category=QC_CATEGORY,
                subcategory="EEG",
                labels=lambda wc: qc_entry(f"{wc.key}_qc-{wc.kind}").labels,
            ),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.eeg_recordings),
        params:
            **thumbnail_params("plot"),
        log:
            log_path("report", "qc_eeg", V["qc_eeg"], "sub-{subject}", "{key}"),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT

    rule qc_fmri_thumbnails:
        input:
            figures=str(PLAN.stage_dir("qc_fmri") / "sub-{subject}" / "{key}_qc"),
        output:
            thumbnails=report(
                directory(str(PLAN.stage_dir("qc_fmri") / "sub-{subject}" / "{key}_qc_thumbnails")),
                patterns=["{key}_qc-{kind}.png", "{key}_qc-{kind}.jpg"],
                caption="../workflow/report/qc.rst",
                category=QC_CATEGORY,
                subcategory="fMRI",
                labels=lambda wc: qc_entry(f"{wc.key}_qc-{wc.kind}").labels,
            ),
        wildcard_constraints:
            key=key_choice(r.key for r in PLAN.fmri_runs),
        params:
            **thumbnail_params("plot"),
        log:
            log_path("report", "qc_fmri", V["qc_fmri"], "sub-{subject}", "{key}"),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT


if PLAN.predict_models:

    rule predict_thumbnails:
        input:
            figures=str(
                PLAN.results / "predict" / "{model}-{version}" / "sub-{subject}_{pool}_contact_sheets"
            ),
        output:
            thumbnails=report(
                directory(
                    str(
                        PLAN.results
                        / "predict"
                        / "{model}-{version}"
                        / "sub-{subject}_{pool}_contact_sheets_thumbnails"
                    )
                ),
                patterns=["{roi}.jpg", "{roi}.png"],
                caption="../workflow/report/insilico.rst",
                category=INSILICO_CATEGORY,
                subcategory=lambda wc: f"stimulus set {wc.pool}",
                labels=lambda wc: {"subject": wc.subject, "model": wc.model, "ROI": wc.roi},
            ),
        wildcard_constraints:
            model=key_choice(PLAN.predict_models),
            pool=key_choice({p for pools in PLAN.predict_models.values() for p in pools}),
        params:
            **thumbnail_params("photo"),
        log:
            log_path("report", "predict", "{model}-{version}", "sub-{subject}_{pool}"),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT


if PLAN.predict_eeg_models:

    rule predict_eeg_thumbnails:
        input:
            figures=str(
                PLAN.results
                / "predict_eeg"
                / "{model}-{version}"
                / "sub-{subject}_{pool}_contact_sheets"
            ),
        output:
            thumbnails=report(
                directory(
                    str(
                        PLAN.results
                        / "predict_eeg"
                        / "{model}-{version}"
                        / "sub-{subject}_{pool}_contact_sheets_thumbnails"
                    )
                ),
                patterns=["{roi}.jpg", "{roi}.png"],
                caption="../workflow/report/insilico_eeg.rst",
                category=INSILICO_CATEGORY,
                subcategory=lambda wc: f"EEG, stimulus set {wc.pool}",
                labels=lambda wc: {
                    "subject": wc.subject,
                    "model": wc.model,
                    "channel group": wc.roi,
                },
            ),
        wildcard_constraints:
            model=key_choice(PLAN.predict_eeg_models),
            pool=key_choice({p for pools in PLAN.predict_eeg_models.values() for p in pools}),
        params:
            **thumbnail_params("photo"),
        log:
            log_path("report", "predict_eeg", "{model}-{version}", "sub-{subject}_{pool}"),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT


if PLAN.has_summary:

    rule summary_thumbnails:
        input:
            figures=str(PLAN.summary_dir() / "plots"),
        output:
            thumbnails=report(
                directory(str(PLAN.summary_dir() / "plots_thumbnails")),
                patterns=["{name}.png", "{name}.jpg", "{name}.svg"],
                caption="../workflow/report/figures.rst",
                category=lambda wildcards: figure_entry(wildcards.name).category,
                subcategory=lambda wildcards: figure_entry(wildcards.name).subcategory,
                labels=lambda wildcards: figure_entry(wildcards.name).labels,
            ),
        params:
            **thumbnail_params("plot"),
        log:
            log_path("report", "summary", V["summary"]),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT


if PLAN.transform_variants() and PLAN.has_summary:

    rule transform_sweeps_thumbnail:
        input:
            figures=str(PLAN.summary_dir() / "transform_sweeps.png"),
        output:
            thumbnails=report(
                str(thumbnail_path(PLAN.summary_dir() / "transform_sweeps.png")),
                caption="../workflow/report/transform_sweeps.rst",
                category="Layer sweeps",
                subcategory="transform sweeps",
                labels={"figure": "score against the transform's value"},
            ),
        params:
            **thumbnail_params("plot"),
        log:
            log_path("report", "transform_sweeps", V["summary"]),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT


if PLAN.geometry_enabled:

    rule geometry_thumbnail:
        input:
            figures=str(PLAN.stage_dir("geometry") / "geometry.png"),
        output:
            thumbnails=report(
                str(thumbnail_path(PLAN.stage_dir("geometry") / "geometry.png")),
                caption="../workflow/report/geometry.rst",
                category="Layer sweeps",
                subcategory="representational geometry",
                labels={"figure": "geometry and scores against layer depth"},
            ),
        params:
            **thumbnail_params("plot"),
        log:
            log_path("report", "geometry", V.get("geometry", "none")),
        localrule: True
        conda:
            CONDA_ENV
        script:
            THUMBNAIL_SCRIPT

"""Train one transformer encoding model across subjects and predict their held-out runs."""

from neuroflow.encoding.transformer_stage import fit_transformer_encoding
from neuroflow.workflow.runner import run_job

subjects = list(snakemake.params.subjects)
features = {}
for name, paths in snakemake.input.items():
    if name.startswith("space_"):
        space, _, subject = name.removeprefix("space_").rpartition("__sub-")
        features.setdefault(space, {})[subject] = list(paths)
run_job(
    snakemake,
    fit_transformer_encoding,
    brain={s: list(snakemake.input[f"brain_{s}"]) for s in subjects},
    features=features,
    outputs=dict(zip(subjects, snakemake.output.stores, strict=True)),
    training=snakemake.output.training,
    test_runs=dict(snakemake.params.test_runs),
)

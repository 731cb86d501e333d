"""The ``neuroflow`` command line: run the workflow, inspect artifacts, list versions, clean up.

Run ``neuroflow --help`` or ``neuroflow <command> --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neuroflow import __version__
from neuroflow.cli.configs import (
    DEFAULT_CONFIG,
    DEFAULT_SCHEMA,
    _load_config,
    _resolve_config,
)
from neuroflow.cli.gc import cmd_gc
from neuroflow.cli.inspect import cmd_inspect, cmd_versions
from neuroflow.cli.run import cmd_run

__all__ = ["main"]


# --------------------------------------------------------------------------- check-config
def _plan_lines(plan: Any) -> list[str]:
    """What a run of ``plan`` would do, a line per fact."""
    models = plan.encoding_models()
    lines = [
        f"dataset: {plan.source} at {plan.bids_root}",
        f"  {len(plan.fmri_runs)} fMRI runs, {len(plan.eeg_recordings)} EEG recordings, "
        f"{len(plan.betas_sessions)} betas sessions",
        f"features: {', '.join(e['name'] for e in plan.extractors) or 'none'}",
        f"encoding models: {', '.join(models) or 'none'}",
        f"EEG encoding models: {', '.join(plan.eeg_models()) or 'none'}",
        f"decoding: {'EEG' if plan.decoding_enabled else 'off'}"
        + (", EEG across subjects" if plan.decoding_cross_subject_enabled else "")
        + (", fMRI identification" if plan.decoding_fmri_enabled else ""),
        f"RSA: {', '.join(plan.rsa_modalities) or 'off'}",
        f"results: {plan.results}",
    ]
    for subject in plan.encoding_subjects:
        lines.append(f"  sub-{subject} held-out runs: {', '.join(plan.test_runs_of(subject))}")
    lines += [f"note: {note}" for note in plan.notes]
    return lines


def cmd_check_config(args: argparse.Namespace) -> int:
    """Validate a config and print what a run would do with it, and the models it reads.

    Exits 1 when a model the config's extractors read is missing from disk (as
    ``neuroflow models`` does), 0 otherwise.
    """
    from neuroflow.features.inventory import format_inventory
    from neuroflow.workflow.plan import WorkflowPlan

    config, source = _resolve_config(args)
    if source:
        print(source)
    plan = WorkflowPlan(config)
    print("\n".join(_plan_lines(plan)))
    records = _model_records(config, hashes=False)
    print("models (as `neuroflow models` finds them, offline; sha256 with `neuroflow models`):")
    lines = format_inventory(records, hashes=False)
    print("\n".join(f"  {line}" if line else "" for line in lines))
    missing = [record.name for record in records if record.status == "missing"]
    if missing:
        print(
            f"neuroflow check-config: the config is valid, but {len(missing)} model(s) that "
            f"its extractors read are missing ({', '.join(dict.fromkeys(missing))}): a run "
            "would fail at their feature jobs. Fetch them as listed above, then check again.",
            file=sys.stderr,
        )
        return 1
    print("Config OK: `snakemake -n` with the same arguments lists the jobs.")
    return 0


# --------------------------------------------------------------------------- models
def _model_records(config: Mapping[str, Any], *, hashes: bool) -> list[Any]:
    """What the config's extractors read, looked for on disk offline (nothing imported).

    Parameters
    ----------
    config : dict
        The validated config.
    hashes : bool
        Compute the SHA-256 of the weights found.

    Returns
    -------
    records : list of ModelRecord
        See :func:`neuroflow.features.inventory.model_inventory`.
    """
    from neuroflow.features.inventory import model_inventory
    from neuroflow.features.trust import builder_trust

    return model_inventory(
        config["features"]["extractors"],
        hashes=hashes,
        trust=builder_trust(config["features"]),
    )


def cmd_models(args: argparse.Namespace) -> int:
    """List the models the config's extractors read, and whether each is on disk.

    Exits 1 when one is missing, 0 when all are on disk (or none is needed).
    """
    from neuroflow.features.inventory import format_inventory

    config = _load_config(args)
    hashes = not args.no_hash
    records = _model_records(config, hashes=hashes)
    if args.json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
    else:
        print("\n".join(format_inventory(records, hashes=hashes)))
    return 1 if any(record.status == "missing" for record in records) else 0


# --------------------------------------------------------------------------- export
def cmd_export(args: argparse.Namespace) -> int:
    """Export stores as NIfTI maps, MNE fif files, npy/HDF5 features and a TSV summary."""
    from neuroflow.export import EXPORT_KINDS, export_results

    written = export_results(
        args.paths,
        args.output,
        kinds=args.kinds or tuple(EXPORT_KINDS),
        features_format=args.features_format,
        overwrite=args.force,
    )
    for kind, files in written.items():
        print(f"{kind}: {len(files)} files")
        for path in files:
            print(f"  {path}")
    if not any(written.values()):
        print(f"neuroflow export: no store of {list(written)} under {args.paths}.", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- demo-data
def cmd_demo_data(args: argparse.Namespace) -> int:
    """Generate the embedded demo dataset into a folder."""
    from neuroflow.artifacts import build_provenance
    from neuroflow.demo import generate_demo_dataset
    from neuroflow.demo.generate import foreign_files
    from neuroflow.workflow.plan import stage_versions
    from neuroflow.workflow.versions import dataset_identity

    output = Path(args.output)
    if output.exists() and not output.is_dir():
        print(f"neuroflow demo-data: {output} exists and is not a folder.", file=sys.stderr)
        return 2
    foreign = foreign_files(output)
    if foreign and not args.force:
        shown = ", ".join(str(p.relative_to(output)) for p in foreign[:3])
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        print(
            f"neuroflow demo-data: {output} already holds files that neuroflow did not write "
            f"({len(foreign)}: {shown}{more}); generating the demo there would delete them. "
            "Choose an empty or new folder, move them out, or pass --force to replace the "
            "folder's whole content.",
            file=sys.stderr,
        )
        return 2
    config = _load_config(args)  # as `neuroflow run` builds it: its `demo` block
    if args.seed is not None:
        config["demo"]["seed"] = args.seed
    versions = stage_versions(config)
    provenance = build_provenance(
        stage="demo", version=versions["demo"], config=dataset_identity(config)["demo"]
    )
    out = generate_demo_dataset(output=output, config=config["demo"], provenance=provenance)
    print(f"Demo dataset written to {out}")
    return 0


# --------------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``neuroflow`` command."""
    parser = argparse.ArgumentParser(
        prog="neuroflow",
        description="neuroflow: run the workflow (`neuroflow run`), inspect and manage its "
        "versioned artifacts.",
    )
    parser.add_argument("--version", action="version", version=f"neuroflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_config_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--configfile",
            nargs="+",
            action="extend",
            default=[],
            metavar="FILE",
            help=f"config files merged in order on top of {DEFAULT_CONFIG} (the working "
            "folder's, else the one shipped with the workflow), as with `neuroflow run`",
        )
        p.add_argument(
            "--config",
            nargs="+",
            action="extend",
            default=[],
            metavar="KEY=VALUE",
            help="overrides applied last, parsed as `snakemake --config` parses them; a "
            "FILE (no '=') is read after the --configfile files, as `neuroflow run` does",
        )
        p.add_argument(
            "--replace-workflow-config",
            action="store_true",
            help=f"the --configfile files replace {DEFAULT_CONFIG} instead of updating it, "
            "as with the snakemake flag of that name",
        )
        p.add_argument("--schema", default=DEFAULT_SCHEMA, help="config schema (%(default)s)")

    def add_recorded_args(p: argparse.ArgumentParser) -> None:
        add_config_args(p)
        p.add_argument(
            "--no-recorded-config",
            action="store_true",
            help="build the config from the arguments alone, as `neuroflow run` would, not "
            "as the newest recorded run with these arguments (of any config, without "
            "arguments) built it",
        )

    p = sub.add_parser(
        "check-config",
        help="validate a config against the dataset without running anything",
        description="Read the config exactly as `snakemake` would from the same --configfile "
        "and --config arguments (as the newest recorded run with these arguments read it, "
        "named first: with or without the working folder's config/config.yaml), validate "
        "it (YAML syntax with file, line and column; "
        "schema; cross-field checks; the dataset it names) and print what a run would do: "
        "the recordings selected, the analyses that apply and a note for each one left out; "
        "then the models its extractors read, looked for on disk as `neuroflow models` looks "
        "(offline, nothing imported or loaded). Exits 1 when one of them is missing, 2 when "
        "the config is invalid.",
    )
    add_recorded_args(p)
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser(
        "models",
        help="list the models the config needs and whether each is on disk",
        description="List, for every entry of features.extractors, the model it reads (Hugging "
        "Face or sentence-transformers folder, cached id or packaged model; torch_module "
        "weights file, TorchScript file or preset), looked for exactly where feature "
        "extraction will look, offline: where it was found, its size and the SHA-256 the "
        "feature stores record (weights_sha256). For a missing model, the commands that fetch "
        "it on a machine with internet access and how to point neuroflow at the result. "
        "Weight-free extractors and `weights: random` entries need nothing. Exits 1 when a "
        "model is missing, so a script can check before submitting jobs. The config is built "
        f"as a run builds it: {DEFAULT_CONFIG}, then each --configfile, then the --config "
        "overrides.",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.add_argument(
        "--no-hash",
        action="store_true",
        help="skip the SHA-256 of the weights (reading every byte is slow for large models)",
    )
    add_config_args(p)
    p.set_defaults(func=cmd_models)

    p = sub.add_parser(
        "run",
        help="run the workflow (snakemake) from any folder",
        description="Run the installed workflow with `snakemake` in the working folder "
        "(results/ and .snakemake/ go there), from any folder: `neuroflow run --config "
        "my.yaml --cores 4`. The Snakefile, the default config (config/config.yaml of the "
        "working folder when it has one, else the shipped one) and the local workflow "
        "profile come with the package; --config FILE and --configfile FILE add config files "
        "on top of the default, in order; --config KEY=VALUE sets single values. Every "
        "other argument goes to snakemake unchanged (e.g. `-n`, `--cores 2`, a target, "
        "`--report report.html`, `--profile` or `--workflow-profile`, which replace the "
        "local profile). Every config file's YAML is read first: a syntax error is "
        "reported with the file, line and column.",
    )
    p.add_argument(
        "snakemake_args", nargs=argparse.REMAINDER, help="snakemake's arguments, unchanged"
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "inspect",
        help="show a store's arrays, attributes and provenance chain",
        description="Show a zarr artifact's arrays (dims, shape, dtype, chunks, codecs), its "
        "attributes and its provenance chain back to the raw inputs, after checking its files "
        "against its manifest (names and sizes). With --verify, only check the store, or every "
        "store under a folder, in full (checksums too).",
    )
    p.add_argument(
        "path", help="a .zarr store (or the demo dataset folder); with --verify also any folder"
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="compare every file of the store, or of every store under a folder, with the "
        "manifest written with it (names, sizes and checksums); exit 1 when one is damaged",
    )
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser(
        "versions",
        help="list the versions of each stage on disk",
        description="List every version of each stage found under the results folder, the "
        "config values that differ between them, and mark (*) the one the config selects. "
        "The config is that of the newest recorded run with the same config arguments (of "
        "any config, when none is given), built as that run built it, and named first; "
        f"without such a run, as a run builds it: {DEFAULT_CONFIG}, then each --configfile, "
        "then the --config overrides.",
    )
    p.add_argument("stage", nargs="?", help="limit to one stage, e.g. encoding")
    p.add_argument("--max-keys", type=int, default=6, help="differing keys shown per line")
    add_recorded_args(p)
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser(
        "gc",
        help="remove versions that neither the config nor a recent run uses",
        description="Remove the stage versions that the config does not select, and the "
        "leftovers of interrupted writes. The config is that of the newest recorded run "
        "(run records in <results>/.neuroflow/runs) with the same config arguments (of any "
        "config, when none is given), built as that run built it; without such a run, as "
        f"`neuroflow run` builds it ({DEFAULT_CONFIG}, then each --configfile, then the "
        "--config overrides). A version that the newest run of any config selects is never "
        "removed. Versions that a recent run used are kept and listed, whatever the config; "
        "--include-recent removes them after a confirmation. While a run holds the results "
        "lock, interrupted writes are left alone. Use --dry-run first.",
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    p.add_argument(
        "--keep-runs",
        type=int,
        default=5,
        metavar="N",
        help="versions used by the last N runs count as recent (%(default)s)",
    )
    p.add_argument(
        "--keep-days",
        type=float,
        default=7.0,
        metavar="D",
        help="so do versions used by runs of the last D days (%(default)s)",
    )
    p.add_argument(
        "--include-recent",
        action="store_true",
        help="also remove versions of recent runs (after a confirmation; never the demo "
        "dataset a recent run used)",
    )
    p.add_argument("--yes", action="store_true", help="confirm --include-recent without asking")
    add_recorded_args(p)
    p.set_defaults(func=cmd_gc)

    p = sub.add_parser(
        "export",
        help="export stores in the formats of the field (NIfTI, MNE fif, npy/HDF5, TSV)",
        description="Export the stores under the given results folders (or the stores "
        "named): voxel-wise score maps as NIfTI statistical maps with BIDS-derivatives "
        "names (stat-r, stat-rnormalized, stat-p and FDR-thresholded desc-fdr maps), EEG "
        "epochs as MNE -epo.fif with the evoked response per condition in -ave.fif, "
        "features as .npy per layer (or HDF5) with the stimulus order, and the summary "
        "table with a JSON sidecar of its columns. Every file gets a JSON sidecar naming "
        "the store, stage and version it came from. Two versions of one model would "
        "write the same file: name the stores of one version, or remove the other with "
        "`neuroflow gc`. Every refusal comes before anything is written; the files are "
        "written into a hidden sibling folder and moved into place at the end.",
    )
    p.add_argument("paths", nargs="+", help="results folders, version folders or stores")
    p.add_argument(
        "--output",
        "-o",
        required=True,
        help="export folder (created); files it already holds are never replaced without --force",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the files of --output that this export writes again",
    )
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=["maps", "epochs", "eeg_scores", "tables", "features", "summary"],
        help="what to export (default: all)",
    )
    p.add_argument(
        "--features-format",
        choices=["npy", "h5"],
        default="npy",
        help="file format of the features (%(default)s)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "demo-data",
        help="generate the embedded demo BIDS dataset",
        description="Generate the simulated demo BIDS dataset (fMRI, EEG, stimuli, planted "
        "ground truth) into a folder, offline and deterministically: the demo of the "
        "config's `demo` block, the config built as `neuroflow run` builds it from the "
        "same --configfile/--config arguments (the dataset a run of that config generates).",
    )
    p.add_argument(
        "output",
        help="folder to create; an earlier demo there is replaced, a folder that holds any "
        "file the demo did not write is refused",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="random seed (default: the config's `demo.seed`)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a folder that holds files the demo did not write (they are deleted)",
    )
    add_config_args(p)
    p.set_defaults(func=cmd_demo_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``neuroflow`` command."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and argv[1:2] not in (["-h"], ["--help"]):
        # snakemake's options pass through untouched (argparse would claim some of them)
        args = argparse.Namespace(command="run", snakemake_args=argv[1:], func=cmd_run)
    else:
        args = parser.parse_args(argv)
    from neuroflow.config import ConfigError

    try:
        return int(args.func(args) or 0)
    except (ConfigError, FileExistsError, FileNotFoundError, KeyError, ValueError) as err:
        print(f"neuroflow {args.command}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`
        sys.stderr.close()
        return 0

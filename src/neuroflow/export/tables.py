"""Stores as tables and arrays: long-format TSVs of decoding and RSA stores, features as
``.npy`` or HDF5 with their stimulus order, and ``scores.tsv`` with a sidecar describing
its columns.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset
from neuroflow.export.common import _claim, _origin, _sidecar, _write_json, results_relative

__all__ = [
    "SUMMARY_COLUMN_DESCRIPTIONS",
    "SUMMARY_METRIC_DESCRIPTIONS",
    "TABLE_MAX_VALUES",
    "export_features",
    "export_summary",
    "export_table",
    "results_table",
]


#: Largest variable (in values) that a results table holds; larger ones are listed in
#: the sidecar's ``SkippedVariables`` (the store keeps them).
TABLE_MAX_VALUES = 2_000_000


def _described(ds: xr.Dataset, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """Sidecar description (long name, units) of each variable of ``names``."""
    out = {}
    for name in names:
        attrs = ds[name].attrs
        entry = {"Description": str(attrs.get("long_name") or attrs.get("description") or name)}
        if attrs.get("units"):
            entry["Units"] = str(attrs["units"])
        out[name] = entry
    return out


def results_table(ds: xr.Dataset, dims: Sequence[str] | None = None) -> tuple[pd.DataFrame, list]:
    """A store's numeric variables as one long table: ``variable``, one column per dim, ``value``.

    Parameters
    ----------
    ds : xarray.Dataset
        Any store.
    dims : sequence of str | None
        Export only the variables on exactly these dims (any order); None: all.

    Returns
    -------
    table : pandas.DataFrame, shape (n_values, 2 + n_dims)
        A row per value of each variable; the columns of dims a variable lacks are
        empty (NaN) on its rows.
    skipped : list of str
        Variables left out: not numeric or boolean, or more than
        :data:`TABLE_MAX_VALUES` values.
    """
    frames, skipped = [], []
    for name, var in ds.data_vars.items():
        if dims is not None and set(var.dims) != set(dims):
            continue
        if var.dtype.kind not in "biuf" or var.size > TABLE_MAX_VALUES:
            skipped.append(str(name))
            continue
        if var.ndim == 0:
            frame = pd.DataFrame({"value": [var.values.item()]})
        else:
            var = var.transpose(*dims) if dims is not None else var
            frame = var.reset_coords(drop=True).to_series().rename("value").reset_index()
        frame.insert(0, "variable", str(name))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["variable", "value"]), skipped
    table = pd.concat(frames, ignore_index=True, sort=False)
    order = ["variable", *[c for c in table.columns if c not in ("variable", "value")], "value"]
    return table[order], skipped


def _write_table(path: Path, table: pd.DataFrame) -> Path:
    """A TSV with ``n/a`` for missing values (BIDS)."""
    table.to_csv(path, sep="\t", index=False, na_rep="n/a")
    return path


def _table_plan(store: Path, ds: xr.Dataset, output: Path) -> Path:
    """The TSV of a decoding or RSA store: its path in the results folder, as ``.tsv``."""
    stage = str((ds.attrs.get(PROVENANCE_KEY) or {}).get("stage") or "")
    where = Path(results_relative(store, stage))
    if where.is_absolute():  # not inside a results folder: <stage>/<folder>/<name>
        where = Path(stage.split("/")[0] or "tables", store.parent.name, store.name)
    return output / where.with_suffix(".tsv")


def export_table(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write a decoding or RSA store's numeric results as one long-format TSV.

    Parameters
    ----------
    store : path-like
        Store of the ``decoding``, ``decoding_fmri``, ``decoding_cross_subject`` or
        ``rsa`` stage.
    output : path-like
        Root of the export folder; the table goes where the store lies in the results
        folder (``decoding/<version>/decoding_eeg.tsv``).

    Returns
    -------
    paths : list of Path
        The table (columns ``variable``, the store's dims, ``value``; see
        :func:`results_table`), its sidecar beside it.
    """
    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    path = _claim(_table_plan(store, ds, output), claimed, store)
    path.parent.mkdir(parents=True, exist_ok=True)
    table, skipped = results_table(ds)
    _write_table(path, table)
    dims = [c for c in table.columns if c not in ("variable", "value")]
    sidecar = {
        **_origin(store, ds),
        "Columns": {
            "variable": "the store's variable (see Variables)",
            **{
                dim: f"coordinate along `{dim}` (n/a: the variable has no such dim)" for dim in dims
            },
            "value": "the variable's value",
        },
        "Variables": _described(ds, table["variable"].unique()),
        "SkippedVariables": skipped,
    }
    return [path, _write_json(_sidecar(path), sidecar)]


def _features_plan(store: Path, ds: xr.Dataset, output: Path, fmt: str) -> Path:
    """The data file of a feature store (``.npy`` or ``.h5``).

    Raises
    ------
    ValueError
        For an unknown ``fmt``, or a store without ``features`` (stimulus, feature).
    """
    if fmt not in ("npy", "h5"):
        raise ValueError(f"`fmt` must be 'npy' or 'h5', got {fmt!r} instead.")
    if "features" not in ds or ds["features"].dims != ("stimulus", "feature"):
        raise ValueError(f"{store}: a feature store must have `features` (stimulus, feature).")
    name = str(ds.attrs.get("feature_set") or store.parent.name.rsplit("-", 1)[0])
    return output / "features" / name / f"{store.stem}.{fmt}"


def _stimuli_tsv(path: Path) -> Path:
    """The stimulus order beside a ``.npy`` feature file."""
    return path.with_name(f"{path.stem}_stimuli.tsv")


def export_features(
    store: str | os.PathLike,
    output: str | os.PathLike,
    *,
    fmt: str = "npy",
    _claimed: dict | None = None,
) -> list[Path]:
    """Write a feature store as ``.npy`` (with the stimulus order as TSV) or HDF5.

    Parameters
    ----------
    store : path-like
        Store of the ``features`` stage: ``features`` (stimulus, feature).
    output : path-like
        Export folder; files go to ``features/<extractor>/<layer>.{npy,h5}``.
    fmt : ``"npy"`` | ``"h5"``
        ``npy``: the array plus ``<layer>_stimuli.tsv``; ``h5``: datasets
        ``features``, ``stimulus`` and ``feature`` in one file.

    Returns
    -------
    paths : list of Path
        The data file (and the TSV for ``npy``).
    """
    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    path = _claim(_features_plan(store, ds, output, fmt), claimed, store)
    name = path.parent.name
    path.parent.mkdir(parents=True, exist_ok=True)
    values = np.asarray(ds["features"].values)
    stimuli = [str(s) for s in ds["stimulus"].values]
    about = {
        **_origin(store, ds),
        "Extractor": name,
        "Layer": ds.attrs.get("layer"),
        "Model": ds.attrs.get("model"),
        "WeightsSHA256": ds.attrs.get("weights_sha256"),
        "Shape": list(values.shape),
        "Dimensions": ["stimulus", "feature"],
    }
    if fmt == "npy":
        np.save(path, values)
        tsv = _stimuli_tsv(path)
        tsv.write_text("stimulus\n" + "".join(f"{s}\n" for s in stimuli))
        _write_json(_sidecar(path), about)
        return [path, tsv]
    import h5py

    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=values)
        f.create_dataset(
            "stimulus", data=np.array(stimuli, dtype=object), dtype=h5py.string_dtype()
        )
        f.create_dataset("feature", data=np.asarray(ds["feature"].values))
        f.attrs["neuroflow"] = json.dumps(about, default=str)
    _write_json(_sidecar(path), about)
    return [path]


#: Column descriptions of ``scores.tsv`` for its sidecar (the table's layout:
#: :data:`neuroflow.evaluation.summary.TABLE_COLUMNS`).
SUMMARY_COLUMN_DESCRIPTIONS = {
    "analysis": (
        "the row's analysis: encoding, trial_encoding, eeg_encoding, trf, classification, "
        "feature_time_course, identification_<decoder>, identification_fmri, rsa, rsa_eeg"
    ),
    "subject": "subject label, or 'group' for across-subject rows",
    "model": (
        "encoding model's configured name (encoding analyses), or the compared feature "
        "space as 'extractor:layer' (decoding, identification, RSA)"
    ),
    "extractor": "feature extractor(s) of the model, '+'-joined for joint models",
    "feature_space": (
        "feature space(s) of the model as 'extractor:layer', '+'-joined for joint models; "
        "n/a for analyses without one (classification)"
    ),
    "layer": "layer(s) of the extractor(s), '+'-joined for joint models",
    "roi": (
        "ROI, EEG channel, 'eeg' for the whole montage, an EEG channel group's name "
        "(rsa_eeg), or 'all' for every target"
    ),
    "metric": "what 'value' measures (see its levels)",
    "statistic": (
        "'value' (one subject), 'mean', 'sd', 'sem' across subjects, the bounds of the "
        "noise ceiling ('noise_ceiling_lower', 'noise_ceiling_upper'; RSA), the bootstrap "
        "interval and standard error ('bootstrap_ci_lower', 'bootstrap_ci_upper', "
        "'bootstrap_se'; RSA) or the mean difference from the subject-as-model baseline "
        "('baseline_difference', its p_value the TOST equivalence p-value; RSA)"
    ),
    "value": "the metric's value (its statistic over subjects on group rows)",
    "n_subjects": "subjects with a finite value",
    "n_targets": "targets (voxels, channel x latency) in the ROI; mean over subjects on group rows",
    "chance": "chance level of the metric, where it has one",
    "p_value": "p-value of the metric, where tested",
    "inconclusive": "True when the test had too few permutations for its threshold",
}


#: Descriptions of ``metric`` values that :mod:`neuroflow.variables` does not describe.
SUMMARY_METRIC_DESCRIPTIONS = {
    "peak_r": "largest test r of the time course (EEG: mean over channels)",
    "peak_latency": "latency of the peak (s)",
    "peak_latency_s": "latency of the peak decoding score (s)",
    "onset_latency_s": "latency of the first significant cluster (s)",
    "peak_balanced_accuracy": "largest balanced accuracy of the time course",
    "top1": "fraction of test stimuli identified first",
    "top5": "fraction of test stimuli identified among the 5 best",
    "mean_rank": "mean rank of the true stimulus among the candidates",
    "cv_score_mean": "mean cross-validated TRF score over channels",
    "cv_score_max": "largest cross-validated TRF score over channels",
}


#: Descriptions of the ``<comparison>_model_time_<what>`` metrics of ``rsa_eeg`` rows.
_MODEL_TIME_METRICS = {
    "peak": "peak similarity of the model time x brain time RSA map",
    "peak_model_time": "model time (within the stimulus) of that peak (s)",
    "peak_brain_time": "brain time of that peak (s)",
    "slope": "slope of the model-to-brain time line",
    "lag": "intercept of the model-to-brain time line (s)",
}


def _metric_levels(rows: pd.DataFrame) -> dict[str, str]:
    """Description (with units where known) of each ``metric`` value of the table."""
    from neuroflow.variables import variable_description

    levels = {}
    analyses = rows["analysis"] if "analysis" in rows else pd.Series("", index=rows.index)
    pairs = set(zip(analyses.astype(str), rows["metric"].astype(str), strict=True))
    for analysis, metric in sorted(pairs):
        if metric in ("", "n/a") or metric in levels:
            continue
        found = variable_description(metric)
        if found:
            levels[metric] = f"{found[0]} ({found[1]})"
        elif metric in SUMMARY_METRIC_DESCRIPTIONS:
            levels[metric] = SUMMARY_METRIC_DESCRIPTIONS[metric]
        elif analysis == "rsa_eeg" and "_model_time_" in metric:
            comparison, _, what = metric.partition("_model_time_")
            levels[metric] = f"{_MODEL_TIME_METRICS.get(what, what)} ({comparison})"
        elif analysis == "rsa_eeg" and metric.endswith("_peak_latency"):
            comparison = metric.removesuffix("_peak_latency")
            levels[metric] = f"latency of the peak RDM similarity ({comparison}) (s)"
        elif analysis == "rsa_eeg" and metric.endswith("_peak"):
            comparison = metric.removesuffix("_peak")
            levels[metric] = f"peak similarity of model and brain RDMs over time ({comparison})"
        elif analysis == "rsa":
            levels[metric] = f"similarity of model and brain RDMs ({metric})"
        else:
            levels[metric] = metric
    return levels


def _summary_table(summary_dir: Path) -> Path:
    """The ``scores.tsv`` of a summary folder (FileNotFoundError when missing)."""
    table = summary_dir / "scores.tsv"
    if not table.is_file():
        raise FileNotFoundError(f"{summary_dir} holds no scores.tsv.")
    return table


def export_summary(
    summary_dir: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Copy the summary table with a JSON sidecar describing its columns.

    Parameters
    ----------
    summary_dir : path-like
        A ``results/summary/<version>`` folder (with ``scores.tsv`` and ``scores.zarr``).
    output : path-like
        Export folder; the table goes to ``summary/scores.tsv``.

    Returns
    -------
    paths : list of Path
        The table and its sidecar.
    """
    summary_dir, output = Path(summary_dir), Path(output)
    claimed = {} if _claimed is None else _claimed
    table = _summary_table(summary_dir)
    ds = open_dataset(summary_dir / "scores.zarr")
    path = _claim(output / "summary" / "scores.tsv", claimed, summary_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(table, path)
    rows = pd.read_csv(table, sep="\t", dtype=str, keep_default_na=False)
    from neuroflow.variables import variable_description

    columns = {}
    for column in rows.columns:
        described = SUMMARY_COLUMN_DESCRIPTIONS.get(column)
        found = variable_description(column)
        columns[column] = {"Description": described or (found[0] if found else column)}
        if found:
            columns[column]["Units"] = found[1]
    if "metric" in rows.columns:
        columns["metric"]["Levels"] = _metric_levels(rows)
    sidecar = _write_json(_sidecar(path), {**_origin(summary_dir / "scores.zarr", ds), **columns})
    return [path, sidecar]

"""Export stores in the file formats of the field, each with the version it came from.

- Voxel-wise score stores (``evaluation``, ``trial_evaluation``) become NIfTI statistical
  maps with BIDS-derivatives names, e.g.
  ``sub-01/func/sub-01_task-movie_model-visual_stat-r_statmap.nii.gz``; ``stat`` is
  ``r``, ``rnormalized`` or ``p``, and ``desc-fdr`` maps keep only the voxels
  significant after FDR (0 elsewhere).
- EEG epochs stores (``preprocess_eeg``) become MNE ``-epo.fif`` files, with the
  evoked response of each condition in one ``-ave.fif``.
- Feature stores become one ``.npy`` (stimulus, feature) per layer, with the stimulus
  order in a TSV beside it, or one HDF5 file (``--features-format h5``).
- The summary becomes ``scores.tsv`` with a JSON sidecar that describes its columns.

Every exported file has a JSON sidecar (BIDS style) naming the store it came from, its
stage and version, and what the file holds; names that BIDS labels cannot hold (they
are alphanumeric) are kept there in full.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, find_stores, open_dataset

__all__ = [
    "EXPORT_KINDS",
    "export_epochs",
    "export_features",
    "export_results",
    "export_score_maps",
    "export_summary",
]

#: What :func:`export_results` can export, by the stage folder it reads.
EXPORT_KINDS = {
    "maps": ("evaluation", "trial_evaluation"),
    "epochs": ("preprocess_eeg",),
    "features": ("features",),
    "summary": ("summary",),
}

#: Score variable -> BIDS ``stat`` label of the exported map.
MAP_STATISTICS = {"r": "r", "r_normalized": "rnormalized", "p_value": "p"}


def _label(text: Any) -> str:
    """A BIDS label: the alphanumeric characters of ``text``."""
    return re.sub(r"[^A-Za-z0-9]", "", str(text)) or "x"


def _origin(path: Path, ds: xr.Dataset) -> dict[str, Any]:
    """Sidecar fields naming the store a file came from."""
    record = ds.attrs.get(PROVENANCE_KEY) or {}
    return {
        "Sources": [str(path)],
        "NeuroflowStage": record.get("stage"),
        "NeuroflowVersion": record.get("version"),
        "NeuroflowFormatVersion": record.get("format_version"),
    }


def _write_json(path: Path, content: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(dict(content), indent=2, default=str) + "\n")
    return path


def _claim(path: Path, claimed: dict[Path, Path], source: Path) -> Path:
    """Refuse to write one output path from two stores (two versions of one model)."""
    if path in claimed and claimed[path] != source:
        raise ValueError(
            f"{path.name} would be written from both {claimed[path]} and {source}: export "
            "one version at a time (name its stores, or remove the other with `neuroflow gc`)."
        )
    claimed[path] = source
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _task(ds: xr.Dataset) -> str | None:
    """The task of the runs a score store was tested on, when there is one."""
    runs = [str(r) for r in ds.attrs.get("test_runs") or []]
    tasks = {m.group(1) for r in runs if (m := re.search(r"task-([A-Za-z0-9]+)", r))}
    return tasks.pop() if len(tasks) == 1 else None


def export_score_maps(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write a voxel-wise score store as NIfTI statistical maps with JSON sidecars.

    Parameters
    ----------
    store : path-like
        Store of the ``evaluation`` (or ``trial_evaluation``) stage: per-voxel ``r``,
        ``r_normalized``, ``p_value`` and ``significant`` with the voxel indices
        ``i``, ``j``, ``k`` and the attributes ``affine`` and ``mask_shape``.
    output : path-like
        Root of the derivatives folder; maps go to ``sub-<s>/func/``.

    Returns
    -------
    paths : list of Path
        The maps written (sidecars beside them, same name with ``.json``).
    """
    from neuroflow.evaluation.plotting import scores_to_nifti

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    missing = [c for c in ("i", "j", "k") if c not in ds.coords]
    missing += [a for a in ("affine", "mask_shape", "subject", "model") if a not in ds.attrs]
    if missing:
        raise ValueError(
            f"{store}: a score map needs the voxel indices i, j, k and the attributes affine, "
            f"mask_shape, subject and model, got none of {missing} instead."
        )
    ijk = np.stack([np.asarray(ds[c].values, dtype=np.int64) for c in "ijk"], axis=1)
    affine = np.asarray(
        json.loads(ds.attrs["affine"])
        if isinstance(ds.attrs["affine"], str)
        else ds.attrs["affine"]
    )
    subject = str(ds.attrs["subject"])
    task = _task(ds)
    stem = f"sub-{_label(subject)}" + (f"_task-{_label(task)}" if task else "")
    stem += f"_model-{_label(ds.attrs['model'])}"
    about = {
        **_origin(store, ds),
        "Subject": subject,
        "Model": str(ds.attrs["model"]),
        "FeatureSpaces": list(ds.attrs.get("feature_spaces") or []),
        "Layer": ds.attrs.get("layer"),
        "TestRuns": list(ds.attrs.get("test_runs") or []),
        "NPermutations": ds.attrs.get("n_permutations"),
        "FDRAlpha": ds.attrs.get("fdr_alpha"),
    }
    significant = np.asarray(ds["significant"].values, bool) if "significant" in ds else None
    maps: list[tuple[str, np.ndarray, str]] = []
    for variable, stat in MAP_STATISTICS.items():
        if variable in ds:
            maps.append((f"stat-{stat}", np.asarray(ds[variable].values, np.float64), variable))
    if significant is not None and "r" in ds:
        r = np.where(significant, np.asarray(ds["r"].values, np.float64), 0.0)
        maps.append(("desc-fdr_stat-r", r, "r where significant after FDR, else 0"))
    out = []
    for entities, values, what in maps:
        path = _claim(
            output / f"sub-{_label(subject)}" / "func" / f"{stem}_{entities}_statmap.nii.gz",
            claimed,
            store,
        )
        img = scores_to_nifti(values, ijk, affine=affine, mask_shape=ds.attrs["mask_shape"])
        img.to_filename(path)
        _write_json(
            path.with_name(path.name.replace(".nii.gz", ".json")), {**about, "Statistic": what}
        )
        out.append(path)
    return out


def _epochs_array(ds: xr.Dataset, store: Path) -> Any:
    """An ``mne.EpochsArray`` of an epochs store (data in volts, times in seconds)."""
    import mne

    if "epochs" not in ds or ds["epochs"].dims != ("epoch", "channel", "time"):
        raise ValueError(
            f"{store}: an EEG epochs store must have `epochs` (epoch, channel, time), got "
            f"{ds['epochs'].dims if 'epochs' in ds else 'no such variable'} instead."
        )
    channels = [str(c) for c in ds["channel"].values]
    types = [str(t) for t in ds["ch_type"].values] if "ch_type" in ds.coords else "eeg"
    info = mne.create_info(channels, float(ds.attrs["sfreq"]), ch_types=types)
    info["bads"] = [c for c in ds.attrs.get("bad_channels") or [] if c in channels]
    if all(f"ch_{a}" in ds.coords for a in "xyz"):
        pos = np.stack([np.asarray(ds[f"ch_{a}"].values, float) for a in "xyz"], axis=1)
        if np.isfinite(pos).all():
            montage = mne.channels.make_dig_montage(
                dict(zip(channels, pos, strict=True)), coord_frame="head"
            )
            info.set_montage(montage, on_missing="ignore")
    conditions = (
        [str(c) for c in ds["condition"].values]
        if "condition" in ds.coords
        else ["epoch"] * ds.sizes["epoch"]
    )
    event_id = {name: i + 1 for i, name in enumerate(dict.fromkeys(conditions))}
    sfreq = float(ds.attrs["sfreq"])
    times = np.asarray(ds["time"].values, float)
    n = ds.sizes["epoch"]
    onsets = np.asarray(ds["onset"].values, float) if "onset" in ds.coords else None
    samples = None if onsets is None else np.round(onsets * sfreq).astype(int)
    if samples is None or not (np.diff(samples) > 0).all():
        # epochs of several runs: one slot per epoch keeps MNE's events unique
        samples = np.arange(n) * (times.size + 1)
    events = np.stack([samples, np.zeros(n, int), [event_id[c] for c in conditions]], axis=1)
    metadata = pd.DataFrame(
        {
            name: [str(v) if ds[name].dtype.kind in "OUT" else v for v in ds[name].values]
            for name in ("condition", "stimulus", "onset", "event_index")
            if name in ds.coords and ds[name].dims == ("epoch",)
        }
    )
    data = np.asarray(ds["epochs"].values, dtype=np.float64)
    return mne.EpochsArray(
        data,
        info,
        events=events,
        tmin=float(times[0]),
        event_id=event_id,
        metadata=metadata if len(metadata.columns) else None,
        verbose="error",
    )


def export_epochs(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write an EEG epochs store as MNE ``-epo.fif`` and its evoked responses as ``-ave.fif``.

    Parameters
    ----------
    store : path-like
        Store of the ``preprocess_eeg`` stage: ``epochs`` (epoch, channel, time) in
        volts, coordinates ``channel``, ``time`` (s) and per-epoch ``condition``,
        ``onset`` (s), the attributes ``sfreq`` and ``entities``.
    output : path-like
        Root of the derivatives folder; files go to ``sub-<s>/eeg/``.

    Returns
    -------
    paths : list of Path
        The epochs file, then the evoked file (one ``mne.Evoked`` per condition).
    """
    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    entities = dict(ds.attrs.get("entities") or {})
    subject = entities.get("subject") or "unknown"
    stem = "_".join(
        f"{key}-{_label(entities[name])}"
        for key, name in (("sub", "subject"), ("ses", "session"), ("task", "task"), ("run", "run"))
        if entities.get(name) not in (None, "")
    )
    folder = output / f"sub-{_label(subject)}" / "eeg"
    epochs = _epochs_array(ds, store)
    epo = _claim(folder / f"{stem}_proc-clean_epo.fif", claimed, store)
    epochs.save(epo, overwrite=True, verbose="error")
    ave = _claim(folder / f"{stem}_proc-clean_ave.fif", claimed, store)
    import mne

    evokeds = [epochs[name].average() for name in epochs.event_id]
    for evoked, name in zip(evokeds, epochs.event_id, strict=True):
        evoked.comment = name
    mne.write_evokeds(ave, evokeds, overwrite=True, verbose="error")
    about = {
        **_origin(store, ds),
        "Subject": subject,
        "SamplingFrequency": float(ds.attrs["sfreq"]),
    }
    _write_json(epo.with_suffix(".json"), {**about, "Description": "cleaned epochs (volts)"})
    _write_json(
        ave.with_suffix(".json"),
        {
            **about,
            "Description": "evoked response per condition",
            "Conditions": list(epochs.event_id),
        },
    )
    return [epo, ave]


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
    if fmt not in ("npy", "h5"):
        raise ValueError(f"`fmt` must be 'npy' or 'h5', got {fmt!r} instead.")
    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    if "features" not in ds or ds["features"].dims != ("stimulus", "feature"):
        raise ValueError(f"{store}: a feature store must have `features` (stimulus, feature).")
    name = str(ds.attrs.get("feature_set") or store.parent.name.rsplit("-", 1)[0])
    folder = output / "features" / name
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
        path = _claim(folder / f"{store.stem}.npy", claimed, store)
        np.save(path, values)
        tsv = path.with_name(f"{store.stem}_stimuli.tsv")
        tsv.write_text("stimulus\n" + "".join(f"{s}\n" for s in stimuli))
        _write_json(path.with_suffix(".json"), about)
        return [path, tsv]
    import h5py

    path = _claim(folder / f"{store.stem}.h5", claimed, store)
    with h5py.File(path, "w") as f:
        f.create_dataset("features", data=values)
        f.create_dataset(
            "stimulus", data=np.array(stimuli, dtype=object), dtype=h5py.string_dtype()
        )
        f.create_dataset("feature", data=np.asarray(ds["feature"].values))
        f.attrs["neuroflow"] = json.dumps(about, default=str)
    _write_json(path.with_suffix(".json"), about)
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
    table = summary_dir / "scores.tsv"
    if not table.is_file():
        raise FileNotFoundError(f"{summary_dir} holds no scores.tsv.")
    ds = open_dataset(summary_dir / "scores.zarr")
    path = _claim(output / "summary" / "scores.tsv", claimed, summary_dir)
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
    sidecar = _write_json(
        path.with_suffix(".json"), {**_origin(summary_dir / "scores.zarr", ds), **columns}
    )
    return [path, sidecar]


def _stores_of(roots: Iterable[Path], stages: Sequence[str]) -> list[tuple[Path, xr.Dataset]]:
    """Stores under ``roots`` (results folders or stores) of the given stages, opened."""
    out = []
    for root in roots:
        candidates = [root] if (root / "zarr.json").is_file() else find_stores(root)
        for store in candidates:
            if store.suffix != ".zarr":
                continue
            ds = open_dataset(store)
            stage = str((ds.attrs.get(PROVENANCE_KEY) or {}).get("stage", "")).split("/")[0]
            if stage in stages:
                out.append((store, ds))
    return out


def export_results(
    roots: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    kinds: Sequence[str] = tuple(EXPORT_KINDS),
    features_format: str = "npy",
) -> dict[str, list[Path]]:
    """Export every store of the chosen kinds found under ``roots``.

    Parameters
    ----------
    roots : list of path-like
        Results folders, stage or version folders, or stores.
    output : path-like
        Export folder (created).
    kinds : list of str
        Among :data:`EXPORT_KINDS`.
    features_format : ``"npy"`` | ``"h5"``
        See :func:`export_features`.

    Returns
    -------
    written : dict of str to list of Path
        The files written, per kind.

    Raises
    ------
    ValueError
        For an unknown kind, or when two stores (two versions of one model) would
        write the same file.
    """
    unknown = sorted(set(kinds) - set(EXPORT_KINDS))
    if unknown:
        raise ValueError(f"`kinds` must be among {list(EXPORT_KINDS)}, got {unknown} instead.")
    roots = [Path(r) for r in roots]
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist.")
    output = Path(output)
    claimed: dict[Path, Path] = {}
    written: dict[str, list[Path]] = {}
    for kind in kinds:
        stores = _stores_of(roots, EXPORT_KINDS[kind])
        files: list[Path] = []
        for store, ds in stores:
            if kind == "maps":
                if not all(c in ds.coords for c in "ijk"):
                    continue  # parcels or channels: no voxel grid to map onto
                files += export_score_maps(store, output, _claimed=claimed)
            elif kind == "epochs":
                if store.name.endswith("_epo.zarr"):
                    files += export_epochs(store, output, _claimed=claimed)
            elif kind == "features":
                files += export_features(store, output, fmt=features_format, _claimed=claimed)
            elif store.name == "scores.zarr":
                files += export_summary(store.parent, output, _claimed=claimed)
        written[kind] = files
    return written

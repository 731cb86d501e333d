"""Export stores in the file formats of the field, each with the version it came from.

- Voxel-wise score stores (``evaluation``, ``trial_evaluation``) become NIfTI statistical
  maps with BIDS-derivatives names, e.g.
  ``sub-01/func/sub-01_task-movie_model-visual_stat-r_statmap.nii.gz``; ``stat`` is
  ``r``, ``rnormalized`` or ``p``, and ``desc-fdr`` maps keep only the voxels
  significant after FDR (0 elsewhere). Undefined scores stay NaN; units are mm and s,
  and the qform equals the sform (code 4, MNI, for an ``MNI*`` space, else 1, scanner).
- EEG epochs stores (``preprocess_eeg``) become MNE ``-epo.fif`` files, with the
  evoked response of each condition in one ``-ave.fif``; ``info["highpass"]`` and
  ``info["lowpass"]`` hold the pass band the stage applied.
- EEG score stores (``eeg_evaluation``: channel x latency) become an MNE evoked file of
  ``r`` whose comment names the model, and a long-format TSV of every score.
- Decoding and RSA stores become long-format TSVs (``variable``, one column per dim,
  ``value``).
- Feature stores become one ``.npy`` (stimulus, feature) per layer, with the stimulus
  order in a TSV beside it, or one HDF5 file (``--features-format h5``).
- The summary becomes ``scores.tsv`` with a JSON sidecar that describes its columns.

Every exported file has a JSON sidecar (BIDS style) naming the store it came from
(relative to the results folder), its stage and version, and what the file holds. The
dataset's entities (subject, session, task, run) are BIDS labels (alphanumeric); a
model's label is its name in file-system-safe form (:func:`neuroflow.names.file_form`,
``model-efficientnet__blocks.7``), the spelling it has in every other file name, which
a strict BIDS label (alphanumeric only) would change. The export
folder gets a BIDS ``dataset_description.json`` (``DatasetType: derivative``) whose
``GeneratedBy`` names neuroflow, its version and the stage versions exported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import PARTIAL_MARKER, PROVENANCE_KEY, find_stores, open_dataset
from neuroflow.names import file_form

__all__ = [
    "EXPORT_KINDS",
    "export_eeg_scores",
    "export_epochs",
    "export_features",
    "export_results",
    "export_score_maps",
    "export_summary",
    "export_table",
    "filter_band",
    "nifti_space_code",
    "results_relative",
    "results_table",
    "write_dataset_description",
]

#: What :func:`export_results` can export, by the stage folder it reads.
EXPORT_KINDS = {
    "maps": ("evaluation", "trial_evaluation"),
    "epochs": ("preprocess_eeg",),
    "eeg_scores": ("eeg_evaluation", "evaluation"),
    "tables": ("decoding", "decoding_fmri", "decoding_cross_subject", "rsa"),
    "features": ("features",),
    "summary": ("summary",),
}

#: Name of the BIDS file that describes an export folder (written at its root).
DATASET_DESCRIPTION = "dataset_description.json"
#: BIDS version the exported folders follow.
BIDS_VERSION = "1.10.0"
#: NIfTI ``qform_code``/``sform_code``: 1 scanner (native) space, 4 MNI space.
NIFTI_SCANNER, NIFTI_MNI = 1, 4
#: Largest variable (in values) that a results table holds; larger ones are listed in
#: the sidecar's ``SkippedVariables`` (the store keeps them).
TABLE_MAX_VALUES = 2_000_000

#: Score variable -> BIDS ``stat`` label of the exported map.
MAP_STATISTICS = {"r": "r", "r_normalized": "rnormalized", "p_value": "p"}


def _label(text: Any) -> str:
    """A BIDS label: the alphanumeric characters of ``text``.

    Used for the dataset's own entities (subject, session, task, run); a model's name
    keeps its file-system-safe form instead (:func:`neuroflow.names.file_form`), the
    one spelling a layer model has in every file name.
    """
    return re.sub(r"[^A-Za-z0-9]", "", str(text)) or "x"


def results_relative(path: Path, stage: str | None) -> str:
    """``path`` from its results folder on (``evaluation/m-abc/x.zarr``), when it lies there.

    Parameters
    ----------
    path : Path
        A store (or summary folder) inside ``<results_dir>/<stage>/<version>/``.
    stage : str | None
        The stage that wrote it (``evaluation/m`` names the folder ``evaluation``).

    Returns
    -------
    path : str
        The path relative to the results folder (POSIX separators), or ``path`` as
        given when no folder of that stage is among its parents.
    """
    folder = str(stage or "").split("/")[0]
    parts = Path(path).parts
    if folder and folder in parts[:-1]:
        start = len(parts) - 1 - parts[:-1][::-1].index(folder) - 1
        return Path(*parts[start:]).as_posix()
    return str(path)


def _origin(path: Path, ds: xr.Dataset) -> dict[str, Any]:
    """Sidecar fields naming the store a file came from (relative to the results folder)."""
    record = ds.attrs.get(PROVENANCE_KEY) or {}
    return {
        "Sources": [results_relative(path, record.get("stage"))],
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
    return path


def _sidecar(path: Path) -> Path:
    """The JSON sidecar of an exported file (``x.nii.gz`` -> ``x.json``)."""
    name = path.name
    return path.with_name(
        name.removesuffix(".nii.gz") + ".json" if name.endswith(".nii.gz") else path.stem + ".json"
    )


def _task(ds: xr.Dataset) -> str | None:
    """The task of the runs a score store was tested on, when there is one."""
    runs = [str(r) for r in ds.attrs.get("test_runs") or []]
    tasks = {m.group(1) for r in runs if (m := re.search(r"task-([A-Za-z0-9]+)", r))}
    return tasks.pop() if len(tasks) == 1 else None


def nifti_space_code(attrs: Mapping[str, Any]) -> int:
    """The NIfTI ``qform_code``/``sform_code`` of a score store's grid.

    Parameters
    ----------
    attrs : dict
        The store's attributes: ``space`` (a BIDS space label), ``entities["space"]``
        or ``space-<label>`` in the names of ``test_runs``.

    Returns
    -------
    code : int
        :data:`NIFTI_MNI` (4) for a space whose label starts with ``MNI``, else
        :data:`NIFTI_SCANNER` (1): the grid of the recordings.
    """
    labels = [attrs.get("space"), dict(attrs.get("entities") or {}).get("space")]
    labels += [
        m.group(1)
        for run in attrs.get("test_runs") or []
        if (m := re.search(r"space-([A-Za-z0-9]+)", str(run)))
    ]
    mni = any(str(label).upper().startswith("MNI") for label in labels if label)
    return NIFTI_MNI if mni else NIFTI_SCANNER


def _set_grid(img: Any, affine: np.ndarray, code: int) -> None:
    """Give a NIfTI image the same qform and sform, and units of mm and s."""
    img.set_qform(affine, code=code)
    img.set_sform(affine, code=code)
    img.header.set_xyzt_units("mm", "sec")


#: Entities of the FDR-thresholded map (r where significant, 0 elsewhere).
_FDR_MAP = "desc-fdr_stat-r"


def _map_plan(store: Path, ds: xr.Dataset, output: Path) -> list[tuple[Path, str]]:
    """The maps of a score store: each file and the variable it holds (or :data:`_FDR_MAP`).

    Raises
    ------
    ValueError
        When the store lacks the voxel indices or the attributes a map needs.
    """
    missing = [c for c in ("i", "j", "k") if c not in ds.coords]
    missing += [a for a in ("affine", "mask_shape", "subject", "model") if a not in ds.attrs]
    if missing:
        raise ValueError(
            f"{store}: a score map needs the voxel indices i, j, k and the attributes affine, "
            f"mask_shape, subject and model, got none of {missing} instead."
        )
    subject = _label(ds.attrs["subject"])
    task = _task(ds)
    stem = f"sub-{subject}" + (f"_task-{_label(task)}" if task else "")
    stem += f"_model-{file_form(ds.attrs['model'])}"
    folder = output / f"sub-{subject}" / "func"
    maps = [
        (f"stat-{stat}", variable) for variable, stat in MAP_STATISTICS.items() if variable in ds
    ]
    if "significant" in ds and "r" in ds:
        maps.append((_FDR_MAP, _FDR_MAP))
    return [(folder / f"{stem}_{entities}_statmap.nii.gz", what) for entities, what in maps]


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
    from neuroflow.io.files import scores_to_nifti

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    planned = _map_plan(store, ds, output)
    ijk = np.stack([np.asarray(ds[c].values, dtype=np.int64) for c in "ijk"], axis=1)
    affine = np.asarray(
        json.loads(ds.attrs["affine"])
        if isinstance(ds.attrs["affine"], str)
        else ds.attrs["affine"]
    )
    code = nifti_space_code(ds.attrs)
    about = {
        **_origin(store, ds),
        "Subject": str(ds.attrs["subject"]),
        "Model": str(ds.attrs["model"]),
        "FeatureSpaces": list(ds.attrs.get("feature_spaces") or []),
        "Layer": ds.attrs.get("layer"),
        "TestRuns": list(ds.attrs.get("test_runs") or []),
        "NPermutations": ds.attrs.get("n_permutations"),
        "FDRAlpha": ds.attrs.get("fdr_alpha"),
    }
    out = []
    for path, what in planned:
        _claim(path, claimed, store)
        if what == _FDR_MAP:
            significant = np.asarray(ds["significant"].values, bool)
            r = np.asarray(ds["r"].values, np.float64)
            values = np.where(significant | np.isnan(r), r, 0.0)
            what = "r where significant after FDR, else 0 (n/a where r is undefined)"
        else:
            values = np.asarray(ds[what].values, np.float64)
        img = scores_to_nifti(
            values, ijk, affine=affine, mask_shape=ds.attrs["mask_shape"], undefined=np.nan
        )
        _set_grid(img, affine, code)
        path.parent.mkdir(parents=True, exist_ok=True)
        img.to_filename(path)
        _write_json(_sidecar(path), {**about, "Statistic": what})
        out.append(path)
    return out


def _epochs_plan(store: Path, ds: xr.Dataset, output: Path) -> tuple[Path, Path]:
    """The ``-epo.fif`` and ``-ave.fif`` files of an epochs store.

    Raises
    ------
    ValueError
        When the store has no ``epochs`` (epoch, channel, time).
    """
    if "epochs" not in ds or ds["epochs"].dims != ("epoch", "channel", "time"):
        raise ValueError(
            f"{store}: an EEG epochs store must have `epochs` (epoch, channel, time), got "
            f"{ds['epochs'].dims if 'epochs' in ds else 'no such variable'} instead."
        )
    entities = dict(ds.attrs.get("entities") or {})
    subject = entities.get("subject") or "unknown"
    stem = "_".join(
        f"{key}-{_label(entities[name])}"
        for key, name in (("sub", "subject"), ("ses", "session"), ("task", "task"), ("run", "run"))
        if entities.get(name) not in (None, "")
    )
    folder = output / f"sub-{_label(subject)}" / "eeg"
    return folder / f"{stem}_proc-clean_epo.fif", folder / f"{stem}_proc-clean_ave.fif"


def filter_band(attrs: Mapping[str, Any], sfreq: float) -> tuple[float, float]:
    """The pass band the ``preprocess_eeg`` stage applied, as MNE's ``info`` records it.

    Parameters
    ----------
    attrs : dict
        Attributes of an epochs store: ``filters`` (``l_freq``, ``h_freq`` in Hz, None
        when not applied), else the ``l_freq``/``h_freq`` of the provenance's config.
    sfreq : float
        Sampling frequency of the stored data (Hz).

    Returns
    -------
    highpass, lowpass : float
        In Hz; 0 and the Nyquist frequency where no filter is known to be applied.
    """
    filters = attrs.get("filters")
    if not isinstance(filters, Mapping):
        filters = dict((attrs.get(PROVENANCE_KEY) or {}).get("config") or {})
    nyquist = sfreq / 2
    l_freq, h_freq = filters.get("l_freq"), filters.get("h_freq")
    highpass = float(l_freq) if l_freq is not None else 0.0
    lowpass = min(float(h_freq), nyquist) if h_freq is not None else nyquist
    return highpass, lowpass


def _info(ds: xr.Dataset, sfreq: float) -> Any:
    """An ``mne.Info`` of a store's ``channel`` (types, bad channels, positions)."""
    import mne

    channels = [str(c) for c in ds["channel"].values]
    types = [str(t) for t in ds["ch_type"].values] if "ch_type" in ds.coords else "eeg"
    info = mne.create_info(channels, sfreq, ch_types=types)
    info["bads"] = [c for c in ds.attrs.get("bad_channels") or [] if c in channels]
    if all(f"ch_{a}" in ds.coords for a in "xyz"):
        pos = np.stack([np.asarray(ds[f"ch_{a}"].values, float) for a in "xyz"], axis=1)
        if np.isfinite(pos).all():
            montage = mne.channels.make_dig_montage(
                dict(zip(channels, pos, strict=True)), coord_frame="head"
            )
            info.set_montage(montage, on_missing="ignore")
    return info


def _epochs_array(ds: xr.Dataset, store: Path) -> Any:
    """An ``mne.EpochsArray`` of an epochs store (data in volts, times in seconds)."""
    import mne

    info = _info(ds, float(ds.attrs["sfreq"]))
    highpass, lowpass = filter_band(ds.attrs, info["sfreq"])
    # MNE sets the band through its filters only; the store's data were filtered already
    with info._unlock():
        info["highpass"], info["lowpass"] = highpass, lowpass
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
    import mne

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    epo, ave = (_claim(path, claimed, store) for path in _epochs_plan(store, ds, output))
    subject = dict(ds.attrs.get("entities") or {}).get("subject") or "unknown"
    epochs = _epochs_array(ds, store)
    epo.parent.mkdir(parents=True, exist_ok=True)
    epochs.save(epo, overwrite=True, verbose="error")

    evokeds = [epochs[name].average() for name in epochs.event_id]
    for evoked, name in zip(evokeds, epochs.event_id, strict=True):
        evoked.comment = name
    mne.write_evokeds(ave, evokeds, overwrite=True, verbose="error")
    about = {
        **_origin(store, ds),
        "Subject": subject,
        "SamplingFrequency": float(ds.attrs["sfreq"]),
    }
    _write_json(_sidecar(epo), {**about, "Description": "cleaned epochs (volts)"})
    _write_json(
        _sidecar(ave),
        {
            **about,
            "Description": "evoked response per condition",
            "Conditions": list(epochs.event_id),
        },
    )
    return [epo, ave]


def _eeg_scores_plan(store: Path, ds: xr.Dataset, output: Path) -> list[Path] | None:
    """The ``-ave.fif`` (when the latencies are evenly spaced) and TSV of an EEG score store.

    None when the store holds no ``r`` on (channel, latency): not an EEG score store.
    """
    if "r" not in ds or set(ds["r"].dims) != {"channel", "latency"}:
        return None
    subject = _label(ds.attrs.get("subject") or "unknown")
    stem = f"sub-{subject}_model-{file_form(ds.attrs.get('model') or store.stem)}"
    if ds.attrs.get("layer") not in (None, ""):
        stem += f"_layer-{file_form(ds.attrs['layer'])}"
    folder = output / f"sub-{subject}" / "eeg"
    tsv = folder / f"{stem}_scores.tsv"
    return [tsv] if _latency_sfreq(ds) is None else [folder / f"{stem}_stat-r_ave.fif", tsv]


def _latency_sfreq(ds: xr.Dataset) -> float | None:
    """Sampling frequency of evenly spaced latencies (s), None otherwise."""
    latency = np.asarray(ds["latency"].values, dtype=np.float64)
    step = np.diff(latency)
    if step.size == 0 or step[0] <= 0 or not np.allclose(step, step[0], rtol=1e-3, atol=0):
        return None
    return float(1.0 / step[0])


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


def export_eeg_scores(
    store: str | os.PathLike, output: str | os.PathLike, *, _claimed: dict | None = None
) -> list[Path]:
    """Write an EEG score store (channel x latency) as an MNE evoked file and a TSV.

    Parameters
    ----------
    store : path-like
        Store of the ``eeg_evaluation`` stage: ``r`` (and the other scores) on
        (channel, latency), latency in seconds, attributes ``subject`` and ``model``.
    output : path-like
        Root of the derivatives folder; files go to ``sub-<s>/eeg/``.

    Returns
    -------
    paths : list of Path
        ``..._stat-r_ave.fif``: one ``mne.Evoked`` of ``r`` (channel x latency; MNE
        reads the values as volts, they are correlations) whose comment names the
        model, written when the latencies are evenly spaced; then
        ``..._scores.tsv``: every score per channel and latency (long format).
    """
    import mne

    store, output = Path(store), Path(output)
    claimed = {} if _claimed is None else _claimed
    ds = open_dataset(store)
    planned = _eeg_scores_plan(store, ds, output)
    if planned is None:
        raise ValueError(
            f"{store}: an EEG score store must have `r` on (channel, latency), got "
            f"{ds['r'].dims if 'r' in ds else 'no such variable'} instead."
        )
    for path in planned:
        _claim(path, claimed, store)
    planned[0].parent.mkdir(parents=True, exist_ok=True)
    name = str(ds.attrs.get("model") or store.stem)
    if ds.attrs.get("layer") not in (None, ""):
        name += f" ({ds.attrs['layer']})"
    about = {**_origin(store, ds), "Subject": ds.attrs.get("subject"), "Model": name}
    table, skipped = results_table(ds, ("channel", "latency"))
    tsv = _write_table(planned[-1], table)
    columns = {
        "variable": "score (see Variables)",
        "channel": "EEG channel",
        "latency": "latency from stimulus onset (s)",
        "value": "the score's value",
    }
    _write_json(
        _sidecar(tsv),
        {
            **about,
            "Columns": columns,
            "Variables": _described(ds, table["variable"].unique()),
            "SkippedVariables": skipped,
        },
    )
    sfreq = _latency_sfreq(ds)
    if sfreq is None:
        return [tsv]
    r = ds["r"].transpose("channel", "latency")
    evoked = mne.EvokedArray(
        np.asarray(r.values, dtype=np.float64),
        _info(ds, sfreq),
        tmin=float(ds["latency"].values[0]),
        comment=name,
        nave=1,
        verbose="error",
    )
    evoked.save(planned[0], overwrite=True, verbose="error")
    _write_json(
        _sidecar(planned[0]),
        {**about, "Description": "encoding r per channel and latency (unitless, not volts)"},
    )
    return [planned[0], tsv]


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


def stage_versions_of(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The distinct stage, version and format version of provenance records, sorted."""
    seen = {
        (str(r.get("stage")), str(r.get("version")), r.get("format_version"))
        for r in records
        if r.get("stage")
    }
    return [
        {"Stage": stage, "Version": version, "FormatVersion": fmt}
        for stage, version, fmt in sorted(seen, key=lambda t: (t[0], t[1]))
    ]


def _our_description(path: Path) -> dict[str, Any] | None:
    """An existing ``dataset_description.json`` that neuroflow wrote (merged, not a clash)."""
    if not path.is_file():
        return None
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    generated = content.get("GeneratedBy") if isinstance(content, dict) else None
    ours = isinstance(generated, list) and generated and isinstance(generated[0], dict)
    return content if ours and generated[0].get("Name") == "neuroflow" else None


def write_dataset_description(
    folder: str | os.PathLike,
    records: Iterable[Mapping[str, Any]],
    *,
    earlier: Mapping[str, Any] | None = None,
) -> Path:
    """Write the BIDS ``dataset_description.json`` of an exported derivatives folder.

    Parameters
    ----------
    folder : path-like
        The export folder.
    records : iterable of dict
        Provenance records of the exported stores; their stages and versions go to
        ``GeneratedBy[0]["Stages"]``.
    earlier : dict | None
        The description of an earlier export into the same folder, whose stages are kept.

    Returns
    -------
    path : Path
    """
    import neuroflow

    earlier_stages = []
    if earlier is not None:
        earlier_stages = list(earlier["GeneratedBy"][0].get("Stages") or [])
    stages = stage_versions_of(
        [
            *records,
            *(
                {
                    "stage": s.get("Stage"),
                    "version": s.get("Version"),
                    "format_version": s.get("FormatVersion"),
                }
                for s in earlier_stages
                if isinstance(s, Mapping)
            ),
        ]
    )
    listed = ", ".join(f"{s['Stage']} {s['Version']}" for s in stages)
    content = {
        "Name": "neuroflow results",
        "BIDSVersion": BIDS_VERSION,
        "DatasetType": "derivative",
        "GeneratedBy": [
            {
                "Name": "neuroflow",
                "Version": neuroflow.__version__,
                "Description": f"Exported by `neuroflow export` from the stages {listed}.",
                "Stages": stages,
            }
        ],
    }
    return _write_json(Path(folder) / DATASET_DESCRIPTION, content)


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


def _planned_files(
    kind: str, store: Path, ds: xr.Dataset, output: Path, features_format: str
) -> list[Path] | None:
    """Every file one store of ``kind`` writes under ``output`` (None: nothing to export).

    Reads attributes only; raises the refusals of the exporters (a store that lacks
    what its export needs) before anything is written.
    """
    if kind == "maps":
        if not all(c in ds.coords for c in "ijk"):
            return None  # parcels or channels: no voxel grid to map onto
        maps = [path for path, _ in _map_plan(store, ds, output)]
        return [f for path in maps for f in (path, _sidecar(path))]
    if kind == "epochs":
        if not store.name.endswith("_epo.zarr"):
            return None
        return [f for path in _epochs_plan(store, ds, output) for f in (path, _sidecar(path))]
    if kind == "eeg_scores":
        paths = _eeg_scores_plan(store, ds, output)
        return None if paths is None else [f for p in paths for f in (p, _sidecar(p))]
    if kind == "tables":
        path = _table_plan(store, ds, output)
        return [path, _sidecar(path)]
    if kind == "features":
        path = _features_plan(store, ds, output, features_format)
        extra = [_stimuli_tsv(path)] if features_format == "npy" else []
        return [path, *extra, _sidecar(path)]
    if store.name != "scores.zarr":
        return None
    _summary_table(store.parent)
    table = output / "summary" / "scores.tsv"
    return [table, _sidecar(table)]


def _export_one(kind: str, store: Path, output: Path, features_format: str) -> list[Path]:
    """Write one store's export under ``output``; the files :func:`_planned_files` names."""
    if kind == "maps":
        return export_score_maps(store, output)
    if kind == "epochs":
        return export_epochs(store, output)
    if kind == "eeg_scores":
        return export_eeg_scores(store, output)
    if kind == "tables":
        return export_table(store, output)
    if kind == "features":
        return export_features(store, output, fmt=features_format)
    return export_summary(store.parent, output)


def _check_output(output: Path, planned: Sequence[Path], *, overwrite: bool) -> None:
    """Refuse an output that is a file, or one that holds files the export would replace."""
    if output.exists() and not output.is_dir():
        raise ValueError(
            f"The export folder (--output) must be a new or existing folder, got the file "
            f"{output} instead."
        )
    clashes = [path for path in planned if path.exists() or path.is_symlink()]
    if not clashes or overwrite:
        return
    shown = ", ".join(str(p.relative_to(output)) for p in clashes[:3])
    more = f" and {len(clashes) - 3} more" if len(clashes) > 3 else ""
    raise FileExistsError(
        f"{output} already holds {len(clashes)} of the {len(planned)} files this export "
        f"would write ({shown}{more}): choose a new folder, or pass --force "
        "(`overwrite=True`) to replace them. Nothing was written."
    )


def _move_into_place(staging: Path, output: Path) -> None:
    """Move the files written under ``staging`` to the same places under ``output``."""
    if not output.exists():
        os.replace(staging, output)  # the whole export appears at once
        return
    for path in sorted(staging.rglob("*")):
        if path.is_dir():
            continue
        target = output / path.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)


def export_results(
    roots: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    kinds: Sequence[str] = tuple(EXPORT_KINDS),
    features_format: str = "npy",
    overwrite: bool = False,
) -> dict[str, list[Path]]:
    """Export every store of the chosen kinds found under ``roots``.

    Every refusal is decided before anything is written. The files are written into a
    hidden sibling folder of ``output`` and moved into place at the end, so an export
    that fails leaves ``output`` as it was.

    Parameters
    ----------
    roots : list of path-like
        Results folders, stage or version folders, or stores.
    output : path-like
        Export folder (created when missing).
    kinds : list of str
        Among :data:`EXPORT_KINDS`.
    features_format : ``"npy"`` | ``"h5"``
        See :func:`export_features`.
    overwrite : bool
        Replace files of ``output`` that the export writes again (otherwise refused).

    Returns
    -------
    written : dict of str to list of Path
        The files written, per kind, as the exporters return them (the sidecars of
        maps, epochs and features lie beside them).

    Raises
    ------
    ValueError
        For an unknown kind, an ``output`` that is a file, a store that lacks what its
        export needs, or when two stores (two versions of one model) would write the
        same file.
    FileExistsError
        When ``output`` already holds a file the export would write and ``overwrite``
        is False.
    """
    unknown = sorted(set(kinds) - set(EXPORT_KINDS))
    if unknown:
        raise ValueError(f"`kinds` must be among {list(EXPORT_KINDS)}, got {unknown} instead.")
    if features_format not in ("npy", "h5"):
        raise ValueError(f"`fmt` must be 'npy' or 'h5', got {features_format!r} instead.")
    roots = [Path(r) for r in roots]
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"{root} does not exist.")
    output = Path(output)
    _check_output(output, [], overwrite=overwrite)
    claimed: dict[Path, Path] = {}
    jobs: dict[str, list[Path]] = {}
    stages: list[Mapping[str, Any]] = []
    for kind in kinds:
        jobs[kind] = []
        for store, ds in _stores_of(roots, EXPORT_KINDS[kind]):
            planned = _planned_files(kind, store, ds, output, features_format)
            if planned is None:
                continue
            for path in planned:
                _claim(path, claimed, store.parent if kind == "summary" else store)
            jobs[kind].append(store)
            stages.append(ds.attrs.get(PROVENANCE_KEY) or {})
    description = output / DATASET_DESCRIPTION
    earlier = _our_description(description)
    _check_output(
        output, [*claimed, *([description] if earlier is None else [])], overwrite=overwrite
    )
    if not claimed:
        return {kind: [] for kind in jobs}
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = output.with_name(f".{output.name}{PARTIAL_MARKER}{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        written = {
            kind: [
                output / path.relative_to(staging)
                for store in stores
                for path in _export_one(kind, store, staging, features_format)
            ]
            for kind, stores in jobs.items()
        }
        write_dataset_description(staging, stages, earlier=earlier)
        _move_into_place(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written

"""Stage entry point: pass a pool of new stimuli through a stored encoding model.

:func:`predict_stimulus_set` reads the extraction stores of a stimulus set (one per
feature space of the encoder, ``features`` (stimulus, feature)), streams them through
the encoder in batches (:func:`neuroflow.insilico.response.predict_pool`) and writes,
next to each other:

- ``<name>.zarr``: ``roi_response`` (stimulus, roi), the mean predicted response of
  each region; ``response`` (stimulus, voxel) with ``keep_voxels`` (with the
  encoder's target coordinates, its ``roi`` labels renamed ``voxel_roi``); the responses of
  the targets ranked on request (``tracked_response`` (stimulus, tracked)); and the
  distribution of each region's responses over the pool (``roi_mean``, ``roi_std``,
  ``roi_skewness``, ``roi_tail_ratio`` (roi), ``roi_quantile`` (roi, quantile));
- ``<name>_ranking.tsv``: the top-k and bottom-k stimuli of each region (and target on
  request), see :func:`neuroflow.insilico.ranking.ranking_table`;
- ``<name>_contact_sheets/<roi>.png``: the top and bottom stimuli of each region.

For a time-series (FIR or HRF) model the response is the steady state of the stimulus
held on, without the fit's design filtering (see :mod:`neuroflow.insilico.response`).
Everything is written atomically; the store comes last.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import (
    PROVENANCE_KEY,
    atomic_directory,
    atomic_file,
    open_dataset,
    write_dataset,
)
from neuroflow.features.align import features_for_stimuli
from neuroflow.insilico.contact_sheet import contact_sheet
from neuroflow.insilico.ranking import QUANTILES, rank_stimuli, ranking_table, tail_statistics
from neuroflow.insilico.response import check_encoder, encoder_spaces, predict_pool

__all__ = [
    "distribution_variables",
    "pool_settings",
    "predict_pool_stage",
    "predict_stimulus_set",
    "target_positions",
    "write_rankings",
]

_SKEWNESS = "scipy.stats.skew(bias=False), adjusted Fisher-Pearson G1"
_TAIL_RATIO = (
    "mean distance below the median of the lowest ceil(tail * n) responses over the mean "
    "distance above the median of the highest ceil(tail * n)"
)


def _open_features(
    feature_stores: Mapping[str, str | os.PathLike], spaces: Sequence[str]
) -> dict[str, xr.Dataset]:
    """Open the extraction store of every space of the encoder, checking its layout."""
    missing = [s for s in spaces if s not in feature_stores]
    if missing:
        raise ValueError(
            f"feature_stores must hold every feature space of the encoder {list(spaces)}, got "
            f"{sorted(feature_stores)} instead (missing {missing})."
        )
    stores: dict[str, xr.Dataset] = {}
    for space in spaces:
        path = Path(feature_stores[space])
        ds = open_dataset(path)
        if "features" not in ds or ds["features"].dims != ("stimulus", "feature"):
            dims = ds["features"].dims if "features" in ds else None
            raise ValueError(
                f"{path}: the store of space {space!r} must have `features` with dims "
                f"(stimulus, feature), got {dims} instead."
            )
        unit = ds.attrs.get("row_unit") or "stimulus"
        if unit != "stimulus":
            raise ValueError(
                f"{path}: the store of space {space!r} must hold one row per stimulus "
                f"(row_unit 'stimulus'), got row_unit {unit!r} instead."
            )
        stores[space] = ds
    return stores


def _pool_ids(ds: xr.Dataset) -> list[str]:
    """Stimulus ids of the pool: one per distinct file (the ``canonical_stimulus`` rows)."""
    ids = [str(s) for s in ds["stimulus"].values]
    if "canonical_stimulus" in ds.coords:
        first = [str(s) for s in ds["canonical_stimulus"].values]
        ids = [i for i, f in zip(ids, first, strict=True) if i == f]
    if not ids:
        raise ValueError("the stimulus set must hold at least one stimulus, got none instead.")
    return ids


def _batches(
    stores: Mapping[str, xr.Dataset], ids: Sequence[str], batch_size: int
) -> Iterator[tuple[list[str], dict[str, np.ndarray]]]:
    for start in range(0, len(ids), batch_size):
        chunk = list(ids[start : start + batch_size])
        yield chunk, {s: features_for_stimuli(ds, chunk) for s, ds in stores.items()}


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "roi"


def _write_table(table: pd.DataFrame, path: Path) -> Path:
    """Write a TSV atomically."""
    with atomic_file(path) as tmp:
        table.to_csv(tmp, sep="\t", index=False, na_rep="n/a", float_format="%.6g")
    return path


def _target_coords(encoder: xr.Dataset) -> dict[str, Any]:
    """The encoder's target coordinates; its ``roi`` labels become ``voxel_roi`` (the
    store's ``roi`` is the dimension of the regions)."""
    return {
        ("voxel_roi" if name == "roi" else name): (
            "voxel",
            np.asarray(coord.values),
            dict(coord.attrs),
        )
        for name, coord in encoder.coords.items()
        if coord.dims == ("voxel",)
    }


def _stimulus_labels(
    ids: Sequence[str],
    modality: str,
    stimuli_dir: str | os.PathLike | None,
    captions: Mapping[str, str] | None,
) -> tuple[str, list[str]]:
    """What a contact sheet shows per stimulus: image files, or text."""
    if modality == "image":
        root = Path(stimuli_dir) if stimuli_dir is not None else Path()
        return "image", [str(root / i) for i in ids]
    captions = dict(captions or {})
    return "text", [f"{i}: {captions[i]}" if i in captions else i for i in ids]


def target_positions(encoder_path: str | os.PathLike, dim: str, wanted: Sequence[Any]) -> list[int]:
    """Positions along ``dim`` of the targets a user asked to rank one by one.

    Parameters
    ----------
    encoder_path : path-like
        The encoding store.
    dim : {"voxel", "channel"}
        The targets' dimension.
    wanted : sequence
        Values of the ``dim`` coordinate (voxel ids, channel names).

    Returns
    -------
    positions : list of int
        In the order asked; a ValueError names any value the store does not have.
    """
    if not wanted:
        return []
    encoder = open_dataset(encoder_path)
    if dim not in encoder.coords:
        raise ValueError(
            f"{encoder_path}: predict.targets.{dim}s needs a `{dim}` coordinate, got a store "
            f"with dims {sorted(encoder.sizes)} instead."
        )
    values = [str(v) for v in encoder[dim].values]
    where = {v: i for i, v in enumerate(values)}
    missing = [v for v in wanted if str(v) not in where]
    if missing:
        shown = values[:8] + (["..."] if len(values) > 8 else [])
        raise ValueError(
            f"predict.targets.{dim}s must name {dim}s of {encoder_path} ({', '.join(shown)}), "
            f"got {missing} instead."
        )
    return [where[str(v)] for v in wanted]


def distribution_variables(
    region_response: np.ndarray, units: str, tail: float
) -> dict[str, tuple[tuple[str, ...], Any, dict[str, str]]]:
    """The pool's distribution of each region's responses, as store variables.

    Parameters
    ----------
    region_response : ndarray, shape (n_stimuli, n_rois)
        Predicted response of each stimulus in each region.
    units : str
        Units of the responses.
    tail : float
        Share of the pool in each tail of the tail ratio.

    Returns
    -------
    variables : dict
        ``roi_mean``, ``roi_std``, ``roi_skewness``, ``roi_tail_ratio`` (roi) and
        ``roi_quantile`` (roi, quantile), as ``(dims, values, attrs)``.
    """
    n_rois = region_response.shape[1]
    stats = [tail_statistics(region_response[:, j], tail=tail) for j in range(n_rois)]
    return {
        "roi_mean": (
            ("roi",),
            [s["mean"] for s in stats],
            {"units": units, "long_name": "mean over the pool"},
        ),
        "roi_std": (
            ("roi",),
            [s["std"] for s in stats],
            {"units": units, "long_name": "standard deviation over the pool (ddof=0)"},
        ),
        "roi_skewness": (
            ("roi",),
            [s["skewness"] for s in stats],
            {"units": "1", "long_name": _SKEWNESS},
        ),
        "roi_tail_ratio": (
            ("roi",),
            [s["tail_ratio"] for s in stats],
            {"units": "1", "long_name": f"suppressive-to-excitatory tail ratio: {_TAIL_RATIO}"},
        ),
        "roi_quantile": (
            ("roi", "quantile"),
            np.array([[s[f"q{q:g}"] for q in QUANTILES] for s in stats]).reshape(n_rois, -1),
            {"units": units, "long_name": "quantiles of the responses over the pool"},
        ),
    }


def write_rankings(
    regions: Mapping[str, np.ndarray],
    ids: np.ndarray,
    output: Path,
    *,
    k: int,
    title: str,
    shown: tuple[str, list[str]],
    tracked: Mapping[str, np.ndarray] | None = None,
    thumb: int = 96,
) -> None:
    """Write the contact sheet of every region, then the ranking TSV, beside ``output``.

    Parameters
    ----------
    regions : dict of str to ndarray, shape (n_stimuli,)
        Predicted response per region; each gets a contact sheet and table rows.
    ids : ndarray of str, shape (n_stimuli,)
        Stimulus ids.
    output : Path
        The store; ``<stem>_contact_sheets/<region>.png`` and ``<stem>_ranking.tsv``
        go next to it.
    k : int
        Stimuli per direction.
    title : str
        Start of each sheet's title (the region's name follows).
    shown : (str, list of str)
        What the sheets draw: ``("image", files)`` or ``("text", texts)``.
    tracked : dict of str to ndarray, shape (n_stimuli,) | None
        Targets ranked one by one: table rows only.
    thumb : int
        Thumbnail size in pixels.
    """
    kind, labels = shown
    stem = output.name.removesuffix(".zarr")
    with atomic_directory(output.parent / f"{stem}_contact_sheets") as tmp:
        for name, values in regions.items():
            ranking = rank_stimuli(values, ids, k)
            contact_sheet(
                [labels[i] for i in ranking.top_index],
                [labels[i] for i in ranking.bottom_index],
                f"{title}: {name}",
                tmp / f"{_file_name(name)}.png",
                thumb,
                kind=kind,
                top_values=ranking.top_values,
                bottom_values=ranking.bottom_values,
            )
    table = ranking_table({**regions, **(tracked or {})}, ids, k)
    _write_table(table, output.parent / f"{stem}_ranking.tsv")


def predict_stimulus_set(
    *,
    encoder_path: str | os.PathLike,
    feature_stores: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    k: int = 12,
    keep_voxels: bool = False,
    provenance: Mapping[str, Any],
    set_name: str | None = None,
    stimuli_dir: str | os.PathLike | None = None,
    captions: Mapping[str, str] | None = None,
    voxels: Sequence[int] | None = None,
    batch_size: int = 256,
    tail: float = 0.05,
    thumb: int = 96,
    modality: str | None = None,
) -> Path:
    """Predict the responses of one subject's encoder to a set of new stimuli.

    Parameters
    ----------
    encoder_path : path-like
        An encoding store with the fitted model (``results/encoding/...`` or
        ``results/trial_encoding/...``).
    feature_stores : dict of str to path-like
        Feature space to the extraction store of the stimulus set (variable
        ``features`` (stimulus, feature), one row per stimulus), extracted with the
        entries the encoder was fitted on. Every store must hold the ids of the first.
    output : path-like
        The store, conventionally ``results/predict/<model>-<v>/sub-XX_<set>.zarr``;
        the TSV and the contact sheets go next to it.
    k : int
        Stimuli per direction in the rankings.
    keep_voxels : bool
        Store the (stimulus, voxel) responses too.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    set_name : str | None
        Name of the stimulus set; None: the store's name after ``sub-XX_``.
    stimuli_dir : path-like | None
        Folder the stimulus ids are relative to (image thumbnails).
    captions : dict of str to str | None
        Text of each stimulus, for the text panels of non-image stimuli.
    voxels : sequence of int | None
        Positions of targets (voxels, parcels or channels) also ranked one by one.
    batch_size : int
        Stimuli per batch.
    tail : float
        Share of the pool in each tail of the tail ratio.
    thumb : int
        Thumbnail size of the contact sheets in pixels.
    modality : str | None
        ``"image"`` to draw the stimuli as images, ``"text"`` as their texts; None:
        the modality of the first feature store.

    Returns
    -------
    output : Path
    """
    output = Path(output)
    encoder = open_dataset(encoder_path)
    method = check_encoder(encoder)
    spaces = list(encoder_spaces(encoder))
    stores = _open_features(feature_stores, spaces)
    first = stores[spaces[0]]
    ids = _pool_ids(first)
    if set_name is None:
        stem = output.name.removesuffix(".zarr")
        set_name = stem.split("_", 1)[1] if stem.startswith("sub-") and "_" in stem else stem
    prediction = predict_pool(
        encoder,
        _batches(stores, ids, int(batch_size)),
        keep_voxels=keep_voxels,
        batch_size=int(batch_size),
        track=voxels,
    )
    rois = prediction.rois
    units = str(encoder["target_mean"].attrs.get("units", ""))
    tracked_names: list[str] = []
    tracked: dict[str, np.ndarray] = {}
    if prediction.tracked is not None:
        voxel_ids = np.asarray(encoder["voxel"].values)[np.asarray(list(voxels or []), int)]
        tracked_names = [f"voxel {v}" for v in voxel_ids]
        tracked = {n: prediction.tracked[:, j] for j, n in enumerate(tracked_names)}
    modality = modality or str(first.attrs.get("modality") or "image")
    write_rankings(
        {roi: prediction.roi_response[:, j] for j, roi in enumerate(rois)},
        prediction.ids,
        output,
        k=k,
        title=f"{encoder.attrs.get('model', '')} sub-{encoder.attrs.get('subject', '')} {set_name}",
        shown=_stimulus_labels(list(prediction.ids), modality, stimuli_dir, captions),
        tracked=tracked,
        thumb=thumb,
    )

    what = (
        "predicted single-trial response"
        if method == "none"
        else "predicted steady-state response to the stimulus held on"
    )
    coords: dict[str, Any] = {
        "stimulus": ("stimulus", prediction.ids.astype(object)),
        "roi": ("roi", np.array(rois, dtype=object)),
        "quantile": ("quantile", np.asarray(QUANTILES)),
    }
    data: dict[str, Any] = {
        "roi_response": (
            ("stimulus", "roi"),
            prediction.roi_response.astype(np.float32),
            {"units": units, "long_name": f"{what}, mean over the region's targets"},
        ),
        **distribution_variables(prediction.roi_response, units, tail),
    }
    if prediction.response is not None:
        coords.update(_target_coords(encoder))
        data["response"] = (
            ("stimulus", "voxel"),
            prediction.response,
            {"units": units, "long_name": what},
        )
    if prediction.tracked is not None:
        coords["tracked"] = ("tracked", np.array(tracked_names, dtype=object))
        data["tracked_response"] = (
            ("stimulus", "tracked"),
            prediction.tracked,
            {"units": units, "long_name": f"{what}, targets ranked one by one"},
        )
    record = encoder.attrs.get(PROVENANCE_KEY) or {}
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        stimulus_set=str(set_name),
        model=str(encoder.attrs.get("model", "")),
        subject=str(encoder.attrs.get("subject", "")),
        encoder_stage=str(record.get("stage", "")),
        encoder_version=str(record.get("version", "")),
        feature_spaces=spaces,
        delays=dict(encoder.attrs.get("delays") or {}),
        response_kind="single_trial" if method == "none" else "steady_state",
        design_filter_applied=False,
        k=int(k),
        tail=float(tail),
        skewness=_SKEWNESS,
        tail_ratio=_TAIL_RATIO,
        n_stimuli=int(prediction.ids.size),
        modality=modality,
    )
    return write_dataset(ds, output, provenance=provenance)


def pool_settings(config: Mapping[str, Any], pool: Any) -> dict[str, Any]:
    """The settings the fMRI and EEG predictions share: the ``predict`` section's
    ``k``, ``batch_size`` and ``tail``, and the pool's name, folder, texts and kind."""
    return {
        "k": int(config.get("k", 12)),
        "batch_size": int(config.get("batch_size", 256)),
        "tail": float(config.get("tail", 0.05)),
        "set_name": pool.name,
        "stimuli_dir": pool.folder,
        "captions": dict(pool.captions) or None,
        "modality": pool.kind,
    }


def predict_pool_stage(
    *,
    encoder_path: str | os.PathLike,
    feature_stores: Mapping[str, str | os.PathLike],
    pool: Any,
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """The ``predict`` stage: :func:`predict_stimulus_set` with the stage's settings.

    Parameters
    ----------
    encoder_path : path-like
        One subject's encoding store.
    feature_stores : dict of str to path-like
        Feature space of the encoder -> the pool's extraction store.
    pool : neuroflow.features.pools.StimulusPool
        The pool (its folder for the image thumbnails, its texts for text panels).
    output : path-like
        ``results/predict/<model>-<v>/sub-XX_<pool>.zarr``.
    config : dict
        The ``predict`` section (``k``, ``keep_voxels``, ``batch_size``, ``tail``,
        ``targets.voxels``: ids of the ``voxel`` coordinate ranked one by one).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
    """
    return predict_stimulus_set(
        encoder_path=encoder_path,
        feature_stores=feature_stores,
        output=output,
        keep_voxels=bool(config.get("keep_voxels", False)),
        provenance=provenance,
        **pool_settings(config, pool),
        voxels=target_positions(
            encoder_path, "voxel", (config.get("targets") or {}).get("voxels") or []
        )
        or None,
    )

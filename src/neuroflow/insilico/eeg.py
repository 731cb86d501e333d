"""In-silico EEG: a stored EEG encoding model applied to a pool of new stimuli.

An EEG encoding store (``eeg_encoding``) holds one ridge model per channel and
latency, fitted on the epochs of the shown stimuli (no delays: one feature row per
stimulus). Its response to a new stimulus is the predicted evoked response, shape
(channel, latency), in µV (:func:`neuroflow.insilico.response.stimulus_response`
applies the fit's formula to the flattened targets).

A pool is ranked on scalar summaries of that response within a **latency window**
(``predict.latency_window``; by default the 50 ms centred on the latency where the
model's cross-validated score, averaged over channels, peaks):

- each **channel group** (``predict.channel_groups``: name -> channels): the mean
  signed amplitude over the group's channels and the window's latencies, in µV;
- ``gfp``: the global field power, the population standard deviation over all
  channels at each latency, averaged over the window, in µV (how strongly the
  stimulus evokes any response; a channel mean over every channel is ~0 under an
  average reference, so it is not offered);
- channels named in ``predict.targets.channels``, each its window mean, ranked one by
  one (table rows only).

Memory: the (stimulus, channel, latency) responses of one batch are the largest
transient; only the window means per channel (and, with ``keep_voxels``, every
response) are kept per stimulus.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.insilico.ranking import QUANTILES
from neuroflow.insilico.response import _Model, _responses, check_encoder, encoder_spaces
from neuroflow.insilico.stage import (
    _batches,
    _open_features,
    _pool_ids,
    _stimulus_labels,
    distribution_variables,
    pool_settings,
    write_rankings,
)
from neuroflow.peaks import peak_index

__all__ = [
    "DEFAULT_HALF_WIDTH",
    "GFP",
    "EegPoolPrediction",
    "channel_group_members",
    "latency_window",
    "predict_eeg_pool",
    "predict_eeg_pool_stage",
    "predict_eeg_stimulus_set",
]

#: Half-width (s) of the default window around the model's peak latency.
DEFAULT_HALF_WIDTH = 0.025
#: Name of the global-field-power region.
GFP = "gfp"
_GFP_DEF = (
    "global field power: population standard deviation over all channels at each "
    "latency, averaged over the latency window"
)


def _peak(encoder: xr.Dataset, latencies: np.ndarray) -> tuple[float, str]:
    """Latency (s) >= 0 where the model's cross-validated score (else its test r) peaks."""
    for name, what in (("cv_course", "cross-validated score"), ("r_course", "test r")):
        if name in encoder and encoder[name].dims == ("latency",):
            peak = int(peak_index(encoder[name].values, latencies))
            if peak >= 0:
                return float(latencies[peak]), what
    return float(latencies[latencies.size // 2]), "the middle of the epoch"


def latency_window(
    latencies: np.ndarray,
    window: Sequence[float] | None,
    *,
    peak: float | None = None,
    half_width: float = DEFAULT_HALF_WIDTH,
) -> np.ndarray:
    """Latencies inside the window, as a boolean mask.

    Parameters
    ----------
    latencies : ndarray, shape (n_latencies,)
        The model's latencies (s), increasing.
    window : (float, float) | None
        ``[tmin, tmax]`` in s, inclusive; None: ``peak ± half_width``.
    peak : float | None
        Centre of the default window (required when ``window`` is None).
    half_width : float
        Half-width of the default window (s).

    Returns
    -------
    mask : ndarray of bool, shape (n_latencies,)
        At least one latency: a default window narrower than the sampling keeps the
        latency nearest the peak.
    """
    latencies = np.asarray(latencies, dtype=float)
    if latencies.ndim != 1 or latencies.size == 0:
        raise ValueError(
            f"latencies must be a non-empty 1-D array, got shape {latencies.shape} instead."
        )
    if window is None:
        if peak is None or not math.isfinite(peak):
            raise ValueError(f"peak must be a finite latency in s, got {peak!r} instead.")
        mask = np.abs(latencies - peak) <= half_width + 1e-9
        if not mask.any():
            mask[int(np.argmin(np.abs(latencies - peak)))] = True
        return mask
    if len(window) != 2 or not all(isinstance(t, int | float) for t in window):
        raise ValueError(
            f"predict.latency_window must be [tmin, tmax] in s, got {window!r} instead."
        )
    tmin, tmax = float(window[0]), float(window[1])
    if tmin > tmax:
        raise ValueError(
            f"predict.latency_window must have tmin <= tmax, got [{tmin}, {tmax}] instead."
        )
    mask = (latencies >= tmin - 1e-9) & (latencies <= tmax + 1e-9)
    if not mask.any():
        raise ValueError(
            f"predict.latency_window must overlap the model's latencies "
            f"[{latencies[0]:.3f}, {latencies[-1]:.3f}] s, got [{tmin}, {tmax}] instead."
        )
    return mask


def channel_group_members(
    channels: Sequence[str], groups: Mapping[str, Sequence[str]] | None
) -> dict[str, list[int]]:
    """Positions of each group's channels among the model's channels.

    Channels a recording does not have are left out of their group; a group with none
    of its channels is an error that names them.

    Parameters
    ----------
    channels : sequence of str, shape (n_channels,)
        The model's channels.
    groups : dict of str to list of str | None
        ``predict.channel_groups``.

    Returns
    -------
    members : dict of str to list of int
    """
    where = {str(c): i for i, c in enumerate(channels)}
    out: dict[str, list[int]] = {}
    for name, names in (groups or {}).items():
        if name == GFP:
            raise ValueError(
                f"predict.channel_groups must not be named {GFP!r} (the global field "
                "power's region), got it instead."
            )
        found = [where[str(c)] for c in names if str(c) in where]
        if not found:
            shown = list(where)[:8] + (["..."] if len(where) > 8 else [])
            raise ValueError(
                f"predict.channel_groups.{name} must name channels of the EEG model "
                f"({', '.join(shown)}), got {list(names)} instead."
            )
        out[str(name)] = found
    return out


@dataclass
class EegPoolPrediction:
    """Predicted evoked responses of a stimulus pool, accumulated batch by batch.

    Attributes
    ----------
    ids : ndarray of str, shape (n_stimuli,)
    regions : list of str
        Channel groups, then :data:`GFP`.
    region_response : ndarray, shape (n_stimuli, n_regions)
        float32 summaries in the window (µV).
    channel_response : ndarray, shape (n_stimuli, n_channels)
        float32 window mean of every channel (µV).
    pool_mean : ndarray, shape (n_channels, n_latencies)
        Mean predicted response over the pool (µV).
    response : ndarray, shape (n_stimuli, n_channels, n_latencies) | None
        Every predicted response (``keep_response=True`` only).
    """

    ids: np.ndarray
    regions: list[str]
    region_response: np.ndarray
    channel_response: np.ndarray
    pool_mean: np.ndarray
    response: np.ndarray | None = None


def predict_eeg_pool(
    encoder: xr.Dataset,
    feature_batches: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]],
    *,
    window: np.ndarray,
    groups: Mapping[str, Sequence[int]],
    batch_size: int = 256,
    keep_response: bool = False,
) -> EegPoolPrediction:
    """Stream a stimulus pool through an EEG encoding model, batch by batch.

    Parameters
    ----------
    encoder : xarray.Dataset
        An EEG encoding store (``coef`` (design, channel, latency)).
    feature_batches : iterable of (sequence of str, dict of str to ndarray)
        ``(ids, {space: rows})`` with rows of shape (n_batch, n_features) per space.
    window : ndarray of bool, shape (n_latencies,)
        Latencies summarised (:func:`latency_window`).
    groups : dict of str to list of int
        Channel positions of each group (:func:`channel_group_members`).
    batch_size : int
        Most stimuli multiplied at once.
    keep_response : bool
        Also return the (stimulus, channel, latency) responses.

    Returns
    -------
    prediction : EegPoolPrediction
    """
    check_encoder(encoder)
    if encoder["coef"].dims[1:] != ("channel", "latency"):
        raise ValueError(
            "encoder must be an EEG encoding store with `coef` on (design, channel, "
            f"latency), got dims {encoder['coef'].dims} instead."
        )
    if not (isinstance(batch_size, int | np.integer) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r} instead.")
    n_ch, n_lat = encoder.sizes["channel"], encoder.sizes["latency"]
    window = np.asarray(window, dtype=bool)
    if window.shape != (n_lat,) or not window.any():
        raise ValueError(
            f"window must be a boolean mask of {n_lat} latencies with at least one set, "
            f"got shape {window.shape} with {int(window.sum())} set instead."
        )
    model = _Model.read(encoder)
    regions = [*groups, GFP]
    ids: list[str] = []
    summaries: list[np.ndarray] = []
    channel_means: list[np.ndarray] = []
    kept: list[np.ndarray] = []
    total = np.zeros((n_ch, n_lat))
    for batch_ids, flat in _responses(model, feature_batches, int(batch_size)):
        response = flat.reshape(len(batch_ids), n_ch, n_lat)
        in_window = response[:, :, window].astype(np.float64)
        per_channel = in_window.mean(axis=2)  # (n, channel)
        columns = [per_channel[:, idx].mean(axis=1) for idx in groups.values()]
        columns.append(in_window.std(axis=1).mean(axis=1))  # global field power
        ids += list(batch_ids)
        summaries.append(np.stack(columns, axis=1).astype(np.float32))
        channel_means.append(per_channel.astype(np.float32))
        total += response.sum(axis=0, dtype=np.float64)
        if keep_response:
            kept.append(response)
        del flat, response, in_window
    n_stimuli = len(ids)
    if not n_stimuli:
        raise ValueError("the stimulus set must hold at least one stimulus, got none instead.")
    return EegPoolPrediction(
        ids=np.array(ids, dtype=object),
        regions=regions,
        region_response=np.concatenate(summaries),
        channel_response=np.concatenate(channel_means),
        pool_mean=(total / n_stimuli).astype(np.float32),
        response=np.concatenate(kept) if keep_response else None,
    )


def predict_eeg_stimulus_set(
    *,
    encoder_path: str | os.PathLike,
    feature_stores: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    provenance: Mapping[str, Any],
    k: int = 12,
    keep_response: bool = False,
    channel_groups: Mapping[str, Sequence[str]] | None = None,
    window: Sequence[float] | None = None,
    channels: Sequence[str] = (),
    set_name: str | None = None,
    stimuli_dir: str | os.PathLike | None = None,
    captions: Mapping[str, str] | None = None,
    batch_size: int = 256,
    tail: float = 0.05,
    thumb: int = 96,
    modality: str | None = None,
) -> Path:
    """Predict one subject's evoked responses to a set of new stimuli and rank them.

    Writes, next to each other: ``<name>.zarr`` with ``roi_response`` (stimulus, roi)
    (channel groups and ``gfp``, see the module docstring), ``channel_response``
    (stimulus, channel), ``pool_mean_response`` (channel, latency), ``response``
    (stimulus, channel, latency) with ``keep_response``, ``tracked_response``
    (stimulus, tracked) for ``channels``, and the distribution of each region's
    responses as the fMRI stores have it; ``<name>_ranking.tsv``; and
    ``<name>_contact_sheets/<region>.png``.

    Parameters
    ----------
    encoder_path : path-like
        An EEG encoding store (``results/eeg_encoding/...``).
    feature_stores : dict of str to path-like
        Feature space -> the stimulus set's extraction store (``features``
        (stimulus, feature)).
    output : path-like
        ``results/predict_eeg/<model>-<v>/sub-XX_<set>.zarr``.
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    k : int
        Stimuli per direction in the rankings.
    keep_response : bool
        Store every (stimulus, channel, latency) response.
    channel_groups : dict of str to list of str | None
        Named groups of channels, each ranked on its mean amplitude.
    window : (float, float) | None
        Latency window (s); None: the model's peak ± :data:`DEFAULT_HALF_WIDTH`.
    channels : sequence of str
        Channels also ranked one by one.
    set_name, stimuli_dir, captions, batch_size, tail, thumb, modality
        As for :func:`neuroflow.insilico.stage.predict_stimulus_set`.

    Returns
    -------
    output : Path
    """
    output = Path(output)
    encoder = open_dataset(encoder_path)
    check_encoder(encoder)
    if "channel" not in encoder.coords or "latency" not in encoder.coords:
        raise ValueError(
            f"{encoder_path}: an EEG encoding store with `channel` and `latency` "
            f"coordinates is needed, got dims {sorted(encoder.sizes)} instead."
        )
    spaces = list(encoder_spaces(encoder))
    stores = _open_features(feature_stores, spaces)
    first = stores[spaces[0]]
    latencies = np.asarray(encoder["latency"].values, dtype=float)
    model_channels = [str(c) for c in encoder["channel"].values]
    peak, peak_of = _peak(encoder, latencies)
    mask = latency_window(latencies, window, peak=peak)
    members = channel_group_members(model_channels, channel_groups)
    where = {c: i for i, c in enumerate(model_channels)}
    unknown = [c for c in channels if str(c) not in where]
    if unknown:
        raise ValueError(
            f"predict.targets.channels must name channels of {encoder_path} "
            f"({', '.join(model_channels[:8])}{', ...' if len(model_channels) > 8 else ''}), "
            f"got {unknown} instead."
        )
    if set_name is None:
        stem = output.name.removesuffix(".zarr")
        set_name = stem.split("_", 1)[1] if stem.startswith("sub-") and "_" in stem else stem
    ids = _pool_ids(first)
    prediction = predict_eeg_pool(
        encoder,
        _batches(stores, ids, int(batch_size)),
        window=mask,
        groups=members,
        batch_size=int(batch_size),
        keep_response=keep_response,
    )
    tracked_names = [f"channel {c}" for c in channels]
    tracked = prediction.channel_response[:, [where[str(c)] for c in channels]]
    span = (float(latencies[mask][0]), float(latencies[mask][-1]))
    modality = modality or str(first.attrs.get("modality") or "image")
    write_rankings(
        {r: prediction.region_response[:, j] for j, r in enumerate(prediction.regions)},
        prediction.ids,
        output,
        k=k,
        title=f"{encoder.attrs.get('model', '')} sub-{encoder.attrs.get('subject', '')} "
        f"{set_name}, {1000 * span[0]:.0f}-{1000 * span[1]:.0f} ms",
        shown=_stimulus_labels(list(prediction.ids), modality, stimuli_dir, captions),
        tracked=dict(zip(tracked_names, tracked.T, strict=True)),
        thumb=thumb,
    )

    units = str(encoder["target_mean"].attrs.get("units", "µV"))
    what = "predicted evoked response"
    coords: dict[str, Any] = {
        "stimulus": ("stimulus", prediction.ids.astype(object)),
        "roi": ("roi", np.array(prediction.regions, dtype=object)),
        "quantile": ("quantile", np.asarray(QUANTILES)),
        "channel": ("channel", np.array(model_channels, dtype=object)),
        "latency": ("latency", latencies, {"units": "s"}),
        "in_window": ("latency", mask, {"long_name": "latency inside the ranking window"}),
    }
    data: dict[str, Any] = {
        "roi_response": (
            ("stimulus", "roi"),
            prediction.region_response,
            {
                "units": units,
                "long_name": f"{what} in the latency window: mean over each channel "
                f"group's channels, or the {_GFP_DEF}",
            },
        ),
        **distribution_variables(prediction.region_response, units, tail),
        "channel_response": (
            ("stimulus", "channel"),
            prediction.channel_response,
            {"units": units, "long_name": f"{what}, mean over the latency window"},
        ),
        "pool_mean_response": (
            ("channel", "latency"),
            prediction.pool_mean,
            {"units": units, "long_name": f"{what}, mean over the pool"},
        ),
    }
    if prediction.response is not None:
        data["response"] = (
            ("stimulus", "channel", "latency"),
            prediction.response,
            {"units": units, "long_name": what},
        )
    if tracked_names:
        coords["tracked"] = ("tracked", np.array(tracked_names, dtype=object))
        data["tracked_response"] = (
            ("stimulus", "tracked"),
            tracked,
            {"units": units, "long_name": f"{what} in the window, channels ranked one by one"},
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
        response_kind="evoked",
        latency_window=list(span),
        latency_window_source=(
            "predict.latency_window"
            if window is not None
            else f"{1000 * DEFAULT_HALF_WIDTH:.0f} ms either side of the peak of the "
            f"model's {peak_of} ({peak:.3f} s)"
        ),
        channel_groups={g: [model_channels[i] for i in idx] for g, idx in members.items()},
        gfp=_GFP_DEF,
        k=int(k),
        tail=float(tail),
        n_stimuli=int(prediction.ids.size),
        modality=modality,
    )
    return write_dataset(ds, output, provenance=provenance)


def predict_eeg_pool_stage(
    *,
    encoder_path: str | os.PathLike,
    feature_stores: Mapping[str, str | os.PathLike],
    pool: Any,
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """The ``predict_eeg`` stage: :func:`predict_eeg_stimulus_set` with the settings.

    Parameters
    ----------
    encoder_path : path-like
        One subject's EEG encoding store.
    feature_stores : dict of str to path-like
        Feature space of the encoder -> the pool's extraction store.
    pool : neuroflow.features.pools.StimulusPool
        The pool.
    output : path-like
        ``results/predict_eeg/<model>-<v>/sub-XX_<pool>.zarr``.
    config : dict
        The ``predict`` section (``k``, ``keep_voxels``, ``batch_size``, ``tail``,
        ``channel_groups``, ``latency_window``, ``targets.channels``).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
    """
    return predict_eeg_stimulus_set(
        encoder_path=encoder_path,
        feature_stores=feature_stores,
        output=output,
        provenance=provenance,
        keep_response=bool(config.get("keep_voxels", False)),
        channel_groups=config.get("channel_groups") or {},
        window=config.get("latency_window"),
        channels=list((config.get("targets") or {}).get("channels") or []),
        **pool_settings(config, pool),
    )

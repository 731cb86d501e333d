"""Temporal response functions: continuous EEG regressed on lagged stimulus impulses.

:func:`fit_trf` places the features of each stimulus as impulses at its onset, lags them
over a window of latencies and regresses every channel on them (ridge, one penalty per
channel, cross-validated over contiguous blocks of the recording), as mTRF-style
analyses do. The epoch-based EEG encoding models are :mod:`neuroflow.encoding.eeg`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.encoding.eeg import (
    _VOLT_TO_UV,
    _strings,
    peak_latency,
    select_feature_spaces,
    with_defaults,
)
from neuroflow.encoding.eeg_design import _check_int, _standardize
from neuroflow.encoding.fitting import make_alphas
from neuroflow.features.align import features_for_stimuli
from neuroflow.models import resolve_device, ridge_cv, run_splits

__all__ = ["block_groups", "fit_trf", "lag_samples", "lagged_impulse_design"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- TRF
def lag_samples(tmin: float, tmax: float, sfreq: float) -> np.ndarray:
    """Integer lags from ``tmin`` to ``tmax`` (inclusive, rounded to samples).

    Parameters
    ----------
    tmin, tmax : float
        Window in seconds (``tmin <= tmax``).
    sfreq : float
        Sampling rate in Hz.

    Returns
    -------
    lags : ndarray of int, shape (n_lags,)
    """
    if not tmin <= tmax:
        raise ValueError(f"`trf.tmin` must be <= `trf.tmax`, got {tmin} > {tmax} instead.")
    return np.arange(round(tmin * sfreq), round(tmax * sfreq) + 1, dtype=np.int64)


def lagged_impulse_design(
    onsets: np.ndarray, features: np.ndarray, n_times: int, lags: np.ndarray
) -> np.ndarray:
    """Lagged design of event features placed as impulses at their onsets.

    Parameters
    ----------
    onsets : ndarray of int, shape (n_events,)
        Onset samples.
    features : ndarray, shape (n_events, n_features)
        Features of each event.
    n_times : int
        Samples of the recording.
    lags : ndarray of int, shape (n_lags,)
        Lags in samples; column block ``l`` holds the features at ``t - lags[l]``, so
        its weight is the response ``lags[l]`` samples after an onset.

    Returns
    -------
    design : ndarray of float32, shape (n_times, n_lags * n_features)
        Columns ordered (lag, feature); impulses falling outside the recording are
        dropped.
    """
    onsets = np.asarray(onsets, dtype=np.int64)
    features = np.asarray(features, dtype=np.float32)
    if features.ndim != 2 or features.shape[0] != onsets.size:
        raise ValueError(
            f"`features` must have shape ({onsets.size}, n_features), got {features.shape} instead."
        )
    n_feat = features.shape[1]
    design = np.zeros((n_times, lags.size * n_feat), dtype=np.float32)
    for j, lag in enumerate(lags):
        rows = onsets + lag
        ok = (rows >= 0) & (rows < n_times)
        np.add.at(design[:, j * n_feat : (j + 1) * n_feat], rows[ok], features[ok])
    return design


def block_groups(n_times: int, n_blocks: int) -> np.ndarray:
    """Contiguous block label of every sample, shape (n_times,)."""
    _check_int(n_blocks, "trf.n_blocks", 2)
    if n_blocks > n_times:
        raise ValueError(
            f"`trf.n_blocks` must be at most the number of samples ({n_times}), "
            f"got {n_blocks} instead."
        )
    return (np.arange(n_times) * n_blocks) // n_times


def _pca(X: np.ndarray, n_components: int | None) -> tuple[np.ndarray, int]:
    """Project centred rows on their first principal axes when there are more columns."""
    if n_components is None or X.shape[1] <= n_components:
        return X, X.shape[1]
    _check_int(n_components, "trf.n_components", 1)
    # one BLAS thread: the threaded SVD and product change their last bits with the
    # thread count, and the scores are the design of the ridge fit
    with threadpool_limits(limits=1, user_api="blas"):
        _, _, vt = np.linalg.svd(X - X.mean(0), full_matrices=False)
        scores = (X - X.mean(0)) @ vt[:n_components].T
    return scores / np.where(scores.std(0) > 0, scores.std(0), 1.0), n_components


def _resample(data: np.ndarray, sfreq: float, target: float) -> tuple[np.ndarray, float]:
    """Resample (channel, time) data to ``target`` Hz with MNE's FFT-based resampler."""
    if target is None or np.isclose(target, sfreq):
        return data, sfreq
    if not 0 < target <= sfreq:
        raise ValueError(
            f"`trf.sfreq` must be in (0, {sfreq:g}] Hz (the recording's rate), got "
            f"{target!r} instead."
        )
    import mne

    out = mne.filter.resample(data.astype(np.float64), up=target, down=sfreq, verbose="error")
    return out.astype(np.float32), float(target)


def fit_trf(
    *,
    continuous: Path,
    features: dict[str, Path],
    output: Path,
    config: dict,
    provenance: dict,
) -> Path:
    """Fit temporal response functions from event features to continuous EEG.

    Parameters
    ----------
    continuous : Path
        Continuous store of ONE recording: ``eeg`` (channel, time) in V, coordinate
        ``time`` (s) and events ``event_onset`` (s) and ``event_stimulus`` (dim
        ``event``), attribute ``sfreq``.
    features : dict of str to Path
        Feature stores by feature-space name (see :func:`fit_eeg_encoding`).
    output : Path
        Output store.
    config : dict
        The ``eeg_encoding`` section; the ``trf`` subsection sets the lag window
        (``tmin``, ``tmax`` in s), the working rate ``sfreq``, ``n_blocks`` of the
        contiguous cross-validation and ``n_components`` (PCA of the standardised
        features when a space has more columns; ``null`` keeps all).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store: ``trf`` (lag, feature, channel) weights in µV per feature SD,
        ``best_alpha`` and ``cv_score`` (channel), ``trf_power`` (lag, mean squared
        weight over features and channels) and ``peak_latency`` (s).
    """
    cfg = with_defaults(config)
    trf_cfg = cfg["trf"]
    continuous = Path(continuous)
    spaces = select_feature_spaces(cfg, features)
    ds = open_dataset(continuous)
    for name in ("eeg", "event_onset", "event_stimulus"):
        if name not in ds.variables:
            raise ValueError(f"{continuous}: variable `{name}` is missing.")
    if ds["eeg"].dims != ("channel", "time"):
        raise ValueError(
            f"{continuous}: `eeg` must have dims (channel, time), got {ds['eeg'].dims}."
        )
    if "sfreq" not in ds.attrs:
        raise ValueError(f"{continuous}: attribute `sfreq` is missing.")
    data = np.asarray(ds["eeg"].values, dtype=np.float32) * _VOLT_TO_UV
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{continuous}: field `eeg` holds non-finite values.")
    data, sfreq = _resample(data, float(ds.attrs["sfreq"]), trf_cfg["sfreq"])
    t0 = float(ds["time"].values[0])
    onsets = np.round((np.asarray(ds["event_onset"].values, float) - t0) * sfreq).astype(int)
    stimuli = _strings(ds["event_stimulus"].values)

    blocks, names = [], []
    for s in spaces:
        F = features_for_stimuli(features[s], stimuli).astype(np.float64)
        F, _, _ = _standardize(F, np.arange(F.shape[0]), bool(cfg["standardize"]))
        F, n = _pca(F, trf_cfg["n_components"])
        blocks.append(F)
        names += [f"{s}:{i}" for i in range(n)]
    F = np.concatenate(blocks, axis=1)
    lags = lag_samples(float(trf_cfg["tmin"]), float(trf_cfg["tmax"]), sfreq)
    n_times = data.shape[1]
    X = lagged_impulse_design(onsets, F, n_times, lags)
    Y = data.T
    X -= X.mean(0)
    Y = Y - Y.mean(0)
    splits = run_splits(block_groups(n_times, int(trf_cfg["n_blocks"])))
    device = resolve_device(cfg["device"])
    result = ridge_cv(
        X,
        Y,
        alphas=make_alphas(cfg["alphas"]),
        splits=splits,
        scoring=cfg["scoring"],
        target_batch_size=int(cfg["target_batch_size"]),
        device=device,
        dtype=cfg["dtype"],
    )
    weights = result.coef.reshape(lags.size, F.shape[1], -1)
    power = (weights.astype(np.float64) ** 2).mean(axis=(1, 2))
    lag_s = lags / sfreq
    peak = peak_latency(power, lag_s)
    channels = _strings(ds["channel"].values).astype(object)
    out = xr.Dataset(
        {
            "trf": (("lag", "feature", "channel"), weights.astype(np.float32), {"units": "µV"}),
            "best_alpha": (("channel",), result.best_alpha, {"units": "1"}),
            "cv_score": (("channel",), result.cv_score.astype(np.float32), {"units": "1"}),
            "trf_power": (("lag",), power.astype(np.float32), {"units": "µV²"}),
            "peak_latency": ((), np.float32(peak), {"units": "s"}),
        },
        coords={
            "lag": ("lag", lag_s, {"units": "s"}),
            "feature": ("feature", np.asarray(names, dtype=object)),
            "channel": ("channel", channels),
        },
        attrs={
            "subject": str((ds.attrs.get("entities") or {}).get("subject", "n/a")),
            "model": str(cfg.get("name") or "+".join(spaces)),
            "feature_spaces": list(spaces),
            "design": "trf",
            "solver": "ridge",
            "scoring": cfg["scoring"],
            "sfreq": sfreq,
            "n_events": int(onsets.size),
            "n_blocks": int(trf_cfg["n_blocks"]),
            "device": str(device),
            "dtype": cfg["dtype"],
        },
    )
    return write_dataset(out, output, provenance=provenance)

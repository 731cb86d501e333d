"""EEG encoding models: stimulus features to scalp potentials.

Two designs share one solver (:func:`neuroflow.models.ridge_cv`, one penalty per target):

* :func:`fit_eeg_encoding` fits, on epochs, one ridge model per channel and time point
  from the features of the stimulus shown on each epoch. All channels × time points are
  solved in a single call on the flattened ``(epoch, latency × channel)`` responses,
  which is equivalent to a loop over time points but shares one eigendecomposition per
  fold. Cross-validation groups epochs by stimulus, so repeated presentations of an
  image never straddle training and validation. Held-out test stimuli (by default the
  repeated ones) are predicted once each and their presentations kept as repeats, in the
  layout :func:`neuroflow.evaluation.evaluate_model` scores (sample = test stimulus,
  targets on the (channel, latency) dims).
* :func:`fit_trf` fits temporal response functions on continuous EEG: the features of
  each stimulus are placed as impulses at its onset, lagged over a window of latencies
  and regressed onto every channel, with cross-validation over contiguous blocks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from threadpoolctl import threadpool_limits

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.config import merge_defaults
from neuroflow.encoding.stage import make_alphas
from neuroflow.encoding.stored import NO_DELAYS, encoder_dataset
from neuroflow.evaluation.metrics import pearson_r
from neuroflow.features.align import features_for_stimuli
from neuroflow.models import RidgeCVResult, parse_cv, resolve_device, ridge_cv, run_splits
from neuroflow.workflow.design import MIN_TEST_STIMULI, select_test_stimuli

__all__ = [
    "DEFAULT_CONFIG",
    "MIN_TEST_STIMULI",
    "block_groups",
    "fit_eeg_encoding",
    "fit_epochs_ridge",
    "fit_trf",
    "lag_samples",
    "lagged_impulse_design",
    "peak_latency",
    "select_test_stimuli",
    "with_defaults",
]

logger = logging.getLogger(__name__)

#: Defaults of the ``eeg_encoding`` configuration section (mirrors its JSON schema).
DEFAULT_CONFIG: dict[str, Any] = {
    "name": None,
    "feature_spaces": [],
    "alphas": {"start": 0.0, "stop": 6.0, "num": 13},
    "cv": {"grouped_kfold": 5},
    "scoring": "r2",
    "test": "auto",
    "test_fraction": 0.2,
    "standardize": True,
    "tmin": None,
    "tmax": None,
    "decim": 1,
    "trf": {
        "enabled": False,
        "tmin": -0.1,
        "tmax": 0.6,
        "sfreq": 100.0,
        "n_blocks": 5,
        "n_components": 20,
    },
    "target_batch_size": 10000,
    "device": "auto",
    "dtype": "float32",
}
_VOLT_TO_UV = 1e6


def with_defaults(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill an ``eeg_encoding`` section with :data:`DEFAULT_CONFIG`; unknown keys are errors.

    Parameters
    ----------
    config : dict | None
        The section as given.

    Returns
    -------
    config : dict
        A complete copy.
    """

    # `cv` is a string or a {grouped_kfold: k} mapping, taken whole
    return merge_defaults(DEFAULT_CONFIG, config, "eeg_encoding", opaque=("cv",))


# --------------------------------------------------------------------------- helpers
def _standardize(
    X: np.ndarray, train: np.ndarray, enabled: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centre (and scale) columns with training-row statistics."""
    mean = X[train].mean(0)
    std = X[train].std(0) if enabled else np.ones(X.shape[1])
    std = np.where(std > 0, std, 1.0)
    return (X - mean) / std, mean, std


def fit_epochs_ridge(
    X: np.ndarray,
    Y: np.ndarray,
    *,
    groups: np.ndarray,
    alphas: np.ndarray,
    n_splits: int | None,
    scoring: str = "r2",
    target_batch_size: int = 10000,
    device: Any = None,
    dtype: str | None = None,
) -> tuple[RidgeCVResult, np.ndarray]:
    """Per channel and time point ridge, solved in one call on flattened targets.

    Parameters
    ----------
    X : ndarray, shape (n_epochs, n_features)
        Centred features of each training epoch.
    Y : ndarray, shape (n_epochs, n_times, n_channels)
        Training epochs (any units); centred here.
    groups : ndarray, shape (n_epochs,)
        Stimulus id of each epoch; folds never split a stimulus.
    alphas : ndarray, shape (n_alphas,)
        Candidate penalties.
    n_splits : int | None
        Grouped k-fold, or ``None`` for leave-one-stimulus-out.
    scoring, target_batch_size, device, dtype
        See :func:`neuroflow.models.ridge_cv`.

    Returns
    -------
    result : RidgeCVResult
        Fit on targets ordered (time, channel): ``coef`` has shape
        (n_features, n_times * n_channels).
    y_mean : ndarray, shape (n_times * n_channels,)
        Training mean of every target.
    """
    Y = np.asarray(Y)
    if Y.ndim != 3:
        raise ValueError(
            f"`Y` must have shape (n_epochs, n_times, n_channels), got {Y.shape} instead."
        )
    flat = Y.reshape(Y.shape[0], -1).astype(np.float32)
    y_mean = flat.mean(0)
    splits = run_splits(np.asarray(groups), n_splits, unit="stimulus")
    result = ridge_cv(
        X,
        flat - y_mean,
        alphas=alphas,
        splits=splits,
        scoring=scoring,
        target_batch_size=target_batch_size,
        device=device,
        dtype=dtype,
    )
    return result, y_mean


def peak_latency(course: np.ndarray, latencies: np.ndarray) -> float:
    """Latency of the largest value of a score course (NaNs ignored).

    Parameters
    ----------
    course : ndarray, shape (n_latencies,)
        Score per latency.
    latencies : ndarray, shape (n_latencies,)
        Latencies in seconds.

    Returns
    -------
    latency : float
        NaN when the course is all NaN.
    """
    course = np.asarray(course, dtype=float)
    if np.all(np.isnan(course)):
        return float("nan")
    return float(np.asarray(latencies)[int(np.nanargmax(course))])


def _strings(values: Any) -> np.ndarray:
    """Any array of strings (including numpy's StringDType) as a fixed-width str array."""
    return np.array([str(v) for v in np.asarray(values).ravel()], dtype=str)


def _load_epochs(path: Path) -> xr.Dataset:
    ds = open_dataset(path)
    if "epochs" not in ds:
        raise ValueError(f"{path}: variable `epochs` is missing.")
    if ds["epochs"].dims != ("epoch", "channel", "time"):
        raise ValueError(
            f"{path}: `epochs` must have dims (epoch, channel, time), got {ds['epochs'].dims}."
        )
    if "stimulus" not in ds.coords:
        raise ValueError(f"{path}: coordinate `stimulus` (dim epoch) is missing.")
    return ds


def _features(
    features: Mapping[str, Path], spaces: Sequence[str], ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated feature rows of ``ids`` and the space of every column."""
    from neuroflow.decoding.inputs import stimulus_features

    blocks, labels = [], []
    for s in spaces:
        rows = stimulus_features(features[s], ids)
        if not np.all(np.isfinite(rows)):
            raise ValueError(f"{features[s]}: field `features` holds non-finite values.")
        blocks.append(rows)
        labels += [s] * rows.shape[1]
    return np.concatenate(blocks, axis=1), np.array(labels, dtype=object)


def select_feature_spaces(cfg: Mapping[str, Any], features: Mapping[str, Path]) -> list[str]:
    """The section's ``feature_spaces`` (default: every store given), checked against them."""
    spaces = list(cfg["feature_spaces"] or list(features))
    if not spaces:
        raise ValueError("`features` must name at least one feature store, got none instead.")
    missing = [s for s in spaces if s not in features]
    if missing:
        raise ValueError(
            f"`feature_spaces` names {missing} but `features` only has {sorted(features)}."
        )
    return spaces


def _check_int(value: Any, name: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"`{name}` must be an int >= {low}, got {value!r} instead.")
    return value


def _time_window(times: np.ndarray, cfg: Mapping[str, Any]) -> np.ndarray:
    """Indices of the epoch's time points kept by ``tmin``/``tmax``/``decim``."""
    decim = _check_int(cfg["decim"], "decim", 1)
    lo = -np.inf if cfg["tmin"] is None else float(cfg["tmin"])
    hi = np.inf if cfg["tmax"] is None else float(cfg["tmax"])
    keep = np.flatnonzero((times >= lo - 1e-9) & (times <= hi + 1e-9))[::decim]
    if keep.size == 0:
        raise ValueError(
            f"`tmin`/`tmax` ({cfg['tmin']}, {cfg['tmax']}) keep none of the epoch's time "
            f"points [{times[0]:g}, {times[-1]:g}] s."
        )
    return keep


def _test_repeats(stimuli: np.ndarray, test_ids: Sequence[str]) -> np.ndarray:
    """Epoch indices of each test stimulus's presentations, shape (n_repeats, n_test)."""
    where = [np.flatnonzero(stimuli == s) for s in test_ids]
    counts = [len(w) for w in where]
    n_rep = min(counts)
    if len(set(counts)) > 1:
        logger.warning(
            "Test stimuli are shown %s to %s times; keeping the first %s presentations of each.",
            n_rep,
            max(counts),
            n_rep,
        )
    return np.stack([w[:n_rep] for w in where], axis=1)


# --------------------------------------------------------------------------- epochs
def fit_eeg_encoding(
    *,
    epochs: Path | Sequence[Path],
    features: dict[str, Path],
    output: Path,
    config: dict,
    provenance: dict,
) -> Path:
    """Fit per time point encoding models on one subject's epochs; predict held-out stimuli.

    Parameters
    ----------
    epochs : Path | list of Path
        Epochs stores of ONE subject's recordings (from ``preprocess_eeg``), pooled:
        ``epochs`` (epoch, channel, time) in V with coordinate ``stimulus`` on
        ``epoch``; recordings share their time grid, and are pooled on the channels
        they all have.
    features : dict of str to Path
        Feature stores (``features`` (stimulus, feature), coordinate ``stimulus``) by
        feature-space name; the spaces in ``config["feature_spaces"]`` (default: all)
        are concatenated. Frame- or word-level stores give each stimulus the mean of
        its rows.
    output : Path
        Output store.
    config : dict
        The ``eeg_encoding`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store, with dims ``stimulus`` (held-out test stimuli), ``repeat``,
        ``channel`` and ``latency`` (dimension coordinates; ``latency`` in s) and
        coordinate ``roi`` (= ``channel``) on ``channel``:

        - ``y_pred``, shape (n_test, n_channels, n_latencies), in µV;
        - ``y_test``, shape (n_repeats, n_test, n_channels, n_latencies), in µV;
        - ``best_alpha`` and ``cv_score``, shape (n_channels, n_latencies);
        - ``r_course`` (test r against the repeat mean, averaged over channels) and
          ``cv_course``, shape (n_latencies,);
        - ``peak_latency`` (s, of ``r_course``), a scalar.
    """
    from neuroflow.decoding.inputs import load_subject_epochs

    cfg = with_defaults(config)
    paths = [Path(epochs)] if isinstance(epochs, str | Path) else [Path(p) for p in epochs]
    spaces = select_feature_spaces(cfg, features)
    for path in paths:
        _load_epochs(path)
    subjects = load_subject_epochs(paths)
    if len(subjects) != 1:
        raise ValueError(
            f"`epochs` must hold the recordings of one subject, got subjects "
            f"{[s.subject for s in subjects]} instead."
        )
    sub = subjects[0]
    where = paths[0] if len(paths) == 1 else f"sub-{sub.subject} ({len(paths)} recordings)"
    stimuli = sub.stimulus
    times = sub.times
    keep_t = _time_window(times, cfg)
    latencies = times[keep_t]
    channels = sub.channels

    test_ids = select_test_stimuli(
        stimuli, cfg["test"], fraction=float(cfg["test_fraction"]), seed=0
    )
    if not test_ids:
        raise ValueError(
            f"{where}: no stimulus is shown more than once, so `test: repeated` selects "
            "no test stimuli; use `test: auto` or list them explicitly."
        )
    is_test = np.isin(stimuli, test_ids)
    train = np.flatnonzero(~is_test)
    if np.unique(stimuli[train]).size < 2:
        raise ValueError(
            f"{where}: at least 2 training stimuli are needed, got "
            f"{np.unique(stimuli[train]).size} instead ({len(test_ids)} of "
            f"{np.unique(stimuli).size} stimuli are held out by `test` {cfg['test']!r})."
        )
    data = sub.data[:, :, keep_t] * np.float32(_VOLT_TO_UV)
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{where}: field `epochs` holds non-finite values.")
    data = data.transpose(0, 2, 1)  # (epoch, latency, channel)

    X, space_of = _features(features, spaces, stimuli)
    X, feature_mean, feature_scale = _standardize(X, train, bool(cfg["standardize"]))
    x_mean = X[train].mean(0)
    X = (X - x_mean).astype(np.float32)
    device = resolve_device(cfg["device"])
    result, y_mean = fit_epochs_ridge(
        X[train],
        data[train],
        groups=stimuli[train],
        alphas=make_alphas(cfg["alphas"]),
        n_splits=parse_cv(cfg["cv"]),
        scoring=cfg["scoring"],
        target_batch_size=int(cfg["target_batch_size"]),
        device=device,
        dtype=cfg["dtype"],
    )

    reps = _test_repeats(stimuli, test_ids)  # (n_repeats, n_test)
    X_test = X[reps[0]]
    y_pred = (result.predict(X_test) + y_mean).astype(np.float32)
    y_test = data[reps].reshape(reps.shape[0], reps.shape[1], -1)
    r = pearson_r(y_test.mean(0), y_pred)
    shape = (latencies.size, channels.size)
    with np.errstate(all="ignore"):
        r_course = np.nanmean(r.reshape(shape), axis=1)
        cv_course = np.nanmean(result.cv_score.reshape(shape), axis=1)
    peak = peak_latency(r_course, latencies)
    logger.info("Test r course peaks at %.3f s (%.3f).", peak, np.nanmax(r_course))

    first = open_dataset(paths[0])
    ds_out = _epochs_output(
        y_pred, y_test, result, test_ids, latencies, channels, r_course, cv_course, peak
    )
    n_lat, n_ch = latencies.size, channels.size

    def maps(flat: np.ndarray) -> np.ndarray:  # (..., latency x channel) -> (..., ch, lat)
        return np.swapaxes(np.asarray(flat).reshape(*flat.shape[:-1], n_lat, n_ch), -1, -2)

    ds_out = ds_out.merge(
        encoder_dataset(
            coef=maps(result.coef),
            spaces=spaces,
            n_features=[int((space_of == s).sum()) for s in spaces],
            delays=NO_DELAYS,
            variants=[NO_DELAYS["method"]],
            design_mean=x_mean.astype(np.float32)[None],
            feature_mean=feature_mean[None],
            feature_scale=feature_scale[None],
            target_mean=maps(y_mean),
            units="µV",
            target_dims=("channel", "latency"),
        )
    )
    ds_out.attrs.update(
        subject=sub.subject,
        model=str(cfg.get("name") or "+".join(spaces)),
        feature_spaces=list(spaces),
        n_features={s: int((space_of == s).sum()) for s in spaces},
        solver="ridge",
        design="epochs",
        scoring=cfg["scoring"],
        tr=1.0,
        sample="test stimulus",
        exchangeable_samples=True,
        sfreq=float(first.attrs.get("sfreq", np.nan)),
        recordings=[str(p) for p in paths],
        n_train_epochs=int(train.size),
        n_train_stimuli=int(np.unique(stimuli[train]).size),
        n_test_stimuli=len(test_ids),
        n_test_repeats=int(reps.shape[0]),
        device=str(device),
        dtype=cfg["dtype"],
        delays=dict(NO_DELAYS),
        design_filtered=False,
    )
    return write_dataset(ds_out, output, provenance=provenance)


def _epochs_output(
    y_pred: np.ndarray,
    y_test: np.ndarray,
    result: RidgeCVResult,
    test_ids: Sequence[str],
    latencies: np.ndarray,
    channels: np.ndarray,
    r_course: np.ndarray,
    cv_course: np.ndarray,
    peak: float,
) -> xr.Dataset:
    """The epochs store, every map on (channel, latency).

    Parameters
    ----------
    y_pred : ndarray, shape (n_test, n_latencies * n_channels)
        Predictions of the test stimuli, targets ordered (latency, channel).
    y_test : ndarray, shape (n_repeats, n_test, n_latencies * n_channels)
        Their presentations, targets ordered like ``y_pred``.
    result : RidgeCVResult
        The fit; ``best_alpha`` and ``cv_score`` have shape (n_latencies * n_channels,).
    test_ids : sequence of str, shape (n_test,)
        The test stimuli.
    latencies : ndarray, shape (n_latencies,)
        Latencies in s.
    channels : ndarray, shape (n_channels,)
        Channel names.
    r_course, cv_course : ndarray, shape (n_latencies,)
        Test r and cross-validated score, averaged over channels.
    peak : float
        Latency (s) of the peak of ``r_course``.

    Returns
    -------
    ds : xarray.Dataset
        See :func:`fit_eeg_encoding`.
    """
    n_lat, n_ch = latencies.size, channels.size

    def maps(flat: np.ndarray) -> np.ndarray:
        # (..., latency x channel) -> (..., channel, latency)
        return np.swapaxes(np.asarray(flat).reshape(*flat.shape[:-1], n_lat, n_ch), -1, -2)

    one = {"units": "1"}
    uv = {"units": "µV"}
    names = np.asarray(channels, dtype=object)
    coords = {
        "stimulus": ("stimulus", np.asarray(test_ids, dtype=object)),
        "repeat": ("repeat", np.arange(y_test.shape[0])),
        "channel": ("channel", names),
        "latency": ("latency", np.asarray(latencies, dtype=np.float64), {"units": "s"}),
        "roi": ("channel", names.copy()),
    }
    data = {
        "y_pred": (
            ("stimulus", "channel", "latency"),
            maps(y_pred).astype(np.float32),
            {**uv, "long_name": "predicted EEG"},
        ),
        "y_test": (
            ("repeat", "stimulus", "channel", "latency"),
            maps(y_test).astype(np.float32),
            {**uv, "long_name": "observed EEG per presentation"},
        ),
        "best_alpha": (
            ("channel", "latency"),
            maps(result.best_alpha),
            {**one, "long_name": "ridge penalty chosen by cross-validation"},
        ),
        "cv_score": (
            ("channel", "latency"),
            maps(np.asarray(result.cv_score, dtype=np.float32)),
            {**one, "long_name": "cross-validated score at the chosen penalty"},
        ),
        "r_course": (
            ("latency",),
            r_course.astype(np.float32),
            {**one, "long_name": "test r against the repeat mean, mean over channels"},
        ),
        "cv_course": (
            ("latency",),
            cv_course.astype(np.float32),
            {**one, "long_name": "cross-validated score, mean over channels"},
        ),
        "peak_latency": ((), np.float32(peak), {"units": "s", "long_name": "argmax of r_course"}),
    }
    return xr.Dataset(data, coords=coords)


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

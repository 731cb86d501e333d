"""EEG encoding models: stimulus features to scalp potentials.

Two designs share one solver (:func:`neuroflow.models.ridge_cv`, one penalty per target):

* :func:`fit_eeg_encoding` fits, on epochs, one ridge model per channel and time point
  from the features of the stimulus shown on each epoch. All channels × time points are
  solved in a single call on the flattened ``(epoch, latency × channel)`` responses,
  which is equivalent to a loop over time points but shares one eigendecomposition per
  fold. Cross-validation groups epochs by stimulus, so repeated presentations of an
  image never straddle training and validation. Unless the design sets test images
  apart (THINGS-EEG's test images, shown more often than the training images), every
  stimulus is predicted once by a model fitted on the other outer folds of stimuli
  (penalties chosen by an inner cross-validation on those training folds only), so the
  r per channel × latency is computed over all stimuli, not over a fifth of them.
  Scores are taken against each stimulus's mean response over its repeats, in the
  layout :func:`neuroflow.evaluation.evaluate_model` scores (sample = scored stimulus,
  targets on the (channel, latency) dims), and tested with a cluster permutation test
  over channel adjacency × latency whose null keeps each prediction within its fold;
  the peak latency of the channel-mean r gets a bootstrap interval over stimuli
  (:mod:`neuroflow.encoding.eeg_inference`).
* :func:`neuroflow.encoding.trf.fit_trf` fits temporal response functions on continuous
  EEG: the features of each stimulus are placed as impulses at its onset, lagged over a
  window of latencies and regressed onto every channel, with cross-validation over
  contiguous blocks.

Which stimuli are scored, their folds and the cross-validated predictions are
:mod:`neuroflow.encoding.eeg_design`; this module reads the configuration, the epochs
and the features, runs the inference and writes the store.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import open_dataset, write_dataset
from neuroflow.config import merge_defaults
from neuroflow.encoding.eeg_design import (
    CROSS_VALIDATED,
    HELD_OUT,
    _check_int,
    _standardize,
    _test_repeats,
    cross_validated_predictions,
    fit_epochs_ridge,
    fold_refit,
    scoring_design,
    stimulus_folds,
)
from neuroflow.encoding.eeg_inference import (
    ADJACENCY_MODES,
    ClusterTest,
    FoldRefit,
    bootstrap_peak_latency,
    channel_adjacency,
    cluster_permutation_test,
    peak_course,
    target_adjacency,
)
from neuroflow.encoding.fitting import make_alphas
from neuroflow.encoding.stored import NO_DELAYS, encoder_dataset
from neuroflow.evaluation.metrics import pearson_r
from neuroflow.models import RidgeCVResult, parse_cv, resolve_device
from neuroflow.peaks import peak_latency as _post_stimulus_peak

__all__ = [
    "DEFAULT_CONFIG",
    "fit_eeg_encoding",
    "peak_latency",
    "select_feature_spaces",
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
    "outer_folds": 5,
    "seed": 0,
    "inference": {
        "n_permutations": 200,
        "cluster_threshold": 0.01,
        "alpha": 0.05,
        "adjacency": "auto",
        "n_bootstraps": 1000,
        "ci_level": 0.95,
    },
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
#: Fewest scored stimuli of a cluster test and a bootstrap (a correlation's t needs 3).
MIN_INFERENCE_STIMULI = 3


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


def peak_latency(course: np.ndarray, latencies: np.ndarray) -> float:
    """Latency of the largest value of a score course at or after the onset (NaNs ignored).

    Parameters
    ----------
    course : ndarray, shape (n_latencies,)
        Score per latency.
    latencies : ndarray, shape (n_latencies,)
        Latencies in seconds; negative ones (before the stimulus) are never the peak
        (:func:`neuroflow.peaks.peak_latency`).

    Returns
    -------
    latency : float
        NaN when the course has no finite value at a latency ``>= 0``.
    """
    return _post_stimulus_peak(course, latencies)


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
    from neuroflow.analysis_inputs import stimulus_features

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


def _inference_settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The checked ``inference`` subsection."""
    inf = dict(cfg["inference"])
    _check_int(inf["n_permutations"], "inference.n_permutations", 0)
    _check_int(inf["n_bootstraps"], "inference.n_bootstraps", 0)
    for name in ("cluster_threshold", "alpha", "ci_level"):
        value = inf[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise ValueError(
                f"`inference.{name}` must be a number in (0, 1), got {value!r} instead."
            )
    if inf["adjacency"] not in ADJACENCY_MODES:
        raise ValueError(
            f"`inference.adjacency` must be one of {list(ADJACENCY_MODES)}, got "
            f"{inf['adjacency']!r} instead."
        )
    return inf


def _channel_positions(path: Path, channels: np.ndarray) -> np.ndarray | None:
    """Positions (m) of ``channels`` from an epochs store's ``ch_x/y/z``; None if unknown."""
    ds = open_dataset(path)
    if not all(c in ds.coords for c in ("ch_x", "ch_y", "ch_z")):
        return None
    names = [str(c) for c in ds["channel"].values]
    index = [names.index(str(c)) for c in channels]
    xyz = np.stack([np.asarray(ds[c].values, dtype=np.float64) for c in ("ch_x", "ch_y", "ch_z")])
    positions = xyz.T[index]
    return positions if np.isfinite(positions).all() else None


def _nan_to_none(value: float) -> float | None:
    """A float for store attributes (JSON has no NaN)."""
    return float(value) if np.isfinite(value) else None


def _infer(
    y_pred: np.ndarray,
    observed: np.ndarray,
    folds: np.ndarray,
    latencies: np.ndarray,
    channels: np.ndarray,
    positions: np.ndarray | None,
    inf: Mapping[str, Any],
    seed: int,
    peak: float,
    refit: FoldRefit | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Cluster test, bootstrap peak interval and peak p-value of one subject's r map.

    Parameters
    ----------
    y_pred, observed : ndarray, shape (n_stimuli, n_latencies * n_channels)
        Predictions and repeat-averaged responses of the scored stimuli, targets ordered
        (latency, channel).
    folds : ndarray of int, shape (n_stimuli,)
        Fold whose model predicted each stimulus.
    latencies, channels : ndarray
        The grid.
    positions : ndarray, shape (n_channels, 3) | None
        Channel positions.
    inf : dict
        The checked ``inference`` subsection.
    seed : int
        Seed of the permutations and the bootstrap.
    peak : float
        Peak latency (s) of the largest r over channels.
    refit : FoldRefit | None
        The cross-validated fits, refitted by the permutations (None: a held-out set,
        whose predictions are permuted).

    Returns
    -------
    variables : dict
        Store variables (name -> (dims, values, attrs)).
    attrs : dict
        Store attributes (the peak, its interval and p-value, the test settings).
    """
    n, n_lat, n_ch = y_pred.shape[0], latencies.size, channels.size
    pred = y_pred.reshape(n, n_lat, n_ch)
    obs = observed.reshape(n, n_lat, n_ch)
    ch_adj = channel_adjacency(positions, channels) if inf["adjacency"] == "auto" else None
    if ch_adj is None and inf["adjacency"] == "auto":
        logger.info("Channel positions are unknown: clusters run along latency only.")
    adjacency = target_adjacency(n_lat, ch_adj, n_ch)
    name = "channel x latency" if ch_adj is not None else "latency"
    n_perm = int(inf["n_permutations"]) if n >= MIN_INFERENCE_STIMULI else 0
    n_boot = int(inf["n_bootstraps"]) if n >= MIN_INFERENCE_STIMULI else 0
    if n < MIN_INFERENCE_STIMULI:
        logger.warning(
            "%d scored stimuli: no cluster test and no peak interval (at least %d are needed).",
            n,
            MIN_INFERENCE_STIMULI,
        )
        test = ClusterTest(
            t_obs=np.zeros((n_lat, n_ch)),
            labels=np.zeros((n_lat, n_ch), dtype=np.int64),
            masses=np.zeros(0),
            p_values=np.zeros(0),
            null_max_mass=np.zeros(0),
            threshold=np.nan,
            adjacency=name,
        )
    else:
        test = cluster_permutation_test(
            pred,
            obs,
            adjacency,
            refit=refit,
            n_permutations=n_perm,
            threshold=float(inf["cluster_threshold"]),
            seed=seed,
            adjacency_name=name,
        )
    boot, interval = (
        bootstrap_peak_latency(
            pred,
            obs,
            latencies,
            n_bootstraps=n_boot,
            level=float(inf["ci_level"]),
            seed=seed + 1,
        )
        if n_boot
        else (np.zeros(0), np.full(2, np.nan))
    )
    alpha = float(inf["alpha"])
    target_p = test.target_p()  # (latency, channel)
    if not np.isfinite(peak) or not n_perm:
        peak_p = np.nan
    else:
        at_peak = target_p[int(np.argmin(np.abs(latencies - peak)))]
        peak_p = float(np.nanmin(at_peak)) if np.isfinite(at_peak).any() else 1.0
    significant = np.nan_to_num(target_p, nan=1.0) <= alpha
    inconclusive = 1.0 / (n_perm + 1) > alpha
    one = {"units": "1"}
    variables = {
        "cluster_t": (
            ("channel", "latency"),
            test.t_obs.T.astype(np.float32),
            {**one, "long_name": "t statistic of the test r, r sqrt((n - 2) / (1 - r^2))"},
        ),
        "cluster_id": (
            ("channel", "latency"),
            test.labels.T.astype(np.int32),
            {**one, "long_name": "cluster (1: largest mass), 0 outside clusters"},
        ),
        "cluster_p": (
            ("channel", "latency"),
            target_p.T.astype(np.float32),
            {**one, "long_name": "family-wise p-value of the target's cluster, NaN outside"},
        ),
        "significant_cluster": (
            ("channel", "latency"),
            significant.T,
            {**one, "alpha": alpha, "long_name": "in a cluster with p <= alpha"},
        ),
        "cluster_mass": (("cluster",), test.masses, {**one, "long_name": "sum of t"}),
        "cluster_p_value": (
            ("cluster",),
            test.p_values,
            {**one, "long_name": "(1 + #{null max mass >= mass}) / (1 + n_permutations)"},
        ),
        "null_max_mass": (
            ("permutation",),
            test.null_max_mass,
            {**one, "long_name": "largest cluster mass of each permuted map"},
        ),
        "peak_latency_bootstrap": (
            ("bootstrap",),
            boot.astype(np.float32),
            {"units": "s", "long_name": "peak latency of each resampling of the stimuli"},
        ),
        "peak_latency_ci": (
            ("bound",),
            interval.astype(np.float32),
            {"units": "s", "level": float(inf["ci_level"]), "long_name": "percentile interval"},
        ),
        "peak_p": (
            (),
            np.float32(peak_p),
            {**one, "long_name": "smallest cluster p-value at the peak latency (1: none)"},
        ),
        "fold": (
            ("stimulus",),
            np.asarray(folds, dtype=np.int32),
            {**one, "long_name": "outer fold whose model predicted the stimulus"},
        ),
    }
    attrs = {
        "n_permutations": n_perm,
        "cluster_threshold": float(inf["cluster_threshold"]),
        "cluster_threshold_t": float(test.threshold),
        "cluster_alpha": alpha,
        "cluster_adjacency": name,
        "permutation_penalties": (
            "none (held-out predictions permuted)"
            if refit is None
            else ("chosen again" if refit.reselects else "kept from the observed fit")
        ),
        "n_clusters": int(test.masses.size),
        "n_significant_clusters": int((np.nan_to_num(test.p_values, nan=1.0) <= alpha).sum()),
        "n_bootstraps": n_boot,
        "ci_level": float(inf["ci_level"]),
        "peak_latency": _nan_to_none(peak),
        "peak_latency_ci": [_nan_to_none(v) for v in interval],
        "peak_p": _nan_to_none(peak_p),
        "peak_significant": bool(np.isfinite(peak_p) and peak_p <= alpha),
        "inference_inconclusive": bool(inconclusive),
    }
    return variables, attrs


# --------------------------------------------------------------------------- epochs
def fit_eeg_encoding(
    *,
    epochs: Path | Sequence[Path],
    features: dict[str, Path],
    output: Path,
    config: dict,
    provenance: dict,
) -> Path:
    """Fit per time point encoding models on one subject's epochs; score and test them.

    Parameters
    ----------
    epochs : Path | list of Path
        Epochs stores of ONE subject's recordings (from ``preprocess_eeg``), pooled:
        ``epochs`` (epoch, channel, time) in V with coordinate ``stimulus`` on
        ``epoch`` (and ``ch_x/y/z`` channel positions, used for cluster adjacency when
        every channel has one); recordings share their time grid, and are pooled on the
        channels they all have.
    features : dict of str to Path
        Feature stores (``features`` (stimulus, feature), coordinate ``stimulus``) by
        feature-space name; the spaces in ``config["feature_spaces"]`` (default: all)
        are concatenated. Frame- or word-level stores give each stimulus the mean of
        its rows.
    output : Path
        Output store.
    config : dict
        The ``eeg_encoding`` section (see :data:`DEFAULT_CONFIG`). ``test`` chooses the
        scored stimuli (:func:`scoring_design`): with cross-validation every stimulus is
        predicted once by a model fitted on the other ``outer_folds`` (seeded folds of
        stimuli, so the repeats of an image share a fold; :func:`stimulus_folds`),
        the penalties chosen by the inner ``cv`` on those training epochs only;
        held-out stimuli are predicted by the model fitted on all other stimuli.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store, with dims ``stimulus`` (the scored stimuli: all of them with
        cross-validation, else the held-out ones), ``repeat``, ``channel`` and
        ``latency`` (dimension coordinates; ``latency`` in s) and coordinate ``roi``
        (= ``channel``) on ``channel``:

        - ``y_pred``, shape (n_scored, n_channels, n_latencies), in µV;
        - ``y_test``, shape (n_repeats, n_scored, n_channels, n_latencies), in µV (the
          scores use their mean over repeats);
        - ``fold`` (n_scored,): the outer fold that predicted each stimulus (0 for a
          held-out set);
        - ``best_alpha`` and ``cv_score``, shape (n_channels, n_latencies), of the
          model fitted on all training stimuli (all stimuli with cross-validation),
          whose weights the store keeps (``coef``...);
        - ``r_course`` (r against the repeat mean, averaged over channels),
          ``r_course_max`` (its largest value over channels) and ``cv_course``, shape
          (n_latencies,);
        - ``peak_latency`` (s, where ``r_course_max`` peaks at latencies >= 0: a
          focal response stands out there, the channel mean dilutes it), ``peak_r``
          and ``peak_p`` (the smallest cluster p-value at that latency, 1 outside
          clusters), scalars; ``peak_latency_ci`` (bound,) and
          ``peak_latency_bootstrap`` (bootstrap,): its percentile interval over
          resamplings of the stimuli;
        - the cluster permutation test (:mod:`neuroflow.encoding.eeg_inference`):
          ``cluster_t``, ``cluster_id``, ``cluster_p`` and ``significant_cluster``
          (n_channels, n_latencies), ``cluster_mass`` and ``cluster_p_value``
          (cluster,), ``null_max_mass`` (permutation,).

        Attributes record the design (``test_design``, ``n_outer_folds``), the test
        settings, and the peak, its channel, interval and p-value (``peak_latency``,
        ``peak_r``, ``peak_channel``, ``peak_latency_ci``, ``peak_p``,
        ``peak_significant``), which the evaluation
        stage copies into the score store for the summary.
    """
    from neuroflow.analysis_inputs import load_subject_epochs

    cfg = with_defaults(config)
    inf = _inference_settings(cfg)
    seed = _check_int(cfg["seed"], "seed", 0)
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

    design, test_ids = scoring_design(stimuli, cfg["test"])
    if design == HELD_OUT and not test_ids:
        raise ValueError(
            f"{where}: no stimulus is shown more than once, so `test: repeated` selects "
            "no test stimuli; use `test: auto` or list them explicitly."
        )
    if design == HELD_OUT:
        scored = list(test_ids)
        train = np.flatnonzero(~np.isin(stimuli, test_ids))
        if np.unique(stimuli[train]).size < 2:
            raise ValueError(
                f"{where}: at least 2 training stimuli are needed, got "
                f"{np.unique(stimuli[train]).size} instead ({len(test_ids)} of "
                f"{np.unique(stimuli).size} stimuli are held out by `test` {cfg['test']!r})."
            )
        folds = np.zeros(len(scored), dtype=np.int64)
    else:
        scored = list(dict.fromkeys(str(s) for s in stimuli))
        train = np.arange(stimuli.size)
        try:
            folds = stimulus_folds(len(scored), cfg["outer_folds"], seed)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    data = sub.data[:, :, keep_t] * np.float32(_VOLT_TO_UV)
    if not np.all(np.isfinite(data)):
        raise ValueError(f"{where}: field `epochs` holds non-finite values.")
    data = data.transpose(0, 2, 1)  # (epoch, latency, channel)

    X_raw, space_of = _features(features, spaces, stimuli)
    device = resolve_device(cfg["device"])
    solver = {
        "alphas": make_alphas(cfg["alphas"]),
        "n_splits": parse_cv(cfg["cv"]),
        "scoring": cfg["scoring"],
        "target_batch_size": int(cfg["target_batch_size"]),
        "device": device,
        "dtype": cfg["dtype"],
    }
    X, feature_mean, feature_scale = _standardize(X_raw, train, bool(cfg["standardize"]))
    x_mean = X[train].mean(0)
    X = (X - x_mean).astype(np.float32)
    result, y_mean = fit_epochs_ridge(X[train], data[train], groups=stimuli[train], **solver)

    reps = _test_repeats(stimuli, scored)  # (n_repeats, n_scored)
    refit = None
    if design == HELD_OUT:
        y_pred = (result.predict(X[reps[0]]) + y_mean).astype(np.float32)
    else:
        logger.info(
            "Predicting %d stimuli by %d-fold cross-validation over stimuli.",
            len(scored),
            np.unique(folds).size,
        )
        y_pred, fold_alphas = cross_validated_predictions(
            X_raw,
            data,
            stimuli=stimuli,
            ids=scored,
            folds=folds,
            standardize=bool(cfg["standardize"]),
            **solver,
        )
        refit = fold_refit(X_raw, data, stimuli, scored, folds, fold_alphas, cfg)
    y_test = data[reps].reshape(reps.shape[0], reps.shape[1], -1)
    observed = y_test.astype(np.float64).mean(0)
    # as the evaluation stage scores the stored (float32) maps
    r = pearson_r(observed, y_pred).astype(np.float32)
    shape = (latencies.size, channels.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN latencies give NaN
        r_course = np.nanmean(r.reshape(shape).astype(np.float64), axis=1)
        cv_course = np.nanmean(result.cv_score.reshape(shape), axis=1)
    r_course_max = peak_course(r.reshape(shape))
    peak = peak_latency(r_course_max, latencies)
    variables, inference_attrs = _infer(
        y_pred,
        observed,
        folds,
        latencies,
        channels,
        _channel_positions(paths[0], channels),
        inf,
        seed,
        peak,
        refit,
    )
    k = int(np.argmin(np.abs(latencies - peak))) if np.isfinite(peak) else -1
    peak_r = float(r_course_max[k]) if k >= 0 else np.nan
    peak_channel = str(channels[int(np.nanargmax(r.reshape(shape)[k]))]) if k >= 0 else ""
    variables["r_course_max"] = (
        ("latency",),
        r_course_max.astype(np.float32),
        {"units": "1", "long_name": "test r against the repeat mean, max over channels"},
    )
    variables["peak_r"] = ((), np.float32(peak_r), {"units": "1", "long_name": "r at the peak"})
    inference_attrs.update(peak_r=_nan_to_none(peak_r), peak_channel=peak_channel)
    logger.info(
        "r peaks at %.3f s on %s (r %.3f, %s interval [%s, %s] s, cluster p %s).",
        peak,
        peak_channel,
        peak_r,
        inference_attrs["ci_level"],
        *inference_attrs["peak_latency_ci"],
        inference_attrs["peak_p"],
    )

    first = open_dataset(paths[0])
    ds_out = _epochs_output(
        y_pred, y_test, result, scored, latencies, channels, r_course, cv_course, peak
    )
    ds_out = ds_out.merge(
        xr.Dataset(variables, coords={"bound": ("bound", np.array(["lower", "upper"], object))})
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
        test_design=design,
        n_outer_folds=int(np.unique(folds).size) if design == CROSS_VALIDATED else 0,
        seed=seed,
        scoring=cfg["scoring"],
        tr=1.0,
        sample="test stimulus",
        exchangeable_samples=True,
        sfreq=float(first.attrs.get("sfreq", np.nan)),
        recordings=[str(p) for p in paths],
        n_train_epochs=int(train.size),
        n_train_stimuli=int(np.unique(stimuli[train]).size),
        n_test_stimuli=len(scored),
        n_test_repeats=int(reps.shape[0]),
        device=str(device),
        dtype=cfg["dtype"],
        delays=dict(NO_DELAYS),
        design_filtered=False,
        **inference_attrs,
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
        Peak latency (s) (of ``r_course_max``, at latencies >= 0).

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
        "peak_latency": (
            (),
            np.float32(peak),
            {"units": "s", "long_name": "argmax of r_course_max at latencies >= 0"},
        ),
    }
    return xr.Dataset(data, coords=coords)

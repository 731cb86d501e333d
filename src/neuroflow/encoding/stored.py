"""Apply a stored encoding model to new feature time series, without refitting.

``fit_encoding`` stores the fitted model next to its test-set predictions: the ridge
coefficients ``coef`` (design, voxel) on the centred, standardised, delayed design, the
standardisation statistics ``feature_mean`` / ``feature_scale`` (variant, input), the
design means ``design_mean`` (variant, design), the target means ``target_mean`` (voxel),
the delays (attribute ``delays``) and, with an HRF library, each target's chosen HRF
model (``hrf_model``). :func:`predict_run` rebuilds the design of one run exactly as
the fit did and returns the prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.models import matmul
from neuroflow.models.delays import apply_delays, delay_variants, variant_delays

__all__ = ["ENCODER_VARIABLES", "NO_DELAYS", "encoder_dataset", "filter_like_data", "predict_run"]

#: The delays of stimulus-level models (single trials, EEG epochs): none.
NO_DELAYS: dict[str, str] = {"method": "none"}
#: Variables of an encoding store that hold the fitted model.
ENCODER_VARIABLES = ("coef", "design_mean", "feature_mean", "feature_scale", "target_mean")


def _design_columns(
    spaces: Sequence[str], n_features: Sequence[int], delays: Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """Space, input column and lag of every design column (the order the fit uses)."""
    lags = [int(d) for d in delays.get("lags", [1, 2, 3, 4])] if delays["method"] == "fir" else [0]
    space, column, lag = [], [], []
    for name, n in zip(spaces, n_features, strict=True):
        for d in lags:
            space += [name] * n
            column += list(range(n))
            lag += [d] * n
    return {
        "design_space": np.array(space, dtype=object),
        "design_input": np.array(column, dtype=np.int64),
        "design_lag": np.array(lag, dtype=np.int64),
    }


def encoder_dataset(
    *,
    coef: np.ndarray,
    spaces: Sequence[str],
    n_features: Sequence[int],
    delays: Mapping[str, Any],
    variants: Sequence[str],
    design_mean: np.ndarray,
    feature_mean: np.ndarray,
    feature_scale: np.ndarray,
    target_mean: np.ndarray,
    units: str,
    target_dims: Sequence[str] = ("voxel",),
) -> xr.Dataset:
    """The variables of a fitted encoding model, to merge into its store.

    Parameters
    ----------
    coef : ndarray, shape (n_design, *target_shape)
        Ridge coefficients on the centred design (each target's chosen variant).
    spaces : sequence of str
        Feature spaces, in the design's order.
    n_features : sequence of int
        Input features of each space (before delays).
    delays : dict
        The ``delays`` section the design was built with.
    variants : sequence of str
        The HRF models of a library, or the one delay model.
    design_mean : ndarray, shape (n_variants, n_design)
        Training mean of the design, subtracted before ``coef``.
    feature_mean, feature_scale : ndarray, shape (n_variants, n_inputs)
        Standardisation of the input features (training statistics).
    target_mean : ndarray, shape target_shape
        Training mean of each target, added to the prediction.
    units : str
        Units of the targets.
    target_dims : sequence of str
        Dims of the targets: ``("voxel",)``, or ``("channel", "latency")`` for EEG.

    Returns
    -------
    ds : xarray.Dataset
        Dims ``design`` (coordinates ``design_space``, ``design_input``: column of that
        space's features, ``design_lag``: TRs, 0 for HRF or no delays), ``input``
        (``input_space``, ``input_index``), ``variant`` and the targets' dims.
    """
    columns = _design_columns(spaces, n_features, delays)
    input_space = np.concatenate(
        [np.full(n, s, dtype=object) for s, n in zip(spaces, n_features, strict=True)]
    )
    coords = {
        **{name: ("design", values) for name, values in columns.items()},
        "variant": ("variant", np.array(list(variants), dtype=object)),
        "input_space": ("input", input_space),
        "input_index": ("input", np.concatenate([np.arange(n) for n in n_features])),
    }
    data = {
        "coef": (
            ("design", *target_dims),
            np.asarray(coef, dtype=np.float32),
            {
                "units": f"{units} per s.d." if units else "1",
                "long_name": "ridge coefficients on the centred, standardised, delayed design "
                "(of each target's chosen HRF variant)",
            },
        ),
        "design_mean": (
            ("variant", "design"),
            np.asarray(design_mean, dtype=np.float32),
            {"units": "s.d.", "long_name": "training mean of the design (subtracted)"},
        ),
        "feature_mean": (
            ("variant", "input"),
            np.asarray(feature_mean, dtype=np.float64),
            {"units": "a.u.", "long_name": "training mean of each feature (standardisation)"},
        ),
        "feature_scale": (
            ("variant", "input"),
            np.asarray(feature_scale, dtype=np.float64),
            {
                "units": "a.u.",
                "long_name": "training standard deviation of each feature (standardisation)",
            },
        ),
        "target_mean": (
            tuple(target_dims),
            np.asarray(target_mean, dtype=np.float32),
            {"units": units, "long_name": "training mean of each target (added back)"},
        ),
    }
    return xr.Dataset(data, coords=coords)


def filter_like_data(X: np.ndarray, basis: np.ndarray | None) -> np.ndarray:
    """Remove from a run's design what the cleaning removed from its BOLD.

    Parameters
    ----------
    X : ndarray, shape (n_times, n_features)
        Delayed design of one run.
    basis : ndarray, shape (n_times, n_nuisance) | None
        Orthonormal nuisance basis of the run (``nuisance_basis`` of the preprocessed
        store); ``None`` leaves ``X`` unchanged.

    Returns
    -------
    X_filtered : ndarray, shape (n_times, n_features)
        ``(I - Q Qᵀ) X``, the same bits for any number of threads.
    """
    if basis is None or basis.shape[1] == 0:
        return X
    return X - matmul(basis, matmul(basis.T, X))


def _check_encoder(encoder: xr.Dataset) -> None:
    missing = [name for name in ENCODER_VARIABLES if name not in encoder]
    needs_tr = (encoder.attrs.get("delays") or {}).get("method") == "hrf"
    if missing or "delays" not in encoder.attrs or (needs_tr and "tr" not in encoder.attrs):
        raise ValueError(
            "encoder must be an encoding store with the fitted model (variables "
            f"{list(ENCODER_VARIABLES)}, attributes `delays` and `tr`), got one without "
            f"{missing or ['delays/tr']} instead."
        )


def _design(
    encoder: xr.Dataset,
    features: Mapping[str, np.ndarray],
    variant: int,
    variants: Mapping[str, np.ndarray],
    nuisance: np.ndarray | None,
) -> np.ndarray:
    """The centred design of one run for one HRF variant, shape (n_times, n_design)."""
    spaces = list(dict.fromkeys(str(s) for s in encoder["input_space"].values))
    input_space = encoder["input_space"].values
    mean = encoder["feature_mean"].values[variant]
    scale = encoder["feature_scale"].values[variant]
    delays = dict(encoder.attrs["delays"])
    if len(delay_variants(delays)) > 1:
        # the library is the encoder's own (one convolution per model of the same
        # aligned features): the features carry no variant columns to pick from
        variants = {}
    delays = variant_delays(delays, variant)
    tr = float(encoder.attrs.get("tr", 1.0))  # only HRF delays use it
    blocks = []
    for space in spaces:
        if space not in features:
            raise ValueError(
                f"features must hold every feature space of the encoder {spaces}, got "
                f"{sorted(features)} instead."
            )
        X = np.asarray(features[space], dtype=np.float64)
        if space in variants:
            X = X[:, np.asarray(variants[space]) == variant]
        cols = input_space == space
        if X.ndim != 2 or X.shape[1] != cols.sum():
            raise ValueError(
                f"features[{space!r}] must have shape (n_times, {int(cols.sum())}), got "
                f"{X.shape} instead."
            )
        Xd = apply_delays((X - mean[cols]) / scale[cols], delays, tr)
        blocks.append(filter_like_data(Xd, nuisance).astype(np.float32))
    design = np.concatenate(blocks, axis=1)
    return design - encoder["design_mean"].values[variant].astype(np.float32)


def predict_run(
    encoder: xr.Dataset,
    features: Mapping[str, np.ndarray],
    *,
    variants: Mapping[str, np.ndarray] | None = None,
    nuisance: np.ndarray | None = None,
) -> np.ndarray:
    """Predict one run's responses from its aligned features with a stored model.

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store written by ``fit_encoding``.
    features : dict of str to ndarray, shape (n_times, n_features)
        Aligned features of the run per feature space (the ``features`` variable of
        the run's aligned stores; for a space aligned with an HRF library, every
        variant's columns).
    variants : dict of str to ndarray of int, shape (n_features,) | None
        HRF model index of each column of a library-aligned space (its store's
        ``hrf_variant`` coordinate).
    nuisance : ndarray, shape (n_times, n_nuisance) | None
        The run's orthonormal nuisance basis (``nuisance_basis`` of its preprocessed
        store); used when the model was fitted on a filtered design
        (attribute ``design_filtered``).

    Returns
    -------
    y_pred : ndarray, shape (n_times, *target_shape)
        float32 prediction (the model's own units, e.g. percent signal change); the
        targets' shape is that of ``target_mean`` ((n_voxels,), or (n_channels,
        n_latencies) for EEG).
    """
    _check_encoder(encoder)
    variants = dict(variants or {})
    basis = nuisance if encoder.attrs.get("design_filtered") else None
    target_shape = encoder["target_mean"].shape
    coef = encoder["coef"].values.reshape(encoder.sizes["design"], -1)
    names = [str(v) for v in encoder["variant"].values]
    if "hrf_model" in encoder:
        choice = np.array([names.index(str(m)) for m in encoder["hrf_model"].values])
    else:
        choice = np.zeros(coef.shape[1], dtype=int)
    out: np.ndarray | None = None
    for v in np.unique(choice):
        design = _design(encoder, features, int(v), variants, basis)
        targets = choice == v
        pred = matmul(design, coef[:, targets])
        if out is None:
            out = np.empty((design.shape[0], coef.shape[1]), dtype=np.float32)
        out[:, targets] = pred
    assert out is not None
    out = out + encoder["target_mean"].values.reshape(-1)
    return out.reshape(out.shape[0], *target_shape).astype(np.float32)

"""The response of a stored encoding model to each stimulus presented alone.

A single-trial model (``delays: {"method": "none"}``, stores of ``trial_encoding``)
maps one stimulus's feature row to one response per voxel; :func:`stimulus_response`
applies exactly the formula of :func:`neuroflow.encoding.stored.predict_run` to the
rows.

A time-series model (FIR or HRF delays) predicts a BOLD time series from features
sampled per TR. Its response to one stimulus is defined here as the **steady state**
of a sustained presentation: the stimulus's feature row held on long enough for the
delays to fill, i.e. the design row that a constant input produces once every lag
reaches back into the presentation.

- FIR delays: every lag block of the design holds the same standardised row.
- HRF delays: the kernel of :func:`neuroflow.models.delays.hrf_convolve` sums to 1, so
  the convolved design equals the standardised row. Features aligned with an HRF
  (one block of columns per model of a library) are read the same way: nilearn's
  kernels are normalised to sum 1 on their oversampled grid, so a sustained event's
  regressor tends to its amplitude, and every variant receives the stimulus's row.

The nuisance filtering of a model fitted on a filtered design (attribute
``design_filtered``) is **not** applied: it projects out drifts of a particular run,
and a constant input has no run. The steady state is therefore the response to the
sustained stimulus relative to the training mean of the design (``design_mean``),
plus the training mean of each target (``target_mean``), in the model's units. With
an HRF library, each voxel uses the standardisation and design mean of its chosen
model (``hrf_model``), as :func:`~neuroflow.encoding.stored.predict_run` does.

The feature rows are those of the extraction stores (variable ``features``, dims
(stimulus, feature)); their width must be the encoder's input width of each space
(alignment-level delays, HRF derivatives or an event regressor add columns that a
stimulus row does not have, and are refused by that check).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from neuroflow.encoding.stored import ENCODER_VARIABLES
from neuroflow.models import matmul
from neuroflow.rois import labelled_rois

__all__ = [
    "PoolPrediction",
    "check_encoder",
    "check_stimulus_features",
    "encoder_spaces",
    "predict_pool",
    "roi_means",
    "stimulus_response",
]

_METHODS = ("fir", "hrf", "none")


def check_encoder(encoder: xr.Dataset) -> str:
    """Check that ``encoder`` holds a fitted model and return its delay method.

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store (``fit_encoding`` or ``fit_trial_encoding``).

    Returns
    -------
    method : {"fir", "hrf", "none"}
    """
    if not isinstance(encoder, xr.Dataset):
        raise TypeError(f"encoder must be an xarray.Dataset, got {type(encoder).__name__} instead.")
    missing = [name for name in ENCODER_VARIABLES if name not in encoder]
    delays = encoder.attrs.get("delays")
    if missing or not isinstance(delays, Mapping):
        raise ValueError(
            "encoder must be an encoding store with the fitted model (variables "
            f"{list(ENCODER_VARIABLES)} and attribute `delays`), got one without "
            f"{missing or ['delays']} instead."
        )
    method = str(delays.get("method", "fir"))
    if method not in _METHODS:
        raise ValueError(
            f"encoder `delays.method` must be one of {_METHODS}, got {method!r} instead."
        )
    return method


def encoder_spaces(encoder: xr.Dataset) -> dict[str, int]:
    """Feature spaces of the encoder, in the design's order, with their input widths.

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store.

    Returns
    -------
    widths : dict of str to int
        Space name to number of input features (one HRF variant's columns).
    """
    input_space = [str(s) for s in encoder["input_space"].values]
    return {s: input_space.count(s) for s in dict.fromkeys(input_space)}


def check_stimulus_features(
    encoder: xr.Dataset, features: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Validate one feature row per stimulus for every space of the encoder.

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store.
    features : dict of str to ndarray, shape (n_stimuli, n_features)
        Feature rows per space; extra spaces are ignored.

    Returns
    -------
    features : dict of str to ndarray, shape (n_stimuli, n_features)
        float64 rows of the encoder's spaces, in the design's order.
    """
    return _check_rows(encoder_spaces(encoder), features)


def _check_rows(
    widths: Mapping[str, int], features: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    missing = [s for s in widths if s not in features]
    if missing:
        raise ValueError(
            f"features must hold every feature space of the encoder {list(widths)}, got "
            f"{sorted(features)} instead (missing {missing})."
        )
    out: dict[str, np.ndarray] = {}
    n_stimuli = None
    for space, width in widths.items():
        X = np.asarray(features[space], dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != width:
            raise ValueError(
                f"features[{space!r}] must have shape (n_stimuli, {width}), got {X.shape} instead."
            )
        bad = int(np.size(X) - np.count_nonzero(np.isfinite(X)))
        if bad:
            raise ValueError(
                f"features[{space!r}] must be finite, got {bad} NaN or infinite value(s) instead."
            )
        if n_stimuli is not None and X.shape[0] != n_stimuli:
            raise ValueError(
                f"features[{space!r}] must have {n_stimuli} rows like the other spaces, got "
                f"{X.shape[0]} instead."
            )
        n_stimuli = X.shape[0]
        out[space] = X
    return out


@dataclass
class _Model:
    """The fitted model of an encoding store as in-memory arrays."""

    widths: dict[str, int]  # space -> input features
    coef: np.ndarray  # (n_design, n_targets)
    target_mean: np.ndarray  # (n_targets,)
    feature_mean: np.ndarray  # (n_variants, n_inputs)
    feature_scale: np.ndarray  # (n_variants, n_inputs)
    design_mean: np.ndarray  # (n_variants, n_design), float32
    choice: np.ndarray  # (n_targets,), variant of each target
    index: np.ndarray  # (n_design,), input column of each design column

    @classmethod
    def read(cls, encoder: xr.Dataset) -> _Model:
        check_encoder(encoder)
        widths = encoder_spaces(encoder)
        names = [str(v) for v in encoder["variant"].values]
        # targets flattened in C order: (channel, latency) of EEG models become one axis
        coef = np.asarray(encoder["coef"].values)
        coef = coef.reshape(coef.shape[0], -1)
        if "hrf_model" in encoder:
            # each target's HRF model, read as predict_run reads it
            choice = np.array([names.index(str(m)) for m in encoder["hrf_model"].values])
        else:
            choice = np.zeros(coef.shape[1], dtype=int)
        offsets = dict(zip(widths, np.cumsum([0, *widths.values()])[:-1], strict=True))
        index = np.array(
            [
                offsets[str(s)] + int(i)
                for s, i in zip(
                    encoder["design_space"].values, encoder["design_input"].values, strict=True
                )
            ],
            dtype=int,
        )
        return cls(
            widths=widths,
            coef=coef,
            target_mean=np.asarray(encoder["target_mean"].values).reshape(-1),
            feature_mean=np.asarray(encoder["feature_mean"].values),
            feature_scale=np.asarray(encoder["feature_scale"].values),
            design_mean=np.asarray(encoder["design_mean"].values).astype(np.float32),
            choice=choice.astype(int),
            index=index,
        )

    def response(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """Response to validated rows (design order), shape (n_stimuli, n_targets)."""
        X = np.concatenate([features[s] for s in self.widths], axis=1)  # float64
        out = np.empty((X.shape[0], self.coef.shape[1]), dtype=np.float32)
        for v in np.unique(self.choice):
            # standardise in float64, then float32 as the fit's design; every lag block
            # (FIR) reads the same row: the design once the delays have filled
            z = ((X - self.feature_mean[v]) / self.feature_scale[v]).astype(np.float32)
            design = z[:, self.index] - self.design_mean[v]
            cols = self.choice == v
            out[:, cols] = matmul(design, self.coef[:, cols])
        return (out + self.target_mean).astype(np.float32)


def stimulus_response(encoder: xr.Dataset, features: Mapping[str, np.ndarray]) -> np.ndarray:
    """The model's response to each stimulus presented alone.

    For a single-trial model (no delays) this is
    :func:`~neuroflow.encoding.stored.predict_run` applied to the rows; for a
    time-series model it is the steady state of the stimulus held on (see the module
    docstring; the design filtering of the fit is not applied).

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store with the fitted model (``coef``, ``design_mean``,
        ``feature_mean``, ``feature_scale``, ``target_mean``, attribute ``delays``).
    features : dict of str to ndarray, shape (n_stimuli, n_features)
        One feature row per stimulus for every feature space of the encoder.

    Returns
    -------
    response : ndarray, shape (n_stimuli, n_voxels)
        float32, in the model's units (those of ``target_mean``).
    """
    model = _Model.read(encoder)
    return model.response(_check_rows(model.widths, features))


def roi_means(response: np.ndarray, roi_labels: Sequence[object]) -> tuple[np.ndarray, list[str]]:
    """Mean response of the targets of each labelled region.

    Parameters
    ----------
    response : ndarray, shape (n_stimuli, n_voxels)
        Responses per stimulus and target.
    roi_labels : sequence, shape (n_voxels,)
        The ``roi`` coordinate; targets labelled :data:`neuroflow.rois.UNLABELLED`
        (or ``""``) belong to no region and are left out.

    Returns
    -------
    means : ndarray, shape (n_stimuli, n_rois)
        float64 means over each region's targets.
    rois : list of str
        Region names, sorted (:func:`neuroflow.rois.labelled_rois`).
    """
    response = np.asarray(response)
    labels = np.array([str(v) for v in roi_labels], dtype=object)
    if response.ndim != 2 or response.shape[1] != labels.size:
        raise ValueError(
            f"response must have shape (n_stimuli, {labels.size}) to match roi_labels, got "
            f"{response.shape} instead."
        )
    rois = labelled_rois(labels)
    return response @ _averaging_matrix(labels, rois), rois


def _averaging_matrix(labels: np.ndarray, rois: Sequence[str]) -> np.ndarray:
    """(n_voxels, n_rois) matrix whose product with responses gives region means."""
    weights = np.zeros((labels.size, len(rois)))
    for j, roi in enumerate(rois):
        member = labels == roi
        weights[member, j] = 1.0 / member.sum()
    return weights


@dataclass
class PoolPrediction:
    """Predictions of a stimulus pool, accumulated batch by batch.

    Attributes
    ----------
    ids : ndarray of str, shape (n_stimuli,)
        Stimulus ids in the order of the batches.
    rois : list of str
        Region names (plus ``"all"``, the mean over every target, when no target is
        labelled).
    roi_response : ndarray, shape (n_stimuli, n_rois)
        float32 region means.
    response : ndarray, shape (n_stimuli, n_voxels) | None
        float32 responses of every target (``keep_voxels=True`` only).
    tracked : ndarray, shape (n_stimuli, n_tracked) | None
        float32 responses of the targets named by ``track``.
    """

    ids: np.ndarray
    rois: list[str]
    roi_response: np.ndarray
    response: np.ndarray | None = None
    tracked: np.ndarray | None = None


def _chunks(
    feature_batches: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]], batch_size: int
) -> Iterator[tuple[list[str], dict[str, np.ndarray]]]:
    """Split incoming batches into chunks of at most ``batch_size`` rows."""
    for ids, rows in feature_batches:
        ids = [str(i) for i in ids]
        for start in range(0, len(ids), batch_size):
            stop = start + batch_size
            yield ids[start:stop], {s: np.asarray(X)[start:stop] for s, X in rows.items()}


def _responses(
    model: _Model,
    feature_batches: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]],
    batch_size: int,
) -> Iterator[tuple[list[str], np.ndarray]]:
    """Validated chunks of at most ``batch_size`` stimuli and the model's responses,
    shape (n_batch, n_targets) with the targets flattened."""
    for batch_ids, rows in _chunks(feature_batches, batch_size):
        checked = _check_rows(model.widths, rows)
        n_rows = next(iter(checked.values())).shape[0]
        if len(batch_ids) != n_rows:
            raise ValueError(
                f"each batch must have one id per feature row, got {len(batch_ids)} ids for "
                f"{n_rows} rows instead."
            )
        yield batch_ids, model.response(checked)


def predict_pool(
    encoder: xr.Dataset,
    feature_batches: Iterable[tuple[Sequence[str], Mapping[str, np.ndarray]]],
    *,
    keep_voxels: bool = False,
    batch_size: int = 256,
    track: Sequence[int] | None = None,
) -> PoolPrediction:
    """Stream a stimulus pool through :func:`stimulus_response`, batch by batch.

    Only the region means (and the responses of the ``track`` targets) are kept per
    stimulus unless ``keep_voxels``; the per-target responses of one batch of at most
    ``batch_size`` stimuli are the largest transient, so memory does not grow with the
    pool beyond the ``(n_stimuli, n_rois)`` output.

    Parameters
    ----------
    encoder : xarray.Dataset
        An encoding store with the fitted model and a ``roi`` coordinate on its
        targets (without one, the single region ``"all"``).
    feature_batches : iterable of (sequence of str, dict of str to ndarray)
        ``(ids, {space: rows})`` with rows of shape (n_batch, n_features) per space.
    keep_voxels : bool
        Also return the (n_stimuli, n_voxels) responses.
    batch_size : int
        Most stimuli multiplied at once (larger incoming batches are split).
    track : sequence of int | None
        Positions of targets whose responses are kept (ranking per voxel or channel).

    Returns
    -------
    prediction : PoolPrediction
    """
    model = _Model.read(encoder)
    if not (isinstance(batch_size, int | np.integer) and batch_size >= 1):
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r} instead.")
    n_targets = int(model.coef.shape[1])
    labels = (
        np.array([str(v) for v in encoder["roi"].values], dtype=object)
        if "roi" in encoder.coords
        else np.full(n_targets, "all", dtype=object)
    )
    rois = labelled_rois(labels)
    if not rois:
        labels, rois = np.full(n_targets, "all", dtype=object), ["all"]
    weights = _averaging_matrix(labels, rois)
    tracked_idx = None if track is None else np.asarray(list(track), dtype=int)
    if (
        tracked_idx is not None
        and tracked_idx.size
        and (tracked_idx.min() < 0 or tracked_idx.max() >= n_targets)
    ):
        raise ValueError(
            f"track must hold target positions in [0, {n_targets}), got {tracked_idx.tolist()} "
            "instead."
        )
    ids: list[str] = []
    means: list[np.ndarray] = []
    voxels: list[np.ndarray] = []
    tracked: list[np.ndarray] = []
    for batch_ids, response in _responses(model, feature_batches, int(batch_size)):
        ids += batch_ids
        means.append((response @ weights).astype(np.float32))
        if keep_voxels:
            voxels.append(response)
        if tracked_idx is not None:
            tracked.append(response[:, tracked_idx])
        del response
    n_rois = len(rois)
    return PoolPrediction(
        ids=np.array(ids, dtype=object),
        rois=list(rois),
        roi_response=np.concatenate(means) if means else np.zeros((0, n_rois), np.float32),
        response=(
            (np.concatenate(voxels) if voxels else np.zeros((0, n_targets), np.float32))
            if keep_voxels
            else None
        ),
        tracked=(
            (np.concatenate(tracked) if tracked else np.zeros((0, tracked_idx.size), np.float32))
            if tracked_idx is not None
            else None
        ),
    )

"""Entry point of the evaluation stage.

:func:`evaluate_model` scores one prediction store (one subject × model) per target:
r and R², noise ceilings, permutation inference. The summary of every subject's and
model's scores is :func:`neuroflow.evaluation.summary_stage.summarize_scores`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.config import merge_defaults
from neuroflow.evaluation.metrics import pearson_r, r2_score
from neuroflow.evaluation.noise_ceiling import estimate_noise_ceiling, normalize_score
from neuroflow.evaluation.permutation import fdr_correction
from neuroflow.evaluation.significance import PermutationInference, permutation_inference

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "block_length_samples",
    "evaluate_model",
    "exceeds_ceiling",
    "flatten_targets",
    "unflatten_targets",
]

#: Bumped when the meaning of the stage's outputs changes.
FORMAT_VERSION = 6
#: Defaults of the ``evaluation`` config section (mirrors the JSON Schema).
DEFAULT_CONFIG: dict[str, Any] = {
    "metrics": ["r_per_repeat"],
    "noise_ceiling": {
        "method": "split_half",
        "n_splits": 20,
        "seed": 0,
        "min_ceiling_r": 0.2,
        "min_separation_s": 12.0,
    },
    "permutation": {
        "n_permutations": 1000,
        "method": "block",
        "block_length_s": 20.0,
        "block_length_trs": None,
        "seed": 0,
        "alternative": "greater",
        "tail": "gaussian",
        "prewhiten": 2,
    },
    "fdr": {"alpha": 0.05, "method": "bh"},
    "fwer": {"enabled": True, "family": "all", "alpha": 0.05},
    "cluster": {"enabled": False, "threshold": 3.1, "connectivity": 26, "alpha": 0.05},
    "topk_percent": 10.0,
    "plots": {
        "enabled": True,
        "formats": ["png"],
        "brain_map": "glass_brain",
        "mask_nonsignificant": True,
        "dpi": 100,
    },
}
_REQUIRED_ATTRS = ("subject", "model", "feature_spaces", "tr")
#: Flat target dim the per-target code works on when a store's targets span several
#: dims (EEG: channel x latency); never written.
FLAT_TARGET_DIM = "target"
#: Dim of the per-latency time course of the test r (``r_course``) in EEG score stores.
COURSE_DIM = "latency"
#: Optional variable of a prediction store: other predictions of the same model (each
#: seed of an ensemble, the ensemble without one feature space), scored beside ``y_pred``.
VARIANT_VARIABLE = "y_pred_variant"
#: Dim of the variants, in prediction stores and score stores.
VARIANT_DIM = "variant"
_NA = "n/a"


def _with_defaults(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The section with missing keys filled from :data:`DEFAULT_CONFIG` (unknown keys: error)."""
    return merge_defaults(DEFAULT_CONFIG, config, "evaluation")


def block_length_samples(permutation: Mapping[str, Any], tr: float, n_times: int) -> int:
    """Permutation block length in samples, from seconds or TRs.

    Parameters
    ----------
    permutation : dict
        The ``permutation`` sub-section (``block_length_trs`` wins when set).
    tr : float
        Sampling interval of the time axis, in seconds.
    n_times : int
        Number of test time points.

    Returns
    -------
    block_length : int
        At least 1; reduced (with a warning) so that at least 2 blocks fit.
    """
    if permutation.get("block_length_trs") is not None:
        length = int(permutation["block_length_trs"])
    else:
        if not tr > 0:
            raise ValueError(f"`tr` must be a positive float, got {tr!r} instead.")
        length = max(1, round(float(permutation["block_length_s"]) / tr))
    longest = max(1, n_times // 2)
    if length > longest:
        warnings.warn(
            f"A permutation block of {length} samples leaves fewer than 2 blocks in "
            f"{n_times} test time points; using {longest} samples instead.",
            RuntimeWarning,
            stacklevel=2,
        )
        length = longest
    return length


def _load_prediction(path: Path) -> tuple[xr.Dataset, str, tuple[str, ...]]:
    """Open and check a prediction store; return it with its sample dim and target dims.

    fMRI stores have one target dim (``voxel``); EEG stores a (channel, latency) map.
    """
    ds = open_dataset(path)
    for name in ("y_pred", "y_test"):
        if name not in ds:
            raise ValueError(f"{path}: variable `{name}` is missing from the prediction store.")
    y_pred, y_test = ds["y_pred"], ds["y_test"]
    if y_pred.ndim < 2:
        raise ValueError(
            f"{path}: `y_pred` must have dims (time, voxel) or (stimulus, channel, latency), "
            f"got {y_pred.dims} instead."
        )
    time_dim, *target_dims = y_pred.dims
    if FLAT_TARGET_DIM in target_dims and len(target_dims) > 1:
        raise ValueError(
            f"{path}: `y_pred` must not have a `{FLAT_TARGET_DIM}` dim beside other target "
            f"dims, got {y_pred.dims} instead."
        )
    if y_test.dims != ("repeat", *y_pred.dims):
        raise ValueError(
            f"{path}: `y_test` must have dims {('repeat', *y_pred.dims)}, "
            f"got {y_test.dims} instead."
        )
    if y_test.shape[1:] != y_pred.shape:
        raise ValueError(
            f"{path}: `y_test` must have shape (n_repeats, "
            f"{', '.join(map(str, y_pred.shape))}) like `y_pred`, got {y_test.shape} instead."
        )
    if y_test.shape[0] < 1:
        raise ValueError(f"{path}: `y_test` must hold at least 1 repeat, got 0 instead.")
    missing = [a for a in _REQUIRED_ATTRS if a not in ds.attrs]
    if missing:
        raise ValueError(f"{path}: attribute(s) {missing} missing from the prediction store.")
    if "roi" not in ds.coords:
        raise ValueError(f"{path}: coordinate `roi` is missing from the prediction store.")
    if not set(ds["roi"].dims) <= set(target_dims):
        raise ValueError(
            f"{path}: coordinate `roi` must lie on the target dims {tuple(target_dims)}, got "
            f"dims {ds['roi'].dims} instead."
        )
    if VARIANT_VARIABLE in ds:
        _check_variants(path, ds[VARIANT_VARIABLE], y_pred)
    return ds, time_dim, tuple(target_dims)


def _check_variants(path: Path, variants: xr.DataArray, y_pred: xr.DataArray) -> None:
    """Check that ``y_pred_variant`` is (variant, <dims of y_pred>) with named variants."""
    if variants.dims != (VARIANT_DIM, *y_pred.dims):
        raise ValueError(
            f"{path}: `{VARIANT_VARIABLE}` must have dims {(VARIANT_DIM, *y_pred.dims)}, "
            f"got {variants.dims} instead."
        )
    if variants.shape[1:] != y_pred.shape:
        raise ValueError(
            f"{path}: `{VARIANT_VARIABLE}` must have shape (n_variants, "
            f"{', '.join(map(str, y_pred.shape))}) like `y_pred`, got {variants.shape} instead."
        )
    if VARIANT_DIM not in variants.coords:
        raise ValueError(
            f"{path}: `{VARIANT_VARIABLE}` must have a `{VARIANT_DIM}` coordinate naming each "
            "variant, got none instead."
        )
    names = [str(v) for v in variants[VARIANT_DIM].values]
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(
            f"{path}: the `{VARIANT_DIM}` names must be unique and non-empty, got {names} instead."
        )


def flatten_targets(ds: xr.Dataset, dims: Sequence[str]) -> xr.Dataset:
    """Stack a store's target dims into one flat :data:`FLAT_TARGET_DIM` dim.

    Parameters
    ----------
    ds : xarray.Dataset
        Store whose per-target variables lie on ``dims`` (e.g. (channel, latency)).
    dims : sequence of str
        The target dims, in the order they are stacked (the last varies fastest).

    Returns
    -------
    flat : xarray.Dataset
        ``ds`` with ``dims`` replaced by ``target`` (size the product of theirs): every
        variable and coordinate on any of ``dims`` is broadcast over all of them and
        reshaped in C order, so :func:`unflatten_targets` inverts it. The stacked dims'
        coordinates become plain (non-index) coordinates on ``target``; no MultiIndex is
        left. ``ds`` is returned as is when ``dims`` is one dim.
    """
    dims = tuple(dims)
    if len(dims) == 1:
        return ds
    return ds.stack({FLAT_TARGET_DIM: dims}, create_index=False)


def unflatten_targets(
    out: xr.Dataset, source: xr.Dataset, dims: Sequence[str], flat_dim: str = FLAT_TARGET_DIM
) -> xr.Dataset:
    """Put the per-target variables of ``out`` back on the target dims of ``source``.

    Parameters
    ----------
    out : xarray.Dataset
        Variables on ``flat_dim`` (last), as :func:`flatten_targets` orders it; no
        coordinates on ``flat_dim``.
    source : xarray.Dataset
        The store before flattening: gives the sizes of ``dims`` and their coordinates.
    dims : sequence of str
        The target dims of ``source``, in stacking order.
    flat_dim : str
        The flat dim of ``out``.

    Returns
    -------
    out : xarray.Dataset
        Every variable on ``flat_dim`` reshaped to ``(..., *dims)``, with the coordinates
        of ``source`` that lie on ``dims`` only (dimension coordinates and e.g. ``roi`` on
        ``channel``), attributes included.
    """
    dims = tuple(dims)
    sizes = tuple(source.sizes[d] for d in dims)
    data_vars = {}
    for name, var in out.data_vars.items():
        if flat_dim not in var.dims:
            data_vars[name] = var.variable
            continue
        if var.dims[-1] != flat_dim:
            raise ValueError(
                f"`{name}` must have `{flat_dim}` as its last dim, got {var.dims} instead."
            )
        values = np.asarray(var.values).reshape(*var.shape[:-1], *sizes)
        data_vars[name] = xr.Variable((*var.dims[:-1], *dims), values, var.attrs)
    coords = {
        name: coord.variable.load()
        for name, coord in source.coords.items()
        if coord.dims and set(coord.dims) <= set(dims)
    }
    coords.update({n: c.variable for n, c in out.coords.items() if flat_dim not in c.dims})
    return xr.Dataset(data_vars, coords=coords, attrs=out.attrs)


def _significance(
    ds: xr.Dataset,
    y_mean: np.ndarray,
    y_pred: np.ndarray,
    cfg: Mapping[str, Any],
    block: int,
    prediction: Path,
    target_dim: str,
) -> PermutationInference | None:
    """Permutation inference of one store, or None when no test applies.

    The max-statistic family is every target (``fwer.family: all``) or each ROI
    (``roi``); cluster inference needs voxel indices (``i``, ``j``, ``k`` on the target
    dim) and is left out, with a note, for parcels and channels.
    """
    perm = cfg["permutation"]
    n_times = y_mean.shape[0]
    if perm["n_permutations"] <= 0:
        return None
    if n_times < 4:
        logger.warning(
            "%s: %d test samples are too few for a permutation test (4 are needed); "
            "p-values are left undefined.",
            prediction,
            n_times,
        )
        return None
    groups = None
    if cfg["fwer"]["enabled"]:
        if cfg["fwer"]["family"] == "roi":
            groups = np.array([str(v) for v in ds["roi"].values], dtype=object)
        else:
            groups = np.zeros(y_mean.shape[1], dtype=int)
    ijk = None
    notes: list[str] = []
    if cfg["cluster"]["enabled"]:
        if all(c in ds.coords and ds[c].dims == (target_dim,) for c in ("i", "j", "k")):
            ijk = np.stack([np.asarray(ds[c].values, dtype=np.int64) for c in "ijk"], axis=1)
        else:
            notes.append(
                f"cluster inference skipped: the targets ({target_dim}) have no voxel "
                "indices i, j, k"
            )
            logger.info("%s: %s.", prediction, notes[-1])
    result = permutation_inference(
        y_mean,
        y_pred,
        n_permutations=perm["n_permutations"],
        method=perm["method"],
        block_length=block,
        seed=perm["seed"],
        alternative=perm["alternative"],
        tail=perm["tail"],
        # independent samples (epochs, single trials) need no whitening
        prewhiten=0 if ds.attrs.get("exchangeable_samples") else int(perm["prewhiten"]),
        **_nuisance(ds, n_times),
        fwer_groups=groups,
        cluster_ijk=ijk,
        cluster_threshold=float(cfg["cluster"]["threshold"]),
        cluster_connectivity=int(cfg["cluster"]["connectivity"]),
    )
    result.notes.extend(notes)
    return result


def _nuisance(ds: xr.Dataset, n_times: int) -> dict[str, Any]:
    """The held-out runs' nuisance basis and run lengths, when the store has them."""
    if ds.attrs.get("exchangeable_samples") or "test_nuisance" not in ds:
        return {}
    basis = np.asarray(ds["test_nuisance"].values, dtype=np.float64)
    segments = [int(v) for v in ds.attrs.get("test_segments", [n_times])]
    if basis.shape[0] != n_times or sum(segments) != n_times:
        return {}
    if basis.shape[1] > n_times - 10 - 4 * len(segments):
        return {}
    return {"nuisance": basis, "segments": segments}


def evaluate_model(
    *,
    prediction: Path,
    output: Path,
    config: dict,
    provenance: dict,
) -> Path:
    """Score one model's test-set predictions per target.

    Parameters
    ----------
    prediction : Path
        Store from an encoding stage with ``y_pred`` (time, voxel) and ``y_test``
        (repeat, time, voxel), coords ``roi`` (and ``i/j/k``, ``x/y/z``) on
        ``voxel``, attrs ``subject``, ``model``, ``feature_spaces``, ``tr``
        (plus ``affine`` and ``mask_shape`` for brain maps). The targets may span
        several dims, as the EEG encoding maps do: ``y_pred`` (stimulus, channel,
        latency), ``y_test`` (repeat, stimulus, channel, latency) and ``roi`` on
        ``channel``; they are scored on a temporary flat ``target`` dim (see
        :func:`flatten_targets`) and written back on their own dims. An optional
        ``y_pred_variant`` (variant, <dims of y_pred>) with a ``variant`` coordinate
        holds other predictions of the model (e.g. ``seed-0``: one seed of an
        ensemble; ``without-<space>``: the ensemble with a feature space left out).
    output : Path
        Score store to write.
    config : dict
        The ``evaluation`` config section.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The score store, on the input's target dims (``voxel`` for fMRI, (channel, latency)
        for EEG, with the input's coords on them): ``r``, ``r2`` (against the repeat mean),
        ``noise_ceiling_r`` (ceiling on r), ``noise_ceiling_r2`` (explainable variance
        fraction), ``r_normalized`` (r / ceiling), ``r2_normalized`` (R² / explainable
        fraction), ``noise_ceiling_r_low`` / ``noise_ceiling_r_high`` (95 % interval of the
        split-half ceiling; NaN for other methods), ``exceeds_ceiling`` (bool: r above that
        interval, see :func:`exceeds_ceiling`), ``cv_score`` (the model's cross-validated
        score on the training data, when the input has one), ``p_value`` (permutation, +1
        corrected), ``p_permutation``, ``p_fdr`` and ``significant`` (FDR), ``p_fwer`` and
        ``significant_fwer`` (when that test runs); optional ``r_per_repeat`` /
        ``r2_per_repeat`` on (repeat, voxel) or (repeat, channel, latency). EEG stores (a
        ``latency`` target dim) add ``r_course`` (latency,): ``r`` averaged over channels,
        NaNs ignored. Stores with variants add ``variant_r``, ``variant_r2`` and
        ``variant_r_normalized`` (variant, <target dims>), each variant scored as ``r``,
        ``r2`` and ``r_normalized`` are (same repeat mean, same noise ceiling, no
        permutation test), with the ``variant`` coordinate. Attributes are copied from the
        input and record the test settings (``noise_ceiling_min_separation_s``: repeats of a
        test stimulus closer than this in one run are not split against each other, for
        stores with ``test_onset``; ``noise_ceiling_notes``).
    """
    cfg = _with_defaults(config)
    prediction = Path(prediction)
    source, _, target_dims = _load_prediction(prediction)
    ds = flatten_targets(source, target_dims)
    target_dim = target_dims[0] if len(target_dims) == 1 else FLAT_TARGET_DIM
    y_pred = np.asarray(ds["y_pred"].values, dtype=np.float64)
    y_test = np.asarray(ds["y_test"].values, dtype=np.float64)
    n_repeats, n_times, _ = y_test.shape
    y_mean = y_test.mean(axis=0)

    r = pearson_r(y_mean, y_pred)
    r2 = r2_score(y_mean, y_pred)
    nc = cfg["noise_ceiling"]
    onsets, runs = _presentation_times(ds, prediction)
    separation = float(nc["min_separation_s"]) if onsets is not None else 0.0
    ceiling = estimate_noise_ceiling(
        y_test,
        method=nc["method"],
        n_splits=nc["n_splits"],
        seed=nc["seed"],
        onsets=onsets,
        groups=runs,
        min_separation=separation,
    )
    ceiling_r = ceiling.r
    ceiling_r2 = ceiling_r**2

    perm = cfg["permutation"]
    if ds.attrs.get("exchangeable_samples"):
        # Samples are independent test stimuli (EEG epochs, single trials), not a time series.
        block = 1
    else:
        block = block_length_samples(perm, float(ds.attrs["tr"]), n_times)
    inference = _significance(ds, y_mean, y_pred, cfg, block, prediction, target_dim)
    p_value = inference.p if inference is not None else np.full(r.shape, np.nan)
    p_fdr, significant = fdr_correction(
        p_value, alpha=cfg["fdr"]["alpha"], method=cfg["fdr"]["method"]
    )
    min_ceiling = float(nc["min_ceiling_r"])
    reliable = np.nan_to_num(ceiling_r, nan=-np.inf) >= min_ceiling
    exceeds = exceeds_ceiling(r, ceiling_r, ceiling.high, reliable)

    one = {"units": "1"}
    normalized_note = {
        **one,
        "min_ceiling_r": min_ceiling,
        "note": f"undefined (NaN) where noise_ceiling_r < {min_ceiling}",
    }
    variables = {
        "r": (r, {**one, "long_name": "Pearson r against the repeat mean"}),
        "r2": (r2, {**one, "long_name": "R² against the repeat mean"}),
        "noise_ceiling_r": (ceiling_r, {**one, "method": nc["method"]}),
        "noise_ceiling_r_low": (
            ceiling.low,
            {**one, "long_name": "lower end of the 95 % interval of noise_ceiling_r"},
        ),
        "noise_ceiling_r_high": (
            ceiling.high,
            {**one, "long_name": "upper end of the 95 % interval of noise_ceiling_r"},
        ),
        "noise_ceiling_r2": (ceiling_r2, {**one, "long_name": "explainable variance fraction"}),
        "r_normalized": (
            np.where(reliable, normalize_score(r, ceiling_r), np.nan),
            normalized_note,
        ),
        "r2_normalized": (
            np.where(reliable, normalize_score(r2, ceiling_r2), np.nan),
            normalized_note,
        ),
        "p_value": (
            p_value,
            {**one, "alternative": perm["alternative"], "tail": perm["tail"]},
        ),
        "p_permutation": (
            inference.p_exact if inference is not None else np.full(r.shape, np.nan),
            {**one, "long_name": "exact permutation p, (1 + count) / (1 + n_permutations)"},
        ),
        "p_fdr": (p_fdr, {**one, "method": cfg["fdr"]["method"]}),
    }
    if inference is not None and inference.p_fwer is not None:
        variables["p_fwer"] = (
            inference.p_fwer,
            {**one, "method": "max-statistic", "family": cfg["fwer"]["family"]},
        )
    if "cv_score" in ds and ds["cv_score"].dims == (target_dim,):
        # the training runs' cross-validated score: what may choose among models
        # (a layer of a sweep) without looking at the test set
        variables["cv_score"] = (
            np.asarray(ds["cv_score"].values, dtype=np.float64),
            {**one, "long_name": "cross-validated score on the training data"},
        )
    clusters = inference.clusters if inference is not None else None
    if clusters is not None:
        variables["p_cluster"] = (
            clusters.target_p(),
            {**one, "method": "cluster mass", "threshold": float(cfg["cluster"]["threshold"])},
        )
    data_vars = {
        name: xr.Variable((target_dim,), values.astype(np.float32), attrs)
        for name, (values, attrs) in variables.items()
    }
    data_vars["significant"] = xr.Variable(
        (target_dim,), significant, {"alpha": float(cfg["fdr"]["alpha"]), "correction": "fdr"}
    )
    data_vars["exceeds_ceiling"] = xr.Variable(
        (target_dim,),
        exceeds,
        {
            "long_name": "r above the noise ceiling beyond its uncertainty",
            "note": "r > noise_ceiling_r_high (> noise_ceiling_r where the interval is "
            "undefined) where r_normalized is defined; an r_normalized above 1 without "
            "this flag is within the ceiling's uncertainty",
        },
    )
    if "p_fwer" in variables:
        alpha = float(cfg["fwer"]["alpha"])
        data_vars["significant_fwer"] = xr.Variable(
            (target_dim,), np.nan_to_num(inference.p_fwer, nan=1.0) <= alpha, {"alpha": alpha}
        )
    if clusters is not None:
        alpha = float(cfg["cluster"]["alpha"])
        data_vars["cluster_id"] = xr.Variable(
            (target_dim,), clusters.labels.astype(np.int32), {"note": "0: in no cluster"}
        )
        data_vars["significant_cluster"] = xr.Variable(
            (target_dim,), np.nan_to_num(clusters.target_p(), nan=1.0) <= alpha, {"alpha": alpha}
        )
    if "r_per_repeat" in cfg["metrics"]:
        values = pearson_r(y_test, y_pred[None]).astype(np.float32)
        data_vars["r_per_repeat"] = xr.Variable(("repeat", target_dim), values, one)
    if "r2_per_repeat" in cfg["metrics"]:
        values = r2_score(y_test, y_pred[None]).astype(np.float32)
        data_vars["r2_per_repeat"] = xr.Variable(("repeat", target_dim), values, one)
    variant_names: list[str] = []
    if VARIANT_VARIABLE in ds and ds.sizes[VARIANT_DIM]:
        variant_names = [str(v) for v in ds[VARIANT_DIM].values]
        data_vars.update(_variant_scores(ds[VARIANT_VARIABLE], y_mean, ceiling_r, reliable))
        data_vars["variant_r_normalized"].attrs.update(
            {k: v for k, v in normalized_note.items() if k != "units"}
        )

    flat = len(target_dims) > 1
    coords = {
        name: coord.variable.load()
        for name, coord in ds.coords.items()
        if not flat and set(coord.dims) <= {target_dim}
    }
    if any(v.dims[0] == "repeat" for v in data_vars.values()):
        coords["repeat"] = np.arange(n_repeats)
    if variant_names:
        coords[VARIANT_DIM] = np.asarray(variant_names, dtype=object)
    attrs = {k: v for k, v in ds.attrs.items() if k != PROVENANCE_KEY}
    attrs.update(
        n_repeats=int(n_repeats),
        n_test_times=int(n_times),
        noise_ceiling_method=nc["method"],
        noise_ceiling_min_separation_s=separation,
        noise_ceiling_n_samples=int(ceiling.n_samples),
        noise_ceiling_notes=list(ceiling.notes),
        permutation_method=perm["method"],
        permutation_block_samples=int(block),
        n_permutations=int(perm["n_permutations"]),
        p_value_tail=perm["tail"],
        prewhiten_order=0 if ds.attrs.get("exchangeable_samples") else int(perm["prewhiten"]),
        fdr_alpha=float(cfg["fdr"]["alpha"]),
        significance_notes=list(inference.notes) if inference is not None else [],
    )
    out = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    if flat:
        out = unflatten_targets(out, source, target_dims)
        if COURSE_DIM in target_dims:
            out["r_course"] = _r_course(out["r"], COURSE_DIM)
    return write_dataset(out, output, provenance=provenance)


def _presentation_times(ds: xr.Dataset, path: Path) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Onset and run of every test presentation, shape (n_repeats, n_stimuli) each.

    From ``test_onset`` and ``test_run`` (single-trial stores); (None, None) when the
    store has no ``test_onset``.
    """
    if "test_onset" not in ds:
        return None, None
    expected = ds["y_test"].dims[:2]
    for name in ("test_onset", "test_run"):
        if name in ds and ds[name].dims != expected:
            raise ValueError(
                f"{path}: `{name}` must have dims {expected} like the first two of "
                f"`y_test`, got {ds[name].dims} instead."
            )
    onsets = np.asarray(ds["test_onset"].values, dtype=np.float64)
    runs = None
    if "test_run" in ds:
        runs = np.array([str(v) for v in np.asarray(ds["test_run"].values).ravel()])
        runs = runs.reshape(onsets.shape)
    return onsets, runs


def exceeds_ceiling(
    r: np.ndarray, ceiling_r: np.ndarray, ceiling_high: np.ndarray, reliable: np.ndarray
) -> np.ndarray:
    """Where a score is above its noise ceiling by more than the ceiling's uncertainty.

    Parameters
    ----------
    r : ndarray, shape (n_targets,)
        Pearson r against the repeat mean.
    ceiling_r : ndarray, shape (n_targets,)
        Noise ceiling on r.
    ceiling_high : ndarray, shape (n_targets,)
        Upper end of its confidence interval (NaN where there is none).
    reliable : ndarray of bool, shape (n_targets,)
        Targets whose normalised score is defined.

    Returns
    -------
    exceeds : ndarray of bool, shape (n_targets,)
        ``r > ceiling_high`` (``r > ceiling_r`` where the interval is undefined) on
        ``reliable`` targets; False elsewhere and where r is NaN.
    """
    bound = np.where(np.isfinite(ceiling_high), ceiling_high, ceiling_r)
    with np.errstate(invalid="ignore"):
        return np.asarray(reliable, bool) & (np.asarray(r) > bound)


def _variant_scores(
    variants: xr.DataArray, y_mean: np.ndarray, ceiling_r: np.ndarray, reliable: np.ndarray
) -> dict[str, xr.Variable]:
    """Scores of every variant prediction against the repeat mean, as ``r`` is scored.

    Parameters
    ----------
    variants : xarray.DataArray, shape (n_variants, n_times, n_targets)
        The store's ``y_pred_variant`` on its flat target dim (read one variant at a
        time).
    y_mean : ndarray, shape (n_times, n_targets)
        Mean of the test repeats.
    ceiling_r : ndarray, shape (n_targets,)
        Noise ceiling on r.
    reliable : ndarray of bool, shape (n_targets,)
        Targets whose ceiling reaches ``min_ceiling_r``: elsewhere the normalised r is
        NaN, as for ``r_normalized``.

    Returns
    -------
    scores : dict of str to xarray.Variable
        ``variant_r``, ``variant_r2`` and ``variant_r_normalized``, each float32 of
        shape (n_variants, n_targets) on (variant, <target dim>).
    """
    dims = (VARIANT_DIM, variants.dims[-1])
    r = np.empty((variants.shape[0], y_mean.shape[1]))
    r2 = np.empty_like(r)
    for k in range(variants.shape[0]):
        prediction = np.asarray(variants[k].values, dtype=np.float64)
        r[k] = pearson_r(y_mean, prediction)
        r2[k] = r2_score(y_mean, prediction)
    normalized = np.where(reliable, normalize_score(r, ceiling_r), np.nan)
    one = {"units": "1"}
    return {
        "variant_r": xr.Variable(
            dims,
            r.astype(np.float32),
            {**one, "long_name": "Pearson r of each variant's prediction against the repeat mean"},
        ),
        "variant_r2": xr.Variable(
            dims,
            r2.astype(np.float32),
            {**one, "long_name": "R² of each variant's prediction against the repeat mean"},
        ),
        "variant_r_normalized": xr.Variable(
            dims,
            normalized.astype(np.float32),
            {**one, "long_name": "each variant's r divided by the noise ceiling on r"},
        ),
    }


def _r_course(r: xr.DataArray, dim: str) -> xr.DataArray:
    """Stored (float32) r averaged over every target dim but ``dim``, NaNs ignored."""
    others = [d for d in r.dims if d != dim]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN
        course = r.astype(np.float64).mean(others, skipna=True)
    return course.assign_attrs(
        units="1", long_name=f"Pearson r against the repeat mean, mean over {', '.join(others)}"
    )

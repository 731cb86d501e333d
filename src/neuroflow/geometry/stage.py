"""The ``geometry`` stage: representational geometry of every feature space and layer.

Inputs are the stores of the feature stage (:func:`neuroflow.features.extract.extract_features`
writes one store per layer, variable ``features`` with dims ``(stimulus, feature)`` and
attributes ``feature_set`` and ``layer``). Per store, on a set of stimuli, the stage
computes the metrics of :mod:`neuroflow.geometry.metrics`: the covariance eigenspectrum,
its participation ratio and power-law exponent and, given class labels, the class
manifolds' dimensionality, radius and separability (degenerate classes left out, counted
in ``n_degenerate_classes``) and, given which labelled stimuli form a held-out (shifted)
distribution, an out-of-distribution readout of the classes
(:func:`neuroflow.geometry.metrics.ood_readout`).

Layout of the output dataset (see :func:`geometry_of_features`): feature spaces have
layer lists of different lengths, so the ``layer`` dimension is the position of a layer
in its feature space's list (``0 .. n_layers - 1``, in the order the stores were given)
and the 2-D coordinates ``layer_name`` and ``layer_depth`` name each cell; cells past
the end of a shorter list have ``layer_name == ""``, NaN metrics and zero counts.

:func:`geometry_table` flattens the scalar metrics into a tidy table and
:func:`neuroflow.geometry.plotting.plot_geometry` draws each metric against layer depth,
beside scores of the same layers from other stages (encoding, RSA) when given. The labels
table is read by :mod:`neuroflow.geometry.labels`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from neuroflow.artifacts import PROVENANCE_KEY, open_dataset, write_dataset
from neuroflow.config import merge_defaults

from .labels import check_held_out, check_labels, labels_for, read_held_out
from .metrics import (
    class_manifold_geometry,
    eigenspectrum,
    ood_readout,
    participation_ratio,
    power_law_exponent,
)
from .plotting import plot_geometry

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "geometry_of_features",
    "geometry_table",
    "resolve_config",
    "write_geometry",
]

FORMAT_VERSION = 2

#: The default ``geometry`` section.
DEFAULT_CONFIG: dict[str, Any] = {
    # first and last rank (1-based) of the power-law fit; null: default_fit_range
    "fit_range": None,
    # folds of the cross-validated linear separability (fewer for small classes)
    "n_folds": 5,
    # seed of the fold shuffle
    "seed": 0,
    # eigenvalues from the SVD of the centred data ("svd") or the smaller Gram matrix
    # ("gram": faster, accurate relative to the largest eigenvalue only)
    "eigen_method": "svd",
    # shuffles of the held-out labels for the p-value of the out-of-distribution readout
    "ood_permutations": 1000,
}

#: Variables of the out-of-distribution readout, on ``(feature_space, layer)``.
OOD_METRICS = ("ood_in_accuracy", "ood_accuracy", "ood_chance", "ood_p_value")

#: Long name and units of every variable of the output.
_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "participation_ratio": (
        "participation ratio (sum of eigenvalues)^2 / sum of squared eigenvalues",
        "dimensions",
    ),
    "power_law_alpha": ("exponent alpha of the eigenspectrum fit eigenvalue_n ~ n^-alpha", "1"),
    "power_law_r2": ("R^2 of the log-log least-squares power-law fit", "1"),
    "power_law_fit_range": ("first and last rank (1-based) of the power-law fit", "1"),
    "n_stimuli": ("stimuli (rows) the geometry was computed on", "1"),
    "n_features": ("features (columns) of the layer", "1"),
    "n_eigenvalues": ("eigenvalues in `eigenspectrum` (the rest is zero padding)", "1"),
    "eigenspectrum": (
        "eigenvalues of the feature covariance, descending (zero-padded past n_eigenvalues)",
        "a.u.^2",
    ),
    "manifold_dimension": (
        "participation ratio of the within-class covariance of each class",
        "dimensions",
    ),
    "manifold_radius": (
        "RMS distance to the class centroid / distance of the centroid from the mean centroid",
        "1",
    ),
    "class_size": ("stimuli of each class", "1"),
    "fisher_ratio": (
        "Calinski-Harabasz ratio of between- to within-class variance per degree of freedom",
        "1",
    ),
    "linear_separability": (
        "cross-validated balanced accuracy of a linear classifier of the classes",
        "1",
    ),
    "n_degenerate_classes": (
        "classes left out of the class metrics (fewer than 2 members or zero variance)",
        "1",
    ),
    "class_metrics_note": ("classes left out and why; why the class metrics are NaN", "1"),
    "ood_in_accuracy": (
        "cross-validated balanced accuracy of the class readout on the in-distribution stimuli",
        "1",
    ),
    "ood_accuracy": (
        "balanced accuracy on the held-out distribution of the readout trained in-distribution",
        "1",
    ),
    "ood_chance": ("chance balanced accuracy of the readout, 1 / classes trained on", "1"),
    "ood_p_value": (
        "permutation p-value of ood_accuracy (held-out labels shuffled)",
        "1",
    ),
    "ood_n_test": ("held-out stimuli the readout was tested on", "1"),
}


def resolve_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """Fill the ``geometry`` section with defaults; unknown keys are errors.

    Parameters
    ----------
    config : dict | None
        The section as given.

    Returns
    -------
    config : dict
    """
    cfg = merge_defaults(DEFAULT_CONFIG, config, "geometry")
    fit_range = cfg["fit_range"]
    if fit_range is not None:
        if (
            not isinstance(fit_range, Sequence)
            or isinstance(fit_range, str)
            or len(fit_range) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in fit_range)
            or not 1 <= fit_range[0] <= fit_range[1]
        ):
            raise ValueError(
                "`geometry.fit_range` must be null or [first_rank, last_rank] with "
                f"1 <= first_rank <= last_rank, got {fit_range!r} instead."
            )
        cfg["fit_range"] = [int(v) for v in fit_range]
    if cfg["eigen_method"] not in ("svd", "gram"):
        raise ValueError(
            f"`geometry.eigen_method` must be 'svd' or 'gram', got {cfg['eigen_method']!r} instead."
        )
    if isinstance(cfg["n_folds"], bool) or not isinstance(cfg["n_folds"], int):
        raise ValueError(f"`geometry.n_folds` must be an int, got {cfg['n_folds']!r} instead.")
    if cfg["n_folds"] < 2:
        raise ValueError(f"`geometry.n_folds` must be at least 2, got {cfg['n_folds']} instead.")
    perms = cfg["ood_permutations"]
    if isinstance(perms, bool) or not isinstance(perms, int) or perms < 1:
        raise ValueError(
            f"`geometry.ood_permutations` must be a positive int, got {perms!r} instead."
        )
    return cfg


def _space_and_layer(key: str, attrs: Mapping[str, Any], path: Path) -> tuple[str, str]:
    """Feature space and layer of a store: its ``feature_set``/``layer`` attributes, else
    the key (``"space:layer"``), else the folder and file names."""
    space, _, layer = str(key).partition(":")
    space = str(attrs.get("feature_set") or space or path.parent.name)
    layer = str(attrs.get("layer") or layer or path.stem)
    return space, layer


def _store_rows(path: Path, stimuli: Sequence[str] | None) -> tuple[np.ndarray, dict[str, Any]]:
    """Feature rows (float64, shape (n_stimulus, n_feature)) and attributes of a store.

    ``stimuli`` None: every row, one per distinct file where the store records
    ``canonical_stimulus``. Otherwise the rows of those ids, a clip or narrative of a
    frame or word store as the mean of its rows
    (:func:`neuroflow.analysis_inputs.stimulus_features`).
    """
    from neuroflow.analysis_inputs import stimulus_features

    ds = open_dataset(path)
    if stimuli is None:
        features = ds["features"]
        if "canonical_stimulus" in ds.coords:
            own = np.array(
                [
                    str(a) == str(b)
                    for a, b in zip(
                        ds["stimulus"].values, ds["canonical_stimulus"].values, strict=True
                    )
                ]
            )
            features = features.isel(stimulus=np.flatnonzero(own))
        X = np.asarray(features.values, dtype=np.float64)
    else:
        X = stimulus_features(path, stimuli)
    bad = int(X.size - np.count_nonzero(np.isfinite(X)))
    if bad:
        raise ValueError(
            f"{path}: features must be finite, got {bad} NaN or infinite values instead."
        )
    return X, dict(ds.attrs)


def _layer_metrics(
    X: np.ndarray,
    labels: np.ndarray | None,
    cfg: Mapping[str, Any],
    held_out: np.ndarray | None = None,
) -> dict[str, Any]:
    """Every metric of one layer (``held_out``: boolean per row, the shifted stimuli)."""
    lam = eigenspectrum(X, method=cfg["eigen_method"])
    fit = power_law_exponent(lam, cfg["fit_range"])
    out: dict[str, Any] = {
        "eigenspectrum": lam,
        "participation_ratio": participation_ratio(lam),
        "power_law_alpha": fit.alpha,
        "power_law_r2": fit.r2,
        "power_law_fit_range": fit.fit_range,
        "n_stimuli": X.shape[0],
        "n_features": X.shape[1],
    }
    if labels is not None:
        out["classes"] = class_manifold_geometry(
            X,
            labels,
            n_folds=cfg["n_folds"],
            seed=cfg["seed"],
            method=cfg["eigen_method"],
        )
    if labels is not None and held_out is not None:
        out["ood"] = ood_readout(
            X[~held_out],
            labels[~held_out],
            X[held_out],
            labels[held_out],
            n_folds=cfg["n_folds"],
            n_permutations=cfg["ood_permutations"],
            seed=cfg["seed"],
        )
    return out


def _obj(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """Strings as an object array of ``str``."""
    return np.asarray([str(v) for v in values], dtype=object)


def geometry_of_features(
    feature_stores: Mapping[str, str | os.PathLike],
    *,
    labels: pd.Series | None,
    cfg: Mapping[str, Any] | None,
    provenance: Mapping[str, Any],
    held_out: pd.Series | None = None,
) -> xr.Dataset:
    """Geometry of every layer of every feature space.

    Parameters
    ----------
    feature_stores : dict of str to path-like
        Feature stores (one per layer, as written by
        :func:`neuroflow.features.extract.extract_features`), keyed e.g.
        ``"extractor:layer"``. The feature space and layer of a store are its
        ``feature_set`` and ``layer`` attributes (else the key's two parts); the
        stores of one space, in the order given, are its layer list.
    labels : pandas.Series | None
        Class label of each stimulus, indexed by stimulus id (see
        :func:`read_class_labels`); its ids are the stimulus set. None: every row
        of each store (one per distinct file), and no class metrics.
    cfg : dict | None
        The ``geometry`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`, kept in
        ``attrs["neuroflow"]``.
    held_out : pandas.Series of bool | None
        Per labelled stimulus id, whether it belongs to the held-out (shifted)
        distribution: the out-of-distribution readout is trained on the others and
        tested on these (:func:`neuroflow.geometry.metrics.ood_readout`); the other
        metrics use every labelled stimulus. None: no readout.

    Returns
    -------
    ds : xarray.Dataset
        Dims ``feature_space`` (names), ``layer`` (position 0 .. n-1 in the space's
        layer list), ``rank`` (1 ..), ``bound`` (``first``, ``last``) and, with labels,
        ``class`` (sorted labels). Coordinates ``layer_name`` (str, ``""`` past the
        end of a shorter list), ``layer_depth`` (position / (n_layers - 1), 0 for a
        single layer, NaN past the end) and ``feature_store`` (path) on
        ``(feature_space, layer)``. Variables on ``(feature_space, layer)``:
        ``participation_ratio``, ``power_law_alpha``, ``power_law_r2``,
        ``n_stimuli``, ``n_features``, ``n_eigenvalues`` (and with labels
        ``fisher_ratio``, ``linear_separability``); ``power_law_fit_range`` on
        ``(feature_space, layer, bound)``; ``eigenspectrum`` on
        ``(feature_space, layer, rank)``, zero past ``n_eigenvalues``; with labels
        ``manifold_dimension`` and ``manifold_radius`` on ``(feature_space, layer,
        class)`` and ``class_size`` on ``class``; with labels also
        ``n_degenerate_classes`` and ``class_metrics_note`` (str) on ``(feature_space,
        layer)``: classes left out of the class metrics (fewer than 2 members or zero
        within-class variance; their ``manifold_*`` are NaN) and why, or why the metrics
        are NaN (fewer than 2 usable classes). With ``held_out`` also
        ``ood_in_accuracy``, ``ood_accuracy``, ``ood_chance``, ``ood_p_value`` and
        ``ood_n_test`` on ``(feature_space, layer)`` and ``attrs["ood_notes"]``. Every
        variable has ``long_name`` and ``units``.
    """
    if not feature_stores:
        raise ValueError("feature_stores must name at least one feature store, got none.")
    cfg = resolve_config(cfg)
    labels = check_labels(labels)
    mask = check_held_out(held_out, labels)
    stimuli = None if labels is None else list(labels.index)
    layers: dict[str, list[tuple[str, Path, dict[str, Any]]]] = {}
    for key, path in feature_stores.items():
        path = Path(path)
        X, attrs = _store_rows(path, stimuli)
        space, layer = _space_and_layer(key, attrs, path)
        if any(name == layer for name, _, _ in layers.get(space, [])):
            raise ValueError(
                f"feature_stores must hold each layer once, got {space!r} layer {layer!r} "
                f"twice (again at {path})."
            )
        label_values = None if labels is None else labels.to_numpy()
        metrics = _layer_metrics(X, label_values, cfg, mask)
        layers.setdefault(space, []).append((layer, path, metrics))
    return _assemble(layers, labels, cfg, provenance)


def _assemble(
    layers: Mapping[str, list[tuple[str, Path, dict[str, Any]]]],
    labels: pd.Series | None,
    cfg: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> xr.Dataset:
    """The output dataset from each layer's metrics (see :func:`geometry_of_features`)."""
    spaces = list(layers)
    n_layer = max(len(v) for v in layers.values())
    n_rank = max(len(m["eigenspectrum"]) for v in layers.values() for _, _, m in v)
    shape = (len(spaces), n_layer)
    scalar = {
        name: np.full(shape, np.nan)
        for name in ("participation_ratio", "power_law_alpha", "power_law_r2")
    }
    counts = {
        name: np.zeros(shape, dtype=np.int64)
        for name in ("n_stimuli", "n_features", "n_eigenvalues")
    }
    fit_range = np.zeros((*shape, 2), dtype=np.int64)
    spectrum = np.zeros((*shape, n_rank))
    names = np.full(shape, "", dtype=object)
    stores = np.full(shape, "", dtype=object)
    depth = np.full(shape, np.nan)
    classes = None if labels is None else np.unique(labels.to_numpy())
    if classes is not None:
        n_class = classes.size
        per_class = {n: np.full((*shape, n_class), np.nan) for n in ("dim", "radius")}
        separation = {n: np.full(shape, np.nan) for n in ("fisher", "linear")}
        folds = 0
        sizes = np.zeros(n_class, dtype=np.int64)
        n_degenerate = np.zeros(shape, dtype=np.int64)
        class_notes = np.full(shape, "", dtype=object)
        ood = {name: np.full(shape, np.nan) for name in OOD_METRICS}
        ood_n_test = np.zeros(shape, dtype=np.int64)
        ood_notes: list[str] = []
        has_ood = any("ood" in m for v in layers.values() for _, _, m in v)
    for i, space in enumerate(spaces):
        entries = layers[space]
        for j, (layer, path, m) in enumerate(entries):
            names[i, j], stores[i, j] = layer, str(path)
            depth[i, j] = j / max(len(entries) - 1, 1)
            for name in scalar:
                scalar[name][i, j] = m[name]
            counts["n_stimuli"][i, j] = m["n_stimuli"]
            counts["n_features"][i, j] = m["n_features"]
            counts["n_eigenvalues"][i, j] = len(m["eigenspectrum"])
            spectrum[i, j, : len(m["eigenspectrum"])] = m["eigenspectrum"]
            fit_range[i, j] = m["power_law_fit_range"]
            if classes is not None:
                geo = m["classes"]
                per_class["dim"][i, j] = geo.dimension
                per_class["radius"][i, j] = geo.radius
                separation["fisher"][i, j] = geo.fisher_ratio
                separation["linear"][i, j] = geo.linear_separability
                folds = max(folds, geo.n_folds)
                sizes = geo.n_members
                n_degenerate[i, j] = int(geo.degenerate.sum())
                class_notes[i, j] = geo.note
                if "ood" in m:
                    readout = m["ood"]
                    ood["ood_in_accuracy"][i, j] = readout.in_accuracy
                    ood["ood_accuracy"][i, j] = readout.ood_accuracy
                    ood["ood_chance"][i, j] = readout.chance
                    ood["ood_p_value"][i, j] = readout.p_value
                    ood_n_test[i, j] = readout.n_test
                    if readout.note:
                        ood_notes.append(f"{space}/{layer}: {readout.note}")
    fl = ("feature_space", "layer")
    data: dict[str, Any] = {
        **{name: (fl, values) for name, values in scalar.items()},
        **{name: (fl, values) for name, values in counts.items()},
        "power_law_fit_range": ((*fl, "bound"), fit_range),
        "eigenspectrum": ((*fl, "rank"), spectrum),
    }
    coords: dict[str, Any] = {
        "feature_space": ("feature_space", _obj(spaces)),
        "layer": ("layer", np.arange(n_layer)),
        "rank": ("rank", np.arange(1, n_rank + 1)),
        "bound": ("bound", _obj(["first", "last"])),
        "layer_name": (fl, names),
        "layer_depth": (
            fl,
            depth,
            {
                "long_name": "relative depth of the layer in its list (0: first, 1: last)",
                "units": "1",
            },
        ),
        "feature_store": (fl, stores),
    }
    attrs: dict[str, Any] = {
        "fit_range": "default" if cfg["fit_range"] is None else list(cfg["fit_range"]),
        "eigen_method": cfg["eigen_method"],
        PROVENANCE_KEY: dict(provenance),
    }
    if classes is not None:
        data["manifold_dimension"] = ((*fl, "class"), per_class["dim"])
        data["manifold_radius"] = ((*fl, "class"), per_class["radius"])
        data["class_size"] = ("class", np.asarray(sizes, dtype=np.int64))
        data["fisher_ratio"] = (fl, separation["fisher"])
        data["linear_separability"] = (fl, separation["linear"])
        data["n_degenerate_classes"] = (fl, n_degenerate)
        data["class_metrics_note"] = (fl, class_notes)
        coords["class"] = ("class", _obj(classes))
        attrs.update(n_folds=int(folds), seed=int(cfg["seed"]), chance=1.0 / classes.size)
        attrs["degenerate_classes"] = (
            "classes with fewer than 2 members or zero within-class variance are left out "
            "of the class metrics (n_degenerate_classes, class_metrics_note); the metrics "
            "are those of the remaining classes, NaN when fewer than 2 remain"
        )
        if has_ood:
            for name, values in ood.items():
                data[name] = (fl, values)
            data["ood_n_test"] = (fl, ood_n_test)
            attrs.update(ood_permutations=int(cfg["ood_permutations"]), ood_notes=ood_notes)
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for name, (long_name, units) in _DESCRIPTIONS.items():
        if name in ds:
            ds[name].attrs.update(long_name=long_name, units=units)
    if classes is not None:
        ds["linear_separability"].attrs["chance"] = 1.0 / classes.size
    return ds


def write_geometry(
    out_path: str | os.PathLike, ds: xr.Dataset, provenance: Mapping[str, Any]
) -> Path:
    """Write the geometry dataset as a zarr store, atomically, with provenance.

    Parameters
    ----------
    out_path : path-like
        The store, conventionally ``.../geometry.zarr``.
    ds : xarray.Dataset
        From :func:`geometry_of_features`.
    provenance : dict
        Record from :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    path : Path
        The written store.
    """
    return write_dataset(ds, out_path, provenance=provenance)


def geometry_table(ds: xr.Dataset) -> pd.DataFrame:
    """The scalar metrics of a geometry dataset as a tidy table.

    Parameters
    ----------
    ds : xarray.Dataset
        From :func:`geometry_of_features` (or the store, opened).

    Returns
    -------
    table : pandas.DataFrame
        One row per feature space, layer and metric: columns ``feature_space``,
        ``layer`` (name), ``position``, ``depth``, ``metric``, ``value`` and ``units``;
        per-class metrics are averaged over the classes that have them
        (``manifold_dimension``, ``manifold_radius``; degenerate classes are NaN and
        left out; NaN when every class is). With an out-of-distribution readout, also
        its rows (:data:`OOD_METRICS`). Cells past the end of a shorter layer list are
        left out.
    """
    metrics = [
        "participation_ratio",
        "power_law_alpha",
        "power_law_r2",
        "fisher_ratio",
        "linear_separability",
        "manifold_dimension",
        "manifold_radius",
        *OOD_METRICS,
    ]
    rows = []
    for i, space in enumerate(ds["feature_space"].values):
        for j in range(ds.sizes["layer"]):
            name = str(ds["layer_name"].values[i, j])
            if not name:
                continue
            for metric in metrics:
                if metric not in ds:
                    continue
                value = np.asarray(ds[metric].values[i, j], dtype=np.float64)
                finite = value[~np.isnan(value)] if value.ndim else value
                rows.append(
                    {
                        "feature_space": str(space),
                        "layer": name,
                        "position": j,
                        "depth": float(ds["layer_depth"].values[i, j]),
                        "metric": metric,
                        "value": float(np.mean(finite)) if finite.size else float("nan"),
                        "units": ds[metric].attrs.get("units", ""),
                    }
                )
    columns = ["feature_space", "layer", "position", "depth", "metric", "value", "units"]
    return pd.DataFrame(rows, columns=columns)


def run_geometry_stage(
    *,
    feature_stores: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
    labels_path: str | os.PathLike | None = None,
    layer_sweep_tsv: str | os.PathLike | None = None,
    ood: bool = True,
) -> Path:
    """The ``geometry`` stage: metrics per layer, a tidy table, alignment and a plot.

    Parameters
    ----------
    feature_stores : dict of str to path-like
        ``"extractor:layer"`` -> feature store, each extractor's layers in order.
    output : path-like
        The store, ``results/geometry/<v>/geometry.zarr``; beside it ``geometry.tsv``
        (:func:`geometry_table`), ``geometry_alignment.tsv``
        (:func:`neuroflow.geometry.alignment.geometry_score_correlations`, empty
        without layer scores) and ``geometry.png`` (:func:`plot_geometry` with the
        layer scores).
    config : dict
        The ``geometry`` section (``enabled``, ``labels``, the column names and
        ``train_distribution`` are read here; the rest is :data:`DEFAULT_CONFIG`).
        With ``distribution_column`` set, the out-of-distribution readout trains on the
        labelled stimuli whose value there is ``train_distribution`` and tests on the
        others (:func:`read_held_out`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.
    labels_path : path-like | None
        Class labels TSV; its stimuli that the stores do not hold are left out.
    layer_sweep_tsv : path-like | None
        The summary's layer-sweep table, for the scores of the same layers.
    ood : bool
        False: no out-of-distribution readout even with ``distribution_column`` set
        (the plan found none applies, and noted why).

    Returns
    -------
    output : Path
    """
    from neuroflow.artifacts import atomic_file
    from neuroflow.geometry.alignment import geometry_score_correlations, layer_scores
    from neuroflow.rois import ALL_ROI, GROUP_SUBJECT

    cfg = dict(config)
    metric_cfg = {k: cfg[k] for k in DEFAULT_CONFIG if k in cfg}
    labels, dropped = labels_for(labels_path, feature_stores, cfg)
    held_out = None
    if labels is not None and ood and cfg.get("distribution_column"):
        if cfg.get("train_distribution") is None:
            raise ValueError(
                "`geometry.train_distribution` must name the in-distribution value of "
                f"column {cfg['distribution_column']!r}, got None instead."
            )
        held_out = read_held_out(
            labels_path,
            stimulus_column=cfg["stimulus_column"],
            distribution_column=cfg["distribution_column"],
            train_distribution=str(cfg["train_distribution"]),
        )
    ds = geometry_of_features(
        feature_stores, labels=labels, cfg=metric_cfg, provenance=provenance, held_out=held_out
    )
    ds.attrs["labels"] = str(labels_path) if labels_path is not None else None
    ds.attrs["labels_not_in_features"] = int(dropped)
    output = Path(output)
    table = geometry_table(ds)
    scores = None
    if layer_sweep_tsv is not None and Path(layer_sweep_tsv).is_file():
        sweeps = pd.read_csv(layer_sweep_tsv, sep="\t", dtype={"subject": str, "layer": str})
        scores = layer_scores(sweeps, group=GROUP_SUBJECT, all_roi=ALL_ROI)
        scores = scores[scores["feature_space"].isin(set(table["feature_space"]))]
    if scores is None:
        scores = pd.DataFrame(columns=["feature_space", "layer", "analysis", "score"])
    correlations = geometry_score_correlations(table, scores)
    for name, frame in (("geometry.tsv", table), ("geometry_alignment.tsv", correlations)):
        with atomic_file(output.parent / name) as tmp:
            frame.to_csv(tmp, sep="\t", index=False, na_rep="n/a", float_format="%.6g")
    fig = plot_geometry(table, scores if len(scores) else None)
    with atomic_file(output.parent / "geometry.png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    return write_geometry(output, ds, provenance)

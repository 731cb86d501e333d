"""The ``decode_eeg`` stage: time-resolved decoding and identification from EEG epochs.

For every subject (its epochs stores concatenated):

- **classification** of an event column (``condition`` by default) at every time point
  and across train × test times, with label-permutation cluster tests
  (see :mod:`neuroflow.decoding.temporal`);
- **feature decoding over time**: the first principal components of every feature space
  (each feature z-scored over stimuli first, so that no feature dominates by its units)
  decoded by ridge at every time point, scored by correlation, with a cluster test;
  peak and onset latencies show which features are expressed when;
- **identification** of held-out test stimuli from the epochs averaged in time bins and
  flattened over channels × bins of a window, by a ridge decoder and a contrastive
  decoder, with a label-shuffle null. Features are z-scored with the training stimuli's
  statistics, so the correlation between predicted and candidate features weighs every
  feature alike (raw image statistics differ in scale by orders of magnitude).

With two or more subjects, per-subject time courses are also tested together with a
sign-flip cluster test (:func:`~neuroflow.decoding.temporal.group_cluster_test`).

A cluster test whose permutations cannot reach ``cluster_alpha`` reliably is run, but
reported as *inconclusive*: its ``*_cluster_p`` is NaN, the p-values it computed are in
``*_cluster_p_raw``, and ``attrs["inconclusive"]`` says why. That happens with fewer
than :func:`~neuroflow.decoding.temporal.min_permutations` random permutations (99 for
0.05; the job logs a warning naming the configuration key to raise), when a subject's
labels allow fewer distinct relabellings than that (classes keep their numbers of
epochs under the null, so a label tied to how often its stimuli are shown, like the
THINGS-style test/train condition, cannot be tested by permutation; also a logged
warning), and for the group test with too few subjects for its sign flips to reach it
(6 for 0.05).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from neuroflow.analysis_inputs import (
    SubjectEpochs,
    feature_info,
    load_subject_epochs,
)
from neuroflow.artifacts import write_dataset
from neuroflow.peaks import peak_index
from neuroflow.variables import describe_variables

from .eeg_analyses import _classification, _cluster_p, _feature_time_courses, _identification
from .options import (
    DEFAULT_CONFIG,
    applicable_parts,
    held_out_mask,
    identification_unavailable,
    metric_names,
    resolve_config,
)
from .temporal import (
    ClusterResult,
    group_cluster_test,
    min_permutations,
)

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "STAGE",
    "applicable_parts",
    "combine_eeg_decoding",
    "combine_subjects",
    "decode_eeg",
    "decode_eeg_subject",
    "held_out_mask",
    "identification_unavailable",
    "inconclusive_tests",
    "resolve_config",
]

logger = logging.getLogger(__name__)

STAGE = "decode_eeg"
FORMAT_VERSION = 8


def _obj(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """Strings as an object array of ``str``."""
    return np.asarray([str(v) for v in values], dtype=object)


#: Within-subject cluster tests: stored variable, its permutation key and its part.
_CLUSTER_TESTS = {
    "class_cluster_p": ("classification.n_permutations", "classification"),
    "generalization_cluster_p": ("classification.generalization_permutations", "classification"),
    "feature_cluster_p": ("features.n_permutations", "features"),
}


def inconclusive_tests(cfg: Mapping[str, Any], run: set[str] | None = None) -> dict[str, str]:
    """Within-subject cluster tests whose permutation count cannot reach ``cluster_alpha``.

    Parameters
    ----------
    cfg : dict
        The resolved ``decoding`` section.
    run : set of str | None
        Analyses that run (``"classification"``, ``"features"``); None for all that
        are enabled.

    Returns
    -------
    reasons : dict of str to str
        Stored p-value variable (e.g. ``"class_cluster_p"``) to why its test is
        inconclusive, for every test that runs with at least one but fewer than
        :func:`~neuroflow.decoding.temporal.min_permutations` permutations.
    """
    alpha = float(cfg["cluster_alpha"])
    need = min_permutations(alpha)
    out: dict[str, str] = {}
    for name, (key, part) in _CLUSTER_TESTS.items():
        section, field = key.split(".")
        if not cfg[part]["enabled"] or (run is not None and part not in run):
            continue
        if name == "generalization_cluster_p" and not cfg["classification"]["generalization"]:
            continue
        n = int(cfg[section][field])
        if 0 < n < need:
            out[name] = (
                f"`decoding.{key}` = {n} cannot reach p <= {alpha:g} reliably: at least "
                f"{need} are needed; clusters are reported as inconclusive"
            )
    return out


def _latencies(times: np.ndarray, score: np.ndarray, cluster_p: np.ndarray, alpha: float):
    index = peak_index(score, times)  # the largest score at or after the onset
    peak = np.where(index >= 0, times[np.maximum(index, 0)], np.nan)
    sig = cluster_p <= alpha
    onset = np.where(sig.any(axis=-1), times[np.argmax(sig, axis=-1)], np.nan)
    return peak, onset


def decode_eeg_subject(
    *,
    epochs: list[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Stage entry point: decoding of one subject's EEG epochs, one part of the stage.

    Every subject is decoded by its own job, so that a subject that fails keeps the
    others' results; :func:`combine_eeg_decoding` then gathers them and adds the group
    tests.

    Parameters
    ----------
    epochs : list of path-like
        The subject's epochs stores (``preprocess_eeg``); they must all be of one subject.
    features : dict of str to path-like
        Feature-space name to feature store (``features`` (stimulus, feature)).
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store, with the variables listed in :func:`decode_eeg` for one subject
        (``subject`` of length 1) and no group tests.
    """
    cfg = resolve_config(config)
    features = dict(features or {})
    subjects = load_subject_epochs(epochs)
    if len(subjects) != 1:
        raise ValueError(
            "`epochs` must be the stores of one subject, got stores of subjects "
            f"{', '.join(s.subject for s in subjects)} instead."
        )
    ds = _decode_subjects(subjects, features, cfg)
    return write_dataset(describe_variables(ds), output, provenance=provenance)


def combine_eeg_decoding(
    *,
    subjects: list[str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Stage entry point: gather the subjects' decoding stores and test them together.

    Parameters
    ----------
    subjects : list of path-like
        Stores of :func:`decode_eeg_subject`, one per subject.
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store described in :func:`decode_eeg`.
    """
    from neuroflow.artifacts import open_dataset

    if not subjects:
        raise ValueError("`subjects` must list at least one decoding store, got none.")
    cfg = resolve_config(config)
    parts = [open_dataset(p).load() for p in subjects]
    combined = combine_subjects(parts, cfg, sources=subjects)
    return write_dataset(describe_variables(combined), output, provenance=provenance)


def decode_eeg(
    *,
    epochs: list[str | os.PathLike],
    features: Mapping[str, str | os.PathLike],
    output: str | os.PathLike,
    config: Mapping[str, Any],
    provenance: Mapping[str, Any],
) -> Path:
    """Time-resolved decoding and identification from every subject's EEG epochs at once.

    The workflow runs the same analyses as one job per subject
    (:func:`decode_eeg_subject`) and one job that gathers them
    (:func:`combine_eeg_decoding`); this function does both in one call.

    Parameters
    ----------
    epochs : list of path-like
        Epochs stores of the ``preprocess_eeg`` stage (one or more per subject; each
        store's ``entities.subject`` attribute tells its subject).
    features : dict of str to path-like
        Feature-space name to feature store (``features`` (stimulus, feature)).
    output : path-like
        Output zarr store.
    config : dict
        The ``decoding`` section (see :data:`DEFAULT_CONFIG`).
    provenance : dict
        From :func:`neuroflow.artifacts.build_provenance`.

    Returns
    -------
    output : Path
        The store, holding (dims in brackets):

        - ``class_score`` (subject, time), ``class_null`` (subject, permutation, time),
          ``class_cluster_p`` and ``class_cluster_p_raw`` (subject, time),
          ``class_chance`` and ``class_inconclusive`` (subject);
        - ``generalization``, ``generalization_cluster_p`` and
          ``generalization_cluster_p_raw`` (subject, train_time, time),
          ``generalization_inconclusive`` (subject);
        - ``feature_score``, ``feature_null_mean``, ``feature_cluster_p``,
          ``feature_cluster_p_raw`` (subject, feature_space, time);
          ``feature_peak_latency``, ``feature_onset_latency`` (subject, feature_space),
          in s (the onset is the first point of a significant cluster);
          ``feature_inconclusive`` (subject, feature_space);
        - ``identification`` (subject, feature_space, decoder, metric),
          ``identification_chance`` (subject, feature_space, metric),
          ``identification_null`` (subject, feature_space, decoder, id_permutation,
          metric), ``identification_p`` (subject, feature_space, decoder, metric);
        - with 2+ subjects: ``group_class_cluster_p`` (time), ``group_feature_cluster_p``
          (feature_space, time), and their ``*_raw`` twins.

        ``*_cluster_p`` is the family-wise p-value of the cluster holding each point (NaN
        outside clusters); a point is significant when it is at most
        ``attrs["cluster_alpha"]``. A test that cannot reach that level reliably (too
        few permutations, too few distinct relabellings of the subject's epochs, or
        too few subjects) is *inconclusive*: its ``*_cluster_p`` is NaN everywhere,
        ``*_cluster_p_raw`` holds the p-values it computed (equal to ``*_cluster_p``
        for a conclusive test), ``*_inconclusive`` is True for the subject, and
        ``attrs["inconclusive"]`` maps the variable's name to the reason. An analysis
        that does not apply to every subject is left out, with the reason in
        ``attrs["skipped"]``.
    """
    cfg = resolve_config(config)
    features = dict(features or {})
    subjects = load_subject_epochs(epochs)
    parts = [_decode_subjects([sub], features, cfg) for sub in subjects]
    sources = [str(sub.sources[0]) for sub in subjects]
    combined = combine_subjects(parts, cfg, sources=sources)
    return write_dataset(describe_variables(combined), output, provenance=provenance)


def _decode_subjects(
    subjects: Sequence[SubjectEpochs], features: Mapping[str, Any], cfg: Mapping[str, Any]
) -> xr.Dataset:
    """The decoding dataset of some subjects, without group tests (checks first)."""
    seed = int(cfg["seed"])
    names = list(features)
    parts = _applicable_parts(subjects, features, cfg)
    run = {k for k, why in parts.items() if why is None}
    if not run:
        raise ValueError(
            f"{subjects[0].sources[0]}: no decoding analysis applies: "
            + "; ".join(f"{k}: {why}" for k, why in parts.items())
            + "."
        )
    per_sub: list[dict[str, Any]] = []
    for sub in subjects:
        X = sub.data[:, :, :: cfg["decim"]].astype(np.float64)
        times = sub.times[:: cfg["decim"]]
        res: dict[str, Any] = {}
        if parts["classification"] is None:
            res["class"] = _classification(sub, X, cfg, seed)
        if parts["features"] is None:
            res["feat"] = _feature_time_courses(sub, X, features, cfg, seed)
        if parts["identification"] is None:
            res["ident"] = _identification(sub, X, times, features, cfg, seed)
        per_sub.append(res)
    ds = _dataset(subjects, times, names, per_sub, cfg, run)
    skipped = {k: why for k, why in parts.items() if why is not None and why != "off"}
    for part, why in skipped.items():
        logger.info("decode_eeg: %s skipped, %s.", part, why)
    inconclusive = inconclusive_tests(cfg, run)
    for why in dict.fromkeys(inconclusive.values()):
        logger.warning("decode_eeg: %s.", why)
    untestable = [r["class"]["untestable"] for r in per_sub if r.get("class", {}).get("untestable")]
    c = cfg["classification"]
    for name, n in (
        ("class_cluster_p", c["n_permutations"]),
        ("generalization_cluster_p", c["generalization_permutations"] * c["generalization"]),
    ):
        if untestable and n:
            inconclusive[name] = "; ".join([*untestable, inconclusive.get(name, "")]).strip("; ")
    ds.attrs.update(
        {
            "stage": STAGE,
            "feature_models": {n: feature_info(p) for n, p in features.items()},
            "cluster_test": "label permutation, cluster mass (within subject)",
            "cluster_alpha": float(cfg["cluster_alpha"]),
            "inconclusive": inconclusive,
            "classification_cv_groups": sorted(
                {r["class"]["cv_groups"] for r in per_sub if "class" in r}
            ),
            "skipped": skipped,
        }
    )
    return ds


#: The variables of each analysis in a subject's decoding dataset.
_PART_VARIABLES = {
    "classification": ("class_", "generalization"),
    "features": ("feature_",),
    "identification": ("identification",),
}


def _part_of(variable: str) -> str:
    for part, prefixes in _PART_VARIABLES.items():
        if variable.startswith(prefixes):
            return part
    raise ValueError(f"Variable {variable!r} belongs to no decoding analysis.")


def combine_subjects(
    parts: Sequence[xr.Dataset], cfg: Mapping[str, Any], *, sources: Sequence[Any]
) -> xr.Dataset:
    """Stack the subjects' decoding datasets and add the group cluster tests.

    Parameters
    ----------
    parts : sequence of xarray.Dataset
        One dataset per subject, from :func:`_decode_subjects`.
    cfg : dict
        The resolved ``decoding`` section.
    sources : sequence
        Where each part comes from (named in errors).

    Returns
    -------
    ds : xarray.Dataset
        ``subject`` stacked; analyses that some subject lacks are left out and named
        in ``attrs["skipped"]``.
    """
    parts = sorted(parts, key=lambda d: str(d["subject"].values[0]))
    subjects = [str(d["subject"].values[0]) for d in parts]
    if len(set(subjects)) != len(subjects):
        raise ValueError(f"Every subject must appear once, got subjects {subjects} instead.")
    for d, src in zip(parts, sources, strict=True):
        if not np.allclose(d["time"].values, parts[0]["time"].values):
            raise ValueError(
                f"{src}: every subject's decoding must share one time grid, got "
                f"{d['time'].size} points from {float(d['time'][0]):.3f} s for sub-"
                f"{subjects[parts.index(d)]} but {parts[0]['time'].size} points from "
                f"{float(parts[0]['time'][0]):.3f} s for sub-{subjects[0]} instead."
            )
    ran = [{_part_of(str(v)) for v in d.data_vars} for d in parts]
    common = set.intersection(*ran)
    skipped: dict[str, str] = {}
    for d in parts:
        skipped.update(d.attrs.get("skipped", {}))
    for part in sorted(set.union(*ran) - common):
        lacking = [s for s, r in zip(subjects, ran, strict=True) if part not in r]
        why = "; ".join(str(p.attrs.get("skipped", {}).get(part, "")) for p in parts)
        skipped[part] = f"sub-{', sub-'.join(lacking)} could not run it ({why.strip('; ')})"
    keep = [[v for v in d.data_vars if _part_of(str(v)) in common] for d in parts]
    trimmed = [d[k] for d, k in zip(parts, keep, strict=True)]
    per_subject = [v for v in trimmed[0].data_vars if "subject" in trimmed[0][v].dims]
    ds = xr.concat(
        [d.assign_coords(time=parts[0]["time"].values) for d in trimmed],
        dim="subject",
        data_vars=per_subject,
        coords="minimal",
        compat="override",
        join="override",
        combine_attrs="drop",
    )
    ds = ds.assign_coords(subject=_obj(subjects))
    ds.attrs.update(parts[0].attrs)
    ds.attrs["skipped"] = skipped
    ds.attrs["classification_cv_groups"] = sorted(
        {g for d in parts for g in d.attrs.get("classification_cv_groups", [])}
    )
    ds.attrs.pop("provenance", None)
    reasons: dict[str, list[str]] = {}
    for d in parts:
        for name, why in d.attrs.get("inconclusive", {}).items():
            reasons.setdefault(name, []).extend(w for w in why.split("; ") if w)
    ds.attrs["inconclusive"] = {n: "; ".join(dict.fromkeys(w)) for n, w in reasons.items()}
    if len(parts) >= 2:
        _add_group_tests(ds, cfg)
    return ds


def _add_group_tests(ds: xr.Dataset, cfg: Mapping[str, Any]) -> None:
    """Sign-flip cluster tests over subjects, in place.

    With too few subjects for a sign-flip test to reach ``cluster_alpha`` (5 or fewer
    for 0.05; see :func:`~neuroflow.decoding.temporal.group_cluster_test`), the tests
    run but are reported as inconclusive.
    """
    alpha = float(cfg["cluster_alpha"])
    kw = {
        "cluster_alpha": alpha,
        "n_permutations": max(1024, min_permutations(alpha) + 1),
        "seed": int(cfg["seed"]),
    }
    results: dict[str, list[ClusterResult]] = {}
    if "class_score" in ds:
        chance = float(ds["class_chance"].mean())
        scores = ds["class_score"].values
        results["group_class_cluster_p"] = [group_cluster_test(scores, chance, **kw)]
    if "feature_score" in ds:
        scores = ds["feature_score"].values
        results["group_feature_cluster_p"] = [
            group_cluster_test(scores[:, i], 0.0, **kw) for i in range(ds.sizes["feature_space"])
        ]
    n_sub = ds.sizes["subject"]
    for name, res in results.items():
        dims = ("time",) if name == "group_class_cluster_p" else ("feature_space", "time")
        p, raw = zip(*(_cluster_p(r, alpha) for r in res), strict=True)
        squeeze = name == "group_class_cluster_p"
        ds[name] = (dims, p[0] if squeeze else np.stack(p))
        ds[f"{name}_raw"] = (dims, raw[0] if squeeze else np.stack(raw))
        if not res[0].conclusive(alpha):
            why = (
                f"{n_sub} subjects allow {2**n_sub} sign flips, the smallest group p-value is "
                f"{res[0].min_p:.3g} > {alpha:g}: group clusters are reported as inconclusive"
            )
            ds.attrs["inconclusive"][name] = why
            logger.info("decode_eeg: %s.", why)


def _applicable_parts(
    subjects: Sequence[SubjectEpochs], features: Mapping[str, Any], cfg: Mapping[str, Any]
) -> dict[str, str | None]:
    """Why each decoding analysis cannot run (:func:`applicable_parts` of the epochs)."""
    labels = {s.subject: (s.condition, s.stimulus) for s in subjects}
    return applicable_parts(labels, has_features=bool(features), config=cfg)


def _dataset(subjects, times, names, per_sub, cfg, run) -> xr.Dataset:
    coords: dict[str, Any] = {
        "subject": _obj([s.subject for s in subjects]),
        "time": ("time", times, {"units": "s"}),
        "feature_space": _obj(names),
    }
    data: dict[str, Any] = {}
    alpha = cfg["cluster_alpha"]
    by_config = inconclusive_tests(cfg, run)
    n_class = cfg["classification"]["n_permutations"]
    n_gen = cfg["classification"]["generalization_permutations"]
    if "classification" in run:
        cl = [r["class"] for r in per_sub]
        data["class_inconclusive"] = (
            ("subject",),
            np.array(
                ["class_cluster_p" in by_config or bool(x["untestable"] and n_class) for x in cl]
            ),
        )
        data["class_score"] = (("subject", "time"), np.stack([c["score"] for c in cl]))
        data["class_null"] = (("subject", "permutation", "time"), np.stack([c["null"] for c in cl]))
        data["class_cluster_p"] = (("subject", "time"), np.stack([c["cluster_p"] for c in cl]))
        data["class_cluster_p_raw"] = (
            ("subject", "time"),
            np.stack([c["cluster_p_raw"] for c in cl]),
        )
        data["class_chance"] = (("subject",), np.array([c["chance"] for c in cl]))
        if cfg["classification"]["generalization"]:
            coords["train_time"] = ("train_time", times, {"units": "s"})
            dims = ("subject", "train_time", "time")
            data["generalization"] = (dims, np.stack([c["gen"] for c in cl]))
            data["generalization_cluster_p"] = (dims, np.stack([c["gen_cluster_p"] for c in cl]))
            data["generalization_cluster_p_raw"] = (
                dims,
                np.stack([c["gen_cluster_p_raw"] for c in cl]),
            )
            data["generalization_inconclusive"] = (
                ("subject",),
                np.array(
                    [
                        "generalization_cluster_p" in by_config or bool(x["untestable"] and n_gen)
                        for x in cl
                    ]
                ),
            )
    if "features" in run:
        ft = [r["feat"] for r in per_sub]
        dims = ("subject", "feature_space", "time")
        for key in ("score", "null_mean", "cluster_p", "cluster_p_raw"):
            data[f"feature_{key}"] = (dims, np.stack([f[key] for f in ft]))
        data["feature_inconclusive"] = (
            ("subject", "feature_space"),
            np.full((len(ft), len(names)), "feature_cluster_p" in by_config),
        )
        peak, onset = _latencies(
            times, data["feature_score"][1], data["feature_cluster_p"][1], alpha
        )
        data["feature_peak_latency"] = (("subject", "feature_space"), peak, {"units": "s"})
        data["feature_onset_latency"] = (("subject", "feature_space"), onset, {"units": "s"})
        data["feature_n_components"] = (("feature_space",), ft[0]["n_components"])
    if "identification" in run:
        idn = [r["ident"] for r in per_sub]
        coords["decoder"] = _obj(idn[0]["decoders"])
        coords["metric"] = _obj(metric_names(cfg["identification"]["top_k"]))
        d4 = ("subject", "feature_space", "decoder", "metric")
        data["identification"] = (d4, np.stack([r["metrics"] for r in idn]))
        data["identification_p"] = (d4, np.stack([r["p"] for r in idn]))
        data["identification_chance"] = (
            ("subject", "feature_space", "metric"),
            np.stack([r["chance"] for r in idn]),
        )
        data["identification_null"] = (
            ("subject", "feature_space", "decoder", "id_permutation", "metric"),
            np.stack([r["null"] for r in idn]),
        )
    return xr.Dataset(data, coords=coords)

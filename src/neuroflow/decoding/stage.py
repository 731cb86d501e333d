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
from sklearn.decomposition import PCA

from neuroflow.analysis_inputs import (
    SubjectEpochs,
    average_by_stimulus,
    feature_info,
    load_subject_epochs,
    stimulus_features,
)
from neuroflow.artifacts import write_dataset
from neuroflow.peaks import peak_index
from neuroflow.progress import Progress
from neuroflow.variables import describe_variables

from .classification import labels_constant_within_groups
from .contrastive import contrastive_options, fit_contrastive
from .features import bin_window, fit_feature_decoder, zscore_features
from .identification import identification_metrics, identification_null
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
    cluster_permutation_test,
    group_cluster_test,
    min_permutations,
    n_relabellings,
    sliding_ridge_scores,
    time_resolved_null,
    time_resolved_scores,
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


def _cluster_p(
    result: ClusterResult, alpha: float, testable: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """p-value of the cluster containing each point, NaN outside clusters.

    Returns the p-values as reported (NaN everywhere when the test is not
    :meth:`~neuroflow.decoding.temporal.ClusterResult.conclusive` at ``alpha``, or not
    ``testable``) and as computed, each of the shape of ``result.labels``.
    """
    p = np.full(result.labels.shape, np.nan)
    for i, pv in enumerate(result.p_values):
        p[result.labels == i + 1] = pv
    ok = testable and result.conclusive(alpha)
    return (p if ok else np.full(p.shape, np.nan)), p


def _no_test(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Reported and computed p-values of a test that was not run (0 permutations)."""
    return np.full(shape, np.nan), np.full(shape, np.nan)


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


def _groups(sub: SubjectEpochs, how: str) -> np.ndarray:
    """Groups of feature decoding and identification: a stimulus's repeats stay together
    (sessions when ``cv_groups`` is ``session``)."""
    return sub.session if how == "session" else sub.stimulus


def stratified_epoch_groups(y: np.ndarray, n_splits: int, seed: int) -> np.ndarray:
    """Fold of every epoch under stratified k-fold, as CV groups (one group per fold).

    Grouped folds over these groups are exactly :class:`~sklearn.model_selection.
    StratifiedKFold`'s folds (shuffled with ``seed``), the folds MNE's
    ``cross_val_multiscore`` uses for classifiers; labels vary within groups, so the
    permutation null shuffles labels within folds.

    Parameters
    ----------
    y : ndarray, shape (n_epochs,)
        Class labels.
    n_splits : int
        Folds (at most the size of the smallest class).
    seed : int
        Shuffling seed.

    Returns
    -------
    groups : ndarray of int, shape (n_epochs,)
    """
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(y)
    smallest = int(np.unique(y, return_counts=True)[1].min())
    k = max(2, min(int(n_splits), smallest))
    groups = np.zeros(y.size, dtype=int)
    folds = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    for fold, (_, test) in enumerate(folds.split(np.zeros((y.size, 1)), y)):
        groups[test] = fold
    return groups


def classification_groups(
    sub: SubjectEpochs, y: np.ndarray, how: str, n_splits: int, seed: int
) -> tuple[np.ndarray, str]:
    """Cross-validation groups of time-resolved classification, and their kind.

    ``auto`` groups by stimulus when every class holds 2+ distinct stimuli and each
    stimulus belongs to one class (repeats of an image never straddle a fold); otherwise
    (events named only by their type, so stimulus = class) epochs are stratified across
    folds: grouping by stimulus would leave whole classes out of training.
    """
    if how == "session":
        return sub.session, "session"
    if how == "epoch":
        return stratified_epoch_groups(y, n_splits, seed), "epoch"
    one_class_each = all(np.unique(y[sub.stimulus == s]).size == 1 for s in np.unique(sub.stimulus))
    per_class = [np.unique(sub.stimulus[y == c]).size for c in np.unique(y)]
    if how == "stimulus" or (one_class_each and min(per_class) >= 2):
        return sub.stimulus, "stimulus"
    return stratified_epoch_groups(y, n_splits, seed), "epoch"


def permutation_units(sub: SubjectEpochs, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Units whose labels the classification null exchanges.

    Whole stimuli when every stimulus carries one label, every class holds 2+ stimuli
    and some stimulus is repeated: the repeats of an image then keep sharing a label
    under the null whatever the folds (session folds, or stratified folds that split
    an image's repeats), as they share it in the design. Otherwise the CV groups (see
    :func:`~neuroflow.decoding.temporal.shuffle_labels`); where labels vary within
    them (stratified epoch folds) and the epochs come from several recordings, each
    group's part of each recording: labels then move only between epochs of one fold
    and one recording, so every recording keeps its count of each class. Designs
    balance the classes within each run, and shuffles across runs would pair a run's
    slow offset with a share of a class it never had (a too-wide null; with a class
    shown in its own runs, a run effect that the null would credit to the class).

    Parameters
    ----------
    sub : SubjectEpochs
        The subject's epochs.
    y : ndarray, shape (n_epochs,)
        Labels.
    groups : ndarray, shape (n_epochs,)
        CV groups.

    Returns
    -------
    units : ndarray, shape (n_epochs,)
    """
    stim = sub.stimulus
    one_class_each = all(np.unique(y[stim == s]).size == 1 for s in np.unique(stim))
    per_class = [np.unique(stim[y == c]).size for c in np.unique(y)]
    repeated = np.unique(stim).size < stim.size
    if one_class_each and min(per_class) >= 2 and repeated:
        return stim
    if np.unique(sub.session).size > 1 and not labels_constant_within_groups(y, groups):
        cells = np.char.add(np.char.add(np.asarray(groups).astype(str), "|"), sub.session)
        # (were every cell of one class, shuffle_labels would exchange whole cells)
        if not labels_constant_within_groups(y, cells):
            return cells
    return groups


def _classification(sub, X, cfg, seed) -> dict[str, Any]:
    c = cfg["classification"]
    y = {"condition": sub.condition, "stimulus": sub.stimulus}.get(c["target"])
    if y is None:
        raise ValueError(
            f"{sub.sources[0]}: `decoding.classification.target` must be 'condition' or "
            f"'stimulus', got {c['target']!r} instead."
        )
    groups, kind = classification_groups(sub, y, cfg["cv_groups"], cfg["n_splits"], seed)
    logger.info("sub-%s: classification folds by %s.", sub.subject, kind)
    kw = {"classifier": c["classifier"], "n_splits": cfg["n_splits"], "n_jobs": cfg["n_jobs"]}
    units = permutation_units(sub, y, groups)
    alpha = cfg["cluster_alpha"]
    n_perm = int(c["n_permutations"])
    n_gen = int(c["generalization_permutations"]) if c["generalization"] else 0
    out: dict[str, Any] = {"chance": 1.0 / np.unique(y).size, "cv_groups": kind}
    out["untestable"] = _untestable(sub, y, units, c["target"], alpha)
    if out["untestable"] and (n_perm or n_gen):
        logger.warning("%s.", out["untestable"])
    if c["generalization"]:
        out["gen"] = time_resolved_scores(X, y, groups, generalize=True, **kw).mean(axis=0)
    if n_relabellings(y, units) == 1:
        # no permutation changes the labels: every permuted map is the observed one
        out["score"] = time_resolved_scores(X, y, groups, **kw).mean(axis=0)
        out["null"] = np.repeat(out["score"][None], n_perm, axis=0)
        gen_null = np.repeat(out["gen"][None], n_gen, axis=0) if n_gen else None
        return _classification_tests(out, gen_null, n_perm, alpha, c["generalization"])
    gen_null = (
        time_resolved_null(
            X, y, groups, n_permutations=n_gen, generalize=True, seed=seed + 1, units=units, **kw
        )
        if n_gen
        else None
    )
    if gen_null is not None and c["classifier"] == "lda":
        # the batched LDA's generalisation diagonal is its sliding score (tested equal):
        # the generalisation null's diagonals serve as sliding null maps too, and the
        # observed sliding score is taken from the same computation
        out["score"] = np.diagonal(out["gen"]).copy()
        diag = np.diagonal(gen_null, axis1=1, axis2=2)[:n_perm]
        rest = time_resolved_null(
            X, y, groups, n_permutations=max(n_perm - n_gen, 0), seed=seed, units=units, **kw
        )
        out["null"] = np.concatenate([diag, rest])
    else:
        out["score"] = time_resolved_scores(X, y, groups, **kw).mean(axis=0)
        out["null"] = time_resolved_null(
            X, y, groups, n_permutations=n_perm, seed=seed, units=units, **kw
        )
    return _classification_tests(out, gen_null, n_perm, alpha, c["generalization"])


def _classification_tests(
    out: dict[str, Any], gen_null: np.ndarray | None, n_perm: int, alpha: float, gen: bool
) -> dict[str, Any]:
    """The cluster tests of the classification time course and generalisation, in place."""
    testable = out["untestable"] is None
    out["cluster_p"], out["cluster_p_raw"] = (
        _cluster_p(
            cluster_permutation_test(out["score"], out["null"], cluster_alpha=alpha),
            alpha,
            testable,
        )
        if n_perm
        else _no_test(out["score"].shape)
    )
    if gen:
        out["gen_cluster_p"], out["gen_cluster_p_raw"] = (
            _cluster_p(
                cluster_permutation_test(out["gen"], gen_null, cluster_alpha=alpha),
                alpha,
                testable,
            )
            if gen_null is not None
            else _no_test(out["gen"].shape)
        )
    return out


def _untestable(
    sub: SubjectEpochs, y: np.ndarray, units: np.ndarray, target: str, alpha: float
) -> str | None:
    """Why too few distinct labellings exist for a permutation test (None if enough)."""
    need = min_permutations(alpha) + 1
    k = n_relabellings(y, units)
    if k >= need:
        return None
    constant = all(np.unique(y[units == u]).size == 1 for u in np.unique(units))
    how = (
        "labels move only between whole stimuli (or CV groups) with as many epochs, so that "
        "the classes keep their sizes, and a label tied to how often its stimuli are shown "
        "cannot be tested by permutation"
        if constant
        else "labels are shuffled within CV groups"
        + (" and recordings" if np.unique(sub.session).size > 1 else "")
    )
    return (
        f"sub-{sub.subject}: the {target!r} labels (`decoding.classification.target`) "
        f"allow only {k:g} distinct labelling(s) of the epochs, the observed one included, "
        f"fewer than the {need} a test at p <= {alpha:g} needs ({how}); classification "
        "clusters are reported as inconclusive"
    )


def _feature_time_courses(sub, X, features, cfg, seed) -> dict[str, np.ndarray]:
    f = cfg["features"]
    groups = _groups(sub, cfg["cv_groups"])
    n_times = X.shape[2]
    out = {k: [] for k in ("score", "null_mean", "cluster_p", "cluster_p_raw", "n_components")}
    what = f"sub-{sub.subject}: feature time courses"
    progress = Progress(len(features), what, "feature spaces")
    for name, path in features.items():
        uniq, inverse = np.unique(sub.stimulus, return_inverse=True)
        F = stimulus_features(path, uniq)
        if f["standardize"]:
            F = zscore_features(F, F)
        n_comp = int(min(f["n_components"], F.shape[1], uniq.size - 1))
        pcs = PCA(n_components=n_comp, random_state=seed).fit_transform(F)[inverse]
        score, null = sliding_ridge_scores(
            X,
            pcs,
            groups,
            alphas=f["alphas"],
            n_splits=cfg["n_splits"],
            n_permutations=f["n_permutations"],
            seed=seed,
            units=sub.stimulus,
        )
        score, null = score.mean(axis=1), null.mean(axis=2)
        out["score"].append(score)
        out["null_mean"].append(null.mean(axis=0) if null.size else np.full(n_times, np.nan))
        alpha = cfg["cluster_alpha"]
        p, p_raw = (
            _cluster_p(cluster_permutation_test(score, null, cluster_alpha=alpha), alpha)
            if f["n_permutations"]
            else _no_test((n_times,))
        )
        out["cluster_p"].append(p)
        out["cluster_p_raw"].append(p_raw)
        out["n_components"].append(n_comp)
        progress.update()
        del name
    progress.close()
    return {k: np.asarray(v) for k, v in out.items()}


def _test_mask(sub: SubjectEpochs, test_condition: str | None) -> np.ndarray:
    """Epochs of the held-out test stimuli (:func:`held_out_mask`), with a logged line
    when no epoch has ``test_condition``."""
    if test_condition is not None and not (sub.condition == test_condition).any():
        logger.info(
            "sub-%s: no epoch has condition %r (`identification.test_condition`); test "
            "stimuli chosen as `eeg_encoding.test: auto` does.",
            sub.subject,
            test_condition,
        )
    return held_out_mask(sub.stimulus, sub.condition, test_condition)


def _identification(sub, X3, times, features, cfg, seed) -> dict[str, np.ndarray]:
    ic, cc = cfg["identification"], cfg["contrastive"]
    X = bin_window(X3, times, ic["window"], ic["bin_width"])
    test = _test_mask(sub, ic["test_condition"])
    decoders = ["ridge", "contrastive"] if cc["enabled"] else ["ridge"]
    keys = metric_names(ic["top_k"])
    n_f, n_m = len(features), len(keys)
    metrics = np.full((n_f, len(decoders), n_m), np.nan)
    chance = np.full((n_f, n_m), np.nan)
    null = np.full((n_f, len(decoders), ic["n_permutations"], n_m), np.nan)
    groups = _groups(sub, cfg["cv_groups"])[~test]
    what = f"sub-{sub.subject}: stimulus identification"
    progress = Progress(n_f, what, "feature spaces")
    for i, path in enumerate(features.values()):
        ids, _ = average_by_stimulus(np.zeros((test.sum(), 1)), sub.stimulus[test])
        F_test = stimulus_features(path, ids)
        F_train = stimulus_features(path, sub.stimulus[~test])
        if ic["standardize"]:
            ref = stimulus_features(path, np.unique(sub.stimulus[~test]))
            F_test, F_train = zscore_features(F_test, ref), zscore_features(F_train, ref)
        preds = {}
        dec = fit_feature_decoder(
            X[~test], F_train, groups=groups, alphas=ic["alphas"], n_splits=cfg["n_splits"]
        )
        preds["ridge"] = average_by_stimulus(dec.predict(X[test]), sub.stimulus[test])[1]
        if cc["enabled"]:
            options = contrastive_options(cc)
            con = fit_contrastive(X[~test], F_train, sub.stimulus[~test], seed=seed, **options)
            preds["contrastive"] = average_by_stimulus(con.transform(X[test]), sub.stimulus[test])[
                1
            ]
        # top-k with k >= the number of test stimuli is trivially 1: left undefined
        top_k = [k for k in ic["top_k"] if int(k) < F_test.shape[0]] or [1]
        if len(top_k) < len(ic["top_k"]):
            logger.warning(
                "sub-%s: %d test stimuli; top-k accuracy for k >= %d is left undefined.",
                sub.subject,
                F_test.shape[0],
                F_test.shape[0],
            )
        nan = float("nan")
        for j, name in enumerate(decoders):
            m = identification_metrics(preds[name], F_test, top_k=top_k)
            metrics[i, j] = [m.get(k, nan) for k in keys]
            chance[i] = [m.get(f"chance_{k}", nan) for k in keys]
            if ic["n_permutations"]:
                nl = identification_null(
                    preds[name],
                    F_test,
                    n_permutations=ic["n_permutations"],
                    top_k=top_k,
                    seed=seed,
                )
                empty = np.full(ic["n_permutations"], nan)
                null[i, j] = np.stack([nl.get(k, empty) for k in keys], axis=1)
        progress.update()
    progress.close()
    with np.errstate(invalid="ignore"):
        better = np.where(
            np.array(keys) == "mean_rank",
            null <= metrics[:, :, None, :] + 1e-12,
            null >= metrics[:, :, None, :] - 1e-12,
        )
    p = (1.0 + better.sum(axis=2)) / (1.0 + null.shape[2])
    return {"metrics": metrics, "chance": chance, "null": null, "p": p, "decoders": decoders}


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

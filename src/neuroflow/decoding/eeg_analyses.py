"""The three EEG decoding analyses of one subject, with their permutation tests.

- :func:`_classification`: an event column decoded at every time point (and across
  train x test times), label permutations within the units a relabelling may move
  (:func:`permutation_units`, :func:`classification_groups`);
- :func:`_feature_time_courses`: the first principal components of a feature space
  decoded by ridge at every time point, feature shuffles between stimuli;
- :func:`_identification`: held-out stimuli identified from binned, flattened epochs by a
  ridge and a contrastive decoder, with a label-shuffle null.

:mod:`neuroflow.decoding.stage` reads the configuration and the epochs, runs these per
subject, tests them across subjects and writes the store.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from sklearn.decomposition import PCA

from neuroflow.analysis_inputs import (
    SubjectEpochs,
    average_by_stimulus,
    stimulus_features,
)
from neuroflow.progress import Progress

from .classification import labels_constant_within_groups
from .contrastive import contrastive_options, fit_contrastive
from .features import bin_window, fit_feature_decoder, zscore_features
from .identification import identification_metrics, identification_null
from .options import (
    held_out_mask,
    metric_names,
)
from .temporal import (
    ClusterResult,
    cluster_permutation_test,
    min_permutations,
    n_relabellings,
    sliding_ridge_scores_many,
    time_resolved_null,
    time_resolved_scores,
)

__all__ = ["classification_groups", "permutation_units", "stratified_epoch_groups"]

logger = logging.getLogger(__name__)


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
    uniq, inverse = np.unique(sub.stimulus, return_inverse=True)
    targets = []
    for path in features.values():
        F = stimulus_features(path, uniq)
        if f["standardize"]:
            F = zscore_features(F, F)
        n_comp = int(min(f["n_components"], F.shape[1], uniq.size - 1))
        targets.append(PCA(n_components=n_comp, random_state=seed).fit_transform(F)[inverse])
    # every space's targets on the same folds: each fold's epochs are decomposed once
    courses = sliding_ridge_scores_many(
        X,
        targets,
        groups,
        alphas=f["alphas"],
        n_splits=cfg["n_splits"],
        n_permutations=f["n_permutations"],
        seed=seed,
        units=sub.stimulus,
        what=f"sub-{sub.subject}: feature time courses",
    )
    for pcs, (score, null) in zip(targets, courses, strict=True):
        n_comp = pcs.shape[1]
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

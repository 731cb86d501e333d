"""Multi-label concept decoding: scores equal scikit-learn's, planted concepts are found,
the null refits the decoders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression, RidgeClassifier, RidgeCV
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from neuroflow.decoding.concepts import (
    DEFAULT_ALPHAS,
    _relabellings,
    average_precision_columns,
    concept_matrix,
    decode_concepts,
    read_concept_annotations,
    roc_auc_columns,
)


def test_auc_and_average_precision_equal_sklearn_with_ties(rng: np.random.Generator) -> None:
    scores = np.round(rng.standard_normal((41, 6)), 1)  # many tied scores
    labels = rng.random((41, 6)) < 0.3
    labels[:, 5] = False  # no positive: undefined
    auc, ap = roc_auc_columns(scores, labels), average_precision_columns(scores, labels)
    for j in range(5):
        assert auc[j] == pytest.approx(roc_auc_score(labels[:, j], scores[:, j]), abs=1e-12)
        assert ap[j] == pytest.approx(
            average_precision_score(labels[:, j], scores[:, j]), abs=1e-12
        )
    assert np.isnan(auc[5]) and np.isnan(ap[5])
    # a stack of label sets (the permutations) is scored set by set
    stacked = np.stack([labels[rng.permutation(41)] for _ in range(3)])
    np.testing.assert_allclose(
        average_precision_columns(scores, stacked)[1],
        average_precision_columns(scores, stacked[1]),
    )
    np.testing.assert_allclose(
        roc_auc_columns(scores, stacked)[2], roc_auc_columns(scores, stacked[2])
    )


def test_annotation_tables_long_and_listed(tmp_path: Path) -> None:
    long = tmp_path / "long.tsv"
    long.write_text("stim_file\tconcept\na.png\tdog\na.png\toutdoor\nb.png\tn/a\nb.png\tdog\n")
    listed = tmp_path / "listed.tsv"
    listed.write_text("stimulus\tconcepts\na.png\tdog; outdoor\nb.png\tdog\nc.png\t\n")
    expected = {("a.png", "dog"), ("a.png", "outdoor"), ("b.png", "dog")}
    for path in (long, listed):
        table = read_concept_annotations(path)
        assert set(map(tuple, table[["stimulus", "concept"]].to_numpy())) == expected
    bad = tmp_path / "bad.tsv"
    bad.write_text("image\tconcept\na.png\tdog\n")
    with pytest.raises(ValueError, match=r"bad.tsv: the annotation table must have a stimulus"):
        read_concept_annotations(bad)
    bad.write_text("stim_file\tlabel\na.png\tdog\n")
    with pytest.raises(ValueError, match="must have a `concept` or a `concepts` column"):
        read_concept_annotations(bad)


def test_concept_matrix_keeps_concepts_it_can_score() -> None:
    table = pd.DataFrame(
        {
            "stimulus": ["s1", "s2", "s3", "s1", "s4", "s9"],
            "concept": ["dog", "dog", "cat", "sky", "sky", "dog"],
        }
    )
    labels, concepts = concept_matrix(["s1", "s2", "s3", "s4", "s5"], table, min_count=2)
    assert concepts.tolist() == ["dog", "sky"]  # `cat` has one positive only
    assert labels[:, 0].tolist() == [True, True, False, False, False]
    with pytest.raises(ValueError, match="None of the decoded stimuli is in the annotation"):
        concept_matrix(["x1", "x2"], table)


def _planted(seed: int = 4, n_stimuli: int = 96, n_voxels: int = 37):
    """Concepts 0-1 drive two brain directions, concept 2 drives nothing."""
    rng = np.random.default_rng(seed)
    labels = rng.random((n_stimuli, 3)) < np.array([0.3, 0.45, 0.35])
    directions = rng.standard_normal((2, n_voxels))
    X = labels[:, :2].astype(float) @ directions * 0.9 + rng.standard_normal((n_stimuli, n_voxels))
    return X, labels


def _ridgecv_fold(X, labels, train, test):
    """RidgeCV (leave-one-out penalty per concept) on one fold's training-standardised
    patterns, with the standardised training and test patterns."""
    scaler = StandardScaler().fit(X[train])
    xtr, xte = scaler.transform(X[train]), scaler.transform(X[test])
    targets = np.where(labels[train], 1.0, -1.0)
    return RidgeCV(alphas=DEFAULT_ALPHAS, alpha_per_target=True).fit(xtr, targets), xtr, xte


def _scored(result, splits):
    """Decision values standardised within each test fold."""
    scored = result.decision.copy()
    for _, test in splits:
        scored[test] = (scored[test] - scored[test].mean(0)) / scored[test].std(0)
    return scored


def test_planted_concepts_are_decoded_and_the_unrelated_one_is_not() -> None:
    X, labels = _planted()
    splits = list(KFold(6, shuffle=True, random_state=0).split(X))
    result = decode_concepts(X, labels, ["dog", "face", "noise"], splits, n_permutations=300)
    assert result.decoder == "ridge" and result.alpha.shape == (6, 3)
    assert result.auc[:2].min() > 0.95, result.auc
    assert result.auc_p[:2].max() < 0.01 and result.average_precision_p[:2].max() < 0.01
    assert result.average_precision[:2].min() > result.chance_average_precision[:2].max() + 0.2
    assert result.auc_p[2] > 0.05, result.auc_p  # nothing planted: no evidence
    assert result.map_p < 0.01 and result.null_map.shape == (300,)
    assert result.mean_average_precision == pytest.approx(np.mean(result.average_precision))
    # the scores are sklearn's on the decision values once standardised within each fold
    scored = _scored(result, splits)
    for j in range(3):
        assert result.auc[j] == pytest.approx(roc_auc_score(labels[:, j], scored[:, j]))
        assert result.average_precision[j] == pytest.approx(
            average_precision_score(labels[:, j], scored[:, j])
        )
    # fold by fold: RidgeCV's leave-one-out choice of penalty per concept, and
    # RidgeClassifier's decision function with it, on the training-standardised patterns
    for f, (train, test) in enumerate(splits):
        cv, xtr, xte = _ridgecv_fold(X, labels, train, test)
        np.testing.assert_array_equal(result.alpha[f], cv.alpha_)
        for j in range(3):
            model = RidgeClassifier(alpha=result.alpha[f, j]).fit(xtr, labels[train, j])
            np.testing.assert_allclose(
                result.decision[test, j], model.decision_function(xte), rtol=1e-9, atol=1e-10
            )


def test_wide_patterns_equal_sklearn_ridge(rng: np.random.Generator) -> None:
    """More voxels than stimuli, a constant voxel and a concept absent from a training
    fold: the same decision values as RidgeClassifier."""
    X = rng.standard_normal((29, 83))
    X[:, 5] = 3.0
    labels = rng.random((29, 2)) < 0.4
    labels[:, 1] = False
    labels[[0, 1], 1] = True
    splits = list(KFold(3).split(X))  # stimuli 0 and 1 are held out together
    result = decode_concepts(X, labels, ["a", "b"], splits, alphas=[3.0], n_permutations=0)
    assert np.isnan(result.map_p) and result.null_map.size == 0
    for train, test in splits:
        scaler = StandardScaler().fit(X[train])
        for j in range(2):
            y = labels[train, j]
            if not y.any():  # nothing to learn: the intercept alone, -1 everywhere
                np.testing.assert_allclose(result.decision[test, j], -1.0)
                continue
            model = RidgeClassifier(alpha=3.0).fit(scaler.transform(X[train]), y)
            np.testing.assert_allclose(
                result.decision[test, j],
                model.decision_function(scaler.transform(X[test])),
                rtol=1e-9,
                atol=1e-10,
            )


@pytest.mark.parametrize("decoder", ["ridge", "logistic"])
def test_null_refits_the_decoders_on_every_relabelling(decoder: str) -> None:
    """Each null value is the score of the whole cross-validation rerun on relabelled
    stimuli, penalty choice included."""
    X, labels = _planted(seed=5, n_stimuli=41, n_voxels=13)
    splits = list(KFold(4, shuffle=True, random_state=1).split(X))
    order = np.random.default_rng(2).permutation(41)
    kw = {"decoder": decoder, "order": order}
    n_perm = 6 if decoder == "ridge" else 2  # logistic: 12 fits per relabelling
    result = decode_concepts(X, labels, list("abc"), splits, n_permutations=n_perm, seed=3, **kw)
    perms = _relabellings(splits, 41, n_perm, 3, order, None)
    for i, perm in enumerate(perms):
        again = decode_concepts(X, labels[perm], list("abc"), splits, n_permutations=0, **kw)
        assert result.null_map[i] == pytest.approx(again.mean_average_precision, abs=1e-12)
        assert result.null_mean_auc[i] == pytest.approx(again.mean_auc, abs=1e-12)
    # the former logistic decoder, fold by fold
    if decoder == "logistic":
        assert np.isnan(result.alpha).all()
        for train, test in splits:
            for j in range(3):
                model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
                model.fit(X[train], labels[train, j])
                np.testing.assert_allclose(
                    result.decision[test, j],
                    model.decision_function(X[test]),
                    rtol=1e-6,
                    atol=1e-8,
                )


def test_without_brain_information_scores_sit_at_chance() -> None:
    """Pure noise, 10 data sets: mean AUC about 0.5 and few significant mAPs."""
    aucs, pvalues = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X, labels = rng.standard_normal((80, 20)), rng.random((80, 4)) < 0.4
        splits = list(KFold(5, shuffle=True, random_state=seed).split(X))
        result = decode_concepts(X, labels, list("abcd"), splits, n_permutations=100, seed=seed)
        aucs.append(result.mean_auc)
        pvalues.append(result.map_p)
    assert abs(np.mean(aucs) - 0.5) < 0.04, aucs
    assert sum(p < 0.05 for p in pvalues) <= 2, pvalues


def test_bad_inputs_name_what_was_expected(rng: np.random.Generator) -> None:
    X, labels = rng.standard_normal((12, 5)), rng.random((12, 2)) < 0.5
    splits = list(KFold(3).split(X))
    with pytest.raises(ValueError, match=r"must agree, got \(12, 5\) and \(11, 2\)"):
        decode_concepts(X, labels[:11], ["a", "b"], splits)
    with pytest.raises(ValueError, match="must name the 2 label columns, got 3"):
        decode_concepts(X, labels, ["a", "b", "c"], splits)
    with pytest.raises(ValueError, match="every stimulus out exactly once"):
        decode_concepts(X, labels, ["a", "b"], splits[:2])
    broken = X.copy()
    broken[2, 3] = np.nan
    with pytest.raises(ValueError, match="`X` must be finite"):
        decode_concepts(broken, labels, ["a", "b"], splits)
    with pytest.raises(ValueError, match="`decoder` must be one of ridge, logistic, got 'svm'"):
        decode_concepts(X, labels, ["a", "b"], splits, decoder="svm")
    with pytest.raises(ValueError, match=r"`alphas` must be positive penalties, got \[1.0, 0.0\]"):
        decode_concepts(X, labels, ["a", "b"], splits, alphas=[1.0, 0.0])
    with pytest.raises(ValueError, match="`C` must be positive, got -1"):
        decode_concepts(X, labels, ["a", "b"], splits, decoder="logistic", C=-1)


def test_wide_patterns_choose_ridgecv_penalties(rng: np.random.Generator) -> None:
    """More voxels than training stimuli (the singular basis spans the targets): each
    fold's leave-one-out penalty per concept is RidgeCV's, and so is its decision."""
    X = rng.standard_normal((41, 120))
    labels = rng.random((41, 4)) < np.array([0.3, 0.5, 0.4, 0.25])
    X[:, :3] += 1.5 * labels[:, :3]  # three concepts leave a trace, of unequal strength
    splits = list(KFold(4, shuffle=True, random_state=1).split(X))
    result = decode_concepts(X, labels, list("abcd"), splits, n_permutations=0)
    for f, (train, test) in enumerate(splits):
        cv, _, xte = _ridgecv_fold(X, labels, train, test)
        np.testing.assert_array_equal(result.alpha[f], cv.alpha_)
        np.testing.assert_allclose(result.decision[test], cv.predict(xte), rtol=1e-9, atol=1e-10)
    assert len(set(result.alpha.ravel())) > 1  # the choice is not one penalty everywhere

"""Multi-label concept decoding: scores equal scikit-learn's, planted concepts are found."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from neuroflow.decoding.concepts import (
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


def test_planted_concepts_are_decoded_and_the_unrelated_one_is_not() -> None:
    X, labels = _planted()
    splits = list(KFold(6, shuffle=True, random_state=0).split(X))
    result = decode_concepts(X, labels, ["dog", "face", "noise"], splits, n_permutations=300)
    assert result.auc[:2].min() > 0.8, result.auc
    assert result.auc_p[:2].max() < 0.01 and result.average_precision_p[:2].max() < 0.01
    assert result.average_precision[:2].min() > result.chance_average_precision[:2].max() + 0.2
    assert result.auc_p[2] > 0.05, result.auc_p  # nothing planted: no evidence
    assert result.map_p < 0.01
    assert result.mean_average_precision == pytest.approx(np.mean(result.average_precision))
    # the held-out decision values are scikit-learn's pipeline, fold by fold, and the
    # scores are sklearn's on them once standardised within each fold
    scored = result.decision.copy()
    for _, test in splits:
        scored[test] = (scored[test] - scored[test].mean(0)) / scored[test].std(0)
    for j in range(3):
        assert result.auc[j] == pytest.approx(roc_auc_score(labels[:, j], scored[:, j]))
        assert result.average_precision[j] == pytest.approx(
            average_precision_score(labels[:, j], scored[:, j])
        )
    for train, test in splits:
        for j in range(3):
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
            model.fit(X[train], labels[train, j])
            np.testing.assert_allclose(
                result.decision[test, j], model.decision_function(X[test]), rtol=1e-6, atol=1e-8
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

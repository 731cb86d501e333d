"""Leave-one-subject-out decoding and Euclidean alignment on subjects with their own mixing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ortho_group

from neuroflow.decoding.cross_subject import (
    cross_subject_scores,
    euclidean_alignment,
    leave_one_subject_out,
    whole_epoch_classifier,
)

N_CHANNELS, N_TIMES = 9, 23
WINDOW = slice(8, 15)


def _subjects(seed: int = 0, n_trials=(60, 48, 54, 66), gain: float = 1.0):
    """A shared planted effect in source space, seen through each subject's own mixing.

    Each subject's channels are a symmetric positive-definite mixture of the sources
    (random rotation, log-normal gains), the kind of difference Euclidean alignment
    undoes; class 1 adds one source pattern in ``WINDOW``.
    """
    rng = np.random.default_rng(seed)
    pattern = rng.standard_normal(N_CHANNELS)
    pattern *= gain / np.linalg.norm(pattern) * 2.0
    epochs, labels = {}, {}
    for s, n in enumerate(n_trials):
        rotation = ortho_group.rvs(N_CHANNELS, random_state=seed * 10 + s)
        mixing = (rotation * np.exp(rng.normal(0, 1.0, N_CHANNELS))) @ rotation.T
        y = np.arange(n) % 2
        sources = rng.standard_normal((n, N_CHANNELS, N_TIMES))
        sources[y == 1, :, WINDOW] += pattern[:, None]
        epochs[f"{s + 1:02d}"] = np.einsum("cd,edt->ect", mixing, sources)
        labels[f"{s + 1:02d}"] = np.where(y == 1, "face", "house")
    return epochs, labels


def test_alignment_whitens_each_subject(rng: np.random.Generator) -> None:
    mixing = rng.standard_normal((5, 5)) + 3 * np.eye(5)
    epochs = np.einsum("cd,edt->ect", mixing, rng.standard_normal((40, 5, 17)))
    aligned, reference = euclidean_alignment(epochs)
    mean_cov = np.einsum("ect,edt->cd", aligned, aligned) / (40 * 17)
    np.testing.assert_allclose(mean_cov, np.eye(5), atol=1e-10)
    np.testing.assert_allclose(
        reference, np.mean([x @ x.T / 17 for x in epochs], axis=0), rtol=1e-12
    )


def test_leave_one_subject_out_splits() -> None:
    splits = leave_one_subject_out(["b", "a", "b", "c", "a"])
    assert [test.tolist() for _, test in splits] == [[1, 4], [0, 2], [3]]
    for train, test in splits:
        assert set(train).isdisjoint(test) and len(train) + len(test) == 5


def test_alignment_carries_the_shared_effect_to_unseen_subjects() -> None:
    epochs, labels = _subjects()
    raw = cross_subject_scores(epochs, labels, classifier="sliding", align=False)
    aligned = cross_subject_scores(epochs, labels, classifier="sliding", align=True)
    assert set(aligned) == {"01", "02", "03", "04"}
    assert all(v.shape == (N_TIMES,) for v in aligned.values())
    in_window = np.array([v[WINDOW].mean() for v in aligned.values()])
    outside = np.array([np.r_[v[:6], v[17:]].mean() for v in aligned.values()])
    assert in_window.min() > 0.75, in_window  # every held-out subject, above chance
    assert abs(outside.mean() - 0.5) < 0.06, outside  # chance where nothing is planted
    gain = in_window.mean() - np.mean([v[WINDOW].mean() for v in raw.values()])
    assert gain > 0.1, gain


def test_whole_epoch_lda_is_sklearns_leave_one_group_out() -> None:
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.model_selection import LeaveOneGroupOut
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    epochs, labels = _subjects(seed=1, n_trials=(30, 36, 42))
    ours = cross_subject_scores(epochs, labels, classifier="epoch_lda", align=True)
    X = np.concatenate([euclidean_alignment(epochs[s])[0] for s in sorted(epochs)])
    X = X.reshape(len(X), -1)
    y = np.concatenate([labels[s] for s in sorted(epochs)])
    groups = np.repeat(sorted(epochs), [len(labels[s]) for s in sorted(epochs)])
    for train, test in LeaveOneGroupOut().split(X, y, groups):
        model = make_pipeline(
            StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
        ).fit(X[train], y[train])
        expected = balanced_accuracy_score(y[test], model.predict(X[test]))
        assert float(ours[groups[test][0]]) == pytest.approx(expected, abs=1e-12)
    assert min(float(v) for v in ours.values()) > 0.7


def test_tangent_space_classifier_decodes_unseen_subjects() -> None:
    epochs, labels = _subjects(seed=2, gain=2.0)
    scores = cross_subject_scores(epochs, labels, classifier="tangent_space", align=True)
    assert all(v.shape == () for v in scores.values())
    assert min(float(v) for v in scores.values()) > 0.7, scores


def test_bad_inputs_name_what_was_expected(rng: np.random.Generator) -> None:
    epochs, labels = _subjects(n_trials=(20, 20))
    with pytest.raises(ValueError, match="`classifier` must be one of sliding, epoch_lda"):
        cross_subject_scores(epochs, labels, classifier="svm")
    with pytest.raises(ValueError, match="must name the same subjects"):
        cross_subject_scores(epochs, {"01": labels["01"]})
    with pytest.raises(ValueError, match=r"`labels\['02'\]` must have shape \(20,\)"):
        cross_subject_scores(epochs, {**labels, "02": labels["02"][:5]})
    with pytest.raises(ValueError, match="share one channel set and time grid"):
        cross_subject_scores({**epochs, "02": epochs["02"][:, :4]}, labels)
    with pytest.raises(ValueError, match="at least 2 subjects"):
        cross_subject_scores({"01": epochs["01"]}, {"01": labels["01"]})
    broken = epochs["01"].copy()
    broken[3, 2, 5] = np.nan
    with pytest.raises(ValueError, match=r"`epochs\['01'\]` must be finite"):
        cross_subject_scores({**epochs, "01": broken}, labels)
    # an average reference leaves one null direction: alignment cannot whiten it
    referenced = epochs["01"] - epochs["01"].mean(axis=1, keepdims=True)
    with pytest.raises(ValueError, match="must be full rank to align them, got 1 null"):
        euclidean_alignment(referenced)
    with pytest.raises(ValueError, match="must be one of sliding, epoch_lda, tangent_space"):
        whole_epoch_classifier("sliding_svm")

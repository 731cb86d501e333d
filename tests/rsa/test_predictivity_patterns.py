"""ROI × ROI patterns from linear predictivity, the per-ROI criterion and the TOST."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr
from scipy.stats import t as t_dist
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from neuroflow.rsa.analysis import upper_triangle
from neuroflow.rsa.predictivity_patterns import (
    DEFAULT_ALPHAS,
    brain_predictivity_pattern,
    cross_roi_predictivity,
    encoding_equivalence,
    model_profile_pattern,
    relational_criterion_per_roi,
    subject_predictivity_patterns,
)

# Six ROIs on an uneven hierarchy axis, with uneven voxel counts; six latent components
# sit at the same positions and every ROI loads on the components near it.
POSITIONS = np.array([0.0, 0.7, 1.9, 2.4, 3.8, 5.0])
N_VOXELS = (30, 45, 25, 50, 35, 40)
N_STIMULI = 90


def _loadings(sigma: float = 1.0) -> np.ndarray:
    """Unit-norm loading of every ROI (row) on every latent component (column)."""
    a = np.exp(-((POSITIONS[:, None] - POSITIONS[None, :]) ** 2) / (2 * sigma**2))
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _dataset(seed: int = 0, n_subjects: int = 4, dim: int = 3, noise: float = 1.0):
    """Responses (subject, ROI) -> (n_stimuli, n_voxels) and the planted ROI × ROI pattern.

    Subjects share the stimuli's latent components and differ in their voxel mixing
    and noise; the planted pattern is the cosine between the ROIs' loading vectors
    (how much latent signal two ROIs share).
    """
    rng = np.random.default_rng(seed)
    a = _loadings()
    latents = rng.standard_normal((len(POSITIONS), N_STIMULI, dim))
    subjects = []
    for _ in range(n_subjects):
        rois = []
        for i, n_vox in enumerate(N_VOXELS):
            signal = sum(
                a[i, k] * latents[k] @ rng.standard_normal((dim, n_vox))
                for k in range(len(POSITIONS))
            )
            rois.append(signal + noise * rng.standard_normal((N_STIMULI, n_vox)))
        subjects.append(rois)
    return subjects, a @ a.T


@pytest.fixture(scope="module")
def planted():
    subjects, pattern = _dataset()
    patterns, group = subject_predictivity_patterns(subjects)
    return subjects, pattern, patterns, group


def test_brain_pattern_recovers_the_planted_structure(planted) -> None:
    _, pattern, patterns, group = planted
    assert patterns.shape == (4, 6, 6) and group.shape == (6, 6)
    np.testing.assert_allclose(group, patterns.mean(axis=0))
    np.testing.assert_allclose(patterns, np.swapaxes(patterns, 1, 2))  # symmetrised
    np.testing.assert_array_equal(np.diagonal(patterns, axis1=1, axis2=2), 1.0)
    truth = upper_triangle(pattern)
    rho_group = spearmanr(upper_triangle(group), truth).statistic
    rho_subjects = [spearmanr(upper_triangle(p), truth).statistic for p in patterns]
    assert rho_group >= 0.9, rho_group
    assert min(rho_subjects) >= 0.9, rho_subjects


def _direct(x: np.ndarray, y: np.ndarray, groups: np.ndarray, **ridge) -> float:
    """Mean r of sklearn's own grouped cross_val_predict with z-scoring and RidgeCV."""
    est = make_pipeline(StandardScaler(), RidgeCV(alphas=DEFAULT_ALPHAS, **ridge))
    pred = cross_val_predict(est, x, y, cv=GroupKFold(n_splits=5), groups=groups)
    return float(np.mean([np.corrcoef(y[:, v], pred[:, v])[0, 1] for v in range(y.shape[1])]))


@pytest.mark.parametrize("alpha_per_target", [False, True])
def test_cross_roi_predictivity_matches_sklearn(planted, alpha_per_target: bool) -> None:
    subjects = planted[0]
    rng = np.random.default_rng(3)
    groups = rng.permutation(np.repeat(np.arange(N_STIMULI // 3), 3))  # each stimulus 3 times
    x, y = subjects[1][2], subjects[1][3]
    ours = cross_roi_predictivity(x, y, groups=groups, alpha_per_target=alpha_per_target)
    direct = _direct(x, y, groups, alpha_per_target=alpha_per_target)
    np.testing.assert_allclose(ours, direct, rtol=1e-10)
    assert 0.2 < ours < 1


def test_pattern_orientation_and_symmetrisation(planted) -> None:
    rois = [r[:, :12] for r in planted[0][2][:3]]
    groups = np.arange(N_STIMULI) % 17  # uneven groups of stimuli
    kw = {"groups": groups, "n_splits": 4}
    directed = brain_predictivity_pattern(rois, symmetric=False, **kw)
    # row: target ROI, column: predictor ROI
    assert directed[0, 2] == pytest.approx(cross_roi_predictivity(rois[2], rois[0], **kw))
    assert directed[2, 0] == pytest.approx(cross_roi_predictivity(rois[0], rois[2], **kw))
    assert directed[0, 2] != pytest.approx(directed[2, 0])
    sym = brain_predictivity_pattern(rois, **kw)
    np.testing.assert_allclose(sym, (directed + directed.T) / 2)


def test_no_shared_signal_gives_the_pooled_fold_offset() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((81, 7)), rng.standard_normal((81, 60))
    r = cross_roi_predictivity(x, y, n_splits=5)
    assert r == pytest.approx(-np.sqrt(4 / 80), abs=0.06)


def test_model_profile_pattern_definition() -> None:
    scores = np.array([0.31, 0.05, 0.44, 0.2, 0.12])
    pattern = model_profile_pattern(scores)
    assert pattern.shape == (5, 5)
    np.testing.assert_array_equal(np.diag(pattern), 1.0)
    np.testing.assert_allclose(pattern, pattern.T)
    assert pattern[0, 2] == pytest.approx(1 - 0.13)
    assert pattern[1, 3] == pytest.approx(1 - 0.15)


def _ramp_models(c: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Score profiles that follow the hierarchy in the early or in the late ROIs only.

    A hierarchy's ideal profile changes in step with the ROIs' positions (so that
    ``1 - |s_i - s_j|`` falls with their distance, as the brain pattern does); model A
    follows it in ROIs 0-2 and is flat after, model B is flat before ROI 3 and follows
    it from there.
    """
    early = np.arange(6) < 3
    model_a = np.where(early, 0.7 - c * POSITIONS, 0.7 - c * POSITIONS[2])
    model_b = np.where(early, 0.1, 0.1 + c * (POSITIONS - POSITIONS[3]))
    return model_a, model_b


def test_criterion_ranks_the_model_planted_in_each_roi(planted) -> None:
    patterns = planted[2]
    model_a, model_b = _ramp_models()
    crit_a = relational_criterion_per_roi(model_profile_pattern(model_a), patterns, 500, 7)
    crit_b = relational_criterion_per_roi(model_profile_pattern(model_b), patterns, 500, 7)
    for roi in (0, 1):  # A planted
        assert crit_a.ci[0, roi] > crit_b.ci[1, roi], (crit_a.ci, crit_b.ci)
        assert (crit_a.subject[:, roi] > crit_b.subject[:, roi]).all()
    for roi in (4, 5):  # B planted
        assert crit_b.ci[0, roi] > crit_a.ci[1, roi], (crit_a.ci, crit_b.ci)
        assert (crit_b.subject[:, roi] > crit_a.subject[:, roi]).all()


def test_criterion_by_hand_and_bootstrap_seed() -> None:
    rng = np.random.default_rng(11)
    model = model_profile_pattern(rng.uniform(0, 0.5, 5))
    brain = rng.uniform(-0.2, 0.8, (7, 5, 5))
    brain[2, 1, 3] = np.nan  # a missing entry is left out of its row's mean
    crit = relational_criterion_per_roi(model, brain, 300, 4)
    assert crit.subject.shape == (7, 5) and crit.ci.shape == (2, 5)
    others = [0, 2, 4]
    expected = 1 - np.mean(np.abs(model[1, others] - brain[2, 1, others]))
    assert crit.subject[2, 1] == pytest.approx(expected)
    expected = 1 - np.mean(np.abs(model[4, :4] - brain[5, 4, :4]))
    assert crit.subject[5, 4] == pytest.approx(expected)
    np.testing.assert_allclose(crit.mean, crit.subject.mean(axis=0))
    assert ((crit.ci[0] <= crit.mean) & (crit.mean <= crit.ci[1])).all()
    again = relational_criterion_per_roi(model, brain, 300, 4)
    np.testing.assert_array_equal(again.ci, crit.ci)
    other = relational_criterion_per_roi(model, brain, 300, 5)
    assert not np.array_equal(other.ci, crit.ci)


def _subject_baseline(subjects) -> np.ndarray:
    """Each subject's ROI predicted from the previous subject's voxels of that ROI."""
    return np.array(
        [
            [cross_roi_predictivity(subjects[s - 1][r], roi) for r, roi in enumerate(rois)]
            for s, rois in enumerate(subjects)
        ]
    )


def test_encoding_equivalence_only_where_planted(planted) -> None:
    baseline = _subject_baseline(planted[0])
    assert baseline.shape == (4, 6) and (baseline > 0.3).all(), baseline
    rng = np.random.default_rng(9)
    # ROIs 1 and 4: equal to the baseline; 0 and 2 fall short of it; 3 and 5 exceed it
    shift = np.array([-0.2, 0.0, -0.12, 0.15, 0.0, 0.25])
    model = baseline + shift + rng.normal(0, 0.005, baseline.shape)
    result = encoding_equivalence(model, baseline, margin=0.05)
    np.testing.assert_array_equal(result.equivalent[0], shift == 0)
    assert result.p_equivalent.shape == (1, 6)
    assert result.p_equivalent[0, [1, 4]].max() < 0.01, result.p_equivalent
    assert result.p_equivalent[0, [0, 2, 3, 5]].min() > 0.5, result.p_equivalent
    d = (model - baseline)[:, 1]
    se = d.std(ddof=1) / 2
    p_low = t_dist.sf((d.mean() + 0.05) / se, 3)
    p_high = t_dist.cdf((d.mean() - 0.05) / se, 3)
    assert result.p_equivalent[0, 1] == pytest.approx(max(p_low, p_high), rel=1e-10)
    # default margin: the between-subject SD of the baseline; several models at once
    short = baseline - 0.2 + rng.normal(0, 0.005, baseline.shape)
    both = encoding_equivalence(np.stack([model, short]), baseline)
    np.testing.assert_allclose(both.margin, baseline.std(axis=0, ddof=1))
    assert both.p_equivalent.shape == (2, 6)
    np.testing.assert_array_equal(both.equivalent[0], shift == 0)
    assert not both.equivalent[1].any()
    np.testing.assert_allclose(both.difference[1], -0.2, atol=0.01)


def test_clear_errors_for_bad_shapes() -> None:
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((20, 4)), rng.standard_normal((19, 3))
    with pytest.raises(ValueError, match=r"must hold the same stimuli \(rows\), got 20 and 19"):
        cross_roi_predictivity(x, y)
    with pytest.raises(ValueError, match=r"`groups` must have shape \(20,\)"):
        cross_roi_predictivity(x, x, groups=np.arange(19))
    with pytest.raises(ValueError, match=r"`responses_a` must have shape \(n_stimuli >= 3"):
        cross_roi_predictivity(x[:, 0], x)
    flat = x.copy()
    flat[:, 2] = 1.0
    with pytest.raises(ValueError, match=r"constant voxels \[2\]"):
        cross_roi_predictivity(x, flat)
    with pytest.raises(ValueError, match="same n_stimuli"):
        brain_predictivity_pattern([x, y])
    with pytest.raises(ValueError, match="at least 2 ROIs"):
        brain_predictivity_pattern([x])
    with pytest.raises(ValueError, match=r"same number of ROIs for every subject, got \[2, 3\]"):
        subject_predictivity_patterns([[x, x], [x, x, x]])
    with pytest.raises(ValueError, match=r"`scores` must have shape \(n_rois,\)"):
        model_profile_pattern(np.ones((2, 3)))
    with pytest.raises(ValueError, match="`scores` must be finite"):
        model_profile_pattern([0.1, np.nan, 0.2])
    model = model_profile_pattern([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match=r"`brain_patterns` must have shape \(n_subjects, 3, 3\)"):
        relational_criterion_per_roi(model, rng.random((4, 4, 4)))
    with pytest.raises(ValueError, match=r"`model_pattern` must have shape \(n_rois, n_rois\)"):
        relational_criterion_per_roi(model[:2], rng.random((4, 3, 3)))
    with pytest.raises(ValueError, match="`n_boot` must be a positive int"):
        relational_criterion_per_roi(model, rng.random((4, 3, 3)), n_boot=0)
    with pytest.raises(ValueError, match=r"must share \(n_subjects, n_rois\), got \(5, 3\)"):
        encoding_equivalence(rng.random((5, 3)), rng.random((4, 3)))
    with pytest.raises(ValueError, match="at least 3 subjects"):
        encoding_equivalence(rng.random((2, 3)), rng.random((2, 3)))
    with pytest.raises(ValueError, match=r"`margin` must be a float or one value per ROI \(3\)"):
        encoding_equivalence(rng.random((4, 3)), rng.random((4, 3)), margin=[0.1, 0.2])
    with pytest.raises(ValueError, match="`margin` must be positive"):
        encoding_equivalence(rng.random((4, 3)), rng.random((4, 3)), margin=0.0)

"""Subject-as-model baseline and the equivalence test of models against it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.stats import t as t_dist

from neuroflow.rsa.compare import noise_ceiling
from neuroflow.rsa.equivalence import subject_model_equivalence, tost_paired


def test_tost_by_hand(rng: np.random.Generator) -> None:
    d = rng.normal(0.02, 0.05, size=(11, 3))
    margin = np.array([0.1, 0.05, 0.01])
    p_eq, p_diff = tost_paired(d, margin)
    n, mean, se = 11, d.mean(axis=0), d.std(axis=0, ddof=1) / np.sqrt(11)
    p_low = t_dist.sf((mean + margin) / se, n - 1)  # H0: mean <= -margin
    p_high = t_dist.cdf((mean - margin) / se, n - 1)  # H0: mean >= +margin
    np.testing.assert_allclose(p_eq, np.maximum(p_low, p_high), rtol=1e-10)
    np.testing.assert_allclose(p_diff, 2 * t_dist.sf(np.abs(mean / se), n - 1), rtol=1e-10)


def _brains(seed: int = 0, n_subjects: int = 12, n_stimuli: int = 20, noise=(1.0, 2.5)):
    """Two ROIs with their own planted geometry; subjects add their own noise."""
    rng = np.random.default_rng(seed)
    truths = [rng.standard_normal((n_stimuli, 5)) for _ in noise]
    rdms = np.stack(
        [
            [
                pdist(t + sd * rng.standard_normal(t.shape))
                for t, sd in zip(truths, noise, strict=True)
            ]
            for _ in range(n_subjects)
        ]
    )
    return rdms, truths, rng


@pytest.mark.parametrize("method", ["spearman", "corr"])
def test_baseline_is_the_lower_noise_ceiling(method: str) -> None:
    rdms, truths, _ = _brains(seed=1, n_subjects=5, n_stimuli=14)
    result = subject_model_equivalence(rdms, pdist(truths[0])[None], method=method)
    for r in range(2):
        lower, _ = noise_ceiling(rdms[:, r], method=method)
        assert result.subject_scores[:, r].mean() == pytest.approx(lower, rel=1e-10)


def test_a_brain_like_model_is_equivalent_and_a_random_one_is_not() -> None:
    rdms, truths, rng = _brains()
    n = truths[0].shape[0]
    # a model as noisy as the pooled others of ROI 0; one with no geometry in common
    brain_like = pdist(truths[0] + rng.standard_normal(truths[0].shape) / np.sqrt(11))
    unrelated = pdist(rng.standard_normal((n, 5)))
    result = subject_model_equivalence(rdms, np.stack([brain_like, unrelated]))
    assert result.model_scores.shape == (2, 12, 2)
    assert result.equivalent[0, 0], (result.difference, result.p_equivalent, result.margin)
    assert not result.equivalent[1].any()
    assert result.difference[1, 0] < -0.2 and result.difference[1].max() < 0
    assert result.p_different[1, 0] < 1e-3
    assert np.all(result.margin > 0)


def test_bad_inputs_name_what_was_expected(rng: np.random.Generator) -> None:
    rdms = rng.random((4, 2, 10))
    with pytest.raises(ValueError, match="at least 3 subjects for a subject baseline, got 2"):
        subject_model_equivalence(rdms[:2], rng.random((1, 10)))
    with pytest.raises(ValueError, match=r"must share n_pairs, got \(4, 2, 10\) and \(1, 6\)"):
        subject_model_equivalence(rdms, rng.random((1, 6)))
    with pytest.raises(ValueError, match="`method` must be one of"):
        subject_model_equivalence(rdms, rng.random((1, 10)), method="euclid")
    with pytest.raises(ValueError, match="`margin` must be positive"):
        tost_paired(rng.random((5, 2)), 0.0)
    with pytest.raises(ValueError, match="at least 2 pairs"):
        tost_paired(rng.random((1, 2)), 0.1)

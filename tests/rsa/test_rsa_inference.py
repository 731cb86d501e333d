"""Bootstrap inference on model-RDM comparisons equals rsatoolbox's on shared samples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import pdist

from neuroflow.rsa.inference import (
    bootstrap_confidence_interval,
    bootstrap_pair_pvalues,
    bootstrap_rsa,
    draw_bootstrap_samples,
    resampled_pairs,
)
from neuroflow.rsa.rdm import square_rdm


def _fixture(rng: np.random.Generator, n_stimuli: int = 13, n_subjects: int = 5):
    """Subjects' RDMs around one planted geometry; a true, a weak and a null model."""
    truth = rng.standard_normal((n_stimuli, 4))
    data = np.stack(
        [pdist(truth + 0.8 * rng.standard_normal(truth.shape)) for _ in range(n_subjects)]
    )
    models = np.stack(
        [
            pdist(truth),
            pdist(truth[:, :2] + 0.5 * rng.standard_normal((n_stimuli, 2))),
            pdist(rng.standard_normal((n_stimuli, 4))),
        ]
    )
    return models, data


def test_resampled_pairs_are_the_pairs_rsatoolbox_keeps(rng: np.random.Generator) -> None:
    from rsatoolbox.rdm import RDMs

    n = 7
    vector = rng.standard_normal(n * (n - 1) // 2)
    sample = np.array([0, 2, 2, 3, 5, 5, 5])
    ours = vector[resampled_pairs(sample, n)]
    theirs = RDMs(vector[None]).subsample_pattern("index", sample).get_vectors()[0]
    np.testing.assert_array_equal(ours, theirs[~np.isnan(theirs)])
    # the same positions as indexing the square matrix
    square = square_rdm(vector)
    p, q = np.triu_indices(sample.size, k=1)
    keep = sample[p] != sample[q]
    np.testing.assert_array_equal(ours, square[sample[p][keep], sample[q][keep]])


@pytest.mark.parametrize("over", ["stimuli", "subjects", "both"])
@pytest.mark.parametrize("method", ["spearman", "corr"])
def test_samples_ci_and_pvalues_equal_rsatoolbox(over: str, method: str) -> None:
    from rsatoolbox.inference import Result
    from rsatoolbox.model import ModelFixed
    from rsatoolbox.rdm import RDMs, compare
    from rsatoolbox.util.inference_util import bootstrap_pair_tests

    rng = np.random.default_rng(3)
    models, data = _fixture(rng)
    n_boot = 60
    ours = bootstrap_rsa(models, data, method=method, over=over, n_bootstraps=n_boot, seed=11)
    subjects, stimuli = draw_bootstrap_samples(
        np.random.default_rng(11), data.shape[0], 13, n_boot, over
    )
    theirs = np.empty((n_boot, models.shape[0]))
    for b in range(n_boot):
        sample = RDMs(data).subsample("index", subjects[b]).subsample_pattern("index", stimuli[b])
        for m, model in enumerate(models):
            predicted = RDMs(model[None]).subsample_pattern("index", stimuli[b])
            theirs[b, m] = np.mean(compare(predicted, sample, method=method))
    np.testing.assert_allclose(ours.samples, theirs, rtol=1e-10, atol=1e-12)
    fixed = [ModelFixed(f"m{m}", RDMs(model[None])) for m, model in enumerate(models)]
    result = Result(fixed, theirs, method, "bootstrap", noise_ceiling=np.zeros(2))
    np.testing.assert_allclose(ours.ci, np.array(result.get_ci(0.95, test_type="bootstrap")))
    np.testing.assert_allclose(ours.pair_pvalues, bootstrap_pair_tests(theirs))
    expected = [np.mean(compare(RDMs(model[None]), RDMs(data), method=method)) for model in models]
    np.testing.assert_allclose(ours.evaluations, expected, rtol=1e-10)


def test_the_planted_model_wins_with_an_interval_above_zero() -> None:
    models, data = _fixture(np.random.default_rng(5), n_stimuli=17, n_subjects=6)
    result = bootstrap_rsa(models, data, n_bootstraps=300, seed=2)
    true_model, _, null_model = range(3)
    assert result.ci[0, true_model] > 0.2
    assert result.ci[0, null_model] < 0 < result.ci[1, null_model]
    assert result.pair_pvalues[true_model, null_model] < 0.01
    assert result.pair_pvalues[true_model, null_model] >= 1 / 300  # never 0
    assert np.all(np.diag(result.pair_pvalues) == 1)
    assert np.all(result.se > 0)


def test_samples_with_fewer_than_three_stimuli_are_left_out() -> None:
    rng = np.random.default_rng(8)
    models, data = rng.random((2, 3)), rng.random((4, 3))  # 3 stimuli
    result = bootstrap_rsa(models, data, over="stimuli", n_bootstraps=50, seed=1)
    _, stimuli = draw_bootstrap_samples(np.random.default_rng(1), 4, 3, 50, "stimuli")
    whole = np.array([np.unique(s).size == 3 for s in stimuli])
    assert 0 < whole.sum() < 50
    np.testing.assert_array_equal(np.isnan(result.samples).any(axis=1), ~whole)
    # every complete sample is the full stimulus set: it equals the evaluation
    np.testing.assert_allclose(result.samples[whole], np.tile(result.evaluations, (whole.sum(), 1)))


def test_interval_and_pvalues_by_hand() -> None:
    samples = np.array([[0.1, 0.3], [0.2, 0.1], [0.4, 0.5], [0.3, 0.2]])
    ci = bootstrap_confidence_interval(samples, level=0.5)
    framed = np.r_[-np.inf, np.sort(samples[:, 0]), np.inf]
    assert ci[0, 0] == pytest.approx(np.quantile(framed, 0.25))
    p = bootstrap_pair_pvalues(samples)
    # model 0 below model 1 in 2 of 4 samples: 2 * 0.5, shrunk to 3/4 * 1 + 1/4
    assert p[0, 1] == p[1, 0] == pytest.approx(1.0)


def test_bad_arguments_name_what_was_expected(rng: np.random.Generator) -> None:
    models, data = rng.random((2, 10)), rng.random((3, 10))
    with pytest.raises(ValueError, match="`over` must be one of stimuli, subjects, both"):
        bootstrap_rsa(models, data, over="runs")
    with pytest.raises(ValueError, match="`method` must be one of"):
        bootstrap_rsa(models, data, method="cosine")
    with pytest.raises(ValueError, match="same number of pairs, got 10 and 6"):
        bootstrap_rsa(models, rng.random((3, 6)))
    with pytest.raises(ValueError, match="at least 2 subjects to resample subjects"):
        bootstrap_rsa(models, data[:1], over="subjects")
    with pytest.raises(ValueError, match="`level` must be in"):
        bootstrap_confidence_interval(rng.random((5, 2)), level=95)
    with pytest.raises(ValueError, match="`n_bootstraps` must be at least 1"):
        draw_bootstrap_samples(rng, 3, 5, 0, "both")

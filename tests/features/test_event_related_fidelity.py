"""The event-related and movie alignment paths against oracles that know each voxel's exact HRF.

Datasets come from ``bench/bench_ranking_fidelity.py`` (its ``--small`` design): four
feature spaces of different temporal statistics (per-event image statistics, a
categorical code, a numeric modulator, a slowly varying embedding) drive four ROIs. The
pipeline is what ``features.alignment.method: auto`` resolves to for the design, fitted
like the encoding stage; the oracle fits every column of the space on its exact
regressors (the true HRF of each voxel) with the same ridge.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from bench_helpers import loaded_bench

from neuroflow.features.config import HRF_MODEL_NAMES, SHIFTED_HRF_MODELS, hrf_models
from neuroflow.features.design import EVENT_RELATED_HRF_LIBRARY
from neuroflow.features.resampling import hrf_weights
from neuroflow.models.delays import ENCODER_HRF_LIBRARY

#: Seeds whose datasets are averaged, as the bench averages its ``--seeds``.
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("bench_ranking_fidelity") as module:
        yield module


@pytest.fixture(scope="module")
def datasets(bench):
    """Per seed, the event-related design with SPM's HRF and with an HRF per voxel."""
    out = {}
    for seed in SEEDS:
        size = {"n_runs": 6, "n_volumes": 120, "seed": seed}
        canonical = bench.make_dataset("event_related", hrf="canonical", **size)
        mismatch = bench.make_dataset("event_related", hrf="mismatch", **size)
        bench.share_weights(mismatch, [canonical])
        assert mismatch.weights is canonical.weights  # the same events
        out[seed] = (canonical, mismatch)
    return out


def test_shifted_hrf_models_are_spm_moved_in_time():
    rng = np.random.default_rng(7)
    times = np.arange(37) * 1.5
    onsets = np.sort(rng.uniform(2.0, 40.0, 5))
    durations = rng.uniform(0.0, 2.0, 5)
    spm = hrf_weights(times, 1.5, onsets, durations, hrf_model="spm")
    for name, (model, shift) in SHIFTED_HRF_MODELS.items():
        moved = hrf_weights(times, 1.5, onsets + shift, durations, hrf_model=model)
        np.testing.assert_array_equal(
            hrf_weights(times, 1.5, onsets, durations, hrf_model=name), moved
        )
        assert name in HRF_MODEL_NAMES
    # an impulse's response peaks at the named time (0.1 s volumes)
    fine = np.arange(400) * 0.1
    for name, peak in (("spm peak 4 s", 4.0), ("spm", 5.0), ("spm peak 7 s", 7.0)):
        w = hrf_weights(fine, 0.1, np.array([3.0]), np.array([0.0]), hrf_model=name, oversampling=2)
        assert fine[np.argmax(w[:, 0])] - 3.0 == pytest.approx(peak, abs=0.11)
    assert not np.allclose(spm, hrf_weights(times, 1.5, onsets, durations, hrf_model="glover"))
    with pytest.raises(ValueError, match=r"`hrf_model` must be one of .*'spm peak 4 s'.*got"):
        hrf_weights(times, 1.5, onsets, durations, hrf_model="spm peak 5 s")
    with pytest.raises(ValueError, match=r"`hrf_model` must be one of .*got \['spm peak 5 s'\]"):
        hrf_models(["spm peak 5 s"])


def test_hrf_model_names_match_the_schema(repo_root):
    schema = yaml.safe_load(
        (repo_root / "workflow" / "schemas" / "features.schema.yaml").read_text()
    )
    assert tuple(schema["$defs"]["hrf_model_name"]["enum"]) == HRF_MODEL_NAMES
    assert hrf_models(EVENT_RELATED_HRF_LIBRARY) == EVENT_RELATED_HRF_LIBRARY


def test_every_feature_space_keeps_nine_tenths_of_its_oracle(bench, datasets):
    """SPM's HRF everywhere: every planted (space, ROI) pair reaches 0.9 of its oracle,
    the ratios differ by at most 0.1, and every ROI ranks the models as its oracle."""
    result = bench.summarise([bench.scores(ds, n_test=2) for ds, _ in datasets.values()])
    assert result["alignment"]["method"] == "hrf"
    assert result["alignment"]["hrf_model"] == EVENT_RELATED_HRF_LIBRARY
    shown = ~np.isnan(result["ratio"])
    # the four spaces are judged: each drives its own ROI
    assert shown[np.arange(4), np.arange(4)].all(), result["ratio"]
    assert result["lowest"] >= 0.9, result["ratio"]
    assert result["spread"] <= 0.1, result["ratio"]
    assert all(result["rank_equal"]), (result["pipeline"], result["oracle"])


def test_non_canonical_hrfs_keep_most_of_their_oracle(bench, datasets):
    """An HRF per voxel (peak 4-7 s, undershoots of every size): every planted pair keeps
    0.9 of the oracle that knows each voxel's HRF (the library [glover, spm] keeps 0.86
    of it on these datasets)."""
    result = bench.summarise([bench.scores(ds, n_test=2) for _, ds in datasets.values()])
    assert result["alignment"]["hrf_model"] == EVENT_RELATED_HRF_LIBRARY
    assert result["lowest"] >= 0.9, result["ratio"]
    assert result["spread"] <= 0.1, result["ratio"]
    assert all(result["rank_equal"]), (result["pipeline"], result["oracle"])


@pytest.fixture(scope="module")
def movies(bench):
    """Per HRF kind, two movies (contiguous shots, TR 1.5 s) of the bench's full size."""
    size = {"n_runs": 10, "n_volumes": 160}
    return {
        hrf: [bench.make_dataset("movie", hrf=hrf, seed=seed, **size) for seed in SEEDS]
        for hrf in ("canonical", "mismatch", "glover")
    }


@pytest.mark.slow
@pytest.mark.parametrize("hrf", ["canonical", "mismatch", "glover"])
def test_movie_path_keeps_nine_tenths_with_the_encoders_hrf_library(bench, movies, hrf):
    """Movies keep their path (features averaged within TRs, convolved by the encoder);
    the encoder's default HRF library, chosen per voxel, keeps every planted pair at 0.9
    of its oracle, where one canonical shape (Glover's) does not; where Glover's is the
    planted shape, the library costs little against it."""
    result = bench.summarise([bench.scores(ds, n_test=2) for ds in movies[hrf]])
    assert result["alignment"]["method"] == "average"
    assert result["alignment"]["encoder_hrf"] == list(ENCODER_HRF_LIBRARY)
    assert result["lowest"] >= 0.9, result["ratio"]
    assert result["spread"] <= 0.1, result["ratio"]
    assert all(result["rank_equal"]), (result["pipeline"], result["oracle"])
    glover = bench.summarise(
        [bench.scores(ds, n_test=2, hrf_model=["glover"]) for ds in movies[hrf]]
    )
    if hrf == "glover":
        assert glover["lowest"] - 0.05 <= result["lowest"], (glover["ratio"], result["ratio"])
    else:
        assert glover["lowest"] < 0.9 <= result["lowest"], glover["ratio"]


@pytest.mark.slow
def test_blocked_designs_take_the_event_related_path(bench):
    """Blocks of short images between rests: ``auto`` aligns each event as for an
    event-related design, and every planted pair keeps 0.9 of its oracle; averaged within
    TRs (the path of movies) the features' on/off pattern stands in for the response to
    every block and the modulator keeps a fraction of its oracle."""
    size = {"n_runs": 10, "n_volumes": 160}
    blocked = [bench.make_dataset("blocked", seed=seed, **size) for seed in SEEDS]
    kinds = {bench.classify_run(o, d, ds.tr).kind for ds in blocked for o, d in ds.timing}
    assert kinds == {"blocked"}
    result = bench.summarise([bench.scores(ds, n_test=2) for ds in blocked])
    assert result["alignment"]["method"] == "hrf"
    assert result["alignment"]["event_regressor"] is True
    assert result["lowest"] >= 0.9, result["ratio"]
    assert result["spread"] <= 0.1, result["ratio"]
    assert all(result["rank_equal"]), (result["pipeline"], result["oracle"])
    averaged = bench.summarise([bench.scores(ds, n_test=2, mode="average") for ds in blocked])
    assert averaged["alignment"]["method"] == "average"
    modulator = bench.SPACES.index("modulator")
    assert averaged["ratio"][modulator, modulator] < 0.5, averaged["ratio"]


def test_every_run_is_held_out_once_when_the_bench_scores_all_folds(bench, datasets):
    """``folds="all"``: folds of two runs (a shorter last one), each run held out once;
    the R² pool every fold's predictions, the planted OLS oracle's included."""
    assert bench.held_out_folds(6, 2, "all") == [[0, 1], [2, 3], [4, 5]]
    assert bench.held_out_folds(5, 2, "all") == [[0, 1], [2, 3], [4]]
    assert bench.held_out_folds(6, 2, "last") == [[4, 5]]
    with pytest.raises(ValueError, match="`folds` must be 'last' or 'all', got 'every'"):
        bench.held_out_folds(6, 2, "every")
    ds = datasets[SEEDS[0]][0]
    pooled = bench.scores(ds, n_test=2, folds="all")
    folds = bench.held_out_folds(len(ds.bold), 2, "all")
    y = np.concatenate(ds.bold)
    space = bench.SPACES.index("condition")
    pred = np.concatenate(
        [
            bench.oracle_predictions(
                ds,
                "condition",
                [r for r in range(len(ds.bold)) if r not in test],
                test,
                columns="planted",
                estimator="ols",
            )
            for test in folds
        ]
    )
    r2 = 1 - ((y - pred) ** 2).sum(0) / ((y - y.mean(0)) ** 2).sum(0)
    expected = [r2[ds.roi == k].mean() for k in range(4)]
    np.testing.assert_allclose(pooled["oracle_planted"][space], expected)
    last = bench.scores(ds, n_test=2)
    assert not np.allclose(pooled["oracle_planted"], last["oracle_planted"])

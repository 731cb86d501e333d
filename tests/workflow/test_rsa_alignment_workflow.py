"""RSA alignment patterns through ``snakemake`` on planted ROI × ROI structure.

Three subjects' single-trial betas (``dataset.source: betas``, per-subject atlases) in
five ROIs that mix three stimulus geometries with a known mixing matrix, one of them
the geometry of the image statistics the workflow extracts
(:func:`dataset_shapes.make_roi_geometry`). Through the whole workflow:

- the subjects' mean ROI × ROI alignment pattern matches the planted one, and no
  relabelling of the ROIs matches it as well;
- with 3 subjects the store compares the model with the subject-as-model baseline in
  every ROI, and the summary table has one ``baseline_difference`` row per ROI;
- the bootstrap interval of the model's similarity lies above 0 in the ROI that carries
  only the image statistics and contains 0 in the ROIs that carry none of them;
- the linear-predictivity patterns (``lp_*``) are stored and tabulated: the cross-ROI
  predictivity pattern recovers the planted structure, and the image statistics' encoding
  score is high only where they are planted (the two-model properties of the relational
  criterion and the TOST are checked on synthetic data in
  ``tests/rsa/test_predictivity_alignment.py``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from dataset_shapes import make_roi_geometry
from shape_helpers import open_stores, run_shape, summary_table

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def alignment_run(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The workflow run on the planted dataset, its facts, the RSA store and table."""
    root = tmp_path_factory.mktemp("roi_geometry")
    facts = make_roi_geometry(root / "bids", seed=0)
    config = {
        "dataset": {"source": "betas", "bids_root": str(root / "bids")},
        "preprocess_fmri": {
            "rois": {
                "atlas": "derivatives/rois/sub-{subject}_desc-rois_dseg.nii.gz",
                "labels": "derivatives/rois/rois.tsv",
            }
        },
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        # imported betas always feed trial encoding: one model, a few held-out images
        # (every image is repeated, so `repeated` would hold out all of them)
        "encoding": {
            "models": {"visual": {"feature_spaces": ["image_statistics"]}},
            "trial_split": {"test": facts["stimuli"][::6]},
        },
        "evaluation": {"permutation": {"n_permutations": 20}, "plots": {"enabled": False}},
        "decoding": {"enabled": False},
        "geometry": {"enabled": False},
        "predict": {"stimulus_sets": {}},
        # speed only: fewer resamples than the default 1,000
        "rsa": {"comparisons": ["spearman"], "bootstrap": {"n_bootstraps": 200}},
    }
    run = run_shape(root / "run", config)
    (store,) = open_stores(run, "rsa").values()
    return facts, store.load(), summary_table(run)


def _upper(matrix: np.ndarray) -> np.ndarray:
    """Entries above the diagonal, row by row."""
    i, j = np.triu_indices(matrix.shape[-1], k=1)
    return np.asarray(matrix)[..., i, j]


def _recovered_and_planted(facts: dict, store) -> tuple[np.ndarray, np.ndarray]:
    """Subject-mean ``roi_alignment`` and the planted pattern, both in the store's ROI order."""
    rois = [str(r) for r in store["roi_a"].values]
    assert rois == [str(r) for r in store["roi_b"].values]
    assert sorted(rois) == sorted(facts["roi_names"].values())
    where = {name: k for k, name in enumerate(facts["roi_names"].values())}
    idx = [where[r] for r in rois]
    planted = facts["planted"]["pattern"][np.ix_(idx, idx)]
    return store["roi_alignment"].values.mean(axis=0), planted


def test_alignment_pattern_matches_planted_structure(alignment_run):
    facts, store, _ = alignment_run
    assert [str(s) for s in store["subject"].values] == facts["subjects"]
    assert store.attrs["alignment_comparison"] == "spearman"
    assert store.sizes["pair"] == len(facts["stimuli"]) * (len(facts["stimuli"]) - 1) // 2
    # the model is the extractor's geometry of the images, which latent 1 reproduces
    model_rdm = store["model_rdm"].sel(layer=store["layer"].values[0]).values
    latent = facts["planted"]["latent_rdms"]["image_statistics"]
    assert np.corrcoef(model_rdm, latent)[0, 1] > 0.999
    recovered, planted = _recovered_and_planted(facts, store)
    np.testing.assert_allclose(np.diagonal(recovered), 1.0)
    truth = _upper(planted)
    r = np.corrcoef(_upper(recovered), truth)[0, 1]
    assert r > 0.9, (r, recovered.round(2), planted.round(2))
    for k, subject in enumerate(facts["subjects"]):
        one = np.corrcoef(_upper(store["roi_alignment"].values[k]), truth)[0, 1]
        assert one > 0.75, (subject, one)
    # relabelling the ROIs: every other assignment of the planted pattern agrees worse
    n = planted.shape[0]
    relabelled = np.array(
        [
            np.corrcoef(_upper(recovered), _upper(planted[np.ix_(perm, perm)]))[0, 1]
            for perm in itertools.permutations(range(n))
            if perm != tuple(range(n))
        ]
    )
    assert relabelled.max() < r - 0.05, (r, relabelled.max())
    assert relabelled.mean() < r - 0.5, (r, relabelled.mean())
    # the single-layer model claims one geometry everywhere: its pattern is all ones
    assert np.allclose(store["model_alignment"].values, 1.0)
    assert np.isfinite(store["alignment_agreement"].values).all()


def test_subject_baseline_with_three_subjects(alignment_run):
    facts, store, table = alignment_run
    rois = [str(r) for r in store["roi"].values]
    for name in ("subject_baseline", "baseline_difference", "baseline_equivalence_p"):
        assert name in store, name
    assert store["subject_baseline"].dims == ("subject", "roi")
    assert store["baseline_difference"].dims == ("layer", "roi")
    # every ROI carries planted structure that the other subjects share
    assert (store["subject_baseline"].values > 0.3).all(), store["subject_baseline"].values
    diff = store["baseline_difference"].to_series().droplevel("layer")
    p_eq = store["baseline_equivalence_p"].to_series().droplevel("layer")
    # where the image statistics are absent the model falls far below the baseline
    for roi in facts["planted"]["unrelated_rois"]:
        assert diff[roi] < -0.3 and p_eq[roi] > 0.5, (roi, diff[roi], p_eq[roi])
    assert diff["roi_a"] > diff[facts["planted"]["unrelated_rois"]].max() + 0.3
    rows = table[(table["analysis"] == "rsa") & (table["statistic"] == "baseline_difference")]
    assert sorted(rows["roi"]) == sorted(rois)
    assert (rows["subject"] == "group").all() and (rows["n_subjects"] == 3).all()
    assert (rows["metric"] == "spearman").all()
    by_roi = rows.set_index("roi")
    np.testing.assert_allclose(by_roi["value"][rois], diff[rois], rtol=1e-6)
    np.testing.assert_allclose(by_roi["p_value"][rois], p_eq[rois], rtol=1e-6)


def test_bootstrap_intervals_follow_the_planted_drive(alignment_run):
    facts, store, table = alignment_run
    assert store.attrs["bootstrap_over"] == "both" and store.attrs["n_bootstraps"] == 200
    assert store["model_similarity_ci"].dims == ("bound", "layer", "roi")
    rsa = table[table["analysis"] == "rsa"]
    lower = rsa[rsa["statistic"] == "bootstrap_ci_lower"].set_index("roi")["value"]
    upper = rsa[rsa["statistic"] == "bootstrap_ci_upper"].set_index("roi")["value"]
    mean = rsa[rsa["statistic"] == "value"].groupby("roi")["value"].mean()
    assert sorted(lower.index) == sorted(facts["roi_names"].values())
    upper, mean = upper.reindex(lower.index), mean.reindex(lower.index)
    intervals = pd.concat({"lower": lower, "mean": mean, "upper": upper}, axis=1)
    assert ((lower <= mean) & (mean <= upper)).all(), intervals
    # roi_a carries only the image statistics, roi_b them and another geometry; the
    # unrelated ROIs none of them
    assert lower["roi_a"] > 0.5, intervals
    for roi in facts["planted"]["image_rois"]:
        assert lower[roi] > 0.3, intervals
    for roi in facts["planted"]["unrelated_rois"]:
        assert lower[roi] < 0 < upper[roi], intervals


def test_linear_predictivity_patterns_in_store_and_table(alignment_run):
    facts, store, table = alignment_run
    rois = [str(r) for r in store["roi"].values]
    assert store.attrs["predictivity_patterns"] == "computed"
    expected = {
        "lp_model_score": ("subject", "layer", "roi"),
        "lp_model_profile": ("model", "roi"),
        "lp_model_pattern": ("model", "roi_a", "roi_b"),
        "lp_brain_pattern": ("subject", "roi_a", "roi_b"),
        "lp_brain_pattern_mean": ("roi_a", "roi_b"),
        "lp_criterion": ("model", "subject", "roi"),
        "lp_criterion_mean": ("model", "roi"),
        "lp_criterion_ci": ("bound", "model", "roi"),
        "lp_subject_baseline": ("subject", "roi"),
        "lp_baseline_difference": ("layer", "roi"),
        "lp_baseline_equivalence_p": ("layer", "roi"),
        "lp_equivalence_margin": ("roi",),
    }
    for name, dims in expected.items():
        assert store[name].dims == dims, name
        assert np.isfinite(store[name].values).all(), name
        assert store[name].attrs["long_name"] and store[name].attrs["units"], name
    np.testing.assert_allclose(
        store["lp_brain_pattern_mean"].values, store["lp_brain_pattern"].values.mean(axis=0)
    )
    _, planted = _recovered_and_planted(facts, store)
    # the cross-ROI predictivity pattern recovers the planted ROI x ROI structure too
    r = np.corrcoef(_upper(store["lp_brain_pattern_mean"].values), _upper(planted))[0, 1]
    assert r >= 0.9, (r, store["lp_brain_pattern_mean"].values.round(2), planted.round(2))
    # the image statistics predict the ROIs that carry them, not the unrelated ones
    score = store["lp_model_score"].mean("subject").to_series().droplevel("layer")
    image, unrelated = facts["planted"]["image_rois"], facts["planted"]["unrelated_rois"]
    assert score[image].min() > score[unrelated].max() + 0.3, score
    # and fall far short of the other subjects where they are absent
    p_eq = store["lp_baseline_equivalence_p"].to_series().droplevel("layer")
    assert (p_eq[unrelated] > 0.5).all(), p_eq
    # every ROI carries stimulus structure the other subjects share
    assert (store["lp_subject_baseline"].values > 0.2).all(), store["lp_subject_baseline"].values
    lp = table[table["analysis"] == "rsa_lp"]
    assert set(lp["metric"]) == {
        "encoding_r",
        "cross_roi_r",
        "profile_similarity",
        "relational_criterion",
    }
    assert np.isfinite(lp["value"].astype(float)).all()
    pairs = lp[(lp["metric"] == "cross_roi_r") & (lp["statistic"] == "mean")]
    assert len(pairs) == len(rois) * (len(rois) - 1) // 2
    tost = lp[lp["statistic"] == "baseline_difference"].set_index("roi")
    assert sorted(tost.index) == sorted(rois)
    diff = store["lp_baseline_difference"].to_series().droplevel("layer")
    p_eq = store["lp_baseline_equivalence_p"].to_series().droplevel("layer")
    np.testing.assert_allclose(tost["value"][rois], diff[rois], rtol=1e-6)
    np.testing.assert_allclose(tost["p_value"][rois], p_eq[rois], rtol=1e-6)
    crit = lp[(lp["metric"] == "relational_criterion") & (lp["subject"] == "group")]
    assert set(crit["statistic"]) == {"mean", "bootstrap_ci_lower", "bootstrap_ci_upper"}
    assert len(crit) == 3 * len(rois) * store.sizes["model"]

"""The linear-predictivity alignment outputs of the RSA stage on planted data.

Six ROIs on an uneven hierarchy axis load on six latent stimulus components near them
(uneven voxel counts); two models are planted with opposite ROI profiles: model
``early`` is the responses of pseudo-subjects' first ROI, model ``late`` those of the
last one, so each predicts its own ROI as well as the other subjects do and the far
ROIs poorly.
"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import pytest
import xarray as xr
import yaml

from neuroflow.evaluation.rsa_summary import rsa_lp_rows
from neuroflow.evaluation.summary import summary_table
from neuroflow.rsa.analysis import upper_triangle
from neuroflow.rsa.options import DEFAULT_CONFIG, resolve_config
from neuroflow.rsa.predictivity_patterns import (
    cross_roi_predictivity,
    model_encoding_scores,
    model_profiles,
    predictivity_alignment,
    subject_baseline_scores,
)
from neuroflow.rsa.stage import LP_DIMS
from neuroflow.variables import variable_description

POSITIONS = np.array([0.0, 0.8, 1.9, 2.6, 3.8, 5.0])
N_VOXELS = (30, 45, 25, 50, 35, 40)
N_STIMULI = 70
DIM = 3
ALPHAS = np.logspace(-2, 5, 8)
SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "rsa.schema.yaml"


def _planted(seed: int = 0, n_subjects: int = 4):
    """Responses (subject, ROI), two planted models' features and the ROI × ROI truth."""
    rng = np.random.default_rng(seed)
    a = np.exp(-((POSITIONS[:, None] - POSITIONS[None, :]) ** 2) / 2)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    latents = rng.standard_normal((len(POSITIONS), N_STIMULI, DIM))

    def responses(roi: int, n_vox: int) -> np.ndarray:
        signal = sum(
            a[roi, k] * latents[k] @ rng.standard_normal((DIM, n_vox))
            for k in range(len(POSITIONS))
        )
        return signal + rng.standard_normal((N_STIMULI, n_vox))

    subjects = [[responses(i, n) for i, n in enumerate(N_VOXELS)] for _ in range(n_subjects)]
    # as many pseudo-subjects as a subject's baseline has predictors (n_subjects - 1)
    early = np.hstack([responses(0, 30) for _ in range(n_subjects - 1)])
    late = np.hstack([responses(5, 28) for _ in range(n_subjects - 1)])
    return subjects, [early, late], a @ a.T


@pytest.fixture(scope="module")
def outputs():
    subjects, features, truth = _planted()
    out = predictivity_alignment(
        subjects,
        features,
        ["early", "late"],
        n_splits=5,
        alphas=ALPHAS,
        n_boot=500,
        seed=3,
        margin=0.05,
        alpha=0.05,
    )
    return subjects, features, truth, out


@pytest.mark.slow
def test_outputs_have_the_stored_shapes_and_descriptions(outputs) -> None:
    out = outputs[3]
    sizes = {"subject": 4, "layer": 2, "model": 2, "roi": 6, "roi_a": 6, "roi_b": 6, "bound": 2}
    assert set(out) == set(LP_DIMS)
    for name, value in out.items():
        assert value.shape == tuple(sizes[d] for d in LP_DIMS[name]), name
        assert np.isfinite(value).all(), name
        assert variable_description(name) is not None, name
    np.testing.assert_allclose(out["lp_brain_pattern_mean"], out["lp_brain_pattern"].mean(0))
    np.testing.assert_allclose(out["lp_criterion_mean"], out["lp_criterion"].mean(axis=1))
    lower, upper = out["lp_criterion_ci"]
    assert ((lower <= out["lp_criterion_mean"]) & (out["lp_criterion_mean"] <= upper)).all()
    # one layer per model: the profile is the subject-mean score
    np.testing.assert_allclose(out["lp_model_profile"], out["lp_model_score"].mean(axis=0))
    profile = out["lp_model_profile"][1]
    np.testing.assert_allclose(
        out["lp_model_pattern"][1], 1 - np.abs(profile[:, None] - profile[None, :])
    )


@pytest.mark.slow
def test_brain_pattern_recovers_the_planted_structure(outputs) -> None:
    _, _, truth, out = outputs
    r = np.corrcoef(upper_triangle(out["lp_brain_pattern_mean"]), upper_triangle(truth))[0, 1]
    assert r >= 0.9, r
    for k, pattern in enumerate(out["lp_brain_pattern"]):
        one = np.corrcoef(upper_triangle(pattern), upper_triangle(truth))[0, 1]
        assert one >= 0.85, (k, one)


@pytest.mark.slow
def test_criterion_ranks_the_model_planted_in_each_roi(outputs) -> None:
    out = outputs[3]
    crit, (lower, upper) = out["lp_criterion"], out["lp_criterion_ci"]
    # the planted ROIs: intervals apart, and every subject agrees
    assert lower[0, 0] > upper[1, 0], (lower, upper)
    assert lower[1, 5] > upper[0, 5], (lower, upper)
    # their neighbours too, subject by subject
    for roi in (0, 1):
        assert (crit[0, :, roi] > crit[1, :, roi]).all(), crit[:, :, roi]
    for roi in (4, 5):
        assert (crit[1, :, roi] > crit[0, :, roi]).all(), crit[:, :, roi]


@pytest.mark.slow
def test_tost_declares_equivalence_only_where_planted(outputs) -> None:
    out = outputs[3]
    p = out["lp_baseline_equivalence_p"]
    equivalent = p < 0.05
    planted = np.zeros((2, 6), dtype=bool)
    planted[0, 0] = planted[1, 5] = True
    np.testing.assert_array_equal(equivalent, planted, err_msg=str(p.round(3)))
    np.testing.assert_allclose(out["lp_equivalence_margin"], 0.05)
    diff = out["lp_model_score"] - out["lp_subject_baseline"][:, None]
    np.testing.assert_allclose(out["lp_baseline_difference"], diff.mean(axis=0))
    # far from its planted ROI a model falls well short of the other subjects
    assert out["lp_baseline_difference"][0, 5] < -0.5 and out["lp_baseline_difference"][1, 0] < -0.5


def test_scores_and_baseline_are_the_cross_validated_fits() -> None:
    rng = np.random.default_rng(5)
    subjects = [[rng.standard_normal((23, n)) for n in (7, 4, 9)] for _ in range(3)]
    layers = [rng.standard_normal((23, 6)), rng.standard_normal((23, 11))]
    scores = model_encoding_scores(subjects, layers, n_splits=4, alphas=ALPHAS)
    assert scores.shape == (3, 2, 3)
    assert scores[2, 1, 0] == pytest.approx(
        cross_roi_predictivity(layers[1], subjects[2][0], n_splits=4, alphas=ALPHAS)
    )
    baseline = subject_baseline_scores(subjects, n_splits=None, alphas=ALPHAS)
    predictor = np.hstack([subjects[0][2], subjects[2][2]])
    assert baseline.shape == (3, 3)
    assert baseline[1, 2] == pytest.approx(
        cross_roi_predictivity(predictor, subjects[1][2], n_splits=None, alphas=ALPHAS)
    )


def test_model_profile_is_the_best_layer_per_roi() -> None:
    scores = np.array(
        [
            [[0.1, 0.5, 0.2], [0.3, 0.1, 0.2], [0.9, 0.0, 0.1]],
            [[0.3, 0.3, 0.4], [0.1, 0.3, 0.0], [0.7, 0.2, 0.3]],
        ]
    )  # (subject, layer, roi); layers 0 and 1 belong to "b", layer 2 to "a"
    models, profiles = model_profiles(scores, ["b", "b", "a"])
    assert models == ["b", "a"]
    np.testing.assert_allclose(profiles, [[0.2, 0.4, 0.3], [0.8, 0.1, 0.2]])
    with pytest.raises(ValueError, match=r"`scores` must have shape \(n_subjects, 2, n_rois\)"):
        model_profiles(scores, ["a", "b"])


def test_clear_errors() -> None:
    rng = np.random.default_rng(1)
    one = [[rng.standard_normal((10, 3)), rng.standard_normal((10, 4))]]
    with pytest.raises(ValueError, match="at least 2 subjects for a subject baseline"):
        subject_baseline_scores(one)
    with pytest.raises(ValueError, match="the same 2\\+ ROIs each"):
        model_encoding_scores([[rng.standard_normal((10, 3))]], [rng.standard_normal((10, 2))])
    with pytest.raises(ValueError, match="the same n_stimuli"):
        model_encoding_scores(
            [[rng.standard_normal((10, 3)), rng.standard_normal((9, 3))]],
            [rng.standard_normal((10, 2))],
        )
    with pytest.raises(ValueError, match="`layer_features` must hold at least 1 layer"):
        model_encoding_scores(one, [])


@pytest.mark.parametrize(
    ("section", "match"),
    [
        ({"cv": 1}, r"`rsa.predictivity_patterns.cv` must be an integer >= 2 or null, got 1"),
        ({"alphas": []}, r"`rsa.predictivity_patterns.alphas` must be a non-empty list"),
        ({"alphas": [1.0, -2.0]}, r"`rsa.predictivity_patterns.alphas` must be a non-empty"),
        ({"n_boot": 0}, r"`rsa.predictivity_patterns.n_boot` must be a positive integer"),
        ({"alpha": 1.5}, r"`rsa.predictivity_patterns.alpha` must be in \(0, 1\)"),
        ({"equivalence_margin": 0}, r"`rsa.predictivity_patterns.equivalence_margin` must be"),
    ],
)
def test_config_errors(section: dict, match: str) -> None:
    assert (
        resolve_config({"predictivity_patterns": {"cv": None}})["predictivity_patterns"]["cv"]
        is None
    )
    with pytest.raises(ValueError, match=match):
        resolve_config({"predictivity_patterns": section})


def test_schema_mirrors_the_defaults_and_rejects_unknown_keys() -> None:
    schema = yaml.safe_load(SCHEMA.read_text())
    section = schema["properties"]["predictivity_patterns"]["properties"]
    assert {k: v["default"] for k, v in section.items()} == DEFAULT_CONFIG["predictivity_patterns"]
    assert all(v["description"] and "type" in v for v in section.values())
    jsonschema.validate({"predictivity_patterns": {"cv": None, "alphas": [0.5]}}, schema)
    for bad in ({"n_bootstrap": 10}, {"cv": 1}, {"alphas": []}, {"alpha": 1.0}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"predictivity_patterns": bad}, schema)


def _lp_store(symmetric: bool) -> xr.Dataset:
    """A small ``rsa_fmri`` store with ``lp_*`` variables (3 subjects, 2 layers, 3 ROIs)."""
    rng = np.random.default_rng(8)
    sizes = {"subject": 3, "layer": 2, "model": 1, "roi": 3, "roi_a": 3, "roi_b": 3, "bound": 2}
    data = {
        name: (dims, rng.uniform(0.1, 0.9, tuple(sizes[d] for d in dims)))
        for name, dims in LP_DIMS.items()
    }
    data["lp_model_score"][1][1, 1, 2] = np.nan  # one subject's score is missing
    rois = np.array(["v1", "v4", "it"], dtype=object)
    coords = {
        "subject": np.array(["01", "02", "03"], dtype=object),
        "layer": np.array(["cnn:conv1", "cnn:fc"], dtype=object),
        "model": np.array(["cnn"], dtype=object),
        "roi": rois,
        "roi_a": rois,
        "roi_b": rois,
        "bound": np.array(["lower", "upper"], dtype=object),
    }
    return xr.Dataset(data, coords=coords, attrs={"lp_symmetric": symmetric})


def test_summary_rows_of_the_predictivity_patterns() -> None:
    ds = _lp_store(symmetric=True)
    rows = summary_table([rsa_lp_rows(ds)])
    assert set(rows["analysis"]) == {"rsa_lp"}
    enc = rows[rows["metric"] == "encoding_r"]
    # 2 layers x 3 ROIs x (3 subjects + mean + TOST) + 3 x 3 subject baselines
    assert len(enc) == 2 * 3 * 5 + 9
    missing = enc[(enc["subject"] == "02") & (enc["roi"] == "it") & (enc["layer"] == "fc")]
    assert len(missing) == 1 and np.isnan(missing["value"].iloc[0])
    mean = enc[(enc["statistic"] == "mean") & (enc["roi"] == "it") & (enc["layer"] == "fc")]
    assert mean["n_subjects"].iloc[0] == 2
    expected = np.nanmean(ds["lp_model_score"].sel(layer="cnn:fc", roi="it").values)
    assert mean["value"].iloc[0] == pytest.approx(expected)
    tost = enc[enc["statistic"] == "baseline_difference"].set_index(["feature_space", "roi"])
    assert tost.loc[("cnn:conv1", "v4"), "p_value"] == pytest.approx(
        float(ds["lp_baseline_equivalence_p"].sel(layer="cnn:conv1", roi="v4"))
    )
    cross = rows[(rows["metric"] == "cross_roi_r") & (rows["statistic"] == "mean")]
    assert sorted(cross["roi"]) == ["v1 x it", "v1 x v4", "v4 x it"]
    pair = cross.set_index("roi").loc["v1 x it", "value"]
    assert pair == pytest.approx(ds["lp_brain_pattern"].values[:, 0, 2].mean())
    crit = rows[(rows["metric"] == "relational_criterion") & (rows["roi"] == "v4")]
    assert set(crit["model"]) == {"cnn"}
    by_stat = crit[crit["subject"] == "group"].set_index("statistic")["value"]
    assert by_stat["bootstrap_ci_upper"] == pytest.approx(
        float(ds["lp_criterion_ci"].sel(bound="upper", model="cnn", roi="v4"))
    )
    profile = rows[rows["metric"] == "profile_similarity"]
    assert len(profile) == 3 and (profile["subject"] == "group").all()
    # a non-symmetric pattern: every target x predictor pair
    asym = rsa_lp_rows(_lp_store(symmetric=False))
    cross = asym[(asym["metric"] == "cross_roi_r") & (asym["statistic"] == "mean")]
    assert len(cross) == 6 and "it x v1" in set(cross["roi"])
    # a store without them has no rows
    assert rsa_lp_rows(ds.drop_vars(list(LP_DIMS))).empty

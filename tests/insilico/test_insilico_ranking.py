"""Rankings of a stimulus pool, tail statistics and contact sheets."""

from __future__ import annotations

import numpy as np
import pytest
from figure_helpers import assert_png
from PIL import Image
from scipy.stats import spearmanr

from neuroflow.encoding.stored import encoder_dataset
from neuroflow.insilico import (
    contact_sheet,
    predict_pool,
    rank_stimuli,
    ranking_table,
    suppressive_to_excitatory_ratio,
    tail_statistics,
)


def _planted_encoder(rng, n_features=6):
    """Single-trial encoder: ROI A follows feature 0, ROI N ignores it."""
    n_a, n_n = 5, 4
    coef = np.zeros((n_features, n_a + n_n))
    coef[0, :n_a] = rng.uniform(1.0, 2.0, n_a)  # A: feature 0, plus a trace of the others
    coef[1:, :n_a] = 0.02 * rng.standard_normal((n_features - 1, n_a))
    coef[1:, n_a:] = rng.standard_normal((n_features - 1, n_n))  # N: zero on feature 0
    ds = encoder_dataset(
        coef=coef,
        spaces=["img"],
        n_features=[n_features],
        delays={"method": "none"},
        variants=["none"],
        design_mean=np.zeros((1, n_features)),
        feature_mean=rng.standard_normal((1, n_features)),
        feature_scale=rng.uniform(0.5, 2.0, (1, n_features)),
        target_mean=rng.standard_normal(n_a + n_n),
        units="beta",
    )
    ds = ds.assign_coords(roi=("voxel", np.array(["A"] * n_a + ["N"] * n_n, dtype=object)))
    ds.attrs["delays"] = {"method": "none"}
    return ds


def test_planted_feature_drives_the_ranking(rng):
    ds = _planted_encoder(rng)
    n = 503
    X = rng.standard_normal((n, 6))
    ids = [f"img{i:04d}.png" for i in range(n)]
    batches = [(ids[a : a + 97], {"img": X[a : a + 97]}) for a in range(0, n, 97)]
    pool = predict_pool(ds, batches, batch_size=50)
    assert pool.rois == ["A", "N"]
    a, noise = pool.roi_response[:, 0], pool.roi_response[:, 1]
    assert spearmanr(a, X[:, 0]).statistic > 0.99
    assert abs(spearmanr(noise, X[:, 0]).statistic) < 0.2
    k = 10
    ranking = rank_stimuli(a, pool.ids, k)
    by_feature = np.argsort(-X[:, 0])
    assert len(set(ranking.top) & {ids[i] for i in by_feature[:k]}) >= k - 2
    assert len(set(ranking.bottom) & {ids[i] for i in by_feature[-k:]}) >= k - 2
    assert np.all(np.diff(ranking.top_values) <= 0) and np.all(np.diff(ranking.bottom_values) >= 0)


def test_ranking_is_deterministic_and_breaks_ties_by_id(rng):
    values = np.array([1.0, 3.0, 3.0, 0.0, 3.0, 0.0, 2.0])
    ids = ["g", "c", "a", "z", "b", "y", "d"]
    ranking = rank_stimuli(values, ids, 3)
    assert ranking.top.tolist() == ["a", "b", "c"]
    assert ranking.bottom.tolist() == ["y", "z", "g"]
    np.testing.assert_array_equal(ranking.top_index, [2, 4, 1])
    order = rng.permutation(len(ids))
    shuffled = rank_stimuli(values[order], [ids[i] for i in order], 3)
    assert shuffled.top.tolist() == ranking.top.tolist()
    assert shuffled.bottom.tolist() == ranking.bottom.tolist()
    # a pool smaller than k gives all of it
    assert rank_stimuli(values[:2], ids[:2], 5).top.tolist() == ["c", "g"]


def test_ranking_errors():
    with pytest.raises(ValueError, match="k must be a positive int, got 0 instead"):
        rank_stimuli(np.ones(3), ["a", "b", "c"], 0)
    with pytest.raises(ValueError, match=r"ids must have one id per value \(3\), got 2"):
        rank_stimuli(np.ones(3), ["a", "b"], 1)
    with pytest.raises(ValueError, match="values must be finite, got 1 NaN"):
        rank_stimuli(np.array([1.0, np.nan]), ["a", "b"], 1)
    with pytest.raises(ValueError, match=r"responses\['V1'\] must be finite"):
        ranking_table({"V1": np.array([np.inf, 1.0])}, ["a", "b"], 1)
    with pytest.raises(ValueError, match=r"tail must be in \(0, 0.5\], got 0.7"):
        suppressive_to_excitatory_ratio(np.ones(4), 0.7)
    with pytest.raises(ValueError, match="values must be a non-empty 1-D array"):
        tail_statistics(np.ones((2, 2)))


def test_tail_statistics_on_known_distributions():
    rng = np.random.default_rng(11)
    expo = tail_statistics(rng.exponential(size=200_000))
    assert abs(expo["skewness"] - 2.0) < 0.1
    assert expo["tail_ratio"] < 0.3  # the excitatory tail is the long one
    for sample in (rng.standard_normal(200_000), rng.uniform(-1, 3, 200_000)):
        stats = tail_statistics(sample)
        assert abs(stats["tail_ratio"] - 1.0) < 0.05
        assert abs(stats["skewness"]) < 0.05
    # a long suppressive tail: ratio above 1
    assert suppressive_to_excitatory_ratio(-rng.exponential(size=20_000)) > 3.0
    small = tail_statistics(np.array([0.0, 1.0, 2.0, 10.0]), tail=0.25)
    # median 1.5; lowest 1: 1.5 below, highest 1: 8.5 above
    assert small["tail_ratio"] == pytest.approx(1.5 / 8.5)
    assert small["q0.5"] == pytest.approx(1.5) and small["n"] == 4
    constant = tail_statistics(np.full(5, 2.0))
    assert np.isnan(constant["skewness"]) and np.isnan(constant["tail_ratio"])


def test_ranking_table_layout(rng):
    ids = [f"s{i}" for i in range(9)]
    values = {"V1": rng.standard_normal(9), "FFA": np.arange(9.0)}
    table = ranking_table(values, ids, 2)
    assert list(table.columns) == ["roi", "rank", "direction", "stimulus", "predicted", "z"]
    assert len(table) == 2 * 2 * 2
    ffa = table[table["roi"] == "FFA"]
    assert ffa["stimulus"].tolist() == ["s8", "s7", "s0", "s1"]
    assert ffa["direction"].tolist() == ["top", "top", "bottom", "bottom"]
    assert ffa["rank"].tolist() == [1, 2, 1, 2]
    z = (np.arange(9.0) - 4.0) / np.arange(9.0).std()
    np.testing.assert_allclose(ffa["z"], z[[8, 7, 0, 1]])


def test_contact_sheet_survives_bad_files(tmp_path, rng):
    paths = []
    for i in range(4):
        pixels = (rng.uniform(0, 255, (40 + 7 * i, 30 + 5 * i, 3))).astype(np.uint8)
        path = tmp_path / f"stim{i}.png"
        Image.fromarray(pixels).save(path)
        paths.append(path)
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not an image")
    out = contact_sheet(
        [paths[0], tmp_path / "missing.png", paths[1]],
        [broken, paths[2], paths[3]],
        "V1: top and bottom",
        tmp_path / "sheets" / "V1.png",
        thumb=64,
        top_values=[3.0, 2.0, 1.0],
        bottom_values=[-3.0, -2.0, -1.0],
    )
    assert_png(out)
    with Image.open(out) as img:
        width, height = img.size
    assert width > height > 64
    # rows of unequal length, and sentences as text panels
    text = contact_sheet(
        ["A dog runs on the beach.", "Two people play chess in a park at night. " * 4],
        ["An empty room."],
        "language ROI",
        tmp_path / "text.png",
        kind="text",
    )
    assert_png(text)
    with pytest.raises(ValueError, match="kind must be 'image' or 'text', got 'audio'"):
        contact_sheet([], [], "x", tmp_path / "x.png", kind="audio")
    with pytest.raises(ValueError, match=r"top_values must have one value per stimulus \(1\)"):
        contact_sheet([paths[0]], [], "x", tmp_path / "x.png", top_values=[1.0, 2.0])

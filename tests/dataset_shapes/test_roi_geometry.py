"""The ROI-geometry generator: layout, determinism, and the planted ROI × ROI pattern.

The pattern is recovered here with plain numpy (cross-validated squared distances
between two presentations, Spearman between ROIs), so that the fixture cannot silently
lose the structure that the workflow test relies on.
"""

from __future__ import annotations

import itertools

import nibabel as nib
import numpy as np
import pandas as pd
import pytest

from dataset_shapes import make_roi_geometry
from dataset_shapes._common import digest
from dataset_shapes.roi_geometry import planted_pattern


@pytest.fixture(scope="module")
def geometry(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return make_roi_geometry(tmp_path_factory.mktemp("roi_geometry") / "bids", seed=0)


def _upper(matrix: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(matrix.shape[-1], k=1)
    return np.asarray(matrix)[..., i, j]


def _crossvalidated_rdms(facts: dict, sub: str) -> np.ndarray:
    """(roi, pair) RDMs: products of the first two presentations' pattern differences."""
    trials = pd.read_csv(facts["trials"][sub, "01"], sep="\t")
    betas = np.asarray(nib.load(facts["betas"][sub, "01"]).dataobj, dtype=np.float64)
    labels = facts["planted"]["labels"][sub]
    stims = trials["stim_file"].to_numpy()
    first = [np.flatnonzero(stims == s)[0] for s in facts["stimuli"]]
    second = [np.flatnonzero(stims == s)[1] for s in facts["stimuli"]]
    i, j = np.triu_indices(len(facts["stimuli"]), k=1)
    rdms = []
    for k in facts["roi_names"]:
        x = betas[labels == k].T  # (trial, voxel)
        # noise SD per voxel from the differences between the two presentations
        x = x / (x[first] - x[second]).std(axis=0)
        a, b = x[first], x[second]
        rdms.append(((a[i] - a[j]) * (b[i] - b[j])).sum(axis=1))
    return np.stack(rdms)


def test_layout(geometry):
    facts = geometry
    root = facts["root"]
    assert facts["subjects"] == ["01", "02", "03"]
    rois = pd.read_csv(facts["rois_tsv"], sep="\t")
    assert rois.to_dict("list") == {
        "index": [1, 2, 3, 4, 5],
        "name": ["roi_a", "roi_b", "roi_c", "roi_d", "roi_e"],
    }
    captions = pd.read_csv(root / "stimuli" / "captions.tsv", sep="\t")
    assert list(captions["stim_file"]) == facts["stimuli"]
    assert all((root / "stimuli" / s).is_file() for s in facts["stimuli"])
    for sub in facts["subjects"]:
        labels = np.asarray(nib.load(facts["rois"][sub]).dataobj)
        assert labels.shape == facts["grid_shape"][sub]
        np.testing.assert_array_equal(labels, facts["planted"]["labels"][sub])
        sizes = facts["roi_sizes"][sub]
        assert all(20 <= n <= 40 for n in sizes.values()), sizes
        assert (labels[facts["planted"]["brain"][sub]] == 0).any()  # unlabelled voxels
        trials = pd.read_csv(facts["trials"][sub, "01"], sep="\t")
        assert list(trials.columns) == ["stim_file", "trial_type", "run"]
        assert sorted(set(trials["run"])) == [1, 2, 3]
        counts = trials["stim_file"].value_counts()
        assert counts.to_dict() == facts["presentations"][sub]
        assert set(counts) == {2, 3} and set(counts.index) == set(facts["stimuli"])
        betas = nib.load(facts["betas"][sub, "01"])
        assert betas.shape == (*facts["grid_shape"][sub], len(trials))
        data = np.asarray(betas.dataobj)
        assert (data[~facts["planted"]["brain"][sub]] == 0).all()
    # every subject repeats its own images three times
    thrice = [frozenset(s for s, n in p.items() if n == 3) for p in facts["presentations"].values()]
    assert len(set(thrice)) == 3


def test_deterministic_per_seed(geometry, tmp_path):
    first = geometry["root"]
    again = make_roi_geometry(tmp_path / "again", seed=0)["root"]
    names = ["sub-02/ses-01/func/sub-02_ses-01_betas.nii.gz", "derivatives/rois/rois.tsv"]
    for name in [*names, f"stimuli/{geometry['stimuli'][0]}"]:
        assert digest(first / name) == digest(again / name), name
    other = make_roi_geometry(tmp_path / "other", seed=1)["root"]
    assert digest(first / names[0]) != digest(other / names[0])


def test_planted_pattern_is_recovered_and_has_no_symmetry(geometry):
    facts = geometry
    planted = facts["planted"]["pattern"]
    np.testing.assert_allclose(planted, planted.T)
    np.testing.assert_allclose(np.diagonal(planted), 1.0)
    assert facts["planted"]["image_rois"] == ["roi_a", "roi_b"]
    # ROIs that share a latent geometry are alike; ROIs that share none are not
    assert planted[0, 1] > 0.8 and planted[2, 4] > 0.8
    assert np.abs(planted[0, [2, 3, 4]]).max() < 0.15
    truth = _upper(planted)
    # no relabelling of the ROIs keeps the pattern (the mixing breaks its symmetries)
    relabelled = [
        np.corrcoef(truth, _upper(planted[np.ix_(p, p)]))[0, 1]
        for p in itertools.permutations(range(5))
        if p != tuple(range(5))
    ]
    assert max(relabelled) < 0.95, max(relabelled)
    patterns = np.stack(
        [planted_pattern(_crossvalidated_rdms(facts, sub)) for sub in facts["subjects"]]
    )
    for sub, pattern in zip(facts["subjects"], patterns, strict=True):
        assert np.corrcoef(_upper(pattern), truth)[0, 1] > 0.7, sub
    assert np.corrcoef(_upper(patterns.mean(axis=0)), truth)[0, 1] > 0.9

"""Significance options through ``snakemake`` on an fMRI movie (not the demo).

A movie shown once, with a planted blob that the image statistics drive: with
cluster inference and per-ROI family-wise control switched on, the score stores hold
the tail-approximated, exact, FDR, FWER and cluster p-values; the blob comes out as
one significant cluster and the rest of the brain does not.
"""

from __future__ import annotations

import numpy as np
import pytest
from dataset_shapes import make_fmri_movie
from shape_helpers import open_stores, run_shape

pytestmark = [pytest.mark.workflow, pytest.mark.slow]


def test_cluster_and_fwer_through_snakemake(tmp_path):
    facts = make_fmri_movie(tmp_path / "bids", seed=3, n_subjects=1, n_volumes=110, snr=1.5)
    config = {
        "dataset": {"source": "bids", "bids_root": str(tmp_path / "bids")},
        "features": {"extractors": [{"name": "image_statistics", "extractor": "image_statistics"}]},
        "encoding": {"models": {"visual": {"feature_spaces": ["image_statistics"]}}},
        "evaluation": {
            "permutation": {"n_permutations": 300, "tail": "gpd"},
            "fwer": {"family": "roi"},
            "cluster": {"enabled": True, "threshold": 3.1, "connectivity": 18},
        },
    }  # fmt: skip
    run_shape(tmp_path / "run", config)
    stores = open_stores(tmp_path / "run", "evaluation")
    assert len(stores) == 1
    (ds,) = stores.values()
    for name in ("p_value", "p_permutation", "p_fdr", "p_fwer", "p_cluster", "cluster_id"):
        assert ds[name].dims == ("voxel",), name
    assert ds.attrs["p_value_tail"] == "gpd" and ds.attrs["prewhiten_order"] == 2
    assert ds["p_fwer"].attrs["family"] == "roi"
    # tail p-values go below what 300 permutations can give
    assert float(ds["p_value"].min()) < 1 / 301
    ijk = np.stack([ds[c].values for c in ("i", "j", "k")], axis=1)
    blob = np.asarray(facts["planted"]["blob"]["01"])[ijk[:, 0], ijk[:, 1], ijk[:, 2]]
    significant = ds["significant_cluster"].values
    assert significant[blob].mean() > 0.5, significant[blob].mean()
    assert significant[~blob].mean() < 0.05
    assert ds["significant_fwer"].values[~blob].sum() <= 1
    assert ds["significant_fwer"].values[blob].any()

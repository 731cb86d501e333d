"""The README's faces-vs-scrambled recipe on a ds000117-like EEG run, through ``snakemake``.

The recording has ds000117's event columns (``stim_type`` ``Famous``, ``Unfamiliar`` and
``Scrambled``, no ``trial_type``) and a face negativity planted at 170 ms over P7/P8.
The recipe maps the three image types to two conditions and decodes them; the run
goes up to the decoding store (``--until decode_eeg``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from dataset_shapes.eeg_inputs import make_faces_eeg
from shape_helpers import run_shape

from neuroflow.artifacts import read_provenance

pytestmark = [pytest.mark.workflow, pytest.mark.slow]

#: The recipe, as the README gives it.
FACES_RECIPE = {
    "preprocess_eeg": {
        "event_column": "stim_type",
        "conditions": {"Famous": "face", "Unfamiliar": "face", "Scrambled": "scrambled"},
    },
    "decoding": {"classification": {"target": "condition"}},
}


def _config(bids: Path) -> dict:
    """The recipe, with the decoding parts that do not bear on the contrast off (speed)."""
    decoding = {
        **FACES_RECIPE["decoding"],
        "classification": {**FACES_RECIPE["decoding"]["classification"], "generalization": False},
        "features": {"enabled": False},
        "identification": {"enabled": False},
        "contrastive": {"enabled": False},
    }
    return {
        "dataset": {"source": "bids", "bids_root": str(bids)},
        "preprocess_eeg": FACES_RECIPE["preprocess_eeg"],
        "decoding": decoding,
    }


def test_faces_vs_scrambled_recipe_decodes_the_n170_through_the_workflow(tmp_path):
    """Above chance and significant at 150-200 ms, at chance before the image."""
    facts = make_faces_eeg(tmp_path / "bids", seed=4, n_trials=90)
    run = run_shape(tmp_path / "run", _config(tmp_path / "bids"), "--until", "decode_eeg")
    results = run / "results"
    (epochs,) = sorted((results / "preprocess_eeg").glob(f"*/sub-01/{facts['key']}_epo.zarr"))
    labels = [str(c) for c in xr.open_zarr(epochs)["condition"].values]
    assert labels == ["scrambled" if k == "Scrambled" else "face" for k in facts["stim_types"]]
    (store,) = sorted((results / "decoding").glob("*/decoding_eeg.zarr"))
    assert read_provenance(store)["stage"] == "decoding"
    ds = xr.open_zarr(store).sel(subject="01")
    assert float(ds["class_chance"]) == 0.5  # face vs scrambled, balanced accuracy
    assert not bool(ds["class_inconclusive"])
    times = ds["time"].values
    score = ds["class_score"].values
    p = ds["class_cluster_p"].values
    n170 = (times >= 0.15) & (times <= 0.2)
    before = times < 0
    assert n170.sum() >= 5 and before.sum() >= 10
    assert abs(score[before].mean() - 0.5) < 0.1, score[before]
    assert score[n170].mean() > 0.65, score[n170]
    peak = times[np.argmax(score)]
    assert abs(peak - facts["n170_latency"]) <= 0.03, peak
    # the stage's own label-permutation cluster test (99 permutations, conclusive at
    # 0.05): a significant cluster spans the N170 peak, none lies before the image
    alpha = ds.attrs["cluster_alpha"]
    assert np.all(p[(times >= 0.16) & (times <= 0.18)] <= alpha), p[n170]
    assert (p[n170] <= alpha).mean() >= 0.5, p[n170]
    assert not np.any(p[before] <= alpha), p[before]

"""sentence-transformers extractor on the packaged offline MiniLM."""

from __future__ import annotations

import numpy as np
import pytest
from features_helpers import minilm_path

from neuroflow.artifacts import open_dataset
from neuroflow.features.extract import extract_features

CAPTIONS = {
    "a.png": "A man is playing a guitar on stage.",
    "b.png": "Someone performs music with a guitar in front of an audience.",
    "c.png": "The stock market fell sharply on Tuesday.",
    "d.png": "A bowl of soup on a wooden table.",
    "e.png": "Two dogs run across a snowy field.",
    "f.png": "Heavy rain flooded the city streets.",
    "g.png": "A child reads a book under a tree.",
}


@pytest.fixture(scope="module")
def minilm_stores(tmp_path_factory):
    minilm_path()
    root = tmp_path_factory.mktemp("minilm")
    captions = root / "captions.tsv"
    lines = ["stim_file\tcaption"] + [f"{k}\t{v}" for k, v in CAPTIONS.items()]
    captions.write_text("\n".join(lines) + "\n")
    config = {
        "name": "minilm",
        "layers": ["embedding", {"depth": 0.5}, {"index": -1}],
        "batch_size": 3,
    }
    out = extract_features(
        stimuli_dir=root,
        stimulus_ids=list(CAPTIONS),
        captions=captions,
        output=root / "out",
        config=config,
        provenance={"stage": "extract_features"},
    )
    again = extract_features(
        stimuli_dir=root,
        stimulus_ids=list(CAPTIONS),
        captions=captions,
        output=root / "again",
        config={**config, "batch_size": 7},
        provenance={},
    )
    return out, again


def test_embedding_shape_and_determinism(minilm_stores):
    out, again = minilm_stores
    ds = open_dataset(out["embedding"])
    emb = ds["features"].values
    assert emb.shape == (7, 384)
    assert ds.attrs["modality"] == "text"  # inferred from the captions, not the .png ids
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(emb, open_dataset(again["embedding"])["features"].values, atol=1e-5)
    assert ds.attrs["model"] == "all-MiniLM-L6-v2"
    assert len(ds.attrs["weights_sha256"]) == 64


def test_paraphrases_are_closer_than_unrelated(minilm_stores):
    emb = open_dataset(minilm_stores[0]["embedding"])["features"].values
    cos = emb @ emb.T
    assert cos[0, 1] > 0.5
    assert cos[0, 1] > cos[0, 2] + 0.3
    assert cos[0, 1] > cos[1, 3]


def test_hidden_layers(minilm_stores):
    out, _ = minilm_stores
    mid = open_dataset(out["depth-0.5"])
    last = open_dataset(out["layer-minus1"])
    assert mid.attrs["layer_index"] == 3 and mid.attrs["n_blocks"] == 6
    assert last.attrs["layer_index"] == 6
    assert mid["features"].shape == (7, 384)
    # The model's own embedding is the normalised mean of the last layer's tokens.
    lastv = last["features"].values
    lastv = lastv / np.linalg.norm(lastv, axis=1, keepdims=True)
    np.testing.assert_allclose(
        lastv, open_dataset(out["embedding"])["features"].values, rtol=1e-4, atol=1e-5
    )


def test_sentence_transformer_rejects_random_weights(tmp_path):
    with pytest.raises(ValueError, match="`weights` must be 'pretrained' for sentence_transformer"):
        extract_features(
            stimuli_dir=tmp_path,
            stimulus_ids=["a"],
            captions={"a": "hello"},
            output=tmp_path / "o",
            config={"weights": "random", "model_config": {"model_type": "bert"}},
            provenance={},
        )

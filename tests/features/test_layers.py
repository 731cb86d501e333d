"""Layer selection by index or fraction of depth, and token pooling."""

from __future__ import annotations

import re

import pytest
import torch

from neuroflow.features.layers import layer_spec, pool, resolve_layer


@pytest.mark.parametrize(
    ("spec", "n_blocks", "expected"),
    [
        ({"depth": 0.5}, 12, 6),
        ({"depth": 0.75}, 12, 9),
        ({"depth": 1.0}, 12, 12),
        ({"depth": 1}, 12, 12),  # an int depth is still a fraction
        ({"depth": 0.0}, 12, 0),
        ({"depth": 0.75}, 6, 5),  # 4.5 rounds half up
        ({"depth": 0.5}, 7, 4),  # 3.5 rounds half up
        ({"depth": 0.25}, 6, 2),  # 1.5 rounds half up
        ({"index": 1}, 12, 1),
        ({"index": -1}, 9, 9),
        ({"index": -10}, 9, 0),
    ],
)
def test_resolve_layer(spec, n_blocks, expected):
    assert resolve_layer(spec, n_blocks) == expected


def test_resolve_layer_errors():
    with pytest.raises(ValueError, match="must lie in \\[-8, 7\\]"):
        resolve_layer({"index": 8}, 7)
    with pytest.raises(ValueError, match=r"fraction of depth in \[0, 1\], got 1\.25"):
        resolve_layer({"depth": 1.25}, 7)
    with pytest.raises(ValueError, match="`index` of a `layers` entry must be an int"):
        resolve_layer({"index": 1.0}, 7)
    with pytest.raises(ValueError, match="exactly one key, 'index'"):
        resolve_layer({"index": 1, "depth": 0.5}, 7)
    with pytest.raises(ValueError, match="must be \\{index: i\\} or \\{depth: f\\}, got 'x'"):
        resolve_layer("x", 7)
    with pytest.raises(TypeError, match="entries must be \\{index: i\\}, \\{depth: f\\} or a name"):
        resolve_layer(True, 7)


def test_bare_numbers_are_ambiguous():
    message = (
        "`layers` entry 1.0 is ambiguous: write {depth: 1.0} for a fraction of the depth or "
        "{index: 1} for block 1."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_layer(1.0, 12)
    with pytest.raises(ValueError, match=re.escape("entry 1 is ambiguous: write {depth: 1.0}")):
        layer_spec(1)
    with pytest.raises(
        ValueError, match=re.escape("write {depth: 0.5} for a fraction of the depth or {index: i}")
    ):
        layer_spec(0.5)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "{depth: f} (f in [0, 1]) for a fraction of the depth or {index: -2} for block -2"
        ),
    ):
        layer_spec(-2)
    assert layer_spec({"depth": 1}) == ("depth", 1.0)
    assert layer_spec({"index": -1}) == ("index", -1)
    assert layer_spec("features.3") == ("name", "features.3")


def test_pooling_methods():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 9, 7, generator=gen)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0
    torch.testing.assert_close(pool(hidden, "cls"), hidden[:, 0])
    torch.testing.assert_close(pool(hidden, "patch_mean", n_prefix=2), hidden[:, 2:].mean(1))
    mean = pool(hidden, "mean", attention_mask=mask)
    torch.testing.assert_close(mean[1], hidden[1, :6].mean(0))
    torch.testing.assert_close(mean[0], hidden[0].mean(0))
    last = pool(hidden, "last", attention_mask=mask)
    torch.testing.assert_close(last[1], hidden[1, 5])
    token_mask = torch.zeros(2, 9, dtype=torch.bool)
    token_mask[:, 3:5] = True
    torch.testing.assert_close(
        pool(hidden, "mean", attention_mask=mask, token_mask=token_mask), hidden[:, 3:5].mean(1)
    )


def test_pooling_feature_maps_and_errors():
    maps = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    torch.testing.assert_close(pool(maps, "mean"), maps.mean(dim=(2, 3)))
    with pytest.raises(ValueError, match="convolutional feature maps"):
        pool(maps, "cls")
    with pytest.raises(ValueError, match="`pooling` must be one of"):
        pool(maps, "max")

"""Layer selection by index or fraction of depth, and token pooling."""

from __future__ import annotations

import pytest
import torch

from neuroflow.features.layers import pool, resolve_layer


@pytest.mark.parametrize(
    ("spec", "n_blocks", "expected"),
    [
        (0.5, 12, 6),
        (0.75, 12, 9),
        (1.0, 12, 12),
        (0.0, 12, 0),
        (0.75, 6, 5),  # 4.5 rounds half up
        (0.5, 7, 4),  # 3.5 rounds half up
        (0.25, 6, 2),  # 1.5 rounds half up
        (1, 12, 1),  # an int is a block index, not a fraction
        (-1, 9, 9),
        (-10, 9, 0),
    ],
)
def test_resolve_layer(spec, n_blocks, expected):
    assert resolve_layer(spec, n_blocks) == expected


def test_resolve_layer_errors():
    with pytest.raises(ValueError, match="must lie in \\[-8, 7\\]"):
        resolve_layer(8, 7)
    with pytest.raises(ValueError, match="fraction of depth"):
        resolve_layer(1.25, 7)
    with pytest.raises(TypeError, match="int or a float"):
        resolve_layer(True, 7)


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

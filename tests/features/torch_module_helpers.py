"""Tiny PyTorch modules and builders for the torch_module extractor tests.

Entries name the builders as ``"torch_module_helpers:<function>"`` (this folder
is on the test path, see ``pyproject.toml``).
"""

from __future__ import annotations

import torch
from torch import nn


class TinyConvNet(nn.Module):
    """Two convolutions, a token projection and a linear head, with uneven widths."""

    def __init__(self, width: int = 4, n_classes: int = 5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width + 1, 3, stride=2),
            nn.ReLU(),
        )
        self.proj = nn.Linear(2 * width + 1, 6)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(2 * width + 1, n_classes)
        self.head_norm = nn.LayerNorm(n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = self.features(x)
        tokens = self.proj(maps.flatten(2).transpose(1, 2))
        logits = self.head(self.pool(maps).flatten(1))
        return self.head_norm(logits) + tokens.mean(1).sum(1, keepdim=True)


class TwoOutputs(nn.Module):
    """A :class:`TinyConvNet` returning its output and its pooled maps."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.net = TinyConvNet(width)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        maps = self.net.features(x)
        return self.net(x), maps.mean(dim=(2, 3))


def tiny_convnet(width: int = 4, n_classes: int = 5) -> TinyConvNet:
    """Builder of :class:`TinyConvNet`."""
    return TinyConvNet(width, n_classes)


def two_outputs(width: int = 4) -> TwoOutputs:
    """Builder of :class:`TwoOutputs`."""
    return TwoOutputs(width)


def not_a_module() -> int:
    """A builder returning something other than a module."""
    return 3


def trained_state(width: int = 4, seed: int = 7) -> dict[str, torch.Tensor]:
    """State dict of a :class:`TinyConvNet` initialised with another seed than the entry's."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return TinyConvNet(width).state_dict()

"""Layer selection and token pooling for transformer hidden states.

Hidden states follow Hugging Face's ``output_hidden_states=True`` convention: a
tuple of ``n_blocks + 1`` tensors, index 0 the embedding output and index ``i``
the output of block ``i``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["POOLINGS", "pool", "resolve_layer"]

#: Pooling methods over tokens (or spatial positions of convolutional maps).
POOLINGS = ("cls", "mean", "patch_mean", "last")


def resolve_layer(spec: int | float, n_blocks: int) -> int:
    """Index into the hidden states for one layer specification.

    Parameters
    ----------
    spec : int | float
        An ``int`` is a block index: 0 is the embedding output, ``i`` the output
        of block ``i``, negative values count from the end (-1 is the last
        block). A ``float`` in [0, 1] is a fraction of depth: block
        ``floor(spec * n_blocks + 0.5)`` (rounded half up, not to even), so with
        12 blocks 0.5, 0.75 and 1.0 pick blocks 6, 9 and 12, and with 6 blocks
        0.75 picks block 5 (4.5 rounded up); 0.0 picks the embedding output.
        Write fractions with a decimal point (``1.0``): ``1`` is block 1.
    n_blocks : int
        Number of blocks of the model.

    Returns
    -------
    index : int
        In ``[0, n_blocks]``.
    """
    if isinstance(spec, bool) or not isinstance(spec, int | float):
        raise TypeError(f"A layer must be an int or a float, got {spec!r} instead.")
    if isinstance(spec, float):
        if not 0.0 <= spec <= 1.0:
            raise ValueError(f"A fraction of depth must lie in [0, 1], got {spec} instead.")
        return math.floor(spec * n_blocks + 0.5)
    index = spec + n_blocks + 1 if spec < 0 else spec
    if not 0 <= index <= n_blocks:
        raise ValueError(
            f"A layer index must lie in [-{n_blocks + 1}, {n_blocks}] for a model with "
            f"{n_blocks} blocks, got {spec} instead."
        )
    return index


def pool(
    hidden: torch.Tensor,
    method: str,
    *,
    attention_mask: torch.Tensor | None = None,
    n_prefix: int = 1,
    token_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Pool one layer's hidden states to one vector per item.

    Parameters
    ----------
    hidden : Tensor, shape (n_batch, n_tokens, n_features) or (n_batch, C, H, W)
        Token sequences, or convolutional feature maps (pooled by a spatial mean
        whatever ``method`` is, except ``"cls"`` and ``"last"``, which fail).
    method : str
        ``"cls"`` (first token), ``"mean"`` (mean over valid tokens),
        ``"patch_mean"`` (spatial mean over patch tokens, i.e. without the
        ``n_prefix`` leading CLS/register tokens) or ``"last"`` (last valid
        token, for causal language models).
    attention_mask : Tensor, shape (n_batch, n_tokens) | None
        1 for real tokens, 0 for padding.
    n_prefix : int
        Leading non-patch tokens (CLS, distillation and register tokens).
    token_mask : Tensor, shape (n_batch, n_tokens) | None
        Restricts ``"mean"`` and ``"last"`` to these tokens (e.g. the target
        word after its context); defaults to ``attention_mask``.

    Returns
    -------
    pooled : Tensor, shape (n_batch, n_features)
        Float32.
    """
    if method not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}, got {method!r} instead.")
    hidden = hidden.float()
    if hidden.ndim == 4:
        if method in ("cls", "last"):
            raise ValueError(
                f"`pooling` must be 'mean' or 'patch_mean' for convolutional feature maps, got "
                f"{method!r} instead."
            )
        return hidden.mean(dim=(2, 3))
    if hidden.ndim != 3:
        raise ValueError(f"Hidden states must be 3-D or 4-D, got shape {tuple(hidden.shape)}.")
    if method == "cls":
        return hidden[:, 0]
    if method == "patch_mean":
        if hidden.shape[1] <= n_prefix:
            raise ValueError(
                f"`pooling: patch_mean` needs patch tokens after {n_prefix} prefix token(s), got "
                f"{hidden.shape[1]} tokens."
            )
        return hidden[:, n_prefix:].mean(dim=1)
    mask = token_mask if token_mask is not None else attention_mask
    if mask is None:
        mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
    mask = mask.to(hidden.device).bool()
    if method == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
    positions = torch.arange(hidden.shape[1], device=hidden.device).expand_as(mask)
    last = torch.where(mask, positions, torch.full_like(positions, -1)).max(dim=1).values
    last = last.clamp(min=0)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

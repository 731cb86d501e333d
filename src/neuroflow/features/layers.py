"""Layer selection and token pooling for transformer hidden states.

Hidden states follow Hugging Face's ``output_hidden_states=True`` convention: a
tuple of ``n_blocks + 1`` tensors, index 0 the embedding output and index ``i``
the output of block ``i``.

A ``layers`` entry is a mapping with one key, ``{index: i}`` (block index) or
``{depth: f}`` (fraction of depth), or a name (``"embedding"``, a module name);
bare numbers are refused, since ``1`` and ``1.0`` would otherwise pick
different blocks. Importing this module does not import torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = ["POOLINGS", "SELECTOR_KEYS", "layer_spec", "pool", "resolve_layer"]

#: Pooling methods over tokens (or spatial positions of convolutional maps).
POOLINGS = ("cls", "mean", "patch_mean", "last")
#: Keys of the mapping spelling of a ``layers`` entry.
SELECTOR_KEYS = ("index", "depth")


def _bare_number_message(spec: int | float) -> str:
    depth = (
        f"{{depth: {float(spec)}}} for a fraction of the depth"
        if 0.0 <= spec <= 1.0
        else "{depth: f} (f in [0, 1]) for a fraction of the depth"
    )
    index = (
        f"{{index: {int(spec)}}} for block {int(spec)}"
        if float(spec).is_integer()
        else "{index: i} for block i"
    )
    return f"`layers` entry {spec!r} is ambiguous: write {depth} or {index}."


def layer_spec(spec: Any) -> tuple[str, int | float | str]:
    """Kind and value of one ``layers`` entry.

    Parameters
    ----------
    spec : dict | str
        ``{"index": i}`` (int block index; 0 is the embedding output, negative
        values count from the end), ``{"depth": f}`` (fraction of depth in
        [0, 1]) or a non-empty name.

    Returns
    -------
    kind : str
        ``"index"``, ``"depth"`` or ``"name"``.
    value : int | float | str
        The index (int), the fraction (float) or the name (str).
    """
    if isinstance(spec, Mapping):
        if len(spec) != 1 or next(iter(spec)) not in SELECTOR_KEYS:
            raise ValueError(
                "A `layers` mapping must have exactly one key, 'index' (block index) or 'depth' "
                f"(fraction of depth), got {dict(spec)!r} instead."
            )
        key, value = next(iter(spec.items()))
        if key == "index":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(
                    f"`index` of a `layers` entry must be an int (block index), got {value!r} "
                    "instead; write {depth: f} for a fraction of the depth."
                )
            return "index", value
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0.0 <= float(value) <= 1.0
        ):
            raise ValueError(
                f"`depth` of a `layers` entry must be a fraction of depth in [0, 1], got "
                f"{value!r} instead."
            )
        return "depth", float(value)
    if isinstance(spec, str) and spec:
        return "name", spec
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        raise ValueError(_bare_number_message(spec))
    raise TypeError(
        f"`layers` entries must be {{index: i}}, {{depth: f}} or a name, got {spec!r} instead."
    )


def resolve_layer(spec: Mapping[str, int | float], n_blocks: int) -> int:
    """Index into the hidden states for one layer specification.

    Parameters
    ----------
    spec : dict
        ``{"index": i}``: block index, 0 the embedding output, ``i`` the output
        of block ``i``, negative values counting from the end (-1 is the last
        block). ``{"depth": f}``: fraction of depth in [0, 1], block
        ``floor(f * n_blocks + 0.5)`` (rounded half up, not to even), so with 12
        blocks 0.5, 0.75 and 1.0 pick blocks 6, 9 and 12, and with 6 blocks 0.75
        picks block 5 (4.5 rounded up); 0.0 picks the embedding output. Bare
        numbers are refused (see :func:`layer_spec`).
    n_blocks : int
        Number of blocks of the model.

    Returns
    -------
    index : int
        In ``[0, n_blocks]``.
    """
    kind, value = layer_spec(spec)
    if kind == "name":
        raise ValueError(
            f"A layer of a block model must be {{index: i}} or {{depth: f}}, got {spec!r} instead."
        )
    if kind == "depth":
        return math.floor(float(value) * n_blocks + 0.5)
    index = int(value) + n_blocks + 1 if int(value) < 0 else int(value)
    if not 0 <= index <= n_blocks:
        raise ValueError(
            f"A layer index must lie in [-{n_blocks + 1}, {n_blocks}] for a model with "
            f"{n_blocks} blocks, got {value} instead."
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
    import torch

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

"""Compute device and precision for the torch solvers.

Solvers take ``device`` and ``dtype`` arguments; when these are ``None`` they use the
current :func:`compute_context`, which a caller sets once around a block of work and
which is restored on exit, whatever happens inside.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

import lazy_loader

torch = lazy_loader.load("torch")

__all__ = [
    "ComputeContext",
    "compute_context",
    "current_context",
    "resolve_device",
    "resolve_dtype",
]

#: Accepted ``dtype`` names (attributes of ``torch``).
_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class ComputeContext:
    """Where and in which precision the solvers compute.

    Attributes
    ----------
    device : torch.device
        ``cpu`` or a ``cuda`` device.
    dtype : torch.dtype
        ``torch.float32`` or ``torch.float64``.
    """

    device: torch.device
    dtype: torch.dtype


_CONTEXT: contextvars.ContextVar[ComputeContext | None] = contextvars.ContextVar(
    "neuroflow_compute_context", default=None
)


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """Turn a device specification into a :class:`torch.device`.

    Parameters
    ----------
    device : str | torch.device | None
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``;
        ``None`` means the current context's device (``"auto"`` outside any context).

    Returns
    -------
    device : torch.device
        The resolved device.
    """
    if device is None:
        ctx = _CONTEXT.get()
        return ctx.device if ctx is not None else resolve_device("auto")
    if isinstance(device, torch.device):
        resolved = device
    elif not isinstance(device, str):
        raise TypeError(
            f"`device` must be a str or torch.device, got {type(device).__name__} instead."
        )
    elif device == "auto":
        resolved = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            resolved = torch.device(device)
        except RuntimeError as err:
            raise ValueError(
                f"`device` must be 'auto', 'cpu' or 'cuda', got {device!r} instead."
            ) from err
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"`device` must be 'auto', 'cpu' or 'cuda', got {device!r} instead.")
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` is {device!r} but CUDA is not available on this machine.")
    return resolved


def resolve_dtype(dtype: str | torch.dtype | None = "float32") -> torch.dtype:
    """Turn a precision specification into a :class:`torch.dtype`.

    Parameters
    ----------
    dtype : str | torch.dtype | None
        ``"float32"`` or ``"float64"``; ``None`` means the current context's dtype
        (``float32`` outside any context).

    Returns
    -------
    dtype : torch.dtype
        The resolved floating-point type.
    """
    if dtype is None:
        ctx = _CONTEXT.get()
        return ctx.dtype if ctx is not None else torch.float32
    if isinstance(dtype, torch.dtype) and dtype in (torch.float32, torch.float64):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise ValueError(f"`dtype` must be 'float32' or 'float64', got {dtype!r} instead.")


def current_context() -> ComputeContext:
    """The compute context in effect (``auto`` device, float32 when none is set)."""
    ctx = _CONTEXT.get()
    if ctx is not None:
        return ctx
    return ComputeContext(device=resolve_device("auto"), dtype=torch.float32)


@contextlib.contextmanager
def compute_context(
    device: str | torch.device = "auto", dtype: str | torch.dtype = "float32"
) -> Iterator[ComputeContext]:
    """Set the device and precision used by solvers called without explicit ones.

    Parameters
    ----------
    device : str | torch.device
        See :func:`resolve_device`.
    dtype : str | torch.dtype
        See :func:`resolve_dtype`.

    Yields
    ------
    context : ComputeContext
        The context in effect inside the block; the previous one is restored on exit.
    """
    ctx = ComputeContext(device=resolve_device(device), dtype=resolve_dtype(dtype))
    token = _CONTEXT.set(ctx)
    try:
        yield ctx
    finally:
        _CONTEXT.reset(token)

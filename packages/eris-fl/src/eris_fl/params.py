"""Flat views of a model's state: :func:`flatten` and :func:`assign` (a copy, never an alias)."""

from __future__ import annotations

import torch
from torch import nn


def state_tensors(
    module: nn.Module, trainable_only: bool = True, include_buffers: bool = True
) -> list[torch.Tensor]:
    """Return the tensors that make up the federated state, in a fixed order.

    Parameters come first (in ``module.parameters()`` order; only those with
    ``requires_grad`` when ``trainable_only``), then floating-point buffers such as
    BatchNorm running statistics (integer buffers like ``num_batches_tracked`` are local
    bookkeeping and are never averaged).

    Args:
        module: Any ``nn.Module``.
        trainable_only: Skip frozen parameters (e.g. a backbone under LoRA adapters).
        include_buffers: Include floating-point buffers.

    Returns:
        The tensors (the module's own storage, not copies).
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    tensors: list[torch.Tensor] = [
        p for p in module.parameters() if p.requires_grad or not trainable_only
    ]
    if include_buffers:
        tensors += [b for b in module.buffers() if torch.is_floating_point(b)]
    return tensors


def num_state(module: nn.Module, trainable_only: bool = True, include_buffers: bool = True) -> int:
    """Return ``d``, the length of :func:`flatten`'s vector."""
    return sum(t.numel() for t in state_tensors(module, trainable_only, include_buffers))


def flatten(
    module: nn.Module, trainable_only: bool = True, include_buffers: bool = True
) -> torch.Tensor:
    """Return the model state as one new 1-D tensor (detached copy).

    Args:
        module: Any ``nn.Module``.
        trainable_only: Only parameters with ``requires_grad``.
        include_buffers: Append floating-point buffers (BatchNorm statistics).

    Returns:
        A 1-D tensor on the module's device, of the parameters' dtype.

    Raises:
        ValueError: If the module has no state to flatten.
    """
    tensors = state_tensors(module, trainable_only, include_buffers)
    if not tensors:
        raise ValueError("module has no parameters or buffers to flatten")
    dtype = tensors[0].dtype
    return torch.cat([t.detach().reshape(-1).to(dtype) for t in tensors])


@torch.no_grad()
def assign(
    module: nn.Module,
    vec: torch.Tensor,
    trainable_only: bool = True,
    include_buffers: bool = True,
) -> None:
    """Copy ``vec`` into the module's parameters/buffers (the inverse of :func:`flatten`).

    Unlike ``torch.nn.utils.vector_to_parameters``, which makes the parameters *views* of
    ``vec`` (so training the module afterwards silently overwrites ``vec``), this copies.

    Args:
        module: The module to write into.
        vec: 1-D tensor of length :func:`num_state`.
        trainable_only: Must match the :func:`flatten` call that produced ``vec``.
        include_buffers: Must match the :func:`flatten` call that produced ``vec``.

    Raises:
        TypeError: If ``vec`` is not a tensor.
        ValueError: If ``vec`` is not 1-D or has the wrong length.
    """
    if not isinstance(vec, torch.Tensor):
        raise TypeError(f"vec must be a torch.Tensor, got {type(vec).__name__}")
    tensors = state_tensors(module, trainable_only, include_buffers)
    d = sum(t.numel() for t in tensors)
    if vec.dim() != 1 or vec.numel() != d:
        raise ValueError(f"vec must be 1-D of length {d} (the model size), got {tuple(vec.shape)}")
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(vec[offset : offset + n].view_as(t))
        offset += n
